"""The PostgreSQL store: the :class:`~lossless.store.base.Store` contract for many
processes and hosts, through psycopg 3 and a ``psycopg_pool`` connection pool.

The tables mirror the SQLite ones (``store/postgres/migrations.py``); what SQLite gets from
having one writer at a time, PostgreSQL gets from explicit locks:

* **seq allocation**: :meth:`append_messages` locks the conversation row
  (``SELECT … FOR UPDATE``, or ``UPDATE … RETURNING``: :meth:`_start_append`) before
  reading ``last_seq``, so concurrent writers to one conversation queue up and the seqs
  stay 1, 2, 3… with no gap and no duplicate;
* **summaries**: :meth:`insert_summary` takes the same row lock (the dialect's
  ``for_update``), then checks the frontier
  inside its transaction, so of two compactors that computed the same pass only one
  lands and a reader sees a pass entirely or not at all;
* **compaction leases**: one conditional upsert (``INSERT … ON CONFLICT DO UPDATE …
  WHERE the holder is this owner or stopped heart-beating``) is the atomic
  compare-and-set; times come from the server's clock so hosts agree on staleness.

Tenants: every query is scoped by conversation (and memories by user/agent) as on
SQLite. For a hard wall, give each tenant a schema: ``PostgresStore(url,
schema="tenant_a")``, ``postgresql://…?schema=tenant_a`` or libpq's own
``?options=-csearch_path%3Dtenant_a``; the schema is created and migrated on first use
and every pooled connection's ``search_path`` is ``tenant_a, public`` (extensions such
as pgvector live in ``public``).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from lossless.core.errors import MissingDependencyError, StoreError, ValidationError
from lossless.core.priority import pause_point
from lossless.core.types import GrepHit, SourceRef, Summary
from lossless.store.base import SearchSpec
from lossless.store.postgres.extensions import Extension, read_extensions
from lossless.store.postgres.grep import search_document
from lossless.store.postgres.migrations import migrate
from lossless.store.rows import SUMMARY_READ_COLUMNS, summary_from_row
from lossless.store.runner import POSTGRES, QmarkConnection, qmark_once
from lossless.store.sql import (
    NEW_MESSAGE_COLUMNS,
    NEW_SUMMARY_COLUMNS,
    REVISED_SUMMARY_COLUMNS,
    SQLStore,
)
from lossless.store.urls import redact_url

try:
    import psycopg
    from psycopg import sql as pgsql
    from psycopg_pool import ConnectionPool, PoolTimeout
except ImportError as exc:  # pragma: no cover - the extra is part of the test install
    raise MissingDependencyError(
        "PostgreSQL support needs the postgres extra: pip install 'lossless[postgres]'"
    ) from exc

if TYPE_CHECKING:
    from lossless.store.postgres.recall import PostgresRecall

__all__ = ["PostgresStore", "server_extensions", "split_schema", "store_exists"]

_SCHEMA_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
_SEARCH_PATH = re.compile(r"-c\s*search_path\s*=\s*([^\s,]+)")
_TSVECTOR = "to_tsvector('simple', ?)"  # a row's search document, from _search_text's text


def split_schema(url: str) -> tuple[str, str | None]:
    """(the URL libpq should see, the tenant schema it names or None). ``?schema=x`` is
    ours and is removed; ``?options=-csearch_path%3Dx`` is libpq's and is kept."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    schema: str | None = None
    kept: list[tuple[str, str]] = []
    for key, value in query:
        if key == "schema":
            schema = value
            continue
        if key == "options" and schema is None:
            found = _SEARCH_PATH.search(unquote(value))
            if found:
                schema = found.group(1).strip("\"'")
        kept.append((key, value))
    clean = urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(kept), parts.fragment))
    return clean, schema


def _connect(clean: str, label: str, timeout: float) -> tuple[Any, str]:
    """One autocommit connection to ``clean`` (a URL without ``?schema=``), and the
    conninfo with the connect timeout it used; a StoreError naming ``label`` if none."""
    try:
        # a connect_timeout in the URL wins over the keyword argument
        if "connect_timeout" not in psycopg.conninfo.conninfo_to_dict(clean):
            clean = psycopg.conninfo.make_conninfo(clean, connect_timeout=max(1, int(timeout)))
        return psycopg.connect(clean, autocommit=True), clean
    except psycopg.Error as exc:
        raise StoreError(f"cannot connect to PostgreSQL at {label}: {exc}".strip()) from exc


