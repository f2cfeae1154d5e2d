"""SQLite's spelling of the schema (:mod:`lossless.store.schema`) and how SQLite takes a
migration's transaction.

The statements both stores run are written once, in :mod:`lossless.store.schema`; here is
what only SQLite has: the FTS5 tables the keyword search reads, the immutability triggers,
and the steps that write the FTS rows again (the plug-ins' own FTS5 and vector tables are
in their ``schema.py``). Each migration runs in its own transaction and is recorded in ``schema_migrations``
by the shared runner, :mod:`lossless.store.migrator`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any

from lossless.core.erasure import ERASED
from lossless.store import migrator, schema
from lossless.store.migrator import Migration

__all__ = ["MIGRATIONS", "applied", "fts_table", "migrate", "pending"]  # noqa: F822 (MIGRATIONS: __getattr__)


def fts_table(table: str, tokenize: str = "unicode61 remove_diacritics 2") -> str:
    """An FTS5 table over one ``text`` column (the plug-ins' search tables are made with it too)."""
    # Contentless (content=''): the text lives once, in the table it indexes; rowids match.
    return f"""CREATE VIRTUAL TABLE {table} USING fts5(
            text, content='', contentless_delete=1, tokenize='{tokenize}'
        );"""


_PARTS = {
    # unicode61 for word search, trigram so CJK text without spaces and substrings are found
    # too (until migration 17: CJK words are bigrams of the unicode61 rows now).
    "core_search": "\n        ".join((fts_table("messages_fts"), fts_table("messages_tri", "trigram"),
                                      fts_table("summaries_fts"), fts_table("summaries_tri", "trigram"))),
}


def _keyword_forms(conn: Any) -> None:
    # The unicode61 rows now carry the extra forms of compounds (store/fts.py's
    # index_text: "follow-up" also as "followup", "5km" also as "5 km"): rows written
    # before get them too.
    from lossless.store.reindex import reindex_sqlite

    reindex_sqlite(conn)


def _immutability(conn: Any) -> None:
    conn.execute(_guards())


def _guards() -> str:
    """The triggers of migration 11: messages, summary spans and edges, tombstones."""
    msg = "lossless: messages are immutable (erase one with lossless erase / conv.erase())"
    fixed = " OR ".join(f"NEW.{c} IS NOT OLD.{c}" for c in (
        "rowid", "id", "conversation_id", "seq", "role", "name", "tool_call_id", "created_at", "created_ts",
        "metadata", "external_id"))
    text = " OR ".join(f"NEW.{c} IS NOT OLD.{c}" for c in (
        "content", "content_is_json", "tool_calls", "content_hash"))
    span = " OR ".join(f"NEW.{c} IS NOT OLD.{c}" for c in (
        "rowid", "id", "conversation_id", "depth", "first_seq", "last_seq", "earliest_at", "latest_at", "earliest_ts",
        "latest_ts", "descendant_count", "source_token_count", "created_at"))
    erased_in_span = ("EXISTS (SELECT 1 FROM tombstones t WHERE t.conversation_id = OLD.conversation_id "
                      "AND t.seq BETWEEN OLD.first_seq AND OLD.last_seq)")
    return f"""
        CREATE TRIGGER messages_no_delete BEFORE DELETE ON messages
        BEGIN SELECT RAISE(ABORT, '{msg}'); END;
        -- Only the erase may change the text, and only to the marker its tombstone names.
        CREATE TRIGGER messages_immutable BEFORE UPDATE ON messages
        WHEN {fixed} OR (({text}) AND NOT (NEW.content = '{ERASED}' AND NEW.content_is_json = 0
            AND EXISTS (SELECT 1 FROM tombstones t WHERE t.message_id = OLD.id AND t.content_hash = NEW.content_hash)))
        BEGIN SELECT RAISE(ABORT, '{msg}'); END;

        CREATE TRIGGER summaries_no_delete BEFORE DELETE ON summaries
        BEGIN SELECT RAISE(ABORT, 'lossless: summaries are never deleted'); END;
        -- A summary's span never changes; its parent is set once (when it is condensed).
        CREATE TRIGGER summaries_span BEFORE UPDATE ON summaries
        WHEN {span} OR (OLD.parent_id IS NOT NULL AND NEW.parent_id IS NOT OLD.parent_id)
        BEGIN SELECT RAISE(ABORT, 'lossless: a summary''s span and parent are immutable'); END;
        -- Its text changes when it is redone (the old text kept in summary_revisions first)
        -- or when a message it covers is erased.
        CREATE TRIGGER summaries_text BEFORE UPDATE OF content ON summaries
        WHEN NEW.content IS NOT OLD.content
            AND NOT EXISTS (SELECT 1 FROM summary_revisions r WHERE r.summary_id = OLD.id AND r.content = OLD.content)
            AND NOT {erased_in_span}
        BEGIN SELECT RAISE(ABORT, 'lossless: a summary''s text changes only by revise_summary or erase'); END;
        CREATE TRIGGER summary_sources_no_update BEFORE UPDATE ON summary_sources
        BEGIN SELECT RAISE(ABORT, 'lossless: summary sources are immutable'); END;
        CREATE TRIGGER summary_sources_no_delete BEFORE DELETE ON summary_sources
        BEGIN SELECT RAISE(ABORT, 'lossless: summary sources are immutable'); END;
        CREATE TRIGGER summary_revisions_no_update BEFORE UPDATE ON summary_revisions
        BEGIN SELECT RAISE(ABORT, 'lossless: summary revisions are immutable'); END;
        -- an erase drops the earlier texts of the summaries over it (they may quote it)
        CREATE TRIGGER summary_revisions_no_delete BEFORE DELETE ON summary_revisions
        WHEN NOT EXISTS (SELECT 1 FROM summaries s WHERE s.id = OLD.summary_id AND EXISTS (
            SELECT 1 FROM tombstones t WHERE t.conversation_id = s.conversation_id
            AND t.seq BETWEEN s.first_seq AND s.last_seq))
        BEGIN SELECT RAISE(ABORT, 'lossless: summary revisions are immutable'); END;
        CREATE TRIGGER tombstones_no_update BEFORE UPDATE ON tombstones
        BEGIN SELECT RAISE(ABORT, 'lossless: tombstones are immutable'); END;
        CREATE TRIGGER tombstones_no_delete BEFORE DELETE ON tombstones
        BEGIN SELECT RAISE(ABORT, 'lossless: tombstones are immutable'); END;
    """


def _erase_clears_identity(conn: Any) -> None:
    # an erase clears the message's name and metadata too (store/erase_identity.py)
    from lossless.store.erase_identity import sqlite_step

    sqlite_step(conn)


def _cjk_bigrams(conn: Any) -> None:
    # CJK text is indexed as words (issue 27): character bigrams and each run's last
    # character on a line of the unicode61 rows (store/fts.py's cjk_index_terms), which
    # find two-character words (公园) that trigrams cannot. Rows written before get them;
    # the trigram indexes of messages, summaries and memories served only CJK and go
    # (dropped with secure_delete on, their pages are zeroed). file_chunks_tri stays: it
    # finds substrings inside identifiers.
    from lossless.store.reindex import reindex_cjk_sqlite

    reindex_cjk_sqlite(conn)
    for table in ("messages_tri", "summaries_tri", "memories_tri"):
        conn.execute(f"DROP TABLE IF EXISTS {table}")


def _wide_forms(conn: Any) -> None:
    # Full-width letters and digits (ｉＰｈｏｎｅ１５, ２０２４) are indexed with their plain
    # forms too, as a query is read in them (store/fts.py): rows written before get them.
    from lossless.store.reindex import reindex_wide_sqlite

    reindex_wide_sqlite(conn)


def _json_escapes(conn: Any) -> None:
    # A tool result written by json.dumps (ensure_ascii, its default) holds its Chinese as
    # \u escapes (\u676d\u5dde): the text they spell is indexed too (store/fts.py's escaped_text), and
    # rows written before get it.
    from lossless.store.reindex import reindex_escaped_sqlite

    reindex_escaped_sqlite(conn)


SCHEMA = schema.SchemaDialect(
    name="sqlite", key="TEXT", big="INTEGER", real="REAL", flag="INTEGER", blob="BLOB",
    # INTEGER PRIMARY KEY is the rowid itself; AUTOINCREMENT never hands one out twice
    rowid="INTEGER PRIMARY KEY", serial="INTEGER PRIMARY KEY AUTOINCREMENT",
    norowid=" WITHOUT ROWID", generated="VIRTUAL", placeholder="?", parts=_PARTS,
    steps={"keyword_forms": _keyword_forms, "immutability": _immutability,
           "erase_clears_identity": _erase_clears_identity, "cjk_bigrams": _cjk_bigrams,
           "wide_forms": _wide_forms, "json_escapes": _json_escapes},
)


def _ensure_table(conn: Any) -> None:
    conn.execute(migrator.TABLE)  # outside a transaction: opening takes no write lock


@contextmanager
def _transaction(conn: Any) -> Iterator[None]:
    conn.execute("BEGIN IMMEDIATE")  # the write lock first: one migrator at a time
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


DIALECT = migrator.Dialect(transaction=_transaction, ensure_table=_ensure_table, placeholder="?")
_SCHEMA = migrator.Schema(partial(schema.migrations, SCHEMA), DIALECT)
applied, pending, migrate = _SCHEMA.applied, _SCHEMA.pending, _SCHEMA.migrate


def __getattr__(name: str) -> list[tuple[int, str, Migration]]:
    # MIGRATIONS is made on first use: the plug-ins' steps are registered when they are imported.
    if name == "MIGRATIONS":
        return _SCHEMA.migrations.steps
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
