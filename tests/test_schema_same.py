"""Released migrations never change (store/schema.py).

A database records the versions it ran; a step whose SQL changed would leave databases
made before and after with different schemas, and the runner would never notice. So the
SQL each migration executes on a fresh database is pinned here, per dialect, as a hash of
its text with comments and runs of whitespace taken out (neither reaches the database:
PostgreSQL keeps parsed definitions, SQLite keeps each statement's own text, which the
``sqlite_master`` hash below pins to the byte; PL/pgSQL bodies, kept verbatim, are hashed
as they are). The hashes were taken from the code before the two dialects' migrations were
written as one list.

THESE HASHES MUST NEVER CHANGE for a released migration: a schema change is a new step
at the end of ``STEPS`` with a new hash here, never an edit of an old one.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import apsw
import pytest

from lossless.store import schema
from lossless.store.postgres import migrations as pg_migrations
from lossless.store.sqlite import migrations as sqlite_migrations

SQLITE = {
    1: ("core", "8de945e901788ed0"),
    2: ("settings", "15591caadd777a87"),
    3: ("recall", "fd360bcc219ab8a0"),
    4: ("memories", "d1e820447ed11450"),
    5: ("compaction_state", "fd4928796b0c02f7"),
    6: ("files", "32d2f5af1b453d2a"),
    7: ("api_keys", "bb9e09249372d58c"),
    8: ("background_work", "b016bb0c342ee685"),
    9: ("proxy_requests", "09d8973981d41062"),
    10: ("keyword_forms", "c84f058ef1392ee3"),
    11: ("immutability", "373932b38fe32f2a"),
    12: ("compaction_timers", "adaa6f8c35be5909"),
    13: ("tasks_and_forgetting", "7a8bba511e30c832"),
    14: ("summary_roots", "dd8f9ecb79408008"),
    15: ("vector_checks", "36491b94b5617726"),
    16: ("erase_clears_identity", "41de1e97974a74d9"),
    17: ("cjk_bigrams", "4ba1cb2425d0c539"),
    18: ("wide_forms", "0199c926a2b376e3"),  # no statement: the rows of full-width text re-indexed
    19: ("json_escapes", "4a3a5d8c787a10c6"),  # the rows of JSON-escaped text re-indexed
}

POSTGRES = {
    1: ("core", "ebcd2db0246a0395"),
    2: ("settings", "f40e12bd881b8857"),
    3: ("recall", "de800e4c61bb1677"),
    4: ("memories", "a12e9c90e2a848c9"),
    5: ("compaction_state", "7fafd337b37cf753"),
    6: ("trigram", "5a18a20ce4a5cdd3"),  # on a server without pg_trgm (pgserver's)
    7: ("api_keys", "047d1e06213db39b"),
    8: ("files", "058e25cd079ee2e6"),  # on a server without pg_trgm
    9: ("background_work", "d7ef2fbfa251b8bf"),
    10: ("proxy_requests", "422341bb90fca6ad"),
    11: ("keyword_forms", "867495dc9807cfb8"),
    12: ("immutability", "984e56af8131e9a0"),  # the schema's name written as "<schema>"
    13: ("compaction_timers", "6201a64347fed8fb"),
    14: ("tasks_and_forgetting", "a85965ec1f11cfbd"),
    15: ("summary_roots", "dd8f9ecb79408008"),
    16: ("vector_checks", "afff0903291454ab"),
    17: ("erase_clears_identity", "aefa852b0129a7e8"),
    18: ("cjk_bigrams", "6d1180b671b051bc"),
    19: ("json_escapes", "4c575bbe1da30892"),  # the rows of JSON-escaped text re-indexed
}

# sqlite_master of a fresh database, FTS5's own shadow tables left out (FTS5 writes them).
SQLITE_MASTER = "2d992c7715b55b88"


def normalise(sql: str) -> str:
    """``sql`` without comments, each run of whitespace one space, outside quotes and
    ``$$`` bodies (kept to the letter); no trailing semicolon."""
    out: list[str] = []
    i = 0
    while i < len(sql):
        if sql.startswith("--", i):
            end = sql.find("\n", i)
            i = len(sql) if end < 0 else end
            if not out or out[-1] != " ":
                out.append(" ")
        elif sql[i] in "'\"" or sql.startswith("$$", i):
            quote = "$$" if sql[i] == "$" else sql[i]
            end = sql.index(quote, i + len(quote))
            while quote != "$$" and sql.startswith(quote * 2, end):  # '' inside a string
                end = sql.index(quote, end + 2)
            out.append(sql[i:end + len(quote)])
            i = end + len(quote)
        elif sql[i].isspace():
            if not out or out[-1] != " ":
                out.append(" ")
            i += 1
        else:
            out.append(sql[i])
            i += 1
    return "".join(out).strip().rstrip(";").strip()


def test_normalise() -> None:
    assert normalise("CREATE TABLE t (\n  a TEXT, -- why\n  b TEXT DEFAULT 'it''s  -- x'\n);\n") == (
        "CREATE TABLE t ( a TEXT, b TEXT DEFAULT 'it''s  -- x' )")
    assert normalise("AS $$\n  -- kept\n$$;") == "AS $$\n  -- kept\n$$"


class _Recording:
    """A connection that notes the SQL sent through it."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.sent: list[str] = []

    def execute(self, sql: str, *args: Any) -> Any:
        self.sent.append(sql)
        return self.conn.execute(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.conn, name)


