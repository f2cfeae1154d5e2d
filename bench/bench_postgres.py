"""PostgreSQL backend benchmark: many writer processes into one store, then assembly with a
query on PostgreSQL and SQLite side by side, in the same run.

writers   16 processes x 5,000 messages (``--writers``, ``--per-writer``) into one
          PostgreSQL database, four writers per conversation (``--per-conversation``), one
          ``conv.add`` per message (``--batch``), auto-compaction on (window 32k, the
          extractive summarizer). Afterwards: every message present, each conversation's
          seqs exactly 1..n, ``verify()`` clean (hashes, the DAG partition). Reports
          messages/s over the whole run, beside one process writing as many messages the
          same way into a SQLite file (the reference).
assemble  ``--messages`` (100k) spread over ``--conversations`` (100) ingested into each
          backend (``add_many`` batches of 500, auto-compaction on), then
          ``assemble(budget_tokens=8192, query=…)`` p50/p99 over ``--repeats`` calls on
          random conversations (keyword recall). ``--large``: 1M over 1,000.

The server is ``--url`` or ``$LOSSLESS_BENCH_PG_URL``, else the PostgreSQL 16 inside the
``pgserver`` wheel, started in a temporary directory (fsync on, default settings).

    python bench/bench_postgres.py [--json] [--large] [--skip-writers] [--skip-assemble]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import shutil
import sys
import tempfile
import time
import uuid
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

sys.path.insert(0, str(Path(__file__).parent))
import synth

import lossless

QUERIES = ["which port does the billing API use?", "ERR_42 on retry", "迁移到新集群", "Postgres replica latency",
           "what did we decide about the cache layer?", "nightly export failed", "mod_17.py module", "测试覆盖率"]
BUDGET = 8192
WINDOW = 32_768


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)


@contextmanager
def server(url: str | None) -> Iterator[str]:
    """A PostgreSQL server's maintenance URL: the given one, or a throwaway pgserver."""
    if url:
        yield url
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver

        root = Path(tempfile.mkdtemp(prefix="lossless-bench-pg-"))
        srv = pgserver.get_server(root / "data", cleanup_mode="delete")
    try:
        yield srv.get_uri()
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            srv.cleanup()
        shutil.rmtree(root, ignore_errors=True)


def database(base: str, prefix: str) -> str:
    import psycopg

    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    parts = urlsplit(base)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


# -- many writers ------------------------------------------------------------------------------


def _writer(url: str, index: int, conversation: str, count: int, batch: int, ready: Any, go: Any) -> None:
    os.environ["LOSSLESS_EMBEDDER"] = "none"
    mem = lossless.open(url, context_window=WINDOW, embedder=None)
    conv = mem.conversation(conversation)
    rows = [{**m, "content": f"[w{index}:{j}] {m['content']}"} for j, m in enumerate(synth.messages(count, seed=1000 + index))]
    ready.set()
    go.wait()
    for i in range(0, count, batch):
        conv.add_many(rows[i : i + batch])
    mem.wait_idle()  # the worker's compaction is part of what a writer costs the database
    mem.close()


def writers(base: str, n: int, per_writer: int, per_conversation: int, batch: int) -> dict[str, Any]:
    url = database(base, "lossless_bench_w")
    ctx = multiprocessing.get_context("spawn")
    go = ctx.Event()
    readies = [ctx.Event() for _ in range(n)]
    convs = [f"conv-{i // per_conversation}" for i in range(n)]
    with lossless.open(url, embedder=None) as mem:
        for c in sorted(set(convs)):
            mem.conversation(c)
    procs = [ctx.Process(target=_writer, args=(url, i, convs[i], per_writer, batch, readies[i], go)) for i in range(n)]
    for p in procs:
        p.start()
    for r in readies:
        r.wait(timeout=600)
    t0 = time.perf_counter()
    go.set()
    for p in procs:
        p.join()
    seconds = time.perf_counter() - t0
    failed = [p.exitcode for p in procs if p.exitcode != 0]
    with lossless.open(url, embedder=None) as mem:
        t1 = time.perf_counter()
        problems = mem.verify()
        verify_s = time.perf_counter() - t1
        total = 0
        gap_free = True
        lost = 0
        summaries = 0
        for c in sorted(set(convs)):
            msgs = mem.conversation(c).messages()
            total += len(msgs)
            gap_free &= [m.seq for m in msgs] == list(range(1, len(msgs) + 1))
            writers_here = [i for i in range(n) if convs[i] == c]
            for i in writers_here:
                tags = [str(m.content).split("]")[0] for m in msgs if str(m.content).startswith(f"[w{i}:")]
                lost += per_writer - len(tags)
                gap_free &= tags == [f"[w{i}:{j}" for j in range(per_writer)]  # each writer's order kept
            summaries += len(mem.conversation(c).summaries())
    reference = single_sqlite_writer(per_writer, batch)
    return {
        "writers": n, "per_writer": per_writer, "conversations": len(set(convs)), "batch": batch,
        "messages": total, "expected": n * per_writer, "lost": lost, "failed_writers": len(failed),
        "seq_gap_free_and_ordered": gap_free, "verify_problems": len(problems), "summaries": summaries,
        "seconds": round(seconds, 1), "msgs_per_s": round(total / seconds, 1), "verify_s": round(verify_s, 2),
        "reference_one_sqlite_writer_msgs_per_s": reference,
    }


