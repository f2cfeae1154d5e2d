"""A message's content as plain text (below :mod:`lossless.core.types`, whose messages
use it, and :mod:`lossless.core.render`, which shows it)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["content_text"]


def content_text(content: Any, tool_calls: Iterable[Mapping[str, Any]] | None = None) -> str:
    """Plain text of a message's content (str or OpenAI content parts) and tool calls."""
    parts: list[str] = []
    if isinstance(content, str):
        if content:
            parts.append(content)
    elif isinstance(content, list):
        for part in content:
            if not isinstance(part, Mapping):
                continue
            kind = part.get("type")
            if kind == "text" or (kind is None and "text" in part):
                parts.append(str(part.get("text", "")))
            elif kind in ("tool_result", "tool_use"):
                parts.append(f"[{kind}] {part.get('content', part.get('input', ''))}")
            else:
                parts.append(f"[{kind}]")
    for call in tool_calls or ():
        fn = call.get("function") or {}
        parts.append(f"→ tool_call {fn.get('name', '?')}({fn.get('arguments', '')})")
    return "\n".join(parts)
