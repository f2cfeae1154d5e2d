"""The context proxy against the fake provider (tests/fake_openai.py): OpenAI and Anthropic,
JSON and streaming, new-message matching, tool calls passing through, emergency
compaction on a context-length error, errors, and keys."""

from __future__ import annotations

import gc
import itertools
import json
import socket
import time
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import anthropic
import httpx
import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lossless
from lossless.core.models import context_window
from lossless.core.tokens import count_chat_tokens
from lossless.server.keys import APIKeys
from lossless.server.run import free_port
from lossless.server.sse import ServerSentEvent, SSEParser
from lossless.server.state import Upstream
from tests.conftest import StoreTarget, chat
from tests.fake_openai import FakeOpenAIServer, fake_openai
from tests.server_support import OpenAPIChecker, served

__all__ = ["fake_openai"]  # the fixture, imported for pytest to find

MODEL = "gpt-4o-mini"
CLAUDE = "claude-proxy-test"  # an unknown name: the memory's window applies, no SDK deprecation warning


@pytest.fixture(autouse=True)
def _no_socket_left_open() -> Iterator[None]:
    """A test here leaves no socket open once its fixtures are done: the clients it opens are
    closed (through ``closing``). An OpenAI client left open sits in a reference cycle, and its
    keep-alive socket, if finalized before the client, was an unclosed-socket ResourceWarning:
    an error in whichever later test the garbage collector ran in. What is older than the test
    is frozen, out of ``gc.get_objects()``."""
    gc.freeze()
    try:
        yield
        left = [repr(o) for o in gc.get_objects() if isinstance(o, socket.socket) and o.fileno() != -1]
    finally:
        gc.unfreeze()
    assert left == []


@pytest.fixture
def memory(store_target: StoreTarget) -> Iterator[lossless.Memory]:
    m = lossless.open(store_target("proxy"), context_window=4096)
    yield m
    m.close()


@pytest.fixture
def proxy(memory: lossless.Memory, fake_openai: FakeOpenAIServer) -> Iterator[str]:
    with served(memory, upstream=Upstream(fake_openai.base_url, "sk-upstream", max_compactions=2)) as server:
        yield server.url


def _client(closing: ExitStack, url: str, conversation: str, key: str = "unused-without-keys") -> openai.OpenAI:
    """An OpenAI client at the proxy, closed when the test ends."""
    return closing.enter_context(openai.OpenAI(base_url=url + "/v1", api_key=key, max_retries=0,
                                               default_headers={"X-Lossless-Conversation": conversation}))


def _stored(memory: lossless.Memory, cid: str) -> list[tuple[str, Any]]:
    conv = memory.get_conversation(cid)
    assert conv is not None
    return [(m.role, m.content) for m in conv.messages()]


def test_chat_completions_stores_each_message_once(proxy: str, memory: lossless.Memory,
                                                   fake_openai: FakeOpenAIServer, closing: ExitStack) -> None:
    client = _client(closing, proxy, "c1")
    history: list[dict[str, Any]] = [{"role": "system", "content": "You are terse."},
                                     {"role": "user", "content": "Hi, I am Ann. Our deploy key rotates every 90 days."}]
    fake_openai.enqueue_chat("Noted, Ann.")
    first = client.chat.completions.create(model=MODEL, messages=history)  # type: ignore[arg-type]
    assert first.choices[0].message.content == "Noted, Ann."
    assert fake_openai.chat_requests()[-1].headers["authorization"] == "Bearer sk-upstream"
    history += [{"role": "assistant", "content": "Noted, Ann."}, {"role": "user", "content": "And the port?"}]
    fake_openai.enqueue_chat("Port 8443.")
    second = client.chat.completions.with_raw_response.create(model=MODEL, messages=history)  # type: ignore[arg-type]
    assert second.headers["x-lossless-conversation"] == "c1" and int(second.headers["x-lossless-context-tokens"]) > 0
    assert second.parse().choices[0].message.content == "Port 8443."
    assert _stored(memory, "c1") == [("system", "You are terse."), ("user", history[1]["content"]),
                                     ("assistant", "Noted, Ann."), ("user", "And the port?"), ("assistant", "Port 8443.")]
    sent = fake_openai.chat_requests()[-1].body
    assert sent["model"] == MODEL and sent["messages"][-1] == {"role": "user", "content": "And the port?"}
    # a chat with nothing new stores just the reply; only-new-messages clients work too
    history.append({"role": "assistant", "content": "Port 8443."})
    fake_openai.enqueue_chat("Still 8443.", "Thursday.")
    client.chat.completions.create(model=MODEL, messages=history)  # type: ignore[arg-type]
    assert _stored(memory, "c1")[-1] == ("assistant", "Still 8443.") and len(_stored(memory, "c1")) == 6
    client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Which day do we ship?"}])
    assert _stored(memory, "c1")[-2:] == [("user", "Which day do we ship?"), ("assistant", "Thursday.")]
    # `user` names the conversation when there is no header
    plain = closing.enter_context(openai.OpenAI(base_url=proxy + "/v1", api_key="x", max_retries=0))
    fake_openai.enqueue_chat("ok")
    plain.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hello"}], user="via-user")
    assert _stored(memory, "via-user") == [("user", "hello"), ("assistant", "ok")]


