"""Server hardening (issue: a hostile web page, a noisy tenant and a retrying client): each
finding of the review, over real HTTP on 127.0.0.1 (the fake upstream for the proxy), and
a fuzzing run that must never see a 500 nor a dead server."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lossless
from lossless.cli.main import main
from lossless.server.keys import APIKeys
from lossless.server.state import Upstream
from tests.conftest import StoreTarget, chat
from tests.fake_openai import FakeOpenAIServer, fake_openai
from tests.server_support import json_ready, served

__all__ = ["fake_openai"]  # the fixture, imported for pytest to find

MODEL = "gpt-4o-mini"
C = "/v1/lossless/conversations"


@pytest.fixture
def memory(store_target: StoreTarget, tmp_path: Path) -> Iterator[lossless.Memory]:
    m = lossless.open(store_target("h"), context_window=4096, embedder=None)
    yield m
    m.close()


@pytest.fixture
def server(memory: lossless.Memory, fake_openai: FakeOpenAIServer) -> Iterator[str]:
    with served(memory, upstream=Upstream(fake_openai.base_url, "sk-upstream")) as srv:
        yield srv.url


def _error(response: httpx.Response, status: int, type_: str) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["error"]["type"] == type_, body
    message: str = body["error"]["message"]
    return message


# -- 1. a hostile web page against a keyless server ----------------------------------------


def test_a_cross_site_simple_post_is_refused_and_writes_nothing(server: str, memory: lossless.Memory) -> None:
    memory.memories.add("the operator's note", user=None, agent=None)
    evil = {"origin": "http://evil.example", "content-type": "text/plain"}
    body = json.dumps({"role": "user", "content": "planted"})
    response = httpx.post(f"{server}{C}/c/messages", content=body, headers=evil)
    assert response.status_code in (403, 415)
    _error(httpx.post(f"{server}/v1/lossless/memories/forget", content='{"all": true}', headers=evil), 403, "forbidden")
    # even as JSON, a write from another origin is refused
    _error(httpx.post(f"{server}{C}/c/messages", json={"role": "user", "content": "x"},
                      headers={"origin": "http://evil.example"}), 403, "forbidden")
    _error(httpx.post(f"{server}{C}/c/messages", content=body), 415, "unsupported_media_type")  # no content type
    assert memory.get_conversation("c") is None and memory.memories.count() == 1
    # the server's own page (same origin), and clients that send no Origin (SDKs, curl), may write
    own = httpx.post(f"{server}{C}/c/messages", json={"role": "user", "content": "fine"}, headers={"origin": server})
    assert own.status_code == 201
    assert httpx.post(f"{server}{C}/c/messages", json={"role": "user", "content": "also fine"}).status_code == 201


def test_dns_rebinding_gets_421(server: str) -> None:
    port = server.rsplit(":", 1)[1]
    for host in ("attacker.example", f"attacker.example:{port}", "127.0.0.1.nip.io"):
        _error(httpx.get(f"{server}{C}", headers={"host": host}), 421, "misdirected_request")
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", "localhost"):
        assert httpx.get(f"{server}{C}", headers={"host": host}).status_code == 200
    assert httpx.get(f"{server}/", headers={"host": "attacker.example"}).status_code == 421  # the web page too


def test_allowed_hosts_and_origins_are_configurable(memory: lossless.Memory) -> None:
    with served(memory, allowed_hosts=["memory.example.com"], allowed_origins=["https://app.example.com"]) as srv:
        assert httpx.get(f"{srv.url}{C}", headers={"host": "memory.example.com"}).status_code == 200
        ok = httpx.post(f"{srv.url}{C}/c/messages", json={"role": "user", "content": "hi"},
                        headers={"origin": "https://app.example.com"})
        assert ok.status_code == 201


# -- 2. the operator's ownerless memories never reach a tenant --------------------------------


def test_ownerless_memories_stay_out_of_a_tenants_context(server: str, memory: lossless.Memory,
                                                          fake_openai: FakeOpenAIServer) -> None:
    _, key = APIKeys(memory.store).create("acme")
    memory.memories.add("The vault passphrase is orange-giraffe", user=None, agent=None)
    headers = {"authorization": f"Bearer {key}"}
    mine = httpx.post(f"{server}/v1/lossless/memories", json={"content": "acme prefers the vault on Fridays"},
                      headers=headers)
    assert mine.status_code == 201
    httpx.post(f"{server}{C}/c/messages", json={"messages": json_ready(chat(6))}, headers=headers)
    ctx = httpx.post(f"{server}{C}/c/assemble", json={"query": "what is the vault passphrase?"}, headers=headers).json()
    text = json.dumps(ctx["messages"])
    assert "orange-giraffe" not in text and "Fridays" in text  # the tenant's own "global" memory is there
    fake_openai.enqueue_chat("No idea.")
    httpx.post(f"{server}/v1/chat/completions", headers={**headers, "x-lossless-conversation": "c"},
               json={"model": MODEL, "messages": [{"role": "user", "content": "what is the vault passphrase?"}]})
    assert "orange-giraffe" not in json.dumps(fake_openai.chat_requests()[-1].body)


# -- 3. a retrying client -----------------------------------------------------------------


def _chat(server: str, conversation: str, messages: list[dict[str, Any]], **headers: str) -> httpx.Response:
    return httpx.post(f"{server}/v1/chat/completions", json={"model": MODEL, "messages": messages},
                      headers={"x-lossless-conversation": conversation, **headers}, timeout=30)


def _roles(memory: lossless.Memory, cid: str) -> list[tuple[str, Any]]:
    return [(m.role, m.content) for m in memory.conversation(cid).messages()]


def test_a_resent_request_is_stored_once_and_answered_again(server: str, memory: lossless.Memory,
                                                            fake_openai: FakeOpenAIServer) -> None:
    fake_openai.enqueue_chat("Hello Ann.")
    first = _chat(server, "r", [{"role": "user", "content": "hi, I am Ann"}])
    assert first.json()["choices"][0]["message"]["content"] == "Hello Ann."
    asked = len(fake_openai.chat_requests())
    for _ in range(2):  # an SDK retrying after a timeout: stored once, the stored reply comes back
        again = _chat(server, "r", [{"role": "user", "content": "hi, I am Ann"}])
        assert again.status_code == 200 and again.headers["x-lossless-replayed"] == "true"
        assert again.json()["choices"][0]["message"]["content"] == "Hello Ann."
    assert len(fake_openai.chat_requests()) == asked  # not asked again
    assert _roles(memory, "r") == [("user", "hi, I am Ann"), ("assistant", "Hello Ann.")]
    # streamed replay
    with httpx.stream("POST", f"{server}/v1/chat/completions", headers={"x-lossless-conversation": "r"},
                      json={"model": MODEL, "stream": True,
                            "messages": [{"role": "user", "content": "hi, I am Ann"}]}) as stream:
        events = [line for line in stream.iter_lines() if line.startswith("data: ")]
    assert events[-1] == "data: [DONE]" and "Hello Ann." in "".join(events)


def test_a_system_prompt_resend_is_not_refused(server: str, memory: lossless.Memory,
                                               fake_openai: FakeOpenAIServer) -> None:
    chat_ = [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "port?"}]
    fake_openai.enqueue_chat("8443.")
    assert _chat(server, "s", chat_).status_code == 200
    again = _chat(server, "s", chat_)
    assert again.status_code == 200 and again.json()["choices"][0]["message"]["content"] == "8443."
    assert len(memory.conversation("s").messages()) == 3


def test_an_edited_early_turn_is_409_naming_where(server: str, memory: lossless.Memory,
                                                  fake_openai: FakeOpenAIServer) -> None:
    history = [{"role": "system", "content": "Be terse."}]
    for i in range(4):
        history.append({"role": "user", "content": f"q{i}"})
        fake_openai.enqueue_chat(f"a{i}")
        assert _chat(server, "e", history).status_code == 200
        history.append({"role": "assistant", "content": f"a{i}"})
    before = _roles(memory, "e")
    edited = [*history[:3], {"role": "user", "content": "q1 edited"}]
    message = _error(_chat(server, "e", edited), 409, "conversation_diverged")
    assert "messages[3]" in message and "#4" in message
    assert _roles(memory, "e") == before  # nothing stored


def test_a_late_reply_is_not_stored_after_the_client_moved_on(server: str, memory: lossless.Memory,
                                                              fake_openai: FakeOpenAIServer) -> None:
    fake_openai.delay = 1.0
    fake_openai.enqueue_chat("the slow answer")
    with pytest.raises(httpx.ReadTimeout):  # the client gives up before the provider answers
        httpx.post(f"{server}/v1/chat/completions", timeout=0.3, headers={"x-lossless-conversation": "l"},
                   json={"model": MODEL, "messages": [{"role": "user", "content": "q1"}]})
    fake_openai.delay = 0.0
    fake_openai.enqueue_chat("a2")
    assert _chat(server, "l", [{"role": "user", "content": "q1"}, {"role": "user", "content": "q2"}]).status_code == 200
    time.sleep(1.2)  # the first provider call has answered by now
    # one reply, after q2 (which of the fake's two canned answers went to which call is the
    # fake's business); the late one, to q1 alone, was not stored between or after
    roles = _roles(memory, "l")
    assert [r for r, _ in roles] == ["user", "user", "assistant"] and roles[:2] == [("user", "q1"), ("user", "q2")]


def test_an_idempotency_key_makes_a_retry_exact(server: str, memory: lossless.Memory,
                                                fake_openai: FakeOpenAIServer) -> None:
    fake_openai.enqueue_chat("first answer", "second answer")
    msgs = [{"role": "user", "content": "one question"}]
    a = _chat(server, "k", msgs, **{"idempotency-key": "req-1"})
    b = _chat(server, "k", msgs, **{"idempotency-key": "req-1"})
    assert a.json()["choices"][0]["message"]["content"] == b.json()["choices"][0]["message"]["content"] == "first answer"
    assert b.headers["x-lossless-replayed"] == "true"
    assert _error(_chat(server, "k", [{"role": "user", "content": "another"}], **{"idempotency-key": "req-1"}),
                  422, "validation_error").startswith("Idempotency-Key")
    assert len(memory.conversation("k").messages()) == 2


@pytest.mark.parametrize("key", ["幂等键-1", "idem-key-1"])
def test_an_idempotency_key_in_utf8_is_read_as_written(server: str, memory: lossless.Memory,
                                                       fake_openai: FakeOpenAIServer, key: str) -> None:
    """A key the client sent as UTF-8 was read as latin-1: 幂等键-1 became mojibake holding C1
    controls, refused with "must be 1 to 255 printable characters" (which it was)."""
    fake_openai.enqueue_chat("第一个回答 first answer", "second answer")
    msgs = [{"role": "user", "content": "一个问题 one question"}]
    headers = {"x-lossless-conversation": "k-en" if key.isascii() else "k-zh", "idempotency-key": key.encode()}
    a = httpx.post(f"{server}/v1/chat/completions", json={"model": MODEL, "messages": msgs}, headers=headers, timeout=30)
    assert a.status_code == 200, a.text
    b = httpx.post(f"{server}/v1/chat/completions", json={"model": MODEL, "messages": msgs}, headers=headers, timeout=30)
    assert b.headers["x-lossless-replayed"] == "true"
    assert b.json()["choices"][0]["message"]["content"] == "第一个回答 first answer"
    # bytes that are not UTF-8: said so, nothing stored
    bad = httpx.post(f"{server}/v1/chat/completions", json={"model": MODEL, "messages": msgs},
                     headers={"x-lossless-conversation": "k-bad", "idempotency-key": "幂等".encode("gbk")}, timeout=30)
    assert bad.status_code == 400 and "Idempotency-Key header is not UTF-8" in bad.json()["error"]["message"]
    assert memory.get_conversation("k-bad") is None


# -- 4. one tenant cannot stall the others ---------------------------------------------------


@pytest.mark.sqlite_only(reason="the SQLite store's own read connections for long scans (PostgreSQL serves them from its pool)")
def test_long_searches_run_beside_the_store_not_on_it(tmp_path: Path) -> None:
    """Regex scans run on read connections of their own (two at most): while two run, the
    store's own connection serves everyone else, and a third scan waits for a slot, then
    says the store is busy (a 503 with Retry-After over HTTP) instead of queueing forever."""
    mem = lossless.open(tmp_path / "rx.db", embedder=None, compaction="deferred")
    conv = mem.conversation("c")
    conv.add_many(chat(200, words=40))
    release = threading.Event()
    holding = [threading.Event(), threading.Event()]

    def scan(i: int) -> None:  # a long search holding a read connection
        with mem.store.reader() as run:
            run("SELECT count(*) FROM messages")
            holding[i].set()
            release.wait(30)

    scans = [threading.Thread(target=scan, args=(i,)) for i in range(2)]
    for t in scans:
        t.start()
    try:
        assert all(h.wait(10) for h in holding)
        assert conv.messages(1, 1)[0].seq == 1  # the store itself is free
        assert conv.add("user", "written while two long searches run").seq == 201
        with pytest.raises(lossless.StoreError) as info:
            mem.search("service-1[0-9]", mode="regex")
        assert info.value.transient and "long searches" in info.value.reason
    finally:
        release.set()
        for t in scans:
            t.join()
    assert mem.search("service-1[0-9]", mode="regex")  # a slot is free again
    mem.close()


def test_verify_is_paged_and_tenant_search_scales(store_target: StoreTarget, tmp_path: Path) -> None:
    mem = lossless.open(store_target("v"), embedder=None, compaction="deferred")
    _, key = APIKeys(mem.store).create("big")
    rows = [(f"@big/c{i:05d}", "2024-01-01T00:00:00", "2024-01-01T00:00:00") for i in range(33_000)]
    with mem.store.transaction() as conn:  # 33,000 conversations of one tenant, more than SQLite's variables
        if store_target.on_postgres:
            conn.cursor().executemany("INSERT INTO conversations (id, created_at, updated_at) VALUES (%s, %s, %s)",
                                      rows)
        else:
            conn.executemany("INSERT INTO conversations (id, created_at, updated_at) VALUES (?, ?, ?)", rows)
    mem.conversation("@big/c00007").add("user", "the needle is under the green cup")
    headers = {"authorization": f"Bearer {key}"}
    with served(mem) as srv:
        found = httpx.post(f"{srv.url}/v1/lossless/search", json={"query": "needle green cup"}, headers=headers,
                           timeout=60)
        assert found.status_code == 200, found.text
        assert [h["conversation_id"] for h in found.json()["hits"]] == ["c00007"]
        page = httpx.get(f"{srv.url}/v1/lossless/verify", params={"limit": 100}, headers=headers, timeout=60).json()
        assert page["ok"] and page["checked"] == 100 and page["next_after"] == "c00099"
        nxt = httpx.get(f"{srv.url}/v1/lossless/verify", params={"after": page["next_after"], "limit": 5},
                        headers=headers, timeout=60).json()
        assert nxt["checked"] == 5 and nxt["next_after"] == "c00104"
    mem.close()


# -- 5. malformed upstream answers ---------------------------------------------------------


def test_malformed_upstream_answers_are_502(server: str, fake_openai: FakeOpenAIServer) -> None:
    fake_openai.respond_next(b'{"id": "chatcmpl-1", "choices": [{"message": {"role": "assist')
    _error(_chat(server, "m", [{"role": "user", "content": "q"}]), 502, "upstream_error")
    fake_openai.respond_next({"id": "x", "object": "chat.completion", "choices": [{"index": 0, "message": {
        "role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": "run"}]}}]})
    _error(_chat(server, "m", [{"role": "user", "content": "q"}]), 502, "upstream_error")


def test_a_bad_stream_chunk_does_not_cost_the_client_the_good_ones(server: str, memory: lossless.Memory,
                                                                   fake_openai: FakeOpenAIServer) -> None:
    good = [{"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": part}}]}
            for part in ("Hel", "lo")]
    raw = (f"data: {json.dumps(good[0])}\n\n" + "data: {this is not json\n\n" + f"data: {json.dumps(good[1])}\n\n"
           + "data: [DONE]\n\n").encode()
    fake_openai.respond_next(raw)
    with httpx.stream("POST", f"{server}/v1/chat/completions", headers={"x-lossless-conversation": "st"},
                      json={"model": MODEL, "stream": True, "messages": [{"role": "user", "content": "q"}]}) as r:
        assert r.status_code == 200
        body = r.read().decode()
    assert '"Hel"' in body and '"lo"' in body and "[DONE]" in body  # every chunk reached the client
    stored = memory.conversation("st").messages()
    assert stored[0].content == "q" and all(m.content == "Hello" for m in stored[1:])  # the reply, if read, whole


# -- 6. 4xx, not 500 ---------------------------------------------------------------------------


def test_hostile_inputs_get_4xx(server: str, memory: lossless.Memory) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    _error(httpx.post(f"{server}{C}/d/messages", content=deep, headers={"content-type": "application/json"}),
           400, "invalid_request")
    httpx.post(f"{server}{C}/d/messages", json={"messages": json_ready(chat(20))})
    big = httpx.post(f"{server}{C}/d/assemble", json={"budget_tokens": 10**30, "query": "service port"})
    assert big.status_code == 200 and big.json()["tokens"] > 0
    _error(httpx.post(f"{server}/v1/lossless/memories/forget", json={"older_than_days": 1e300}), 400,
           "invalid_request")
    huge = "a" * 5_000_000
    # 5 MB indexed: past httpx's 5 s default on a busy machine
    httpx.post(f"{server}{C}/rx/messages", json={"role": "tool", "tool_call_id": "t", "content": huge}, timeout=60)
    slow = httpx.post(f"{server}{C}/rx/search", json={"query": "(a|aa)*b", "mode": "regex"}, timeout=60)
    assert slow.status_code in (200, 422), slow.text  # refused as slow, or bounded: never a 500


@pytest.mark.sqlite_only(reason="another process holds the SQLite file's exclusive lock")
def test_a_locked_store_is_503_with_retry_after_and_no_path(tmp_path: Path) -> None:
    db = tmp_path / "locked.db"
    mem = lossless.open(db, embedder=None, compaction="deferred")
    mem.store._conn.setbusytimeout(200)
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import apsw, sys, time
        c = apsw.Connection({str(db)!r})
        c.execute("BEGIN EXCLUSIVE")
        print("locked", flush=True)
        time.sleep(30)
    """)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with served(mem) as srv:
            r = httpx.post(f"{srv.url}{C}/c/messages", json={"role": "user", "content": "hi"}, timeout=30)
        assert r.status_code == 503 and r.headers.get("retry-after") == "1", r.text
        assert str(tmp_path) not in r.text and "locked" in r.json()["error"]["message"]
    finally:
        holder.kill()
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
    mem.close()


