"""Write a conversation out, as OpenAI JSONL messages or as JSON with its whole DAG.

``openai-jsonl``: one message per line with every stored field (``conversation``, ``role``,
``content``, ``name``, ``tool_calls``, ``tool_call_id``, ``created_at``, ``metadata``,
``external_id``) — ``lossless import`` reads it back into the very same messages (same
fields, same content hashes). A conversation with metadata (a title …) gets a first line
``{"conversation": {"id", "metadata"}, "messages": []}`` that holds no message, from which
the import restores that metadata.

``json``: ``{"format": "lossless.conversation", "version", "conversation": {id,
metadata, …}, "messages": [... with id, seq, token_count, content_hash], "summaries":
[... with their ordered sources]}``. ``lossless import`` reads its messages too
(compaction rebuilds the summaries).

Both are streamed page by page: a conversation of any length is never held whole.
Files are written to a temporary name beside the target and renamed into place, so an
interrupted export never leaves half a file under the real name. A new file gets the
usual permissions under the umask (like a shell redirect: an export is a file for the
user to share or archive, no more secret than the database it came from); a replaced
file keeps its own.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import stat
import tempfile
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, Literal

from lossless.conversation import Conversation
from lossless.core._canonical import message_hash
from lossless.core.errors import ValidationError
from lossless.core.types import Message, Summary

__all__ = [
    "EXPORT_FORMATS",
    "FORMAT_MARK",
    "ExportFormat",
    "export_conversation",
    "export_to_path",
    "file_name_for",
    "message_record",
]

ExportFormat = Literal["openai-jsonl", "json"]
EXPORT_FORMATS: tuple[ExportFormat, ...] = ("openai-jsonl", "json")
FORMAT_MARK = "lossless.conversation"
_PAGE = 1000
# a file name keeps letters, marks and digits of any script (对话, हिन्दी) and . _ -; anything
# else (separators, reserved and control characters, spaces, invisible format characters) is _
_KEPT = frozenset("LMN")
_KEPT_PUNCTUATION = frozenset("._-")
# well under the 255-byte limit of common file systems, with room for the hash, the
# extension and the temporary name an export is written under first
_STEM_BYTES = 120


def message_record(msg: Message, conversation: str | None = None) -> dict[str, Any]:
    """A stored message as the OpenAI-style dict ``lossless import`` reads back."""
    out: dict[str, Any] = {}
    if conversation is not None:
        out["conversation"] = conversation
    out["role"] = msg.role
    out["content"] = msg.content
    if msg.name is not None:
        out["name"] = msg.name
    if msg.tool_calls:
        out["tool_calls"] = list(msg.tool_calls)
    if msg.tool_call_id is not None:
        out["tool_call_id"] = msg.tool_call_id
    out["created_at"] = msg.created_at.isoformat()
    if msg.metadata:
        out["metadata"] = msg.metadata
    if msg.external_id is not None:
        out["external_id"] = msg.external_id
    return out


def _messages(conv: Conversation) -> Iterator[Message]:
    last = conv.memory.store.last_seq(conv.id)
    for first in range(1, last + 1, _PAGE):
        yield from conv.messages(first, min(last, first + _PAGE - 1))


def _summary_record(node: Summary, parent: str | None) -> dict[str, Any]:
    return {
        "id": node.id, "type": node.kind, "depth": node.depth, "content": node.content, "token_count": node.token_count,
        "first_seq": node.first_seq, "last_seq": node.last_seq, "earliest_at": node.earliest_at.isoformat(),
        "latest_at": node.latest_at.isoformat(), "descendant_count": node.descendant_count,
        "source_token_count": node.source_token_count, "summarizer": node.summarizer,
        "fallback_level": node.fallback_level, "created_at": node.created_at.isoformat(),
        "sources": [{"kind": ref.kind, "id": ref.id} for ref in node.sources], "parent": parent,
        "metadata": node.metadata,
    }


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def export_conversation(conv: Conversation, out: IO[str], format: ExportFormat = "openai-jsonl") -> tuple[int, int]:
    """Write ``conv`` to ``out``; returns (messages, summaries) written."""
    if format not in EXPORT_FORMATS:
        raise ValidationError(f"unknown export format {format!r} (one of: {', '.join(EXPORT_FORMATS)})")
    count = 0
    if format == "openai-jsonl":
        metadata = conv.info.metadata
        if metadata:  # a first line for the conversation itself, which `lossless import` reads as its metadata
            out.write(_dumps({"conversation": {"id": conv.id, "metadata": metadata}, "messages": []}) + "\n")
        for msg in _messages(conv):
            out.write(_dumps(message_record(msg, conv.id)) + "\n")
            count += 1
        return count, 0
    info = conv.info
    head = {"id": info.id, "created_at": info.created_at.isoformat(), "updated_at": info.updated_at.isoformat(),
            "message_count": info.message_count, "summary_count": info.summary_count, "metadata": info.metadata}
    out.write(f'{{"format": "{FORMAT_MARK}", "version": 1,\n "conversation": {_dumps(head)},\n "messages": [')
    for msg in _messages(conv):
        record = {"id": msg.id, "seq": msg.seq, **message_record(msg), "token_count": msg.token_count,
                  "content_hash": message_hash(msg.role, msg.content, msg.name, msg.tool_calls, msg.tool_call_id)}
        out.write(("," if count else "") + "\n  " + _dumps(record))
        count += 1
    summaries = conv.summaries()
    # a whole-conversation root is nobody's parent: the nodes it was made from stay on the frontier
    parents = {ref.id: s.id for s in summaries if not s.root for ref in s.sources if ref.kind == "summary"}
    out.write("\n ],\n \"summaries\": [")
    for i, node in enumerate(summaries):
        out.write(("," if i else "") + "\n  " + _dumps(_summary_record(node, parents.get(node.id))))
    out.write("\n ]}\n")
    return count, len(summaries)


def file_name_for(conversation_id: str, format: ExportFormat) -> str:
    """A file name made from a conversation id, safe on every OS and inside its directory:
    the id's letters and digits of any script kept (NFC), every other character but
    ``._-`` made ``_`` (``/``, ``..``, ``:`` …), no ``.``, ``_`` or ``-`` at either end (a
    leading ``-`` reads as an option), at most 120 UTF-8 bytes of it, then a short hash of
    the whole id so that ids differing only in what was replaced or cut do not collide:
    ``对话-小美`` → ``对话-小美-8590e97e.jsonl``."""
    text = unicodedata.normalize("NFC", conversation_id)
    marked = "".join(c if c in _KEPT_PUNCTUATION or unicodedata.category(c)[0] in _KEPT else "\0" for c in text)
    kept = re.sub("\0+", "_", marked)  # (NUL is never kept: it marks what was replaced)
    stem = kept.encode("utf-8")[:_STEM_BYTES].decode("utf-8", "ignore").strip("._-")
    digest = hashlib.sha256(conversation_id.encode("utf-8")).hexdigest()[:8]
    return f"{stem or 'conversation'}-{digest}.{'jsonl' if format == 'openai-jsonl' else 'json'}"


def _file_mode(target: Path) -> int:
    """The permissions the export gets: those of the file it replaces, else what any new
    file gets under the process umask (``0644`` under the usual ``022``), as a shell
    redirect would give. The temporary file is created ``0600`` and only widened to this
    once complete."""
    with contextlib.suppress(OSError):
        return stat.S_IMODE(target.stat().st_mode)
    return 0o666 & ~_umask()


def _umask() -> int:
    """The process umask, read without changing it where Linux shows it."""
    with contextlib.suppress(OSError, ValueError, StopIteration), open("/proc/self/status", encoding="ascii") as f:
        return int(next(line for line in f if line.startswith("Umask:")).split()[1], 8)
    mask = os.umask(0o022)  # elsewhere: set and restore (the only portable way to read it)
    os.umask(mask)
    return mask


def export_to_path(conv: Conversation, path: str | os.PathLike[str], format: ExportFormat = "openai-jsonl",
                   *, force: bool = False, inside: Path | None = None) -> tuple[Path, int, int]:
    """Export to a file, atomically. Refuses a directory, a missing parent directory, an
    existing file unless ``force``, and (with ``inside``) any path that resolves outside
    that directory. Returns (path, messages, summaries)."""
    target = Path(path)
    if target.is_dir():
        raise ValidationError(f"{target} is a directory: give a file name to export to "
                              "(or --all -o DIR for one file per conversation)")
    parent = target.parent
    if not parent.is_dir():
        raise ValidationError(f"cannot write {target}: no directory {parent}")
    if inside is not None and target.resolve().parent != inside.resolve():
        raise ValidationError(f"refusing to write {target}: it is outside {inside}")
    if target.exists() and not force:
        raise ValidationError(f"{target} exists: pass --force to replace it")
    mode = _file_mode(target)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            counts = export_conversation(conv, f, format)
            f.flush()
            os.fsync(f.fileno())  # whole on disk before it takes the real name
            os.fchmod(f.fileno(), mode)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return target, *counts