def test_long_history_is_assembled_into_the_window(proxy: str, memory: lossless.Memory,
                                                   fake_openai: FakeOpenAIServer, closing: ExitStack) -> None:
    """A client that keeps sending a chat far over the window: the provider gets a context
    that fits, with the newest turn verbatim. The first request does not wait for the
    summaries (the worker writes them): what is not summarized yet is pointed to; the
    next request has the old part summarized."""
    history = [{k: v for k, v in m.items() if k != "created_at"} for m in chat(200, tools_every=6)]
    history.append({"role": "user", "content": "What did we decide about service-4?"})
    fake_openai.enqueue_chat("We kept it.")
    _client(closing, proxy, "long").chat.completions.create(model=MODEL, messages=history)  # type: ignore[arg-type]
    sent = fake_openai.chat_requests()[-1].body["messages"]
    assert sent[-1]["content"] == "What did we decide about service-4?"
    # what the worker has summarized so far, and the raw rest, within the model's window
    assert count_chat_tokens(memory.counter, sent) <= context_window(MODEL)
    assert len(_stored(memory, "long")) == 202
    assert memory.wait_idle(60)
    history += [{"role": "assistant", "content": "We kept it."}, {"role": "user", "content": "And service-5?"}]
    fake_openai.enqueue_chat("Also kept.")
    _client(closing, proxy, "long").chat.completions.create(model=MODEL, messages=history)  # type: ignore[arg-type]
    sent = fake_openai.chat_requests()[-1].body["messages"]
    assert sent[-1]["content"] == "And service-5?"
    assert any("<summary" in str(m.get("content")) for m in sent)
    assert len(json.dumps(sent)) < len(json.dumps(history)) / 3
    assert memory.verify("long") == []


def test_tool_calls_pass_through_intact(proxy: str, memory: lossless.Memory, fake_openai: FakeOpenAIServer,
                                       closing: ExitStack) -> None:
    client = _client(closing, proxy, "tools")
    history: list[dict[str, Any]] = [{"role": "user", "content": "Run the tests please"}]
    tools = [{"type": "function", "function": {"name": "run_tests", "parameters": {"type": "object"}}}]
    fake_openai.enqueue_tool_calls({"id": "call_42", "name": "run_tests", "arguments": '{"suite": "unit"}'})
    reply = client.chat.completions.create(model=MODEL, messages=history, tools=tools)  # type: ignore[arg-type]
    call = reply.choices[0].message.tool_calls[0]  # type: ignore[index]
    assert (call.id, call.function.name, call.function.arguments) == ("call_42", "run_tests", '{"suite": "unit"}')
    assert fake_openai.chat_requests()[-1].body["tools"] == tools
    history += [reply.choices[0].message.model_dump(exclude_none=True),
                {"role": "tool", "tool_call_id": "call_42", "content": "12 passed"}]
    fake_openai.enqueue_chat("All 12 tests pass.")
    client.chat.completions.create(model=MODEL, messages=history, tools=tools)  # type: ignore[arg-type]
    stored = memory.get_conversation("tools").messages()  # type: ignore[union-attr]
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[1].tool_calls[0]["function"] == {"name": "run_tests", "arguments": '{"suite": "unit"}'}
    assert stored[2].tool_call_id == "call_42" and stored[3].content == "All 12 tests pass."
    sent = fake_openai.chat_requests()[-1].body["messages"]
    assert sent[-1]["tool_call_id"] == "call_42" and sent[-2]["tool_calls"][0]["id"] == "call_42"


