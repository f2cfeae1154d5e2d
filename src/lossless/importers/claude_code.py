"""Claude Code session transcripts (``~/.claude/projects/<project>/<session>.jsonl``).

One JSON object per line. ``user`` and ``assistant`` lines carry an Anthropic-format
``message`` (converted as in :mod:`lossless.importers.anthropic_messages`) with ``uuid``,
``parentUuid``, ``sessionId``, ``timestamp``, ``cwd``, ``gitBranch``, ``version`` and
``isSidechain``. Decisions:

- conversation ``claude-code:<sessionId>``; a sidechain (a subagent's own exchange)
  goes to ``claude-code:<sessionId>:agent-<agentId>`` (``…:sidechain`` without an agent id);
- one line → its messages, external id = the line's ``uuid`` (``uuid#k`` for the k-th
  extra message, e.g. several tool results on one line); lines are imported in file order,
  abandoned branches included (``parentUuid`` is kept in metadata);
- Claude Code writes each block of a reply on its own line; a thinking-only line is kept
  on the next line of the same reply (``metadata["thinking"]``), so re-importing a
  session that has grown since adds exactly the new lines;
- ``summary`` lines become the conversation's ``title``; ``system``,
  ``file-history-snapshot`` and other bookkeeping lines are counted and skipped.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

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


def conversation_id(line: dict[str, Any], stem: str) -> str:
    session = line.get("sessionId")
    base = f"{FORMAT}:{session if isinstance(session, str) and session else stem}"
    if line.get("isSidechain"):
        agent = line.get("agentId")
        return f"{base}:agent-{agent}" if isinstance(agent, str) and agent else f"{base}:sidechain"
    return base


def read(stream: ByteStream, source: Source) -> Iterator[Item]:
    """Records from one Claude Code transcript."""
    seen: set[str] = set()
    titles: dict[str, str] = {}  # leafUuid → summary text, waiting for that message
    thinking: dict[str, list[dict[str, Any]]] = {}  # API message id → blocks of a thinking-only line
    thinking_lines: dict[str, int] = {}
    positions: Counter[str] = Counter()
    for parsed in iter_json_lines(stream, source):
        if isinstance(parsed, Problem):
            yield parsed
            continue
        lineno, line = parsed
        if not isinstance(line, dict):
            yield Problem(lineno, f"invalid line: expected a JSON object, got {type(line).__name__}")
            continue
        kind = line.get("type")
        if kind == "summary":
            leaf, text = line.get("leafUuid"), line.get("summary")
            if isinstance(leaf, str) and isinstance(text, str):
                titles[leaf] = text
            continue
        if kind not in ("user", "assistant"):
            if not isinstance(kind, str):
                yield Problem(lineno, "invalid line: no 'type'")
            else:
                yield Ignored(lineno, f"claude-code {kind} line")
            continue
        message = line.get("message")
        if not isinstance(message, dict):
            yield Problem(lineno, f"invalid line: a '{kind}' line without a 'message' object")
            continue
        conv = conversation_id(line, source.stem)
        if conv not in seen:
            seen.add(conv)
            meta = {"source": FORMAT, "session_id": line.get("sessionId"), "cwd": line.get("cwd"),
                    "git_branch": line.get("gitBranch"), "version": line.get("version")}
            yield Meta(conv, {k: v for k, v in meta.items() if v}, lineno)
        uuid = line.get("uuid")
        if isinstance(uuid, str) and uuid in titles:
            yield Meta(conv, {"title": titles.pop(uuid)}, lineno)
        metadata: dict[str, Any] = {}
        if isinstance(line.get("parentUuid"), str):
            metadata["parent_uuid"] = line["parentUuid"]
        for flag, key in _FLAGS.items():
            if line.get(flag):
                metadata[key] = True
        api_id = message.get("id") if isinstance(message.get("id"), str) else None
        if kind == "assistant":
            if api_id:
                metadata["message_id"] = api_id
            if isinstance(message.get("model"), str):
                metadata["model"] = message["model"]
        fields: dict[str, Any] = {"metadata": metadata}
        if line.get("timestamp") is not None:
            fields["created_at"] = line["timestamp"]
        role = message.get("role", kind)
        position = positions[conv]
        positions[conv] += 1
        try:
            made, orphan = convert(role, message.get("content"), fields)
        except ConversionError as exc:
            yield Problem(lineno, f"invalid message: {exc}", conv)
            continue
        if orphan:  # a thinking-only line: kept for the next line of this reply
            if api_id:
                thinking.setdefault(api_id, []).extend(orphan)
                thinking_lines.setdefault(api_id, lineno)
            else:
                yield Ignored(lineno, "claude-code thinking-only line without a message id")
            continue
        if not made:
            yield Problem(lineno, "empty message: no content", conv)
            continue
        if api_id and api_id in thinking:
            thinking_lines.pop(api_id, None)
            reply = made[-1]
            kept = reply.get("metadata", {})
            reply["metadata"] = {**kept, "thinking": thinking.pop(api_id) + kept.get("thinking", [])}
        ext = uuid if isinstance(uuid, str) and uuid else derived_id(FORMAT, conv, position, role,
                                                                      message.get("content"))
        yield from records(conv, made, ext, lineno)
    for lineno in thinking_lines.values():
        yield Ignored(lineno, "claude-code thinking with no reply after it (yet)")
    for _ in titles:
        yield Ignored(0, "claude-code summary of a message not in this file")