def _fingerprints(conn: Any, module: Any, schema_name: str | None = None) -> dict[int, tuple[str, str]]:
    """Each migration of ``module`` run on ``conn`` (a fresh database): its name and the
    hash of the SQL it sent."""
    recording = _Recording(conn)
    found = {}
    for version, name, step in module.MIGRATIONS:
        recording.sent = []
        with module.DIALECT.transaction(conn):
            step(recording)
        sent = recording.sent if schema_name is None else [
            sql.replace(f'"{schema_name}".', '"<schema>".') for sql in recording.sent]
        text = "; ".join(s for s in map(normalise, sent) if s)
        found[version] = (name, hashlib.sha256(text.encode()).hexdigest()[:16])
    return found


def test_sqlite_migrations_send_the_sql_they_always_did() -> None:
    assert _fingerprints(apsw.Connection(":memory:"), sqlite_migrations) == SQLITE


def test_a_fresh_sqlite_database_has_the_schema_it_always_had() -> None:
    conn = apsw.Connection(":memory:")
    sqlite_migrations.migrate(conn)
    rows = [list(r) for r in conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY name")]
    virtual = {r[1] for r in rows if (r[3] or "").startswith("CREATE VIRTUAL TABLE")}
    ours = [r for r in rows if not any(r[1].startswith(f"{v}_") for v in virtual)]
    assert hashlib.sha256(json.dumps(ours).encode()).hexdigest()[:16] == SQLITE_MASTER


@pytest.mark.postgres
def test_postgres_migrations_send_the_sql_they_always_did(pg_url: str) -> None:
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA schema_same")
        conn.execute("SET search_path TO schema_same, public")
        trgm = conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'pg_trgm'").fetchone()
        found = _fingerprints(conn, pg_migrations, "schema_same")
    expected = dict(POSTGRES)
    if trgm is not None:  # the pinned hashes are of a server without it: those two steps differ
        for version in (6, 8):
            expected[version] = found[version]
    assert found == expected


def test_every_part_and_step_of_a_dialect_has_a_place() -> None:
    """A dialect's part names a place in the shared text, and its steps a step it has: a
    misspelt name would leave a statement out without a word."""
    with open(schema.__file__, encoding="utf-8") as f:
        text = f.read()
    for module in (sqlite_migrations, pg_migrations):
        d = module.SCHEMA
        assert [p for p in d.parts if f"d.part('{p}')" not in text] == []
        own = {name for _, name, _ in module.MIGRATIONS}
        assert set(d.steps) <= own
