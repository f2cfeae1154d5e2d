"""OpenClaw session files (``~/.openclaw/sessions/<sessionId>.json``).

A JSON or JSON5 document: ``{"sessionId", …, "messages": [...]}`` or a bare array of
messages (``//`` and ``/* */`` comments and trailing commas are accepted by a streaming
pre-pass; no json5 dependency). The same sessions as JSONL (the agent runtime's layout:
a ``{"type": "session", "id", …}`` header line, then ``{"type": "message", "message":
{…}}`` lines) are read too. Messages may use Anthropic blocks (``text``, ``thinking``,
``tool_use``, ``tool_result``), the runtime's own (``toolCall`` blocks, ``toolResult``
messages with ``toolCallId`` / ``isError``) or OpenAI fields (``tool_calls``,
``tool_call_id``); all become OpenAI-shaped messages as in
:mod:`lossless.importers.anthropic_messages`. Decisions:

- conversation ``openclaw:<sessionId>`` (from the document, the header line, else the
  file name, which is the session id); the document's other scalar fields become metadata;
- the external id is the message's ``id`` when it has one, else a hash of the session,
  the position and the message;
- ``timestamp`` may be milliseconds since the epoch, seconds, or ISO 8601.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from lossless.importers.anthropic_messages import ConversionError, convert, records, tool_call
from lossless.importers.base import (
    ByteStream,
    Ignored,
    Item,
    Meta,
    Problem,
    Source,
    derived_id,
    head_json_lines,
    is_json_lines,
    iter_json_lines,
)
from lossless.importers.jsonstream import BadValue, JsonStreamError, iter_document

__all__ = ["FORMAT", "read"]

FORMAT = "openclaw"
_SESSION_KEYS = ("sessionId", "session_id", "id")


def _time(value: Any) -> Any:
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 1e11:
        return datetime.fromtimestamp(value / 1000, tz=UTC).isoformat()  # milliseconds
    return value


def _normalise(message: dict[str, Any]) -> tuple[Any, Any, dict[str, Any]]:
    """(role, Anthropic-style content, extra OpenAI fields) of one OpenClaw message."""
    role = message.get("role")
    content = message.get("content")
    extra: dict[str, Any] = {}
    if role in ("toolResult", "tool_result") or (role == "tool" and "tool_call_id" not in message):
        call_id = message.get("toolCallId", message.get("tool_call_id", message.get("toolUseId")))
        block = {"type": "tool_result", "tool_use_id": call_id, "content": content,
                 "is_error": bool(message.get("isError", message.get("is_error")))}
        return "user", [block], extra
    if isinstance(content, list):
        blocks: list[Any] = []
        for block in content:
            if isinstance(block, dict) and block.get("type") == "toolCall":
                blocks.append({"type": "tool_use", "id": block.get("id"), "name": block.get("name"),
                               "input": block.get("arguments", block.get("input"))})
            elif isinstance(block, dict) and block.get("type") == "toolResult":
                blocks.append({"type": "tool_result", "tool_use_id": block.get("toolCallId", block.get("id")),
                               "content": block.get("content"), "is_error": bool(block.get("isError"))})
            else:
                blocks.append(block)
        content = blocks
    calls = message.get("tool_calls")
    if isinstance(calls, list):
        extra["tool_calls"] = [
            tool_call(c.get("id"), (c.get("function") or {}).get("name"), (c.get("function") or {}).get("arguments"), i)
            if isinstance(c, dict) else c for i, c in enumerate(calls)]
    if role == "tool":
        extra["tool_call_id"] = message.get("tool_call_id")
    return role, content, extra


class _Session:
    def __init__(self, source: Source) -> None:
        self.conversation = f"{FORMAT}:{source.stem}"
        self.started = False
        self.positions: Counter[str] = Counter()

    def header(self, data: dict[str, Any], line: int) -> Iterator[Item]:
        session = next((data[k] for k in _SESSION_KEYS if isinstance(data.get(k), str) and data[k]), None)
        if session and not self.started:
            self.conversation = f"{FORMAT}:{session}"
        meta = {k: v for k, v in data.items()
                if k not in (*_SESSION_KEYS, "messages", "type") and isinstance(v, str | int | float | bool)}
        yield Meta(self.conversation, {"source": FORMAT, **({"session_id": session} if session else {}), **meta}, line)

    def message(self, data: Any, line: int) -> Iterator[Item]:
        conv = self.conversation
        if not isinstance(data, dict):
            yield Problem(line, f"invalid message: expected a JSON object, got {type(data).__name__}", conv)
            return
        self.started = True
        position = self.positions[conv]
        self.positions[conv] += 1
        fields: dict[str, Any] = {}
        created = data.get("timestamp", data.get("created_at"))
        if created is not None:
            fields["created_at"] = _time(created)
        metadata = {k: data[k] for k in ("model", "provider", "stopReason") if isinstance(data.get(k), str)}
        if metadata:
            fields["metadata"] = metadata
        try:
            role, content, extra = _normalise(data)
            made, orphan = convert(role, content, fields)
        except ConversionError as exc:
            yield Problem(line, f"invalid message: {exc}", conv)
            return
        if extra and made:
            if "tool_calls" in extra and made[-1].get("content") in (None, ""):
                made[-1]["content"] = None
            made[-1].update(extra)
        if not made:
            yield Ignored(line, "openclaw thinking-only message") if orphan else Problem(
                line, "empty message: no content", conv)
            return
        given = data.get("id")
        ext = given if isinstance(given, str) and given else derived_id(FORMAT, conv, position, data)
        yield from records(conv, made, ext, line)


def _is_lines(head: bytes) -> bool:
    if not is_json_lines(head):
        return False
    values = head_json_lines(head)
    return bool(values) and isinstance(values[0], dict) and values[0].get("type") in ("session", "message")


def read(stream: ByteStream, source: Source) -> Iterator[Item]:
    """Records from one OpenClaw session file (JSON, JSON5 or JSONL)."""
    session = _Session(source)
    if _is_lines(source.head):
        for parsed in iter_json_lines(stream, source):
            if isinstance(parsed, Problem):
                yield parsed
                continue
            line, data = parsed
            kind = data.get("type") if isinstance(data, dict) else None
            if kind == "session":
                yield from session.header(data, line)
            elif kind == "message":
                message = data.get("message")
                if isinstance(message, dict) and "id" not in message and isinstance(data.get("id"), str):
                    message = {**message, "id": data["id"]}
                if isinstance(message, dict) and "timestamp" not in message and "timestamp" in data:
                    message = {**message, "timestamp": data["timestamp"]}
                yield from session.message(message, line)
            elif isinstance(kind, str):
                yield Ignored(line, f"openclaw {kind} line")
            else:
                yield Problem(line, "invalid line: no 'type'")
        return
    header: dict[str, Any] = {}
    header_line = 1
    try:
        for path, value, line in iter_document(stream, stream_keys=("messages",), json5=True):
            key = path[0]
            if isinstance(value, BadValue):
                yield Problem(line, value.reason)
            elif isinstance(key, int):
                yield from session.message(value, line)
            elif key == "messages":
                if header:
                    yield from session.header(header, header_line)
                    header = {}
                yield from session.message(value, line)
            else:
                header[key], header_line = value, min(header_line, line)
    except JsonStreamError as exc:
        yield Problem(exc.line, exc.message)
    if header:
        yield from session.header(header, header_line)
