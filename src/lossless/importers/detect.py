"""Which importer reads a file: the registry of formats and :func:`detect`."""

from __future__ import annotations

import codecs
import json
import os
import re
from pathlib import Path
from typing import Any

from lossless.core.errors import ValidationError
from lossless.importers import (
    anthropic_messages,
    chatgpt,
    claude_code,
    codex,
    openai_messages,
    openclaw,
    text,
)
from lossless.importers.base import HEAD_BYTES, Reader, head_json_lines, is_json_lines
from lossless.importers.encoding import source_encoding

__all__ = ["FORMATS", "detect", "reader_for"]

FORMATS: dict[str, tuple[Reader, str]] = {
    openai_messages.FORMAT: (openai_messages.read, "OpenAI chat messages, JSONL or JSON (lossless's own format)"),
    anthropic_messages.FORMAT: (anthropic_messages.read, "Anthropic Messages (content blocks), JSONL or JSON"),
    claude_code.FORMAT: (claude_code.read, "Claude Code transcripts, ~/.claude/projects/*/*.jsonl"),
    codex.FORMAT: (codex.read, "OpenAI Codex CLI rollouts, ~/.codex/sessions/**/rollout-*.jsonl"),
    chatgpt.FORMAT: (chatgpt.read, "ChatGPT data export, conversations.json"),
    openclaw.FORMAT: (openclaw.read, "OpenClaw sessions, ~/.openclaw/sessions/<id>.json (JSON5 ok)"),
    text.FORMAT: (text.read, "plain text / Markdown with User: / Assistant: (用户： / 助手：) lines"),
}

_CODEX_TYPES = ("session_meta", "response_item", "event_msg", "turn_context", "compacted")
_ANTHROPIC = re.compile(rb'"type"\s*:\s*"(?:tool_use|tool_result|thinking|redacted_thinking)"'
                        rb'|"source"\s*:\s*\{\s*"type"\s*:\s*"(?:base64|url)"')
# what only Anthropic writes around plain text: a Messages API response (``"type":
# "message"``, ``stop_reason``, ``usage.input_tokens``), a Claude model, a Bedrock/Vertex
# request's ``anthropic_version``
_ANTHROPIC_DOC = re.compile(rb'"model"\s*:\s*"claude|"stop_reason"\s*:|"anthropic_version"\s*:'
                            rb'|"type"\s*:\s*"message"\s*,\s*"role"')
_CODEX_LINE = re.compile(rb'^\{"timestamp":\s*"[^"]*",\s*"type":\s*"(?:session_meta|response_item|event_msg)"')
_COMMENT = re.compile(rb"^\s*(?://|/\*)", re.MULTILINE)
# comments before a JSON5 document's first bracket (``// OpenClaw session …``): only JSON5 has them
_LEADING_COMMENTS = re.compile(rb"(?:\s*(?://[^\n]*|/\*.*?\*/))+\s*", re.DOTALL)
# a Claude.ai (or Claude app) data export: conversations of "chat_messages" by "sender", also
# named conversations.json, which no importer reads (the name alone said ChatGPT, whose reader
# then refused every conversation: "element 0 has no 'mapping' object")
_CLAUDE_AI = re.compile(rb'"chat_messages"\s*:\s*\[')


def reader_for(name: str) -> Reader:
    """The importer of a format name (see :data:`FORMATS`)."""
    try:
        return FORMATS[name][0]
    except KeyError:
        raise ValidationError(f"unknown import format {name!r} (one of: {', '.join(FORMATS)})") from None


def _by_name(name: str) -> str | None:
    path = name.replace("\\", "/").lower()
    base = path.rsplit("/", 1)[-1]
    if (base.startswith("rollout-") and base.endswith(".jsonl")) or "/.codex/sessions/" in path:
        return codex.FORMAT
    if "/.claude/projects/" in path:
        return claude_code.FORMAT
    if base.endswith(".json5") or "/.openclaw/" in path:
        return openclaw.FORMAT
    if base == "conversations.json":
        return chatgpt.FORMAT
    if base.endswith((".md", ".markdown", ".txt")):
        return text.FORMAT
    return None


def _anthropic(data: Any) -> bool:
    return _ANTHROPIC.search(json.dumps(data).encode()) is not None


def _anthropic_object(obj: dict[str, Any]) -> bool:
    """A message or request only Anthropic writes, even when its content is plain text
    (which reads as OpenAI content parts too)."""
    model = obj.get("model")
    usage = obj.get("usage")
    return (obj.get("type") == "message" or "stop_reason" in obj or "anthropic_version" in obj
            or (isinstance(model, str) and model.startswith("claude"))
            or (isinstance(usage, dict) and "input_tokens" in usage))


