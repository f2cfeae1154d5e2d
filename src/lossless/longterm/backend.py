"""The seam between long-term memories and the database they live in.

:class:`~lossless.longterm.memories.Memories` writes its SQL once, in SQLite's dialect with
``?`` placeholders, and runs it through a :class:`MemoryBackend`: SQLite runs it as it
is; PostgreSQL (:mod:`lossless.longterm.postgres`) rewrites the placeholders. What no
shared SQL can express is the backend's own: keeping the keyword index (FTS5 tables or
a ``tsvector`` column), keyword candidates, the two-argument maximum (``max`` /
``greatest``), the constraint error type, and reclaiming forgotten text's space.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any, Protocol

import apsw

from lossless.core.errors import StoreError
from lossless.store.fts import index_text
from lossless.store.runner import SQLiteRunner

if TYPE_CHECKING:
    from lossless.store.base import RecallIndex
    from lossless.store.sqlite.store import SQLiteStore

__all__ = ["MemoryBackend", "SQLiteMemoryBackend", "memory_backend"]


class MemoryBackend(Protocol):
    greatest: str  # the two-argument maximum: max(a, b) on SQLite, greatest(a, b) on PostgreSQL
    integrity_errors: tuple[type[BaseException], ...]  # what a unique-index violation raises

    def query(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one ``?``-placeholder statement and return its rows."""
        ...

    def text_range(self, column: str) -> str:
        """``column`` between two ``?`` bounds, compared byte-wise (a prefix range)."""
        ...

    def transaction(self) -> AbstractContextManager[Any]:
        """One write transaction; yields a connection whose ``execute(sql, args)`` takes
        ``?`` placeholders and returns a cursor (``fetchone``, ``fetchall``, iteration)."""
        ...

    def forgetting(self, vacuum: bool) -> AbstractContextManager[Any]:
        """The transaction that deletes memories (with ``vacuum``: freed space zeroed)."""
        ...

    def index_text(self, conn: Any, rowid: int, text: str) -> None: ...
    def unindex(self, conn: Any, rowids: Sequence[int]) -> None: ...
    def optimize(self, conn: Any) -> None:
        """After a delete with ``vacuum``: drop deleted entries from the keyword index."""
        ...

    def vacuum(self) -> None: ...
    def keyword_candidates(self, query: str, where: str, args: Sequence[Any], limit: int) -> dict[int, float]: ...
    def cache(self) -> RecallIndex:
        """The store's embedding cache (only its cache methods are used)."""
        ...


def memory_backend(store: Any) -> MemoryBackend:
    """The backend for ``store``'s dialect."""
    if getattr(store, "dialect", "sqlite") == "postgresql":
        from lossless.longterm.postgres import PostgresMemoryBackend

        return PostgresMemoryBackend(store)
    return SQLiteMemoryBackend(store)


class SQLiteMemoryBackend(SQLiteRunner):
    """Memories in the SQLite file: an FTS5 unicode61 keyword index (CJK runs as bigrams). Queries
    and transactions are the :class:`SQLiteRunner`'s."""

    store: SQLiteStore  # the runner's store, as this backend uses it

    greatest = "max"
    integrity_errors: tuple[type[BaseException], ...] = (apsw.ConstraintError,)

    @contextmanager
    def forgetting(self, vacuum: bool) -> Iterator[Any]:
        with self.store.transaction() as conn:
            secure = conn.execute("PRAGMA secure_delete").fetchone()[0]
            if vacuum:
                conn.execute("PRAGMA secure_delete = ON")
            try:
                yield conn
            finally:
                conn.execute(f"PRAGMA secure_delete = {int(secure)}")

    def index_text(self, conn: Any, rowid: int, text: str) -> None:
        conn.execute("INSERT INTO memories_fts (rowid, text) VALUES (?, ?)", (rowid, index_text(text)))

    def unindex(self, conn: Any, rowids: Sequence[int]) -> None:
        marks = ",".join("?" * len(rowids))
        for table in ("memories_fts", "memory_vectors"):
            key = "memory_rowid" if table == "memory_vectors" else "rowid"
            conn.execute(f"DELETE FROM {table} WHERE {key} IN ({marks})", list(rowids))

    def optimize(self, conn: Any) -> None:
        # merge the FTS segments so the deleted entries leave the index b-trees too
        conn.execute("INSERT INTO memories_fts (memories_fts) VALUES ('optimize')")

    def vacuum(self) -> None:
        try:
            self.store.query("VACUUM")
            if self.store.path != ":memory:":
                self.store.query("PRAGMA wal_checkpoint(TRUNCATE)")
        except apsw.Error as exc:
            raise StoreError(f"memories were forgotten, but VACUUM failed: {exc}") from exc

    def keyword_candidates(self, query: str, where: str, args: Sequence[Any], limit: int) -> dict[int, float]:
        from lossless.longterm.relevance import keyword_candidates

        return keyword_candidates(self.store, query, where, args, limit)

    def cache(self) -> RecallIndex:
        return self.store.recall_index("numpy")