def test_streaming_is_relayed_and_stored(proxy: str, memory: lossless.Memory, fake_openai: FakeOpenAIServer,
                                        closing: ExitStack) -> None:
    client = _client(closing, proxy, "s1")
    fake_openai.enqueue_chat("The quick brown fox jumps over the lazy dog again and again.")
    stream = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Tell me"}],
                                            stream=True, stream_options={"include_usage": True})
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "The quick brown fox jumps over the lazy dog again and again."
    assert len(chunks) > 4 and chunks[-1].usage is not None  # the provider's chunks, as they were
    assert _stored(memory, "s1") == [("user", "Tell me"), ("assistant", text)]
    # tool calls streamed in pieces are stored whole
    fake_openai.enqueue_tool_calls({"id": "call_7", "name": "lookup", "arguments": '{"q": "fox", "n": 3}'})
    history = [{"role": "user", "content": "Tell me"}, {"role": "assistant", "content": text},
               {"role": "user", "content": "Look it up"}]
    pieces = list(client.chat.completions.create(model=MODEL, messages=history, stream=True))  # type: ignore[arg-type]
    assert pieces[-1].choices[0].finish_reason == "tool_calls"
    last = memory.get_conversation("s1").messages()[-1]  # type: ignore[union-attr]
    assert last.tool_calls[0]["id"] == "call_7" and json.loads(last.tool_calls[0]["function"]["arguments"]) == {
        "q": "fox", "n": 3}


@pytest.mark.parametrize(("line_end", "bom"), [("\r", False), ("\r\n", True), ("\r", True)])
def test_streams_with_other_line_ends_or_a_bom_are_stored(proxy: str, memory: lossless.Memory,
                                                          fake_openai: FakeOpenAIServer, line_end: str,
                                                          bom: bool) -> None:
    # the SSE spec's other line ends (a lone CR, CRLF) and a leading BOM: the reply is still
    # read off the relayed copy and stored, and the client gets the provider's bytes as they were
    fake_openai.sse_line_end, fake_openai.sse_bom = line_end, bom
    fake_openai.enqueue_chat("Carriage returns are line ends too.")
    body = {"model": MODEL, "stream": True, "messages": [{"role": "user", "content": "Line ends?"}]}
    with httpx.stream("POST", proxy + "/v1/chat/completions", json=body,
                      headers={"X-Lossless-Conversation": "cr"}, timeout=30) as response:
        raw = b"".join(response.iter_raw())
    assert raw.startswith(b"\xef\xbb\xbf" if bom else b"data: ") and raw.endswith(f"[DONE]{line_end * 2}".encode())
    assert _stored(memory, "cr") == [("user", "Line ends?"), ("assistant", "Carriage returns are line ends too.")]


def test_streaming_passes_chunks_on_as_they_come(proxy: str, fake_openai: FakeOpenAIServer) -> None:
    fake_openai.stream_delay = 0.15
    fake_openai.enqueue_chat(" ".join(f"word{i}" for i in range(30)))  # 10 content chunks, ~1.8 s in all
    body = {"model": MODEL, "stream": True, "messages": [{"role": "user", "content": "slowly"}]}
    started = time.monotonic()
    arrivals: list[float] = []
    with httpx.stream("POST", proxy + "/v1/chat/completions", json=body,
                      headers={"X-Lossless-Conversation": "slow"}, timeout=30) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line.startswith("data:"):
                arrivals.append(time.monotonic() - started)
    assert arrivals[-1] > 1.2 and arrivals[0] < arrivals[-1] - 0.8  # the first came long before the last


