"""Nothing waits: what a caller of lossless pays while compaction and embedding run in the
background worker, each figure beside a reference from the same run.

  latency     600 single ``conv.add`` calls, 2048-token window: p50/p99/max, with the
              offline summarizer and with an OpenAI-compatible summarizer that answers in
              1.5 s (a fake server on 127.0.0.1), in the default background mode and, for
              reference, inline (the caller compacts); then how long until the summaries
              land and who wrote them
  outage      the same 600 adds with the provider down (every call HTTP 500, the SDK's own
              retries and backoff), against the offline summarizer: the caller's time, and
              the time until the backlog is done (the circuit breaker opens after three
              failures in a row; then the fallback writes at once)
  ingest      single adds against bare SQLite + FTS5 committing each row, and add_many in
              batches of 1,000 against the same rows batched (bench_scale's reference)
  first query import N messages (OpenAI JSONL, lossless.importers), then the first
              assemble with a query, and the next ones, while the worker is still behind
  assembly    assemble with a query (budget 4096, 20 questions) at 1k and at N messages,
              once the worker has caught up; and the worker's catch-up rate on the way

    python bench/bench_worker.py --json out.json              # 50k messages (the embedding of
                                                              # 50k messages takes a while here)
    python bench/bench_worker.py --large 5000 --single 10000  # a quicker run
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import apsw

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent))
import synth
from bench_scale import QUERIES, Reference

import lossless
from lossless.core.render import content_text
from lossless.importers import import_file
from lossless.summarize.openai_chat import OpenAISummarizer
from tests.fake_openai import FakeOpenAIServer

QUESTIONS = [*QUERIES, "who owns the deploy pipeline?", "when did the migration finish?", "latency budget for search",
             "which region hosts the replica?", "what broke in the last release?", "cache eviction policy",
             "数据库迁移", "rate limit for the public API", "who reviewed the retry patch?", "on-call rotation",
             "disk usage alert threshold", "feature flag for the new editor"]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 2)


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _rows(n: int, seed: int = 11) -> list[dict[str, Any]]:
    return list(synth.messages(n, seed=seed))


def _llm(fake: FakeOpenAIServer) -> OpenAISummarizer:
    return OpenAISummarizer("fake-summarizer", base_url=fake.base_url, api_key="x")


# -- latency and outage ------------------------------------------------------------------


def _adds(folder: Path, name: str, rows: list[dict[str, Any]], summarizer: Any, mode: str) -> dict[str, Any]:
    path = folder / f"{name}.db"
    mem = lossless.open(path, context_window=2048, summarizer=summarizer, embedder=None, compaction=mode)
    conv = mem.conversation("c")
    times: list[float] = []
    t0 = time.perf_counter()
    for row in rows:
        t = time.perf_counter()
        conv.add(**row)
        times.append(time.perf_counter() - t)
    caller = time.perf_counter() - t0
    t1 = time.perf_counter()
    caught_up = mem.wait_idle(timeout=1800)
    landed = time.perf_counter() - t1
    summaries = conv.summaries()
    out = {
        "mode": mode, "adds": len(rows), "caller_seconds": round(caller, 2),
        "add_p50_ms": pct(times, 0.5), "add_p99_ms": pct(times, 0.99), "add_max_ms": round(max(times) * 1000, 2),
        "seconds_until_done": round(landed, 2), "caught_up": caught_up,
        "summaries": len(summaries),
        "by_summarizer": dict(sorted({s.summarizer: sum(1 for x in summaries if x.summarizer == s.summarizer)
                                      for s in summaries}.items())),
        "breaker": mem.stats().breaker,
    }
    mem.close()
    return out


def latency(folder: Path, n: int, inline: bool) -> dict[str, Any]:
    rows = _rows(n)
    out: dict[str, Any] = {}
    with FakeOpenAIServer() as fake:
        fake.delay = 1.5
        for label, make in (("offline", lambda: None), ("llm_1.5s", lambda: _llm(fake))):
            for mode in ("background", "inline") if inline else ("background",):
                key = f"{label}_{mode}"
                out[key] = _adds(folder, key, rows, make(), mode)
                say(f"  latency {key}: p50 {out[key]['add_p50_ms']} ms, p99 {out[key]['add_p99_ms']} ms, "
                    f"done {out[key]['seconds_until_done']} s later, {out[key]['summaries']} summaries "
                    f"{out[key]['by_summarizer']}")
    return out


def outage(folder: Path, n: int, inline: bool) -> dict[str, Any]:
    rows = _rows(n)
    out: dict[str, Any] = {"offline": _adds(folder, "outage-offline", rows, None, "background")}
    with FakeOpenAIServer() as fake:
        fake.retry_after_ms = None  # the SDK's own backoff between its retries, as in a real outage
        fake.fail_next(10**6, status=500)
        for mode in ("background", "inline") if inline else ("background",):
            out[f"down_{mode}"] = r = _adds(folder, f"outage-{mode}", rows, _llm(fake), mode)
            r["provider_requests"] = len(fake.chat_requests())
            fake.requests.clear()
    for key, r in out.items():
        say(f"  outage {key}: caller {r['caller_seconds']} s, done {r['seconds_until_done']} s later, "
            f"{r.get('provider_requests', 0)} provider requests")
    base = out["offline"]
    for key in [k for k in out if k.startswith("down_")]:
        out[key]["caller_vs_offline"] = round(out[key]["caller_seconds"] / base["caller_seconds"], 2)
        total = out[key]["caller_seconds"] + out[key]["seconds_until_done"]
        out[key]["total_vs_offline"] = round(total / (base["caller_seconds"] + base["seconds_until_done"]), 2)
    return out


# -- ingest ------------------------------------------------------------------------------


class RowReference(Reference):
    """Bench_scale's bare apsw + FTS5 reference, committing every row on its own."""

    def add_each(self, rows: list[dict[str, Any]]) -> float:
        t0 = time.perf_counter()
        for r in rows:
            self.n += 1
            text = content_text(r["content"], r.get("tool_calls"))
            self.conn.execute("BEGIN IMMEDIATE")
            self.conn.execute("INSERT INTO m VALUES (?, ?, ?, ?, ?, ?)",
                              (self.n, "c", self.n, r["role"], text, r["created_at"].isoformat()))
            self.conn.execute("INSERT INTO m_fts (rowid, text) VALUES (?, ?)", (self.n, text))
            self.conn.execute("COMMIT")
        return time.perf_counter() - t0


