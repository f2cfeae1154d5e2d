"""An approximate k-NN against the exact scan (issue 29 item 4, measured at stop 42, not kept).

At 50k messages the exact k-NN (one product of the question's vector with every stored
vector, ``dim × n`` float32) takes ~1.4-2 ms and is memory-bound. Would sign codes with a
rerank be cheaper? Each vector's signs packed into 48 bytes (384 dimensions), Hamming
distance to the question's signs over every code (``np.bitwise_count``), the ``--pool``
nearest by Hamming reranked exactly on a float16 row-major copy, the best ``k`` kept.

A store of ``--messages`` short casual turns (``bench_assemble_catchup._turns``) is written
with the default embedder and caught up (``wait_idle``), or ``--db`` names one already
made. Its vectors are read from the embedding cache; the questions are the catch-up
bench's. Reported per pool size: the share of the exact top ``k`` the approximate top ``k``
holds, the share of the exact top 50 it holds, and the p50 of each method (alternated).

    python3 bench/knn_approx.py [--messages 50000] [--db FILE] [--k 760] [--json]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_assemble_catchup as catchup

import lossless


def _store(messages: int, folder: Path) -> Path:
    path = folder / "knn.db"
    with lossless.open(str(path)) as mem:
        conv = mem.conversation("big")
        rows = catchup._turns(messages)
        for i in range(0, len(rows), 1000):
            conv.add_many(rows[i : i + 1000])
        mem.wait_idle(timeout=3600)
    return path


def _vectors(path: Path) -> np.ndarray:
    con = sqlite3.connect(str(path))
    rows = con.execute("SELECT c.vector FROM recall_units u JOIN embedding_cache c ON c.text_sha256 = u.text_sha256 "
                       "WHERE u.kind = 'message'").fetchall()
    con.close()
    return np.vstack([np.frombuffer(r[0], dtype="<f4") for r in rows])


def run(path: Path, k: int, pools: list[int], reps: int) -> dict[str, Any]:
    rows = _vectors(path)  # n × dim
    mat = np.ascontiguousarray(rows.T)  # dim × n, as the store keeps it
    codes = np.packbits(rows > 0, axis=1).view(np.uint64)
    half = rows.astype(np.float16)
    with lossless.open(str(path)) as mem:
        embedder = mem.embedder
        assert embedder is not None, "the default embedder did not load"
        questions = [np.asarray(v, dtype=np.float32).reshape(-1) for v in embedder.embed(list(catchup.QUESTIONS))]
    k = min(k, len(rows))
    for q in questions:  # warm: the first pass over the matrix pages it in
        _ = q @ mat, np.bitwise_count(codes ^ np.packbits(q > 0).view(np.uint64)), half[:k].astype(np.float32) @ q
    out: dict[str, Any] = {"vectors": len(rows), "dim": int(rows.shape[1]), "k": k, "pools": []}
    for pool in pools:
        exact_ms: list[float] = []
        approx_ms: list[float] = []
        found_k: list[float] = []
        found_50: list[float] = []
        for _ in range(reps):
            for q in questions:
                t = time.perf_counter()
                sims = q @ mat
                top = np.argpartition(-sims, k - 1)[:k]
                exact_ms.append((time.perf_counter() - t) * 1000)
                t = time.perf_counter()
                dist = np.bitwise_count(codes ^ np.packbits(q > 0).view(np.uint64)).sum(axis=1, dtype=np.uint16)
                cand = np.argpartition(dist, pool - 1)[:pool]
                rerank = half[cand].astype(np.float32) @ q
                approx = cand[np.argpartition(-rerank, k - 1)[:k]]
                approx_ms.append((time.perf_counter() - t) * 1000)
                got = set(approx.tolist())
                found_k.append(len(got & set(top.tolist())) / k)
                found_50.append(len(got & set(np.argsort(-sims)[:50].tolist())) / 50)
        out["pools"].append({"pool": pool, "top_k_found": round(statistics.mean(found_k), 4),
                             "top_50_found": round(statistics.mean(found_50), 4),
                             "exact_p50_ms": round(statistics.median(exact_ms), 2),
                             "approx_p50_ms": round(statistics.median(approx_ms), 2)})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=50000)
    ap.add_argument("--db", type=Path, help="a store already made (skips writing one)")
    ap.add_argument("--k", type=int, default=760, help="the neighbours asked for (recall asks ~760 at 4,096 tokens)")
    ap.add_argument("--pools", type=int, nargs="+", default=[2000, 4000, 8000])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = args.db or _store(args.messages, Path(tmp))
        result = run(path, args.k, args.pools, args.reps)
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        print(f"{result['vectors']} vectors of {result['dim']}, k {result['k']}")
        for p in result["pools"]:
            print(f"pool {p['pool']:>6}: exact top-k found {p['top_k_found']:.4f}, top 50 {p['top_50_found']:.4f}; "
                  f"exact {p['exact_p50_ms']} ms, approximate {p['approx_p50_ms']} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
