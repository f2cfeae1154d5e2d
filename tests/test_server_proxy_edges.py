"""The context proxy at its edges, against the fake provider (tests/fake_openai.py) on
127.0.0.1: conversation ids that are not plain ASCII (the X-Lossless-Conversation header
read as UTF-8 or percent-encoded, written percent-encoded), ids with control characters
refused before anything is stored or sent, a provider that gzips its answers, identical
requests at once, and option fields of the wrong type."""

from __future__ import annotations

import asyncio
import gzip
import json
import threading
import zlib
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote

import anthropic
import httpx
import pytest

import lossless
from lossless.core.errors import ValidationError
from lossless.server.limits import Limits
from lossless.server.proxy.conversation_header import conversation_header_value
from lossless.server.proxy.turn_locks import ConversationLocks
from lossless.server.state import Upstream
from tests.fake_openai import FakeOpenAIServer, _Handler, fake_openai
from tests.server_support import proxied_memory, proxy_url, served

__all__ = ["fake_openai", "proxied_memory", "proxy_url"]  # fixtures (memory, proxy), imported for pytest to find

MODEL = "gpt-4o-mini"
CLAUDE = "claude-proxy-test"
HEADER = "X-Lossless-Conversation"


def _stored(memory: lossless.Memory, cid: str) -> list[tuple[str, Any]]:
    conv = memory.get_conversation(cid)
    assert conv is not None, f"no conversation {cid!r}; stored: {[c.id for c in memory.conversations()]}"
    return [(m.role, m.content) for m in conv.messages()]


def _request(wire: str, cid: str | None, messages: list[dict[str, Any]], **extra: Any) -> tuple[str, dict[str, Any]]:
    """The path and body of a proxied request on ``wire`` ("openai" or "anthropic"),
    naming ``cid`` in the body's own field (OpenAI's ``user``, Anthropic's
    ``metadata.user_id``) when given."""
    if wire == "openai":
        body = {"model": MODEL, "messages": messages, **extra}
        return "/v1/chat/completions", ({**body, "user": cid} if cid is not None else body)
    body = {"model": CLAUDE, "max_tokens": 100, "messages": messages, **extra}
    return "/v1/messages", ({**body, "metadata": {"user_id": cid}} if cid is not None else body)


def _post(url: str, path: str, body: dict[str, Any], headers: dict[str, Any] | None = None) -> httpx.Response:
    """POST and read the whole answer (a stream too)."""
    with httpx.Client(timeout=30) as client:
        response = client.post(url + path, json=body, headers=headers or {})
        response.read()
        return response


# -- conversation ids that are not plain ASCII -------------------------------------------------

@pytest.mark.parametrize("wire", ["openai", "anthropic"])
@pytest.mark.parametrize("stream", [False, True])
def test_a_chinese_id_in_the_body_is_answered_with_a_percent_encoded_header(
        proxy: str, memory: lossless.Memory, fake_openai: FakeOpenAIServer, wire: str, stream: bool) -> None:
    cid = "用户会话1"
    fake_openai.enqueue_chat("你好！")
    path, body = _request(wire, cid, [{"role": "user", "content": "你好"}], stream=stream)
    first = _post(proxy, path, body)
    assert first.status_code == 200, first.text
    assert first.headers["x-lossless-conversation"] == "%E7%94%A8%E6%88%B7%E4%BC%9A%E8%AF%9D1"
    assert unquote(first.headers["x-lossless-conversation"]) == cid
    assert _stored(memory, cid) == [("user", "你好"), ("assistant", "你好！")]
    # the retry is answered from the store, with the same header
    again = _post(proxy, path, body)
    assert again.status_code == 200 and again.headers["x-lossless-replayed"] == "true"
    assert again.headers["x-lossless-conversation"] == first.headers["x-lossless-conversation"]
    assert len(fake_openai.requests) == 1


