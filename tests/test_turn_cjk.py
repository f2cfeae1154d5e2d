"""``conv.turn`` with Chinese text in the places a Python agent puts it."""

from __future__ import annotations

import json
from typing import Any

import lossless


def _filled(mem: lossless.Memory) -> lossless.Conversation:
    conv = mem.conversation("c")
    conv.add(role="user", content="我们住在西湖附近的酒店，房间号是8808。")
    conv.add_many([{"role": "user" if i % 2 == 0 else "assistant",
                    "content": f"第{i}条普通消息，讲别的事情，和住宿无关。" * 3} for i in range(60)])
    return conv


def test_a_question_in_content_parts_recalls_like_the_same_question_as_text() -> None:
    """The recall query of a turn whose user message is content parts was the parts as
    JSON, ASCII-escaped (``\\u6211\\u4eec…``): a Chinese question recalled nothing, where
    the same words as a plain string recalled the room number. It is the parts' text now,
    as the proxy reads it."""
    seen: list[list[dict[str, Any]]] = []

    def model(messages: list[dict[str, Any]]) -> str:
        seen.append(messages)
        return "好的"

    question = "我们住的酒店房间号是多少？"
    with lossless.open(":memory:", embedder=None, context_window=8192) as mem:
        conv = _filled(mem)
        conv.turn(question, call=model, budget_tokens=700)
        conv.turn({"role": "user", "content": [{"type": "text", "text": question}]}, call=model, budget_tokens=700)
    as_text, as_parts = (json.dumps(m, ensure_ascii=False) for m in seen)
    assert "8808" in as_text
    assert "8808" in as_parts


def test_a_tool_error_in_chinese_is_stored_and_sent_as_written() -> None:
    """A tool's exception went back to the model (and into the store) as
    ``{"error": "ValueError: \\u627e\\u4e0d\\u5230…"}``: three times the tokens, and no
    keyword search found 杭州 in it. A successful result was already written as is."""
    def weather(city: str) -> str:
        raise ValueError(f"找不到城市：{city}")

    replies = iter([
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "weather", "arguments": json.dumps({"city": "杭州"}, ensure_ascii=False)}}]},
        "没查到。",
    ])
    with lossless.open(":memory:", embedder=None) as mem:
        conv = mem.conversation("c")
        result = conv.turn("杭州天气怎么样？", call=lambda messages: next(replies), tools={"weather": weather})
        (tool,) = [m for m in result.messages if m.role == "tool"]
        assert json.loads(str(tool.content)) == {"error": "ValueError: 找不到城市：杭州"}
        assert tool.content == '{"error": "ValueError: 找不到城市：杭州"}'
        assert [h["first_seq"] for h in conv.grep("城市")["hits"]] == [tool.seq]


def test_a_llamaindex_tool_call_keeps_its_chinese_arguments_as_written() -> None:
    from llama_index.core.base.llms.types import ChatMessage, ToolCallBlock

    from lossless.integrations.llamaindex import from_llama_message

    message = ChatMessage(role="assistant", blocks=[
        ToolCallBlock(tool_call_id="call_1", tool_name="weather", tool_kwargs={"city": "杭州"})])
    stored = from_llama_message(message)
    assert stored is not None
    assert stored["tool_calls"][0]["function"]["arguments"] == '{"city": "杭州"}'