# -- 7. rough edges ------------------------------------------------------------------------------


def test_ids_with_a_slash_can_be_opened(server: str) -> None:
    assert httpx.post(f"{server}{C}", json={"id": "team/alpha"}).status_code == 201
    assert httpx.post(f"{server}{C}/team%2Falpha/messages", json={"role": "user", "content": "hi"}).status_code == 201
    assert httpx.get(f"{server}{C}/team%2Falpha").json()["messages"] == 1
    assert httpx.get(f"{server}{C}/team%2Falpha/messages").json()["data"][0]["content"] == "hi"


def test_an_id_ending_like_a_route_is_still_that_conversation(server: str) -> None:
    # the server decodes %2F before routing: GET …/项目%2Fstats was the stats of 项目, and
    # 项目/stats itself could not be read (nor x/dag, x/messages, x/verify)
    for cid, content in (("项目", "项目本身"), ("项目/stats", "统计"), ("项目/dag", "图"), ("100%/messages", "百分")):
        url = f"{server}{C}/{quote(cid, safe='')}"
        assert httpx.post(f"{url}/messages", json={"role": "user", "content": content}).status_code == 201
        got = httpx.get(url)
        assert got.status_code == 200 and got.json()["id"] == cid and got.json()["messages"] == 1, got.text
        assert httpx.get(f"{url}/messages").json()["data"][0]["content"] == content
        assert httpx.get(f"{url}/stats").json()["conversation"] == cid
    assert httpx.get(f"{server}{C}/%E9%A1%B9%E7%9B%AE/stats").json()["conversation"] == "项目"  # a real suffix
    assert httpx.get(f"{server}{C}/team/alpha").status_code == 404  # a literal slash: still a separator
    assert _error(httpx.get(f"{server}{C}/%E4%B8%8D%E5%9C%A8%2Fstats"), 404, "not_found") == "no conversation '不在/stats'"