def ingest(folder: Path, single: int, bulk: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    rows = _rows(max(single, bulk), seed=5)
    for mode in ("background", "deferred"):
        mem = lossless.open(folder / f"single-{mode}.db", context_window=32_000, embedder=None, compaction=mode)
        conv = mem.conversation("c")
        t0 = time.perf_counter()
        for row in rows[:single]:
            conv.add(**row)
        secs = time.perf_counter() - t0
        t1 = time.perf_counter()
        mem.wait_idle()
        out[f"single_{mode}"] = {"msgs_per_s": round(single / secs), "seconds_until_done": round(
            time.perf_counter() - t1, 1)}
        mem.close()
    ref = RowReference(folder / "single-ref.db")
    out["single_reference"] = {"msgs_per_s": round(single / ref.add_each(rows[:single]))}
    mem = lossless.open(folder / "bulk.db", context_window=32_000, embedder=None)
    conv = mem.conversation("c")
    t0 = time.perf_counter()
    for i in range(0, bulk, 1000):
        conv.add_many(rows[i:i + 1000])
    secs = time.perf_counter() - t0
    t1 = time.perf_counter()
    mem.wait_idle()
    out["bulk"] = {"msgs_per_s": round(bulk / secs), "seconds_until_done": round(time.perf_counter() - t1, 1)}
    mem.close()
    out["bulk_reference"] = {"msgs_per_s": round(bulk / Reference(folder / "bulk-ref.db").add(rows[:bulk]))}
    for kind in ("single_background", "single_deferred"):
        out[kind]["share_of_reference"] = round(out[kind]["msgs_per_s"] / out["single_reference"]["msgs_per_s"], 3)
    out["bulk"]["share_of_reference"] = round(out["bulk"]["msgs_per_s"] / out["bulk_reference"]["msgs_per_s"], 3)
    for key, r in out.items():
        say(f"  ingest {key}: {r['msgs_per_s']:,} msg/s" + (f" ({r['share_of_reference']} of the reference)"
                                                          if "share_of_reference" in r else ""))
    return out


# -- the first query, assembly, catch-up ---------------------------------------------------


def _jsonl(path: Path, rows: list[dict[str, Any]], conversation: str) -> None:
    with path.open("w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps({**r, "created_at": r["created_at"].isoformat(), "conversation": conversation},
                               ensure_ascii=False) + "\n")


def _queries(conv: lossless.Conversation, repeats: int) -> list[float]:
    times = []
    for k in range(repeats):
        t = time.perf_counter()
        conv.assemble(budget_tokens=4096, query=QUESTIONS[k % len(QUESTIONS)])
        times.append(time.perf_counter() - t)
    return times


