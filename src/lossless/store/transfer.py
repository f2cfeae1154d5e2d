"""Copy a SQLite store into PostgreSQL (``lossless migrate``), then prove the copy.

Everything is copied as stored: conversations, messages (same ids, seqs, content hashes,
ISO times and rowids), summaries and their sources (same ids), settings, the memory-flush
marks, the compaction log, the embedding cache, recall units and progress, the HTTP
server's API keys (hashes and salts: every key keeps working), and the tables of each
plug-in the caller passes (:class:`~lossless.store.plugins.TableOwner`: ``lossless
migrate`` passes the long-term memories and their vectors, :mod:`lossless.longterm.tables`,
and the workspace file index, files, chunks with the same rowids and their vectors, one
pgvector table per embedder, :mod:`lossless.files.tables`); pgvector tables are filled
from the cached vectors of the units the SQLite index held.
The target must be empty (a new database, or a new schema with ``?schema=…``): the copy
is one transaction, verified before it commits, so a failed run (a copy that does not
verify included) leaves it empty and can simply be run again. Not
copied: compaction leases (transient) and the file index's change counter (a fresh one
serves as well).

Verification reads every copied table back from both databases and compares the row
count and an order-independent digest (the sum of the rows' SHA-256s) per table (the
chunk vectors as SQLite's rows), then re-hashes every message on PostgreSQL and
re-checks the DAG (``verify()``). It reads the copy inside the copy's own transaction: a
difference rolls the whole copy back (``report.rolled_back``) rather than leave in the
target a store that does not verify, which a second run would refuse as not empty.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lossless.core.errors import StoreError
from lossless.core.render import content_text
from lossless.store.plugins import TableOwner
from lossless.store.postgres.grep import search_document
from lossless.store.postgres.store import PostgresStore
from lossless.store.sqlite.store import SQLiteStore

__all__ = ["TABLES", "TransferReport", "check_source", "copied_tables", "copy_sqlite_to_postgres", "verify_copy"]

# table -> the columns copied (and compared) as they are, in SQLite's names: the store's
# own tables; a plug-in's are its TableOwner's
TABLES: dict[str, tuple[str, ...]] = {
    "conversations": ("id", "created_at", "updated_at", "metadata", "last_seq"),
    "messages": ("rowid", "id", "conversation_id", "seq", "role", "name", "content", "content_is_json", "tool_calls",
                 "tool_call_id", "created_at", "created_ts", "token_count", "metadata", "external_id",
                 "content_hash"),
    "summaries": ("rowid", "id", "conversation_id", "depth", "content", "token_count", "first_seq", "last_seq",
                  "earliest_at", "latest_at", "earliest_ts", "latest_ts", "descendant_count", "source_token_count",
                  "summarizer", "fallback_level", "created_at", "metadata", "parent_id"),
    "summary_sources": ("summary_id", "ord", "source_kind", "source_id"),
    "settings": ("key", "value"),
    "embedding_cache": ("provider", "model", "text_sha256", "dim", "vector", "created_at"),
    "recall_units": ("rowid", "conversation_id", "kind", "first_seq", "last_seq", "part", "role", "message_ids",
                     "text", "text_sha256", "start_ts", "end_ts"),
    "recall_progress": ("conversation_id", "message_seq", "window_seq"),
    "vector_progress": ("index_name", "conversation_id", "unit_rowid"),
    "memory_flush": ("conversation_id", "last_seq"),
    "compaction_log": ("rowid", "conversation_id", "reason", "started_ts", "finished_ts", "tokens_before",
                       "tokens_after", "leaves", "condensed", "skipped", "owner"),
    # the work still owed comes along (not who was on it: a claim belongs to a process)
    "backlog": ("conversation_id", "queued_seq", "queued_ts", "due_ts", "attempts", "last_error", "force_reason"),
    "summary_revisions": ("summary_id", "revision", "content", "token_count", "summarizer", "fallback_level",
                          "metadata", "replaced_at"),
    "tombstones": ("id", "conversation_id", "message_id", "seq", "reason", "erased_by", "erased_at", "content_hash"),
    "compaction_timers": ("conversation_id", "due_ts"),
    "proxy_requests": ("conversation_id", "idempotency_key", "request_sha256", "request_seq", "reply_id",
                       "created_at"),
    "api_keys": ("id", "tenant", "name", "salt", "hash", "prefix", "created_at", "revoked_at", "last_used_at"),
}
_IDENTITY = ("messages", "summaries", "recall_units", "compaction_log")
_BATCH = 2000
# the units a SQLite vector index holds for one conversation, with their cached vectors
_INDEXED_UNITS = ("SELECT u.rowid, u.kind, c.vector FROM recall_units u JOIN embedding_cache c ON c.provider = ? "
                  "AND c.model = ? AND c.text_sha256 = u.text_sha256 WHERE u.conversation_id = ? AND u.rowid <= ? "
                  "ORDER BY u.rowid")


@dataclass
class TransferReport:
    source: str
    target: str
    counts: dict[str, int] = field(default_factory=dict)  # rows copied per table
    vectors: int = 0  # pgvector rows built from the embedding cache
    problems: list[str] = field(default_factory=list)  # verification failures; empty: identical
    seconds: float = 0.0
    rolled_back: bool = False  # the copy did not verify, so none of it was kept

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "target": self.target, "counts": dict(self.counts), "vectors": self.vectors,
                "problems": list(self.problems), "ok": self.ok, "rolled_back": self.rolled_back,
                "seconds": round(self.seconds, 2)}


class _CopyDiffers(Exception):
    """Raised inside the copy's transaction when the copy does not verify: rolls it back."""


