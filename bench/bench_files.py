"""Workspace file indexing throughput: ``Files.index`` over a generated tree of N files
(default 2,000 files, ~2 MB of Python, markdown and JSON), keyword-only and with a fast
deterministic hashing embedder, then re-indexing the unchanged tree and the touched tree
(mtimes changed, same bytes: every file re-hashed, nothing re-chunked). The reference in
the same run is the floor any indexer pays: walking the tree, reading every file and
hashing it with sha256.

It also measures the vector side at scale (``--scan-chunks``, default 100,000 chunks of
384 dimensions): a query against the in-memory numpy matrix the index uses; the first
query of a process (the matrix loaded from SQLite); the first query after re-indexing one
file (10 chunks replaced: the matrix catches up by ids); and a sqlite-vec ``vec0`` k-NN
over the same vectors.

    python bench/bench_files.py [--files 2000] [--scan-chunks 100000] [--json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

import lossless
from lossless.files import Files
from lossless.files.vectors import ChunkVectors, bump_generation
from lossless.testing import HashEmbedder

WORDS = ["retry", "backoff", "cache", "ledger", "parcel", "beacon", "harbor", "quartz", "meadow", "lantern",
         "compass", "summit", "canyon", "orchid", "falcon", "glacier", "ember", "timber", "velvet", "token",
         "session", "billing", "invoice", "export", "import", "schema", "query", "index", "worker", "queue",
         "deadline", "budget"]
QUERIES = ["where is the retry backoff computed", "invoice export schema", "how does the worker queue drain",
           "lantern compass 17", "session token refresh", "cache ledger summit"]


def _python(rng: random.Random, i: int) -> str:
    parts = [f'"""Module {i}: {" ".join(rng.sample(WORDS, 6))}."""', "", "import math", ""]
    for j in range(rng.randint(3, 6)):
        a, b = rng.sample(WORDS, 2)
        parts += ["", f"def {a}_{b}_{i}_{j}(value, scale=2):",
                  f'    """Turn a {a} into a {b} ({" ".join(rng.sample(WORDS, 4))})."""',
                  "    total = 0", f"    for k in range({rng.randint(2, 9)}):",
                  f"        total += math.floor(value * scale + k)  # {rng.choice(WORDS)}", "    return total"]
    return "\n".join(parts) + "\n"


def _markdown(rng: random.Random, i: int) -> str:
    parts = [f"# {rng.choice(WORDS).title()} notes {i}", ""]
    for j in range(rng.randint(3, 4)):
        parts += [f"## {' '.join(rng.sample(WORDS, 3))} {j}", "",
                  " ".join(rng.choice(WORDS) for _ in range(rng.randint(30, 60))) + ".", ""]
    return "\n".join(parts)


def _json(rng: random.Random, i: int) -> str:
    return json.dumps({w: {"enabled": rng.random() < 0.5, "owner": rng.choice(WORDS), "n": i}
                       for w in rng.sample(WORDS, 8)}, indent=2) + "\n"


def make_tree(root: Path, n: int, seed: int = 11) -> int:
    """n files under root in nested packages; returns their total bytes."""
    rng = random.Random(seed)
    total = 0
    for i in range(n):
        kind = rng.random()
        folder = root / f"pkg{i % 20}" / f"sub{i % 7}"
        folder.mkdir(parents=True, exist_ok=True)
        if kind < 0.6:
            path, text = folder / f"mod_{i}.py", _python(rng, i)
        elif kind < 0.85:
            path, text = folder / f"notes_{i}.md", _markdown(rng, i)
        else:
            path, text = folder / f"conf_{i}.json", _json(rng, i)
        path.write_text(text, encoding="utf-8")
        total += len(text.encode())
    return total


def read_and_hash(root: Path) -> int:
    """The reference: walk, read every file, sha256 it."""
    n = 0
    for folder, _, names in os.walk(root):
        for name in names:
            with open(os.path.join(folder, name), "rb") as f:
                hashlib.sha256(f.read()).hexdigest()
            n += 1
    return n


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def run_index(tree: Path, db: Path, embedder: Any) -> dict[str, Any]:
    mem = lossless.open(db, embedder=None)
    files = Files(mem.store, embedder, mem.counter)
    first_s, first = timed(lambda: files.index([tree]))
    again_s, again = timed(lambda: files.index([tree]))
    for path in tree.rglob("*"):
        if path.is_file():
            st = path.stat()
            os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    touched_s, touched = timed(lambda: files.index([tree]))
    latencies = []
    for _ in range(5):
        for q in QUERIES:
            s, _ = timed(lambda q=q: files.search(q, limit=10))
            latencies.append(s * 1000)
    mem.close()
    assert again.files_unchanged == first.files_indexed and touched.files_touched == first.files_indexed
    return {
        "files": first.files_indexed, "chunks": first.chunks_written, "embedded": first.chunks_embedded,
        "index_s": round(first_s, 3), "files_per_s": round(first.files_indexed / first_s),
        "chunks_per_s": round(first.chunks_written / first_s),
        "unchanged_s": round(again_s, 3), "unchanged_files_per_s": round(again.files_seen / again_s),
        "touched_s": round(touched_s, 3), "touched_files_per_s": round(touched.files_seen / touched_s),
        "search_p50_ms": round(statistics.median(latencies), 2),
    }


def run_scan(n: int, dim: int, repeats: int) -> dict[str, Any]:
    """Query latency over n chunk vectors: cached numpy matrix, matrix reloaded, vec0."""
    rng = np.random.default_rng(5)
    vecs = rng.standard_normal((n, dim), dtype=np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    out: dict[str, Any] = {"chunks": n, "dim": dim}
    with tempfile.TemporaryDirectory() as tmp:
        mem = lossless.open(Path(tmp) / "scan.db", embedder=None)
        store = mem.store
        emb = HashEmbedder(dim, provider="bench", model="hash-384")
        with store.transaction() as conn:
            conn.execute("INSERT INTO files (root, path, abs_path, name, kind, size, mtime_ns, sha256, indexed_at, "
                         "chunk_count) VALUES ('/r', 'f.py', '/r/f.py', 'f.py', 'code', 0, 0, '', '', ?)", (n,))
            conn.executemany("INSERT INTO file_chunks (rowid, file_rowid, ordinal, start_line, end_line, "
                             "token_count, kind, text, text_sha256) VALUES (?, 1, ?, 1, 1, 1, 'code', '', '')",
                             [(i + 1, i) for i in range(n)])
            conn.executemany("INSERT INTO file_chunk_vectors (chunk_rowid, provider, model, dim, text_sha256, "
                             "vector) VALUES (?, ?, ?, ?, '', ?)",
                             [(i + 1, emb.provider, emb.model, dim, vecs[i].tobytes()) for i in range(n)])
            bump_generation(conn)
        cv = ChunkVectors(store, emb)
        cv.query_vector("q")  # cached from here on
        first, _ = timed(lambda: cv.nearest("q", 30))
        catch_up = []
        for r in range(3):  # one file re-indexed: 10 chunks go, 10 new ones come
            with store.transaction() as conn:
                gone = [(i,) for i in range(1 + 10 * r, 11 + 10 * r)]
                conn.executemany("DELETE FROM file_chunk_vectors WHERE chunk_rowid = ?", gone)
                conn.executemany("DELETE FROM file_chunks WHERE rowid = ?", gone)
                for k in range(10):
                    conn.execute("INSERT INTO file_chunks (file_rowid, ordinal, start_line, end_line, token_count, "
                                 "kind, text, text_sha256) VALUES (1, ?, 1, 1, 1, 'code', '', '')", (n + 10 * r + k,))
                    conn.execute("INSERT INTO file_chunk_vectors (chunk_rowid, provider, model, dim, text_sha256, "
                                 "vector) VALUES (?, ?, ?, ?, '', ?)",
                                 (conn.last_insert_rowid(), emb.provider, emb.model, dim, vecs[k].tobytes()))
                bump_generation(conn)
            s, _ = timed(lambda: cv.nearest("q", 30))
            catch_up.append(s * 1000)
        warm = [timed(lambda: cv.nearest("q", 30))[0] * 1000 for _ in range(repeats)]
        out["numpy_cached_p50_ms"] = round(statistics.median(warm), 2)
        out["numpy_first_load_ms"] = round(first * 1000, 1)
        out["numpy_after_write_p50_ms"] = round(statistics.median(catch_up), 1)
        out["matrix_mb"] = round(n * dim * 4 / 2**20, 1)
        if store.load_sqlite_vec():
            with store.transaction() as conn:
                conn.execute(f"CREATE VIRTUAL TABLE bench_vec USING vec0(embedding float[{dim}] distance_metric=cosine)")
                conn.executemany("INSERT INTO bench_vec (rowid, embedding) VALUES (?, ?)",
                                 [(i + 1, vecs[i].tobytes()) for i in range(n)])
            q = vecs[0].tobytes()
            lat = [timed(lambda: store._query("SELECT rowid, distance FROM bench_vec WHERE embedding MATCH ? "
                                              "AND k = 30", (q,)))[0] * 1000 for _ in range(repeats)]
            out["vec0_p50_ms"] = round(statistics.median(lat), 1)
        mem.close()
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--scan-chunks", type=int, default=100_000, help="0 to skip the vector scan")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    result: dict[str, Any] = {"files": args.files}
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "tree"
        result["bytes"] = make_tree(tree, args.files)
        read_and_hash(tree)  # warm the page cache so every pass reads from memory
        ref_s, n = timed(lambda: read_and_hash(tree))
        result["reference"] = {"files_per_s": round(n / ref_s), "seconds": round(ref_s, 3)}
        result["keyword"] = run_index(tree, Path(tmp) / "kw.db", None)
        result["hash_embedder"] = run_index(tree, Path(tmp) / "vec.db", HashEmbedder(384, provider="bench"))
    if args.scan_chunks:
        result["scan"] = run_scan(args.scan_chunks, args.dim, args.repeats)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"{args.files} files, {result['bytes'] / 1e6:.1f} MB")
    print(f"{'pass':<44}{'seconds':>9}{'files/s':>10}{'chunks/s':>10}")
    ref = result["reference"]
    print(f"{'reference: read + sha256':<44}{ref['seconds']:>9.3f}{ref['files_per_s']:>10}{'':>10}")
    for name in ("keyword", "hash_embedder"):
        r = result[name]
        print(f"{name + ': index':<44}{r['index_s']:>9.3f}{r['files_per_s']:>10}{r['chunks_per_s']:>10}")
        print(f"{name + ': re-index unchanged':<44}{r['unchanged_s']:>9.3f}{r['unchanged_files_per_s']:>10}{'':>10}")
        print(f"{name + ': re-index touched (re-hash)':<44}{r['touched_s']:>9.3f}{r['touched_files_per_s']:>10}{'':>10}")
    print(f"chunks: {result['keyword']['chunks']}; search p50: keyword {result['keyword']['search_p50_ms']} ms, "
          f"hybrid {result['hash_embedder']['search_p50_ms']} ms")
    if "scan" in result:
        s = result["scan"]
        vec0 = f", vec0 k-NN {s['vec0_p50_ms']} ms" if "vec0_p50_ms" in s else ", vec0 unavailable"
        print(f"vector query over {s['chunks']} x {s['dim']} ({s['matrix_mb']} MB): numpy matrix "
              f"{s['numpy_cached_p50_ms']} ms; first query (load) {s['numpy_first_load_ms']} ms; after "
              f"re-indexing a file {s['numpy_after_write_p50_ms']} ms{vec0}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
