"""Assembly latency at the dev sets' scale: each chat is ingested as ``retention.py`` does
(window 8192, inline compaction, vectors from the embedding cache), then every question is
assembled ``--repeats`` times with ``assemble(query=…)`` at ``--budget``, and, in the same
run beside it, built by the fused bm25 + vector baseline (``hybrid``) as a reference.

    python bench/assemble_latency.py --set chitchat --chats 1 2 3 [--embed-cache F] [--json OUT]
    python bench/assemble_latency.py --set beam --chats 1 2
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import retention as R
from embed_cache import load_embedder


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--set", choices=("chitchat", "beam"), default="chitchat")
    p.add_argument("--chats", type=int, nargs="*", default=[1, 2, 3])
    p.add_argument("--budget", type=int, default=4096)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--embed-cache", type=Path, default=Path(tempfile.gettempdir()) / "lossless-latency-emb.sqlite")
    p.add_argument("--json", metavar="OUT")
    a = p.parse_args()
    ns = argparse.Namespace(set=a.set, seed=19, conversations=10, chats=a.chats,
                            data=R.beam.DEFAULT_DATA if a.set == "beam" else None)
    emb = load_embedder(a.embed_cache)
    ours: list[float] = []
    hybrid: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        for chat in R.load_set(ns):
            run = R.ingest(chat, Path(tmp), 8192, emb, "turn")
            run.attach_index(emb)
            questions = [q.question for q in run.chat.questions]
            for q in questions[:3]:  # warm: the query embedder, the caches
                run.conv.assemble(budget_tokens=a.budget, query=q)
            for _ in range(a.repeats):
                for q in questions:
                    t0 = time.perf_counter()
                    run.conv.assemble(budget_tokens=a.budget, query=q)
                    ours.append((time.perf_counter() - t0) * 1000)
                    t0 = time.perf_counter()
                    R.BUILDERS["hybrid"](run, q, a.budget)
                    hybrid.append((time.perf_counter() - t0) * 1000)
            run.mem.close()
    out = {"set": a.set, "chats": a.chats, "budget": a.budget, "contexts": len(ours),
           "lossless_p50_ms": round(statistics.median(ours), 2),
           "lossless_p95_ms": round(sorted(ours)[int(len(ours) * 0.95) - 1], 2),
           "hybrid_p50_ms": round(statistics.median(hybrid), 2)}
    print(f"{a.set} chats {a.chats} @ {a.budget}: lossless p50 {out['lossless_p50_ms']} ms "
          f"(p95 {out['lossless_p95_ms']}), hybrid p50 {out['hybrid_p50_ms']} ms, {len(ours)} contexts")
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
