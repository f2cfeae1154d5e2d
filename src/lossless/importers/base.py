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
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from lossless.core.types import Message

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
    "head_json_lines",
    "is_json_lines",
    "iter_json_lines",
    "loads",
    "text_or_parts",
]

HEAD_BYTES = 1 << 16  # how much of a file format detection looks at

MAX_LINE_BYTES = 80 * 1024 * 1024  # the longest line an importer reads (and parses whole)


class Record(NamedTuple):
    """One message to store: ``(source conversation id, message dict, line number)``.

    ``resume``, for a message made of several lines of its file (a Claude Code reply), is
    asked for the conversation's last stored reply when this record's external id may
    already be stored: if an earlier import stored that reply from its first lines only
    (the file was read while they were being written), it returns the message of the lines
    written since, stored in its place; otherwise None."""

    conversation: str | None
    message: dict[str, Any]
    line: int
    resume: Callable[[Message], dict[str, Any] | None] | None = None


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


def loads(text: str | bytes) -> Any:
    """``json.loads`` whose every failure is a ``ValueError`` reading ``invalid JSON: …``:
    bad syntax (with its column), nesting too deep, or an integer longer than Python
    converts (4,300 digits: ``json.loads`` raises a bare ValueError for it)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"invalid JSON: {exc.msg} (column {exc.colno})") from None
    except RecursionError:
        raise ValueError("invalid JSON: nested too deeply") from None
    except ValueError as exc:
        digits = _longest_integer(text)
        if not digits:
            raise ValueError(f"invalid JSON: {exc}") from None
        raise ValueError(f"invalid JSON: an integer of {digits:,} digits (at most "
                         f"{sys.get_int_max_str_digits():,} are read)") from None


def _longest_integer(text: str | bytes) -> int:
    """The digits of the longest integer in a JSON text (0 if it does not parse)."""
    longest = 0

    def count(digits: str) -> int:
        nonlocal longest
        longest = max(longest, len(digits.lstrip("-")))
        return 0

    try:
        json.loads(text, parse_int=count)
    except (ValueError, RecursionError):
        return 0
    return longest


def iter_json_lines(stream: ByteStream, source: Source) -> Iterator[tuple[int, Any] | Problem]:
    """``(line number, parsed JSON)`` for each non-blank line, or a :class:`Problem` for a
    line that is not UTF-8, not JSON (a number too long to read included), or longer
    than :attr:`Source.line_limit`."""
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
            yield lineno, loads(text)
        except ValueError as exc:
            yield Problem(lineno, str(exc))


def _lenient(line: bytes) -> Any:
    """A line of a sniffed head parsed for format detection: a byte that is not UTF-8
    (inside a string, where it can be) does not change what the line is, so it is read
    as U+FFFD here; the line reader still reports that line as not UTF-8."""
    return json.loads(line.decode("utf-8", errors="replace"))


def _head_lines(head: bytes) -> list[bytes]:
    """The non-blank complete lines of a sniffed head (the last one dropped when the head
    was cut inside it), without a byte-order mark."""
    lines = head.lstrip(b"\xef\xbb\xbf \t\r\n").split(b"\n")
    if len(head) >= HEAD_BYTES and len(lines) > 1:
        lines.pop()
    return [line for line in lines if line.strip()]


def is_json_lines(head: bytes) -> bool:
    """Whether a file starting with ``head`` is JSON lines, an object per line, rather than
    one document (or not JSON). A first line that is an object or an array on its own
    settles it (lines; a document on one line); when it is neither (a line written half, a
    stray byte outside a string, junk), most of the next complete lines of the head being
    objects on their own does: no line of a document spread over lines but its innermost ones is.
    A first line longer than the head is a long JSON line."""
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if b"\n" not in text and len(head) >= HEAD_BYTES:
        return text.startswith(b"{")
    lines = _head_lines(head)[:50]
    if not lines:
        return False
    first = _object_line(lines[0])
    if first is not None:
        return first
    rest = [bool(_object_line(line)) for line in lines[1:]]
    return bool(rest) and sum(rest) * 2 > len(rest)


def _object_line(line: bytes) -> bool | None:
    """True for a JSON object on its own, False for an array (a document on one line),
    None for anything else (not JSON, or JSON that is neither)."""
    try:
        value = _lenient(line)
    except RecursionError:  # one whole (too deeply nested) line: the line reader reports it
        return line.lstrip().startswith(b"{")
    except ValueError:
        return None
    return True if isinstance(value, dict) else False if isinstance(value, list) else None


def head_json_lines(head: bytes) -> list[Any]:
    """The values of the first (up to 50) complete lines of a JSON-lines head that parse,
    read as :func:`is_json_lines` reads them; lines that do not parse are passed over."""
    values: list[Any] = []
    for line in _head_lines(head)[:50]:
        try:
            values.append(_lenient(line))
        except (ValueError, RecursionError):
            continue
    return values


def text_or_parts(parts: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    """One text part becomes a plain string; anything else stays a list of parts."""
    if len(parts) == 1 and parts[0].get("type") == "text" and set(parts[0]) == {"type", "text"}:
        text: str = parts[0]["text"]
        return text
    return parts
