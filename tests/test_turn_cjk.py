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