def test_context_length_error_compacts_and_retries(proxy: str, memory: lossless.Memory,
                                                   fake_openai: FakeOpenAIServer, closing: ExitStack) -> None:
    client = _client(closing, proxy, "overflow")
    history = [{k: v for k, v in m.items() if k != "created_at"} for m in chat(60)]
    fake_openai.fail_next(1, status=400, code="context_length_exceeded",
                          message="This model's maximum context length is 1500 tokens. However, your messages "
                                  "resulted in 3900 tokens. Please reduce the length of the messages.")
    fake_openai.enqueue_chat("Fits now.")
    raw = client.chat.completions.with_raw_response.create(model=MODEL, messages=history)  # type: ignore[arg-type]
    assert raw.parse().choices[0].message.content == "Fits now."
    assert raw.headers["x-lossless-compactions"] == "1"
    first, retry = (r.body["messages"] for r in fake_openai.chat_requests()[-2:])
    assert len(json.dumps(retry)) < len(json.dumps(first))
    log = memory.get_conversation("overflow").compaction_log()  # type: ignore[union-attr]
    assert any(entry["reason"] == "context-length error" for entry in log)
    assert _stored(memory, "overflow")[-1] == ("assistant", "Fits now.")


@pytest.mark.parametrize("language", ["zh", "en"])
@pytest.mark.parametrize("provider", ["moonshot", "dashscope", "zhipu"])
def test_a_chinese_providers_context_error_compacts_and_retries(proxy: str, memory: lossless.Memory,
                                                                fake_openai: FakeOpenAIServer, provider: str,
                                                                language: str) -> None:
    """Kimi, Qwen and GLM behind the proxy: their "too long" 400 was passed on to the client
    as it came, the conversation never compacted, every later turn refused the same way."""
    from tests.test_emergency import CHINESE_PROVIDERS_TOO_LONG

    error, _ = CHINESE_PROVIDERS_TOO_LONG[provider]
    line = ("我们讨论了北京的天气和交通，第{}段。" if language == "zh"
            else "We talked about the weather and traffic in Beijing, part {}.")
    history = [{"role": "user" if i % 2 == 0 else "assistant", "content": line.format(i) * 12} for i in range(41)]
    fake_openai.respond_next({"error": error}, status=400)
    fake_openai.enqueue_chat("现在放得下了。" if language == "zh" else "Fits now.")
    response = httpx.post(proxy + "/v1/chat/completions", headers={"X-Lossless-Conversation": f"{provider}-{language}"},
                          json={"model": MODEL, "messages": history}, timeout=30)
    assert response.status_code == 200, response.text
    assert response.headers["x-lossless-compactions"] == "1"
    first, retry = (count_chat_tokens(memory.counter, r.body["messages"]) for r in fake_openai.chat_requests()[-2:])
    assert retry < first and retry == int(response.headers["x-lossless-context-tokens"])
    stored = _stored(memory, f"{provider}-{language}")
    assert stored[:-1] == [(m["role"], m["content"]) for m in history]  # every message kept, verbatim
    assert stored[-1] == ("assistant", "现在放得下了。" if language == "zh" else "Fits now.")


def test_context_overflow_after_every_retry_is_422(proxy: str, memory: lossless.Memory,
                                                  fake_openai: FakeOpenAIServer) -> None:
    fake_openai.fail_next(10, status=400, code="context_length_exceeded", message="maximum context length exceeded")
    response = httpx.post(proxy + "/v1/chat/completions", headers={"X-Lossless-Conversation": "never"}, json={
        "model": MODEL, "messages": [{"role": "user", "content": "hello " * 50}]})
    assert response.status_code == 422 and response.json()["error"]["type"] == "context_overflow"
    assert len(fake_openai.chat_requests()) == 4  # first try, two emergency compactions, tool outputs cut
    assert _stored(memory, "never") == [("user", "hello " * 50)]  # the message stays; a retry re-sends it


def test_upstream_errors_pass_through(proxy: str, memory: lossless.Memory, fake_openai: FakeOpenAIServer) -> None:
    fake_openai.fail_next(1, status=429, message="Rate limit reached", error_type="rate_limit_error")
    response = httpx.post(proxy + "/v1/chat/completions", headers={"X-Lossless-Conversation": "rl"}, json={
        "model": MODEL, "messages": [{"role": "user", "content": "hi"}]})
    assert response.status_code == 429 and response.json()["error"]["message"] == "Rate limit reached"
    assert _stored(memory, "rl") == [("user", "hi")]


