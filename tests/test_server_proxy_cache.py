"""Anthropic's prompt caching through the proxy: the ``cache_control`` marks a client puts on
its newest messages reach the provider as sent; marks are not stored, a moved mark is the
same message, and the history the context shows in place of the client's carries none.
A real server on 127.0.0.1 over the fake provider, which records the body it got."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

import lossless
from lossless.server.state import Upstream
from tests.conftest import chat
from tests.fake_openai import FakeOpenAIServer, fake_openai
from tests.server_support import served

__all__ = ["fake_openai"]  # the fixture, imported for pytest to find

CLAUDE = "claude-proxy-test"
MARK = {"type": "ephemeral"}
IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[lossless.Memory]:
    m = lossless.open(tmp_path / "cache.db", context_window=4096, embedder=None)
    yield m
    m.close()


@pytest.fixture
def url(memory: lossless.Memory, fake_openai: FakeOpenAIServer) -> Iterator[str]:
    with served(memory, upstream=Upstream(fake_openai.base_url, "sk-upstream")) as server:
        yield server.url


def _send(url: str, conversation: str, messages: list[Any], **extra: Any) -> httpx.Response:
    response = httpx.post(url + "/v1/messages", timeout=30,
                          json={"model": CLAUDE, "max_tokens": 200, "messages": messages, **extra},
                          headers={"X-Lossless-Conversation": quote(conversation, safe=""),
                                   "anthropic-version": "2023-06-01"})
    assert response.status_code == 200, response.text
    return response


def _marked(body: dict[str, Any]) -> list[Any]:
    """Every block of the request's messages that carries a cache_control mark."""
    return [block for turn in body["messages"] if isinstance(turn["content"], list)
            for block in turn["content"] if "cache_control" in block]


def test_marks_on_the_newest_turn_reach_the_provider(url: str, memory: lossless.Memory,
                                                     fake_openai: FakeOpenAIServer) -> None:
    """The proxy rebuilt the messages from the store, and a text block's mark, or a tool
    result's (with its ``is_error`` and blocks), never reached the provider: the prompt cache
    the client asked for was never written. A client that moves its mark to the newest
    message each turn, as Anthropic's docs show, sends the message it took the mark off as
    the same message (an image turn's mark was stored with it, and moving it was a 409)."""
    history: list[Any] = [{"role": "user", "content": [
        IMAGE, {"type": "text", "text": "这张机房照片里是哪台交换机？", "cache_control": MARK}]}]
    fake_openai.enqueue_chat("是核心交换机。")
    _send(url, "缓存/一", history)
    sent = fake_openai.messages_requests()[-1].body
    assert sent["messages"] == history  # as the client wrote it, mark and all

    fake_openai.enqueue_tool_calls({"id": "call_7", "name": "查询端口", "arguments": '{"交换机": "核心"}'})
    history = [{"role": "user", "content": [IMAGE, {"type": "text", "text": "这张机房照片里是哪台交换机？"}]},
               {"role": "assistant", "content": [{"type": "text", "text": "是核心交换机。"}]},
               {"role": "user", "content": [{"type": "text", "text": "查一下它的端口。", "cache_control": MARK}]}]
    tool_use = _send(url, "缓存/一", history).json()["content"][0]
    sent = fake_openai.messages_requests()[-1].body
    assert _marked(sent) == [{"type": "text", "text": "查一下它的端口。", "cache_control": MARK}]

    result = {"type": "tool_result", "tool_use_id": tool_use["id"], "is_error": True, "cache_control": MARK,
              "content": [{"type": "text", "text": "端口查询超时（30 秒）"}]}
    history[-1] = {"role": "user", "content": [{"type": "text", "text": "查一下它的端口。"}]}
    history += [{"role": "assistant", "content": [tool_use]}, {"role": "user", "content": [result]}]
    fake_openai.enqueue_chat("查询超时了，稍后再试。")
    _send(url, "缓存/一", history)
    sent = fake_openai.messages_requests()[-1].body
    assert sent["messages"][-1] == {"role": "user", "content": [result]}  # is_error and blocks too
    assert _marked(sent) == [result]

    stored = memory.get_conversation("缓存/一").messages()  # type: ignore[union-attr]
    assert [m.role for m in stored] == ["user", "assistant", "user", "assistant", "tool", "assistant"]
    assert "cache_control" not in json.dumps([m.content for m in stored])  # a transport hint, not content


