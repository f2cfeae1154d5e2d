"""The long-term memory's tables (issue 28: plug-ins own their tables): migrations 4
(``memories``: the records, their keyword index and their vectors) and 13 on SQLite, 14 on
PostgreSQL (``tasks_and_forgetting``: where each conversation's task begins, and what the
forgetting policy removed). Registered with the store's schema
(:func:`lossless.store.schema.register`) when this package is imported.

Released migrations never change (``tests/test_schema_same.py`` pins the SQL they run).
``memory_flush`` is the store's (migration 5 makes it with the compaction tables), and so
are the steps that write the keyword rows of every table again, memories' too
(``keyword_forms``, ``cjk_bigrams``: :mod:`lossless.store.reindex`).
"""

from __future__ import annotations

from typing import Any

from lossless.store import schema
from lossless.store.schema import SchemaDialect, Step
from lossless.store.sqlite.migrations import fts_table

__all__: list[str] = []


def _memories(conn: Any, d: SchemaDialect) -> None:
    conn.execute(
        f"""
        -- Long-term memory records (lossless.longterm): facts, preferences, errors, patterns and
        -- task records that outlive a conversation. Unlike messages they are mutable and
        -- forgettable; the explicit integer key keeps the search/vector rowids stable.
        CREATE TABLE memories (
            rowid {d.rowid},
            id {d.key} NOT NULL UNIQUE,  -- mem_ + sha256(owner, content, created_at)[:20]
            kind TEXT NOT NULL CHECK (kind IN ('task', 'fact', 'preference', 'error', 'pattern')),
            content TEXT NOT NULL CHECK (length(content) > 0),
            content_hash TEXT NOT NULL,  -- sha256 of the normalised content: the dedupe key
            token_count INTEGER NOT NULL,
            importance {d.real} NOT NULL CHECK (importance BETWEEN 0 AND 1),
            user_id TEXT,
            agent_id TEXT,
            -- Derived, so it can never disagree with the owner columns.
            scope TEXT GENERATED ALWAYS AS (
                CASE WHEN user_id IS NOT NULL THEN 'user'
                     WHEN agent_id IS NOT NULL THEN 'agent' ELSE 'global' END
            ) {d.generated},
            metadata TEXT NOT NULL DEFAULT '{{}}',
            source_message_ids TEXT NOT NULL DEFAULT '[]',
            conversation_id TEXT,  -- no foreign key: a memory may outlive or precede its conversation
            created_at TEXT NOT NULL,  -- ISO 8601 as given (naive stays naive)
            created_ts {d.real} NOT NULL,
            last_used_at TEXT NOT NULL,  -- starts at created_at; use_count 0 means never recalled
            last_used_ts {d.real} NOT NULL,
            use_count INTEGER NOT NULL DEFAULT 0,
            updated_at TEXT NOT NULL,
            -- Task-level records (seed 003): NULL on every other kind.
            task_id TEXT,
            task_type TEXT,
            status TEXT,
            result TEXT,
            patterns TEXT,  -- JSON array of strings
            errors TEXT{d.part('memories_search_column')}     -- JSON array of strings
        );
        -- Same owner + same normalised content is one memory, even under concurrent writers.
        CREATE UNIQUE INDEX memories_dedupe
            ON memories (coalesce(user_id, ''), coalesce(agent_id, ''), content_hash);
        CREATE INDEX memories_owner ON memories (user_id, agent_id, kind);
        CREATE INDEX memories_last_used ON memories (last_used_ts);
        {d.part('memories_search')}
        -- One vector per memory (from whichever embedder last embedded it). A plain table
        -- scanned with numpy, not vec0 or pgvector: memory sets are small (a scan of
        -- thousands of vectors takes well under a millisecond), the visibility filter is
        -- plain SQL, and it works where the vector extensions cannot load.
        CREATE TABLE memory_vectors (
            memory_rowid {d.big} PRIMARY KEY REFERENCES memories(rowid) ON DELETE CASCADE,
            provider TEXT NOT NULL,
            model TEXT NOT NULL,
            dim INTEGER NOT NULL,
            text_sha256 TEXT NOT NULL,  -- what was embedded (the embedding_cache key)
            vector {d.blob} NOT NULL  -- float32, little-endian, L2-normalised
        );
        {d.part('memory_vectors_sha')}
        """
    )


def _tasks_and_forgetting(conn: Any, d: SchemaDialect) -> None:
    conn.execute(
        f"""
        -- Where each conversation's current task begins (seed 003: long-term memory by task):
        -- the messages after ended_seq are the task in hand; ending it writes its task
        -- record (lossless.longterm.tasks) and moves ended_seq to the conversation's end.
        CREATE TABLE task_bounds (
            conversation_id {d.key} PRIMARY KEY REFERENCES conversations(id),
            ended_seq {d.big} NOT NULL
        ){d.norowid};

        -- Memories the forgetting policy removed (seed 003: forget so memory does not grow
        -- without bound), each with its whole record as JSON: what went, why, and enough
        -- to put it back (Memories.restore). A manual forget() is a deletion for good and
        -- is not logged here.
        CREATE TABLE forgotten_memories (
            rowid {d.rowid},
            memory_id {d.key} NOT NULL,
            kind TEXT NOT NULL,
            content TEXT NOT NULL,
            user_id TEXT,
            agent_id TEXT,
            reason TEXT NOT NULL,  -- capacity | unused | importance
            record TEXT NOT NULL,  -- MemoryRecord.to_dict() as JSON
            forgotten_at TEXT NOT NULL,
            forgotten_ts {d.real} NOT NULL
        );
        CREATE INDEX forgotten_memories_id ON forgotten_memories (memory_id);
        CREATE INDEX forgotten_memories_ts ON forgotten_memories (forgotten_ts);
        """
    )


schema.register(
    Step("memories", 4, 4, _memories),
    sqlite_parts={"memories_search": "\n        ".join((fts_table("memories_fts"),
                                                          fts_table("memories_tri", "trigram")))},
    postgres_parts={
        "memories_search_column": ", search TSVECTOR",  # NULL while being re-indexed inside an update's transaction
        "memories_search": "CREATE INDEX memories_search ON memories USING gin (search);",
        "memory_vectors_sha": "CREATE INDEX memory_vectors_sha ON memory_vectors (text_sha256);",
    },
)
schema.register(Step("tasks_and_forgetting", 13, 14, _tasks_and_forgetting))
