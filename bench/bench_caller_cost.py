"""What a caller pays for the background embedder: single ``conv.add`` calls with the
default embedder (the worker thread running, compaction as default) against
``embedder=None``, in one process.

Each run stores the first ``--adds`` short casual turns of ``bench/chitchat.py`` one
``conv.add()`` at a time into a fresh SQLite file. The two set-ups alternate ``--rounds``
times; the default embedder is warmed (one text) before its clock starts, so the runs
compare the adds, not the model's loading. The clock stops after the last add returns
(the worker is still embedding then); ``wait_idle()`` runs after the clock, before the
next run, so one run's backlog does not load the next.

``--cold`` skips the warm-up: the first add starts the worker, which loads the model (a new
process's first adds). ``--gap`` sleeps after each add (not counted), so the worker runs
between adds.

Reported per set-up: the total of every round, the median total, p50/p99 per add over all
rounds, and the ratio of the median totals (the issue 29 bar: <= 1.5).

    python3 bench/bench_caller_cost.py [--adds 300] [--rounds 3] [--cold] [--gap SECONDS] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import chitchat

import lossless


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 3)


def run(path: Path, rows: list[dict[str, Any]], embedder: bool, *, cold: bool = False,
        gap: float = 0.0) -> tuple[float, list[float]]:
    kwargs: dict[str, Any] = {} if embedder else {"embedder": None}
    with lossless.open(str(path), **kwargs) as mem:
        if embedder and not cold:
            if mem.recaller.embedder is None:
                raise SystemExit("no default embedder: install the embeddings extra")
            mem.recaller.embedder.embed(["warm-up"])  # the model is loaded before the clock starts
        conv = mem.conversation("chat")
        times: list[float] = []
        t0 = time.perf_counter()
        for row in rows:
            t = time.perf_counter()
            conv.add(**row)
            times.append(time.perf_counter() - t)
            if gap:
                time.sleep(gap)
        total = sum(times) if gap else time.perf_counter() - t0
        if not mem.wait_idle(timeout=1800):
            raise SystemExit(f"wait_idle timed out or failed: {mem.stats().to_dict()}")
    return total, times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--adds", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cold", action="store_true", help="no warm-up: the worker loads the model during the adds")
    parser.add_argument("--gap", type=float, default=0.0,
                        help="seconds to sleep after each add (not counted), so the worker runs between adds")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    rows = chitchat.turn_rows(args.adds, "--adds")
    totals: dict[str, list[float]] = {"default": [], "none": []}
    per_add: dict[str, list[float]] = {"default": [], "none": []}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for r in range(args.rounds):
            for name in ("default", "none"):
                total, times = run(folder / f"{name}-{r}.db", rows, name == "default", cold=args.cold,
                                   gap=args.gap)
                totals[name].append(total)
                per_add[name].extend(times)
                print(f"round {r + 1} {name}: {total:.3f} s", file=sys.stderr, flush=True)
    out: dict[str, Any] = {"adds": args.adds, "rounds": args.rounds, "cold": args.cold, "gap_s": args.gap}
    for name in totals:
        out[name] = {"totals_s": [round(t, 3) for t in totals[name]],
                     "median_total_s": round(statistics.median(totals[name]), 3),
                     "add_p50_ms": pct(per_add[name], 0.5), "add_p99_ms": pct(per_add[name], 0.99)}
    out["ratio"] = round(out["default"]["median_total_s"] / out["none"]["median_total_s"], 2)
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        for name in totals:
            o = out[name]
            print(f"{name:8} median {o['median_total_s']} s  p50 {o['add_p50_ms']} ms  p99 {o['add_p99_ms']} ms  "
                  f"rounds {o['totals_s']}")
        print(f"ratio default / none: {out['ratio']}")


if __name__ == "__main__":
    main()
