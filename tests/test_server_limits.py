"""What a heavy or hostile client may cost `lossless serve` (issue 30, found as an attacker),
each over real HTTP on 127.0.0.1: the messages one request may carry and the requests one
tenant may run at once (so one tenant cannot stall another), the recall query read only as
far as it matters, connections that never finish their headers, clients that hang up
mid-body, and files indexed by another process while the server runs."""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lossless
from lossless.context.assemble import MAX_QUERY_CHARS
from lossless.server.app import create_app
from lossless.server.keys import APIKeys
from lossless.server.limits import Limits
from lossless.server.run import BackgroundServer, free_port
from lossless.server.state import Upstream
from tests.conftest import StoreTarget, chat
from tests.fake_openai import FakeOpenAIServer, fake_openai
from tests.server_support import served

__all__ = ["fake_openai"]  # the fixture, imported for pytest to find

MODEL = "gpt-4o-mini"
C = "/v1/lossless/conversations"


@pytest.fixture
def memory(store_target: StoreTarget) -> Iterator[lossless.Memory]:
    m = lossless.open(store_target("limits"), context_window=4096, embedder=None)
    yield m
    m.close()


def _error(response: httpx.Response, status: int, type_: str) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["error"]["type"] == type_, body
    message: str = body["error"]["message"]
    return message


def _user(n: int, prefix: str = "m") -> list[dict[str, Any]]:
    return [{"role": "user", "content": f"{prefix} {i}"} for i in range(n)]


# -- the messages one request may carry ----------------------------------------------------


def test_a_request_over_the_message_cap_gets_413_naming_it_and_stores_nothing(
        memory: lossless.Memory, fake_openai: FakeOpenAIServer) -> None:
    upstream = Upstream(fake_openai.base_url, "sk-upstream")
    with served(memory, upstream=upstream, limits=Limits(max_request_messages=4)) as server:
        proxied = httpx.post(f"{server.url}/v1/chat/completions", json={"model": MODEL, "messages": _user(5)},
                             headers={"x-lossless-conversation": "big"})
        message = _error(proxied, 413, "too_many_messages")
        assert "5 messages" in message and "at most 4" in message and "--max-request-messages" in message
        batch = httpx.post(f"{server.url}{C}/big2/messages", json={"messages": _user(5)})
        assert "at most 4" in _error(batch, 413, "too_many_messages")
        assert memory.get_conversation("big") is None and memory.get_conversation("big2") is None
        assert fake_openai.chat_requests() == []  # refused before the provider was asked
        # at the cap, both pass
        fake_openai.enqueue_chat("Four noted.")
        ok = httpx.post(f"{server.url}/v1/chat/completions", json={"model": MODEL, "messages": _user(4)},
                        headers={"x-lossless-conversation": "big"})
        assert ok.status_code == 200, ok.text
        assert httpx.post(f"{server.url}{C}/big2/messages", json={"messages": _user(4)}).status_code == 201
    assert [m.content for m in memory.conversation("big").messages()] == ["m 0", "m 1", "m 2", "m 3", "Four noted."]
    assert memory.conversation("big2").info.message_count == 4


def test_the_default_server_refuses_ten_thousand_and_one_messages(memory: lossless.Memory) -> None:
    with served(memory) as server:
        response = httpx.post(f"{server.url}{C}/flood/messages", json={"messages": _user(10_001)}, timeout=60)
        assert "at most 10,000" in _error(response, 413, "too_many_messages")
    assert memory.get_conversation("flood") is None


# -- the requests one tenant may run at once ----------------------------------------------