def test_proxy_request_errors(memory: lossless.Memory, fake_openai: FakeOpenAIServer) -> None:
    dead = f"http://127.0.0.1:{free_port()}/v1"
    with served(memory, upstream=Upstream(dead, None)) as down, \
            served(memory, upstream=Upstream(fake_openai.base_url)) as up, served(memory) as none:
        spec = OpenAPIChecker()
        msgs = [{"role": "user", "content": "hi"}]
        headers = {"X-Lossless-Conversation": "e"}
        r = httpx.post(down.url + "/v1/chat/completions", json={"model": MODEL, "messages": msgs}, headers=headers)
        assert r.status_code == 502 and r.json()["error"]["type"] == "upstream_error"
        spec.check(r)
        r = httpx.post(none.url + "/v1/chat/completions", json={"model": MODEL, "messages": msgs}, headers=headers)
        assert r.status_code == 501
        r = httpx.post(up.url + "/v1/chat/completions", json={"model": MODEL, "messages": msgs})
        assert r.status_code == 400 and "X-Lossless-Conversation" in r.json()["error"]["message"].title()
        r = httpx.post(up.url + "/v1/chat/completions", json={"messages": msgs}, headers=headers)
        assert r.status_code == 400 and "model" in r.json()["error"]["message"]
        r = httpx.post(up.url + "/v1/chat/completions", json={"model": MODEL, "messages": [{"role": "wizard"}]},
                       headers=headers)
        assert r.status_code == 422
        # rewriting stored history is refused: lossless history is append-only
        fake_openai.enqueue_chat("first answer", "second answer")
        body = {"model": MODEL, "messages": [{"role": "user", "content": "q1"}]}
        spec.check(httpx.post(up.url + "/v1/chat/completions", json=body, headers={"X-Lossless-Conversation": "f"}),
                   body)
        edited = {"model": MODEL, "messages": [{"role": "user", "content": "q1"},
                                               {"role": "assistant", "content": "an edited answer"},
                                               {"role": "user", "content": "q2"}]}
        r = httpx.post(up.url + "/v1/chat/completions", json=edited, headers={"X-Lossless-Conversation": "f"})
        assert r.status_code == 409 and r.json()["error"]["type"] == "conversation_diverged"
        assert len(memory.get_conversation("f").messages()) == 2  # type: ignore[union-attr]


def test_proxy_needs_a_key_once_keys_exist(memory: lossless.Memory, fake_openai: FakeOpenAIServer,
                                           closing: ExitStack) -> None:
    _, key = APIKeys(memory.store).create("acme")
    with served(memory, upstream=Upstream(fake_openai.base_url, "sk-up")) as server:
        with pytest.raises(openai.AuthenticationError):
            _client(closing, server.url, "k").chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}])
        fake_openai.enqueue_chat("hello acme")
        reply = _client(closing, server.url, "k", key).chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "hi"}])
        assert reply.choices[0].message.content == "hello acme"
        assert fake_openai.chat_requests()[-1].headers["authorization"] == "Bearer sk-up"  # never the client's key
    assert memory.get_conversation("k") is None and _stored(memory, "@acme/k")[-1] == ("assistant", "hello acme")


