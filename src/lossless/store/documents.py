"""What the keyword index is given for a row of a plug-in's table: a memory's text and a
file chunk's path and text.

The long-term memory (``memories``) and the workspace file index (``files``,
``file_chunks``) write these rows, but the keyword index they feed is the store's: its
numbered migrations created the index tables and re-index them when what a text is indexed
as changes (:mod:`lossless.store.reindex`), and ``lossless migrate`` rebuilds them on
PostgreSQL (:mod:`lossless.store.transfer`). A migration runs whenever a store is opened,
whatever its opener imported, so what it needs of a plug-in's rows is defined here, below
the plug-ins, and the plug-ins write through the same functions (issue 28: the store
imports none of them).
"""

from __future__ import annotations

from collections.abc import Iterable

from lossless.store.fts import cjk_index_line, wide_forms_line
from lossless.store.postgres.grep import search_document

__all__ = ["chunk_documents", "chunk_index_text", "chunk_search", "search_text"]


def search_text(content: str, result: str | None = None, patterns: Iterable[str] = (),
                errors: Iterable[str] = ()) -> str:
    """What is indexed and embedded for a memory record: its content, plus a task's result,
    patterns and errors (so a task is found by what it taught)."""
    return "\n".join([content, *([result] if result else []), *patterns, *errors])


def chunk_index_text(text: str) -> str:
    """What a column of ``file_chunks_fts`` (a path, a chunk's text) is given: the text,
    then the plain forms of its full-width words and its CJK bigrams on lines of their
    own (store/fts.py), so ２０２４ finds 2024 and a two-character Chinese word its chunk."""
    lines = [line for line in (wide_forms_line(text), cjk_index_line(text)) if line]
    return "\n".join([text, *lines])


def chunk_documents(path: str, text: str) -> tuple[str, str]:
    """What PostgreSQL's ``to_tsvector`` indexes for a chunk: its file's path, and its text."""
    return search_document(path), search_document(text)


def chunk_search(path_doc: str, text_doc: str) -> str:
    """SQL for a chunk's search vector from its two documents (:func:`chunk_documents`),
    given as SQL expressions (placeholders or columns)."""
    return f"setweight(to_tsvector('english', {path_doc}), 'B') || setweight(to_tsvector('english', {text_doc}), 'A')"