def test_the_header_names_one_conversation_sent_raw_or_percent_encoded(
        proxy: str, memory: lossless.Memory, fake_openai: FakeOpenAIServer) -> None:
    cid = "对话/一"
    first = "我上周末去了颐和园，看到了很多荷花。"
    r = httpx.post(f"{proxy}/v1/lossless/conversations/{quote(cid, safe='')}/messages",
                   json={"role": "user", "content": first})
    assert r.status_code == 201, r.text
    fake_openai.enqueue_chat("真好。", "荷花。")
    chat: list[dict[str, Any]] = [{"role": "user", "content": first}]
    raw = _post(proxy, "/v1/chat/completions", {"model": MODEL, "messages": chat},
                {HEADER: cid.encode("utf-8")})  # UTF-8 bytes, as curl sends them
    assert raw.status_code == 200, raw.text
    assert raw.headers["x-lossless-conversation"] == quote(cid, safe="")
    chat += [{"role": "assistant", "content": "真好。"}, {"role": "user", "content": "我看到了什么？"}]
    encoded = _post(proxy, "/v1/chat/completions", {"model": MODEL, "messages": chat}, {HEADER: quote(cid)})
    assert encoded.status_code == 200, encoded.text
    assert [c.id for c in memory.conversations()] == [cid]
    assert _stored(memory, cid) == [("user", first), ("assistant", "真好。"), ("user", "我看到了什么？"),
                                    ("assistant", "荷花。")]
    # a literal % before two hex digits is sent as %25, and comes back the same way
    fake_openai.enqueue_chat("ok")
    percent = _post(proxy, "/v1/chat/completions", {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]},
                    {HEADER: "50%2541"})
    assert percent.status_code == 200 and percent.headers["x-lossless-conversation"] == "50%2541"
    assert _stored(memory, "50%41") == [("user", "hi"), ("assistant", "ok")]


@pytest.mark.parametrize("value", [b"\xff\xfeid", b"%FF%FEid"])
def test_a_header_that_is_not_utf8_is_a_400_naming_it(proxy: str, memory: lossless.Memory,
                                                      fake_openai: FakeOpenAIServer, value: bytes) -> None:
    r = _post(proxy, "/v1/chat/completions", {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]},
              {HEADER: value})
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request"
    assert "X-Lossless-Conversation" in r.json()["error"]["message"]
    assert memory.conversations() == [] and fake_openai.requests == []


def test_plain_ascii_ids_are_sent_back_as_they_are() -> None:
    assert conversation_header_value("support-1") == "support-1"
    assert conversation_header_value("a b/c@d:e") == "a b/c@d:e"
    assert conversation_header_value("对话/一") == "%E5%AF%B9%E8%AF%9D%2F%E4%B8%80"
    assert conversation_header_value("50%41") == "50%2541"  # would read as "50A" otherwise
    assert conversation_header_value(" padded ") == "%20padded%20"  # a header's edges are trimmed
    assert conversation_header_value("café") == "caf%C3%A9"


# -- control characters ------------------------------------------------------------------------

@pytest.mark.parametrize(("wire", "cid", "stream"), [("openai", "a\r\nX-Evil: 1", False),
                                                     ("openai", "a\r\nX-Evil: 1", True),
                                                     ("anthropic", "a\tb", False),
                                                     ("anthropic", "a\x85b", True)])
def test_an_id_with_control_characters_is_refused_before_anything_is_stored_or_sent(
        proxy: str, memory: lossless.Memory, fake_openai: FakeOpenAIServer, wire: str, cid: str,
        stream: bool) -> None:
    path, body = _request(wire, cid, [{"role": "user", "content": "hi"}], stream=stream)
    r = _post(proxy, path, body)
    assert r.status_code == 422 and r.json()["error"]["type"] == "validation_error"
    assert repr(cid) in r.json()["error"]["message"] and "control character" in r.json()["error"]["message"]
    assert memory.conversations() == [] and fake_openai.requests == []