def store_exists(url: str, *, schema: str | None = None, connect_timeout: float = 30.0) -> bool:
    """Whether ``url`` (its ``?schema=``, or ``schema``) holds a lossless store, looked at
    without creating one: read commands and ``lossless doctor`` say that there is none
    rather than create a schema and its tables, as they do not create a SQLite file.
    A server that does not answer is a StoreError, as when opening the store."""
    clean, from_url = split_schema(url)
    schema = schema or from_url
    if schema is not None and not _SCHEMA_NAME.match(schema):
        raise ValidationError(f"schema must be a plain identifier (letters, digits, _), got {schema!r}")
    conn, _ = _connect(clean, redact_url(url), connect_timeout)
    with conn:
        # where PostgresStore would find it: the named schema, else the search_path's first
        name = "schema_migrations" if schema is None else f'"{schema}".schema_migrations'
        row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (name,)).fetchone()
    return bool(row and row[0])


def server_extensions(url: str, *, connect_timeout: float = 30.0) -> dict[str, Extension]:
    """The extensions a store uses (:mod:`~lossless.store.postgres.extensions`) as the
    server and the database of ``url`` have them, looked at without creating anything:
    ``lossless doctor`` says so before there is a store."""
    clean, _ = split_schema(url)
    conn, _ = _connect(clean, redact_url(url), connect_timeout)
    with conn:
        return read_extensions(lambda sql, args: conn.execute(sql, args).fetchall())


# the statements of the write hooks below, made once: a row's search document goes in the row
_INSERT_MESSAGE = f"INSERT INTO messages ({NEW_MESSAGE_COLUMNS}, search) VALUES ({'?, ' * 15}{_TSVECTOR})"
_INSERT_SUMMARY = f"INSERT INTO summaries ({NEW_SUMMARY_COLUMNS}, search) VALUES ({'?, ' * 17}{_TSVECTOR})"
_REVISE_SUMMARY = f"UPDATE summaries SET {REVISED_SUMMARY_COLUMNS}, search = {_TSVECTOR} WHERE rowid = ?"


