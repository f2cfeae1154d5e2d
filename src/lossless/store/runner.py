"""One SQL text for both stores, for features whose queries are plain SQL.

The API keys, the tenant queries of the HTTP server and the workspace file index write
their SQL once, in SQLite's dialect with ``?`` placeholders, and run it through a
:class:`SQLRunner`: SQLite runs it as it is; PostgreSQL rewrites the placeholders to
psycopg's ``%s`` (the SQL text is lossless's own and values are always parameters, so
the rewrite never touches user text). What differs beyond placeholders is asked of the
runner: :meth:`SQLRunner.text_range` (a prefix range that orders byte-wise whatever the
column's collation), :meth:`SQLRunner.in_list` (a list of any length as one bound value)
and :attr:`SQLRunner.true`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any, Protocol

from lossless.core.errors import StoreError

if TYPE_CHECKING:
    from lossless.store.postgres.store import PostgresStore
    from lossless.store.sqlite.store import SQLiteStore

__all__ = ["PostgresRunner", "QmarkConnection", "SQLRunner", "SQLiteRunner", "qmark", "sql_runner", "sqlite_in"]

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


class QmarkConnection:
    """A psycopg connection that takes ``?`` placeholders (``conn`` is the connection itself)."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def execute(self, sql: str, args: Sequence[Any] = ()) -> Any:
        return self.conn.execute(qmark(sql), list(args))

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        rows = list(rows)
        if rows:
            with self.conn.cursor() as cur:
                cur.executemany(qmark(sql), [list(r) for r in rows])


class SQLRunner(Protocol):
    dialect: str  # "sqlite" or "postgresql"
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


class SQLiteRunner:
    dialect = "sqlite"
    true = "1"

    def __init__(self, store: SQLiteStore) -> None:
        self.store = store

    def query(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self.store.query(sql, args)

    def transaction(self, *, wait: bool = True) -> AbstractContextManager[Any]:
        return self.store.transaction(wait=wait)

    def text_range(self, column: str) -> str:
        return f"({column} >= ? AND {column} < ?)"

    def in_list(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        return sqlite_in(column, values)


class PostgresRunner:
    dialect = "postgresql"
    true = "TRUE"

    def __init__(self, store: PostgresStore) -> None:
        self.store = store

    def query(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self.store.query(qmark(sql), list(args))

    @contextmanager
    def transaction(self, *, wait: bool = True) -> Iterator[QmarkConnection]:
        with self.store.transaction() as conn:
            if not wait:  # a row lock another transaction holds fails the write (0 would mean "no limit")
                conn.execute("SET LOCAL lock_timeout = '1ms'")
            yield QmarkConnection(conn)

    def text_range(self, column: str) -> str:
        # COLLATE "C": under a linguistic collation '@acme/x' may sort above '@acme0'
        return f'({column} >= ? COLLATE "C" AND {column} < ? COLLATE "C")'

    def in_list(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        return f"{column} = ANY(?)", [list(values)]  # one array parameter (psycopg allows 65,535)


def sql_runner(store: Any) -> SQLRunner:
    """The runner for ``store``: a SQLiteStore or a PostgresStore (StoreError otherwise)."""
    from lossless.store.sqlite.store import SQLiteStore

    if isinstance(store, SQLiteStore):
        return SQLiteRunner(store)
    if getattr(store, "dialect", None) == "postgresql":
        from lossless.store.postgres.store import PostgresStore

        if isinstance(store, PostgresStore):
            return PostgresRunner(store)
    raise StoreError(f"this needs the SQLite or the PostgreSQL store, not {type(store).__name__}")
