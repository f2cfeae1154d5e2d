"""The two store backends: the suite's store mode, and tests that run one contract on both.

``pytest`` runs the suite on SQLite (a file per test); ``pytest --store=postgres`` runs it
on PostgreSQL: one server per test session, the PostgreSQL 16 (with pgvector) inside the
``pgserver`` wheel, started in a temporary directory and removed at the end, or the server
at ``$LOSSLESS_TEST_PG_URL`` when that is set. A test gets empty databases from a pool, each
emptied when borrowed (a few ms) or cloned from a template that is already migrated (a
``CREATE DATABASE … TEMPLATE`` takes ~0.2 s). Nothing here ever skips: a PostgreSQL test
that cannot reach its server fails. Tests about one store carry a mark, ``sqlite_only`` or
``postgres``, and the other mode deselects them (``conftest.py``).

Fixtures (imported by ``conftest.py``):

* ``store_target``: ``store_target("a")`` is where this test's store "a" lives in the
  suite's mode (a path under ``tmp_path``, or a PostgreSQL URL), the same store each time
  it is asked within the test; ``lasting_store_target`` the same for module- and
  session-scoped fixtures; ``scratch_store`` a new empty store per call, for hypothesis
  examples (``":memory:"``, or a schema of its own in the shared database).
* ``backend`` ("sqlite" / "postgres", parametrised; each side marked for its mode),
  ``backend_target`` (a SQLite path or a PostgreSQL URL for a fresh store),
  ``store_backend`` (a :class:`lossless.Memory` opened on it) and ``shared_target``.
* ``pg_url`` (a fresh PostgreSQL database), ``pg_server`` (the server's maintenance
  database URL) and ``pg_shared`` (one database for the whole session, for hypothesis
  tests that make a new conversation per example): these need the ``postgres`` mark.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

import lossless

__all__ = [
    "BACKENDS",
    "PG_URL_ENV",
    "STORE_MODES",
    "StoreTarget",
    "backend",
    "backend_target",
    "create_database",
    "drop_database",
    "lasting_store_target",
    "open_backend",
    "pg_server",
    "pg_shared",
    "pg_template",
    "pg_url",
    "raw_query",
    "scratch_store",
    "shared_target",
    "store_backend",
    "store_mode",
    "store_target",
    "with_database",
]

PG_URL_ENV = "LOSSLESS_TEST_PG_URL"
# the SQLite side of a test run on both is SQLite-only (it runs in the default mode), the
# PostgreSQL side needs PostgreSQL (it runs with ``--store=postgres``)
BACKENDS = (
    pytest.param("sqlite", marks=pytest.mark.sqlite_only),
    pytest.param("postgres", marks=pytest.mark.postgres),
)


def with_database(url: str, name: str) -> str:
    """The same server URL naming another database."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


def create_database(server: str, name: str, template: str | None = None) -> str:
    import psycopg

    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else ""))
    return with_database(server, name)


def drop_database(server: str, name: str) -> None:
    import psycopg

    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """The URL of the session's PostgreSQL server (its maintenance database)."""
    given = os.environ.get(PG_URL_ENV)
    if given:
        yield given
        return
    with warnings.catch_warnings():
        # platformdirs warns at pgserver's import when XDG_RUNTIME_DIR is unset
        warnings.simplefilter("ignore")
        import pgserver

        root = Path(tempfile.mkdtemp(prefix="lossless-pg-"))
        server = pgserver.get_server(root / "data", cleanup_mode="delete")
    import psycopg

    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
        # a throwaway server: durability buys the tests nothing, commit latency costs them
        for setting in ("fsync", "synchronous_commit", "full_page_writes"):
            conn.execute(f"ALTER SYSTEM SET {setting} = off")
        conn.execute("SELECT pg_reload_conf()")
    try:
        yield server.get_uri()
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            server.cleanup()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_template(pg_server: str) -> Iterator[str]:
    """A database with every migration applied and pgvector created: the per-test clone source."""
    from lossless.store.postgres.store import PostgresStore

    name = f"lossless_tmpl_{uuid.uuid4().hex[:10]}"
    url = create_database(pg_server, name)
    store = PostgresStore(url, pool_size=1)
    store._query("CREATE EXTENSION IF NOT EXISTS vector")
    store.close()
    yield name
    drop_database(pg_server, name)


