"""Peak RSS of a process that ingests N messages through the public API, streamed from
the generator in batches of 1,000 (nothing else held in memory; no embedding model).
Beside it, the RSS of the same interpreter after importing lossless, as the reference.

    python bench/rss_ingest.py --messages 1000000 [--conversations 1000] [--json]

With ``--conversations N`` the messages are spread over N conversations, added round-robin
in batches of 100 (each conversation's generator streams its own messages).
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
    ap.add_argument("--conversations", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    baseline = rss_mb()
    checkpoints = []
    with tempfile.TemporaryDirectory() as tmp:
        mem = lossless.open(Path(tmp) / "rss.db", context_window=32_000, embedder=None)
        n = max(1, args.conversations)
        convs = [mem.conversation(f"rss{i:05d}" if n > 1 else "rss") for i in range(n)]
        gens = [synth.messages(args.messages // n, seed=3 + i) for i in range(n)]
        step = 1000 if n == 1 else 100
        every = max(1, args.messages // 5)
        done = 0
        t0 = time.perf_counter()
        while True:
            added = 0
            for conv, gen in zip(convs, gens, strict=True):
                batch = list(islice(gen, step))
                if not batch:
                    continue
                before = done
                conv.add_many(batch)
                done += len(batch)
                added += len(batch)
                if done // every > before // every:
                    checkpoints.append({"messages": done, "peak_rss_mb": rss_mb(),
                                        "msgs_per_s": round(done / (time.perf_counter() - t0), 1)})
                    print(f"{done:>9,} messages: peak RSS {checkpoints[-1]['peak_rss_mb']} MB", file=sys.stderr,
                          flush=True)
            if not added:
                break
        mem.close()
    result = {"messages": done, "conversations": n, "baseline_rss_mb": baseline, "peak_rss_mb": rss_mb(), "checkpoints": checkpoints}
    print(json.dumps(result, indent=2) if args.json else f"peak RSS {result['peak_rss_mb']} MB "
          f"(after import: {baseline} MB) for {args.messages:,} messages")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
