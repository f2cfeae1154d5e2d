"""Assembly while the worker catches up (issue 29 item 4): a query's assembly p50 while the
background worker compacts and embeds a big backlog, with the worker stepping aside for
the query (the default: :mod:`lossless.core.priority`) and without (``MAX_WAIT = 0``: its
pause points never wait), interleaved one assembly each in one process, against the p50
once the worker is done.

A conversation of ``--messages`` short casual turns (``bench/chitchat.py``, repeated with
a counter) is stored with ``add_many`` in chunks of 1,000 into a fresh SQLite file, default
set-up (the worker thread compacts and embeds in the background). ``--wait`` seconds later
``--queries`` assemblies with a question at ``--budget`` tokens alternate between the two
set-ups, 0.2 s apart (the worker works between them); then ``wait_idle()`` and the same queries again (the reference). Reported: p50 and
p90 of each, and the ratios to the reference (the issue's bar: <= 1.5).

    python3 bench/bench_assemble_catchup.py [--messages 20000] [--queries 40] [--json]
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
from lossless.compaction.worker import owed
from lossless.core import priority

GAP = 0.2  # seconds between two timed assemblies (an agent's model call, shortened)
QUESTIONS = ("Where does your sister live now?", "What did we decide about the trip?",
             "Which city did your uncle move to?", "What is the name of the dog?")


def _turns(n: int) -> list[dict[str, Any]]:
    chat = chitchat.generate(seed=chitchat.DEFAULT_SEED, conversations=1)[0]
    base: list[dict[str, Any]] = [{"role": m.role, "content": m.content, "name": m.name} for m in chat.messages]
    return [{**base[i % len(base)], "content": f"{base[i % len(base)]['content']} ({i})"} for i in range(n)]


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run(messages: int, queries: int, budget: int, pause: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        mem = lossless.open(str(Path(tmp) / "c.db"))
        conv = mem.conversation("big")
        rows = _turns(messages)
        t0 = time.perf_counter()
        for i in range(0, len(rows), 1000):
            conv.add_many(rows[i : i + 1000])
        stored_s = time.perf_counter() - t0
        time.sleep(pause)
        wait = priority.MAX_WAIT
        timed: dict[str, list[float]] = {"yielding": [], "not_yielding": []}
        for k in range(queries):
            for label in ("yielding", "not_yielding") if k % 2 == 0 else ("not_yielding", "yielding"):
                priority.MAX_WAIT = wait if label == "yielding" else 0.0
                time.sleep(GAP)
                t = time.perf_counter()
                conv.assemble(budget_tokens=budget, query=QUESTIONS[k % len(QUESTIONS)])
                timed[label].append((time.perf_counter() - t) * 1000)
        priority.MAX_WAIT = wait
        owed_after = owed(mem, conv.id)
        caught_up = mem.wait_idle(timeout=1800)
        after: list[float] = []
        for k in range(queries):
            t = time.perf_counter()
            conv.assemble(budget_tokens=budget, query=QUESTIONS[k % len(QUESTIONS)])
            after.append((time.perf_counter() - t) * 1000)
        mem.close()
    ref = statistics.median(after)
    out: dict[str, Any] = {"messages": messages, "queries": queries, "budget": budget, "stored_s": round(stored_s, 2),
                           "caught_up": caught_up, "owed_when_measured": owed_after,
                           "after_catch_up": {"p50_ms": round(ref, 2), "p90_ms": round(_p(after, 0.9), 2)}}
    for label, values in timed.items():
        p50 = statistics.median(values)
        out[label] = {"p50_ms": round(p50, 2), "p90_ms": round(_p(values, 0.9), 2), "ratio": round(p50 / ref, 2)}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=20000)
    ap.add_argument("--queries", type=int, default=40)
    ap.add_argument("--budget", type=int, default=4096)
    ap.add_argument("--wait", type=float, default=2.0, help="seconds between the last add and the first query")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    result = run(args.messages, args.queries, args.budget, args.wait)
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        for key in ("yielding", "not_yielding", "after_catch_up"):
            print(f"{key:>15}: {result[key]}")
        print(f"stored {result['messages']} messages in {result['stored_s']} s; owed when measured: "
              f"{result['owed_when_measured']}; caught up: {result['caught_up']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
