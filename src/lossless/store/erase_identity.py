"""The schema step by which an erase also clears a message's name and metadata (SQLite
migration 16, PostgreSQL migration 17).

An erased message kept its ``name`` and ``metadata`` (issue 30: ``lossless export``
printed them): who said it and whatever the caller attached, personal data as much as
the text. Now the message trigger lets the two change only with the erase, and only to
nothing (``NULL`` and ``'{}'``); what an erase keeps is its place (id, seq, role, time,
tool call ids) and the tombstone's who, when and why.

Messages erased before the step are cleared by it: the hash of a message as erased
covers its name, so each such tombstone's hash is recomputed with the message's (the
step replaces the triggers that would refuse both), and its keyword row is rebuilt
without the name.
"""

from __future__ import annotations

import json
from typing import Any

from lossless.core.erasure import ERASED, erased_hash
from lossless.store.fts import index_text
from lossless.store.reindex import indexed_message_text

__all__ = ["postgres_step", "sqlite_step"]

_MSG = "lossless: messages are immutable (erase one with lossless erase / conv.erase())"
# never change; name and metadata left this list for the erase's own
_FIXED = ("rowid", "id", "conversation_id", "seq", "role", "tool_call_id", "created_at", "created_ts", "external_id")
_ERASABLE = ("content", "content_is_json", "tool_calls", "content_hash", "name", "metadata")
_SELECT = ("SELECT m.rowid, m.id, m.role, m.tool_calls, m.tool_call_id FROM messages m "
           "JOIN tombstones t ON t.message_id = m.id WHERE m.name IS NOT NULL OR m.metadata <> '{}'")


def _cleared(conn: Any) -> list[tuple[int, str, str, str]]:
    """Each erased message that still has a name or metadata: rowid, id, the hash of it
    as erased without them, and its keyword text."""
    out = []
    for rowid, mid, role, calls, call_id in conn.execute(_SELECT).fetchall():
        tool_calls = json.loads(calls) if calls else []
        out.append((int(rowid), mid, erased_hash(role, None, tool_calls, call_id),
                    indexed_message_text(None, ERASED, 0, calls)))
    return out


def sqlite_step(conn: Any) -> None:
    fixed = " OR ".join(f"NEW.{c} IS NOT OLD.{c}" for c in _FIXED)
    changed = " OR ".join(f"NEW.{c} IS NOT OLD.{c}" for c in _ERASABLE)
    conn.execute("DROP TRIGGER messages_immutable")
    conn.execute("DROP TRIGGER tombstones_no_update")
    # (migration 17 drops the trigram table: a store rewound past this step has none)
    trigram = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'messages_tri'").fetchone() is not None
    for rowid, mid, content_hash, text in _cleared(conn):
        conn.execute("UPDATE tombstones SET content_hash = ? WHERE message_id = ?", (content_hash, mid))
        conn.execute("UPDATE messages SET name = NULL, metadata = '{}', content_hash = ? WHERE rowid = ?",
                     (content_hash, rowid))
        conn.execute("DELETE FROM messages_fts WHERE rowid = ?", (rowid,))
        if trigram:
            conn.execute("DELETE FROM messages_tri WHERE rowid = ?", (rowid,))
        conn.execute("INSERT INTO messages_fts (rowid, text) VALUES (?, ?)", (rowid, index_text(text)))
    conn.execute(f"""
        -- Only the erase may change the text, and only to the marker its tombstone names,
        -- with no name and no metadata left.
        CREATE TRIGGER messages_immutable BEFORE UPDATE ON messages
        WHEN {fixed} OR (({changed}) AND NOT (NEW.content = '{ERASED}' AND NEW.content_is_json = 0
            AND NEW.name IS NULL AND NEW.metadata = '{{}}'
            AND EXISTS (SELECT 1 FROM tombstones t WHERE t.message_id = OLD.id AND t.content_hash = NEW.content_hash)))
        BEGIN SELECT RAISE(ABORT, '{_MSG}'); END;
        CREATE TRIGGER tombstones_no_update BEFORE UPDATE ON tombstones
        BEGIN SELECT RAISE(ABORT, 'lossless: tombstones are immutable'); END;
        """)


def postgres_step(conn: Any) -> None:
    from lossless.store.postgres.grep import search_document

    schema = f'"{conn.execute("SELECT current_schema()").fetchone()[0]}"'

    def row(cols: tuple[str, ...], which: str) -> str:
        return "ROW(" + ", ".join(f"{which}.{c}" for c in cols) + ")"

    conn.execute(f"""
        CREATE OR REPLACE FUNCTION {schema}.lossless_messages_guard() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_OP <> 'UPDATE' THEN
                RAISE EXCEPTION '{_MSG}' USING ERRCODE = 'restrict_violation';
            END IF;
            -- only the search vector may be recomputed (store/reindex.py); the text, the
            -- name and the metadata only by erase, to the marker and to nothing
            IF {row(_FIXED, 'NEW')} IS DISTINCT FROM {row(_FIXED, 'OLD')}
               OR ({row(_ERASABLE, 'NEW')} IS DISTINCT FROM {row(_ERASABLE, 'OLD')}
                   AND NOT (NEW.content = '{ERASED}' AND NEW.content_is_json = 0 AND NEW.name IS NULL
                            AND NEW.metadata = '{{}}' AND EXISTS (
                       SELECT 1 FROM {schema}.tombstones t
                       WHERE t.message_id = OLD.id AND t.content_hash = NEW.content_hash))) THEN
                RAISE EXCEPTION '{_MSG}' USING ERRCODE = 'restrict_violation';
            END IF;
            RETURN NEW;
        END $$
        """)
    cleared = _cleared(conn)
    if not cleared:
        return
    conn.execute(f"ALTER TABLE {schema}.tombstones DISABLE TRIGGER tombstones_immutable")
    for rowid, mid, content_hash, text in cleared:
        conn.execute(f"UPDATE {schema}.tombstones SET content_hash = %s WHERE message_id = %s", (content_hash, mid))
        conn.execute(f"UPDATE {schema}.messages SET name = NULL, metadata = '{{}}', content_hash = %s, "
                     "search = to_tsvector('simple', %s) WHERE rowid = %s", (content_hash, search_document(text), rowid))
    conn.execute(f"ALTER TABLE {schema}.tombstones ENABLE TRIGGER tombstones_immutable")
