"""Claude Code session transcripts (``~/.claude/projects/<project>/<session>.jsonl``).

One JSON object per line. ``user`` and ``assistant`` lines carry an Anthropic-format
``message`` (converted as in :mod:`lossless.importers.anthropic_messages`) with ``uuid``,
``parentUuid``, ``sessionId``, ``timestamp``, ``cwd``, ``gitBranch``, ``version`` and
``isSidechain``. Decisions:

- conversation ``claude-code:<sessionId>``; a sidechain (a subagent's own exchange)
  goes to ``claude-code:<sessionId>:agent-<agentId>`` (``…:sidechain`` without an agent id);
- Claude Code writes each content block of a reply (thinking, text, each ``tool_use``) on
  a line of its own, every one carrying the API message's ``message.id``. The lines of one
  ``message.id`` are one assistant message, as the API sent it: its text and its tool
  calls together, its thinking in ``metadata["thinking"]``, ``metadata["uuids"]`` the
  uuids of all its lines (later lines' ``parentUuid`` name them). Its external id is the
  uuid of its first line with content, the line that lossless stored alone before it
  merged replies, so a file imported then adds nothing now. Tool results written between
  two lines of one reply are stored after it;
- any other line → its messages, external id = the line's ``uuid`` (``uuid#k`` for the
  k-th extra message, e.g. several tool results on one line); lines are imported in file
  order, abandoned branches included (``parentUuid`` is kept in metadata);
- a session imported again as it grows adds exactly what is new. A reply Claude Code was
  still writing then was stored from its first lines; the lines written since are stored
  right after it as a message of their own (:attr:`~lossless.importers.base.Record.resume`),
  so nothing of it is lost or stored twice;
- ``summary`` lines become the conversation's ``title``; ``system``,
  ``file-history-snapshot`` and other bookkeeping lines are counted and skipped.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from lossless.core._canonical import message_hash
from lossless.core.errors import LosslessError
from lossless.core.types import Message
from lossless.core.validate import validate_message
from lossless.importers.anthropic_messages import ConversionError, convert, records
from lossless.importers.base import (
    ByteStream,
    Ignored,
    Item,
    Meta,
    Problem,
    Source,
    derived_id,
    iter_json_lines,
)

__all__ = ["FORMAT", "read"]

FORMAT = "claude-code"
_FLAGS = {"isMeta": "is_meta", "isCompactSummary": "is_compact_summary", "isApiErrorMessage": "is_api_error"}
_THINKING_ALONE = "claude-code thinking with no reply after it (yet)"


def conversation_id(line: dict[str, Any], stem: str) -> str:
    session = line.get("sessionId")
    base = f"{FORMAT}:{session if isinstance(session, str) and session else stem}"
    if line.get("isSidechain"):
        agent = line.get("agentId")
        return f"{base}:agent-{agent}" if isinstance(agent, str) and agent else f"{base}:sidechain"
    return base


@dataclass
class _Line:
    """One line of a reply: its blocks, and what its message would carry alone."""

    lineno: int
    role: Any
    blocks: list[Any]
    fields: dict[str, Any]
    ext: str | None  # its external id; None for a thinking-only line (stored with the next)
    made: list[dict[str, Any]]  # its messages alone (a reply of one line is just these)


@dataclass
class _Reply:
    """The lines of one API message read so far, and the tool results written among them."""

    api_id: str
    lines: list[_Line] = field(default_factory=list)
    held: list[Item] = field(default_factory=list)


def _blocks(content: Any) -> list[Any]:
    if content is None:
        return []
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)


def _merged(lines: list[_Line]) -> tuple[list[dict[str, Any]], str] | None:
    """The messages made of these lines of one reply and their external id (its first
    line with content's), or None when they hold no content (thinking only)."""
    first = next((line for line in lines if line.ext is not None), None)
    if first is None or first.ext is None:
        return None
    metadata = dict(first.fields.get("metadata") or {})
    for line in lines:  # a flag on any line of the reply is the reply's
        metadata.update({k: v for k, v in (line.fields.get("metadata") or {}).items() if v is True})
    fields = {**first.fields, "metadata": metadata}
    fields.pop("uuid", None)
    if len(lines) > 1:  # the reply starts at its first line: its parent and time are that line's
        metadata["uuids"] = [line.fields["uuid"] for line in lines if line.fields.get("uuid")]
        start = lines[0].fields
        metadata.pop("parent_uuid", None)
        if "parent_uuid" in start["metadata"]:
            metadata["parent_uuid"] = start["metadata"]["parent_uuid"]
        fields.pop("created_at", None)
        if "created_at" in start:
            fields["created_at"] = start["created_at"]
    made, _ = convert(first.role, [b for line in lines for b in line.blocks], fields)
    return made, first.ext


def _hash(message: dict[str, Any]) -> str | None:
    try:
        new = validate_message(message, max_bytes=1 << 62)  # (only compared: the size is checked where it is stored)
    except LosslessError:
        return None
    return message_hash(new.role, new.content, new.name, new.tool_calls, new.tool_call_id)


def _resume(lines: list[_Line]) -> Callable[[Message], dict[str, Any] | None]:
    """For :attr:`Record.resume`: when ``stored`` is this reply's lines ``i..j-1`` (an
    import read the file while Claude Code was writing the rest), the message of lines
    ``j..`` to store after it."""

    def resume(stored: Message) -> dict[str, Any] | None:
        ids = [line.ext for line in lines]
        if stored.external_id not in ids:
            return None
        i = ids.index(stored.external_id)
        target = message_hash(stored.role, stored.content, stored.name, stored.tool_calls, stored.tool_call_id)
        for j in range(i + 1, len(lines)):
            rest = _merged(lines[j:])
            if rest is None:
                return None  # no content after line j: nothing is missing
            head = _merged(lines[i:j])
            if head is not None and len(head[0]) == 1 and _hash(head[0][0]) == target:
                message = rest[0][-1]
                message["external_id"] = rest[1]
                return message
        return None

    return resume


class _Reader:
    def __init__(self, source: Source) -> None:
        self.source = source
        self.seen: set[str] = set()
        self.titles: dict[str, str] = {}  # leafUuid → summary text, waiting for that message
        self.positions: Counter[str] = Counter()
        self.replies: dict[str, _Reply] = {}  # conversation → the reply whose lines are being read

    def line(self, lineno: int, line: Any) -> Iterator[Item]:
        if not isinstance(line, dict):
            yield Problem(lineno, f"invalid line: expected a JSON object, got {type(line).__name__}")
            return
        kind = line.get("type")
        if kind == "summary":
            leaf, text = line.get("leafUuid"), line.get("summary")
            if isinstance(leaf, str) and isinstance(text, str):
                self.titles[leaf] = text
            return
        if kind not in ("user", "assistant"):
            if not isinstance(kind, str):
                yield Problem(lineno, "invalid line: no 'type'")
            else:
                yield Ignored(lineno, f"claude-code {kind} line")
            return
        message = line.get("message")
        if not isinstance(message, dict):
            yield Problem(lineno, f"invalid line: a '{kind}' line without a 'message' object")
            return
        conv = conversation_id(line, self.source.stem)
        yield from self._conversation_meta(conv, line, lineno)
        api_id = message.get("id") if isinstance(message.get("id"), str) and message.get("id") else None
        if kind == "assistant" and api_id:
            yield from self._reply_line(conv, api_id, line, message, lineno)
            return
        reply = self.replies.get(conv)
        items = list(self._single(conv, line, message, lineno, kind))
        if reply is not None and kind == "user" and _tool_results_only(message.get("content")):
            reply.held += items  # results written between two lines of the reply: stored after it
            return
        yield from self.finish(conv)
        yield from items

    def _conversation_meta(self, conv: str, line: dict[str, Any], lineno: int) -> Iterator[Meta]:
        if conv not in self.seen:
            self.seen.add(conv)
            meta = {"source": FORMAT, "session_id": line.get("sessionId"), "cwd": line.get("cwd"),
                    "git_branch": line.get("gitBranch"), "version": line.get("version")}
            yield Meta(conv, {k: v for k, v in meta.items() if v}, lineno)
        uuid = line.get("uuid")
        if isinstance(uuid, str) and uuid in self.titles:
            yield Meta(conv, {"title": self.titles.pop(uuid)}, lineno)

    def _fields(self, line: dict[str, Any], message: dict[str, Any], kind: str) -> dict[str, Any]:
        metadata: dict[str, Any] = {}
        if isinstance(line.get("parentUuid"), str):
            metadata["parent_uuid"] = line["parentUuid"]
        for flag, key in _FLAGS.items():
            if line.get(flag):
                metadata[key] = True
        if kind == "assistant":
            if isinstance(message.get("id"), str) and message["id"]:
                metadata["message_id"] = message["id"]
            if isinstance(message.get("model"), str):
                metadata["model"] = message["model"]
        fields: dict[str, Any] = {"metadata": metadata}
        if line.get("timestamp") is not None:
            fields["created_at"] = line["timestamp"]
        return fields

    def _ext(self, conv: str, line: dict[str, Any], role: Any, content: Any) -> str:
        """The line's uuid, else a hash of its conversation, position and content."""
        uuid = line.get("uuid")
        position = self.positions[conv]
        self.positions[conv] += 1
        return uuid if isinstance(uuid, str) and uuid else derived_id(FORMAT, conv, position, role, content)

    def _single(self, conv: str, line: dict[str, Any], message: dict[str, Any], lineno: int,
                kind: str) -> Iterator[Item]:
        """The messages of a line that is not part of a multi-line reply."""
        role = message.get("role", kind)
        ext = self._ext(conv, line, role, message.get("content"))
        try:
            made, orphan = convert(role, message.get("content"), self._fields(line, message, kind))
        except ConversionError as exc:
            yield Problem(lineno, f"invalid message: {exc}", conv)
            return
        if not made:
            yield Ignored(lineno, "claude-code thinking-only line without a message id") if orphan else Problem(
                lineno, "empty message: no content", conv)
            return
        yield from records(conv, made, ext, lineno)

    def _reply_line(self, conv: str, api_id: str, line: dict[str, Any], message: dict[str, Any],
                    lineno: int) -> Iterator[Item]:
        reply = self.replies.get(conv)
        if reply is not None and reply.api_id != api_id:
            yield from self.finish(conv)
            reply = None
        if reply is None:
            reply = self.replies[conv] = _Reply(api_id)
        role = message.get("role", "assistant")
        fields = self._fields(line, message, "assistant")
        ext = self._ext(conv, line, role, message.get("content"))
        try:
            made, _ = convert(role, message.get("content"), fields)  # each line must read on its own
        except ConversionError as exc:
            yield Problem(lineno, f"invalid message: {exc}", conv)
            return
        if isinstance(line.get("uuid"), str):
            fields["uuid"] = line["uuid"]
        reply.lines.append(_Line(lineno, role, _blocks(message.get("content")), fields, ext if made else None, made))

    def finish(self, conv: str) -> Iterator[Item]:
        """The reply of ``conv`` being read is complete: its message, then the tool
        results that were written among its lines."""
        reply = self.replies.pop(conv, None)
        if reply is None:
            return
        alone = reply.lines[0]
        merged = _merged(reply.lines) if len(reply.lines) > 1 or alone.ext is None else (alone.made, alone.ext)
        if merged is None:  # thinking only: nothing to store it on
            yield Ignored(reply.lines[0].lineno, _THINKING_ALONE)
        else:
            made, ext = merged
            first = next(line for line in reply.lines if line.ext == ext)
            *tools, last = list(records(conv, made, ext, first.lineno))
            yield from tools
            yield last._replace(resume=_resume(reply.lines) if len(reply.lines) > 1 else None)
        yield from reply.held

    def end(self) -> Iterator[Item]:
        for conv in list(self.replies):
            yield from self.finish(conv)
        for _ in self.titles:
            yield Ignored(0, "claude-code summary of a message not in this file")


def _tool_results_only(content: Any) -> bool:
    return isinstance(content, list) and bool(content) and all(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in content)


def read(stream: ByteStream, source: Source) -> Iterator[Item]:
    """Records from one Claude Code transcript."""
    reader = _Reader(source)
    for parsed in iter_json_lines(stream, source):
        if isinstance(parsed, Problem):
            yield parsed
            continue
        yield from reader.line(*parsed)
    yield from reader.end()
