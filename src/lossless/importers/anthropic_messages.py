"""Anthropic Messages format, and the block conversion Claude Code and OpenClaw share.

A message ``{"role", "content": str | [blocks]}`` becomes OpenAI-shaped messages:

- ``text`` blocks → text (one block: a plain string; several: text parts, boundaries kept);
- ``image`` blocks → ``image_url`` parts (base64 sources as ``data:`` URLs);
- ``tool_use`` blocks → the assistant message's ``tool_calls`` (``input`` as JSON arguments);
- ``tool_result`` blocks → one ``tool`` message each, before the rest of the message
  (``is_error`` kept in metadata; an empty result is stored as ``(empty)``);
- ``thinking`` / ``redacted_thinking`` blocks → the message's ``metadata["thinking"]``,
  not its content: what is stored stays sendable to any chat API;
- any other block (``document``, server tools …) → kept verbatim as a content part.

The file: JSONL, one message per line, or JSON — a request-like object
``{"system", "messages"}`` or an array of messages. Conversation: a ``conversation``
field, else ``anthropic:<file name without its extension>``. Messages without an ``id`` get one made from their
conversation, position and content.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

from lossless.importers.base import (
    ByteStream,
    Item,
    Meta,
    Problem,
    Record,
    Source,
    derived_id,
    is_json_lines,
    iter_json_lines,
    text_or_parts,
)
from lossless.importers.jsonstream import BadValue, JsonStreamError, iter_document

__all__ = ["FORMAT", "ConversionError", "convert", "read", "records"]

FORMAT = "anthropic"


class ConversionError(ValueError):
    """A message whose blocks cannot be converted; the text says which and why."""


def _image(block: dict[str, Any]) -> dict[str, Any]:
    src = block.get("source")
    if isinstance(src, dict):
        if src.get("type") == "base64" and isinstance(src.get("data"), str):
            media = src.get("media_type") or "image/png"
            return {"type": "image_url", "image_url": {"url": f"data:{media};base64,{src['data']}"}}
        if src.get("type") == "url" and isinstance(src.get("url"), str):
            return {"type": "image_url", "image_url": {"url": src["url"]}}
    return _verbatim(block)


def _verbatim(block: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in block.items() if k != "cache_control"}  # a transport hint, not content


def tool_call(call_id: Any, name: Any, arguments: Any, index: int) -> dict[str, Any]:
    if not isinstance(call_id, str) or not call_id or not isinstance(name, str) or not name:
        raise ConversionError(f"content block {index}: a tool call needs a string 'id' and 'name'")
    args = arguments if isinstance(arguments, str) else json.dumps(
        arguments if arguments is not None else {}, ensure_ascii=False)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


def _result_content(content: Any) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    parts: list[dict[str, Any]] = []
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict) and block.get("type") == "text":
            parts.append({"type": "text", "text": str(block.get("text", ""))})
        elif isinstance(block, dict) and block.get("type") == "image":
            parts.append(_image(block))
        elif isinstance(block, dict) and "type" in block:
            parts.append(_verbatim(block))
    return text_or_parts(parts) if parts else ""


def _with_metadata(fields: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(fields)
    if extra:
        out["metadata"] = {**(fields.get("metadata") or {}), **extra}
    elif "metadata" in fields:
        out["metadata"] = dict(fields["metadata"])
    return out


def tool_message(call_id: Any, content: Any, *, is_error: bool, fields: dict[str, Any]) -> dict[str, Any]:
    """A ``tool`` message answering ``call_id``."""
    extra: dict[str, Any] = {}
    body = _result_content(content)
    if body in ("", []):
        body, extra["empty_result"] = "(empty)", True
    if is_error:
        extra["is_error"] = True
    return {"role": "tool", "tool_call_id": call_id, "content": body, **_with_metadata(fields, extra)}


def convert(role: Any, content: Any, fields: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """One Anthropic message as OpenAI-shaped messages (``fields`` — ``created_at``,
    ``metadata``, ``name`` — go on each), and its thinking blocks when there was no
    message to keep them on (a thinking-only reply)."""
    if content is None or isinstance(content, str):
        return [{"role": role, "content": content, **_with_metadata(fields, {})}], []
    if not isinstance(content, list):
        raise ConversionError(f"content must be a string or a list of blocks, got {type(content).__name__}")
    parts: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    tools: list[dict[str, Any]] = []
    thinking: list[dict[str, Any]] = []
    extra: dict[str, Any] = {}
    for i, block in enumerate(content):
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise ConversionError(f"content block {i} is not an object with a 'type'")
        kind = block["type"]
        if kind == "text":
            if not isinstance(block.get("text"), str):
                raise ConversionError(f"content block {i} is of type 'text' but has no string 'text'")
            parts.append({"type": "text", "text": block["text"]})
            if block.get("citations"):
                extra.setdefault("citations", []).extend(block["citations"])
        elif kind == "image":
            parts.append(_image(block))
        elif kind == "tool_use":
            calls.append(tool_call(block.get("id"), block.get("name"), block.get("input"), i))
        elif kind == "tool_result":
            tools.append(tool_message(block.get("tool_use_id"), block.get("content"),
                                      is_error=bool(block.get("is_error")), fields=fields))
        elif kind in ("thinking", "redacted_thinking"):
            thinking.append(_verbatim(block))
        else:
            parts.append(_verbatim(block))
    out = tools
    if parts or calls:
        if thinking:
            extra["thinking"] = thinking
            thinking = []
        msg: dict[str, Any] = {"role": role, "content": text_or_parts(parts) if parts else None,
                               **_with_metadata(fields, extra)}
        if calls:
            msg["tool_calls"] = calls
        out.append(msg)
    return out, thinking


def records(conversation: str | None, messages: list[dict[str, Any]], external_id: str, line: int) -> Iterator[Record]:
    """Records for the messages made from one source message: the first keeps
    ``external_id``, the k-th after it ``external_id#k``."""
    for k, msg in enumerate(messages):
        msg["external_id"] = external_id if k == 0 else f"{external_id}#{k}"
        yield Record(conversation, msg, line)


