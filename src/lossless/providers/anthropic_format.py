"""OpenAI-style chat messages as an Anthropic Messages request, shared by the turn loop
(:mod:`lossless.agent.loop`) and the proxy (:mod:`lossless.server.proxy.anthropic_wire`)."""

from __future__ import annotations

import json
from typing import Any

from lossless.core.types import ChatMessage

__all__ = ["anthropic_messages", "block_text", "user_first"]

_CONTINUE = "(The earlier conversation is summarized above.)"


def block_text(content: Any) -> str:
    """The text of a content string or of a list of content blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text")
    return ""


def anthropic_messages(messages: list[ChatMessage]) -> tuple[str, list[dict[str, Any]]]:
    """OpenAI-style messages as Anthropic's ``(system, messages)``; consecutive turns of one
    role merge, and the first turn is a user's (as the API requires)."""
    system: list[str] = []
    out: list[dict[str, Any]] = []

    def push(role: str, block: dict[str, Any]) -> None:
        if out and out[-1]["role"] == role:
            out[-1]["content"].append(block)
        else:
            out.append({"role": role, "content": [block]})

    for m in messages:
        role, content = m.get("role"), m.get("content")
        if role == "system":
            system.append(block_text(content) if not isinstance(content, str) else content)
        elif role == "tool":
            push("user", {"type": "tool_result", "tool_use_id": m.get("tool_call_id", ""),
                          "content": content if isinstance(content, str) else block_text(content)})
        elif role == "assistant":
            if content:
                push("assistant", {"type": "text", "text": content if isinstance(content, str) else block_text(content)})
            for call in m.get("tool_calls") or []:
                fn = call.get("function", {})
                try:
                    args = json.loads(fn.get("arguments") or "{}")
                except ValueError:
                    args = {"raw": fn.get("arguments")}
                push("assistant", {"type": "tool_use", "id": call.get("id"), "name": fn.get("name"), "input": args})
        elif isinstance(content, list):
            for part in content:
                push("user", dict(part))
        else:
            push("user", {"type": "text", "text": content or " "})
    return "\n\n".join(s for s in system if s), user_first(out)


def user_first(turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``turns``, opened by a user turn saying the earlier conversation is summarized when
    the first is not a user's (the API requires a user's first)."""
    if turns and turns[0]["role"] != "user":
        return [{"role": "user", "content": [{"type": "text", "text": _CONTINUE}]}, *turns]
    return turns
