"""The agent turn loop end to end, against the local OpenAI/Anthropic-format server:
tool calls, the memory tools, a recovered context-length error, failures that store
nothing, async clients, background compaction, long-term memory at the end of a task."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

import lossless
from lossless.agent.loop import ModelCallError
from tests.conftest import StoreTarget, chat
from tests.fake_openai import FakeOpenAIServer, fake_openai

__all__ = ["fake_openai"]  # the fixture, imported for pytest to find


def _completion(content: str | None = None, tool_calls: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "agent-model",
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if tool_calls else "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}


def _tool_call(name: str, args: dict[str, Any], cid: str = "call_1") -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


def _client(fake: FakeOpenAIServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=fake.base_url, api_key="test", max_retries=0, timeout=10)


def test_a_function_model_sees_history_and_the_turn_is_stored(store_target: StoreTarget, tmp_path: Path) -> None:
    mem = lossless.open(store_target("f"), embedder=None)
    conv = mem.conversation("c")
    conv.add("user", "My build server is ci-42.")
    conv.add("assistant", "Noted.")
    seen: list[list[dict[str, Any]]] = []

    def model(messages: list[dict[str, Any]]) -> str:
        seen.append(messages)
        return "Your build server is ci-42."

    result = conv.turn("Which build server do I use?", call=model)
    assert result.reply == "Your build server is ci-42."
    sent = "\n".join(str(m.get("content")) for m in seen[0])
    assert "ci-42" in sent and seen[0][-1] == {"role": "user", "content": "Which build server do I use?"}
    assert [m.role for m in conv.messages()] == ["user", "assistant", "user", "assistant"]
    assert result.context.tokens <= mem.config.context_window


def test_openai_client_with_tool_calls(store_target: StoreTarget, tmp_path: Path, fake_openai: FakeOpenAIServer) -> None:
    mem = lossless.open(store_target("o"), embedder=None)
    conv = mem.conversation("c")
    calls: list[str] = []

    def get_weather(city: str) -> dict[str, Any]:
        """Current weather for a city."""
        calls.append(city)
        return {"city": city, "temp_c": 21}

    fake_openai.respond_next(_completion(None, [_tool_call("get_weather", {"city": "Oslo"})]))
    fake_openai.enqueue_chat("It is 21 °C in Oslo.")
    result = conv.turn("Weather in Oslo?", call=_client(fake_openai), model="agent-model",
                       tools={"get_weather": get_weather})
    assert calls == ["Oslo"] and result.reply == "It is 21 °C in Oslo." and result.tool_calls == 1
    stored = conv.messages()
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[1].tool_calls and stored[2].tool_call_id == "call_1" and "21" in str(stored[2].content)
    requests = fake_openai.chat_requests()
    names = {t["function"]["name"] for t in requests[0].body["tools"]}
    assert {"get_weather", "lcm_grep", "lcm_describe", "lcm_expand"} <= names
    second = requests[1].body["messages"]
    assert second[-1]["role"] == "tool" and second[-2]["tool_calls"][0]["id"] == "call_1"


def test_the_memory_tools_answer_from_old_history(store_target: StoreTarget, tmp_path: Path, fake_openai: FakeOpenAIServer) -> None:
    mem = lossless.open(store_target("m"), embedder=None, context_window=2048)
    conv = mem.conversation("c")
    conv.add("user", "The staging password rotates on the 3rd; the vault path is kv/staging/db.")
    conv.add_many(chat(60, words=20))
    assert mem.wait_idle(60)
    assert conv.summaries()
    fake_openai.respond_next(_completion(None, [_tool_call("lcm_grep", {"query": "vault path"})]))
    fake_openai.enqueue_chat("kv/staging/db")
    result = conv.turn("Where is the staging vault path?", call=_client(fake_openai), model="m")
    tool_msg = next(m for m in result.messages if m.role == "tool")
    assert "kv/staging/db" in str(tool_msg.content)
    assert result.reply == "kv/staging/db"


def test_a_context_length_error_is_recovered(store_target: StoreTarget, tmp_path: Path, fake_openai: FakeOpenAIServer) -> None:
    mem = lossless.open(store_target("e"), embedder=None, context_window=8192, auto_compact=False)
    conv = mem.conversation("c")
    conv.add_many(chat(120, words=30))
    fake_openai.fail_next(1, status=400, message="This model's maximum context length is 4096 tokens.",
                          code="context_length_exceeded")
    fake_openai.enqueue_chat("done")
    result = conv.turn("and now?", call=_client(fake_openai), model="m", memory_tools=False)
    assert result.reply == "done" and result.emergency_compactions == 1
    assert any(e["reason"] == "context-length error" for e in conv.compaction_log())
    assert len(conv.messages()) == 122 and mem.verify() == []


def test_a_failed_turn_stores_nothing(store_target: StoreTarget, tmp_path: Path, fake_openai: FakeOpenAIServer) -> None:
    mem = lossless.open(store_target("x"), embedder=None)
    conv = mem.conversation("c")
    conv.add("user", "hello")

    def broken(messages: list[dict[str, Any]]) -> str:
        raise RuntimeError("GPU on fire")

    with pytest.raises(ModelCallError, match="GPU on fire"):
        conv.turn("hi again", call=broken)
    with pytest.raises(ModelCallError, match="not a reply"):
        conv.turn("hi again", call=lambda messages: 42)
    fake_openai.fail_next(1, status=500)
    with pytest.raises(ModelCallError, match="InternalServerError"):
        conv.turn("hi again", call=_client(fake_openai), model="m")
    with pytest.raises(lossless.ValidationError, match="model="):
        conv.turn("hi again", call=_client(fake_openai))
    with pytest.raises(lossless.ValidationError):
        conv.turn({"role": "assistant", "content": "not a user"}, call=lambda m: "x")
    assert [m.content for m in conv.messages()] == ["hello"]


def test_a_tool_that_raises_is_reported_to_the_model(store_target: StoreTarget, tmp_path: Path) -> None:
    mem = lossless.open(store_target("t"), embedder=None)
    conv = mem.conversation("c")
    replies = iter([{"role": "assistant", "content": "", "tool_calls": [_tool_call("boom", {})]},
                    "the tool failed, sorry"])

    def boom() -> str:
        raise OSError("disk full")

    result = conv.turn("do it", call=lambda messages: next(replies), tools={"boom": boom})
    tool = next(m for m in result.messages if m.role == "tool")
    assert "disk full" in str(tool.content) and result.reply == "the tool failed, sorry"


def test_anthropic_client(store_target: StoreTarget, tmp_path: Path, fake_openai: FakeOpenAIServer) -> None:
    mem = lossless.open(store_target("a"), embedder=None)
    conv = mem.conversation("c")
    conv.add("system", "You are terse.")
    client = anthropic.Anthropic(base_url=fake_openai.root_url, api_key="test", max_retries=0)
    fake_openai.respond_next({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
        "content": [{"type": "tool_use", "id": "toolu_1", "name": "add", "input": {"a": 2, "b": 3}}],
        "stop_reason": "tool_use", "usage": {"input_tokens": 5, "output_tokens": 5}})
    fake_openai.respond_next({
        "id": "msg_2", "type": "message", "role": "assistant", "model": "claude-x",
        "content": [{"type": "text", "text": "5"}], "stop_reason": "end_turn",
        "usage": {"input_tokens": 5, "output_tokens": 1}})
    result = conv.turn("2+3?", call=client, model="claude-x", tools={"add": lambda a, b: a + b},
                       memory_tools=False)
    assert result.reply == "5"
    body = fake_openai.messages_requests()[1].body
    assert body["system"].startswith("You are terse.")
    assert body["messages"][-1]["content"][0]["type"] == "tool_result"
    assert body["messages"][-1]["content"][0]["content"] == "5"
    assert [m.role for m in conv.messages()] == ["system", "user", "assistant", "tool", "assistant"]


def test_aturn_with_an_async_client(store_target: StoreTarget, tmp_path: Path, fake_openai: FakeOpenAIServer) -> None:
    mem = lossless.open(store_target("as"), embedder=None)
    conv = mem.conversation("c")
    fake_openai.enqueue_chat("async hello")

    async def main() -> str:
        client = openai.AsyncOpenAI(base_url=fake_openai.base_url, api_key="t", max_retries=0)
        result = await conv.aturn("hi", call=client, model="m")
        await client.close()
        return result.reply

    assert asyncio.run(main()) == "async hello"
    assert [m.content for m in conv.messages()] == ["hi", "async hello"]


@pytest.mark.parametrize("mode", ["inline", "background"])
def test_background_compaction_and_end_task(store_target: StoreTarget, tmp_path: Path, mode: str) -> None:
    mem = lossless.open(store_target("b"), embedder=None, context_window=2048, compaction=mode)
    conv = mem.conversation("c", metadata={"user": "ann"})
    conv.add_many(chat(40, words=20), compact=False)
    result = conv.turn("We decided to ship on Friday; remember that I prefer short answers.",
                       call=lambda messages: "Ok.", background_compaction=True, end_task=True)
    if mode == "inline":  # a thread of its own for this turn's compaction
        assert result.compaction is not None
        result.compaction.join(30)
    else:  # the worker's
        assert result.compaction is None and mem.wait_idle(30)
    assert conv.summaries() and mem.verify() == []
    assert any("short answers" in r.content for r in mem.memories.ls(user="ann"))


def test_the_prefix_is_stable_between_compactions(store_target: StoreTarget, tmp_path: Path) -> None:
    from lossless.context import DYNAMIC_HEADER

    mem = lossless.open(store_target("p"), embedder=None, context_window=16_000)
    conv = mem.conversation("c")
    conv.add("system", "You are a helpful assistant.")
    conv.add_many(chat(200, words=60))  # some history gets summarized
    assert mem.wait_idle(60)
    assert conv.summaries()
    sent: list[list[dict[str, Any]]] = []

    def model(messages: list[dict[str, Any]]) -> str:
        sent.append(messages)
        return "noted, service-12 and port 5012 are fine " * 3

    logged = [len(conv.compaction_log())]
    hits = 0
    for i in range(12):
        conv.turn(f"turn {i}: what about service-{i} on port {5000 + i}?", call=model, memory_tools=False)
        assert mem.wait_idle(60)  # the worker's compaction, if the turn asked for one, lands before the count
        logged.append(len(conv.compaction_log()))
        if i == 0 or logged[-2] != logged[-3]:  # a compaction after the previous call changes the prefix
            continue
        previous, current = sent[-2], sent[-1]
        dynamic = [j for j, m in enumerate(previous)
                   if m["role"] == "system" and str(m["content"]).startswith(DYNAMIC_HEADER)]
        cut = dynamic[0] if dynamic else len(previous) - 1
        assert current[:cut] == previous[:cut]
        hits += 1
    assert hits >= 8


def test_writers_openai_refuses_as_names_are_sent_in_the_text(store_target: StoreTarget,
                                                               fake_openai: FakeOpenAIServer) -> None:
    """OpenAI takes a message name only as ^[a-zA-Z0-9_-]+$ (the fake refuses others as the
    real API does, with a 400): a conversation with a writer named 李明 or "Li Wei" failed
    every turn. Such a name now heads the text; a name OpenAI takes is sent as it is."""
    mem = lossless.open(store_target("names"), embedder=None)
    conv = mem.conversation("c")
    conv.add("user", "我下周去杭州出差。", name="李明")
    conv.add("user", "I'll book the hotel.", name="Li Wei")
    conv.add("user", "Noted by the bot.", name="ann_2")
    fake_openai.enqueue_chat("好的。")
    result = conv.turn("李明下周去哪里？", call=_client(fake_openai), model="agent-model")
    assert result.reply == "好的。"
    sent = fake_openai.chat_requests()[-1].body["messages"]
    assert {"role": "user", "content": "李明: 我下周去杭州出差。"} in sent
    assert {"role": "user", "content": "Li Wei: I'll book the hotel."} in sent
    assert {"role": "user", "content": "Noted by the bot.", "name": "ann_2"} in sent
    assert [m.name for m in conv.messages()][:3] == ["李明", "Li Wei", "ann_2"]  # stored as written
    mem.close()
