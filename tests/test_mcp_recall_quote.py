"""The MCP ``recall`` prompt quotes a long match around the words it was found by."""

from __future__ import annotations

import lossless
from lossless.server.mcp_prompts import QUOTE_CHARS, recall_messages


def _prompt_text(mem: lossless.Memory, topic: str) -> str:
    (message,) = recall_messages(mem, topic)
    text = message.content.text  # type: ignore[union-attr]
    assert isinstance(text, str)
    return text.split("\n\n", 1)[1]  # past the line that repeats the topic


def test_a_long_message_is_quoted_around_its_match() -> None:
    """A 3,700-character message whose match sat past its first 1,200 characters was quoted
    by its head: the model was told "what the memory holds on it" and read weather talk
    without 数据库迁移 in it. The quote is now a window around the match, saying what it
    leaves out on each side and how to read it."""
    head, tail = "今天天气很好，我们讨论了很多事情。" * 200, "其他的内容都不重要。" * 100
    with lossless.open(":memory:", embedder=None) as mem:
        conv = mem.conversation("会议")
        msg = conv.add(role="user", content=head + "关键是数据库迁移要在周五完成。" + tail)
        text = _prompt_text(mem, "数据库迁移")
    assert "关键是数据库迁移要在周五完成。" in text
    assert f"[{len(head) - QUOTE_CHARS // 3 + 3} characters before: lcm_expand {msg.id}] … " in text
    assert f"more characters: lcm_expand {msg.id}]" in text


def test_a_short_or_head_match_is_quoted_as_before() -> None:
    with lossless.open(":memory:", embedder=None) as mem:
        conv = mem.conversation("c")
        conv.add(role="user", content="预算是五千元。" + "其他的内容都不重要。" * 200)
        text = _prompt_text(mem, "预算")
    assert "characters before" not in text
    assert "预算是五千元。" in text and "more characters: lcm_expand msg_" in text