# children before parents (foreign keys); tables a later migration adds are emptied last
_EMPTY_ORDER = ("summary_sources", "summary_revisions", "tombstones", "compaction_timers", "memory_vectors",
                "vector_progress", "compaction_log", "compaction_leases", "memory_flush", "task_bounds",
                "forgotten_memories", "recall_units", "recall_progress", "summaries", "messages", "memories", "settings",
                "embedding_cache", "vector_indexes", "conversations", "file_chunks", "files", "file_vector_indexes",
                "api_keys")
_KEPT = ("schema_migrations", "files_generation")  # rows a migration wrote: kept (the counter's value is immaterial)
_DROPPED = ("vec_", "file_vec_")  # tables made on first use (one per embedder)


class _Recycled:
    """A pool of databases reused by the tests, each emptied when a test borrows it (a few
    ms, where cloning the template takes ~0.2 s); a fresh clone when emptying fails (a test
    changed the schema, or left a lock behind)."""

    def __init__(self, server: str, template: str) -> None:
        self.server, self.template = server, template
        self.names: list[str] = []  # every database made, dropped at the end
        self.free: list[str] = []  # given back by finished tests, not yet emptied

    def _fresh(self) -> str:
        name = f"lossless_t_{uuid.uuid4().hex[:12]}"
        create_database(self.server, name, template=self.template)
        self.names.append(name)
        return name

    def borrow(self) -> str:
        """The name of an empty, migrated database that no running test holds."""
        import psycopg

        while self.free:
            name = self.free.pop()
            try:
                _empty(with_database(self.server, name))
            except psycopg.Error:
                continue  # left for close() to drop
            return name
        return self._fresh()

    def give_back(self, names: list[str]) -> None:
        self.free.extend(reversed(names))

    def close(self) -> None:
        for name in self.names:
            drop_database(self.server, name)


def _empty(url: str) -> None:
    """Delete every row a test wrote (and the tables and schemas it made), keeping the schema."""
    import psycopg

    from lossless.store.postgres import migrations as pg_migrations

    with psycopg.connect(url, autocommit=True) as conn, conn.transaction():
        conn.execute("SET LOCAL lock_timeout = '5s'")
        # the immutability triggers (migration 12) refuse these deletes: off for this emptying
        conn.execute("SET LOCAL session_replication_role = replica")
        versions = [r[0] for r in conn.execute("SELECT version FROM schema_migrations ORDER BY version")]
        if versions != [m[0] for m in pg_migrations.MIGRATIONS]:
            raise psycopg.DataError("a test changed the schema: start from a fresh clone")
        for (schema,) in conn.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname NOT IN ('public', 'information_schema') "
            "AND nspname NOT LIKE 'pg\\_%'"
        ).fetchall():
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')  # a test's tenant schemas
        tables = [r[0] for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
        ).fetchall() if r[0] not in _KEPT]
        for table in tables:
            if table.startswith(_DROPPED):
                conn.execute(f'DROP TABLE "{table}"')
        rest = [t for t in tables if not t.startswith(_DROPPED)]
        for table in sorted(rest, key=lambda t: (_EMPTY_ORDER.index(t) if t in _EMPTY_ORDER else -1)):
            conn.execute(f'DELETE FROM "{table}"')
        for (table,) in conn.execute(
            "SELECT table_name FROM information_schema.columns WHERE table_schema = 'public' "
            "AND column_name = 'rowid' AND is_identity = 'YES'"
        ).fetchall():
            conn.execute(f'ALTER TABLE "{table}" ALTER COLUMN rowid RESTART')