def test_history_the_context_replaced_carries_no_marks(url: str, memory: lossless.Memory,
                                                       fake_openai: FakeOpenAIServer) -> None:
    """A client that sends only its new messages: the rest comes from the store. A mark
    stored with a message (as before marks were taken off on the way in) belongs to the
    request that sent it: sent again it would pile up past the API's four. The client's
    own newest message keeps its mark."""
    memory.conversation("旧/标记").add_many([
        {"role": "user", "content": [IMAGE, {"type": "text", "text": "图里是什么？", "cache_control": MARK}]},
        {"role": "assistant", "content": "一台服务器。"}])
    newest = {"role": "user", "content": [{"type": "text", "text": "它在哪个机柜？", "cache_control": MARK}]}
    fake_openai.enqueue_chat("在 A3 机柜。")
    _send(url, "旧/标记", [newest])
    sent = fake_openai.messages_requests()[-1].body
    assert sent["messages"][0]["content"][1] == {"type": "text", "text": "图里是什么？"}
    assert _marked(sent) == newest["content"] and sent["messages"][-1] == newest
    # the stored message with its old mark is the client's message without it (no 409)
    whole = [{"role": "user", "content": [IMAGE, {"type": "text", "text": "图里是什么？"}]},
             {"role": "assistant", "content": "一台服务器。"}, {"role": "user", "content": "它在哪个机柜？"},
             {"role": "assistant", "content": "在 A3 机柜。"},
             {"role": "user", "content": [{"type": "text", "text": "谢谢", "cache_control": MARK}]}]
    fake_openai.enqueue_chat("不客气。")
    _send(url, "旧/标记", whole)
    assert len(memory.get_conversation("旧/标记").messages()) == 6  # type: ignore[union-attr]
    assert _marked(fake_openai.messages_requests()[-1].body) == whole[-1]["content"]


def test_a_long_chat_keeps_the_newest_marks_only(url: str, memory: lossless.Memory,
                                                 fake_openai: FakeOpenAIServer) -> None:
    """Over the window the context replaces the old turns (summaries, recall, pointers): a
    mark the client put on an old turn goes with it, the newest turns' marks are sent as
    the client wrote them."""
    history: list[Any] = []
    for i in range(60):
        text = f"第{i}轮：服务-{i} 的端口是 {5000 + i}。" + "细节 " * 40
        history += [{"role": "user", "content": [{"type": "text", "text": text}]},
                    {"role": "assistant", "content": f"记下了，服务-{i}。"}]
    history[20]["content"][0]["cache_control"] = MARK  # an old breakpoint
    history[-2]["content"][0]["cache_control"] = MARK  # the previous turn's
    history.append({"role": "user", "content": [{"type": "text", "text": "服务-3 的端口是多少？", "cache_control": MARK}]})
    fake_openai.enqueue_chat("5003。")
    _send(url, "长/对话", history)
    sent = fake_openai.messages_requests()[-1].body
    assert len(sent["messages"]) < len(history) / 2  # the history was replaced
    assert sent["messages"][-3:] == history[-3:]
    assert _marked(sent) == [history[-3]["content"][0], history[-1]["content"][0]]


def _seed_summarized(memory: lossless.Memory, cid: str) -> None:
    conv = memory.conversation(cid)
    conv.add(role="system", content="你是运维助理，回答要简短。")
    conv.add_many([{k: v for k, v in m.items() if k != "created_at"} for m in chat(120)])
    assert memory.wait_idle(60) and conv.summaries()


def _ask(url: str, fake: FakeOpenAIServer, question: str, *, mark: bool = True, **extra: Any) -> dict[str, Any]:
    """A client that sends only its new message (the history is the store's); the body the
    provider got."""
    block: dict[str, Any] = {"type": "text", "text": question, **({"cache_control": MARK} if mark else {})}
    _send(url, "运维/一", [{"role": "user", "content": [block]}], system="你是运维助理，回答要简短。", **extra)
    body: dict[str, Any] = fake.messages_requests()[-1].body
    return body


def test_the_stable_prefix_is_marked_for_a_client_that_caches(url: str, memory: lossless.Memory,
                                                              fake_openai: FakeOpenAIServer) -> None:
    """The context's system prompt holds the client's prompt, the summaries (the cache-stable
    prefix, the same every turn until the next compaction) and then the block for the
    current question, which differs every turn: a client's breakpoints, all after it, were
    written every turn and never read. A client that asks for caching gets one more mark,
    at the end of the stable prefix, which the next turn reads."""
    _seed_summarized(memory, "运维/一")
    fake_openai.enqueue_chat("5004。", "5007。")
    first = _ask(url, fake_openai, "service-4 的端口是多少？")
    second = _ask(url, fake_openai, "service-7 呢？")
    cut = []
    for sent in (first, second):
        system = sent["system"]
        assert isinstance(system, list) and system[0] == {"type": "text", "text": "你是运维助理，回答要简短。"}
        marked = [i for i, block in enumerate(system) if "cache_control" in block]
        assert len(marked) == 1 and "<summary" in system[marked[0]]["text"]
        assert _marks(sent) == 2  # the client's and the prefix's
        cut.append(marked[0] + 1)
    assert first["system"][:cut[0]] == second["system"][:cut[1]]  # what the second turn reads from the cache
    assert first["system"][cut[0]:] != second["system"][cut[1]:]  # the question's block

    # a client that does not ask for caching gets none; one with the API's four marks, no fifth
    fake_openai.enqueue_chat("不知道。", "不知道。")
    assert isinstance(_ask(url, fake_openai, "service-9 呢？", mark=False)["system"], str)
    tools = [{"name": f"工具{i}", "input_schema": {"type": "object"}, "cache_control": MARK} for i in range(3)]
    full = _ask(url, fake_openai, "service-11 呢？", tools=tools)
    assert _marks(full) == 4 and isinstance(full["system"], str)


def _marks(body: dict[str, Any]) -> int:
    return json.dumps(body).count('"cache_control"')