def test_a_url_escape_that_is_not_utf8_is_400_and_stores_nothing(server: str, memory: lossless.Memory) -> None:
    # 对话/一 as UTF-8 escapes names the conversation; %FF%FE, or café in Latin-1 (%E9), is no
    # UTF-8: it was read as U+FFFD and stored a conversation "\ufffd\ufffd" nobody sent
    cid = "%E5%AF%B9%E8%AF%9D%2F%E4%B8%80"
    assert httpx.post(f"{server}{C}/{cid}/messages", json={"role": "user", "content": "公园"}).status_code == 201
    assert httpx.get(f"{server}{C}/{cid}").json()["id"] == "对话/一"
    for bad in ("%FF%FE", "caf%E9", "%ED%A0%80"):  # the last: a UTF-16 surrogate, encoded
        message = _error(httpx.post(f"{server}{C}/{bad}/messages", json={"role": "user", "content": "x"}),
                         400, "invalid_request")
        assert "not UTF-8" in message and "path" in message
        _error(httpx.get(f"{server}{C}/{bad}"), 400, "invalid_request")
    assert "query string" in _error(httpx.get(f"{server}/v1/lossless/memories?user=%FF"), 400, "invalid_request")
    assert [c.id for c in memory.conversations()] == ["对话/一"]


