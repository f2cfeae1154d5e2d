"""Finding indexed files by the names people use for them: an absolute path (resolved),
a path relative to its root, the tail of a path, or a bare file name."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from lossless.core.errors import NotFoundError, ValidationError

if TYPE_CHECKING:
    from lossless.store.runner import SQLRunner

__all__ = ["FILE_COLS", "display", "lookup", "one"]

FILE_COLS = "f.rowid, f.path, f.root, f.abs_path, f.kind, f.size, f.mtime_ns, f.sha256, f.chunk_count, f.indexed_at"


def lookup(db: SQLRunner, path_text: str) -> list[tuple[Any, ...]]:
    """Rows (:data:`FILE_COLS`) of the indexed files a path names; several when it is
    ambiguous (then the one under the working directory, if any, is kept)."""
    if not isinstance(path_text, str | os.PathLike):
        raise ValidationError(f"a path must be a string, got {type(path_text).__name__}")
    text = os.fspath(path_text).strip().strip("`'\"").replace("\\", "/")
    while text.startswith("./"):
        text = text[2:]
    if not text or "\x00" in text:
        raise ValidationError(f"not a usable path: {path_text!r}")
    q = db.query
    if text.startswith("~"):
        text = os.path.expanduser(text)
    if os.path.isabs(text):
        candidates = list(dict.fromkeys([os.path.realpath(text), os.path.abspath(text)]))
        return q(f"SELECT {FILE_COLS} FROM files f WHERE f.abs_path IN ({','.join('?' * len(candidates))})",
                 candidates)
    rows = q(f"SELECT {FILE_COLS} FROM files f WHERE f.path = ?", (text,))
    if not rows and "/" in text:  # the tail of a path: found by its file name (indexed), then checked
        tail = "/" + text.rstrip("/")
        rows = [r for r in q(f"SELECT {FILE_COLS} FROM files f WHERE f.name = ?", (tail.rsplit("/", 1)[-1],))
                if str(r[3]).endswith(tail)]
    if not rows and "/" not in text:
        rows = q(f"SELECT {FILE_COLS} FROM files f WHERE f.name = ?", (text,))
    if len(rows) > 1:  # several roots hold it: the one under the working directory wins
        here = os.path.realpath(text)
        rows = [r for r in rows if r[3] == here] or rows
    return rows


def one(db: SQLRunner, path_text: str) -> tuple[Any, ...]:
    """The one indexed file a path names: NotFoundError for none, ValidationError for several."""
    rows = lookup(db, path_text)
    if not rows:
        raise NotFoundError(f"no indexed file {path_text!r}")
    if len(rows) > 1:
        names = ", ".join(sorted(r[3] for r in rows)[:5])
        raise ValidationError(f"{path_text!r} names {len(rows)} indexed files ({names}); give more of the path")
    return rows[0]


def display(db: SQLRunner, row: Sequence[Any]) -> str:
    """A file's relative path when no other indexed file has it, else its absolute one."""
    n = db.query("SELECT count(*) FROM files WHERE path = ?", (row[1],))[0][0]
    return str(row[1]) if n == 1 else str(row[3])
