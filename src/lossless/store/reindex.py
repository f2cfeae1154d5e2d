"""Rebuilding keyword-index rows when what a text is indexed as changes.

Both stores' migration ``keyword_forms`` call :func:`reindex_sqlite` / :func:`reindex_postgres`: :func:`lossless.store.fts.index_text`
(SQLite) and :func:`lossless.store.postgres.grep.search_document` (PostgreSQL) gained the
extra forms of compounds (``follow up followup``, ``5 km``, the Latin words inside CJK
text), and rows indexed before must get them too, or "followup" would find a new
"follow-up" and not an old one. Each row is rebuilt from the text it was indexed from,
the same text the write path gives: a message's ``name: text``, a summary's content, a
memory's :func:`~lossless.store.documents.search_text`. Rows that have no index row
(forgotten, or being re-indexed) are left without one.

Both stores' migration ``cjk_bigrams`` (issue 27) call :func:`reindex_cjk_sqlite` /
:func:`reindex_cjk_postgres`: CJK text became indexed as words (character bigrams and
each run's last character, :func:`lossless.store.fts.cjk_index_terms`), so every row
whose text holds CJK (messages, summaries, memories, file chunks) is indexed again, once,
in the migration's transaction. It runs when the store is opened; a big store says so,
and how far it is, on the ``lossless`` logger (a WARNING line every few seconds, which
Python prints to stderr when the application has set up no logging).

Both stores' migration ``json_escapes`` call :func:`reindex_escaped_sqlite` /
:func:`reindex_escaped_postgres`: rows whose text holds JSON ``\\u`` escapes (a tool
result written by ``json.dumps`` with its default ``ensure_ascii``) get the text those
escapes spell (:func:`lossless.store.fts.escaped_text`), so 杭州 finds ``\\u676d\\u5dde``.

SQLite's migration ``wide_forms`` calls :func:`reindex_wide_sqlite` the same way: rows
whose text holds full-width letters or digits (``ｉＰｈｏｎｅ１５``) get their plain forms
(:func:`lossless.store.fts.wide_forms_line`). PostgreSQL's documents were NFKD-folded
from the start, which gives the plain forms, so it has no such step.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

from lossless.core.render import content_text
from lossless.store.documents import chunk_documents, chunk_index_text, chunk_search, search_text
from lossless.store.fts import escaped_text, has_cjk, has_wide_forms, index_extras, index_text
from lossless.store.postgres.grep import search_document

__all__ = ["indexed_memory_text", "indexed_message_text", "reindex_cjk_postgres", "reindex_cjk_sqlite",
           "reindex_escaped_postgres", "reindex_escaped_sqlite", "reindex_postgres", "reindex_sqlite",
           "reindex_wide_sqlite"]

log = logging.getLogger("lossless")

_BATCH = 1_000
_ANNOUNCE_ROWS = 20_000  # a store with more rows than this says it is being re-indexed
_REPORT_SECONDS = 5.0


def indexed_message_text(name: str | None, content: str | None, is_json: int, calls: str | None) -> str:
    """The text a message's keyword row is made from (as ``append_messages`` gives it)."""
    text = content_text(json.loads(content) if is_json and content else content, json.loads(calls) if calls else None)
    return f"{name}: {text}" if name else text


def indexed_memory_text(content: str, result: str | None, patterns: str | None, errors: str | None) -> str:
    return search_text(content, result, json.loads(patterns or "[]"), json.loads(errors or "[]"))


_SOURCES: dict[str, tuple[str, str, Callable[..., str]]] = {
    # index table: (SQL of rowid + the columns the text is made from, source table, the text)
    "messages": ("rowid, name, content, content_is_json, tool_calls", "messages", indexed_message_text),
    "summaries": ("rowid, content", "summaries", lambda content: content),
    "memories": ("rowid, content, result, patterns, errors", "memories", indexed_memory_text),
}


def _batches(conn: Any, sql: str) -> Iterator[list[Any]]:
    """Rows of ``sql`` (which selects rowid first and takes the last rowid seen and a
    batch size), in rowid order, a batch at a time."""
    last = -1
    while True:
        rows = conn.execute(sql, (last, _BATCH)).fetchall()
        if not rows:
            return
        yield rows
        last = rows[-1][0]


