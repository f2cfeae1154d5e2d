"""The embedded default store: one SQLite file (or ``:memory:``) through apsw.

apsw rather than the stdlib ``sqlite3``: it bundles a current SQLite with FTS5 and can
load extensions (sqlite-vec) even where the interpreter's own sqlite3 cannot. Every
logical write is one ``BEGIN IMMEDIATE`` transaction, so a reader never sees half of it
and a crash leaves either all of it or none.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import apsw

from lossless.core import dag
from lossless.core._canonical import canonical_json, message_hash, message_id, summary_id
from lossless.core.errors import NotFoundError, StoreError, ValidationError
from lossless.core.types import ConversationInfo, GrepHit, Message, SourceRef, Summary
from lossless.core.validate import NewMessage
from lossless.store.backlog import QUEUE_SQL
from lossless.store.base import NewSummary, RevisedSummary, SearchSpec
from lossless.store.fts import index_text
from lossless.store.rows import (
    MESSAGE_COLUMNS,
    SOURCE_SUMMARY_COLUMNS,
    SUMMARY_COLUMNS,
    SUMMARY_READ_COLUMNS,
    message_from_row,
    prefix_upper,
)
from lossless.store.runner import sqlite_in
from lossless.store.sqlite.migrations import migrate
from lossless.store.sqlite.prepared import PreparedMessage
from lossless.store.sqlite.regexp import regexp

if TYPE_CHECKING:
    from lossless.store.sqlite.recall import SQLiteRecall

__all__ = ["SQLiteStore", "message_hash", "message_id", "summary_id"]

_MSG_COLS = MESSAGE_COLUMNS
_SUM_COLS = SUMMARY_COLUMNS
_SUM_READ = SUMMARY_READ_COLUMNS


_dumps = canonical_json  # the JSON spelling every stored value uses


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


class SQLiteStore:
    """SQLite implementation of :class:`~lossless.store.base.Store`."""

    dialect = "sqlite"

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

    def query(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one statement in this store's dialect (see :class:`~lossless.store.base.SQLAccess`):
        the public way for plug-ins (``files/``, ``memory/``) to reach their tables."""
        return self._query(sql, args)

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

    # -- settings -----------------------------------------------------------------------

    def get_settings(self) -> dict[str, Any]:
        return {k: json.loads(v) for k, v in self._query("SELECT key, value FROM settings ORDER BY key")}

    def set_settings(self, values: dict[str, Any]) -> None:
        with self.transaction() as conn:
            conn.executemany(
                "INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                [(k, _dumps(v)) for k, v in sorted(values.items())],
            )

    # -- conversations ------------------------------------------------------------------

    _CONV_SELECT = (
        "SELECT c.id, c.created_at, c.updated_at, c.metadata, c.last_seq, "
        "(SELECT count(*) FROM summaries s WHERE s.conversation_id = c.id) FROM conversations c"
    )

    @staticmethod
    def _conv_row(row: tuple[Any, ...]) -> ConversationInfo:
        cid, created, updated, meta, last_seq, n_sum = row
        return ConversationInfo(
            id=cid,
            created_at=datetime.fromisoformat(created),
            updated_at=datetime.fromisoformat(updated),
            message_count=last_seq,
            summary_count=n_sum,
            metadata=json.loads(meta),
        )

    def ensure_conversation(self, conversation_id: str, metadata: dict[str, Any] | None = None) -> ConversationInfo:
        now = datetime.now(UTC).isoformat()
        with self.transaction() as conn:
            conn.execute(
                "INSERT INTO conversations (id, created_at, updated_at, metadata) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (id) DO NOTHING",
                (conversation_id, now, now, _dumps(metadata or {})),
            )
            if metadata:
                row = conn.execute("SELECT metadata FROM conversations WHERE id = ?", (conversation_id,)).fetchone()
                merged = {**json.loads(row[0]), **metadata}
                conn.execute("UPDATE conversations SET metadata = ? WHERE id = ?", (_dumps(merged), conversation_id))
        info = self.get_conversation(conversation_id)
        assert info is not None
        return info

    def get_conversation(self, conversation_id: str) -> ConversationInfo | None:
        rows = self._query(f"{self._CONV_SELECT} WHERE c.id = ?", (conversation_id,))
        return self._conv_row(rows[0]) if rows else None

    def list_conversations(
        self, limit: int = 100, offset: int = 0, *, id_prefix: str | None = None
    ) -> list[ConversationInfo]:
        where: str = ""
        args: tuple[str, ...] = ()
        if id_prefix:  # a range, so the primary key's index does the work
            where = "WHERE c.id >= ? AND c.id < ? "
            args = (id_prefix, prefix_upper(id_prefix))
        rows = self._query(f"{self._CONV_SELECT} {where}ORDER BY c.updated_at DESC, c.id LIMIT ? OFFSET ?",
                           (*args, limit, offset))
        return [self._conv_row(r) for r in rows]

    # -- messages -----------------------------------------------------------------------

    _message = staticmethod(message_from_row)

    def append_messages(
        self, conversation_id: str, messages: Sequence[NewMessage], token_counts: Sequence[int]
    ) -> list[Message]:
        """Append in one transaction. A message whose external id is already stored in
        this conversation is not added again; the stored one is returned in its place."""
        if len(messages) != len(token_counts):
            raise ValidationError("messages and token_counts differ in length")
        # Each table gets one executemany, and the returned messages are built from the
        # values written (as a read would give them back) instead of read back: per
        # message, the Python around the inserts was costing more than SQLite. What does not
        # depend on the seq (JSON, hash, the full-text row) is made before the transaction:
        # its lock is the store's, which every read of this process waits for.
        prepared = [PreparedMessage.of(msg, tokens) for msg, tokens in zip(messages, token_counts, strict=True)]
        out: list[Message | str] = []  # a new message, or the id of one stored earlier
        rows: list[tuple[Any, ...]] = []
        fts: list[tuple[int, str]] = []
        now = datetime.now(UTC).isoformat()
        with self.transaction() as conn:
            # with the rowids SQLite would pick (max + 1 on), given explicitly so the FTS rows
            # can be written by executemany too; nothing else writes inside BEGIN IMMEDIATE
            row = conn.execute("SELECT last_seq, (SELECT coalesce(max(rowid), 0) FROM messages) FROM conversations "
                               "WHERE id = ?", (conversation_id,)).fetchone()
            if row is None:
                raise NotFoundError(f"no conversation {conversation_id!r}")
            seq, rowid = row
            batch: dict[str, Message] = {}  # external id -> the message of this batch that has it
            for msg, p in zip(messages, prepared, strict=True):
                if msg.external_id is not None:
                    earlier = batch.get(msg.external_id)
                    if earlier is not None:
                        out.append(earlier)
                        continue
                    hit = conn.execute(
                        "SELECT id FROM messages WHERE conversation_id = ? AND external_id = ?",
                        (conversation_id, msg.external_id),
                    ).fetchone()
                    if hit is not None:
                        out.append(hit[0])
                        continue
                seq += 1
                rowid += 1
                mid = message_id(conversation_id, seq)
                rows.append((rowid, mid, conversation_id, seq, *p.columns))
                fts.append((rowid, p.fts))
                new = p.message(mid, conversation_id, seq)
                if msg.external_id is not None:
                    batch[msg.external_id] = new
                out.append(new)
            conn.executemany(
                "INSERT INTO messages (rowid, id, conversation_id, seq, role, name, content, content_is_json, "
                "tool_calls, tool_call_id, created_at, created_ts, token_count, metadata, external_id, "
                "content_hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
            conn.executemany("INSERT INTO messages_fts (rowid, text) VALUES (?, ?)", fts)
            conn.execute(
                "UPDATE conversations SET last_seq = ?, updated_at = ? WHERE id = ?", (seq, now, conversation_id)
            )
            if rows:  # the worker owes this conversation compaction and vectors (store/backlog.py)
                queued = time.time()
                conn.execute(QUEUE_SQL, (conversation_id, seq, queued, queued))
            earlier_ids = [o for o in out if isinstance(o, str)]
            by_id = {}
            if earlier_ids:
                among, args = sqlite_in("id", earlier_ids)
                found = conn.execute(f"SELECT {_MSG_COLS} FROM messages WHERE {among}", args).fetchall()
                by_id = {r[1]: self._message(r) for r in found}
        return [o if isinstance(o, Message) else by_id[o] for o in out]

    def get_messages(self, conversation_id: str, first_seq: int = 1, last_seq: int | None = None) -> list[Message]:
        hi = last_seq if last_seq is not None else 2**62
        rows = self._query(f"SELECT {_MSG_COLS} FROM messages WHERE conversation_id = ? AND seq BETWEEN ? AND ? "
                           "ORDER BY seq", (conversation_id, first_seq, hi))
        return [self._message(r) for r in rows]

    def messages_at(self, conversation_id: str, seqs: Sequence[int]) -> dict[int, Message]:
        """The conversation's messages at these seqs that exist, by seq: one read."""
        if not seqs:
            return {}
        among, args = sqlite_in("seq", list(dict.fromkeys(seqs)))
        rows = self._query(f"SELECT {_MSG_COLS} FROM messages WHERE conversation_id = ? AND {among}",
                           (conversation_id, *args))
        return {m.seq: m for m in map(self._message, rows)}

    def get_message(self, message_id: str) -> Message:
        rows = self._query(f"SELECT {_MSG_COLS} FROM messages WHERE id = ?", (message_id,))
        if not rows:
            raise NotFoundError(f"no message with id {message_id!r}")
        return self._message(rows[0])

    def messages_by_id(self, message_ids: Sequence[str]) -> dict[str, Message]:
        """The messages with these ids that exist, by id: one read for a batch."""
        out: dict[str, Message] = {}
        unique = list(dict.fromkeys(message_ids))
        for i in range(0, len(unique), 500):
            batch = unique[i : i + 500]
            rows = self._query(f"SELECT {_MSG_COLS} FROM messages WHERE id IN ({','.join('?' * len(batch))})", batch)
            out.update((m.id, m) for m in map(self._message, rows))
        return out

    def last_seq(self, conversation_id: str) -> int:
        rows = self._query("SELECT last_seq FROM conversations WHERE id = ?", (conversation_id,))
        return rows[0][0] if rows else 0

    def role_counts(self, conversation_id: str, first_seq: int, last_seq: int) -> dict[str, int]:
        rows = self._query("SELECT role, count(*) FROM messages WHERE conversation_id = ? AND seq BETWEEN ? AND ? "
                           "GROUP BY role", (conversation_id, first_seq, last_seq))
        return {role: n for role, n in rows}

    def has_files(self) -> bool:
        """Whether the workspace file index holds anything (one indexed lookup)."""
        return bool(self._query("SELECT 1 FROM files LIMIT 1"))

    def first_message_ts(self, conversation_id: str) -> float | None:
        rows = self._query("SELECT min(created_ts) FROM messages WHERE conversation_id = ?", (conversation_id,))
        return rows[0][0] if rows else None

    def token_sum(self, conversation_id: str, first_seq: int, last_seq: int | None = None) -> int:
        hi = last_seq if last_seq is not None else 2**62
        rows = self._query("SELECT coalesce(sum(token_count), 0) FROM messages WHERE conversation_id = ? "
                           "AND seq BETWEEN ? AND ?", (conversation_id, first_seq, hi))
        return int(rows[0][0])

    # -- summaries ----------------------------------------------------------------------

    def _summary(self, row: tuple[Any, ...], with_sources: bool = True, cached: bool = False) -> Summary:
        """A Summary from a row of _SUM_READ. ``cached``: its sources may come from the
        cache of earlier reads (a summary's sources never change: its id hashes them)."""
        (sid, cid, depth, content, tokens, first, last, earliest, latest, desc, src_tokens, summarizer, level, created, meta,
         is_root) = row
        sources: tuple[SourceRef, ...] | None = () if not with_sources else self._sources.get(sid) if cached else None
        if sources is None:
            sources = tuple(
                SourceRef(kind=k, id=i)
                for k, i in self._query(
                    "SELECT source_kind, source_id FROM summary_sources WHERE summary_id = ? ORDER BY ord", (sid,)
                )
            )
            if cached:
                if len(self._sources) >= 4096:
                    self._sources.clear()
                self._sources[sid] = sources
        return Summary(
            id=sid, conversation_id=cid, depth=depth, content=content, token_count=tokens,
            first_seq=first, last_seq=last, earliest_at=datetime.fromisoformat(earliest),
            latest_at=datetime.fromisoformat(latest), descendant_count=desc,
            source_token_count=src_tokens, summarizer=summarizer, fallback_level=level,
            created_at=datetime.fromisoformat(created), sources=sources, metadata=json.loads(meta), root=bool(is_root),
        )

    def insert_summary(self, new: NewSummary) -> Summary | None:
        """Write one summary and link its sources, in one transaction.

        Returns None (writing nothing) if the state it was computed from has moved on:
        a leaf whose messages are no longer the oldest uncovered ones, or a condensed
        node whose sources already have a parent. That makes a re-run harmless and two
        compactions of one conversation unable to both land. The rules are
        :mod:`lossless.core.dag`'s; BEGIN IMMEDIATE makes the check and the write atomic.
        """
        kind = dag.source_kind(new.sources)
        cid = new.conversation_id
        ids = [s.id for s in new.sources]
        among, values = sqlite_in("id", ids)
        with self.transaction() as conn:
            span: dag.Span | None
            if kind == "message":
                # +conversation_id: not by that index, which made SQLite walk every message
                # of the conversation (a leaf's write grew with its length); by id instead
                rows = conn.execute(f"SELECT seq, created_at, created_ts, token_count FROM messages "
                                    f"WHERE +conversation_id = ? AND {among} ORDER BY seq", [cid, *values])
                span = dag.leaf_span(new.depth, len(ids), [dag.SourceMessage(*r) for r in rows])
                if not dag.extends_frontier(span, self._covered_seq(conn, cid)):
                    return None
            else:
                rows = conn.execute(f"SELECT {SOURCE_SUMMARY_COLUMNS} FROM summaries WHERE conversation_id = ? "
                                    f"AND {among} ORDER BY first_seq", [cid, *values])
                sources = [dag.SourceSummary(*r) for r in rows]
                if new.root:
                    last = max((int(r.last_seq) for r in sources), default=0)
                    covered = conn.execute("SELECT coalesce(sum(token_count), 0) FROM messages WHERE conversation_id = ? "
                                           "AND seq <= ?", (cid, last)).fetchone()[0]
                    span = dag.root_span(new.depth, ids, sources, int(covered))
                else:
                    span = dag.condensed_span(new.depth, ids, sources)
                if span is None:
                    return None
            sid = summary_id(cid, new.depth, new.sources, new.content, root=new.root)
            if new.root and conn.execute("SELECT 1 FROM summaries WHERE id = ?", (sid,)).fetchone():
                return self.get_summary(sid)  # this very root is written already
            conn.execute(
                f"INSERT INTO summaries ({_SUM_COLS}, earliest_ts, latest_ts) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    sid, cid, new.depth, new.content, new.token_count, span.first_seq, span.last_seq,
                    span.earliest_at, span.latest_at, span.descendant_count, span.source_token_count,
                    new.summarizer, new.fallback_level, datetime.now(UTC).isoformat(), _dumps(new.metadata),
                    span.earliest_ts, span.latest_ts,
                ),
            )
            rowid = conn.last_insert_rowid()
            if new.root:  # a root is its own parent: never on the frontier, never condensed
                conn.execute("UPDATE summaries SET parent_id = id WHERE rowid = ?", (rowid,))
            conn.executemany(
                "INSERT INTO summary_sources (summary_id, ord, source_kind, source_id) VALUES (?, ?, ?, ?)",
                [(sid, i, s.kind, s.id) for i, s in enumerate(new.sources)],
            )
            if kind == "summary" and not new.root:
                conn.executemany("UPDATE summaries SET parent_id = ? WHERE id = ?", [(sid, s.id) for s in new.sources])
            conn.execute("INSERT INTO summaries_fts (rowid, text) VALUES (?, ?)", (rowid, index_text(new.content)))
            conn.execute("UPDATE conversations SET updated_at = ? WHERE id = ?", (datetime.now(UTC).isoformat(), cid))
        return self.get_summary(sid)

    @staticmethod
    def _covered_seq(conn: Any, conversation_id: str) -> int:
        row = conn.execute(
            "SELECT coalesce(max(last_seq), 0) FROM summaries WHERE conversation_id = ? AND parent_id IS NULL",
            (conversation_id,),
        ).fetchone()
        return int(row[0])

    def covered_seq(self, conversation_id: str) -> int:
        with self._lock:
            return self._covered_seq(self._conn, conversation_id)

    def revise_summary(self, summary_id: str, expected: str, revision: RevisedSummary) -> Summary | None:
        """Replace a summary's text (``lossless compact --redo-fallbacks``) in one
        transaction: its earlier text goes to ``summary_revisions``, its id, span and
        place in the DAG stay. None (nothing written) if its text is no longer
        ``expected`` (someone else revised it first)."""
        with self.transaction() as conn:
            row = conn.execute("SELECT rowid, content, token_count, summarizer, fallback_level, metadata "
                               "FROM summaries WHERE id = ?", (summary_id,)).fetchone()
            if row is None:
                raise NotFoundError(f"no summary with id {summary_id!r}")
            rowid, content, tokens, summarizer, level, meta = row
            if content != expected:
                return None
            number = conn.execute("SELECT coalesce(max(revision), 0) + 1 FROM summary_revisions WHERE summary_id = ?",
                                  (summary_id,)).fetchone()[0]
            conn.execute("INSERT INTO summary_revisions (summary_id, revision, content, token_count, summarizer, "
                         "fallback_level, metadata, replaced_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                         (summary_id, number, content, tokens, summarizer, level, meta, datetime.now(UTC).isoformat()))
            conn.execute("UPDATE summaries SET content = ?, token_count = ?, summarizer = ?, fallback_level = ?, "
                         "metadata = ? WHERE id = ?",
                         (revision.content, revision.token_count, revision.summarizer, revision.fallback_level,
                          _dumps(revision.metadata), summary_id))
            conn.execute("DELETE FROM summaries_fts WHERE rowid = ?", (rowid,))  # contentless_delete=1: by rowid
            conn.execute("INSERT INTO summaries_fts (rowid, text) VALUES (?, ?)", (rowid, index_text(revision.content)))
        return self.get_summary(summary_id)

    def summary_revisions(self, summary_id: str) -> list[dict[str, Any]]:
        """The earlier texts of a summary, oldest first."""
        from lossless.store.revisions import summary_revisions

        return summary_revisions(self, summary_id)

    def get_summary(self, summary_id: str) -> Summary:
        rows = self._query(f"SELECT {_SUM_READ} FROM summaries WHERE id = ?", (summary_id,))
        if not rows:
            raise NotFoundError(f"no summary with id {summary_id!r}")
        return self._summary(rows[0])

    def parent_of(self, summary_id: str) -> str | None:
        rows = self._query("SELECT nullif(parent_id, id) FROM summaries WHERE id = ?", (summary_id,))  # a root: none
        if not rows:
            raise NotFoundError(f"no summary with id {summary_id!r}")
        return rows[0][0]  # type: ignore[no-any-return]

    def frontier(self, conversation_id: str) -> list[Summary]:
        rows = self._query(
            f"SELECT {_SUM_READ} FROM summaries WHERE conversation_id = ? AND parent_id IS NULL ORDER BY first_seq",
            (conversation_id,),
        )
        # compaction reads the frontier several times a pass, assembly on every turn
        return [self._summary(r, cached=True) for r in rows]

    def root(self, conversation_id: str) -> Summary | None:
        """The conversation's current whole-conversation root: the one reaching furthest
        (the newest of those), or None."""
        rows = self._query(
            f"SELECT {_SUM_READ} FROM summaries WHERE conversation_id = ? AND parent_id = id "
            "ORDER BY last_seq DESC, rowid DESC LIMIT 1",
            (conversation_id,),
        )
        return self._summary(rows[0], cached=True) if rows else None

    def leaf_for(self, conversation_id: str, seq: int) -> Summary | None:
        rows = self._query(
            f"SELECT {_SUM_READ} FROM summaries WHERE conversation_id = ? AND depth = 0 "
            "AND first_seq <= ? AND last_seq >= ? LIMIT 1",
            (conversation_id, seq, seq),
        )
        return self._summary(rows[0]) if rows else None

    def summaries(self, conversation_id: str) -> list[Summary]:
        rows = self._query(
            f"SELECT {_SUM_READ} FROM summaries WHERE conversation_id = ? ORDER BY depth DESC, first_seq",
            (conversation_id,),
        )
        return [self._summary(r) for r in rows]

    def summarizer_usage(self, conversation_id: str | None = None) -> dict[str, Any]:
        """Totals over the summaries' recorded spend (see ``Compactor._write``): provider
        calls, tokens sent to and received from a model, latency, and counts per
        summarizer and per fallback level."""
        where, args = ("WHERE conversation_id = ?", (conversation_id,)) if conversation_id else ("", ())
        # json_extract on the metadata JSON: accounting fields are written once and only
        # read here, so they do not earn columns of their own.
        rows = self._query(
            f"""SELECT summarizer, fallback_level, count(*),
                       total(json_extract(metadata, '$.calls')),
                       total(json_extract(metadata, '$.summarizer_input_tokens')),
                       total(json_extract(metadata, '$.summarizer_output_tokens')),
                       total(json_extract(metadata, '$.latency_ms'))
                FROM summaries {where} GROUP BY summarizer, fallback_level""",
            args,
        )
        usage: dict[str, Any] = {"summarizer_calls": 0, "summarizer_input_tokens": 0, "summarizer_output_tokens": 0,
                                 "summarizer_seconds": 0.0, "summaries_by_summarizer": {}, "summaries_by_fallback": {}}
        for name, level, n, calls, tin, tout, ms in rows:
            usage["summarizer_calls"] += int(calls)
            usage["summarizer_input_tokens"] += int(tin)
            usage["summarizer_output_tokens"] += int(tout)
            usage["summarizer_seconds"] = round(usage["summarizer_seconds"] + ms / 1000, 3)
            by_name = usage["summaries_by_summarizer"]
            by_name[name] = by_name.get(name, 0) + n
            label = ("normal", "aggressive", "extractive")[level] if 0 <= level <= 2 else str(level)
            usage["summaries_by_fallback"][label] = usage["summaries_by_fallback"].get(label, 0) + n
        return usage

    # -- compaction leases and log ------------------------------------------------------

    def acquire_lease(self, conversation_id: str, owner: str, reason: str, stale_after: float) -> bool:
        """Take the conversation's compaction lease, or take over one whose holder stopped
        heart-beating; False when a live holder has it."""
        now = time.time()
        with self.transaction() as conn:  # BEGIN IMMEDIATE: the check and the write are atomic
            row = list(conn.execute("SELECT owner, heartbeat_ts, stale_after FROM compaction_leases "
                                    "WHERE conversation_id = ?", (conversation_id,)))
            if row and row[0][0] != owner and row[0][1] + row[0][2] > now:
                return False
            conn.execute(
                "INSERT INTO compaction_leases (conversation_id, owner, reason, acquired_ts, heartbeat_ts, stale_after) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (conversation_id) DO UPDATE SET owner = excluded.owner, "
                "reason = excluded.reason, acquired_ts = excluded.acquired_ts, heartbeat_ts = excluded.heartbeat_ts, "
                "stale_after = excluded.stale_after",
                (conversation_id, owner, reason, now, now, stale_after),
            )
        return True

    def heartbeat_lease(self, conversation_id: str, owner: str) -> None:
        with self.transaction() as conn:
            conn.execute("UPDATE compaction_leases SET heartbeat_ts = ? WHERE conversation_id = ? AND owner = ?",
                         (time.time(), conversation_id, owner))

    def release_lease(self, conversation_id: str, owner: str) -> None:
        with self.transaction() as conn:
            conn.execute("DELETE FROM compaction_leases WHERE conversation_id = ? AND owner = ?",
                         (conversation_id, owner))

    def lease(self, conversation_id: str) -> dict[str, Any] | None:
        """The live lease on this conversation (who is compacting it, since when, why)."""
        rows = self._query("SELECT owner, reason, acquired_ts, heartbeat_ts, stale_after FROM compaction_leases "
                           "WHERE conversation_id = ?", (conversation_id,))
        if not rows or rows[0][3] + rows[0][4] <= time.time():
            return None
        owner, reason, acquired, beat, _ = rows[0]
        return {"owner": owner, "reason": reason, "acquired_ts": acquired, "heartbeat_ts": beat}

    def flushed_seq(self, conversation_id: str) -> int:
        rows = self._query("SELECT last_seq FROM memory_flush WHERE conversation_id = ?", (conversation_id,))
        return rows[0][0] if rows else 0

    def set_flushed_seq(self, conversation_id: str, last_seq: int) -> None:
        with self.transaction() as conn:
            conn.execute("INSERT INTO memory_flush (conversation_id, last_seq) VALUES (?, ?) ON CONFLICT "
                         "(conversation_id) DO UPDATE SET last_seq = max(last_seq, excluded.last_seq)",
                         (conversation_id, last_seq))

    def log_compaction(self, conversation_id: str, entry: dict[str, Any]) -> None:
        with self.transaction() as conn:
            conn.execute(
                "INSERT INTO compaction_log (conversation_id, reason, started_ts, finished_ts, tokens_before, "
                "tokens_after, leaves, condensed, skipped, owner) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (conversation_id, entry["reason"], entry["started_ts"], entry["finished_ts"], entry["tokens_before"],
                 entry["tokens_after"], entry["leaves"], entry["condensed"], entry.get("skipped"), entry["owner"]),
            )

    def compaction_log(self, conversation_id: str, limit: int = 100) -> list[dict[str, Any]]:
        """The newest compactions of this conversation first."""
        rows = self._query(
            "SELECT reason, started_ts, finished_ts, tokens_before, tokens_after, leaves, condensed, skipped, owner "
            "FROM compaction_log WHERE conversation_id = ? ORDER BY started_ts DESC, rowid DESC LIMIT ?",
            (conversation_id, limit),
        )
        keys = ("reason", "started_ts", "finished_ts", "tokens_before", "tokens_after", "leaves", "condensed",
                "skipped", "owner")
        return [dict(zip(keys, r, strict=True)) for r in rows]

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
