"""Chat messages as OpenAI's Chat Completions API takes them, shared by the turn loop
(:mod:`lossless.agent.loop`) and the proxy (:mod:`lossless.server.proxy.openai_wire`).

OpenAI refuses a request whose message ``name`` is not ``^[a-zA-Z0-9_-]{1,64}$`` (a 400,
"string does not match pattern"): a stored writer such as 李明, "Li Wei" or "O'Brien"
made every turn of that conversation fail. Such a name is written at the head of the
message's text instead (``李明: …``, as the keyword index reads a named message), so who
said it stays in what the model reads; names OpenAI takes go through unchanged.
"""

from __future__ import annotations

import re
from typing import Any

from lossless.core.types import ChatMessage

__all__ = ["openai_messages"]

_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def openai_messages(messages: list[ChatMessage]) -> list[ChatMessage]:
    """``messages`` with every ``name`` OpenAI would refuse moved into the text; the
    same list when there is none."""
    if all(_fits(m) for m in messages):
        return messages
    return [m if _fits(m) else _named_in_text(m) for m in messages]


def _fits(message: ChatMessage) -> bool:
    name = message.get("name")
    return name is None or message.get("role") == "function" or bool(_NAME.fullmatch(str(name)))


def _named_in_text(message: ChatMessage) -> ChatMessage:
    out: dict[str, Any] = {k: v for k, v in message.items() if k != "name"}
    name = " ".join(str(message.get("name")).split())
    content = out.get("content")
    if isinstance(content, list) and content:
        out["content"] = [{"type": "text", "text": f"{name}:"}, *content]
    elif isinstance(content, str) and content:
        out["content"] = f"{name}: {content}"
    return out  # type: ignore[return-value]