def imported(folder: Path, n: int, repeats: int) -> dict[str, Any]:
    """Import ``n`` messages into a fresh store (default set-up: background worker, the
    local embedding model if installed), query at once, then wait for the worker."""
    source = folder / f"import-{n}.jsonl"
    _jsonl(source, _rows(n, seed=23), "imported")
    mem = lossless.open(folder / f"import-{n}.db", context_window=8192)
    t0 = time.perf_counter()
    import_file(mem, source)
    import_seconds = time.perf_counter() - t0
    conv = mem.conversation("imported")
    t = time.perf_counter()
    ctx = conv.assemble(budget_tokens=4096, query="which port does the billing API use?")
    first = time.perf_counter() - t
    during = _queries(conv, repeats)
    lag = ctx.lag
    out: dict[str, Any] = {
        "messages": n, "embedder": mem.embedder.model if mem.embedder else None,
        "import_seconds": round(import_seconds, 2), "first_query_ms": round(first * 1000, 1),
        "query_during_backlog_p50_ms": pct(during, 0.5),
        "lag_at_first_query": lag and {"raw_messages": lag.raw_messages, "units_not_embedded": lag.units_not_embedded,
                                       "messages_not_indexed": lag.messages_not_indexed},
    }
    t = time.perf_counter()
    done = mem.wait_idle(timeout=4 * 3600)
    catch_up = time.perf_counter() - t
    worker = mem.stats().worker
    out["catch_up"] = {"done": done, "seconds": round(catch_up, 1), "units_embedded": worker["units_embedded"],
                       "summaries": worker["summaries_written"],
                       "units_per_second": round(worker["units_embedded"] / catch_up, 1) if catch_up else 0.0,
                       "messages_per_second": round(n / (import_seconds + catch_up), 1)}
    steady = _queries(conv, repeats)
    out["query_caught_up_p50_ms"] = pct(steady, 0.5)
    out["query_caught_up_p99_ms"] = pct(steady, 0.99)
    say(f"  {n:,} imported in {import_seconds:.1f} s: first query {out['first_query_ms']} ms, during the backlog "
        f"p50 {out['query_during_backlog_p50_ms']} ms; caught up {catch_up:.0f} s later "
        f"({out['catch_up']['units_per_second']} units/s); then p50 {out['query_caught_up_p50_ms']} ms")
    mem.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--adds", type=int, default=600, help="messages for latency and outage (default 600)")
    ap.add_argument("--single", type=int, default=50_000, help="single adds for ingest (default 50k)")
    ap.add_argument("--bulk", type=int, default=50_000, help="messages for bulk ingest (default 50k)")
    ap.add_argument("--small", type=int, default=5_000, help="the smaller import (default 5k)")
    ap.add_argument("--large", type=int, default=50_000, help="the larger import (default 50k)")
    ap.add_argument("--assembly-small", type=int, default=1_000, help="the small store for assembly growth")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--no-inline", action="store_true", help="skip the inline (caller compacts) references")
    ap.add_argument("--only", nargs="+", choices=("latency", "outage", "ingest", "imports"), default=None)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    parts = set(args.only or ("latency", "outage", "ingest", "imports"))
    report: dict[str, Any] = {"machine": {"cpus": os.cpu_count(), "sqlite": apsw.sqlite_lib_version()}}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        if "latency" in parts:
            say("latency")
            report["latency"] = latency(folder, args.adds, not args.no_inline)
        if "outage" in parts:
            say("outage")
            report["outage"] = outage(folder, args.adds, not args.no_inline)
        if "ingest" in parts:
            say("ingest")
            report["ingest"] = ingest(folder, args.single, args.bulk)
        if "imports" in parts:
            say("imports")
            runs = {n: imported(folder, n, args.repeats) for n in sorted({args.assembly_small, args.small, args.large})}
            report["imports"] = {str(n): r for n, r in runs.items()}
            small, large = runs[args.assembly_small], runs[args.large]
            report["assembly_growth"] = {
                "small": args.assembly_small, "large": args.large,
                "p50_small_ms": small["query_caught_up_p50_ms"], "p50_large_ms": large["query_caught_up_p50_ms"],
                "growth": round(large["query_caught_up_p50_ms"] / small["query_caught_up_p50_ms"], 2),
                "median_of_p50s": statistics.median([r["query_caught_up_p50_ms"] for r in runs.values()]),
            }
            say(f"  assembly with a query, caught up: {report['assembly_growth']}")
    text = json.dumps(report, indent=2, ensure_ascii=False, default=str)
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
