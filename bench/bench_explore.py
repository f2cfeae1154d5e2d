"""explore() benchmark: seconds to outline 1 MB and 10 MB texts of each kind, beside
references measured on the same texts in the same run.

Workloads (generated, deterministic):
  json     one object: {"meta": {...}, "items": [{id, name, score, tags, addr{city, zip}}, ...]}
  jsonl    one event object per line
  csv      5 columns (int, text, float, date, text) with a header
  log      ISO-timestamped lines, ~0.1% ERROR and ~1% WARN
  code     Python functions and classes (parsed with ast up to 1 MB, by patterns above)
  text     plain prose lines

References:
  count_nl     ``text.count("\\n")``: one C-speed pass, the floor for anything linear;
  json_loads   ``json.loads(text)`` for the JSON workload: what parsing everything costs.

Also shown: the kind detected, whether explore() sampled, and the summary's tokens.

Run:  python bench/bench_explore.py [--sizes 1,10] [--repeats 3] [--json]
"""

from __future__ import annotations

import argparse
import functools
import json
import random
import time
from collections.abc import Callable
from typing import Any

from lossless.context.explore import explore
from lossless.core.tokens import get_counter

MB = 1_000_000


def _json(size: int, rnd: random.Random) -> str:
    items = [{"id": i, "name": f"user {i}", "score": rnd.random(), "tags": ["a", "b"][: i % 3],
              "addr": {"city": rnd.choice(["Porto", "Lyon", "Oslo"]), "zip": str(rnd.randint(10000, 99999))}}
             for i in range(size // 115)]
    return json.dumps({"meta": {"n": len(items), "source": "bench"}, "items": items})


def _lines(size: int, line: Callable[[int], str], header: str = "") -> str:
    out = [header] if header else []
    total, i = len(header), 0
    while total < size:
        text = line(i)
        out.append(text)
        total += len(text) + 1
        i += 1
    return "\n".join(out) + "\n"


def _jsonl(size: int, rnd: random.Random) -> str:
    return _lines(size, lambda i: json.dumps({"i": i, "event": "click", "user": f"u{i % 100}", "v": rnd.random()}))


def _csv(size: int, rnd: random.Random) -> str:
    return _lines(size, lambda i: f"{i},name {i},{rnd.random():.4f},2024-0{1 + i % 9}-1{i % 9},city{i % 50}",
                  header="id,name,score,day,city")


def _log(size: int, rnd: random.Random) -> str:
    def line(i: int) -> str:
        level = "ERROR" if i % 997 == 0 else "WARN" if i % 101 == 0 else "INFO"
        extra = f" ValueError: bad input {i}" if level == "ERROR" else ""
        return (f"2024-03-01T10:{i // 3600 % 60:02d}:{i % 60:02d}.{i % 1000:03d}Z {level} [worker-{i % 8}] "
                f"request {i} handled in {rnd.randint(1, 300)} ms{extra}")
    return _lines(size, line)


def _code(size: int, rnd: random.Random) -> str:
    def block(i: int) -> str:
        return (f"def func_{i}(a: int, b: str = 'x') -> int:\n    x = a + {i}\n    if x > 3:\n        return x\n"
                f"    return len(b)\n\n\nclass Model{i}(Base):\n    def run(self, y: int) -> int:\n"
                f"        return y * {rnd.randint(1, 9)}\n\n")
    return _lines(size, block, header="import os\nimport sys\nfrom typing import Any\n")


def _text(size: int, rnd: random.Random) -> str:
    words = ["lorem", "ipsum", "dolor", "sit", "amet", "consectetur", "adipiscing", "elit", "sed", "do", "eiusmod", "tempor"]
    return _lines(size, lambda i: " ".join(rnd.choice(words) for _ in range(12)))


WORKLOADS: dict[str, Callable[[int, random.Random], str]] = {
    "json": _json, "jsonl": _jsonl, "csv": _csv, "log": _log, "code": _code, "text": _text,
}


def best_of(fn: Callable[[], object], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def run(sizes: list[int], repeats: int) -> list[dict[str, Any]]:
    counter = get_counter("cl100k_base")
    explore("warm up the tokenizer", counter=counter)
    results: list[dict[str, Any]] = []
    for name, make in WORKLOADS.items():
        for size in sizes:
            text = make(size * MB, random.Random(7))
            outcome = explore(text, counter=counter)
            row: dict[str, Any] = {
                "workload": name,
                "mb": round(len(text.encode()) / MB, 2),
                "kind": outcome.kind,
                "sampled": bool(outcome.stats.get("sampled")),
                "summary_tokens": counter.count(outcome.summary),
                "explore_s": round(best_of(functools.partial(explore, text, counter=counter), repeats), 4),
                "count_nl_s": round(best_of(functools.partial(text.count, "\n"), repeats), 4),
                "json_loads_s": (round(best_of(functools.partial(json.loads, text), repeats), 4)
                                 if name == "json" else None),
            }
            row["vs_count_nl"] = round(row["explore_s"] / max(row["count_nl_s"], 1e-9), 1)
            results.append(row)
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1,10", help="sizes in MB, comma-separated (default: 1,10)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    results = run([int(s) for s in args.sizes.split(",")], args.repeats)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    cols = ["workload", "mb", "kind", "sampled", "summary_tokens", "explore_s", "count_nl_s", "json_loads_s",
            "vs_count_nl"]
    print(" | ".join(cols))
    for r in results:
        print(" | ".join("—" if r[c] is None else str(r[c]) for c in cols))


if __name__ == "__main__":
    main()