@pytest.fixture(scope="session")
def _pg_recycled(pg_server: str, pg_template: str) -> Iterator[_Recycled]:
    recycled = _Recycled(pg_server, pg_template)
    yield recycled
    recycled.close()


class _Borrowed:
    """The databases one test borrowed from the pool, given back when it ends."""

    def __init__(self, pool: _Recycled) -> None:
        self.pool = pool
        self.names: list[str] = []

        self.clones: list[str] = []

    def url(self) -> str:
        self.names.append(self.pool.borrow())
        return with_database(self.pool.server, self.names[-1])

    def clone(self, url: str) -> str:
        """A new database holding a copy of the one at ``url`` (which nobody may be connected
        to), dropped when the test ends."""
        self.clones.append(f"lossless_c_{uuid.uuid4().hex[:12]}")
        return create_database(self.pool.server, self.clones[-1], template=urlsplit(url).path.lstrip("/"))


@pytest.fixture
def _pg_borrowed(_pg_recycled: _Recycled) -> Iterator[_Borrowed]:
    borrowed = _Borrowed(_pg_recycled)
    yield borrowed
    _pg_recycled.give_back(borrowed.names)
    for name in borrowed.clones:
        drop_database(_pg_recycled.server, name)


@pytest.fixture
def pg_url(_pg_borrowed: _Borrowed) -> str:
    """An empty, migrated PostgreSQL database for one test."""
    return _pg_borrowed.url()


