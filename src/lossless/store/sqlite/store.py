"""The embedded default store: one SQLite file (or ``:memory:``) through apsw.

apsw rather than the stdlib ``sqlite3``: it bundles a current SQLite with FTS5 and can
load extensions (sqlite-vec) even where the interpreter's own sqlite3 cannot. Every
logical write is one ``BEGIN IMMEDIATE`` transaction, so a reader never sees half of it
and a crash leaves either all of it or none.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import apsw

from lossless.core._canonical import message_hash, message_id, summary_id
from lossless.core.errors import StoreError, ValidationError
from lossless.core.priority import pause_point
from lossless.core.types import GrepHit, SourceRef, Summary
from lossless.store.base import SearchSpec
from lossless.store.fts import index_text
from lossless.store.rows import SUMMARY_READ_COLUMNS, summary_from_row
from lossless.store.runner import SQLITE
from lossless.store.sql import (
    NEW_MESSAGE_COLUMNS,
    NEW_SUMMARY_COLUMNS,
    REVISED_SUMMARY_COLUMNS,
    SQLStore,
)
from lossless.store.sqlite.migrations import migrate
from lossless.store.sqlite.regexp import regexp

if TYPE_CHECKING:
    from lossless.store.sqlite.recall import SQLiteRecall

__all__ = ["SQLiteStore", "message_hash", "message_id", "summary_id"]



def _unix_now(*_: Any) -> float:
    return time.time()


# the statements of the write hooks below, made once
_INSERT_MESSAGE = f"INSERT INTO messages (rowid, {NEW_MESSAGE_COLUMNS}) VALUES ({', '.join('?' * 16)})"
_INSERT_SUMMARY = f"INSERT INTO summaries ({NEW_SUMMARY_COLUMNS}) VALUES ({', '.join('?' * 17)})"


# SQLite failures that are about the disk or the file, not the SQL: said in words a caller
# can act on, as StoreError, at this boundary (the CLI prints them as ``error: …``).
_STORE_FAILURES: tuple[tuple[type[Exception], str], ...] = (
    (apsw.FullError, "the disk is full (or the database hit its size limit); free some space and retry"),
    (apsw.ReadOnlyError, "the database is read-only (the file, its directory or its file system)"),
    (apsw.CantOpenError, "cannot open the database or its -wal/-shm files (is the file or its directory "
                         "read-only, or gone?)"),
    (apsw.IOError, "a disk I/O error"),
    (apsw.CorruptError, "the database file is corrupt"),
    (apsw.BusyError, "the database is locked: another connection held the write lock longer than the "
                     "busy timeout"),
    (apsw.LockedError, "the database is locked by another statement of this connection"),
)


def _store_error(exc: BaseException, path: str, outcome: str = "") -> StoreError | None:
    """The StoreError to raise for an apsw failure of the disk or file, else None."""
    for kind, what in _STORE_FAILURES:
        if isinstance(exc, kind):
            return StoreError(f"SQLite database {path!r}: {what}{outcome} ({exc})", reason=f"{what}{outcome}",
                              transient=isinstance(exc, apsw.BusyError | apsw.LockedError))
    return None


READERS = 2  # read connections for long searches: at most this many run at once


def _create_private(path: Path) -> None:
    """Create a new database file readable and writable by its owner only (0600): SQLite
    would make it 0644 under the usual umask, and gives its -wal and -shm files the
    database file's mode. An existing file keeps the mode its owner gave it."""
    with contextlib.suppress(OSError):  # it exists (or cannot be made: apsw says why)
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))


