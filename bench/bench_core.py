"""Core engine benchmark: ingest rate, assemble latency, grep latency, at 10k and 100k
messages in one conversation, each beside a reference measured in the same run.

References:
  ingest   bare apsw inserts of the same rows into a table with an FTS5 index (SQLite's own
           limit for "store + index"), in batches of the same size;
  assemble a naive memory that reads the whole history and keeps the newest messages that
           fit (what an O(history) memory does on every call);
  grep     a bare FTS5 MATCH on that reference table.

Run:  python bench/bench_core.py [--sizes 10000 100000] [--json]
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

import apsw

sys.path.insert(0, str(Path(__file__).parent))
import synth

import lossless
from lossless.core.render import content_text

QUERIES = ["which port did the billing API move to", "ERR_4242 retry", "连接池 太小", "p99 latency of the cache layer",
           "version 2.17.1", "nightly export failed", "测试覆盖率", "mobile client heap"]


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return ordered[k]


def reference_store(path: Path, rows: list[dict[str, Any]], batch: int) -> tuple[float, apsw.Connection]:
    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL")
    conn.execute("CREATE TABLE m (rowid INTEGER PRIMARY KEY, conv TEXT, seq INT, role TEXT, content TEXT, ts TEXT)")
    conn.execute("CREATE VIRTUAL TABLE m_fts USING fts5(text, content='')")
    t0 = time.perf_counter()
    for i in range(0, len(rows), batch):
        conn.execute("BEGIN IMMEDIATE")
        for j, r in enumerate(rows[i : i + batch], start=i + 1):
            text = content_text(r["content"], r.get("tool_calls"))
            conn.execute("INSERT INTO m VALUES (?, 'c', ?, ?, ?, ?)", (j, j, r["role"], text, r["created_at"].isoformat()))
            conn.execute("INSERT INTO m_fts (rowid, text) VALUES (?, ?)", (j, text))
        conn.execute("COMMIT")
    return time.perf_counter() - t0, conn


def naive_assemble(conn: apsw.Connection, budget: int, counter: Any) -> int:
    rows = conn.execute("SELECT role, content FROM m ORDER BY seq").fetchall()
    total, kept = 0, 0
    for _role, content in reversed(rows):
        cost = counter.count(content) + 3
        if total + cost > budget:
            break
        total += cost
        kept += 1
    return kept


def run(size: int, window: int, budget: int, batch: int, repeats: int) -> dict[str, Any]:
    rows = list(synth.messages(size, seed=size))
    with tempfile.TemporaryDirectory() as tmp:
        mem = lossless.open(Path(tmp) / "lossless.db", context_window=window, embedder=None)  # core only
        conv = mem.conversation("bench")
        t0 = time.perf_counter()
        for i in range(0, size, batch):
            conv.add_many(rows[i : i + batch])
        mem.wait_idle()  # ingest as before: until the worker has compacted what was stored
        ingest_s = time.perf_counter() - t0
        stats = conv.stats()
        ref_s, ref = reference_store(Path(tmp) / "ref.db", rows, batch)

        def timed(fn: Any) -> list[float]:
            out = []
            for k in range(repeats):
                t = time.perf_counter()
                fn(k)
                out.append((time.perf_counter() - t) * 1000)
            return out

        plain = timed(lambda k: conv.assemble(budget_tokens=budget))
        queried = timed(lambda k: conv.assemble(budget_tokens=budget, query=QUERIES[k % len(QUERIES)]))
        grep = timed(lambda k: conv.grep(QUERIES[k % len(QUERIES)], limit=10))
        naive = timed(lambda k: naive_assemble(ref, budget, mem.counter))
        from lossless.store.fts import word_query

        ref_grep = timed(lambda k: ref.execute(
            "SELECT rowid FROM m_fts WHERE m_fts MATCH ? ORDER BY bm25(m_fts) LIMIT 10",
            (word_query(QUERIES[k % len(QUERIES)]) or '"x"',)).fetchall())
        mem.close()
        ref.close()
    return {
        "messages": size,
        "tokens_ingested": stats.message_tokens,
        "summaries": stats.summaries,
        "max_depth": stats.max_depth,
        "ingest_msgs_per_s": round(size / ingest_s, 1),
        "reference_ingest_msgs_per_s": round(size / ref_s, 1),
        "assemble_p50_ms": round(pct(plain, 50), 2),
        "assemble_p99_ms": round(pct(plain, 99), 2),
        "assemble_query_p50_ms": round(pct(queried, 50), 2),
        "assemble_query_p99_ms": round(pct(queried, 99), 2),
        "naive_assemble_p50_ms": round(pct(naive, 50), 2),
        "naive_assemble_p99_ms": round(pct(naive, 99), 2),
        "grep_p50_ms": round(pct(grep, 50), 2),
        "grep_p99_ms": round(pct(grep, 99), 2),
        "reference_fts_p50_ms": round(pct(ref_grep, 50), 2),
        "budget": budget,
        "context_window": window,
        "median_check": round(statistics.median(plain), 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--window", type=int, default=32_768)
    ap.add_argument("--budget", type=int, default=8_192)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=50)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    results = [run(n, args.window, args.budget, args.batch, args.repeats) for n in args.sizes]
    if args.json:
        print(json.dumps(results, indent=2))
        return
    cols = ["messages", "ingest_msgs_per_s", "reference_ingest_msgs_per_s", "assemble_p50_ms", "assemble_p99_ms",
            "assemble_query_p50_ms", "assemble_query_p99_ms", "naive_assemble_p50_ms", "grep_p50_ms",
            "reference_fts_p50_ms", "summaries", "max_depth"]
    print(" | ".join(cols))
    for r in results:
        print(" | ".join(str(r[c]) for c in cols))


if __name__ == "__main__":
    main()