def test_a_lone_surrogate_anywhere_in_a_body_is_422_naming_the_field(server: str, memory: lossless.Memory) -> None:
    # "\ud800" is valid JSON but no text: a search query with one was searched, then the
    # answer echoing it could not be encoded (500, text/plain, a traceback in the log); in
    # metadata it reached the store's write (500)
    json_type = {"content-type": "application/json"}
    conv = f"{server}{C}/%E5%85%AC%E5%9B%AD"  # 公园
    pair = httpx.post(f"{conv}/messages", headers=json_type,
                      content=b'{"role": "user", "content": "\\u516c\\u56ed \\ud83d\\ude00"}')  # escaped, a pair
    assert pair.status_code == 201, pair.text
    for url, body, field in [
            (f"{conv}/search", '{"query": "公园\\ud800"}', "'query'"),
            (f"{conv}/tools/lcm_grep", '{"query": "\\ud83d"}', "'query'"),
            (f"{server}/v1/lossless/search", '{"query": "\\udc00咖啡"}', "'query'"),
            (f"{server}/v1/lossless/memories/search", '{"query": "咖啡\\ud800"}', "'query'"),
            (f"{server}{C}", '{"id": "好", "metadata": {"user": "\\ud800"}}', "'metadata.user'"),
            (f"{conv}/messages", '{"role": "user", "content": "ok", "metadata": {"标签": "\\ud800"}}', "'metadata.标签'"),
            (f"{server}/v1/lossless/memories", '{"content": "记忆", "metadata": {"k": ["\\udfff"]}}', "'metadata.k[0]'")]:
        r = httpx.post(url, content=body.encode(), headers=json_type)
        message = _error(r, 422, "validation_error")
        assert field in message and "lone surrogate" in message, message
    assert [c.id for c in memory.conversations()] == ["公园"]
    assert [m.content for m in memory.conversation("公园").messages()] == ["公园 😀"]
    assert memory.memories.ls() == []


