"""Anthropic's prompt caching through the OpenAI route, as OpenRouter and other
OpenAI-compatible gateways pass it on: ``cache_control`` marks on content parts. Marks are
not stored, the history rebuilt from the store carries none, and the client's own marked
messages that the context shows unchanged reach the provider as the client wrote them, so
the provider never gets more marks than the client sent (Anthropic refuses more than four).
A real server on 127.0.0.1 over the fake provider, which records the body it got."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest

import lossless
from lossless.server.state import Upstream
from tests.conftest import StoreTarget
from tests.fake_openai import FakeOpenAIServer, fake_openai
from tests.server_support import served

__all__ = ["fake_openai"]  # the fixture, imported for pytest to find

MODEL = "anthropic/claude-proxy-test"  # a gateway's name for a Claude model
MARK = {"type": "ephemeral"}
SYSTEM = {"role": "system", "content": [{"type": "text", "text": "你是机房运维助理，回答要简短。", "cache_control": MARK}]}


@pytest.fixture
def memory(store_target: StoreTarget) -> Iterator[lossless.Memory]:
    m = lossless.open(store_target("cache-openai"), context_window=4096)
    yield m
    m.close()


@pytest.fixture
def url(memory: lossless.Memory, fake_openai: FakeOpenAIServer) -> Iterator[str]:
    with served(memory, upstream=Upstream(fake_openai.base_url, "sk-upstream")) as server:
        yield server.url


def _send(url: str, fake: FakeOpenAIServer, conversation: str, messages: list[Any]) -> dict[str, Any]:
    """The body the provider got for this request."""
    response = httpx.post(url + "/v1/chat/completions", timeout=30, json={"model": MODEL, "messages": messages},
                          headers={"X-Lossless-Conversation": quote(conversation, safe="")})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = fake.chat_requests()[-1].body
    return body


def _user(text: str, *, mark: bool = False) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text, **({"cache_control": MARK} if mark else {})}]}


def _marks(value: Any) -> int:
    return json.dumps(value).count('"cache_control"')


def _unmark(message: dict[str, Any]) -> dict[str, Any]:
    content = message["content"]
    if not isinstance(content, list):
        return message
    return {**message, "content": [{k: v for k, v in p.items() if k != "cache_control"} for p in content]}


def _stored_marks(memory: lossless.Memory, cid: str) -> int:
    conv = memory.get_conversation(cid)
    assert conv is not None
    return _marks([m.content for m in conv.messages()])


def test_a_breakpoint_moved_to_the_newest_message_is_sent_once(url: str, memory: lossless.Memory,
                                                               fake_openai: FakeOpenAIServer) -> None:
    """A client marks its system prompt and moves its other mark to its newest message each
    turn. The proxy stored each message with the mark it came with and sent the history
    from the store: one more mark every turn, and from the fourth turn on (five marks)
    Anthropic refused every request with a 400."""
    history: list[dict[str, Any]] = [SYSTEM]
    for turn in range(6):
        history = [m if m["role"] == "system" else _unmark(m) for m in history]
        history.append(_user(f"第{turn}台交换机的管理地址是多少？", mark=True))
        fake_openai.enqueue_chat(f"10.0.0.{turn}。")
        sent = _send(url, fake_openai, "缓存/移动", history)
        assert _marks(sent) == 2, f"turn {turn}"  # the client's two, no more
        assert sent["messages"] == history  # the client's chat as it wrote it
        history.append({"role": "assistant", "content": f"10.0.0.{turn}。"})
    assert _stored_marks(memory, "缓存/移动") == 0  # a transport hint, not what the messages say
    conv = memory.get_conversation("缓存/移动")
    assert conv is not None and len(conv.messages()) == 13


def test_a_marked_tool_result_and_image_go_as_sent(url: str, memory: lossless.Memory,
                                                   fake_openai: FakeOpenAIServer) -> None:
    """Marks on an image turn's parts and on a tool result's: the newest of the client's
    messages go as it wrote them; the tool call between them is the context's."""
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
    asked = {"role": "user", "content": [image, {"type": "text", "text": "照片里这台交换机的端口通吗？",
                                                  "cache_control": MARK}]}
    fake_openai.enqueue_tool_calls({"id": "call_1", "name": "查询端口", "arguments": '{"交换机": "核心"}'})
    _send(url, fake_openai, "缓存/工具", [SYSTEM, asked])
    call = {"role": "assistant", "content": None, "refusal": None,
            "tool_calls": [{"id": "call_1", "type": "function",
                            "function": {"name": "查询端口", "arguments": '{"交换机": "核心"}'}}]}
    result = {"role": "tool", "tool_call_id": "call_1",
              "content": [{"type": "text", "text": "端口 24 超时（30 秒）", "cache_control": MARK}]}
    fake_openai.enqueue_chat("端口 24 不通。")
    sent = _send(url, fake_openai, "缓存/工具", [SYSTEM, _unmark(asked), call, result])
    assert sent["messages"][0] == SYSTEM and sent["messages"][1] == _unmark(asked)
    assert sent["messages"][2] == {k: v for k, v in call.items() if k != "refusal"}  # the context's: it has no mark
    assert sent["messages"][3] == result
    assert _marks(sent) == 2
    assert _stored_marks(memory, "缓存/工具") == 0