def reindex_sqlite(conn: Any) -> None:
    """Rewrite the unicode61 rows (``messages_fts``, ``summaries_fts``, ``memories_fts``)
    of every text that has extra forms; the others are indexed as before."""
    for base, (columns, table, text_of) in _SOURCES.items():
        index = f"{base}_fts"
        # a contentless table: a full scan yields the rowids it holds, read once
        held = {row[0] for row in conn.execute(f"SELECT rowid FROM {index}").fetchall()}
        sql = f"SELECT {columns} FROM {table} WHERE rowid > ? ORDER BY rowid LIMIT ?"
        for rows in _batches(conn, sql):
            changed = [(row[0], text_of(*row[1:])) for row in rows if row[0] in held]
            changed = [(rowid, text) for rowid, text in changed if index_extras(text)]
            # contentless_delete=1: a row is deleted by rowid, then written anew
            for rowid, text in changed:
                conn.execute(f"DELETE FROM {index} WHERE rowid = ?", (rowid,))
                conn.execute(f"INSERT INTO {index} (rowid, text) VALUES (?, ?)", (rowid, index_text(text)))


def reindex_postgres(conn: Any) -> None:
    """Recompute the ``search`` tsvector of every message, summary, memory and file chunk
    from :func:`~lossless.store.postgres.grep.search_document`."""
    for base, (columns, table, text_of) in _SOURCES.items():
        sql = (f"SELECT {columns} FROM {table} WHERE rowid > %s AND search IS NOT NULL "
               "ORDER BY rowid LIMIT %s")
        for rows in _batches(conn, sql):
            docs = [search_document(text_of(*row[1:])) for row in rows]
            conn.execute(f"UPDATE {base} t SET search = to_tsvector('simple', d.doc) "
                         "FROM unnest(%s::bigint[], %s::text[]) AS d(rowid, doc) WHERE t.rowid = d.rowid",
                         ([row[0] for row in rows], docs))
    sql = ("SELECT c.rowid, f.path, c.text FROM file_chunks c JOIN files f ON f.rowid = c.file_rowid "
           "WHERE c.rowid > %s ORDER BY c.rowid LIMIT %s")
    for rows in _batches(conn, sql):
        pairs = [chunk_documents(path, text) for _rowid, path, text in rows]
        conn.execute(f"UPDATE file_chunks c SET search = {chunk_search('d.path_doc', 'd.text_doc')} "
                     "FROM unnest(%s::bigint[], %s::text[], %s::text[]) AS d(rowid, path_doc, text_doc) "
                     "WHERE c.rowid = d.rowid",
                     ([row[0] for row in rows], [p for p, _ in pairs], [t for _, t in pairs]))


class _Progress:
    """Says, on the ``lossless`` logger, that a big store is being re-indexed and how far
    it is (every ``_REPORT_SECONDS``), so an ``open`` that takes a while is not silent."""

    def __init__(self, total: int, what: str = "the CJK text of this store as words") -> None:
        self.total = total
        self.what = what
        self.done = 0
        self.changed = 0
        self.loud = total > _ANNOUNCE_ROWS
        self.last = time.monotonic()
        if self.loud:
            log.warning("lossless: indexing %s (once, on upgrade): reading %s rows", what, f"{total:,}")

    def advance(self, rows: int, changed: int) -> None:
        self.done += rows
        self.changed += changed
        now = time.monotonic()
        if self.loud and now - self.last >= _REPORT_SECONDS:
            self.last = now
            log.warning("lossless: indexing %s: %s of %s rows read, %s re-indexed",
                        self.what, f"{self.done:,}", f"{self.total:,}", f"{self.changed:,}")

    def finish(self) -> None:
        if self.loud:
            log.warning("lossless: indexed %s: %s rows re-indexed", self.what, f"{self.changed:,}")


def _count(conn: Any, tables: list[str]) -> int:
    return sum(int(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]) for t in tables)


def reindex_cjk_sqlite(conn: Any) -> int:
    """Rewrite the keyword rows of every message, summary, memory and file chunk whose
    text holds CJK (:func:`~lossless.store.fts.index_text` now adds its bigrams); the rows
    re-indexed. Rows without an index row are left without one."""
    return _reindex_sqlite_where(conn, has_cjk, _Progress(_count(conn, [*_SOURCES, "file_chunks"])))


def reindex_wide_sqlite(conn: Any) -> int:
    """Rewrite the keyword rows of every message, summary, memory and file chunk whose
    text holds full-width letters or digits (:func:`~lossless.store.fts.index_text` now
    adds their plain forms); the rows re-indexed."""
    progress = _Progress(_count(conn, [*_SOURCES, "file_chunks"]), "the full-width letters and digits of this store")
    return _reindex_sqlite_where(conn, has_wide_forms, progress)


