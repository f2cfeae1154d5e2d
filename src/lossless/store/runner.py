"""One SQL text for both stores, for features whose queries are plain SQL.

The API keys, the tenant queries of the HTTP server and the workspace file index write
their SQL once, in SQLite's dialect with ``?`` placeholders, and run it through a
:class:`SQLRunner`: SQLite runs it as it is; PostgreSQL rewrites the placeholders to
psycopg's ``%s`` (the SQL text is lossless's own and values are always parameters, so
the rewrite never touches user text). What differs beyond placeholders is asked of the
runner: :meth:`SQLRunner.text_range` (a prefix range that orders byte-wise whatever the
column's collation), :meth:`SQLRunner.in_list` (a list of any length as one bound value)
and :attr:`SQLRunner.true`. Those and the few other spellings that differ are one
:class:`Dialect` each (:data:`SQLITE`, :data:`POSTGRES`), which the stores' own shared
implementation (:mod:`lossless.store.sql`) writes its SQL with too.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol

from lossless.core.errors import StoreError

__all__ = ["POSTGRES", "SQLITE", "Dialect", "PostgresRunner", "QmarkConnection", "SQLRunner", "SQLiteRunner", "qmark",
           "qmark_once", "sql_runner", "sqlite_in"]

_LISTED = 100  # more values than this go in as one JSON array (see sqlite_in)


def sqlite_in(column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
    """SQLite's ``column IN (…)`` for ``values`` and its arguments: a placeholder each for
    a few, one JSON array read by ``json_each`` for more, so no statement binds a number of
    variables its caller chose (SQLite refuses more than 32,766)."""
    if len(values) <= _LISTED:
        return f"{column} IN ({','.join('?' * len(values))})", list(values)
    return f"{column} IN (SELECT value FROM json_each(?))", [json.dumps(list(values))]


def qmark(sql: str) -> str:
    """SQLite-style ``?`` placeholders as psycopg's ``%s`` (a literal ``%`` doubled)."""
    return sql.replace("%", "%%").replace("?", "%s")


@lru_cache(maxsize=2048)
def qmark_once(sql: str) -> str:
    """:func:`qmark`, rewritten once per text: lossless runs a fixed set of statements
    (an ``in_list`` on PostgreSQL is one text whatever the number of values)."""
    return qmark(sql)


def _sqlite_batches(column: str, values: Sequence[Any]) -> Iterator[tuple[str, list[Any]]]:
    # a placeholder each, 500 at a time: SQLite binds at most 32,766 variables, and a
    # statement of 500 placeholders reads ~5% faster than sqlite_in's JSON array
    for i in range(0, len(values), 500):
        batch = values[i : i + 500]
        yield f"{column} IN ({','.join('?' * len(batch))})", list(batch)


def _json_number_sqlite(field: str) -> str:
    return f"total(json_extract(metadata, '$.{field}'))"


def _json_number_postgres(field: str) -> str:
    # absent or not a number counts 0, like SQLite's total(json_extract(…))
    return (f"coalesce(sum(CASE WHEN jsonb_typeof(metadata::jsonb -> '{field}') = 'number' "
            f"THEN (metadata::jsonb ->> '{field}')::float8 END), 0)")


@dataclass(frozen=True, slots=True)
class Dialect:
    """What a statement written once with ``?`` placeholders spells differently on each
    database (the placeholders themselves are the store's: :func:`qmark_once`)."""

    name: str  # "sqlite" or "postgresql"
    true: str  # a condition that always holds
    # a row lock for a read that decides a write: PostgreSQL's; on SQLite a write
    # transaction (BEGIN IMMEDIATE) holds the whole database already
    for_update: str
    greatest: str  # the larger of two values: SQLite's two-argument max(), PostgreSQL's greatest()
    now: str  # the current time in Unix seconds (SQLite: the store's unix_now(), Python's clock)
    text_range: Callable[[str], str]  # column between two ? bounds, compared byte-wise
    in_list: Callable[[str, Sequence[Any]], tuple[str, list[Any]]]  # column is one of values, and the args
    # in_list for a long list read in as many statements as reads fastest (a bulk read by id)
    in_batches: Callable[[str, Sequence[Any]], Iterator[tuple[str, list[Any]]]]
    json_number_sum: Callable[[str], str]  # the sum of a number field of the metadata JSON column
    # the column compared without its index: SQLite's unary +, which the planner reads as
    # "not by this index"; PostgreSQL plans it well as it is
    unindexed: Callable[[str], str]


