"""The one migration runner both stores use.

A store's schema is a numbered list of migrations (:class:`Migrations`, registered with
its ``migration(version, name)`` decorator). :func:`run` applies the pending ones in
order, each in its own transaction that also records it in ``schema_migrations``, and
refuses a database written by newer code (a version this code does not know) rather
than guess at it. Several processes may open a fresh database at once: inside each
transaction the runner re-checks whether the migration was applied meanwhile, so each
runs exactly once. What differs between SQLite and PostgreSQL (how a transaction is
opened and serialised, the placeholder) is a :class:`Dialect`.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from typing import Any

from lossless.core.errors import MigrationError

__all__ = ["TABLE", "Dialect", "Migration", "Migrations", "Schema", "applied", "pending", "run"]

Migration = Callable[[Any], None]


@dataclass(frozen=True, slots=True)
class Dialect:
    """How one database runs the migrations: ``transaction(conn)`` is one migration's
    transaction, serialised against other migrators (SQLite: BEGIN IMMEDIATE;
    PostgreSQL: an advisory lock per schema); ``ensure_table(conn)`` creates
    ``schema_migrations`` if missing (the SQL is :data:`TABLE`); ``placeholder``: ``?``
    or ``%s``."""

    transaction: Callable[[Any], AbstractContextManager[Any]]
    ensure_table: Callable[[Any], None]
    placeholder: str


@dataclass
class Migrations:
    """A schema as numbered migrations, kept sorted by version."""

    steps: list[tuple[int, str, Migration]] = field(default_factory=list)

    def migration(self, version: int, name: str) -> Callable[[Migration], Migration]:
        def register(fn: Migration) -> Migration:
            self.steps.append((version, name, fn))
            self.steps.sort(key=lambda m: m[0])
            return fn

        return register


TABLE = ("CREATE TABLE IF NOT EXISTS schema_migrations ("
          " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)")


def applied(conn: Any, dialect: Dialect) -> list[int]:
    """The versions recorded in ``schema_migrations``, in order."""
    dialect.ensure_table(conn)
    return [row[0] for row in conn.execute("SELECT version FROM schema_migrations ORDER BY version").fetchall()]


def pending(conn: Any, schema: Migrations, dialect: Dialect) -> list[tuple[int, str, Migration]]:
    done = set(applied(conn, dialect))
    return [m for m in schema.steps if m[0] not in done]


def run(conn: Any, schema: Migrations, dialect: Dialect, upto: int | None = None) -> list[int]:
    """Apply every pending migration of ``schema`` (up to ``upto``), each in its own
    transaction; the versions applied now."""
    known = {m[0] for m in schema.steps}
    newer = [v for v in applied(conn, dialect) if v not in known]
    if newer:
        raise MigrationError(
            f"database schema version {max(newer)} is newer than this lossless knows "
            f"({max(known)}); upgrade lossless"
        )
    mark = dialect.placeholder
    done: list[int] = []
    for version, name, fn in pending(conn, schema, dialect):
        if upto is not None and version > upto:
            break
        try:
            with dialect.transaction(conn):
                # Another process may have applied it while we waited for the lock.
                if conn.execute(f"SELECT 1 FROM schema_migrations WHERE version = {mark}",
                                (version,)).fetchone() is None:
                    fn(conn)
                    conn.execute(
                        f"INSERT INTO schema_migrations (version, name, applied_at) VALUES ({mark}, {mark}, {mark})",
                        (version, name, datetime.now(UTC).isoformat()),
                    )
                    done.append(version)
        except MigrationError:
            raise
        except Exception as exc:
            raise MigrationError(f"migration {version} ({name}) failed: {exc}") from exc
    return done


class Schema:
    """One dialect's migrations with the way it runs them: what a store's ``migrations``
    module offers as ``applied``, ``pending`` and ``migrate``. ``build`` makes the list on
    first use, not at import: the plug-ins register their steps when they are imported,
    which may be after the store's modules are."""

    def __init__(self, build: Callable[[], Migrations], dialect: Dialect) -> None:
        self._build = build
        self.dialect = dialect

    @cached_property
    def migrations(self) -> Migrations:
        return self._build()  # a build that raises (a plug-in's step missing) is not kept

    def applied(self, conn: Any) -> list[int]:
        return applied(conn, self.dialect)

    def pending(self, conn: Any) -> list[tuple[int, str, Migration]]:
        return pending(conn, self.migrations, self.dialect)

    def migrate(self, conn: Any, upto: int | None = None) -> list[int]:
        """Apply every pending migration (up to ``upto``), each in its own transaction."""
        return run(conn, self.migrations, self.dialect, upto)