def _slow_post(url: str, path: str, key: str, body: bytes) -> socket.socket:
    """A request whose body stops halfway: the server reads it, holding one of the tenant's slots."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=10)
    head = (f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {key}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode()
    sock.sendall(head + body[: len(body) // 2])
    return sock


def test_a_tenant_over_its_concurrency_gets_429_while_another_tenant_still_reads_and_writes(
        memory: lossless.Memory) -> None:
    keys = APIKeys(memory.store)
    a_key, b_key = keys.create("a")[1], keys.create("b")[1]
    limits = Limits(tenant_concurrency=1, tenant_wait_seconds=0.5)
    with served(memory, allow_implicit_tenant=False, limits=limits) as server, \
            httpx.Client(base_url=server.url, headers={"authorization": f"Bearer {a_key}"}, timeout=30) as a, \
            httpx.Client(base_url=server.url, headers={"authorization": f"Bearer {b_key}"}, timeout=30) as b:
        assert b.post(f"{C}/notes/messages", json={"role": "user", "content": "b's first note"}).status_code == 201
        half = json.dumps({"role": "user", "content": "never finished " * 50}).encode()
        slow = _slow_post(server.url, f"{C}/mine/messages", a_key, half)
        try:
            refused = None
            for _ in range(40):  # until the server has taken the slow request in (its slot is then held)
                response = a.post(f"{C}/mine/messages", json={"role": "user", "content": "a second request"})
                if response.status_code == 429:
                    refused = response
                    break
                assert response.status_code == 201, response.text
            assert refused is not None, "tenant a was never refused while its only slot was held"
            message = _error(refused, 429, "too_many_requests")
            assert "--tenant-concurrency" in message and int(refused.headers["retry-after"]) >= 1
            # meanwhile tenant b reads and writes as usual
            read = b.get(f"{C}/notes/messages")
            assert read.status_code == 200 and [m["content"] for m in read.json()["data"]] == ["b's first note"]
            assert b.post(f"{C}/notes/messages", json={"role": "user", "content": "b again"}).status_code == 201
        finally:
            slow.close()
        # the slow client went away: a's slot is free again
        after = None
        for _ in range(20):
            after = a.post(f"{C}/mine/messages", json={"role": "user", "content": "after the slow one"})
            if after.status_code != 429:
                break
        assert after is not None and after.status_code == 201, after.text if after else None
    stored = [m.content for m in memory.conversation("@a/mine").messages()]
    assert "never finished" not in " ".join(str(c) for c in stored)  # nothing of the half body was stored
    assert stored[-1] == "after the slow one"


def test_a_proxied_request_waiting_for_the_provider_holds_no_slot(memory: lossless.Memory,
                                                                   fake_openai: FakeOpenAIServer) -> None:
    """Parallel subagents of one tenant: each holds a slot only while lossless works on it."""
    fake_openai.delay = 1.0  # every answer takes a second, twice the slot's wait
    limits = Limits(tenant_concurrency=1, tenant_wait_seconds=0.5)
    statuses: list[int] = []
    with served(memory, upstream=Upstream(fake_openai.base_url, "sk-upstream"), limits=limits) as server:
        def ask(i: int) -> None:
            r = httpx.post(f"{server.url}/v1/chat/completions", timeout=30,
                           json={"model": MODEL, "messages": [{"role": "user", "content": f"subagent {i}"}]},
                           headers={"x-lossless-conversation": f"sub-{i}"})
            statuses.append(r.status_code)

        threads = [threading.Thread(target=ask, args=(i,)) for i in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
    assert statuses == [200, 200, 200]


def test_serve_flags_set_the_limits(store_target: StoreTarget, tmp_path: Path) -> None:
    """The real command: --max-request-messages and --tenant-concurrency reach the server."""
    db = str(store_target("flags"))
    bad = subprocess.run([sys.executable, "-m", "lossless", "--db", db, "serve", "--max-request-messages", "-1"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "expected an integer >= 0, got '-1'" in bad.stderr
    assert "Traceback" not in bad.stderr
    with _serve(db, "--max-request-messages", "3", "--tenant-concurrency", "1") as url:
        over = httpx.post(f"{url}{C}/c/messages", json={"messages": _user(4)})
        assert "at most 3" in _error(over, 413, "too_many_messages")
        assert httpx.post(f"{url}{C}/c/messages", json={"messages": _user(3)}).status_code == 201



def test_serve_window_is_the_proxys_window(store_target: StoreTarget, fake_openai: FakeOpenAIServer) -> None:
    """`lossless serve --window 2048 --upstream …` in front of a local server whose model has a
    small context: a request for a model the table knows (``gpt-4o``, 128k) got a context
    assembled for the table's window, 30 times what the operator said, which a local server
    cuts without a word (the early detail recall brought back was what it dropped)."""
    db = str(store_target("window"))
    with lossless.open(db) as mem:  # 12k tokens of history, stored under the default window: nothing compacted
        mem.conversation("窗口").add_many(
            [{"role": "user" if i % 2 == 0 else "assistant",
              "content": f"第{i}条：" + "今天我们讨论经济发展和文化历史。" * 8} for i in range(80)])
    with _serve(db, "--window", "2048", "--upstream", fake_openai.base_url) as url:
        question = {"role": "user", "content": "我们讨论的经济发展和文化历史是什么？"}  # recall matches all of it
        r = httpx.post(f"{url}/v1/chat/completions", timeout=60, headers={"X-Lossless-Conversation": "%E7%AA%97%E5%8F%A3"},
                       json={"model": "gpt-4o", "max_tokens": 256, "messages": [question]})
    assert r.status_code == 200, r.text
    assert int(r.headers["x-lossless-context-tokens"]) <= 2048 - 256
    assert len(json.dumps(fake_openai.chat_requests()[-1].body["messages"], ensure_ascii=False)) < 2048 * 3

# -- the recall query ----------------------------------------------------------------------


def _history(memory: lossless.Memory) -> lossless.Conversation:
    conv = memory.conversation("q")
    msgs = chat(80)
    msgs[2] = {**msgs[2], "content": "The quokka sanctuary on Rottnest opens at nine."}
    conv.add_many(msgs)
    # caught up, so no compaction lands between two assemblies that must be the same (CI saw
    # the background worker's summary appear between them: a flaky failure)
    memory.wait_idle()
    return conv


def test_assembly_reads_the_query_only_up_to_max_query_chars(memory: lossless.Memory) -> None:
    """A question is read as far as recall can use it: a pasted 8 MB message as the last user
    turn cost the proxy a minute of term extraction. A word past the limit recalls nothing."""
    conv = _history(memory)
    assert "quokka" in json.dumps(conv.assemble(budget_tokens=600, query="quokka").messages)
    head = ("filler words " * (MAX_QUERY_CHARS // 13 + 1))[:MAX_QUERY_CHARS]
    long = conv.assemble(budget_tokens=600, query=head + " quokka")
    assert "quokka" not in json.dumps(long.messages)
    assert long.messages == conv.assemble(budget_tokens=600, query=head).messages


@settings(max_examples=15)
@given(tail=st.text(min_size=1, max_size=200))
def test_what_follows_max_query_chars_never_changes_the_context(tail: str) -> None:
    memory = lossless.open(":memory:", context_window=4096, embedder=None)
    try:
        conv = _history(memory)
        head = ("quokka opens nine " * (MAX_QUERY_CHARS // 18 + 1))[:MAX_QUERY_CHARS]
        assert (conv.assemble(budget_tokens=600, query=head + tail).messages
                == conv.assemble(budget_tokens=600, query=head).messages)
    finally:
        memory.close()


# -- connections that never finish their headers (slowloris) -----------------------------


def _closed_within(sock: socket.socket, seconds: float, trickle: bytes = b"") -> bool:
    """Whether the server closes ``sock`` within ``seconds`` while we send ``trickle`` a
    byte every 0.1 s (a request line that never ends)."""
    sock.settimeout(0.1)
    deadline = time.monotonic() + seconds
    i = 0
    while time.monotonic() < deadline:
        try:
            if trickle:
                sock.sendall(trickle[i % len(trickle): i % len(trickle) + 1])
                i += 1
            if sock.recv(1024) == b"":
                return True
        except TimeoutError:
            continue
        except (ConnectionResetError, BrokenPipeError):
            return True
    return False


def test_a_connection_trickling_its_headers_is_closed(memory: lossless.Memory) -> None:
    with BackgroundServer(create_app(memory), header_timeout=0.5, start_timeout=15) as server, \
            socket.create_connection((server.host, server.port), timeout=10) as slow:
        slow.sendall(b"GET /heal")
        assert _closed_within(slow, 10, trickle=b"thzzzzzzzz")  # a byte every 0.1 s, never a whole line
        # a client that sends its request in time is served, also after a keep-alive pause
        with httpx.Client(base_url=server.url) as client:
            assert client.get("/healthz").status_code == 200
            assert client.get("/healthz").status_code == 200


def test_a_keep_alive_connection_that_starts_a_request_and_stalls_is_closed(memory: lossless.Memory) -> None:
    """uvicorn's keep-alive timer stops at the first byte of the next request: the header
    deadline starts again after each answer."""
    with BackgroundServer(create_app(memory), header_timeout=0.5, start_timeout=15) as server, \
            socket.create_connection((server.host, server.port), timeout=10) as sock:
        sock.sendall(f"GET /healthz HTTP/1.1\r\nHost: {server.host}:{server.port}\r\n\r\n".encode())
        answer = b""
        while b'{"ok":true}' not in answer:  # bounded by the socket's timeout
            answer += sock.recv(4096)
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHo")
        assert _closed_within(sock, 10, trickle=b"st")


def test_lossless_serve_closes_a_silent_connection(store_target: StoreTarget) -> None:
    """The real command, with --header-timeout."""
    with _serve(str(store_target("silent")), "--header-timeout", "0.5") as url, \
            socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])), timeout=10) as sock:
        assert _closed_within(sock, 10)
        assert httpx.get(f"{url}/healthz").status_code == 200


# -- a client that hangs up mid-body -------------------------------------------------------


def test_a_client_hanging_up_mid_body_is_one_quiet_log_line(memory: lossless.Memory,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    uvicorn_logger = logging.getLogger("uvicorn")  # it does not propagate to the root logger
    uvicorn_logger.addHandler(caplog.handler)
    try:
        with caplog.at_level(logging.DEBUG), served(memory) as server:
            body = json.dumps({"role": "user", "content": "half of this never arrives " * 40}).encode()
            with _slow_post(server.url, f"{C}/gone/messages", "no-key", body):
                pass  # half the body sent, then closed
            for _ in range(100):  # the server notices the hang-up (bounded: 10 s)
                if any("closed the connection" in r.getMessage() for r in caplog.records):
                    break
                time.sleep(0.1)
            assert httpx.post(f"{server.url}{C}/here/messages", json={"role": "user", "content": "x"}).status_code == 201
    finally:
        uvicorn_logger.removeHandler(caplog.handler)
    ours = [r for r in caplog.records if "closed the connection" in r.getMessage()]
    assert len(ours) == 1 and ours[0].levelno == logging.INFO and ours[0].exc_info is None
    assert f"POST {C}/gone/messages" in ours[0].getMessage() and "\n" not in ours[0].getMessage()
    loud = [r for r in caplog.records if r.levelno >= logging.WARNING or r.exc_info]
    assert not loud, [r.getMessage() for r in loud]
    assert memory.get_conversation("gone") is None


# -- files indexed by another process while the server runs -----------------------------


def _cli(db: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lossless", "--db", db, *args], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "LOSSLESS_EMBEDDER": "none"}, check=True)


def _context(url: str, query: str) -> dict[str, Any]:
    response = httpx.post(f"{url}{C}/c1/assemble", json={"query": query}, timeout=60)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_files_indexed_by_another_process_reach_the_running_server(store_target: StoreTarget,
                                                                   tmp_path: Path) -> None:
    db = str(store_target("files"))
    _cli(db, "add", "c1", "--role", "user", "--content", "hello there")
    first, second = tmp_path / "ops", tmp_path / "runbooks"
    first.mkdir()
    second.mkdir()
    (first / "deploy_notes.md").write_text("# Deploy notes\nThe staging cluster listens on port 9137.\n")
    (second / "rollback.md").write_text("# Rollback\nUndo a release with `kubectl rollout undo deploy/web`.\n")
    with _serve(db) as url:
        assert "file" not in _context(url, "/context deploy notes port")["tiers"]  # nothing indexed yet
        _cli(db, "index", str(first))  # another process, while the server runs
        seen = _context(url, "/context deploy notes port")
        assert "file" in seen["tiers"] and "9137" in json.dumps(seen["messages"])
        _cli(db, "index", str(second))  # more files, once the server has an index
        more = _context(url, "/context rollback release undo")
        assert "kubectl rollout undo" in json.dumps(more["messages"])


# -- helpers: a real `lossless serve` -----------------------------------------------------


class _Served:
    def __init__(self, db: str, *flags: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "LOSSLESS_EMBEDDER": "none"}
        self.proc = subprocess.Popen([sys.executable, "-m", "lossless", "--db", db, "serve", "--port",
                                      str(self.port), "--log-level", "warning", *flags],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)

    def __enter__(self) -> str:
        deadline = time.monotonic() + 60
        while True:
            if self.proc.poll() is not None:
                raise AssertionError(self.proc.communicate()[1])
            try:
                if httpx.get(f"{self.url}/healthz").status_code == 200:
                    return self.url
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                self.proc.kill()
                self.proc.communicate()  # (closes its pipes: a leaked one fails a later test's warnings)
                raise AssertionError("lossless serve did not come up")
            time.sleep(0.1)

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        try:
            self.proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()


def _serve(db: str, *flags: str) -> _Served:
    return _Served(db, *flags)
