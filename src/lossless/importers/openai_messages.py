"""OpenAI chat messages, lossless's own wire format.

JSONL: one message object per line (``role``, ``content`` as text or content parts,
``tool_calls``, ``tool_call_id``, ``name``, ``created_at``, ``metadata``,
``external_id``), with the conversation in a ``conversation`` field or given by the caller,
else ``openai:<file name without its extension>`` (one conversation per file, as the other formats do);
a line holding ``{"conversation": …, "messages": [...]}`` imports that whole list.

JSON: an array of such messages, an array of ``{"conversation", "messages"}`` objects, or
one such object — including ``lossless export --format json`` (its summaries are not
imported: compaction rebuilds them).

Messages are stored as given: ``external_id`` is honoured when present and never made up,
so an export imported into a fresh store gives back the very same messages. A file
without ids imported again adds nothing all the same: the import recognises messages that
stand where the same messages are stored (:mod:`lossless.importers.load`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from lossless.importers.base import (
    ByteStream,
    Ignored,
    Item,
    Meta,
    Problem,
    Record,
    Source,
    is_json_lines,
    iter_json_lines,
)
from lossless.importers.jsonstream import BadValue, JsonStreamError, iter_document

__all__ = ["FORMAT", "is_document", "read"]

FORMAT = "openai"
EXPORT_FORMAT = "lossless.conversation"
# fields a lossless JSON export adds to each message; they are the store's, not the message's
_EXPORT_KEYS = ("id", "seq", "token_count", "content_hash", "conversation_id")


def read(stream: ByteStream, source: Source) -> Iterator[Item]:
    """Records from a JSONL file or a JSON document (chosen by the first bytes)."""
    if is_document(source.head):
        yield from _read_document(stream, source)
    else:
        yield from _read_lines(stream, source)


def is_document(head: bytes) -> bool:
    """Whether a file starting with ``head`` is one JSON document (an array, or an object
    spread over lines), not JSON lines (see :func:`~lossless.importers.base.is_json_lines`)."""
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    return text.startswith((b"[", b"{")) and not is_json_lines(head)


def _conversation_of(value: Any) -> tuple[str | None, dict[str, Any] | None]:
    if isinstance(value, dict):
        cid = value.get("id")
        meta = value.get("metadata")
        return (cid if isinstance(cid, str) else None), (meta if isinstance(meta, dict) else None)
    return (value if isinstance(value, str) else None), None


def default_conversation(source: Source) -> str:
    """Where messages that name no conversation go: one per file, named after it."""
    return f"{FORMAT}:{source.stem}"


def _message(data: Any, line: int, conversation: str | None, default: str, *, export: bool = False) -> Item:
    if not isinstance(data, dict):
        return Problem(line, f"invalid message: expected a JSON object, got {type(data).__name__}")
    given = data.pop("conversation", None)
    if export:
        for key in _EXPORT_KEYS:
            data.pop(key, None)
    return Record(conversation if conversation is not None else given if given is not None else default, data, line)


def _conversation_doc(doc: dict[str, Any], line: int, default: str) -> Iterator[Item]:
    cid, meta = _conversation_of(doc.get("conversation"))
    if cid is not None and isinstance(doc.get("metadata"), dict):
        meta = {**(meta or {}), **doc["metadata"]}
    if cid is not None and meta:
        yield Meta(cid, meta, line)
    messages = doc.get("messages")
    if not isinstance(messages, list):
        yield Problem(line, "invalid message: 'messages' must be a list")
        return
    export = doc.get("format") == EXPORT_FORMAT
    for data in messages:
        yield _message(data, line, cid, default, export=export)


def _read_lines(stream: ByteStream, source: Source) -> Iterator[Item]:
    default = default_conversation(source)
    for parsed in iter_json_lines(stream, source):
        if isinstance(parsed, Problem):
            yield parsed
            continue
        lineno, data = parsed
        if isinstance(data, dict) and "role" not in data and isinstance(data.get("messages"), list):
            yield from _conversation_doc(data, lineno, default)
        else:
            yield _message(data, lineno, None, default)


def _read_document(stream: ByteStream, source: Source) -> Iterator[Item]:
    default = default_conversation(source)
    conversation: str | None = None
    metadata: dict[str, Any] = {}
    export = False
    try:
        for path, value, line in iter_document(stream, stream_keys=("messages",)):
            key = path[0]
            if isinstance(value, BadValue):
                yield Problem(line, value.reason)
            elif isinstance(key, int):  # an element of a top-level array
                if isinstance(value, dict) and "role" not in value and isinstance(value.get("messages"), list):
                    yield from _conversation_doc(value, line, default)
                else:
                    yield _message(value, line, None, default)
            elif key == "format":
                export = value == EXPORT_FORMAT
            elif key == "conversation":
                conversation, meta = _conversation_of(value)
                metadata.update(meta or {})
                if conversation is not None and metadata:
                    yield Meta(conversation, dict(metadata), line)
            elif key == "metadata" and isinstance(value, dict):
                metadata.update(value)
                if conversation is not None:
                    yield Meta(conversation, dict(metadata), line)
            elif key == "messages":
                yield _message(value, line, conversation, default, export=export)
            elif key == "summaries" and isinstance(value, list):
                for _ in value:  # counted one by one: "ignored 5 … summaries"
                    yield Ignored(line, "summaries of a lossless export (compaction rebuilds them)")
    except JsonStreamError as exc:
        yield Problem(exc.line, exc.message)