def test_control_characters_are_refused_in_the_header_over_rest_and_in_the_library(
        proxy: str, memory: lossless.Memory, fake_openai: FakeOpenAIServer) -> None:
    r = _post(proxy, "/v1/chat/completions", {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]},
              {HEADER: "a%0D%0AX-Evil: 1"})
    assert r.status_code == 422 and "U+000D" in r.json()["error"]["message"]
    r = httpx.post(proxy + "/v1/lossless/conversations", json={"id": "a\nb"})
    assert r.status_code == 422 and "'a\\nb'" in r.json()["error"]["message"]
    r = httpx.post(proxy + "/v1/lossless/conversations/a%00b/messages", json={"role": "user", "content": "hi"})
    assert r.status_code == 422
    with pytest.raises(ValidationError, match=r"'nul\\x00' contains a NUL byte"):
        memory.conversation("nul\x00")
    assert memory.conversations() == [] and fake_openai.requests == []


# -- a provider that compresses its answers ----------------------------------------------------

class _GzipHandler(_Handler):
    """The fake's handler, answering gzip-compressed whenever the request accepts it, as a
    CDN in front of many OpenAI-compatible providers does (a stream one event per flush)."""

    def _accepts_gzip(self) -> bool:
        return "gzip" in (self.headers.get("accept-encoding") or "")

    def _send(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        if not self._accepts_gzip():
            super()._send(status, body, headers)
            return
        payload = gzip.compress(body if isinstance(body, bytes) else json.dumps(body).encode("utf-8"))
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-encoding", "gzip")
        self.send_header("content-length", str(len(payload)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)

    def _send_sse(self, events: list[tuple[str | None, str]]) -> None:
        if not self._accepts_gzip():
            super()._send_sse(events)
            return
        packer = zlib.compressobj(wbits=31)  # 31: the gzip container
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-encoding", "gzip")
        self.end_headers()
        for name, data in events:
            frame = ((f"event: {name}\n" if name else "") + f"data: {data}\n\n").encode("utf-8")
            self.wfile.write(packer.compress(frame) + packer.flush(zlib.Z_SYNC_FLUSH))
            self.wfile.flush()
        self.wfile.write(packer.flush())


@dataclass
class _GzipFake(FakeOpenAIServer):
    def start(self) -> _GzipFake:
        super().start()
        server = self

        class Handler(_GzipHandler):
            fake = server

        assert self._httpd is not None
        self._httpd.RequestHandlerClass = Handler
        return self


@pytest.fixture
def gzip_fake() -> Iterator[FakeOpenAIServer]:
    with _GzipFake() as server:
        yield server


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
@pytest.mark.parametrize("stream", [True, False])
def test_a_gzipped_answer_is_relayed_decoded_and_stored(memory: lossless.Memory, gzip_fake: FakeOpenAIServer,
                                                        wire: str, stream: bool) -> None:
    reply = "这是压缩的回答：颐和园的荷花 and some words to stream."
    gzip_fake.enqueue_chat(reply)
    path, body = _request(wire, "gz", [{"role": "user", "content": "压缩?"}], stream=stream)
    with served(memory, upstream=Upstream(gzip_fake.base_url, "sk-up")) as server, \
            httpx.stream("POST", server.url + path, json=body, timeout=30) as response:
        raw = b"".join(response.iter_raw())
        headers = response.headers
    assert "gzip" in gzip_fake.requests[-1].headers["accept-encoding"]  # so the fake did compress
    assert response.status_code == 200 and "content-encoding" not in headers
    if stream:
        assert raw.startswith(b"data: " if wire == "openai" else b"event: ")
    else:
        json.loads(raw)
    assert _stored(memory, "gz") == [("user", "压缩?"), ("assistant", reply)]


# -- identical requests at once ----------------------------------------------------------------

def _send_at_once(url: str, cid: str, chat: list[dict[str, Any]], senders: int) -> list[int]:
    """The statuses of ``senders`` identical requests let go at the same moment."""
    gate = threading.Barrier(senders)
    statuses: list[int] = []

    def send() -> None:
        with httpx.Client(timeout=60) as client:
            gate.wait(10)
            statuses.append(client.post(url + "/v1/chat/completions", headers={HEADER: cid},
                                        json={"model": MODEL, "messages": chat}).status_code)

    threads = [threading.Thread(target=send) for _ in range(senders)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return statuses


def test_identical_requests_at_once_store_the_new_message_once(memory: lossless.Memory,
                                                               fake_openai: FakeOpenAIServer) -> None:
    """A double-send: the same next request from several clients at the same moment. The
    history is long so that matching takes a while (the window two unserialized requests
    race in: before the per-conversation lock, the first try already stored it twice)."""
    history = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"消息 {i}: " + "词 " * 40}
               for i in range(60)]
    senders, tries = 4, 10
    with served(memory, upstream=Upstream(fake_openai.base_url, "sk-up"),
                limits=Limits(tenant_concurrency=None)) as server:
        for attempt in range(tries):
            cid = f"twice-{attempt}"
            memory.conversation(cid).add_many(history)
            chat = [*history, {"role": "user", "content": "然后呢？"}]
            assert _send_at_once(server.url, cid, chat, senders) == [200] * senders
            roles = [role for role, _ in _stored(memory, cid)[len(history):]]
            assert roles == ["user", "assistant"], f"try {attempt}: {roles}"


def test_conversation_locks_serialize_one_id_and_are_dropped_after_use() -> None:
    async def scenario() -> tuple[list[str], int, int]:
        locks = ConversationLocks()
        order: list[str] = []

        async def hold(cid: str, name: str) -> None:
            async with locks.hold(cid):
                order.append(f"{name}+")
                await asyncio.sleep(0.05)
                order.append(f"{name}-")

        task = asyncio.gather(hold("a", "a1"), hold("a", "a2"), hold("b", "b1"))
        await asyncio.sleep(0.01)
        during = len(locks)
        await task
        return order, during, len(locks)

    order, during, after = asyncio.run(scenario())
    assert order.index("a1-") < order.index("a2+")  # one request of a conversation at a time
    assert order.index("b1+") < order.index("a1-")  # another conversation does not wait
    assert (during, after) == (2, 0)


# -- option fields of the wrong type -----------------------------------------------------------

@pytest.mark.parametrize(("wire", "extra", "says"), [
    ("openai", {"model": 5}, "'model' must be a string, got int"),
    ("openai", {"stream": "false"}, "'stream' must be true or false, got str 'false'"),
    ("anthropic", {"stream": 1}, "'stream' must be true or false, got int 1"),
])
def test_options_of_the_wrong_type_are_a_400_naming_them(proxy: str, memory: lossless.Memory,
                                                         fake_openai: FakeOpenAIServer, wire: str,
                                                         extra: dict[str, Any], says: str) -> None:
    path, body = _request(wire, "opts", [{"role": "user", "content": "hi"}], **extra)
    r = _post(proxy, path, body)
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request"
    assert says in r.json()["error"]["message"]
    assert memory.conversations() == [] and fake_openai.requests == []


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_a_conversation_field_of_the_wrong_type_is_named(proxy: str, memory: lossless.Memory,
                                                         fake_openai: FakeOpenAIServer, wire: str) -> None:
    """``user: 5`` (or ``metadata.user_id: 5``) with no header said "send the header (or the
    request's user field)", as if none were sent; and an Anthropic client was pointed at a
    field it does not have."""
    field = "user" if wire == "openai" else "metadata.user_id"
    for value, says in ((5, f"'{field}' names the conversation when no X-Lossless-Conversation header is sent: "
                            "it must be a string, got int 5"),
                        (None, f"(or the request's '{field}' field)")):
        path, body = _request(wire, None, [{"role": "user", "content": "你好 hello"}])
        if value is not None:
            body = {**body, "user": value} if wire == "openai" else {**body, "metadata": {"user_id": value}}
        r = _post(proxy, path, body)
        assert r.status_code == 400 and says in r.json()["error"]["message"], r.text
    assert memory.conversations() == [] and fake_openai.requests == []
    # named by the header, the body's field is the provider's business, as before
    path, body = _request(wire, None, [{"role": "user", "content": "你好 hello"}])
    body = {**body, "user": 5} if wire == "openai" else {**body, "metadata": {"user_id": 5}}
    assert _post(proxy, path, body, headers={HEADER: "named"}).status_code == 200


# -- the provider's pacing headers -------------------------------------------------------------

@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_a_rate_limit_answer_keeps_its_retry_after_and_rate_limit_headers(
        proxy: str, memory: lossless.Memory, fake_openai: FakeOpenAIServer, wire: str) -> None:
    """An SDK backs off by the provider's Retry-After (and paces by its rate-limit headers):
    the proxy passed on the error's body and status but dropped every header, so a client
    retried at once. Other upstream headers (cookies, the provider's own) stay behind."""
    limits = {"retry-after": "7", "x-ratelimit-remaining-requests": "0",
              "anthropic-ratelimit-requests-remaining": "0", "x-request-id": "req_123", "set-cookie": "s=1"}
    fake_openai.fail_next(1, status=429, message="rate limited", headers=limits)
    path, body = _request(wire, "paced", [{"role": "user", "content": "你好"}])
    r = _post(proxy, path, body)
    assert r.status_code == 429
    assert r.headers["retry-after"] == "7" and r.headers["x-request-id"] == "req_123"
    assert r.headers["x-ratelimit-remaining-requests"] == "0"
    assert r.headers["anthropic-ratelimit-requests-remaining"] == "0"
    assert "set-cookie" not in r.headers


# -- errors name the client's own message ------------------------------------------------------

def test_an_anthropic_block_that_is_not_an_object_is_refused_not_dropped(
        proxy: str, memory: lossless.Memory, fake_openai: FakeOpenAIServer) -> None:
    """``"content": ["文本"]`` was skipped block by block: the user's turn was neither stored
    nor sent, the provider answered the turn before it, and that answer was stored as the
    reply; a request of such turns alone was told "'messages' must be a non-empty list"."""
    chat = [{"role": "user", "content": "你好"}]
    path, body = _request("anthropic", "块", chat)
    assert _post(proxy, path, body).status_code == 200
    before, calls = _stored(memory, "块"), len(fake_openai.requests)
    reply = {"role": "assistant", "content": before[-1][1]}
    for turn, where in (({"role": "user", "content": ["文本"]}, "messages[2].content[0]"),
                        ({"role": "assistant", "content": ["文本"]}, "messages[2].content[0]")):
        path, body = _request("anthropic", "块", [*chat, reply, turn])
        r = _post(proxy, path, body)
        assert r.status_code == 422 and r.json()["error"]["type"] == "validation_error", r.text
        assert r.json()["error"]["message"].startswith(f"{where} must be a content block object"), r.text
    path, body = _request("anthropic", "块二", [{"role": "user", "content": ["文本"]}])
    assert "messages[0].content[0] must be a content block object" in _post(proxy, path, body).text
    assert _stored(memory, "块") == before and len(fake_openai.requests) == calls
    assert memory.get_conversation("块二") is None


@pytest.mark.parametrize(("wire", "extra", "messages", "says"), [
    # Anthropic's system prompt is stored as a message before messages[0]
    ("anthropic", {"system": "你是助手"}, [{"role": "user", "content": "好\u0000"}], "messages[0]: content contains a NUL"),
    # a tool_result block is a tool message of its own
    ("anthropic", {}, [{"role": "user", "content": "查一下"},
                       {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "查", "input": {}}]},
                       {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "结果"},
                                                    {"type": "text", "text": "好\u0000"}]}],
     "messages[2]: content contains a NUL"),
    # an empty assistant turn is not stored
    ("openai", {}, [{"role": "assistant", "content": ""}, {"role": "user", "content": "好\u0000"}],
     "messages[1]: content contains a NUL"),
])
def test_a_bad_message_is_named_as_the_client_wrote_it(proxy: str, memory: lossless.Memory,
                                                       fake_openai: FakeOpenAIServer, wire: str,
                                                       extra: dict[str, Any], messages: list[dict[str, Any]],
                                                       says: str) -> None:
    """The index was of the messages as converted for storing: one more per system prompt
    and tool result before it, one fewer per empty assistant turn."""
    path, body = _request(wire, "下标", messages, **extra)
    r = _post(proxy, path, body)
    assert r.status_code == 422 and r.json()["error"]["message"].startswith(says), r.text
    assert fake_openai.requests == []