class PostgresStore(SQLStore):
    """PostgreSQL implementation of :class:`~lossless.store.base.Store`.

    ``url`` is a libpq URI (``postgresql://user:pass@host:5432/db``); ``pool_size`` caps
    this process's connections; ``schema`` puts every table in that schema (created if
    missing), one schema per tenant.

    The domain methods (conversations, messages, the summary DAG, leases, settings) are
    :class:`~lossless.store.sql.SQLStore`'s, written once for both stores. What is
    PostgreSQL's own is here: the connection pool and tenant schema, transactions per
    thread, the locks SQLite gets from its one writer (the conversation row when seqs
    are claimed), the ``tsvector`` search column of ``messages`` and ``summaries``, a
    summary's sources read as arrays in its row, search, ``verify`` and the recall index.
    """

    dialect = "postgresql"

    def __init__(self, url: str, *, pool_size: int = 4, schema: str | None = None,
                 connect_timeout: float = 30.0) -> None:
        clean, from_url = split_schema(url)
        self.schema = schema or from_url
        if self.schema is not None and not _SCHEMA_NAME.match(self.schema):
            raise ValidationError(f"schema must be a plain identifier (letters, digits, _), got {self.schema!r}")
        if pool_size < 1:
            raise ValidationError(f"pool_size must be >= 1, got {pool_size}")
        self.url = clean
        self.label = redact_url(url)
        self._local = threading.local()
        first, clean = _connect(clean, self.label, connect_timeout)
        with first:
            if self.schema is not None:
                with first.transaction():
                    first.execute("SELECT pg_advisory_xact_lock(hashtext('lossless.migrate'), hashtext(%s))",
                                  (self.schema,))
                    first.execute(pgsql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(pgsql.Identifier(self.schema)))
            self._configure(first)
            migrate(first)
        self._pool: ConnectionPool[Any] = ConnectionPool(
            clean, min_size=1, max_size=pool_size, kwargs={"autocommit": True}, configure=self._configure,
            open=False, name="lossless", timeout=connect_timeout,
        )
        try:
            self._pool.open(wait=True, timeout=connect_timeout)
        except PoolTimeout as exc:
            raise StoreError(f"cannot open a connection pool to PostgreSQL at {self.label}") from exc

    # -- plumbing ---------------------------------------------------------------------

    def _configure(self, conn: Any) -> None:
        if self.schema is not None:
            conn.execute(pgsql.SQL("SET search_path TO {}, public").format(pgsql.Identifier(self.schema)))

    def close(self) -> None:
        self._pool.close()

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        """One write transaction on one pooled connection (re-entrant within a thread:
        nested uses join the outer one). Yields the psycopg connection."""
        current = getattr(self._local, "conn", None)
        if current is not None:
            yield current
            return
        pause_point()  # the worker steps aside for a caller's query here, holding no connection
        try:
            with self._pool.connection() as conn, conn.transaction():
                self._local.conn = conn
                try:
                    yield conn
                finally:
                    self._local.conn = None
        except psycopg.OperationalError as exc:
            raise StoreError(f"PostgreSQL at {self.label}: {exc}".strip()) from exc

    def _query(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one statement (inside this thread's transaction if there is one)."""
        current = getattr(self._local, "conn", None)
        if current is None:
            pause_point()  # the worker steps aside for a caller's query here, holding no connection
        try:
            if current is not None:
                cur = current.execute(sql, args)
                return cur.fetchall() if cur.description else []
            with self._pool.connection() as conn:
                cur = conn.execute(sql, args)
                return cur.fetchall() if cur.description else []
        except psycopg.OperationalError as exc:
            if current is not None:
                raise
            raise StoreError(f"PostgreSQL at {self.label}: {exc}".strip()) from exc
        except UnicodeEncodeError as exc:  # an id or a filter with a lone surrogate (as SQLiteStore says)
            raise ValidationError(f"not valid UTF-8 text: {exc.object[:80]!r} (a lone surrogate at "
                                  f"position {exc.start})") from None

    def recall_index(self, backend: str = "auto") -> PostgresRecall:
        """Retrieval units, the embedding cache and pgvector indexes in this database."""
        from lossless.store.postgres.recall import PostgresRecall

        return PostgresRecall(self, backend)

    # -- what the shared store (store/sql.py) asks of PostgreSQL -------------------------

    _sql = POSTGRES
    # a summary row with its sources as two arrays: one round trip for a frontier, not 1 + n
    _SUMMARY_SELECT = (
        f"SELECT {SUMMARY_READ_COLUMNS}, "
        "ARRAY(SELECT source_kind FROM summary_sources x WHERE x.summary_id = s.id ORDER BY x.ord), "
        "ARRAY(SELECT source_id FROM summary_sources x WHERE x.summary_id = s.id ORDER BY x.ord) "
        "FROM summaries s"
    )
    _NEWEST_ROOT = "s.last_seq DESC, s.created_at DESC, s.id"
    _search_text = staticmethod(search_document)  # what to_tsvector('simple', …) is given

    def _run(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self._query(qmark_once(sql), args)  # psycopg's %s text, made once per statement

    def _write(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self._run(sql, args)  # autocommit: one statement is a transaction, one round trip

    @contextmanager
    def _writing(self) -> Iterator[QmarkConnection]:
        with self.transaction() as conn:
            yield QmarkConnection(conn)

    def _start_append(self, conn: Any, conversation_id: str, count: int | None,
                      now: str) -> tuple[int, int, bool] | None:
        if count is None:
            # The row lock serializes writers of this conversation: seqs never collide or
            # skip, and a concurrent writer of the same external id is seen after it.
            row = conn.execute("SELECT last_seq FROM conversations WHERE id = ? FOR UPDATE",
                               (conversation_id,)).fetchone()
        else:
            # Without external ids the count is known: take the lock and the seqs in one
            # statement (the row stays locked until commit).
            row = conn.execute("UPDATE conversations SET last_seq = last_seq + ?, updated_at = ? WHERE id = ? "
                               "RETURNING last_seq - ?", (count, now, conversation_id, count)).fetchone()
        return None if row is None else (int(row[0]), 0, count is not None)

    def _insert_messages(self, conn: Any, rows: list[tuple[Any, ...]], documents: list[tuple[int, str]]) -> None:
        # rowid: the identity column's; the search document goes in the row
        conn.executemany(_INSERT_MESSAGE, [(*r[1:], d) for r, (_, d) in zip(rows, documents, strict=True)])

    def _insert_summary(self, conn: Any, values: tuple[Any, ...], text: str) -> None:
        conn.execute(_INSERT_SUMMARY, (*values, search_document(text)))

    def _revise_summary(self, conn: Any, rowid: int, values: tuple[Any, ...], text: str) -> None:
        conn.execute(_REVISE_SUMMARY, (*values, search_document(text), rowid))

    def _summaries(self, rows: list[tuple[Any, ...]], cached: bool = False) -> list[Summary]:
        return [summary_from_row(r, tuple(SourceRef(kind=k, id=i) for k, i in zip(r[16], r[17], strict=True)))
                for r in rows]

    # -- search and integrity -----------------------------------------------------------

    def search(self, spec: SearchSpec) -> list[GrepHit]:
        from lossless.store.postgres.grep import run_search

        return run_search(self, spec)

    def verify(self, conversation_id: str | None = None, *, integrity: bool = True) -> list[str]:
        """Re-check every invariant the design states (:func:`lossless.core.dag.verify`);
        empty when all hold. ``integrity`` is SQLite's file check; PostgreSQL checks its
        own pages."""
        from lossless.store.integrity import verify_conversations

        return verify_conversations(self._run, conversation_id)
