"""What one tenant's oversized chats cost the context proxy, and another tenant meanwhile.

A real ``lossless serve`` process (with its background worker, on a fresh SQLite file, two
keyed tenants) in front of the fake OpenAI-compatible provider (tests/fake_openai.py).
Tenant A sends chats of ``--messages`` messages (about 7.8 MB of JSON by default, under the
8 MiB body limit) to ``POST /v1/chat/completions``; tenant B reads its own small
conversation (``GET …/messages?limit=50``) in a loop. Two runs per variant, each on a
fresh server:

* **one**: a single big chat, alone (``--repeat`` times, one after another): its time
  (median) and the server's peak RSS (VmHWM, reset before each) above its RSS before it;
* **four**: four big chats at once (four conversations) while B reads: the wall time of the
  four, their status codes, the peak RSS, and B's read latency (p50 / p99 / max);
* **four under the cap**: the same with chats of ``--under-cap`` messages (9,000 by
  default, under the default ``--max-request-messages``), which the caps let through:
  what the per-tenant concurrency and the cheaper path leave of the stall.

``--shape one`` sends one big user message instead of many small ones (the recall query is
then that whole message). Variants, side by side in one run:

* ``old``: the code at ``--baseline-src`` (a ``src`` directory exported from an older
  commit, e.g. ``git archive 4d72e4d src | tar -x -C /tmp/base``), when given;
* ``caps off``: this code with ``--max-request-messages 0 --tenant-concurrency 0``;
* ``caps on``: this code with its defaults.

Run:  python bench/bench_proxy_load.py [--baseline-src /tmp/base/src] [--shape many|one] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).parent.parent))
from lossless.server.run import free_port
from tests.fake_openai import FakeOpenAIServer

WORDS = ("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "theta", "kappa", "lambda", "sigma", "deploy",
         "cache", "port", "billing", "export", "retry", "latency", "refund", "invoice", "token", "rotate",
         "schedule", "nightly", "backup")


def big_chat(messages: int, shape: str, seed: int) -> list[dict[str, str]]:
    """About 7.8 MB of chat: ``messages`` messages of ~195 characters, or (shape ``one``)
    one user message of the same total size."""
    rng = random.Random(seed)

    def text(chars: int) -> str:
        out: list[str] = []
        size = 0
        while size < chars:
            word = rng.choice(WORDS)
            out.append(word)
            size += len(word) + 1
        return " ".join(out)

    if shape == "one":
        return [{"role": "user", "content": text(messages * 190)}]
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": text(150)} for i in range(messages)]


def _proc_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def _reset_peak(pid: int) -> None:
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # resets VmHWM to the current RSS (Linux >= 4.0)


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))] if ordered else 0.0


class Server:
    """``lossless serve`` in a subprocess on a fresh database with tenants ``a`` and ``b``."""

    def __init__(self, upstream: str, src: str | None, flags: list[str]) -> None:
        self.dir = tempfile.TemporaryDirectory(prefix="lossless-proxy-load-")
        self.db = os.path.join(self.dir.name, "memory.db")
        self.env = {**os.environ, "PYTHONPATH": src} if src else dict(os.environ)
        self.keys = {t: self._cli("keys", "create", "--tenant", t).strip() for t in ("a", "b")}
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "lossless", "--db", self.db, "serve", "--port", str(self.port),
             "--upstream", upstream, "--upstream-key", "sk-fake", "--log-level", "warning", *flags],
            env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:  # up, and its worker thread done loading the embedding model
            try:
                health = httpx.get(self.url + "/v1/lossless/health", timeout=5, headers=self.headers("a"))
                if health.status_code == 200 and health.json().get("worker", {}).get("state") == "idle":
                    time.sleep(1.0)
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.close()
        raise RuntimeError("lossless serve did not start")

    def _cli(self, *args: str) -> str:
        return subprocess.run([sys.executable, "-m", "lossless", "--db", self.db, *args], env=self.env,
                              check=True, capture_output=True, text=True).stdout

    def headers(self, tenant: str, conversation: str | None = None) -> dict[str, str]:
        out = {"authorization": f"Bearer {self.keys[tenant]}"}
        if conversation:
            out["x-lossless-conversation"] = conversation
        return out

    def close(self) -> None:
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.dir.cleanup()


def _chat(server: Server, body: bytes, conversation: str) -> tuple[int, float]:
    t0 = time.perf_counter()
    r = httpx.post(server.url + "/v1/chat/completions", content=body, timeout=900,
                   headers={**server.headers("a", conversation), "content-type": "application/json"})
    return r.status_code, time.perf_counter() - t0


def _seed_b(server: Server) -> None:
    msgs = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"b message {i} about the billing port"}
            for i in range(50)]
    r = httpx.post(server.url + "/v1/lossless/conversations/b-1/messages", json={"messages": msgs},
                   headers=server.headers("b"), timeout=60)
    r.raise_for_status()


def run_one(server: Server, body: bytes, repeat: int) -> dict[str, Any]:
    """The big chat ``repeat`` times, one after the other (new conversations): the median
    time, and the highest peak RSS above the RSS before each."""
    pid = server.proc.pid
    times: list[float] = []
    peaks: list[float] = []
    statuses: list[int] = []
    for i in range(repeat):
        _reset_peak(pid)
        before = _proc_kb(pid, "VmRSS")
        status, seconds = _chat(server, body, f"big-0-{i}")
        statuses.append(status)
        times.append(seconds)
        peaks.append((_proc_kb(pid, "VmHWM") - before) / 1024)
    return {"statuses": statuses, "seconds_median": round(statistics.median(times), 2),
            "seconds": [round(t, 2) for t in times], "peak_rss_mb_above_start": round(max(peaks), 1)}


def run_four(server: Server, body: bytes) -> dict[str, Any]:
    """Four chats of ``body`` at once from tenant A, while tenant B reads."""
    _seed_b(server)
    pid = server.proc.pid
    _reset_peak(pid)
    before = _proc_kb(pid, "VmRSS")
    results: list[tuple[int, float]] = []
    lock = threading.Lock()

    def big(i: int) -> None:
        out = _chat(server, body, f"big-{i + 1}")
        with lock:
            results.append(out)

    threads = [threading.Thread(target=big, args=(i,)) for i in range(4)]
    reads: list[float] = []
    failed = 0
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    with httpx.Client(headers=server.headers("b"), timeout=120) as client:
        while any(t.is_alive() for t in threads):
            r0 = time.perf_counter()
            r = client.get(server.url + "/v1/lossless/conversations/b-1/messages", params={"limit": 50})
            reads.append(time.perf_counter() - r0)
            failed += r.status_code != 200
            time.sleep(0.05)
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    statuses: dict[str, int] = {}
    for status, _ in results:
        statuses[str(status)] = statuses.get(str(status), 0) + 1
    return {"wall_seconds": round(wall, 2), "statuses": statuses,
            "peak_rss_mb_above_start": round((_proc_kb(pid, "VmHWM") - before) / 1024, 1),
            "b_reads": len(reads), "b_read_errors": failed,
            "b_read_p50_ms": round(_pct(reads, 50) * 1000, 1), "b_read_p99_ms": round(_pct(reads, 99) * 1000, 1),
            "b_read_max_ms": round(max(reads, default=0.0) * 1000, 1),
            "b_read_mean_ms": round(statistics.fmean(reads) * 1000, 1) if reads else 0.0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=40_000, help="messages per big chat (default: 40,000, ~7.8 MB)")
    ap.add_argument("--under-cap", type=int, default=9_000, help="messages per chat of the third run (default: 9,000)")
    ap.add_argument("--shape", choices=("many", "one"), default="many")
    ap.add_argument("--baseline-src", help="a src directory of older code to run as the 'old' variant")
    ap.add_argument("--repeat", type=int, default=3, help="single big requests per variant (default: 3)")
    ap.add_argument("--skip-four", action="store_true", help="only the single-request run")
    ap.add_argument("--only", action="append", choices=("old", "caps off", "caps on"), help="run only these variants")
    ap.add_argument("--json", metavar="PATH", help="write the results as JSON here ('-': stdout)")
    args = ap.parse_args()

    body = json.dumps({"model": "gpt-4o", "messages": big_chat(args.messages, args.shape, 1)}).encode()
    under = json.dumps({"model": "gpt-4o", "messages": big_chat(args.under_cap, args.shape, 2)}).encode()
    variants: list[tuple[str, str | None, list[str]]] = []
    if args.baseline_src:
        variants.append(("old", args.baseline_src, []))
    variants += [("caps off", None, ["--max-request-messages", "0", "--tenant-concurrency", "0"]),
                 ("caps on", None, [])]
    variants = [v for v in variants if not args.only or v[0] in args.only]
    fake = FakeOpenAIServer()
    fake.responder = lambda request: "ok"
    fake.start()
    out: dict[str, Any] = {"body_mb": round(len(body) / 1e6, 2), "messages": args.messages, "shape": args.shape,
                           "under_cap_messages": args.under_cap, "under_cap_body_mb": round(len(under) / 1e6, 2),
                           "variants": {}}
    try:
        for name, src, flags in variants:
            result: dict[str, Any] = {}
            server = Server(fake.base_url, src, flags)
            try:
                result["one"] = run_one(server, body, args.repeat)
            finally:
                server.close()
            fake.requests.clear()
            for run, chat in (("four", body), ("four_under_cap", under)):
                if args.skip_four:
                    break
                server = Server(fake.base_url, src, flags)
                try:
                    result[run] = run_four(server, chat)
                finally:
                    server.close()
                fake.requests.clear()
            out["variants"][name] = result
            print(f"{name}: {json.dumps(result)}", file=sys.stderr, flush=True)
    finally:
        fake.close()
    if args.json == "-":
        print(json.dumps(out, indent=2))
    elif args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    else:
        print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