def _by_line(obj: Any) -> str | None:
    if not isinstance(obj, dict):
        return None
    kind = obj.get("type")
    if kind in _CODEX_TYPES and "payload" in obj:
        return codex.FORMAT
    if "instructions" in obj and "id" in obj and "timestamp" in obj:
        return codex.FORMAT  # the old rollout header
    if "sessionId" in obj or "parentUuid" in obj or (kind == "summary" and "leafUuid" in obj):
        return claude_code.FORMAT
    if kind == "session" or (kind == "message" and isinstance(obj.get("message"), dict)):
        return openclaw.FORMAT
    if "mapping" in obj:
        return chatgpt.FORMAT
    if "role" in obj:
        if _anthropic_object(obj) or _anthropic(obj.get("content")):
            return anthropic_messages.FORMAT
        return openai_messages.FORMAT
    if isinstance(obj.get("messages"), list):
        if "system" in obj or _anthropic_object(obj) or _anthropic(obj["messages"]):
            return anthropic_messages.FORMAT
        return openai_messages.FORMAT
    return None


def _by_lines(head: bytes) -> str | None:
    """The format of a JSONL head, from up to 50 of its complete lines (a line that does
    not parse is passed over: one bad line, the first included, does not decide); None
    when the head is not JSON lines (a pretty-printed document)."""
    if not is_json_lines(head):
        return None
    found = [verdict for verdict in map(_by_line, head_json_lines(head)) if verdict is not None]
    for specific in found:  # a line only one format writes settles it
        if specific not in (openai_messages.FORMAT, anthropic_messages.FORMAT):
            return specific
    if anthropic_messages.FORMAT in found:
        return anthropic_messages.FORMAT
    return found[0] if found else None


def _by_content(head: bytes) -> str | None:
    body = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if not body:
        return None
    verdicts = _by_lines(head)  # (its first line need not be JSON: most of the others are)
    if verdicts is not None:
        return verdicts
    comments = _LEADING_COMMENTS.match(body)
    if comments is not None and body[comments.end():comments.end() + 1] in (b"[", b"{"):
        return openclaw.FORMAT  # the one reader that takes JSON5 (whose comments the check below sees only after "{")
    if body[:1] in (b"[", b"{"):
        # no whole line to parse: a pretty-printed document, or a JSONL line longer than the head
        if b'"parentUuid"' in body:
            return claude_code.FORMAT
        if _CODEX_LINE.search(body):
            return codex.FORMAT
        if _COMMENT.search(body) or b'"sessionId"' in body:
            return openclaw.FORMAT
        if b'"mapping"' in body:
            return chatgpt.FORMAT
        if _ANTHROPIC.search(body) or _ANTHROPIC_DOC.search(body) or re.search(rb'"system"\s*:', body):
            return anthropic_messages.FORMAT
        if b'"role"' in body or b'"messages"' in body:
            return openai_messages.FORMAT
        return None
    try:
        sample = body.decode("utf-8", errors="replace").splitlines()[:200]
    except ValueError:
        return None
    if any(text.SPEAKER.match(line) for line in sample):
        return text.FORMAT
    return None


def detect(path_or_first_bytes: str | os.PathLike[str] | bytes, *, name: str | None = None,
           encoding: str | None = None) -> str:
    """The format of a file (given its path), or of its first bytes (``name``, when
    given, is the file name, which can settle it: ``rollout-*.jsonl`` is Codex,
    ``*.md`` text, ``conversations.json`` ChatGPT …), read as UTF-8, as the encoding a
    byte-order mark names, or as ``encoding``. Raises
    :class:`~lossless.core.errors.ValidationError` when it cannot tell, or when the file
    is not UTF-8 text and no ``encoding`` was given
    (:func:`~lossless.importers.encoding.source_encoding`)."""
    if isinstance(path_or_first_bytes, bytes | bytearray):
        head = bytes(path_or_first_bytes[:HEAD_BYTES])
    else:
        path = Path(path_or_first_bytes)
        name = name or str(path)
        try:
            with path.open("rb") as f:
                head = f.read(HEAD_BYTES)
        except IsADirectoryError:
            raise ValidationError(f"{path} is a directory, not a file to import") from None
        except FileNotFoundError:
            raise ValidationError(f"{path}: no such file") from None
    decoding = source_encoding(head, name or "the input", encoding)
    if decoding is not None:  # what the importer will read: the text as UTF-8
        head = codecs.getincrementaldecoder(decoding)("replace").decode(head, final=False).encode("utf-8")
    if head.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] in (b"[", b"{") and _CLAUDE_AI.search(head):
        raise ValidationError(f"{name or 'the input'} is a Claude.ai data export (conversations of 'chat_messages'), "
                              f"which lossless does not import yet; the formats it reads: {', '.join(FORMATS)}")
    if not head.lstrip(b"\xef\xbb\xbf \t\r\n"):  # whatever its name says (an empty 聊天记录.txt was "imported 0")
        raise ValidationError(f"{name or 'the input'} is empty: nothing to import")
    found = _by_content(head)
    hinted = _by_name(name) if name else None
    # the file's name wins where its content is only JSON that several formats share
    shared = (None, openai_messages.FORMAT, anthropic_messages.FORMAT)
    if hinted is not None and found in shared and (hinted != text.FORMAT or found is None):
        return hinted
    if found is None:
        raise ValidationError(f"cannot tell the format of {name or 'the input'}: give --format (one of: "
                              f"{', '.join(FORMATS)})")
    return found