def _stream(src: SQLiteStore, sql: str, args: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Rows of a SQLite query, streamed from a cursor rather than read into a list."""
    yield from src.connection.execute(sql, args)


def _rows(src: SQLiteStore, table: str, columns: tuple[str, ...]) -> Iterator[tuple[Any, ...]]:
    return _stream(src, f"SELECT {', '.join(columns)} FROM {table}")


def _message_document(row: tuple[Any, ...]) -> str:
    """The text PostgreSQL indexes for a message row: what the store's own write path indexes."""
    name, content, is_json, calls = row[5], row[6], row[7], row[8]
    text = content_text(json.loads(content) if is_json else content, json.loads(calls) if calls else None)
    return search_document(f"{name}: {text}" if name else text)


# written to PostgreSQL with a search document computed from the row
_DOCUMENTS: dict[str, Callable[[tuple[Any, ...]], str]] = {
    "messages": _message_document,
    "summaries": lambda row: search_document(row[4]),
}


def copied_tables(owners: Sequence[TableOwner]) -> dict[str, tuple[str, ...]]:
    """Every table a copy with these plug-ins' tables copies, in order, with its columns."""
    return {**TABLES, **{table: cols for owner in owners for table, cols in owner.tables.items()}}


def check_source(path: str) -> None:
    """Refuse, before anything is opened for writing, a ``source`` that is not a lossless
    SQLite store: opening one as a store would create lossless's tables in another
    application's database (and copy nothing), and a file that is not SQLite at all is
    named as such. Read-only."""
    import apsw

    try:
        conn = apsw.Connection(path, flags=apsw.SQLITE_OPEN_READONLY)
    except apsw.Error as exc:
        raise StoreError(f"cannot open the SQLite database {path}: {exc}") from None
    try:
        found = list(conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'"))
    except apsw.NotADBError:
        raise StoreError(f"{path} is not a SQLite database: nothing copied") from None
    except apsw.Error as exc:
        raise StoreError(f"cannot read the SQLite database {path}: {exc}") from None
    finally:
        conn.close()
    if not found:
        raise StoreError(f"{path} is not a lossless store (a SQLite database without lossless's tables): "
                         "nothing copied, and nothing written to it")


def _target_rows(dst: PostgresStore, owners: Sequence[TableOwner]) -> dict[str, int]:
    # the store's tables that any use writes, and each plug-in's first
    tables = ("conversations", "settings", "embedding_cache", "api_keys", *(next(iter(o.tables)) for o in owners))
    row = dst._query("SELECT " + ", ".join(f"(SELECT count(*) FROM {t})" for t in tables))[0]
    return {t: int(n) for t, n in zip(tables, row, strict=True) if n}


def copy_sqlite_to_postgres(source: str, target: str, *, owners: Sequence[TableOwner], schema: str | None = None,
                            progress: Callable[[str, int], None] | None = None) -> TransferReport:
    """Copy the SQLite store at ``source`` into the empty PostgreSQL store at ``target``,
    with the tables of the plug-ins ``owners`` (``lossless migrate``: the long-term
    memory's and the file index's), then verify the copy (``report.problems`` lists any
    difference; then nothing of the copy is kept: ``report.rolled_back``).
    ``progress(table, rows)`` is called after each table."""
    t0 = time.perf_counter()
    check_source(source)
    src = SQLiteStore(source)
    try:
        dst = PostgresStore(target, schema=schema)
    except BaseException:
        src.close()
        raise
    report = TransferReport(source=source, target=dst.label)
    try:
        present = _target_rows(dst, owners)
        # vectors a search of the empty target cached (its questions') are a cache, not a
        # store: they make way for the source's cache, which holds every text it had embedded
        cache_only = set(present) == {"embedding_cache"}
        if present and not cache_only:
            listed = ", ".join(f"{n} {t}" for t, n in present.items())
            raise StoreError(f"the target {dst.label} is not empty ({listed}): lossless migrate copies into an "
                             "empty database or schema only (create one, or add ?schema=NAME for a fresh schema)")
        with contextlib.suppress(_CopyDiffers), dst.transaction() as conn:
            if cache_only:
                conn.execute("DELETE FROM embedding_cache")
            for table, columns in TABLES.items():
                if table == "vector_progress":  # its index rows must exist first
                    report.vectors = _copy_vectors(src, dst, conn)
                    if progress is not None:
                        progress("vectors", report.vectors)
                n = _copy_table(src, conn, table, columns, _DOCUMENTS.get(table))
                report.counts[table] = n
                if progress is not None:
                    progress(table, n)
            for owner in owners:
                _copy_owned(src, dst, conn, owner, report, progress)
            for table in (*_IDENTITY, *(table for owner in owners for table in owner.identity)):
                # later inserts continue after the copied rowids
                conn.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'rowid'), "
                             f"coalesce((SELECT max(rowid) FROM {table}), 0) + 1, false)")
            # before the commit: a copy that differs is rolled back, the target left as it was
            report.problems = verify_copy(src, dst, owners=owners)
            if report.problems:
                report.rolled_back = True
                raise _CopyDiffers
    finally:
        src.close()
        dst.close()
    report.seconds = time.perf_counter() - t0
    return report