def test_a_diverged_anthropic_request_names_the_clients_messages(proxy: str, memory: lossless.Memory) -> None:
    path, body = _request("anthropic", "改写", [{"role": "user", "content": "你好"}], system="你是助手")
    assert _post(proxy, path, body).status_code == 200
    reply = {"role": "assistant", "content": _stored(memory, "改写")[-1][1]}
    path, body = _request("anthropic", "改写", [{"role": "user", "content": "改了"}, reply,
                                                {"role": "user", "content": "然后呢"}], system="你是助手")
    r = _post(proxy, path, body)
    assert r.status_code == 409, r.text
    assert r.json()["error"]["message"].startswith("messages[0] (user) differs from the stored message #2"), r.text
    assert "while messages[1] is the stored #3" in r.json()["error"]["message"]


@pytest.mark.parametrize(("wire", "messages"), [
    ("anthropic", [{"role": "user", "content": [{"type": "thinking", "thinking": "想一想", "signature": "s"}]}]),
    ("openai", [{"role": "assistant", "content": ""}]),
])
def test_a_request_with_nothing_to_store_says_so(proxy: str, memory: lossless.Memory, fake_openai: FakeOpenAIServer,
                                                 wire: str, messages: list[dict[str, Any]]) -> None:
    """Turns of thinking blocks or empty replies alone: Anthropic's was told "'messages' must
    be a non-empty list" (it was not), OpenAI's went to the provider as an empty list and
    came back in the provider's words. Both are a 422 that says what the turns hold."""
    calls = len(fake_openai.requests)
    path, body = _request(wire, "空", messages)
    r = _post(proxy, path, body)
    assert r.status_code == 422 and "holds nothing to store or send" in r.text, r.text
    assert len(fake_openai.requests) == calls and memory.get_conversation("空") is None


