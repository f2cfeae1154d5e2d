"""Assembly with a question, this checkout against an earlier commit, in one run.

The earlier code (``--old-rev``) is checked out in a temporary git worktree. Each round
runs one process per version, alternating which goes first: it stores ``--messages``
short casual turns (``bench/chitchat.py``, repeated with a counter, as
``bench_assemble_catchup.py`` does) into a fresh SQLite file with the default set-up and
``compaction="inline"`` (so both versions time the same finished store), warms up, then
times ``--queries`` assemblies with a question at ``--budget`` tokens. Reported: each
version's p50 per round, the median of those, and new / old.

    python3 bench/before_after.py --old-rev 786c365 [--messages 2000] [--rounds 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

TIME = textwrap.dedent("""
    import json, statistics, sys, tempfile, time
    from pathlib import Path
    sys.path.insert(0, sys.argv[1])
    from bench_assemble_catchup import QUESTIONS, _turns
    import lossless
    messages, queries, budget = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    with tempfile.TemporaryDirectory() as tmp:
        mem = lossless.open(str(Path(tmp) / "a.db"), compaction="inline")
        conv = mem.conversation("big")
        rows = _turns(messages)
        for i in range(0, len(rows), 500):
            conv.add_many(rows[i : i + 500])
        conv.index()
        for k in range(8):
            conv.assemble(budget_tokens=budget, query=QUESTIONS[k % len(QUESTIONS)])
        timed = []
        for k in range(queries):
            t = time.perf_counter()
            conv.assemble(budget_tokens=budget, query=QUESTIONS[k % len(QUESTIONS)])
            timed.append((time.perf_counter() - t) * 1000)
        mem.close()
    print(json.dumps({"p50_ms": statistics.median(timed)}))
""")


def _time(src: Path, messages: int, queries: int, budget: int) -> float:
    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run([sys.executable, "-c", TIME, str(ROOT / "bench"), str(messages), str(queries), str(budget)],
                          env=env, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise SystemExit(f"timing {src} failed:\n{done.stderr[-3000:]}")
    return float(json.loads(done.stdout.strip().splitlines()[-1])["p50_ms"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--old-rev", required=True)
    ap.add_argument("--messages", type=int, default=2000)
    ap.add_argument("--queries", type=int, default=60)
    ap.add_argument("--budget", type=int, default=4096)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    runs: dict[str, list[float]] = {"old": [], "new": []}
    with tempfile.TemporaryDirectory(prefix="lossless-before-after-") as tmp:
        old = Path(tmp) / "old"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-f", str(old), args.old_rev],
                       check=True, capture_output=True)
        try:
            for r in range(args.rounds):
                for label in ("old", "new") if r % 2 == 0 else ("new", "old"):
                    src = old / "src" if label == "old" else ROOT / "src"
                    runs[label].append(round(_time(src, args.messages, args.queries, args.budget), 2))
                if not args.json:
                    print(f"round {r + 1}: old {runs['old'][-1]} ms, new {runs['new'][-1]} ms", flush=True)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old)], capture_output=True)
    out: dict[str, Any] = {"old_rev": args.old_rev, "messages": args.messages, "queries": args.queries,
                           "budget": args.budget, "p50_ms_per_round": runs,
                           "old_p50_ms": statistics.median(runs["old"]), "new_p50_ms": statistics.median(runs["new"])}
    out["new_over_old"] = round(out["new_p50_ms"] / out["old_p50_ms"], 3)
    print(json.dumps(out, indent=1) if args.json else
          f"p50: old {out['old_p50_ms']} ms, new {out['new_p50_ms']} ms, new/old {out['new_over_old']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