def _copy_owned(src: SQLiteStore, dst: PostgresStore, conn: Any, owner: TableOwner, report: TransferReport,
                progress: Callable[[str, int], None] | None) -> None:
    """Copy one plug-in's tables (its own way where it has one), then the rest it keeps."""
    for table, columns in owner.tables.items():
        own = owner.copy.get(table)
        n = own(src, conn) if own is not None else _copy_table(src, conn, table, columns, owner.documents.get(table))
        report.counts[table] = n
        if progress is not None:
            progress(table, n)
    report.counts.update(owner.copy_rest(src, dst, conn, progress))


def _copy_table(src: SQLiteStore, conn: Any, table: str, columns: tuple[str, ...],
                document: Callable[[tuple[Any, ...]], str] | None) -> int:
    cols = ", ".join(columns)
    n = 0
    with conn.cursor() as cur:
        if document is not None:
            # staged, so the tsvector is computed by the server from the document we send
            cur.execute(f"CREATE TEMP TABLE _in_{table} ON COMMIT DROP AS SELECT {cols} FROM {table} WITH NO DATA")
            cur.execute(f"ALTER TABLE _in_{table} ADD COLUMN _doc TEXT")
            with cur.copy(f"COPY _in_{table} ({cols}, _doc) FROM STDIN") as copy:
                for row in _rows(src, table, columns):
                    copy.write_row((*row, document(row)))
                    n += 1
            cur.execute(f"INSERT INTO {table} ({cols}, search) SELECT {cols}, to_tsvector('simple', _doc) "
                        f"FROM _in_{table}")
        else:
            with cur.copy(f"COPY {table} ({cols}) FROM STDIN") as copy:
                for row in _rows(src, table, columns):
                    copy.write_row(row)
                    n += 1
    return n