def test_a_tool_loop_with_extended_thinking_keeps_its_thinking_block(
        proxy: str, memory: lossless.Memory, fake_openai: FakeOpenAIServer, closing: ExitStack) -> None:
    """Claude with extended thinking calls a tool; the client sends the assistant turn back
    (thinking block first, as the API requires) with the tool's result. lossless stores no
    thinking, and the context it sent lacked it: the API refuses a final assistant turn that
    calls tools without its thinking block, so every tool loop with thinking was a 400."""
    client = closing.enter_context(anthropic.Anthropic(base_url=proxy, api_key="unused", max_retries=0,
                                                       default_headers={HEADER: "%E6%80%9D%E8%80%83"}))
    tools: Any = [{"name": "get_weather", "description": "查询城市天气",
                   "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]
    thinking: Any = {"type": "enabled", "budget_tokens": 1024}
    history: list[Any] = [{"role": "user", "content": "北京今天天气怎么样？"}]
    fake_openai.enqueue_tool_calls({"id": "call_w1", "name": "get_weather", "arguments": '{"city": "北京"}'})
    first = client.messages.create(model=CLAUDE, max_tokens=2048, thinking=thinking, tools=tools, messages=history)
    use = next(b for b in first.content if b.type == "tool_use")
    signed = {"type": "thinking", "thinking": "用户问北京天气，先查一下。", "signature": "sig-北京-1"}
    history += [{"role": "assistant", "content": [signed, *(b.model_dump(exclude_none=True) for b in first.content)]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "晴，二十五度"}]}]
    fake_openai.enqueue_chat("北京今天晴，二十五度。")
    second = client.messages.create(model=CLAUDE, max_tokens=2048, thinking=thinking, tools=tools, messages=history)
    assert second.content[0].text == "北京今天晴，二十五度。"  # type: ignore[union-attr]
    sent = fake_openai.messages_requests()[-1].body["messages"]
    assert sent[-2]["role"] == "assistant" and sent[-2]["content"][0] == signed
    assert [b["type"] for b in sent[-2]["content"]] == ["thinking", "tool_use"]
    assert [m.role for m in memory.get_conversation("思考").messages()] == [  # type: ignore[union-attr]
        "user", "assistant", "tool", "assistant"]  # the thinking itself is not stored


