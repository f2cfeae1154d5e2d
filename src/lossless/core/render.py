"""How stored things become text: message text for counting and search, and the
labelled blocks the assembler puts in front of the model."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime, tzinfo
from typing import TYPE_CHECKING, Any

from lossless.core.content import content_text
from lossless.core.zones import in_zone

if TYPE_CHECKING:
    from lossless.core.types import Message, Summary

__all__ = [
    "chat_message_text",
    "content_text",
    "format_span",
    "format_time",
    "message_header",
    "message_text",
    "neutralise_tags",
    "render_summary",
]

_MEMORY_TAG = re.compile(r"<(/?)(summary)\b", re.IGNORECASE)


def neutralise_tags(text: str) -> str:
    """``text`` with any ``<summary`` / ``</summary`` escaped as ``&lt;summary`` /
    ``&lt;/summary``: stored text shown in the memory block (summaries, recalled
    messages) stays quoted data, unable to close the element it sits in or to open a
    fake one that claims to be a summary."""
    return _MEMORY_TAG.sub(lambda m: f"&lt;{m.group(1)}{m.group(2)}", text)


def message_text(msg: Message) -> str:
    return content_text(msg.content, msg.tool_calls)


def chat_message_text(msg: Mapping[str, Any]) -> str:
    return content_text(msg.get("content"), msg.get("tool_calls"))


def format_time(dt: datetime, zone: tzinfo | None = None) -> str:
    """Minute precision, in ``zone`` (None: UTC; a naive time is read as UTC)."""
    return in_zone(dt, zone).strftime("%Y-%m-%d %H:%M")


def format_span(first: datetime, last: datetime, zone: tzinfo | None = None) -> str:
    a, b = format_time(first, zone), format_time(last, zone)
    return a if a == b else f"{a} → {b}"


def message_header(msg: Message, zone: tzinfo | None = None) -> str:
    who = f" {msg.name}" if msg.name else ""
    return f"[#{msg.seq} {format_time(msg.created_at, zone)} {msg.role}{who}]"


def render_summary(summary: Summary, content: str | None = None, *, abridged: bool = False,
                   zone: tzinfo | None = None) -> str:
    """A summary as the model sees it: id, depth, span and times, then the text, and how
    to get the originals back."""
    body = neutralise_tags(summary.content if content is None else content)
    note = " abridged=\"true\"" if abridged else ""
    return (
        f'<summary id="{summary.id}" depth="{summary.depth}" '
        f'messages="#{summary.first_seq}-#{summary.last_seq}" '
        f'time="{format_span(summary.earliest_at, summary.latest_at, zone)}"{note}>\n'
        f"{body}\n"
        f'(Expand with lcm_expand("{summary.id}") for the original messages.)\n'
        f"</summary>"
    )