@pytest.fixture(scope="session")
def pg_shared(pg_server: str, pg_template: str) -> Iterator[str]:
    """One database for the session (tests using it keep to conversations of their own)."""
    name = f"lossless_s_{uuid.uuid4().hex[:12]}"
    url = create_database(pg_server, name, template=pg_template)
    yield url
    drop_database(pg_server, name)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def backend_target(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """Where a fresh store of this backend lives: a SQLite path or a PostgreSQL URL."""
    if backend == "sqlite":
        return str(tmp_path / "memory.db")
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
def store_backend(backend_target: str) -> Iterator[lossless.Memory]:
    """A Memory on a fresh store of each backend (context window 4096, like ``mem``)."""
    mem = lossless.open(backend_target, context_window=4096)
    yield mem
    mem.close()


def open_backend(backend: str, shared_url: str, **config: Any) -> lossless.Memory:
    """A Memory for one hypothesis example: SQLite in memory, or the shared PostgreSQL
    database (the caller uses a conversation id of its own)."""
    return lossless.open(":memory:" if backend == "sqlite" else shared_url, **config)


@pytest.fixture(scope="session")
def shared_target(request: pytest.FixtureRequest) -> str:
    """For hypothesis tests run on both backends that keep each example in a conversation of
    its own: the session's shared PostgreSQL database in PostgreSQL mode (``":memory:"`` in
    SQLite mode, where only their SQLite side runs, so no server is started)."""
    return ":memory:" if store_mode(request.config) == "sqlite" else str(request.getfixturevalue("pg_shared"))


@pytest.fixture(scope="session")
def scratch_store(request: pytest.FixtureRequest) -> Callable[[], str]:
    """For tests that open a store per hypothesis example (function-scoped fixtures would be
    shared by every example): each call names a new empty store, ``":memory:"`` in SQLite
    mode, a schema of its own in the session's shared database in PostgreSQL mode."""
    if store_mode(request.config) == "sqlite":
        return lambda: ":memory:"
    shared = str(request.getfixturevalue("pg_shared"))
    return lambda: f"{shared}{'&' if '?' in shared else '?'}schema=scratch_{uuid.uuid4().hex[:12]}"


def raw_query(target: str, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Run one statement on a closed store behind lossless's back (to read what it wrote, or
    to tamper with it): ``?`` placeholders on both backends."""
    if target.startswith(("postgresql://", "postgres://")):
        import psycopg

        with psycopg.connect(target, autocommit=True) as conn:
            cur = conn.execute(sql.replace("?", "%s"), params)  # type: ignore[arg-type]
            return [tuple(r) for r in cur.fetchall()] if cur.description else []
    import apsw

    conn = apsw.Connection(target)
    try:
        return [tuple(r) for r in conn.execute(sql, params)]
    finally:
        conn.close()


def tamper(target: str, sql: str, params: tuple[Any, ...] = ()) -> None:
    """Run one write behind lossless's back with its immutability triggers off, as someone
    who drops them (or a disk that corrupts a page) would: what ``verify`` must catch."""
    if target.startswith(("postgresql://", "postgres://")):
        import psycopg

        with psycopg.connect(target, autocommit=True) as conn, conn.transaction():
            conn.execute("SET LOCAL session_replication_role = replica")  # no triggers fire
            conn.execute(sql.replace("?", "%s"), params)  # type: ignore[arg-type]
        return
    import apsw

    conn = apsw.Connection(target)
    try:
        with conn:
            triggers = [r[0] for r in conn.execute("SELECT sql FROM sqlite_master WHERE type = 'trigger'")]
            for (name,) in list(conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")):
                conn.execute(f'DROP TRIGGER "{name}"')
            conn.execute(sql, params)
            for text in triggers:
                conn.execute(text)
    finally:
        conn.close()


# --- the suite's store mode (``pytest --store=postgres``) -----------------------------------

STORE_MODES = ("sqlite", "postgres")


def store_mode(config: pytest.Config) -> str:
    """``sqlite`` (the default) or ``postgres``: where the suite's per-test stores live."""
    return str(config.getoption("--store"))


class StoreTarget:
    """Where a test's stores live, by name: ``store_target("a")`` is ``<tmp>/a.db`` in
    SQLite mode and an empty PostgreSQL database in PostgreSQL mode; the same name gives
    the same store again within one test (so a test can close and reopen it)."""

    def __init__(self, mode: str, folder: Path, new_database: Any, clone: Any = None) -> None:
        self.mode, self.folder, self._new_database, self._clone = mode, folder, new_database, clone
        self._databases: dict[str, str] = {}

    @property
    def on_postgres(self) -> bool:
        return self.mode == "postgres"

    def __call__(self, name: str = "memory") -> str:
        if not self.on_postgres:
            return str(self.folder / f"{name}.db")
        if name not in self._databases:
            self._databases[name] = str(self._new_database())
        return self._databases[name]

    def copy_of(self, source: str, name: str) -> str:
        """A store named ``name`` holding a copy of the closed store at ``source``."""
        if not self.on_postgres:
            shutil.copy(source, self(name))
            return self(name)
        self._databases[name] = str(self._clone(source))
        return self._databases[name]


@pytest.fixture
def store_target(request: pytest.FixtureRequest, tmp_path: Path) -> StoreTarget:
    """Targets for this test's stores in the suite's store mode (see :class:`StoreTarget`)."""
    mode = store_mode(request.config)
    borrowed = request.getfixturevalue("_pg_borrowed") if mode == "postgres" else None
    return StoreTarget(mode, tmp_path, lambda: borrowed.url(), lambda url: borrowed.clone(url))


@pytest.fixture(scope="session")
def lasting_store_target(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
                         ) -> Iterator[StoreTarget]:
    """Like ``store_target`` for module- or session-scoped fixtures: each name is a store of
    its own (a file, or a database cloned from the template) kept until the session ends."""
    mode = store_mode(request.config)
    server = request.getfixturevalue("pg_server") if mode == "postgres" else ""
    template = request.getfixturevalue("pg_template") if mode == "postgres" else ""
    made: list[str] = []

    def clone() -> str:
        made.append(f"lossless_l_{uuid.uuid4().hex[:12]}")
        return create_database(server, made[-1], template=template)

    yield StoreTarget(mode, tmp_path_factory.mktemp("lasting"), clone)
    for name in made:
        drop_database(server, name)