def single_sqlite_writer(count: int, batch: int) -> float:
    """The reference: one process writing the same kind of messages the same way into a
    SQLite file (SQLite has one writer at a time, so this is its ceiling for the load)."""
    rows = list(synth.messages(count, seed=999))
    with tempfile.TemporaryDirectory() as tmp, lossless.open(Path(tmp) / "ref.db", context_window=WINDOW,
                                                           embedder=None) as mem:
        conv = mem.conversation("ref")
        t0 = time.perf_counter()
        for i in range(0, count, batch):
            conv.add_many(rows[i : i + batch])
        mem.wait_idle()
        return round(count / (time.perf_counter() - t0), 1)


# -- assemble with a query ------------------------------------------------------------------


def ingest(mem: lossless.Memory, messages: int, conversations: int) -> float:
    per = messages // conversations
    t0 = time.perf_counter()
    for c in range(conversations):
        conv = mem.conversation(f"c{c:04d}")
        rows = list(synth.messages(per, seed=c))
        for i in range(0, per, 500):
            conv.add_many(rows[i : i + 500])
    mem.wait_idle()
    return time.perf_counter() - t0


def assemble_latency(mem: lossless.Memory, conversations: int, repeats: int) -> dict[str, float]:
    rng = random.Random(7)
    out: list[float] = []
    for k in range(repeats):
        conv = mem.conversation(f"c{rng.randrange(conversations):04d}")
        t = time.perf_counter()
        ctx = conv.assemble(budget_tokens=BUDGET, query=QUERIES[k % len(QUERIES)])
        out.append((time.perf_counter() - t) * 1000)
        assert ctx.tokens <= BUDGET
    return {"p50_ms": pct(out, 0.5), "p99_ms": pct(out, 0.99)}


def assemble_side_by_side(base: str, messages: int, conversations: int, repeats: int) -> dict[str, Any]:
    result: dict[str, Any] = {"messages": messages, "conversations": conversations, "budget": BUDGET}
    with tempfile.TemporaryDirectory() as tmp:
        for name, target in (("sqlite", str(Path(tmp) / "bench.db")), ("postgres", database(base, "lossless_bench_a"))):
            with lossless.open(target, context_window=WINDOW, embedder=None) as mem:
                seconds = ingest(mem, messages, conversations)
                assemble_latency(mem, conversations, 5)  # warm caches and prepared statements
                result[name] = {"ingest_msgs_per_s": round(messages / seconds, 1),
                                **assemble_latency(mem, conversations, repeats)}
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", default=os.environ.get("LOSSLESS_BENCH_PG_URL"))
    ap.add_argument("--writers", type=int, default=16)
    ap.add_argument("--per-writer", type=int, default=5000)
    ap.add_argument("--per-conversation", type=int, default=4, help="writers sharing one conversation")
    ap.add_argument("--batch", type=int, default=1, help="messages per conv.add_many call of a writer")
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--conversations", type=int, default=100)
    ap.add_argument("--large", action="store_true", help="1M messages over 1,000 conversations")
    ap.add_argument("--repeats", type=int, default=50)
    ap.add_argument("--skip-writers", action="store_true")
    ap.add_argument("--skip-assemble", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.large:
        args.messages, args.conversations = 1_000_000, 1_000
    os.environ.setdefault("LOSSLESS_EMBEDDER", "none")
    report: dict[str, Any] = {}
    with server(args.url) as base:
        if not args.skip_writers:
            report["writers"] = writers(base, args.writers, args.per_writer, args.per_conversation, args.batch)
        if not args.skip_assemble:
            report["assemble"] = assemble_side_by_side(base, args.messages, args.conversations, args.repeats)
    if args.json:
        print(json.dumps(report, indent=2))
        return
    if "writers" in report:
        w = report["writers"]
        print(f"writers: {w['writers']} x {w['per_writer']} into {w['conversations']} conversations: "
              f"{w['msgs_per_s']} msg/s, lost {w['lost']}, gap-free {w['seq_gap_free_and_ordered']}, "
              f"verify problems {w['verify_problems']}")
    if "assemble" in report:
        a = report["assemble"]
        for name in ("sqlite", "postgres"):
            r = a[name]
            print(f"{name}: ingest {r['ingest_msgs_per_s']} msg/s, assemble+query p50 {r['p50_ms']} ms, "
                  f"p99 {r['p99_ms']} ms ({a['messages']} messages / {a['conversations']} conversations)")


if __name__ == "__main__":
    main()
