"""After an erase: none of the erased text left in the database's files.

:func:`lossless.store.erase.erase` rewrites the rows that held the text. What they held
can outlive them in the files:

* SQLite frees space without clearing it: a deleted or rewritten row stays in the free
  space of its page, a freed page on the free list;
* an FTS5 index (contentless, as the keyword indexes are) only marks a deleted row: its
  terms stay in the index segments until they are merged;
* the WAL holds the earlier versions of every page written since the last checkpoint;
* PostgreSQL keeps an UPDATE's earlier row version (and its TOAST and index entries)
  as a dead tuple until VACUUM.

So, on SQLite, every connection runs with ``secure_delete`` (what it frees is overwritten
with zeros: :class:`~lossless.store.sqlite.store.SQLiteStore`), and after an erase
:func:`scrub` merges the keyword indexes it touched (``optimize``: the segments are
rewritten without the deleted rows' terms, their old pages freed and so zeroed),
overwrites the pages already on the free list, and checkpoints the WAL and truncates it.
What a file written before ``secure_delete`` was on left in the free space of pages
still in use is only cleared by ``VACUUM`` (``full=True``: it rewrites the whole file).

On PostgreSQL, :func:`scrub` VACUUMs the tables an erase touches: the dead versions are
removed, so no query, replica catch-up or ``pageinspect`` sees a row holding the text.
Their bytes can stay in the free space of a page until it is reused, and the server's
WAL and any backup keep them until recycled; ``full=True`` runs ``VACUUM FULL``, which
rewrites those tables and their indexes into new files (an exclusive lock on each while
it runs: every read and write of them waits).
"""

from __future__ import annotations

import logging
from typing import Any

from lossless.store.runner import sql_runner

__all__ = ["ERASE_TABLES", "scrub"]

log = logging.getLogger("lossless")

# the tables an erase rewrites or deletes from (with the vector tables, found by name)
ERASE_TABLES = ("messages", "summaries", "summary_revisions", "recall_units", "embedding_cache", "memories",
                "memory_vectors", "forgotten_memories")
# the keyword indexes of those tables (SQLite), merged after an erase
_FTS = ("messages_fts", "summaries_fts", "memories_fts")
_CHUNK = 64 * 1024 * 1024  # bytes of zeros written per row when overwriting the free list


def scrub(store: Any, *, full: bool = False) -> None:
    """Leave none of the text an erase just removed in the store's files (see the
    module docstring); ``full``: rewrite the files too (SQLite ``VACUUM``, PostgreSQL
    ``VACUUM FULL`` of the erased tables)."""
    runner = sql_runner(store)
    if runner.dialect == "postgresql":
        vectors = [r[0] for r in runner.query("SELECT name FROM vector_indexes")]
        store.query(f"VACUUM {'FULL ' if full else ''}{', '.join([*ERASE_TABLES, *vectors])}")
        return
    with store.transaction() as conn:
        for table in _FTS:
            # merge every segment into one: the deleted rows' terms are dropped on the way
            conn.execute(f"INSERT INTO {table} ({table}) VALUES ('optimize')")
        _overwrite_free_pages(conn)
    if full:
        store.query("VACUUM")
    if store.path != ":memory:":
        busy, _, _ = store.query("PRAGMA wal_checkpoint(TRUNCATE)")[0]
        if busy:  # a reader kept an earlier snapshot: the WAL keeps earlier pages until the next checkpoint
            log.warning("lossless: erased, but another connection was reading: the -wal file keeps earlier page "
                        "versions until the next checkpoint (the next erase or `lossless verify` tries again)")


def _overwrite_free_pages(conn: Any) -> None:
    """Overwrite every page on the free list with zeros. Pages freed with secure_delete on
    are zeroed already; these may have been freed before it was. A row of zeros takes
    them (SQLite reuses free pages first), and deleting it frees them again, zeroed."""
    free = int(conn.execute("PRAGMA freelist_count").fetchone()[0])
    if not free:
        return
    page = int(conn.execute("PRAGMA page_size").fetchone()[0])
    left = free * (page - 4)  # an overflow page holds page_size - 4 bytes of a row
    part = 0
    while left > 0:
        size = min(left, _CHUNK)
        # settings is a plain table every store has; the row lives and dies inside this
        # transaction, so no reader ever sees it
        conn.execute("INSERT INTO settings (key, value) VALUES (?, zeroblob(?))", (_scratch(part), size))
        left -= size
        part += 1
    conn.execute("DELETE FROM settings WHERE key IN (" + ",".join("?" * part) + ")",
                 [_scratch(i) for i in range(part)])


def _scratch(part: int) -> str:
    return f"lossless.scrub.{part}"