def test_paging_numbers_past_64_bits_are_400_naming_the_parameter(server: str) -> None:
    # they reached SQL: 422 "a number in the request is out of range: int too big to convert",
    # naming nothing; after=2**63-1 overflowed too (after + 1)
    conv = f"{server}{C}/%E5%85%AC%E5%9B%AD"  # 公园
    assert httpx.post(f"{conv}/messages", json={"role": "user", "content": "去公园"}).status_code == 201
    big, top = 10**22, 2**63 - 1
    for url, name in [(f"{conv}/messages?after={big}", "'after'"), (f"{server}{C}?offset={big}", "'offset'"),
                      (f"{server}/v1/lossless/memories?offset={top + 1}", "'offset'")]:
        assert name in _error(httpx.get(url), 400, "invalid_request")
    assert "'keep'" in _error(httpx.post(f"{server}/v1/lossless/memories/forget", json={"keep": big, "dry_run": True}),
                              400, "invalid_request")
    for url in (f"{conv}/messages?after={top}", f"{conv}/messages?after={top - 1}", f"{server}{C}?offset={top}",
                f"{server}/v1/lossless/memories?offset={top}"):
        r = httpx.get(url)
        assert r.status_code == 200 and r.json()["data"] == [], r.text
    assert [m["content"] for m in httpx.get(f"{conv}/messages?after=0").json()["data"]] == ["去公园"]