def test_history_rebuilt_from_the_store_carries_no_marks(url: str, memory: lossless.Memory,
                                                         fake_openai: FakeOpenAIServer) -> None:
    """A client that sends only its new messages: the rest comes from the store, where a
    message kept the mark it came with (as before marks were left out). That mark belonged
    to the request that sent it; the client's newest message keeps its own. Sent whole
    later, the stored message with its old mark is the client's without it (no 409)."""
    memory.conversation("旧/标记").add_many([
        SYSTEM, {"role": "user", "content": [{"type": "text", "text": "核心交换机在哪？", "cache_control": MARK}]},
        {"role": "assistant", "content": "在 A3 机柜。"}])
    newest = _user("它的型号呢？", mark=True)
    fake_openai.enqueue_chat("S5735。")
    sent = _send(url, fake_openai, "旧/标记", [newest])
    assert sent["messages"][1] == _user("核心交换机在哪？")
    assert sent["messages"][-1] == newest and _marks(sent) == 1
    whole = [SYSTEM, _user("核心交换机在哪？"), {"role": "assistant", "content": "在 A3 机柜。"}, _user("它的型号呢？"),
             {"role": "assistant", "content": "S5735。"}, _user("谢谢", mark=True)]
    fake_openai.enqueue_chat("不客气。")
    sent = _send(url, fake_openai, "旧/标记", whole)
    assert sent["messages"] == whole and _marks(sent) == 2  # the system prompt's and the newest's
    conv = memory.get_conversation("旧/标记")
    assert conv is not None and len(conv.messages()) == 7


def test_a_long_chat_keeps_the_clients_marks_only(url: str, memory: lossless.Memory,
                                                  fake_openai: FakeOpenAIServer) -> None:
    """Over the window the context replaces the old turns: a mark on an old turn goes with
    it; the system prompt's and the newest turns' are sent as the client wrote them."""
    history: list[dict[str, Any]] = [SYSTEM]
    for i in range(60):
        text = f"第{i}轮：服务-{i} 的端口是 {5000 + i}。" + "细节 " * 40
        history += [_user(text), {"role": "assistant", "content": f"记下了，服务-{i}。"}]
    history[21]["content"][0]["cache_control"] = MARK  # an old breakpoint
    history[-2]["content"][0]["cache_control"] = MARK  # the previous turn's
    history.append(_user("服务-3 的端口是多少？", mark=True))
    fake_openai.enqueue_chat("5003。")
    sent = _send(url, fake_openai, "长/对话", history)
    assert len(sent["messages"]) < len(history) / 2  # the history was replaced
    assert sent["messages"][0] == SYSTEM
    assert sent["messages"][-3:] == history[-3:]
    assert _marks(sent) == 3
    assert _stored_marks(memory, "长/对话") == 0
