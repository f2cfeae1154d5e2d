"""PostgreSQL's spelling of the schema (:mod:`lossless.store.schema`) and how PostgreSQL
takes a migration's transaction.

The statements both stores run are written once, in :mod:`lossless.store.schema`: the
tables mirror SQLite's column for column (ISO 8601 text next to Unix seconds, JSON as
text, 0/1 flags as smallint), so ``lossless migrate`` copies rows as they are and a
message hashes the same on both. Here is what only PostgreSQL has: a ``tsvector`` column
with a GIN index instead of the FTS5 tables, the pg_trgm indexes, and the immutability
triggers in PL/pgSQL (the plug-ins' own parts are in their ``schema.py``). Several processes may open a fresh database at once: every
migration transaction first takes an advisory lock keyed by the schema, then re-checks
what is applied, so each migration runs exactly once.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any

from lossless.core.erasure import ERASED
from lossless.core.errors import MigrationError
from lossless.store import migrator, schema
from lossless.store.migrator import Migration

__all__ = ["MIGRATIONS", "applied", "migrate", "pending", "trigram_ops"]  # noqa: F822 (MIGRATIONS: __getattr__)


def _gin(table: str) -> str:
    return f"CREATE INDEX {table}_search ON {table} USING gin (search);"


_PARTS = {
    # 'simple' config: no stemming, no stopwords, identifiers (src/app.py, v2.3.1) stay
    # whole; the writer appends their parts and CJK bigrams (store/postgres/grep.py)
    "search_column": " search TSVECTOR NOT NULL,",
    "messages_search": _gin("messages"),
    "summaries_search": _gin("summaries"),
    "embedding_cache_sha": "CREATE INDEX embedding_cache_sha ON embedding_cache (text_sha256);",
    "recall_units_sha": "CREATE INDEX recall_units_sha ON recall_units (text_sha256);",
}


def _trigram(conn: Any) -> None:
    # pg_trgm is a contrib module: most servers have it, some builds (pgserver's) do not.
    # With it, a GIN trigram index serves substring and regex pre-filters (one-character
    # CJK terms were ILIKE matches here until migration 18; they are prefix terms now).
    row = conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'pg_trgm'").fetchone()
    if row is None:
        return
    try:
        with conn.transaction():  # a savepoint: a role that may not create extensions goes without
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm WITH SCHEMA public")
    except Exception:
        return
    ops = trigram_ops(conn)
    conn.execute(f"CREATE INDEX messages_trigram ON messages USING gin (content {ops})")
    conn.execute(f"CREATE INDEX summaries_trigram ON summaries USING gin (content {ops})")
    conn.execute(f"CREATE INDEX memories_trigram ON memories USING gin (content {ops})")


def trigram_ops(conn: Any) -> str | None:
    """The qualified ``gin_trgm_ops`` when pg_trgm is installed (migration 6), else None."""
    row = conn.execute(
        "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
        "WHERE e.extname = 'pg_trgm'"
    ).fetchone()
    return f'"{row[0]}".gin_trgm_ops' if row is not None else None


def _keyword_forms(conn: Any) -> None:
    # search_document() now adds the extra forms of compounds (store/fts.py's
    # index_extras), so every search vector is computed again.
    from lossless.store.reindex import reindex_postgres

    reindex_postgres(conn)


def _immutability(conn: Any) -> None:
    schema = conn.execute("SELECT current_schema()").fetchone()[0]
    conn.execute(_guards(f'"{schema}"'))


def _guards(schema: str) -> str:
    """The trigger functions of migration 12. Tables are named with their schema: a
    trigger runs under the search_path of whoever writes, which may name another."""
    msg = "lossless: messages are immutable (erase one with lossless erase / conv.erase())"
    fixed = ", ".join(("rowid", "id", "conversation_id", "seq", "role", "name", "tool_call_id", "created_at",
                       "created_ts", "metadata", "external_id"))
    text = ", ".join(("content", "content_is_json", "tool_calls", "content_hash"))
    span = ", ".join(("rowid", "id", "conversation_id", "depth", "first_seq", "last_seq", "earliest_at", "latest_at",
                      "earliest_ts", "latest_ts", "descendant_count", "source_token_count", "created_at"))

    def row(cols: str, which: str) -> str:
        return "ROW(" + ", ".join(f"{which}.{c.strip()}" for c in cols.split(",")) + ")"

    erased_in_span = (f"EXISTS (SELECT 1 FROM {schema}.tombstones t WHERE t.conversation_id = OLD.conversation_id "
                      "AND t.seq BETWEEN OLD.first_seq AND OLD.last_seq)")
    return f"""
        CREATE FUNCTION {schema}.lossless_messages_guard() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_OP <> 'UPDATE' THEN
                RAISE EXCEPTION '{msg}' USING ERRCODE = 'restrict_violation';
            END IF;
            -- only the search vector may be recomputed (store/reindex.py); the text only by erase
            IF {row(fixed, 'NEW')} IS DISTINCT FROM {row(fixed, 'OLD')}
               OR ({row(text, 'NEW')} IS DISTINCT FROM {row(text, 'OLD')}
                   AND NOT (NEW.content = '{ERASED}' AND NEW.content_is_json = 0 AND EXISTS (
                       SELECT 1 FROM {schema}.tombstones t
                       WHERE t.message_id = OLD.id AND t.content_hash = NEW.content_hash))) THEN
                RAISE EXCEPTION '{msg}' USING ERRCODE = 'restrict_violation';
            END IF;
            RETURN NEW;
        END $$;
        CREATE TRIGGER messages_immutable BEFORE UPDATE OR DELETE ON {schema}.messages
            FOR EACH ROW EXECUTE FUNCTION {schema}.lossless_messages_guard();

        CREATE FUNCTION {schema}.lossless_summaries_guard() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_OP <> 'UPDATE' THEN
                RAISE EXCEPTION 'lossless: summaries are never deleted' USING ERRCODE = 'restrict_violation';
            END IF;
            IF {row(span, 'NEW')} IS DISTINCT FROM {row(span, 'OLD')}
               OR (OLD.parent_id IS NOT NULL AND NEW.parent_id IS DISTINCT FROM OLD.parent_id) THEN
                RAISE EXCEPTION 'lossless: a summary''s span and parent are immutable'
                    USING ERRCODE = 'restrict_violation';
            END IF;
            IF NEW.content IS DISTINCT FROM OLD.content
               AND NOT EXISTS (SELECT 1 FROM {schema}.summary_revisions r
                               WHERE r.summary_id = OLD.id AND r.content = OLD.content)
               AND NOT {erased_in_span} THEN
                RAISE EXCEPTION 'lossless: a summary''s text changes only by revise_summary or erase'
                    USING ERRCODE = 'restrict_violation';
            END IF;
            RETURN NEW;
        END $$;
        CREATE TRIGGER summaries_immutable BEFORE UPDATE OR DELETE ON {schema}.summaries
            FOR EACH ROW EXECUTE FUNCTION {schema}.lossless_summaries_guard();

        -- an erase drops the earlier texts of the summaries over it (they may quote it)
        CREATE FUNCTION {schema}.lossless_revisions_guard() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_OP = 'DELETE' AND EXISTS (
                SELECT 1 FROM {schema}.summaries s JOIN {schema}.tombstones t ON t.conversation_id = s.conversation_id
                AND t.seq BETWEEN s.first_seq AND s.last_seq WHERE s.id = OLD.summary_id) THEN
                RETURN OLD;
            END IF;
            RAISE EXCEPTION 'lossless: % rows are immutable', TG_TABLE_NAME USING ERRCODE = 'restrict_violation';
        END $$;
        CREATE TRIGGER summary_revisions_immutable BEFORE UPDATE OR DELETE ON {schema}.summary_revisions
            FOR EACH ROW EXECUTE FUNCTION {schema}.lossless_revisions_guard();

        CREATE FUNCTION {schema}.lossless_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            RAISE EXCEPTION 'lossless: % rows are immutable', TG_TABLE_NAME USING ERRCODE = 'restrict_violation';
        END $$;
        CREATE TRIGGER summary_sources_immutable BEFORE UPDATE OR DELETE ON {schema}.summary_sources
            FOR EACH ROW EXECUTE FUNCTION {schema}.lossless_append_only();
        CREATE TRIGGER tombstones_immutable BEFORE UPDATE OR DELETE ON {schema}.tombstones
            FOR EACH ROW EXECUTE FUNCTION {schema}.lossless_append_only();
        -- TRUNCATE fires no row trigger
        CREATE TRIGGER messages_no_truncate BEFORE TRUNCATE ON {schema}.messages
            FOR EACH STATEMENT EXECUTE FUNCTION {schema}.lossless_append_only();
        CREATE TRIGGER summaries_no_truncate BEFORE TRUNCATE ON {schema}.summaries
            FOR EACH STATEMENT EXECUTE FUNCTION {schema}.lossless_append_only();
        CREATE TRIGGER summary_sources_no_truncate BEFORE TRUNCATE ON {schema}.summary_sources
            FOR EACH STATEMENT EXECUTE FUNCTION {schema}.lossless_append_only();
        CREATE TRIGGER tombstones_no_truncate BEFORE TRUNCATE ON {schema}.tombstones
            FOR EACH STATEMENT EXECUTE FUNCTION {schema}.lossless_append_only();
        """


def _lock(conn: Any) -> None:
    # One migrator per schema at a time, across processes and hosts.
    conn.execute("SELECT pg_advisory_xact_lock(hashtext('lossless.migrate'), hashtext(current_schema()))")


def _erase_clears_identity(conn: Any) -> None:
    # an erase clears the message's name and metadata too (store/erase_identity.py)
    from lossless.store.erase_identity import postgres_step

    postgres_step(conn)


def _cjk_bigrams(conn: Any) -> None:
    # The CJK terms of search_document() are now store/fts.py's cjk_index_terms (each
    # run's bigrams and its last character, so a one-character query is a prefix term that
    # finds the character anywhere): rows holding CJK get them.
    from lossless.store.reindex import reindex_cjk_postgres

    reindex_cjk_postgres(conn)


def _json_escapes(conn: Any) -> None:
    # The text a row's JSON escapes (\u676d) spell is in its search vector too
    # (search_document): rows holding escapes get it.
    from lossless.store.reindex import reindex_escaped_postgres

    reindex_escaped_postgres(conn)


SCHEMA = schema.SchemaDialect(
    # COLLATE "C": ids, paths and ISO times order byte-wise, as they do in SQLite, whatever
    # the database's locale (so "under this directory" is an index range on both).
    name="postgres", key='TEXT COLLATE "C"', big="BIGINT", real="DOUBLE PRECISION", flag="SMALLINT",
    blob="BYTEA",
    # GENERATED BY DEFAULT so `lossless migrate` can keep SQLite's rowids; an identity
    # never hands out a value twice, as SQLite's AUTOINCREMENT does.
    rowid="BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY",
    serial="BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY",
    norowid="", generated="STORED", placeholder="%s", parts=_PARTS,
    steps={"trigram": _trigram, "keyword_forms": _keyword_forms, "immutability": _immutability,
           "erase_clears_identity": _erase_clears_identity, "cjk_bigrams": _cjk_bigrams,
           "json_escapes": _json_escapes},
)


@contextmanager
def _transaction(conn: Any) -> Iterator[None]:
    with conn.transaction():
        _lock(conn)
        yield


def _ensure_table(conn: Any) -> None:
    with _transaction(conn):
        conn.execute(migrator.TABLE)


DIALECT = migrator.Dialect(transaction=_transaction, ensure_table=_ensure_table, placeholder="%s")
_SCHEMA = migrator.Schema(partial(schema.migrations, SCHEMA), DIALECT)
applied, pending = _SCHEMA.applied, _SCHEMA.pending


def __getattr__(name: str) -> list[tuple[int, str, Migration]]:
    # MIGRATIONS is made on first use: the plug-ins' steps are registered when they are imported.
    if name == "MIGRATIONS":
        return _SCHEMA.migrations.steps
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def migrate(conn: Any, upto: int | None = None) -> list[int]:
    """Apply every pending migration (up to ``upto``), each in its own transaction, on an
    autocommit connection whose ``search_path`` names the target schema first."""
    if conn.execute("SELECT current_schema()").fetchone()[0] is None:
        raise MigrationError("no schema to migrate: the search_path names no existing schema")
    return _SCHEMA.migrate(conn, upto)