class SQLiteStore(SQLStore):
    """SQLite implementation of :class:`~lossless.store.base.Store`.

    The domain methods (conversations, messages, the summary DAG, leases, settings) are
    :class:`~lossless.store.sql.SQLStore`'s, written once for both stores. What is
    SQLite's own is here: the apsw connection and its lock, ``BEGIN IMMEDIATE``
    transactions and the driver-error table, the read connections for long searches,
    sqlite-vec, the FTS5 tables beside ``messages`` and ``summaries`` (same rowids), the
    cache of summaries' sources, search, ``verify`` and the recall index.
    """

    dialect = "sqlite"
    _sql = SQLITE

    def __init__(self, path: str | Path = ":memory:", *, busy_timeout_ms: int = 10_000) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            # a mistyped path is an error, not a new folder with an empty store in it (the
            # default location is created by lossless.open, which owns it)
            folder = Path(self.path).expanduser().parent
            if not folder.is_dir():
                raise StoreError(f"no directory {folder} for the SQLite database {Path(self.path).name!r}: "
                                 "create it first, or check the path", reason="the database's directory does not exist")
            _create_private(Path(self.path).expanduser())
        try:
            self._conn = apsw.Connection(str(Path(self.path).expanduser()) if self.path != ":memory:" else self.path)
        except apsw.Error as exc:
            raise StoreError(f"cannot open SQLite database {self.path!r}: {exc}") from exc
        self._lock = threading.RLock()
        self._readers: queue.Queue[Any] = queue.Queue()  # idle read connections (see reader())
        self._reader_slots = threading.BoundedSemaphore(READERS)
        self.common_terms: set[tuple[str, str]] = set()  # (index, term): see grep._bounded
        self._depth = 0
        self._vec_loaded: bool | None = None
        self._sources: dict[str, tuple[SourceRef, ...]] = {}  # summary id -> its sources (see _summary)
        conn = self._conn
        conn.setbusytimeout(busy_timeout_ms)
        conn.create_scalar_function("regexp", regexp, 2, deterministic=True)
        # the dialect's clock (SQLITE.now): Python's, as the leases' times always were
        conn.create_scalar_function("unix_now", _unix_now, 0, deterministic=False)
        try:
            if self.path != ":memory:":
                conn.execute("PRAGMA journal_mode=WAL")
            # NORMAL in WAL mode: a committed transaction survives a process crash (SIGKILL);
            # only an OS crash / power loss can drop the last commits.
            conn.execute("PRAGMA synchronous=NORMAL")
            # what is freed is overwritten with zeros, not left in the file: an erased text
            # must not be readable from it (store/scrub.py); measured no slower to ingest
            conn.execute("PRAGMA secure_delete=ON")
            conn.execute("PRAGMA foreign_keys=ON")
            migrate(conn)
        except apsw.NotADBError as exc:
            conn.close()
            raise StoreError(f"{self.path!r} is not a SQLite database") from exc
        except apsw.Error as exc:
            failure = _store_error(exc, self.path)
            if failure is None:
                raise
            conn.close()
            raise failure from exc

    # -- plumbing ---------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            self._conn.close()
        while not self._readers.empty():
            with contextlib.suppress(Exception):
                self._readers.get_nowait().close()

    @contextmanager
    def reader(self, wait: float = 5.0) -> Iterator[Callable[[str, Sequence[Any]], list[tuple[Any, ...]]]]:
        """A query function on a read connection of its own, for a long read (a regex
        scan): it holds neither the store's lock nor its connection, so other requests go
        on meanwhile (WAL: readers do not block the writer). At most ``READERS`` at once;
        a caller that waits ``wait`` seconds for one gets a transient StoreError."""
        if self.path == ":memory:":  # one database, one connection
            yield self._query
            return
        if not self._reader_slots.acquire(timeout=wait):
            raise StoreError(f"SQLite database {self.path!r}: {READERS} long searches are running already",
                             reason=f"{READERS} long searches are running already", transient=True)
        try:
            try:
                conn = self._readers.get_nowait()
            except queue.Empty:
                conn = self._open_reader()

            def run(sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
                try:
                    return list(conn.execute(sql, tuple(args)))
                except apsw.Error as exc:
                    failure = _store_error(exc, self.path)
                    if failure is None:
                        raise
                    raise failure from exc

            try:
                yield run
            finally:
                self._readers.put(conn)
        finally:
            self._reader_slots.release()

    def _open_reader(self) -> Any:
        try:
            conn = apsw.Connection(str(Path(self.path).expanduser()), flags=apsw.SQLITE_OPEN_READONLY)
        except apsw.Error as exc:
            raise StoreError(f"cannot open SQLite database {self.path!r} to read: {exc}",
                             reason="the database cannot be opened to read") from exc
        conn.setbusytimeout(10_000)
        conn.create_scalar_function("regexp", regexp, 2, deterministic=True)
        return conn

    @property
    def connection(self) -> Any:
        return self._conn

    @contextmanager
    def transaction(self, *, wait: bool = True) -> Iterator[Any]:
        """One write transaction (re-entrant: nested uses join the outer one). ``wait=False``
        does not wait for another connection's write lock: a transient StoreError at once
        while it is held (for a write that may be skipped, such as a key's last use)."""
        if not self._depth:
            pause_point()  # the worker steps aside for a caller's query here, holding no lock
        with self._lock:
            if self._depth:
                self._depth += 1
                try:
                    yield self._conn
                finally:
                    self._depth -= 1
                return
            try:
                self._begin(wait)
            except apsw.Error as exc:
                failure = _store_error(exc, self.path, "; nothing was written")
                if failure is None:
                    raise
                raise failure from exc
            self._depth = 1
            try:
                yield self._conn
                # inside the try: a COMMIT that fails (disk full) rolls back like any failure,
                # and the next transaction starts clean
                self._conn.execute("COMMIT")
            except BaseException as exc:
                self._depth = 0
                if self._conn.in_transaction:
                    # SQLite may have rolled back already; the first error says more
                    with contextlib.suppress(apsw.Error):
                        self._conn.execute("ROLLBACK")
                failure = _store_error(exc, self.path, "; the write was rolled back, nothing of it is stored")
                if failure is None:
                    raise
                raise failure from exc
            self._depth = 0

    def _begin(self, wait: bool) -> None:
        if wait:
            self._conn.execute("BEGIN IMMEDIATE")
            return
        (busy_ms,) = next(self._conn.execute("PRAGMA busy_timeout"))
        self._conn.setbusytimeout(0)
        try:
            self._conn.execute("BEGIN IMMEDIATE")
        finally:
            self._conn.setbusytimeout(int(busy_ms))

    def _query(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        if not self._depth:
            pause_point()  # the worker steps aside for a caller's query here, holding no lock
        with self._lock:
            try:
                return list(self._conn.execute(sql, tuple(args)))
            except apsw.Error as exc:
                failure = _store_error(exc, self.path)
                if failure is None:
                    raise
                raise failure from exc
            except UnicodeEncodeError as exc:  # an id or a filter with a lone surrogate
                raise ValidationError(f"not valid UTF-8 text: {exc.object[:80]!r} (a lone surrogate at "
                                      f"position {exc.start})") from None

    def recall_index(self, backend: str = "auto") -> SQLiteRecall:
        """Retrieval units, the embedding cache and vector indexes in this file."""
        from lossless.store.sqlite.recall import SQLiteRecall

        return SQLiteRecall(self, backend)

    def load_sqlite_vec(self) -> bool:
        """Load the sqlite-vec extension into this connection; False if it cannot load."""
        if self._vec_loaded is not None:
            return self._vec_loaded
        try:
            import sqlite_vec

            with self._lock:
                self._conn.enable_load_extension(True)
                self._conn.load_extension(sqlite_vec.loadable_path())
                self._conn.enable_load_extension(False)
            self._vec_loaded = True
        except Exception:  # no wheel for this platform, or extensions disabled
            self._vec_loaded = False
        return self._vec_loaded

    # -- what the shared store (store/sql.py) asks of SQLite -----------------------------

    _run = _query  # the shared SQL is SQLite's own: run as it is, nothing rewritten

    def _write(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self.transaction() as conn:  # BEGIN IMMEDIATE, and the transaction's error messages
            return list(conn.execute(sql, args))

    _writing = transaction  # its connection takes ? as it is

    _search_text = staticmethod(index_text)  # the unicode61 index's text (with CJK bigrams: store/fts.py)
    _SUMMARY_SELECT = f"SELECT {SUMMARY_READ_COLUMNS} FROM summaries s"
    _NEWEST_ROOT = "s.last_seq DESC, s.rowid DESC"

    def _start_append(self, conn: Any, conversation_id: str, count: int | None,
                      now: str) -> tuple[int, int, bool] | None:
        # with the rowids SQLite would pick (max + 1 on), given explicitly so the FTS rows
        # can be written by executemany too; nothing else writes inside BEGIN IMMEDIATE
        row = conn.execute("SELECT last_seq, (SELECT coalesce(max(rowid), 0) FROM messages) FROM conversations "
                           "WHERE id = ?", (conversation_id,)).fetchone()
        return None if row is None else (row[0], row[1], False)

    def _insert_messages(self, conn: Any, rows: list[tuple[Any, ...]], documents: list[tuple[int, str]]) -> None:
        conn.executemany(_INSERT_MESSAGE, rows)
        conn.executemany("INSERT INTO messages_fts (rowid, text) VALUES (?, ?)", documents)

    def _insert_summary(self, conn: Any, values: tuple[Any, ...], text: str) -> None:
        conn.execute(_INSERT_SUMMARY, values)
        conn.execute("INSERT INTO summaries_fts (rowid, text) VALUES (?, ?)", (conn.last_insert_rowid(), index_text(text)))

    def _revise_summary(self, conn: Any, rowid: int, values: tuple[Any, ...], text: str) -> None:
        conn.execute(f"UPDATE summaries SET {REVISED_SUMMARY_COLUMNS} WHERE rowid = ?", (*values, rowid))
        conn.execute("DELETE FROM summaries_fts WHERE rowid = ?", (rowid,))  # contentless_delete=1: by rowid
        conn.execute("INSERT INTO summaries_fts (rowid, text) VALUES (?, ?)", (rowid, index_text(text)))

    def _summaries(self, rows: list[tuple[Any, ...]], cached: bool = False) -> list[Summary]:
        return [summary_from_row(r, self._sources_of(r[0], cached)) for r in rows]

    def _sources_of(self, summary_id: str, cached: bool) -> tuple[SourceRef, ...]:
        """A summary's sources, read (a second query: see PostgresStore's arrays for the
        one-query way), or from the cache of earlier reads when ``cached``."""
        sources = self._sources.get(summary_id) if cached else None
        if sources is None:
            sources = tuple(SourceRef(kind=k, id=i) for k, i in self._query(
                "SELECT source_kind, source_id FROM summary_sources WHERE summary_id = ? ORDER BY ord", (summary_id,)))
            if cached:
                if len(self._sources) >= 4096:
                    self._sources.clear()
                self._sources[summary_id] = sources
        return sources

    # -- search -------------------------------------------------------------------------

    def search(self, spec: SearchSpec) -> list[GrepHit]:
        from lossless.store.sqlite.grep import run_search

        return run_search(self, spec)

    # -- integrity ----------------------------------------------------------------------

    def verify(self, conversation_id: str | None = None, *, integrity: bool = True) -> list[str]:
        """Re-check every invariant the design states (:func:`lossless.core.dag.verify`)
        and, with ``integrity``, SQLite's own check of the file; empty when all hold."""
        from lossless.store.integrity import INTEGRITY, sqlite_integrity, verify_conversations

        problems = verify_conversations(self._query, conversation_id)
        if integrity:
            problems += [f"{INTEGRITY}{line}" for line in sqlite_integrity(self._query)]
        return problems
