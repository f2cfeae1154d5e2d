"""Spotting files named in a chat message, and the ``/context`` command.

A message names a file with a path (``src/app.py``, ``./docs/setup.md``, an absolute
path) or a bare file name with an extension (``server.ts``), in plain text, quotes or
backticks, in English or Chinese ("打开 `server.ts` 文件"). These are only candidates:
:meth:`lossless.files.Files.mentioned` keeps the ones that name an indexed file.
"""

from __future__ import annotations

import re

__all__ = ["context_request", "path_candidates"]

# Path characters: ASCII and Latin letters, digits and ._-/~+@ (a backslash is read as
# "/"). CJK is left out, so a path written against Chinese text without spaces is cut
# cleanly ("打开server.ts文件" → "server.ts").
_RUN = re.compile(r"[A-Za-z0-9_.\-/\\~+@\u00c0-\u024f]+")
_NAME_WITH_EXT = re.compile(r"[^/]*[A-Za-z0-9_\-]\.[A-Za-z][A-Za-z0-9_+\-]{0,11}")
_CONTEXT = re.compile(r"^[ \t]*/context(?:[ \t]+([^\n]*?))?[ \t]*$", re.MULTILINE)
_MAX_CANDIDATES = 64


def path_candidates(text: str) -> list[str]:
    """Tokens of ``text`` that look like file paths or file names, in order, once each."""
    out: dict[str, None] = {}
    for match in _RUN.finditer(text):
        token = match.group(0).replace("\\", "/").rstrip(".-/")
        while token.startswith("./"):
            token = token[2:]
        if not token or not any(ch.isalnum() for ch in token):
            continue
        if token.startswith("@") and "/" not in token:  # a mention, not a file
            continue
        last = token.rsplit("/", 1)[-1]
        if "/" in token.strip("/") or _NAME_WITH_EXT.fullmatch(last) or token.startswith(("/", "~/")):
            out.setdefault(token, None)
        if len(out) >= _MAX_CANDIDATES:
            break
    return list(out)


def context_request(text: str) -> str | None:
    """The argument of a ``/context`` command on a line of its own (``/context project
    layout`` → ``"project layout"``; a bare ``/context`` → ``""``), or None when the
    message has none."""
    if not isinstance(text, str):
        return None
    match = _CONTEXT.search(text)
    if match is None:
        return None
    return (match.group(1) or "").strip()
