"""What every importer yields, and the small pieces they share.

An importer is a function ``read(stream, source)`` that walks one file front to back and
yields, as it goes, one of:

- :class:`Record` ``(conversation, message, line)``: an OpenAI-shaped message dict (the
  fields :func:`lossless.core.validate.validate_message` accepts) for the source conversation
  ``conversation`` (None when the file does not say and the caller must), read at ``line``;
- :class:`Problem`: something that could not be imported (a bad line, a bad message, a
  ChatGPT conversation whose tree has a cycle), named by line, skipped;
- :class:`Ignored`: a line that is not part of the conversation by design (a Codex
  ``event_msg``, a Claude Code ``file-history-snapshot``), only counted;
- :class:`Meta`: metadata for a conversation (its title, working directory …).

Nothing is held back longer than one source conversation needs, so a 1 GB file is read in
constant memory apart from the largest single conversation of a JSON array.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

__all__ = [
    "HEAD_BYTES",
    "ByteStream",
    "Ignored",
    "Item",
    "Meta",
    "Problem",
    "Reader",
    "Record",
    "Source",
    "derived_id",
    "iter_json_lines",
    "text_or_parts",
]

HEAD_BYTES = 1 << 16  # how much of a file format detection looks at

MAX_LINE_BYTES = 80 * 1024 * 1024  # the longest line an importer reads (and parses whole)


class Record(NamedTuple):
    """One message to store: ``(source conversation id, message dict, line number)``."""

    conversation: str | None
    message: dict[str, Any]
    line: int


class Problem(NamedTuple):
    """Something skipped because it is wrong. ``reason`` reads ``kind: detail``; the
    summary line groups problems by ``kind``."""

    line: int
    reason: str
    conversation: str | None = None


class Ignored(NamedTuple):
    """A line that is not a conversation message by design; ``what`` names its kind."""

    line: int
    what: str


class Meta(NamedTuple):
    """Conversation metadata, merged into the conversation when it is stored."""

    conversation: str
    metadata: dict[str, Any]
    line: int


Item = Record | Problem | Ignored | Meta


@dataclass(frozen=True, slots=True)
class Source:
    """Where the bytes come from: ``name`` for messages (the path, or ``<stdin>``),
    ``stem`` for conversation ids made from the file name, ``head`` the first bytes
    (the stream itself still starts at the beginning)."""

    name: str
    stem: str
    head: bytes = b""
    max_message_bytes: int = 4 * 1024 * 1024

    @property
    def line_limit(self) -> int:
        """Longer lines are refused unread. Twice ``max_message_bytes`` (escaped JSON text
        is longer than the text) plus room for the fields around it, and never over
        ``MAX_LINE_BYTES``: a line is parsed whole, and parsing costs several times its size
        in memory (8 × 32 MiB let one line take ~900 MB)."""
        return min(2 * self.max_message_bytes + (1 << 20), MAX_LINE_BYTES)


class ByteStream(Protocol):
    """What an importer reads from: a binary file, ``sys.stdin.buffer``, ``io.BytesIO``."""

    def read(self, size: int = -1, /) -> bytes: ...

    def readline(self, size: int = -1, /) -> bytes: ...


Reader = Callable[[ByteStream, Source], Iterator[Item]]


def derived_id(prefix: str, *parts: Any) -> str:
    """An external id for a message whose source has none: a hash of its conversation,
    position and content, so importing the same file again finds it already stored."""
    canonical = json.dumps(parts, ensure_ascii=False, sort_keys=True, separators=(",", ":"), default=str)
    return f"{prefix}:{hashlib.sha256(canonical.encode('utf-8')).hexdigest()[:24]}"


def iter_json_lines(stream: ByteStream, source: Source) -> Iterator[tuple[int, Any] | Problem]:
    """``(line number, parsed JSON)`` for each non-blank line, or a :class:`Problem` for a
    line that is not UTF-8, not JSON, or longer than :attr:`Source.line_limit`."""
    limit = source.line_limit
    lineno = 0
    while True:
        raw = stream.readline(limit + 1)
        if not raw:
            return
        lineno += 1
        if len(raw) > limit and not raw.endswith(b"\n"):
            while True:  # skip the rest of the line without holding it
                more = stream.readline(1 << 20)
                if not more or more.endswith(b"\n"):
                    break
            yield Problem(lineno, f"message too large: the line is over {limit:,} bytes; the limit is "
                                  f"{source.max_message_bytes:,} bytes per message (config max_message_bytes)")
            continue
        try:
            text = raw.decode("utf-8-sig" if lineno == 1 else "utf-8")
        except UnicodeDecodeError as exc:
            yield Problem(lineno, f"not UTF-8: undecodable byte at column {exc.start + 1}")
            continue
        if not text.strip():
            continue
        try:
            yield lineno, json.loads(text)
        except json.JSONDecodeError as exc:
            yield Problem(lineno, f"invalid JSON: {exc.msg} (column {exc.colno})")
        except RecursionError:
            yield Problem(lineno, "invalid JSON: nested too deeply")


def text_or_parts(parts: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    """One text part becomes a plain string; anything else stays a list of parts."""
    if len(parts) == 1 and parts[0].get("type") == "text" and set(parts[0]) == {"type", "text"}:
        text: str = parts[0]["text"]
        return text
    return parts