def test_lcm_expand_from_seq_past_the_end_reads_nothing_whatever_its_size(server: str) -> None:
    # from_seq beyond SQLite's 64-bit integers went to the query: a 422 "int too big to convert"
    # naming no argument here, and over MCP a tool error with no message at all
    url = f"{server}{C}/%E5%85%AC%E5%9B%AD"  # 公园
    msgs = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"第{i}条：我们在公园喝咖啡。"} for i in range(80)]
    assert httpx.post(f"{url}/messages", json={"messages": msgs}).status_code == 201
    leaf = httpx.post(f"{url}/compact", json={"full": True}).json()["leaves"][0]
    last = httpx.post(f"{url}/tools/lcm_describe", json={"id": leaf}).json()["last_seq"]
    for from_seq in (last + 1, 2**63, 10**30):
        r = httpx.post(f"{url}/tools/lcm_expand", json={"id": leaf, "from_seq": from_seq})
        assert r.status_code == 200, r.text
        assert r.json()["items"] == [] and r.json()["next_from_seq"] is None
    assert httpx.post(f"{url}/tools/lcm_expand", json={"id": leaf, "from_seq": last}).json()["items"][0]["seq"] == last


def test_keys_adopt_and_revoking_the_last_key_keeps_the_server_locked(store_target: StoreTarget, tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    db = store_target("k")
    with lossless.open(db, embedder=None, compaction="deferred") as mem:
        mem.conversation("early").add_many(chat(10))
    assert main(["--db", str(db), "--json", "keys", "create", "--tenant", "acme"]) == 0
    created = json.loads(capsys.readouterr().out)
    key, key_id = created["key"], created["id"]
    assert main(["--db", str(db), "keys", "adopt", "--tenant", "acme", "early"]) == 0
    assert main(["--db", str(db), "keys", "adopt", "--tenant", "acme", "early"]) == 0  # again: nothing twice
    capsys.readouterr()
    with lossless.open(db, embedder=None, compaction="deferred") as mem:
        assert len(mem.conversation("@acme/early").messages()) == 10
        with served(mem) as srv:
            reached = httpx.get(f"{srv.url}{C}/early", headers={"authorization": f"Bearer {key}"})
            assert reached.status_code == 200 and reached.json()["messages"] == 10
        assert main(["--db", str(db), "keys", "revoke", key_id]) == 0
        with served(mem, allow_implicit_tenant=False) as srv:  # what `lossless serve` does with keys created
            locked = httpx.get(f"{srv.url}{C}")
            assert locked.status_code == 401 and "--keyless" in locked.json()["error"]["message"]
        with served(mem, keyless=True) as srv:  # an explicit --keyless restart serves it again (loopback)
            assert httpx.get(f"{srv.url}{C}").status_code == 200



def test_keys_adopt_refuses_a_tenant_keys_create_refuses(store_target: StoreTarget,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """``keys create --tenant 公司A`` is refused (a tenant is 1-64 ASCII letters, digits, _ . -),
    but ``keys adopt --tenant 公司A 群聊`` copied the conversation into that tenant's
    namespace, where no key can ever reach it. Now adopt gives create's error and copies
    nothing."""
    db = store_target("adopt-zh")
    with lossless.open(db, embedder=None, compaction="deferred") as mem:
        mem.conversation("群聊").add_many(chat(4))
    assert main(["--db", str(db), "keys", "create", "--tenant", "公司A"]) == 1
    refused = capsys.readouterr().err
    assert main(["--db", str(db), "keys", "adopt", "--tenant", "公司A", "群聊"]) == 1
    err = capsys.readouterr().err
    assert err == refused and "tenant must be 1-64 ASCII letters" in err and "Traceback" not in err
    with lossless.open(db, embedder=None, compaction="deferred") as mem:
        assert [c.id for c in mem.conversations()] == ["群聊"]

def test_write_commands_do_not_invent_a_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "no-such-dir" / "x.db"
    assert main(["--db", str(missing), "add", "c", "--role", "user", "--content", "hi"]) == 1
    assert "no directory" in capsys.readouterr().err and not missing.parent.exists()


def test_the_importers_line_limit_is_bounded() -> None:
    from lossless.importers.base import MAX_LINE_BYTES, Source

    assert Source(name="x", stem="x", max_message_bytes=64 * 1024 * 1024).line_limit == MAX_LINE_BYTES
    assert Source(name="x", stem="x", max_message_bytes=32 * 1024 * 1024).line_limit == 65 * 1024 * 1024
    assert Source(name="x", stem="x", max_message_bytes=1024 * 1024).line_limit == 3 * 1024 * 1024


# -- fuzzing --------------------------------------------------------------------------------------

_PATHS = [f"{C}", f"{C}/f/messages", f"{C}/f/assemble", f"{C}/f/search", f"{C}/f/compact",
          f"{C}/f/tools/lcm_grep", f"{C}/f/tools/lcm_expand", "/v1/lossless/search", "/v1/lossless/memories",
          "/v1/lossless/memories/search", "/v1/lossless/memories/forget", "/v1/chat/completions", "/v1/messages"]
_json = st.recursive(st.none() | st.booleans() | st.integers(min_value=-(10**20), max_value=10**20)
                     | st.floats(allow_nan=False) | st.text(max_size=40),
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
                         st.sampled_from(["role", "content", "messages", "query", "budget_tokens", "mode", "limit",
                                          "id", "model", "stream", "all", "older_than_days", "max_tokens", "x"]),
                         inner, max_size=5), max_leaves=20)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(path=st.sampled_from(_PATHS), body=_json, raw=st.binary(max_size=64),
       content_type=st.sampled_from(["application/json", "text/plain", "", "application/x-www-form-urlencoded"]),
       use_raw=st.booleans())
@pytest.mark.slow
def test_fuzzed_requests_never_get_a_500(server: str, path: str, body: Any, raw: bytes, content_type: str,
                                         use_raw: bool) -> None:
    headers = {"content-type": content_type} if content_type else {}
    content = raw if use_raw else json.dumps(body).encode()
    response = httpx.post(server + path, content=content, headers=headers, timeout=30)
    assert response.status_code < 500 or response.status_code in (501, 502, 503), (response.status_code,
                                                                                    response.text)
    if response.headers.get("content-type", "").startswith("application/json"):
        assert "error" in response.json() or response.status_code < 400
    assert httpx.get(server + "/healthz", timeout=10).status_code == 200  # still alive


def test_a_tenant_name_in_chinese_is_refused_saying_ascii(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """公司甲 are letters: the error said "letters" and refused them without saying why."""
    db = tmp_path / "k.db"
    assert main(["--db", str(db), "keys", "create", "--tenant", "公司甲"]) != 0
    err = capsys.readouterr().err
    assert "ASCII letters" in err and "公司甲" in err and "Traceback" not in err
    assert main(["--db", str(db), "--json", "keys", "ls"]) == 0
    assert "公司甲" not in capsys.readouterr().out  # nothing stored