SQLITE = Dialect(
    name="sqlite", true="1", for_update="", greatest="max", now="unix_now()",
    text_range=lambda column: f"({column} >= ? AND {column} < ?)",
    in_list=sqlite_in,
    in_batches=_sqlite_batches,
    json_number_sum=_json_number_sqlite,
    unindexed=lambda column: f"+{column}",
)
POSTGRES = Dialect(
    name="postgresql", true="TRUE", for_update=" FOR UPDATE", greatest="greatest",
    now="extract(epoch from clock_timestamp())::float8",  # the server's clock: hosts agree on staleness
    # COLLATE "C": under a linguistic collation '@acme/x' may sort above '@acme0'
    text_range=lambda column: f'({column} >= ? COLLATE "C" AND {column} < ? COLLATE "C")',
    in_list=lambda column, values: (f"{column} = ANY(?)", [list(values)]),  # one array parameter (psycopg allows 65,535)
    in_batches=lambda column, values: iter([(f"{column} = ANY(?)", [list(values)])]),
    json_number_sum=_json_number_postgres,
    unindexed=lambda column: column,
)


class QmarkConnection:
    """A psycopg connection that takes ``?`` placeholders (``conn`` is the connection itself)."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def execute(self, sql: str, args: Sequence[Any] = ()) -> Any:
        return self.conn.execute(qmark_once(sql), list(args))

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        rows = list(rows)
        if len(rows) == 1:  # one row: one statement, not executemany's pipeline
            self.conn.execute(qmark_once(sql), list(rows[0]))
        elif rows:
            with self.conn.cursor() as cur:
                cur.executemany(qmark_once(sql), [list(r) for r in rows])


class SQLRunner(Protocol):
    dialect: str  # "sqlite" or "postgresql"
    spelling: Dialect  # what that dialect spells differently
    true: str  # a condition that always holds: 1 on SQLite, TRUE on PostgreSQL

    def query(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one ``?``-placeholder statement and return its rows (none for a write)."""
        ...

    def transaction(self, *, wait: bool = True) -> AbstractContextManager[Any]:
        """One write transaction; yields a connection whose ``execute(sql, args)`` and
        ``executemany(sql, rows)`` take ``?`` placeholders. ``wait=False``: a StoreError
        at once rather than a wait for a lock another connection holds (a write that may
        be skipped)."""
        ...

    def text_range(self, column: str) -> str:
        """``column`` between two ``?`` bounds, compared byte-wise (a prefix range)."""
        ...

    def in_list(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        """``column`` is one of ``values`` (strings or integers, any number of them), and
        the arguments of that condition: never one variable per value."""
        ...


class _Writable(Protocol):
    """The SQLite store as its runner uses it (:class:`~lossless.store.sqlite.store.SQLiteStore`)."""

    def query(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...
    def transaction(self, *, wait: bool = True) -> AbstractContextManager[Any]: ...


class _Pooled(Protocol):
    """The PostgreSQL store as its runner uses it (:class:`~lossless.store.postgres.store.PostgresStore`)."""

    def query(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...
    def transaction(self) -> AbstractContextManager[Any]: ...


class SQLiteRunner:
    dialect = "sqlite"
    spelling = SQLITE
    true = SQLITE.true

    def __init__(self, store: _Writable) -> None:
        self.store = store

    def query(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self.store.query(sql, args)

    def transaction(self, *, wait: bool = True) -> AbstractContextManager[Any]:
        return self.store.transaction(wait=wait)

    def text_range(self, column: str) -> str:
        return SQLITE.text_range(column)

    def in_list(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        return SQLITE.in_list(column, values)


class PostgresRunner:
    dialect = "postgresql"
    spelling = POSTGRES
    true = POSTGRES.true

    def __init__(self, store: _Pooled) -> None:
        self.store = store

    def query(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self.store.query(qmark_once(sql), list(args))

    @contextmanager
    def transaction(self, *, wait: bool = True) -> Iterator[QmarkConnection]:
        with self.store.transaction() as conn:
            if not wait:  # a row lock another transaction holds fails the write (0 would mean "no limit")
                conn.execute("SET LOCAL lock_timeout = '1ms'")
            yield QmarkConnection(conn)

    def text_range(self, column: str) -> str:
        return POSTGRES.text_range(column)

    def in_list(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        return POSTGRES.in_list(column, values)


def sql_runner(store: Any) -> SQLRunner:
    """The runner for ``store``, by the dialect it names: a SQLiteStore (``sqlite``) or a
    PostgresStore (``postgresql``); StoreError for anything else."""
    dialect = getattr(store, "dialect", None)
    if dialect == "sqlite":
        return SQLiteRunner(store)
    if dialect == "postgresql":
        return PostgresRunner(store)
    raise StoreError(f"this needs the SQLite or the PostgreSQL store, not {type(store).__name__}")