class _Reader:
    def __init__(self, source: Source) -> None:
        self.default = f"{FORMAT}:{source.stem}"
        self.positions: Counter[str] = Counter()

    def message(self, data: Any, line: int, conversation: str | None) -> Iterator[Item]:
        if not isinstance(data, dict):
            yield Problem(line, f"invalid message: expected a JSON object, got {type(data).__name__}")
            return
        given = data.get("conversation")
        conv = conversation or (given if isinstance(given, str) else None) or self.default
        role = data.get("role")
        fields: dict[str, Any] = {}
        created = data.get("created_at", data.get("timestamp"))
        if created is not None:
            fields["created_at"] = created
        for key in ("name", "metadata"):
            if data.get(key) is not None:
                fields[key] = data[key]
        position = self.positions[conv]
        self.positions[conv] += 1
        try:
            made, orphan = convert(role, data.get("content"), fields)
        except ConversionError as exc:
            yield Problem(line, f"invalid message: {exc}", conv)
            return
        if not made:
            yield Problem(line, "empty message: it holds only thinking blocks" if orphan
                          else "empty message: no content blocks", conv)
            return
        ext = data["id"] if isinstance(data.get("id"), str) and data["id"] else derived_id(
            FORMAT, conv, position, role, data.get("content"))
        yield from records(conv, made, ext, line)

    def request(self, doc: dict[str, Any], line: int) -> Iterator[Item]:
        given = doc.get("conversation")
        conv = given if isinstance(given, str) else self.default
        if doc.get("system"):
            yield from self.message({"role": "system", "content": _system_text(doc["system"])}, line, conv)
        messages = doc.get("messages")
        if not isinstance(messages, list):
            yield Problem(line, "invalid message: 'messages' must be a list", conv)
            return
        for data in messages:
            yield from self.message(data, line, conv)


def _system_text(system: Any) -> Any:
    if isinstance(system, list):
        texts = [b.get("text", "") for b in system if isinstance(b, dict) and b.get("type") == "text"]
        return "\n\n".join(texts) if len(texts) == len(system) else system
    return system


def read(stream: ByteStream, source: Source) -> Iterator[Item]:
    """Records from Anthropic messages (JSONL, or a JSON request / array)."""
    reader = _Reader(source)
    if is_json_lines(source.head):
        for parsed in iter_json_lines(stream, source):
            if isinstance(parsed, Problem):
                yield parsed
                continue
            line, data = parsed
            if isinstance(data, dict) and "role" not in data and isinstance(data.get("messages"), list):
                yield from reader.request(data, line)
            else:
                yield from reader.message(data, line, None)
        return
    conversation: str | None = None
    try:
        for path, value, line in iter_document(stream, stream_keys=("messages",)):
            key = path[0]
            if isinstance(value, BadValue):
                yield Problem(line, value.reason)
            elif isinstance(key, int):
                if isinstance(value, dict) and "role" not in value and isinstance(value.get("messages"), list):
                    yield from reader.request(value, line)
                else:
                    yield from reader.message(value, line, None)
            elif key == "conversation" and isinstance(value, str):
                conversation = value
            elif key == "system" and value:
                yield from reader.message({"role": "system", "content": _system_text(value)}, line, conversation)
            elif key == "metadata" and isinstance(value, dict):
                yield Meta(conversation or reader.default, value, line)
            elif key == "messages":
                yield from reader.message(value, line, conversation)
    except JsonStreamError as exc:
        yield Problem(exc.line, exc.message)