def _copy_vectors(src: SQLiteStore, dst: PostgresStore, conn: Any) -> int:
    """Fill a pgvector table for each SQLite vector index from the cached vectors of the
    units it held (a vector is a function of provider, model and text)."""
    recall = dst.recall_index()
    total = 0
    for name, provider, model, dim in src._query("SELECT name, provider, model, dim FROM vector_indexes"):
        index = recall.ensure_index(provider, model, int(dim))
        if index != name:
            raise StoreError(f"vector index {name} would be named {index} on PostgreSQL")
        recall._vector_type(conn)
        with conn.cursor() as cur, cur.copy(
            f"COPY {index} (unit_rowid, conversation_id, kind, embedding) FROM STDIN"
        ) as copy:
            for cid, upto in src._query("SELECT conversation_id, unit_rowid FROM vector_progress WHERE index_name = ?",
                                        (name,)):
                for rowid, kind, blob in _stream(src, _INDEXED_UNITS, (provider, model, cid, upto)):
                    copy.write_row((rowid, cid, kind, np.frombuffer(blob, dtype="<f4").astype(np.float32)))
                    total += 1
    return total


def _expected_vectors(src: SQLiteStore) -> dict[str, int]:
    """index name -> how many units of it have a cached vector (what PostgreSQL must hold)."""
    out: dict[str, int] = {}
    for name, provider, model in src._query("SELECT name, provider, model FROM vector_indexes"):
        n = 0
        for cid, upto in src._query("SELECT conversation_id, unit_rowid FROM vector_progress WHERE index_name = ?",
                                    (name,)):
            n += sum(1 for _ in _stream(src, _INDEXED_UNITS, (provider, model, cid, upto)))
        out[name] = n
    return out


def _digest(rows: Iterator[tuple[Any, ...]]) -> tuple[int, int]:
    """(count, sum of the rows' SHA-256 mod 2^256): equal for the same multiset of rows."""
    count = 0
    acc = 0
    for row in rows:
        canon = json.dumps([v.hex() if isinstance(v, bytes | memoryview) and not isinstance(v, str)
                            else (repr(v) if isinstance(v, float) else v) for v in
                            (bytes(x) if isinstance(x, memoryview) else x for x in row)],
                           ensure_ascii=False, separators=(",", ":"))
        acc = (acc + int.from_bytes(hashlib.sha256(canon.encode("utf-8")).digest(), "big")) % (1 << 256)
        count += 1
    return count, acc


def _pg_rows(dst: PostgresStore, table: str, columns: tuple[str, ...]) -> Iterator[tuple[Any, ...]]:
    cols = ", ".join(columns)
    # (in the caller's transaction when there is one: the copy is verified before it commits)
    with dst.transaction() as conn, conn.cursor(name=f"verify_{table}") as cur:
        cur.itersize = _BATCH
        cur.execute(f"SELECT {cols} FROM {table}")
        yield from cur


def verify_copy(src: SQLiteStore, dst: PostgresStore, *, owners: Sequence[TableOwner]) -> list[str]:
    """Every difference between the two stores' copied tables (the store's and those of
    the plug-ins ``owners``), then every problem PostgreSQL's ``verify()`` finds (message
    hashes, seqs, the DAG); [] when identical."""
    problems: list[str] = []
    for table, columns in copied_tables(owners).items():
        want = _digest(_rows(src, table, columns))
        got = _digest(_pg_rows(dst, table, columns))
        if want[0] != got[0]:
            problems.append(f"{table}: {want[0]} rows in SQLite, {got[0]} in PostgreSQL")
        elif want[1] != got[1]:
            problems.append(f"{table}: the rows differ (same count, {want[0]}, different content)")
    for name, n in _expected_vectors(src).items():
        if not re.fullmatch(r"vec_[0-9a-f]{12}", name):  # spliced into SQL below
            problems.append(f"vector index {name!r}: not a name lossless makes")
            continue
        held = int(dst._query(f"SELECT count(*) FROM {name}")[0][0])
        if held != n:
            problems.append(f"{name}: {n} vectors expected, {held} in PostgreSQL")
    for owner in owners:
        problems.extend(owner.verify_rest(src, dst, _digest))
    problems.extend(f"postgresql: {p}" for p in dst.verify())
    return problems
