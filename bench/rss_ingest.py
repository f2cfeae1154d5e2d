"""Peak RSS of a process that ingests N messages through the public API, streamed from
the generator in batches of 1,000 (nothing else held in memory; no embedding model).
Beside it, the RSS of the same interpreter after importing lossless, as the reference.

    python bench/rss_ingest.py --messages 1000000 [--json]
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from itertools import islice
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import synth

import lossless


def rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    baseline = rss_mb()
    checkpoints = []
    with tempfile.TemporaryDirectory() as tmp:
        mem = lossless.open(Path(tmp) / "rss.db", context_window=32_000, embedder=None)
        conv = mem.conversation("rss")
        gen = synth.messages(args.messages, seed=3)
        done = 0
        t0 = time.perf_counter()
        while batch := list(islice(gen, 1000)):
            conv.add_many(batch)
            done += len(batch)
            if done % max(1, args.messages // 5) == 0:
                checkpoints.append({"messages": done, "peak_rss_mb": rss_mb(),
                                    "msgs_per_s": round(done / (time.perf_counter() - t0), 1)})
                print(f"{done:>9,} messages: peak RSS {checkpoints[-1]['peak_rss_mb']} MB", file=sys.stderr, flush=True)
        mem.close()
    result = {"messages": args.messages, "baseline_rss_mb": baseline, "peak_rss_mb": rss_mb(), "checkpoints": checkpoints}
    print(json.dumps(result, indent=2) if args.json else f"peak RSS {result['peak_rss_mb']} MB "
          f"(after import: {baseline} MB) for {args.messages:,} messages")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