def test_anthropic_messages(proxy: str, memory: lossless.Memory, fake_openai: FakeOpenAIServer,
                            closing: ExitStack) -> None:
    client = closing.enter_context(anthropic.Anthropic(base_url=proxy, api_key="unused", max_retries=0,
                                                       default_headers={"X-Lossless-Conversation": "claude"}))
    fake_openai.enqueue_chat("Hello Ann.")
    first = client.messages.create(model=CLAUDE, max_tokens=200, system="Be kind.",
                                   messages=[{"role": "user", "content": "Hi, I am Ann."}])
    assert first.content[0].text == "Hello Ann."  # type: ignore[union-attr]
    upstream = fake_openai.messages_requests()[-1]
    assert upstream.headers["x-api-key"] == "sk-upstream" and upstream.body["system"] == "Be kind."
    fake_openai.enqueue_tool_calls({"id": "call_9", "name": "lookup", "arguments": '{"q": "ann"}'},
                                   content="Let me check.")
    history: list[Any] = [{"role": "user", "content": "Hi, I am Ann."},
                          {"role": "assistant", "content": [{"type": "text", "text": "Hello Ann."}]},
                          {"role": "user", "content": "Who am I?"}]
    with client.messages.stream(model=CLAUDE, max_tokens=200, system="Be kind.", messages=history) as stream:
        final = stream.get_final_message()
    use = final.content[1]
    assert use.type == "tool_use" and use.input == {"q": "ann"} and final.stop_reason == "tool_use"
    history += [{"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in final.content]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "Ann, admin"}]}]
    fake_openai.enqueue_chat("You are Ann, an admin.")
    client.messages.create(model=CLAUDE, max_tokens=200, system="Be kind.", messages=history)
    stored = memory.get_conversation("claude").messages()  # type: ignore[union-attr]
    assert [m.role for m in stored] == ["system", "user", "assistant", "user", "assistant", "tool", "assistant"]
    assert stored[4].tool_calls[0]["id"] == use.id and stored[5].tool_call_id == use.id
    sent = fake_openai.messages_requests()[-1].body["messages"]
    assert sent[-1]["content"][0] == {"type": "tool_result", "tool_use_id": use.id, "content": "Ann, admin"}
    assert sent[-2]["content"][-1]["type"] == "tool_use"



def test_anthropic_system_blocks_reach_the_provider_with_their_cache_control(
        proxy: str, memory: lossless.Memory, fake_openai: FakeOpenAIServer, closing: ExitStack) -> None:
    """A system prompt sent as text blocks marked for Anthropic's prompt caching went to the
    provider as a plain string: the ``cache_control`` breakpoint was gone, nothing was cached,
    and every turn of a long chat paid for its whole prompt. It is sent as the client wrote it
    (and stored once, as text)."""
    client = closing.enter_context(anthropic.Anthropic(
        base_url=proxy, api_key="unused", max_retries=0,
        default_headers={"X-Lossless-Conversation": "%E7%BC%93%E5%AD%98"}))
    system: Any = [{"type": "text", "text": "你是项目助理。"},
                   {"type": "text", "text": "回答要简短。", "cache_control": {"type": "ephemeral"}}]
    history: list[Any] = [{"role": "user", "content": "机房在深圳南山。"}]
    fake_openai.enqueue_chat("好的，记下了。", "在深圳南山。")
    first = client.messages.create(model=CLAUDE, max_tokens=200, system=system, messages=history)
    history += [{"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
                {"role": "user", "content": "机房在哪里？"}]
    with client.messages.stream(model=CLAUDE, max_tokens=200, system=system, messages=history) as stream:
        assert stream.get_final_message().content[0].text == "在深圳南山。"  # type: ignore[union-attr]
    assert [r.body["system"] for r in fake_openai.messages_requests()] == [system, system]
    stored = memory.get_conversation("缓存").messages()  # type: ignore[union-attr]
    assert [(m.role, m.content) for m in stored][:2] == [("system", "你是项目助理。\n回答要简短。"),
                                                        ("user", "机房在深圳南山。")]
    assert len(stored) == 5


def test_a_replayed_stream_ends_with_the_usage_chunk_the_client_asked_for(
        proxy: str, memory: lossless.Memory, fake_openai: FakeOpenAIServer, closing: ExitStack) -> None:
    """``stream_options.include_usage``: the provider's stream ends with a chunk of usage and no
    choices; the same request sent again (an SDK retry) was replayed without it, so a client
    reading the last chunk's usage got ``None`` on the retry alone."""
    client = closing.enter_context(openai.OpenAI(base_url=proxy + "/v1", api_key="unused", max_retries=0))
    chat: Any = [{"role": "user", "content": "杭州明天下雨吗？"}]
    fake_openai.enqueue_chat("明天有小雨，记得带伞。")
    options: Any = {"include_usage": True}
    for replayed in (False, True):
        raw = client.chat.completions.with_raw_response.create(
            model="gpt-4o", messages=chat, user="用量", stream=True, stream_options=options)
        assert raw.headers.get("x-lossless-replayed") == ("true" if replayed else None)
        chunks = list(raw.parse())
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "明天有小雨，记得带伞。"
        assert chunks[-1].choices == [] and chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0
        assert all(c.usage is None for c in chunks[:-1])
    assert len(fake_openai.chat_requests()) == 1
    assert [m.role for m in memory.get_conversation("用量").messages()] == ["user", "assistant"]  # type: ignore[union-attr]

# -- the SSE parser on its own ----------------------------------------------------------------

_SSE_CASES = [  # (stream, the events the WHATWG rules dispatch)
    (b"data: a\r\n\r\n", [(None, "a")]),
    (b"data: a\r\r", [(None, "a")]),
    (b"data: a\r\ndata: b\rdata: c\n\n", [(None, "a\nb\nc")]),
    (b": ping\n\ndata: a\n: keep-alive\n\n", [(None, "a")]),
    (b"event: delta\ndata: {}\n\nevent:\ndata: b\n\n", [("delta", "{}"), (None, "b")]),
    (b"retry: 1000\n\nid: 7\n\ndata: a\n\n\n", [(None, "a")]),
    (b"\xef\xbb\xbfdata: a\n\n", [(None, "a")]),
    (b"data: a\n\ndata: b", [(None, "a")]),
    (b"data\n\ndata:x\n\n", [(None, ""), (None, "x")]),
    (b"data: \xff\n\n", [(None, "\ufffd")]),
    ("data: 汉字 ✓\u2028\n\n".encode(), [(None, "汉字 ✓\u2028")]),
]


def _parse(chunks: list[bytes]) -> list[tuple[str | None, str]]:
    parser = SSEParser()
    return [(e.event, e.data) for chunk in chunks for e in parser.feed(chunk)]


@pytest.mark.parametrize(("raw", "expected"), _SSE_CASES)
def test_sse_parser_edge_cases_whole_and_byte_by_byte(raw: bytes, expected: list[tuple[str | None, str]]) -> None:
    assert _parse([raw]) == expected
    assert _parse([raw[i:i + 1] for i in range(len(raw))]) == expected


_FIELD = st.text(st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",)), max_size=12)


@settings(max_examples=200, deadline=None)
@given(events=st.lists(st.tuples(st.none() | _FIELD.filter(bool), st.lists(_FIELD, min_size=1, max_size=3)),
                       max_size=5),
       line_end=st.sampled_from(["\n", "\r\n", "\r"]), comments=st.booleans(), bom=st.booleans(),
       cuts=st.lists(st.integers(0, 400), max_size=8))
def test_sse_parser_gives_back_the_events_however_the_stream_is_cut(
        events: list[tuple[str | None, list[str]]], line_end: str, comments: bool, bom: bool, cuts: list[int]) -> None:
    text = "\ufeff" if bom else ""
    for name, data in events:
        text += (f": keep-alive{line_end}" if comments else "") + (f"event: {name}{line_end}" if name else "")
        text += "".join(f"data: {d}{line_end}" for d in data) + line_end
    raw = text.encode()
    bounds = sorted({0, len(raw), *(c for c in cuts if c < len(raw))})
    got = _parse([raw[a:b] for a, b in itertools.pairwise(bounds)])
    assert got == [(name, "\n".join(data)) for name, data in events]
    assert all(isinstance(e, ServerSentEvent) for e in SSEParser().feed(raw))


def test_a_stored_writer_openai_refuses_as_a_name_is_sent_in_the_text(proxy: str, memory: lossless.Memory,
                                                                      fake_openai: FakeOpenAIServer,
                                                                      closing: ExitStack) -> None:
    """A conversation holding a writer named 小美 (stored by an import or `lossless add
    --name`): every proxied turn was the upstream's 400 'messages[0].name does not match
    pattern'."""
    memory.conversation("named").add("user", "我最喜欢的颜色是蓝色。", name="小美")
    fake_openai.enqueue_chat("蓝色。")
    reply = _client(closing, proxy, "named").chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "小美喜欢什么颜色？"}])
    assert reply.choices[0].message.content == "蓝色。"
    sent = fake_openai.chat_requests()[-1].body["messages"]
    assert {"role": "user", "content": "小美: 我最喜欢的颜色是蓝色。"} in sent
    assert not any("name" in m for m in sent)
