"""The CLI's consoles show a control character inside stored text as a visible sign, never
as it is. Text stored from a chat log or a tenant's request can hold escape sequences
(``ESC[2J`` clears the screen, ``ESC]0;…`` retitles the window, ``ESC]52;…`` writes the
clipboard), and ``lossless show`` or ``grep`` printed them raw, also through ``| head``.

Only the text rich renders is changed, not rich's own control codes (styles, a progress
bar's cursor moves); that output is for people (wrapped, cut to a line) in a pipe too.
What is for programs stays byte for byte what was stored: ``--json`` (JSON escapes it) and
the exact text ``lossless expand --offset`` writes, unless that goes to a terminal."""

from __future__ import annotations

import codecs
import re
import sys
from collections.abc import Iterable
from typing import Any

from rich.console import Console
from rich.segment import Segment

__all__ = ["TerminalConsole", "json_escaped", "stdin_text", "utf8_pipe", "visible"]

# C0 but tab and newline, DEL, and C1 (0x9b alone is a CSI on many terminals)
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_RAW_IN_JSON = re.compile("[\x7f-\x9f]")  # what json.dumps(ensure_ascii=False) leaves of them


def _sign(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x20:
        return chr(0x2400 + code)  # Unicode's control pictures: ␛ for ESC, ␇ for BEL, ␍ for CR
    if code == 0x7F:
        return "\u2421"  # ␡
    return f"\\x{code:02x}"


def visible(text: str) -> str:
    """``text`` with each control character but tab and newline as a visible sign."""
    return _CONTROL.sub(_sign, text)


def json_escaped(document: str) -> str:
    """A JSON document from ``json.dumps(…, ensure_ascii=False)`` with DEL and C1 escaped
    too (JSON escapes C0 itself): the same text to a JSON reader, none of it live on a
    terminal."""
    return _RAW_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", document)


def utf8_pipe() -> None:
    """Make standard output UTF-8 when it goes into a pipe or a file, whatever the locale's
    encoding. What is written there is for programs or for keeping (``export``, ``--json``,
    ``expand`` into a file): under a GBK locale (a Chinese Windows redirecting ``>``, a
    ``zh_CN.GBK`` shell) ``lossless export CONV > backup.jsonl`` wrote GBK that ``import``
    refuses, and stopped at the first emoji with "unexpected UnicodeEncodeError", the file
    cut there; ``grep`` of a message with an emoji printed nothing at all. A terminal keeps
    its own encoding (it displays with it), a character it does not have shown as ``?``
    rather than failing the command."""
    out = sys.stdout
    try:
        if out is None or codecs.lookup(out.encoding or "utf-8").name == "utf-8":
            return
        terminal = out.isatty()
    except (LookupError, ValueError, AttributeError):  # an unknown encoding, a closed or odd stream
        terminal = False
    reconfigure = getattr(out, "reconfigure", None)
    if reconfigure is not None:
        try:
            if terminal:
                reconfigure(errors="replace")
            else:
                reconfigure(encoding="utf-8")
        except (ValueError, OSError):
            return


def stdin_text() -> str:
    """Standard input as text, line ends as they are: UTF-8 when it is (what another
    program writes, lossless itself into a pipe included), else the locale's encoding (GBK
    piped on a Chinese Windows). Read in the locale's encoding alone, UTF-8 under a GBK
    locale was stored as mojibake (你好 as 浣犲ソ), and ``lossless expand X | lossless add Y``
    did not give the text back. Bytes of neither stay undecodable, for the check to name."""
    buffer = getattr(sys.stdin, "buffer", None)
    if buffer is None:
        return sys.stdin.read()
    data: bytes = buffer.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    try:
        return data.decode(sys.stdin.encoding or "utf-8")
    except (UnicodeDecodeError, LookupError):
        return data.decode("utf-8", "surrogateescape")


class TerminalConsole(Console):
    """A rich console that shows control characters of the text it renders as visible
    signs (:func:`visible`)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(highlight=False, **kwargs)

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        return super()._render_buffer(
            seg if seg.control or not _CONTROL.search(seg.text) else Segment(visible(seg.text), seg.style)
            for seg in buffer)
