"""The local embedder's speed, torch-free against sentence-transformers, in one run.

For each backend: the time to load (first vector), texts/s on a batch of chat-like texts
of mixed length, a single query's p50/p95 latency, and the largest gap to the
sentence-transformers vectors. Backends: ``onnxruntime`` and ``numpy`` (LocalEmbedder,
no torch) and ``torch`` (sentence-transformers; skipped when it is not installed).

    python3 bench/bench_embed.py [--texts 512] [--queries 50] [--threads N] [--json]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import tempfile
import time
from typing import Any

import numpy as np


def corpus(n: int) -> list[str]:
    """Chat-like texts, 3 to ~300 tokens, some CJK: what the worker embeds."""
    words = ["the", "deploy", "moved", "billing", "API", "port", "5433", "vault", "secret", "key", "compaction", "summary", "recall", "budget", "token", "message", "worker", "store", "query", "Friday", "release", "migration", "index"]
    rng = np.random.default_rng(7)
    out = []
    for i in range(n):
        k = int(rng.choice([3, 8, 20, 40, 80, 200]))
        text = " ".join(str(rng.choice(words)) for _ in range(k))
        out.append(text + (" 数据库迁移在周五完成" if i % 7 == 0 else ""))
    return out


def measure(name: str, make: Any, texts: list[str], queries: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    emb = make()
    emb.embed(["warm-up"])
    load = time.perf_counter() - t0
    t1 = time.perf_counter()
    vectors = emb.embed(texts)
    batch = time.perf_counter() - t1
    lat = []
    for i in range(queries):
        t = time.perf_counter()
        emb.embed([f"which port did the billing API move to, question {i}?"])
        lat.append((time.perf_counter() - t) * 1000)
    lat.sort()
    return {"backend": name, "load_s": round(load, 2), "texts": len(texts), "batch_s": round(batch, 2),
            "texts_per_s": round(len(texts) / batch, 1), "query_p50_ms": round(statistics.median(lat), 2),
            "query_p95_ms": round(lat[int(len(lat) * 0.95) - 1], 2), "_vectors": vectors}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--texts", type=int, default=512)
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--threads", type=int, default=None, help="ONNX Runtime threads (default: cores, up to 4)")
    ap.add_argument("--skip-numpy", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    from lossless.embed.local import LocalEmbedder

    texts = corpus(args.texts)
    cache = tempfile.mkdtemp(prefix="bench-embed-")
    runs = [measure("onnxruntime", lambda: LocalEmbedder(onnx=True, onnx_cache=cache, threads=args.threads),
                    texts, args.queries)]
    if not args.skip_numpy:
        runs.append(measure("numpy", lambda: LocalEmbedder(onnx=False), texts, args.queries))
    if importlib.util.find_spec("sentence_transformers") is not None:
        from lossless.embed.sbert import SentenceTransformerEmbedder

        runs.append(measure("torch", lambda: SentenceTransformerEmbedder(onnx=False), texts, args.queries))
    reference = runs[-1]["_vectors"]
    for r in runs:
        r["min_cosine_vs_" + runs[-1]["backend"]] = round(float((r.pop("_vectors") * reference).sum(axis=1).min()), 6)
    if args.json:
        print(json.dumps(runs, indent=2))
        return
    cols = [c for c in runs[0] if c != "backend"]
    print(" | ".join(["backend", *cols]))
    for r in runs:
        print(" | ".join(str(r[c]) for c in ["backend", *cols]))


if __name__ == "__main__":
    main()
