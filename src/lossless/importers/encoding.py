"""Files that are not UTF-8: told apart before anything is read, and decoded when asked.

Every importer reads UTF-8 (JSON between systems is UTF-8, RFC 8259). A chat log saved by
other tools often is not: Windows PowerShell's ``>`` and Notepad's "Unicode" write UTF-16
with a byte-order mark, and a Chinese Windows saves "ANSI" text as GBK (GB18030). Read line
by line as UTF-8, such a file had every line with a Chinese character reported as "not
UTF-8" and skipped, while its ASCII lines were stored: a conversation with holes in it.

So the first bytes decide, once, for the whole file (:func:`source_encoding`):

* a UTF-16 or UTF-32 byte-order mark names its encoding, and the file is decoded with it;
* text whose lines are mostly not UTF-8 (or a JSON document with any such byte: it cannot
  be read past it) is refused before anything is stored, with the encoding it reads as
  and the ``--encoding`` to give;
* a line or two that is not UTF-8 among good ones is a broken line, reported and skipped
  on its own as before.

With an encoding given (``--encoding gb18030``), :class:`Recoded` decodes the file from it
as it is read and hands the importers UTF-8.
"""

from __future__ import annotations

import codecs
from typing import Final

from lossless.core.errors import ValidationError
from lossless.core.legacy_text import decoded, legacy_cjk
from lossless.importers.base import ByteStream, is_json_lines

__all__ = ["Recoded", "check_encoding_name", "source_encoding"]

# the byte-order marks that name an encoding for certain (UTF-32's first: it starts like UTF-16's)
_BOMS: Final = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"),
                (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))
_UTF8: Final = frozenset({"utf-8", "utf-8-sig"})
_CHUNK: Final = 64 * 1024


def check_encoding_name(encoding: str) -> str:
    """``encoding`` as Python names it; a ValidationError naming it when there is none."""
    try:
        return codecs.lookup(encoding).name
    except (LookupError, TypeError):
        raise ValidationError(f"unknown encoding {encoding!r} (e.g. gb18030, big5, shift_jis, utf-16, cp1252)") \
            from None


def source_encoding(head: bytes, name: str, encoding: str | None = None) -> str | None:
    """The encoding to decode a file starting with ``head`` from: ``encoding`` when given,
    else the one a byte-order mark names; None for UTF-8. Raises a ValidationError, before
    anything is read, for a file that is not UTF-8 text and says what to give."""
    marked = next((enc for bom, enc in _BOMS if head.startswith(bom)), None)
    if encoding is not None:
        chosen = check_encoding_name(encoding)
        if chosen in _UTF8 or (marked is not None and chosen.startswith(marked)):
            return None if chosen in _UTF8 else chosen
        if marked is None and not head.isascii() and _undecodable(head) == 0:
            raise ValidationError(f"{name} is UTF-8 already (its first {len(head):,} bytes read as UTF-8): import it "
                                  f"without --encoding {encoding} (decoding it as {chosen} would garble it)")
        return chosen
    if marked is not None:
        return marked
    if head.isascii():
        return None
    bad, lines = _undecodable(head), _lines(head)
    # a document cannot be read past its first bad byte; JSON lines and text can, line by line,
    # when only a few lines are broken
    if bad and (_document(head) or (bad * 2 >= lines and (bad >= 2 or lines == 1))):
        raise ValidationError(_not_utf8(head, name, bad, lines))
    return None


def _lines(head: bytes) -> int:
    return sum(1 for line in head.split(b"\n") if line.strip())


def _undecodable(head: bytes) -> int:
    """How many of the head's lines are not UTF-8 (its last line may be cut mid-character)."""
    lines = head.split(b"\n")
    bad = 0
    for i, line in enumerate(lines):
        try:
            codecs.getincrementaldecoder("utf-8")().decode(line, final=i < len(lines) - 1)
        except UnicodeDecodeError:
            bad += 1
    return bad


def _document(head: bytes) -> bool:
    """One JSON document, not JSON lines (as :func:`~lossless.importers.openai_messages.is_document`)."""
    return head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith((b"[", b"{")) and not is_json_lines(head)


def _legacy_guess(head: bytes) -> tuple[str, str, str] | None:
    """(encoding, what it is, the first line that is not ASCII as it reads) of the legacy CJK
    encoding the head reads best as, None when it reads as none of them or as mostly rare
    characters in each while it reads as Windows-1252 (accents read as GB18030's rare hanzi)."""
    best = legacy_cjk(head)
    if best is None or (best[0] < 0.5 and decoded(head, "cp1252") is not None):
        return None
    return best[1:]


def _not_utf8(head: bytes, name: str, bad: int, lines: int) -> str:
    where = f"{bad} of its first {lines:,} lines hold" if lines > 1 else "its text holds"
    legacy = _legacy_guess(head)
    if legacy is not None:
        option, what, sample = legacy
        guess = f"its bytes read as {what} ({sample!r})"
    else:
        guess = "it is in a legacy encoding (Windows-1252, Latin-1 …)"
        option = "cp1252"
    return (f"{name} is not UTF-8 ({where} bytes UTF-8 does not have): {guess}. Nothing was imported: "
            f"import it with --encoding {option} (the encoding it was saved in), or save it as UTF-8 first")


class Recoded:
    """A byte stream in ``encoding``, read as UTF-8 (a :class:`ByteStream`). ``consumed``
    counts the source's bytes (for progress against the file's size). Bytes that are not
    ``encoding`` raise a ValidationError naming their offset."""

    def __init__(self, stream: ByteStream, encoding: str, name: str) -> None:
        self.stream = stream
        self.encoding = encoding
        self.name = name
        self.consumed = 0
        self._decoder = codecs.getincrementaldecoder(encoding)("strict")
        self._buffer = bytearray()
        self._eof = False

    def _fill(self) -> None:
        raw = self.stream.read(_CHUNK)
        pending = len(self._decoder.getstate()[0])  # the bytes of a character the last read cut: the error counts them
        try:
            text = self._decoder.decode(raw, final=not raw)
        except UnicodeDecodeError as exc:
            at = self.consumed - pending + exc.start
            raise ValidationError(f"{self.name}: the bytes at offset {at:,} are not {self.encoding} ({exc.reason}); "
                                  "the batches stored before them stay: fix the file (or give the encoding it was "
                                  "saved in) and import it again, what is stored already is skipped") from None
        self.consumed += len(raw)
        self._buffer += text.encode("utf-8")
        self._eof = not raw

    def read(self, size: int = -1, /) -> bytes:
        while not self._eof and (size is None or size < 0 or len(self._buffer) < size):
            self._fill()
        cut = len(self._buffer) if size is None or size < 0 else size
        data = bytes(self._buffer[:cut])
        del self._buffer[:cut]
        return data

    def readline(self, size: int = -1, /) -> bytes:
        bounded = size is not None and size >= 0
        start = 0
        while True:
            newline = self._buffer.find(b"\n", start)
            if newline >= 0 and (not bounded or newline < size):
                cut = newline + 1
                break
            if bounded and len(self._buffer) >= size:
                cut = size
                break
            if self._eof:
                cut = len(self._buffer)
                break
            start = len(self._buffer)
            self._fill()
        data = bytes(self._buffer[:cut])
        del self._buffer[:cut]
        return data