def _reindex_sqlite_where(conn: Any, wanted: Callable[[str], bool], progress: _Progress, *,
                          chunks: bool = True) -> int:
    for base, (columns, table, text_of) in _SOURCES.items():
        index = f"{base}_fts"
        sql = f"SELECT {columns} FROM {table} WHERE rowid > ? ORDER BY rowid LIMIT ?"
        for rows in _batches(conn, sql):
            changed = [(row[0], text) for row in rows if wanted(text := text_of(*row[1:]))]
            for rowid, text in changed:
                # a point lookup: only rows that have an index row get a new one
                if conn.execute(f"SELECT 1 FROM {index} WHERE rowid = ?", (rowid,)).fetchone() is None:
                    continue
                conn.execute(f"DELETE FROM {index} WHERE rowid = ?", (rowid,))  # contentless_delete=1
                conn.execute(f"INSERT INTO {index} (rowid, text) VALUES (?, ?)", (rowid, index_text(text)))
            progress.advance(len(rows), len(changed))
    sql = ("SELECT c.rowid, f.path, c.text FROM file_chunks c JOIN files f ON f.rowid = c.file_rowid "
           "WHERE c.rowid > ? ORDER BY c.rowid LIMIT ?")
    for rows in _batches(conn, sql) if chunks else ():
        found = [(rowid, path, text) for rowid, path, text in rows if wanted(text) or wanted(path)]
        for rowid, path, text in found:
            conn.execute("DELETE FROM file_chunks_fts WHERE rowid = ?", (rowid,))
            conn.execute("INSERT INTO file_chunks_fts (rowid, path, text) VALUES (?, ?, ?)",
                         (rowid, chunk_index_text(path), chunk_index_text(text)))
        progress.advance(len(rows), len(found))
    progress.finish()
    return progress.changed


def reindex_escaped_sqlite(conn: Any) -> int:
    """Rewrite the keyword rows of every message, summary and memory whose text holds JSON
    ``\\u`` escapes (:func:`~lossless.store.fts.index_text` now adds the text they
    spell); the rows re-indexed."""
    progress = _Progress(_count(conn, list(_SOURCES)), "the JSON-escaped text of this store")
    return _reindex_sqlite_where(conn, _escaped, progress, chunks=False)


def reindex_escaped_postgres(conn: Any) -> int:
    """The same on PostgreSQL (:func:`~lossless.store.postgres.grep.search_document`)."""
    progress = _Progress(_count(conn, list(_SOURCES)), "the JSON-escaped text of this store")
    return _reindex_postgres_where(conn, _escaped, progress, chunks=False)


def _escaped(text: str) -> bool:
    return bool(escaped_text(text))


def reindex_cjk_postgres(conn: Any) -> int:
    """Recompute the ``search`` tsvector of every message, summary, memory and file chunk
    whose text holds CJK (:func:`~lossless.store.postgres.grep.search_document` now adds
    each run's last character); the rows re-indexed."""
    return _reindex_postgres_where(conn, has_cjk, _Progress(_count(conn, [*_SOURCES, "file_chunks"])))


def _reindex_postgres_where(conn: Any, wanted: Callable[[str], bool], progress: _Progress, *,
                            chunks: bool = True) -> int:
    for base, (columns, table, text_of) in _SOURCES.items():
        sql = f"SELECT {columns} FROM {table} WHERE rowid > %s AND search IS NOT NULL ORDER BY rowid LIMIT %s"
        for rows in _batches(conn, sql):
            changed = [(row[0], text) for row in rows if wanted(text := text_of(*row[1:]))]
            if changed:
                conn.execute(f"UPDATE {base} t SET search = to_tsvector('simple', d.doc) "
                             "FROM unnest(%s::bigint[], %s::text[]) AS d(rowid, doc) WHERE t.rowid = d.rowid",
                             ([r for r, _ in changed], [search_document(t) for _, t in changed]))
            progress.advance(len(rows), len(changed))
    sql = ("SELECT c.rowid, f.path, c.text FROM file_chunks c JOIN files f ON f.rowid = c.file_rowid "
           "WHERE c.rowid > %s ORDER BY c.rowid LIMIT %s")
    for rows in _batches(conn, sql) if chunks else ():
        docs = [(rowid, chunk_documents(path, text)) for rowid, path, text in rows if wanted(text) or wanted(path)]
        if docs:
            conn.execute(f"UPDATE file_chunks c SET search = {chunk_search('d.path_doc', 'd.text_doc')} "
                         "FROM unnest(%s::bigint[], %s::text[], %s::text[]) AS d(rowid, path_doc, text_doc) "
                         "WHERE c.rowid = d.rowid",
                         ([r for r, _ in docs], [p for _, (p, _t) in docs], [t for _, (_p, t) in docs]))
        progress.advance(len(rows), len(docs))
    progress.finish()
    return progress.changed
