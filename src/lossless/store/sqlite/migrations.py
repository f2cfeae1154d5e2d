"""Numbered, transactional schema migrations for the SQLite store.

Each migration runs in its own transaction and is recorded in ``schema_migrations``;
a database written by newer code (a version we do not know) is refused, not guessed at.
The runner is :mod:`lossless.store.migrator`, shared with PostgreSQL; this module holds
SQLite's schema and how SQLite takes a migration's transaction.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from lossless.core.erasure import ERASED
from lossless.store import migrator
from lossless.store.migrator import Migration

__all__ = ["MIGRATIONS", "applied", "migrate", "pending"]

_SCHEMA = migrator.Migrations()
MIGRATIONS: list[tuple[int, str, Migration]] = _SCHEMA.steps
migration = _SCHEMA.migration


@migration(1, "core")
def _core(conn: Any) -> None:
    conn.execute(
        """
        CREATE TABLE conversations (
            id TEXT PRIMARY KEY,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            metadata TEXT NOT NULL DEFAULT '{}',
            last_seq INTEGER NOT NULL DEFAULT 0  -- next seq is last_seq + 1, bumped in the insert transaction
        );

        -- An explicit INTEGER PRIMARY KEY so the FTS tables can key on a stable rowid.
        CREATE TABLE messages (
            rowid INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            conversation_id TEXT NOT NULL REFERENCES conversations(id),
            seq INTEGER NOT NULL,
            role TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
            name TEXT,
            content TEXT,
            content_is_json INTEGER NOT NULL DEFAULT 0,  -- 1: content holds JSON content parts
            tool_calls TEXT,
            tool_call_id TEXT,
            created_at TEXT NOT NULL,  -- ISO 8601 exactly as given (naive stays naive)
            created_ts REAL NOT NULL,  -- Unix seconds (naive read as UTC), for ordering and ranges
            token_count INTEGER NOT NULL,
            metadata TEXT NOT NULL DEFAULT '{}',
            external_id TEXT,
            content_hash TEXT NOT NULL,
            UNIQUE (conversation_id, seq)
        );
        CREATE UNIQUE INDEX messages_external_id
            ON messages (conversation_id, external_id) WHERE external_id IS NOT NULL;
        CREATE INDEX messages_time ON messages (conversation_id, created_ts);

        CREATE TABLE summaries (
            rowid INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            conversation_id TEXT NOT NULL REFERENCES conversations(id),
            depth INTEGER NOT NULL CHECK (depth >= 0),
            content TEXT NOT NULL,
            token_count INTEGER NOT NULL,
            first_seq INTEGER NOT NULL,
            last_seq INTEGER NOT NULL,
            earliest_at TEXT NOT NULL,
            latest_at TEXT NOT NULL,
            earliest_ts REAL NOT NULL,
            latest_ts REAL NOT NULL,
            descendant_count INTEGER NOT NULL,
            source_token_count INTEGER NOT NULL,
            summarizer TEXT NOT NULL,
            fallback_level INTEGER NOT NULL DEFAULT 0,
            created_at TEXT NOT NULL,
            metadata TEXT NOT NULL DEFAULT '{}',
            -- Set in the same transaction that writes the parent: NULL means on the frontier.
            parent_id TEXT REFERENCES summaries(id),
            CHECK (first_seq <= last_seq)
        );
        -- The frontier is read before every assembly: keep it an index range, not a scan.
        CREATE INDEX summaries_frontier
            ON summaries (conversation_id, first_seq) WHERE parent_id IS NULL;
        CREATE INDEX summaries_span ON summaries (conversation_id, depth, first_seq);

        CREATE TABLE summary_sources (
            summary_id TEXT NOT NULL REFERENCES summaries(id),
            ord INTEGER NOT NULL,
            source_kind TEXT NOT NULL CHECK (source_kind IN ('message', 'summary')),
            source_id TEXT NOT NULL,
            PRIMARY KEY (summary_id, ord)
        ) WITHOUT ROWID;
        CREATE INDEX summary_sources_source ON summary_sources (source_id);

        -- Contentless FTS (content=''): the text lives once, in messages/summaries; rowids
        -- match theirs. unicode61 for word search, trigram so CJK text without spaces and
        -- substrings are found too.
        CREATE VIRTUAL TABLE messages_fts USING fts5(
            text, content='', contentless_delete=1, tokenize='unicode61 remove_diacritics 2'
        );
        CREATE VIRTUAL TABLE messages_tri USING fts5(
            text, content='', contentless_delete=1, tokenize='trigram'
        );
        CREATE VIRTUAL TABLE summaries_fts USING fts5(
            text, content='', contentless_delete=1, tokenize='unicode61 remove_diacritics 2'
        );
        CREATE VIRTUAL TABLE summaries_tri USING fts5(
            text, content='', contentless_delete=1, tokenize='trigram'
        );
        """
    )


@migration(2, "settings")
def _settings(conn: Any) -> None:
    # Per-database defaults (e.g. the context window the CLI was told once), JSON values.
    conn.execute("CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL)")


@migration(3, "recall")
def _recall(conn: Any) -> None:
    conn.execute(
        """
        -- Keyed by what produced the vector and a hash of the exact text: the same text is
        -- never embedded twice by the same model, across conversations and restarts.
        CREATE TABLE embedding_cache (
            provider TEXT NOT NULL,
            model TEXT NOT NULL,
            text_sha256 TEXT NOT NULL,
            dim INTEGER NOT NULL,
            vector BLOB NOT NULL,  -- float32, little-endian, L2-normalised
            created_at TEXT NOT NULL,
            PRIMARY KEY (provider, model, text_sha256)
        ) WITHOUT ROWID;

        -- What recall retrieves: a message (or one passage of a long one) or a window of
        -- three user->assistant pairs. Appended only, so rowid order is creation order.
        CREATE TABLE recall_units (
            rowid INTEGER PRIMARY KEY,
            conversation_id TEXT NOT NULL REFERENCES conversations(id),
            kind TEXT NOT NULL CHECK (kind IN ('message', 'window')),
            first_seq INTEGER NOT NULL,
            last_seq INTEGER NOT NULL,
            part INTEGER NOT NULL DEFAULT 0,
            role TEXT,
            message_ids TEXT NOT NULL,
            text TEXT NOT NULL,
            text_sha256 TEXT NOT NULL,
            start_ts REAL NOT NULL,
            end_ts REAL NOT NULL,
            UNIQUE (conversation_id, kind, first_seq, last_seq, part)
        );
        CREATE INDEX recall_units_conv ON recall_units (conversation_id, rowid);

        -- How far units have been cut from each conversation's messages.
        CREATE TABLE recall_progress (
            conversation_id TEXT PRIMARY KEY REFERENCES conversations(id),
            message_seq INTEGER NOT NULL DEFAULT 0,  -- messages up to here have units
            window_seq INTEGER NOT NULL DEFAULT 0    -- the next window starts after this seq
        );

        -- One vector index per embedder (provider, model, dim); progress per conversation.
        CREATE TABLE vector_indexes (
            name TEXT PRIMARY KEY,
            provider TEXT NOT NULL,
            model TEXT NOT NULL,
            dim INTEGER NOT NULL,
            backend TEXT NOT NULL
        );
        CREATE TABLE vector_progress (
            index_name TEXT NOT NULL REFERENCES vector_indexes(name),
            conversation_id TEXT NOT NULL,
            unit_rowid INTEGER NOT NULL,  -- units up to this rowid are in the index
            PRIMARY KEY (index_name, conversation_id)
        ) WITHOUT ROWID;
        """
    )



@migration(4, "memories")
def _memories(conn: Any) -> None:
    conn.execute(
        """
        -- Long-term memory records (lossless.longterm): facts, preferences, errors, patterns and
        -- task records that outlive a conversation. Unlike messages they are mutable and
        -- forgettable; the explicit INTEGER PRIMARY KEY keeps the FTS/vector rowids stable.
        CREATE TABLE memories (
            rowid INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,  -- mem_ + sha256(owner, content, created_at)[:20]
            kind TEXT NOT NULL CHECK (kind IN ('task', 'fact', 'preference', 'error', 'pattern')),
            content TEXT NOT NULL CHECK (length(content) > 0),
            content_hash TEXT NOT NULL,  -- sha256 of the normalised content: the dedupe key
            token_count INTEGER NOT NULL,
            importance REAL NOT NULL CHECK (importance BETWEEN 0 AND 1),
            user_id TEXT,
            agent_id TEXT,
            -- Derived, so it can never disagree with the owner columns.
            scope TEXT GENERATED ALWAYS AS (
                CASE WHEN user_id IS NOT NULL THEN 'user'
                     WHEN agent_id IS NOT NULL THEN 'agent' ELSE 'global' END
            ) VIRTUAL,
            metadata TEXT NOT NULL DEFAULT '{}',
            source_message_ids TEXT NOT NULL DEFAULT '[]',
            conversation_id TEXT,  -- no foreign key: a memory may outlive or precede its conversation
            created_at TEXT NOT NULL,  -- ISO 8601 as given (naive stays naive)
            created_ts REAL NOT NULL,
            last_used_at TEXT NOT NULL,  -- starts at created_at; use_count 0 means never recalled
            last_used_ts REAL NOT NULL,
            use_count INTEGER NOT NULL DEFAULT 0,
            updated_at TEXT NOT NULL,
            -- Task-level records (seed 003): NULL on every other kind.
            task_id TEXT,
            task_type TEXT,
            status TEXT,
            result TEXT,
            patterns TEXT,  -- JSON array of strings
            errors TEXT     -- JSON array of strings
        );
        -- Same owner + same normalised content is one memory, even under concurrent writers.
        CREATE UNIQUE INDEX memories_dedupe
            ON memories (coalesce(user_id, ''), coalesce(agent_id, ''), content_hash);
        CREATE INDEX memories_owner ON memories (user_id, agent_id, kind);
        CREATE INDEX memories_last_used ON memories (last_used_ts);

        -- Contentless like messages_fts: the text lives once, in memories; rowids match.
        CREATE VIRTUAL TABLE memories_fts USING fts5(
            text, content='', contentless_delete=1, tokenize='unicode61 remove_diacritics 2'
        );
        CREATE VIRTUAL TABLE memories_tri USING fts5(
            text, content='', contentless_delete=1, tokenize='trigram'
        );

        -- One vector per memory (from whichever embedder last embedded it). A plain table
        -- scanned with numpy, not vec0: memory sets are small (a scan of thousands of
        -- vectors takes well under a millisecond), the visibility filter is plain SQL, and
        -- it works where the sqlite-vec extension cannot load.
        CREATE TABLE memory_vectors (
            memory_rowid INTEGER PRIMARY KEY REFERENCES memories(rowid) ON DELETE CASCADE,
            provider TEXT NOT NULL,
            model TEXT NOT NULL,
            dim INTEGER NOT NULL,
            text_sha256 TEXT NOT NULL,  -- what was embedded (the embedding_cache key)
            vector BLOB NOT NULL  -- float32, little-endian, L2-normalised
        );
        """
    )

@migration(5, "compaction_state")
def _compaction_state(conn: Any) -> None:
    conn.execute(
        """
        -- At most one compaction per conversation at a time, across threads, processes and
        -- hosts sharing the file: a row here is the lease. A holder refreshes heartbeat_ts
        -- while it works; a lease whose heartbeat is older than its stale_after is taken over
        -- (the holder died), so a crash never wedges a conversation.
        CREATE TABLE compaction_leases (
            conversation_id TEXT PRIMARY KEY REFERENCES conversations(id),
            owner TEXT NOT NULL,  -- host:pid:thread:nonce of the holder
            reason TEXT NOT NULL,
            acquired_ts REAL NOT NULL,
            heartbeat_ts REAL NOT NULL,
            stale_after REAL NOT NULL
        );

        -- Why and when each compaction ran, and what it did (issue: record the trigger).
        CREATE TABLE compaction_log (
            rowid INTEGER PRIMARY KEY,
            conversation_id TEXT NOT NULL REFERENCES conversations(id),
            reason TEXT NOT NULL,
            started_ts REAL NOT NULL,
            finished_ts REAL NOT NULL,
            tokens_before INTEGER NOT NULL,
            tokens_after INTEGER NOT NULL,
            leaves INTEGER NOT NULL,
            condensed INTEGER NOT NULL,
            skipped TEXT,  -- why nothing (more) was done, if so
            owner TEXT NOT NULL
        );
        CREATE INDEX compaction_log_conv ON compaction_log (conversation_id, started_ts);

        -- How far each conversation has been distilled into long-term memory records
        -- (the flush before compaction, conv.end()), so nothing is distilled twice.
        CREATE TABLE memory_flush (
            conversation_id TEXT PRIMARY KEY REFERENCES conversations(id),
            last_seq INTEGER NOT NULL
        );
        """
    )


@migration(6, "files")
def _files(conn: Any) -> None:
    conn.execute(
        """
        -- Workspace files indexed for retrieval (lossless.files). abs_path is the resolved
        -- real path, so a file reached through a symlink or a second root is one row.
        CREATE TABLE files (
            rowid INTEGER PRIMARY KEY,
            root TEXT NOT NULL,  -- the resolved directory ``path`` is relative to
            path TEXT NOT NULL,  -- relative to root, '/'-separated: what users see and name
            abs_path TEXT NOT NULL UNIQUE,
            name TEXT NOT NULL,  -- the basename, for "a unique basename" lookups
            kind TEXT NOT NULL CHECK (kind IN ('code', 'markdown', 'text', 'data')),
            size INTEGER NOT NULL,
            mtime_ns INTEGER NOT NULL,  -- exact: same size and mtime means skip without reading
            sha256 TEXT NOT NULL,  -- of the bytes: a touched file with the same hash is not re-chunked
            indexed_at TEXT NOT NULL,
            chunk_count INTEGER NOT NULL,
            UNIQUE (root, path)
        );
        CREATE INDEX files_path ON files (path);
        CREATE INDEX files_name ON files (name);

        -- AUTOINCREMENT so a chunk rowid is never reused: a chunk id (and its vector) always
        -- means the same text, and re-indexing one file leaves every other file's rows alone.
        CREATE TABLE file_chunks (
            rowid INTEGER PRIMARY KEY AUTOINCREMENT,
            file_rowid INTEGER NOT NULL REFERENCES files(rowid) ON DELETE CASCADE,
            ordinal INTEGER NOT NULL,
            start_line INTEGER NOT NULL,  -- 1-based, inclusive
            end_line INTEGER NOT NULL,
            token_count INTEGER NOT NULL,
            kind TEXT NOT NULL CHECK (kind IN ('code', 'markdown', 'text', 'data')),
            text TEXT NOT NULL,
            text_sha256 TEXT NOT NULL,  -- the embedding_cache key
            UNIQUE (file_rowid, ordinal),
            CHECK (start_line <= end_line)
        );

        -- Contentless like memories_fts: the text lives once, in file_chunks; rowids match.
        -- porter over unicode61 so "computed" finds compute_backoff (unicode61 splits at "_");
        -- the path column lets a query naming the file find its chunks (weighted low in bm25).
        CREATE VIRTUAL TABLE file_chunks_fts USING fts5(
            path, text, content='', contentless_delete=1,
            tokenize='porter unicode61 remove_diacritics 2'
        );
        -- trigram: substrings inside identifiers (camelCase, snake_case) and CJK text.
        CREATE VIRTUAL TABLE file_chunks_tri USING fts5(
            text, content='', contentless_delete=1, tokenize='trigram'
        );

        -- One vector per chunk, scanned with numpy from an in-memory matrix, not vec0: at 100k
        -- x 384 a query takes ~6 ms where a vec0 k-NN, which reads every vector through SQLite
        -- per query, takes ~64 ms (bench/bench_files.py, 2 cores); the path/kind filters are
        -- a numpy mask; and it works where the sqlite-vec extension cannot load.
        CREATE TABLE file_chunk_vectors (
            chunk_rowid INTEGER PRIMARY KEY REFERENCES file_chunks(rowid) ON DELETE CASCADE,
            provider TEXT NOT NULL,
            model TEXT NOT NULL,
            dim INTEGER NOT NULL,
            text_sha256 TEXT NOT NULL,
            vector BLOB NOT NULL  -- float32, little-endian, L2-normalised
        );
        -- Which chunks have a vector from one embedder, without reading the vectors: a
        -- reader's matrix catches up by these ids after a write (only new rows are read).
        CREATE INDEX file_chunk_vectors_model ON file_chunk_vectors (provider, model, dim, chunk_rowid);

        -- Bumped by every write to the tables above, so a reader's in-memory vector matrix
        -- learns it is stale (from this process or another) with one indexed read.
        CREATE TABLE files_generation (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            value INTEGER NOT NULL
        );
        INSERT INTO files_generation (id, value) VALUES (1, 0);
        """
    )


@migration(7, "api_keys")
def _api_keys(conn: Any) -> None:
    conn.execute(
        """
        -- Bearer keys of the HTTP server (lossless.server.keys). Only a salted hash of each
        -- key is kept: sha256(salt || secret) with a random per-key salt. The secret is 256
        -- random bits, so a fast hash is enough (no password-style stretching needed); the
        -- key itself is shown once, when it is created, and cannot be recovered.
        CREATE TABLE api_keys (
            id TEXT PRIMARY KEY,  -- key_ + 12 hex; also inside the key, so lookup is one index hit
            tenant TEXT NOT NULL,  -- whose conversations and memories the key reaches
            name TEXT,
            salt TEXT NOT NULL,  -- hex
            hash TEXT NOT NULL,  -- hex sha256(salt bytes || secret utf-8)
            prefix TEXT NOT NULL,  -- the key's first characters, to recognise it in listings
            created_at TEXT NOT NULL,
            revoked_at TEXT,  -- set once; a revoked key is refused but kept for the record
            last_used_at TEXT  -- refreshed at most once a minute per key (no write per request)
        ) WITHOUT ROWID;
        CREATE INDEX api_keys_tenant ON api_keys (tenant);
        """
    )


@migration(8, "background_work")
def _background_work(conn: Any) -> None:
    conn.execute(
        """
        -- Conversations with work owed by the background worker (compaction, retrieval units,
        -- embeddings). Written in the same transaction as the messages that caused it, so a
        -- crash never loses the fact that work is owed. A worker claims a row (owner,
        -- claimed_until) while it works; a claim that lapses, or whose holder is a dead
        -- process on this host, is taken over (lossless/worker.py).
        CREATE TABLE backlog (
            conversation_id TEXT PRIMARY KEY REFERENCES conversations(id),
            queued_seq INTEGER NOT NULL,  -- the conversation's last seq when it was queued
            queued_ts REAL NOT NULL,  -- since when work has been owed (how far behind the worker is)
            due_ts REAL NOT NULL,  -- served in this order, not before it (fair turns, retry backoff)
            owner TEXT,  -- host:pid:thread:nonce of the worker holding the claim
            claimed_until REAL NOT NULL DEFAULT 0,
            attempts INTEGER NOT NULL DEFAULT 0,  -- failed attempts in a row
            last_error TEXT,
            force_reason TEXT  -- a compaction asked for (a "/compact" message): run it even under the trigger
        ) WITHOUT ROWID;
        CREATE INDEX backlog_due ON backlog (due_ts);

        -- The workers serving the backlog, as they last reported (every few seconds while
        -- they run; a row whose heartbeat is old is a worker that is gone): `lossless stats`
        -- and /v1/lossless/health show them, whichever process they run in.
        CREATE TABLE workers (
            owner TEXT PRIMARY KEY,
            kind TEXT NOT NULL,  -- thread (of an open Memory), process (lossless worker), foreground
            started_ts REAL NOT NULL,
            heartbeat_ts REAL NOT NULL,
            state TEXT NOT NULL,  -- idle | working | stopping
            stats TEXT NOT NULL  -- JSON: what it has done, its catch-up rate, its circuit breaker
        ) WITHOUT ROWID;

        -- Earlier texts of summaries written again (``lossless compact --redo-fallbacks``:
        -- a summary made by the deterministic fallback while the provider was down, redone
        -- by the model). The summary keeps its id and place in the DAG; what it said before
        -- is kept here, verbatim.
        CREATE TABLE summary_revisions (
            summary_id TEXT NOT NULL REFERENCES summaries(id),
            revision INTEGER NOT NULL,  -- 1 for the first text replaced, then 2, ...
            content TEXT NOT NULL,
            token_count INTEGER NOT NULL,
            summarizer TEXT NOT NULL,
            fallback_level INTEGER NOT NULL,
            metadata TEXT NOT NULL,
            replaced_at TEXT NOT NULL,
            PRIMARY KEY (summary_id, revision)
        ) WITHOUT ROWID;
        """
    )
    # Work a database written before the worker existed may still owe (vectors were made
    # by the first query): every conversation is looked at once.
    now = datetime.now(UTC).timestamp()
    conn.execute("INSERT INTO backlog (conversation_id, queued_seq, queued_ts, due_ts) "
                 "SELECT id, last_seq, ?, ? FROM conversations WHERE last_seq > 0", (now, now))


@migration(9, "proxy_requests")
def _proxy_requests(conn: Any) -> None:
    conn.execute(
        """
        -- Proxy requests sent with an Idempotency-Key: a retry with the same key gets the
        -- same answer (the stored reply, once there is one) and stores nothing twice.
        CREATE TABLE proxy_requests (
            conversation_id TEXT NOT NULL REFERENCES conversations(id),
            idempotency_key TEXT NOT NULL,
            request_sha256 TEXT NOT NULL,  -- of the request's model and messages: the same key for
                                           -- another request is refused
            request_seq INTEGER NOT NULL,  -- the seq of the request's last message in the conversation
            reply_id TEXT,  -- the stored reply, once there is one
            created_at TEXT NOT NULL,
            PRIMARY KEY (conversation_id, idempotency_key)
        ) WITHOUT ROWID;
        """
    )


@migration(10, "keyword_forms")
def _keyword_forms(conn: Any) -> None:
    # The unicode61 rows now carry the extra forms of compounds (store/fts.py's
    # index_text: "follow-up" also as "followup", "5km" also as "5 km"): rows written
    # before get them too.
    from lossless.store.reindex import reindex_sqlite

    reindex_sqlite(conn)


@migration(11, "immutability")
def _immutability(conn: Any) -> None:
    # The database itself refuses to alter history (issue 20, seed 000): triggers, so a raw
    # UPDATE or DELETE fails however it is sent; the one way to change a message's text is
    # lossless.store.erase, which first writes the tombstone the trigger looks for.
    conn.execute(
        f"""
        -- Who erased which message, when and why. The message keeps its id, seq and place
        -- and shows ERASED; its original hash is not kept (a hash of a short text can be
        -- guessed back), content_hash is the hash of the message as erased.
        CREATE TABLE tombstones (
            id TEXT PRIMARY KEY,  -- tomb_ + 20 hex
            conversation_id TEXT NOT NULL REFERENCES conversations(id),
            message_id TEXT NOT NULL UNIQUE REFERENCES messages(id),
            seq INTEGER NOT NULL,
            reason TEXT NOT NULL CHECK (length(reason) > 0),
            erased_by TEXT NOT NULL CHECK (length(erased_by) > 0),
            erased_at TEXT NOT NULL,
            content_hash TEXT NOT NULL
        ) WITHOUT ROWID;
        -- the summary triggers ask "is a message of this span erased?": an index range
        CREATE INDEX tombstones_span ON tombstones (conversation_id, seq);
        {_guards()}
        """
    )


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


@migration(12, "compaction_timers")
def _compaction_timers(conn: Any) -> None:
    conn.execute(
        """
        -- When a quiet conversation's interval trigger is due (compact_interval_seconds): a
        -- worker's claim moves the due rows into the backlog, one index range per poll.
        CREATE TABLE compaction_timers (
            conversation_id TEXT PRIMARY KEY REFERENCES conversations(id),
            due_ts REAL NOT NULL
        ) WITHOUT ROWID;
        CREATE INDEX compaction_timers_due ON compaction_timers (due_ts);
        """
    )



@migration(13, "tasks_and_forgetting")
def _tasks_and_forgetting(conn: Any) -> None:
    conn.execute(
        """
        -- Where each conversation's current task begins (seed 003: long-term memory by task):
        -- the messages after ended_seq are the task in hand; ending it writes its task
        -- record (lossless.longterm.tasks) and moves ended_seq to the conversation's end.
        CREATE TABLE task_bounds (
            conversation_id TEXT PRIMARY KEY REFERENCES conversations(id),
            ended_seq INTEGER NOT NULL
        ) WITHOUT ROWID;

        -- Memories the forgetting policy removed (seed 003: forget so memory does not grow
        -- without bound), each with its whole record as JSON: what went, why, and enough
        -- to put it back (Memories.restore). A manual forget() is a deletion for good and
        -- is not logged here.
        CREATE TABLE forgotten_memories (
            rowid INTEGER PRIMARY KEY,
            memory_id TEXT NOT NULL,
            kind TEXT NOT NULL,
            content TEXT NOT NULL,
            user_id TEXT,
            agent_id TEXT,
            reason TEXT NOT NULL,  -- capacity | unused | importance
            record TEXT NOT NULL,  -- MemoryRecord.to_dict() as JSON
            forgotten_at TEXT NOT NULL,
            forgotten_ts REAL NOT NULL
        );
        CREATE INDEX forgotten_memories_id ON forgotten_memories (memory_id);
        CREATE INDEX forgotten_memories_ts ON forgotten_memories (forgotten_ts);
        """
    )

@migration(14, "summary_roots")
def _summary_roots(conn: Any) -> None:
    conn.execute(
        """
        -- The whole-conversation roots (issue 20, seed 000): each is its own parent, so it
        -- is off the frontier; assembly reads the current one every turn: an index range.
        CREATE INDEX summaries_roots ON summaries (conversation_id, last_seq) WHERE parent_id = id;
        """
    )


@migration(15, "vector_checks")
def _vector_checks(conn: Any) -> None:
    conn.execute(
        """
        -- How far each embedder has looked for conversations it owes vectors (messages
        -- stored by a process without it, e.g. before the embeddings extra was installed):
        -- a worker compares this with the newest message rowid and checks only the
        -- conversations written since, instead of every conversation on every open.
        CREATE TABLE vector_checks (
            provider TEXT NOT NULL,
            model TEXT NOT NULL,
            message_rowid INTEGER NOT NULL,  -- conversations with messages up to here were checked
            PRIMARY KEY (provider, model)
        ) WITHOUT ROWID;
        """
    )


@migration(16, "erase_clears_identity")
def _erase_clears_identity(conn: Any) -> None:
    # an erase clears the message's name and metadata too (store/erase_identity.py)
    from lossless.store.erase_identity import sqlite_step

    sqlite_step(conn)


@migration(17, "cjk_bigrams")
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


def applied(conn: Any) -> list[int]:
    return migrator.applied(conn, DIALECT)


def pending(conn: Any) -> list[tuple[int, str, Migration]]:
    return migrator.pending(conn, _SCHEMA, DIALECT)


def migrate(conn: Any, upto: int | None = None) -> list[int]:
    """Apply every pending migration (up to ``upto``), each in its own transaction."""
    return migrator.run(conn, _SCHEMA, DIALECT, upto)
