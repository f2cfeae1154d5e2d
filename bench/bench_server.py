"""HTTP server load benchmark: requests/s and add / assemble latency through the REST API
on loopback, beside the same calls made directly on the Python API in the same run.

Each of ``--threads`` client threads owns one conversation (seeded with ``--seed-messages``
messages) and makes ``--requests`` requests over one keep-alive connection, alternating
``POST .../messages`` (one message) and ``POST .../assemble`` (``--budget`` tokens, a
query every other time). Requests carry an API key (hashed lookup on every request)
unless ``--no-key``. The reference does the same calls with ``conv.add`` /
``conv.assemble`` from the same number of threads on another conversation set of the
same database, so the difference is what HTTP, JSON, auth and the thread hops cost.

Run:  python bench/bench_server.py [--threads 8] [--requests 2000] [--json]
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).parent))
import synth

import lossless
from lossless.server.app import create_app
from lossless.server.keys import APIKeys
from lossless.server.run import BackgroundServer

QUERIES = ["which port did the billing API move to", "ERR_4242 retry", "p99 latency of the cache layer",
           "nightly export failed", "version 2.17.1"]


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))] if ordered else 0.0


def _summary(latencies: dict[str, list[float]], errors: int, seconds: float) -> dict[str, Any]:
    total = sum(len(v) for v in latencies.values()) + errors
    out: dict[str, Any] = {"requests": total, "errors": errors, "seconds": round(seconds, 2),
                           "requests_per_s": round(total / seconds, 1) if seconds else 0.0}
    for op, values in latencies.items():
        ms = [v * 1000 for v in values]
        out[op] = {"count": len(ms), "p50_ms": round(pct(ms, 50), 2), "p99_ms": round(pct(ms, 99), 2),
                   "mean_ms": round(statistics.fmean(ms), 2) if ms else 0.0}
    return out


def _run(threads: int, requests: int, work: Callable[[int, int], str]) -> dict[str, Any]:
    """``work(thread, i)`` does request i of a thread and returns its op name (raises on error)."""
    latencies: dict[str, list[float]] = {"add": [], "assemble": []}
    errors = [0]
    lock = threading.Lock()
    start = threading.Barrier(threads + 1)

    def client(t: int) -> None:
        mine: dict[str, list[float]] = {"add": [], "assemble": []}
        failed = 0
        start.wait()
        for i in range(requests):
            t0 = time.perf_counter()
            try:
                op = work(t, i)
            except Exception:
                failed += 1
                continue
            mine[op].append(time.perf_counter() - t0)
        with lock:
            for op, values in mine.items():
                latencies[op].extend(values)
            errors[0] += failed

    pool = [threading.Thread(target=client, args=(t,)) for t in range(threads)]
    for thread in pool:
        thread.start()
    start.wait()
    t0 = time.perf_counter()
    for thread in pool:
        thread.join()
    return _summary(latencies, errors[0], time.perf_counter() - t0)


def _message(t: int, i: int) -> dict[str, Any]:
    role = "user" if i % 4 == 0 else "assistant"
    return {"role": role, "content": f"Thread {t} request {i}: service-{i % 50} answered in {i % 97} ms; "
                                     f"we decided to keep port {5000 + i % 300}. " + "detail " * 30}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--requests", type=int, default=2000, help="per thread")
    ap.add_argument("--seed-messages", type=int, default=500, help="messages in each conversation before the run")
    ap.add_argument("--budget", type=int, default=2048)
    ap.add_argument("--window", type=int, default=16384)
    ap.add_argument("--no-key", action="store_true", help="keyless (loopback) instead of a bearer key")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    logging.getLogger("lossless").setLevel(logging.ERROR)

    with tempfile.TemporaryDirectory() as tmp:
        mem = lossless.open(Path(tmp) / "bench.db", context_window=args.window, embedder=None)
        headers: dict[str, str] = {}
        namespace = ""
        if not args.no_key:
            _, key = APIKeys(mem.store).create("bench")
            headers["authorization"] = f"Bearer {key}"
            namespace = "@bench/"  # where the key's tenant keeps its conversations (lossless.server.tenancy)
        seed = [{k: v for k, v in m.items() if k != "created_at"} for m in synth.messages(args.seed_messages, seed=7)]
        for t in range(args.threads):
            mem.conversation(f"{namespace}http-{t}").add_many(seed)
            mem.conversation(f"direct-{t}").add_many(seed)

        def direct(t: int, i: int) -> str:
            conv = mem.conversation(f"direct-{t}")
            if i % 2 == 0:
                conv.add(**_message(t, i))
                return "add"
            ctx = conv.assemble(budget_tokens=args.budget, query=QUERIES[i % len(QUERIES)] if i % 4 == 1 else None)
            assert ctx.tokens <= args.budget
            return "assemble"

        with BackgroundServer(create_app(mem), log_level="error") as server:
            clients = [httpx.Client(base_url=server.url, headers=headers, timeout=60) for _ in range(args.threads)]
            prefix = "/v1/lossless/conversations/http-"

            def http(t: int, i: int) -> str:
                client = clients[t]
                if i % 2 == 0:
                    client.post(f"{prefix}{t}/messages", json=_message(t, i)).raise_for_status()
                    return "add"
                body: dict[str, Any] = {"budget_tokens": args.budget}
                if i % 4 == 1:
                    body["query"] = QUERIES[i % len(QUERIES)]
                response = client.post(f"{prefix}{t}/assemble", json=body)
                response.raise_for_status()
                assert response.json()["tokens"] <= args.budget
                return "assemble"

            over_http = _run(args.threads, args.requests, http)
            for client in clients:
                client.close()
        reference = _run(args.threads, args.requests, direct)
        problems = mem.verify()
        mem.close()

    result = {
        "config": {"threads": args.threads, "requests_per_thread": args.requests, "seed_messages": args.seed_messages,
                   "budget": args.budget, "window": args.window, "auth": "none" if args.no_key else "bearer key"},
        "http": over_http,
        "direct_python_api": reference,
        "http_overhead_ms": {op: round(over_http[op]["p50_ms"] - reference[op]["p50_ms"], 2)
                             for op in ("add", "assemble")},
        "verify_problems": len(problems),
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"{args.threads} threads x {args.requests} requests, {result['config']['auth']}")
    for name, run in (("HTTP", over_http), ("Python API", reference)):
        print(f"{name:>10}: {run['requests_per_s']:>8,.1f} req/s, errors {run['errors']}, "
              f"add p50/p99 {run['add']['p50_ms']}/{run['add']['p99_ms']} ms, "
              f"assemble p50/p99 {run['assemble']['p50_ms']}/{run['assemble']['p99_ms']} ms")


if __name__ == "__main__":
    main()