# -- lossless's own errors, in each wire format's shape ----------------------------------------

def _closed_port() -> int:
    """A port on 127.0.0.1 nothing listens on (bound, then let go)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_the_proxys_own_errors_take_the_wire_formats_shape(memory: lossless.Memory, fake_openai: FakeOpenAIServer,
                                                            wire: str) -> None:
    """The Anthropic route answered lossless's own errors as {"error": {...}}, without
    Anthropic's top-level "type": "error" that its clients read an error by. They come in
    Anthropic's envelope now (the same error.type and message); the OpenAI route keeps its
    shape. Over real HTTP: a bad request, a bad conversation id, no provider, a dead one."""
    def check(r: httpx.Response, status: int, type_: str, says: str) -> None:
        assert r.status_code == status, r.text
        body = r.json()
        assert set(body["error"]) == {"type", "message"} and body["error"]["type"] == type_, r.text
        assert says in body["error"]["message"], r.text
        assert body == ({"type": "error", "error": body["error"]} if wire == "anthropic" else {"error": body["error"]})

    chat = [{"role": "user", "content": "我的订单号是多少？ What is my order number?"}]
    path, body = _request(wire, "订单", chat)
    with served(memory, upstream=Upstream(fake_openai.base_url, "sk-upstream")) as srv:
        check(_post(srv.url, path, {k: v for k, v in body.items() if k != "model"}), 400, "invalid_request",
              "'model' is required")
        check(_post(srv.url, *_request(wire, None, chat)), 400, "invalid_request", "name the conversation")
        check(_post(srv.url, *_request(wire, "订\n单", chat)), 422, "validation_error", "control character")
    with served(memory) as srv:  # no --upstream
        check(_post(srv.url, path, body), 501, "not_available", "no upstream model provider")
    with served(memory, upstream=Upstream(f"http://127.0.0.1:{_closed_port()}", "sk-upstream")) as srv:
        check(_post(srv.url, path, body), 502, "upstream_error", "did not answer")
        if wire == "anthropic":  # Anthropic's own SDK reads it as one of its errors
            client = anthropic.Anthropic(base_url=srv.url, api_key="unused", max_retries=0,
                                         default_headers={HEADER: "%E8%AE%A2%E5%8D%95-sdk"})
            with pytest.raises(anthropic.APIStatusError) as raised:
                client.messages.create(model=CLAUDE, max_tokens=100, messages=[{"role": "user", "content": "你好"}])
            assert raised.value.status_code == 502
            assert isinstance(raised.value.body, dict) and raised.value.body["type"] == "error"
    assert fake_openai.requests == []  # none of them reached the provider
