"""Read a large JSON document one value at a time, without a streaming-JSON dependency.

:func:`iter_document` walks a top-level array (yielding each element) or object (yielding
each value, and the elements of the arrays under the keys asked for) with
``json.JSONDecoder.raw_decode`` over a sliding text buffer: memory holds one element, not
the file. A value cut off by the end of the buffer is retried with twice the text, so a
large element costs linear, not quadratic, time.

``json5=True`` first removes what JSON5 adds most often (``//`` and ``/* */`` comments,
trailing commas) in a streaming pre-pass; other JSON5 syntax is reported as invalid JSON.
"""

from __future__ import annotations

import codecs
import json
import re
import sys
from collections.abc import Iterator
from typing import Any, NamedTuple

from lossless.importers.base import ByteStream

__all__ = ["BadValue", "JsonStreamError", "iter_document"]

_CHUNK = 1 << 16
_MAX_VALUE_CHARS = 512 * 1024 * 1024  # one element this large is refused, not buffered
_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


class JsonStreamError(Exception):
    """The document is not (or no longer) valid JSON at ``line``."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line = line
        self.message = message


class BadValue(NamedTuple):
    """Yielded in place of a value that is JSON but cannot be read: an integer longer than
    Python converts (4,300 digits). Only that value is skipped (``reason`` says why); the
    document goes on after it."""

    reason: str


class _IntCounter:
    """A decoder that reads every integer as 0 and keeps the length of the longest: it
    finds where a value with an unreadable integer ends, and how long that integer is."""

    def __init__(self) -> None:
        self.longest = 0
        self.decoder = json.JSONDecoder(parse_int=self.count)

    def count(self, digits: str) -> int:
        self.longest = max(self.longest, len(digits.lstrip("-")))
        return 0


class _Json5Cleaner:
    """Streaming removal of comments and trailing commas; keeps every newline, so line
    numbers still match the file."""

    _TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"|//[^\n]*|/\*[\s\S]*?\*/|,|["/]')
    _GAP = re.compile(r"(?:\s|//[^\n]*|/\*[\s\S]*?\*/)*")

    def __init__(self) -> None:
        self.carry = ""

    def feed(self, text: str, final: bool = False) -> str:
        text = self.carry + text
        self.carry = ""
        out: list[str] = []
        pos = 0
        for m in self._TOKEN.finditer(text):
            token = m.group()
            start = m.start()
            if token == ",":
                gap = self._GAP.match(text, m.end())
                assert gap is not None
                if gap.end() == len(text) and not final:
                    out.append(text[pos:start])
                    self.carry = text[start:]
                    return "".join(out)
                out.append(text[pos:start])
                trailing = gap.end() < len(text) and text[gap.end()] in "]}"
                pos = m.end() if trailing else start  # a trailing comma is dropped
                continue
            if token.startswith("//"):
                if m.end() == len(text) and not final:  # the comment may go on in the next chunk
                    out.append(text[pos:start])
                    self.carry = text[start:]
                    return "".join(out)
                out.append(text[pos:start])
                pos = m.end()
            elif token.startswith("/*"):
                out.append(text[pos:start])
                out.append("\n" * token.count("\n"))
                pos = m.end()
            elif token in ('"', "/"):
                incomplete = "\n" not in text[start:] if token == '"' else (
                    start + 1 == len(text) or (text[start + 1] == "*" and "*/" not in text[start:]))
                if incomplete and not final:
                    out.append(text[pos:start])
                    self.carry = text[start:]
                    return "".join(out)
                # malformed: leave it for the JSON parser to report
        out.append(text[pos:])
        return "".join(out)


class _Buffer:
    """Decoded text read on demand, with the line number of the read position."""

    def __init__(self, stream: ByteStream, json5: bool) -> None:
        self.stream = stream
        self.decoder = codecs.getincrementaldecoder("utf-8-sig")()
        self.cleaner = _Json5Cleaner() if json5 else None
        self.buf = ""
        self.pos = 0
        self.line = 1
        self.eof = False

    def fill(self, at_least: int = _CHUNK) -> bool:
        """Read at least ``at_least`` more characters (fewer at the end); False at EOF."""
        if self.eof:
            return False
        if self.pos > _CHUNK:
            self.buf = self.buf[self.pos:]
            self.pos = 0
        got = 0
        want = max(_CHUNK, at_least)
        while got < want and not self.eof:
            # while the JSON5 pre-pass holds back an unfinished string, read at least as much
            # again as it holds, so a long string is rescanned a logarithmic number of times
            raw = self.stream.read(max(want, len(self.cleaner.carry)) if self.cleaner else want)
            try:
                text = self.decoder.decode(raw, final=not raw)
            except UnicodeDecodeError as exc:
                raise JsonStreamError(self.line + self.buf.count("\n", self.pos),
                                      f"not UTF-8: undecodable byte ({exc.reason})") from None
            if not raw:
                self.eof = True
            if self.cleaner is not None:
                text = self.cleaner.feed(text, final=self.eof)
            self.buf += text
            got += len(text)
        return got > 0 or not self.eof

    def advance(self, end: int) -> None:
        self.line += self.buf.count("\n", self.pos, end)
        self.pos = end

    def skip_ws(self) -> None:
        while True:
            m = _WS.match(self.buf, self.pos)
            assert m is not None
            self.advance(m.end())
            if self.pos < len(self.buf) or not self.fill():
                return

    def peek(self) -> str:
        self.skip_ws()
        return self.buf[self.pos] if self.pos < len(self.buf) else ""

    def expect(self, chars: str, what: str) -> str:
        ch = self.peek()
        if not ch or ch not in chars:
            found = repr(ch) if ch else "the end of the file (truncated?)"
            raise JsonStreamError(self.line, f"invalid JSON: expected {what}, found {found}")
        self.advance(self.pos + 1)
        return ch

    def value(self) -> tuple[Any, int]:
        """The next JSON value and the line it starts on (a :class:`BadValue` for one
        holding an integer too long to read)."""
        self.skip_ws()
        line = self.line
        counter: _IntCounter | None = None
        while True:
            try:
                value, end = (counter.decoder if counter else _DECODER).raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                unterminated = exc.msg.startswith("Unterminated string")
                if not self.eof and (unterminated or exc.pos >= len(self.buf) - 64):
                    self._grow(line)  # it may go on in the text not read yet
                    continue
                cut = unterminated or exc.pos >= len(self.buf) - 1
                if cut:  # point at where the unfinished value starts, not at the end of the file
                    raise JsonStreamError(line, "invalid JSON: the file ends inside the value that starts "
                                                "here (truncated?)") from None
                where = line + self.buf.count("\n", self.pos, exc.pos)
                raise JsonStreamError(where, f"invalid JSON: {exc.msg} (column {exc.colno})") from None
            except RecursionError:
                raise JsonStreamError(line, "invalid JSON: nested too deeply") from None
            except ValueError as exc:  # json's bare ValueError: an integer longer than Python converts
                if counter is not None:
                    raise JsonStreamError(line, f"invalid JSON: {exc}") from None
                counter = _IntCounter()  # read it again, to skip just this value
                continue
            if end == len(self.buf) and not self.eof:  # a number may go on in the next chunk
                self._grow(line)
                continue
            self.advance(end)
            if counter is not None:
                return BadValue(f"invalid JSON: an integer of {counter.longest:,} digits (at most "
                                f"{sys.get_int_max_str_digits():,} are read)"), line
            return value, line

    def _grow(self, line: int) -> None:
        pending = len(self.buf) - self.pos
        if pending > _MAX_VALUE_CHARS:
            raise JsonStreamError(line, f"value too large: one JSON value over {_MAX_VALUE_CHARS:,} characters")
        self.fill(at_least=pending)


def _array(buf: _Buffer) -> Iterator[tuple[Any, int]]:
    buf.expect("[", "'['")
    if buf.peek() == "]":
        buf.advance(buf.pos + 1)
        return
    while True:
        yield buf.value()
        if buf.expect(",]", "',' or ']'") == "]":
            return


def iter_document(stream: ByteStream, *, stream_keys: tuple[str, ...] = (),
                  json5: bool = False) -> Iterator[tuple[tuple[str | int, ...], Any, int]]:
    """``(path, value, line)`` for each part of the document, in file order.

    A top-level array yields each element at path ``(index,)``. A top-level object yields
    each value at ``(key,)``, except that an array under a key in ``stream_keys`` yields
    its elements one by one at ``(key, index)``. Raises :class:`JsonStreamError` (after
    everything before the fault was yielded) when the document is malformed or truncated.
    """
    buf = _Buffer(stream, json5)
    first = buf.peek()
    if first == "[":
        for i, (value, line) in enumerate(_array(buf)):
            yield (i,), value, line
    elif first == "{":
        buf.expect("{", "'{'")
        if buf.peek() == "}":
            buf.advance(buf.pos + 1)
        else:
            while True:
                key, _ = buf.value()
                if not isinstance(key, str):
                    raise JsonStreamError(buf.line, "invalid JSON: object keys must be strings")
                buf.expect(":", "':'")
                if key in stream_keys and buf.peek() == "[":
                    for i, (value, line) in enumerate(_array(buf)):
                        yield (key, i), value, line
                else:
                    value, line = buf.value()
                    yield (key,), value, line
                if buf.expect(",}", "',' or '}'") == "}":
                    break
    elif not first:
        raise JsonStreamError(buf.line, "empty file: no JSON document")
    else:
        raise JsonStreamError(buf.line, f"invalid JSON: expected '[' or '{{', found {first!r}")
    if buf.peek():
        raise JsonStreamError(buf.line, "invalid JSON: extra data after the document")
