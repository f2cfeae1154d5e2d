"""The schema both stores migrate to, written once: one list of numbered migrations.

Each entry of :data:`STEPS` is one migration: its name, its version on SQLite and on
PostgreSQL (the numbers differ: PostgreSQL has a ``trigram`` step SQLite does not, and
``files`` came later there), the statements both run (a function of the
:class:`SchemaDialect`), and then whatever the dialect's own module adds under that name.
The tables mirror each other column for column, so ``lossless migrate`` copies rows as they
are; what a dialect spells differently is a field of :class:`SchemaDialect` (``{d.big}``:
INTEGER or BIGINT), and what only one of them has (SQLite's FTS5 tables, PostgreSQL's
``tsvector`` columns and GIN indexes) is a named part, empty on the other.

The plug-ins' tables are theirs (issue 28): the long-term memory's (``memories``,
``tasks_and_forgetting``) and the file index's (``files``) migrations are written in
``longterm/schema.py`` and ``files/schema.py``, which :func:`register` them, with their
dialect parts, when imported (``import lossless`` imports both). Their numbers are the
store's (:data:`SLOTS`), and :func:`migrations` refuses a list with one missing rather
than open a database without a plug-in's tables.

Released migrations never change: a database records the versions it ran, and a changed
step would leave old and new databases with different schemas. ``tests/test_schema_same.py``
pins a fingerprint of the SQL each migration executes, on both dialects.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, NamedTuple

from lossless.core.errors import MigrationError
from lossless.store import migrator

__all__ = ["REGISTRY", "SLOTS", "STEPS", "PluginStep", "Registry", "SchemaDialect", "Slot", "Step", "migrations",
           "register"]


@dataclass(frozen=True, slots=True)
class SchemaDialect:
    """How one database spells the schema. ``parts``: the named statements (or column
    clauses) only this dialect has, placed where the shared text names them; ``steps``:
    what this dialect runs after the shared statements of the step of that name."""

    name: str  # "sqlite" or "postgres": which version of each step applies
    key: str  # TEXT of ids and ISO times (PostgreSQL collates them "C": byte order, as SQLite)
    big: str  # an integer that may pass 2**31 (seqs, rowids, sizes)
    real: str  # Unix seconds and scores
    flag: str  # a 0/1 column
    blob: str  # raw bytes (float32 vectors)
    rowid: str  # an explicit integer key the search and vector tables key on
    serial: str  # a rowid never handed out twice
    norowid: str  # the clustered-table option of a table with a primary key
    generated: str  # how a generated column is kept
    placeholder: str
    parts: Mapping[str, str] = field(default_factory=dict)
    steps: Mapping[str, Callable[[Any], None]] = field(default_factory=dict)

    def part(self, name: str) -> str:
        return self.parts.get(name, "")


Shared = Callable[[Any, SchemaDialect], None]


class Step(NamedTuple):
    name: str
    sqlite: int | None  # the version on each dialect; None: not a step there
    postgres: int | None
    shared: Shared | None  # the statements both run; None: only the dialect's own


def _core(conn: Any, d: SchemaDialect) -> None:
    conn.execute(
        f"""
        CREATE TABLE conversations (
            id {d.key} PRIMARY KEY,
            created_at {d.key} NOT NULL,
            updated_at {d.key} NOT NULL,
            metadata TEXT NOT NULL DEFAULT '{{}}',
            last_seq {d.big} NOT NULL DEFAULT 0  -- next seq is last_seq + 1, bumped in the insert transaction
        );

        -- An explicit integer key so the search and vector tables can key on a stable rowid.
        CREATE TABLE messages (
            rowid {d.rowid},
            id {d.key} NOT NULL UNIQUE,
            conversation_id {d.key} NOT NULL REFERENCES conversations(id),
            seq {d.big} NOT NULL,
            role TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
            name TEXT,
            content TEXT,
            content_is_json {d.flag} NOT NULL DEFAULT 0,  -- 1: content holds JSON content parts
            tool_calls TEXT,
            tool_call_id TEXT,
            created_at TEXT NOT NULL,  -- ISO 8601 exactly as given (naive stays naive)
            created_ts {d.real} NOT NULL,  -- Unix seconds (naive read as UTC), for ordering and ranges
            token_count INTEGER NOT NULL,
            metadata TEXT NOT NULL DEFAULT '{{}}',
            external_id TEXT,
            content_hash TEXT NOT NULL,{d.part('search_column')}
            UNIQUE (conversation_id, seq)
        );
        CREATE UNIQUE INDEX messages_external_id
            ON messages (conversation_id, external_id) WHERE external_id IS NOT NULL;
        CREATE INDEX messages_time ON messages (conversation_id, created_ts);
        {d.part('messages_search')}
        CREATE TABLE summaries (
            rowid {d.rowid},
            id {d.key} NOT NULL UNIQUE,
            conversation_id {d.key} NOT NULL REFERENCES conversations(id),
            depth INTEGER NOT NULL CHECK (depth >= 0),
            content TEXT NOT NULL,
            token_count INTEGER NOT NULL,
            first_seq {d.big} NOT NULL,
            last_seq {d.big} NOT NULL,
            earliest_at TEXT NOT NULL,
            latest_at TEXT NOT NULL,
            earliest_ts {d.real} NOT NULL,
            latest_ts {d.real} NOT NULL,
            descendant_count INTEGER NOT NULL,
            source_token_count INTEGER NOT NULL,
            summarizer TEXT NOT NULL,
            fallback_level INTEGER NOT NULL DEFAULT 0,
            created_at TEXT NOT NULL,
            metadata TEXT NOT NULL DEFAULT '{{}}',
            -- Set in the same transaction that writes the parent: NULL means on the frontier.
            parent_id {d.key} REFERENCES summaries(id),{d.part('search_column')}
            CHECK (first_seq <= last_seq)
        );
        -- The frontier is read before every assembly: keep it an index range, not a scan.
        CREATE INDEX summaries_frontier
            ON summaries (conversation_id, first_seq) WHERE parent_id IS NULL;
        CREATE INDEX summaries_span ON summaries (conversation_id, depth, first_seq);
        {d.part('summaries_search')}
        CREATE TABLE summary_sources (
            summary_id {d.key} NOT NULL REFERENCES summaries(id),
            ord INTEGER NOT NULL,
            source_kind TEXT NOT NULL CHECK (source_kind IN ('message', 'summary')),
            source_id {d.key} NOT NULL,
            PRIMARY KEY (summary_id, ord)
        ){d.norowid};
        CREATE INDEX summary_sources_source ON summary_sources (source_id);
        {d.part('core_search')}
        """
    )


def _settings(conn: Any, d: SchemaDialect) -> None:
    # Per-database defaults (e.g. the context window the CLI was told once), JSON values.
    conn.execute(f"CREATE TABLE settings (key {d.key} PRIMARY KEY, value TEXT NOT NULL)")


def _recall(conn: Any, d: SchemaDialect) -> None:
    conn.execute(
        f"""
        -- Keyed by what produced the vector and a hash of the exact text: the same text is
        -- never embedded twice by the same model, across conversations and restarts.
        CREATE TABLE embedding_cache (
            provider TEXT NOT NULL,
            model TEXT NOT NULL,
            text_sha256 TEXT NOT NULL,
            dim INTEGER NOT NULL,
            vector {d.blob} NOT NULL,  -- float32, little-endian, L2-normalised
            created_at TEXT NOT NULL,
            PRIMARY KEY (provider, model, text_sha256)
        ){d.norowid};
        {d.part('embedding_cache_sha')}
        -- What recall retrieves: a message (or one passage of a long one) or a window of
        -- three user->assistant pairs. Appended only, so rowid order is creation order (on
        -- PostgreSQL units are cut with the conversation's recall_progress row locked, so one
        -- conversation's rowids grow in commit order: vector_progress relies on it).
        CREATE TABLE recall_units (
            rowid {d.rowid},
            conversation_id {d.key} NOT NULL REFERENCES conversations(id),
            kind TEXT NOT NULL CHECK (kind IN ('message', 'window')),
            first_seq {d.big} NOT NULL,
            last_seq {d.big} NOT NULL,
            part INTEGER NOT NULL DEFAULT 0,
            role TEXT,
            message_ids TEXT NOT NULL,
            text TEXT NOT NULL,
            text_sha256 TEXT NOT NULL,
            start_ts {d.real} NOT NULL,
            end_ts {d.real} NOT NULL,
            UNIQUE (conversation_id, kind, first_seq, last_seq, part)
        );
        CREATE INDEX recall_units_conv ON recall_units (conversation_id, rowid);
        {d.part('recall_units_sha')}
        -- How far units have been cut from each conversation's messages.
        CREATE TABLE recall_progress (
            conversation_id {d.key} PRIMARY KEY REFERENCES conversations(id),
            message_seq {d.big} NOT NULL DEFAULT 0,  -- messages up to here have units
            window_seq {d.big} NOT NULL DEFAULT 0    -- the next window starts after this seq
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
            conversation_id {d.key} NOT NULL,
            unit_rowid {d.big} NOT NULL,  -- units up to this rowid are in the index
            PRIMARY KEY (index_name, conversation_id)
        ){d.norowid};
        """
    )


def _compaction_state(conn: Any, d: SchemaDialect) -> None:
    conn.execute(
        f"""
        -- At most one compaction per conversation at a time, across threads, processes and
        -- hosts sharing the database: a row here is the lease. A holder refreshes heartbeat_ts
        -- while it works; a lease whose heartbeat is older than its stale_after is taken over
        -- (the holder died), so a crash never wedges a conversation. On PostgreSQL it is taken
        -- by one conditional upsert, timed by the server's clock (hosts with skewed clocks agree).
        CREATE TABLE compaction_leases (
            conversation_id {d.key} PRIMARY KEY REFERENCES conversations(id),
            owner TEXT NOT NULL,  -- host:pid:thread:nonce of the holder
            reason TEXT NOT NULL,
            acquired_ts {d.real} NOT NULL,
            heartbeat_ts {d.real} NOT NULL,
            stale_after {d.real} NOT NULL
        );

        -- Why and when each compaction ran, and what it did (issue: record the trigger).
        CREATE TABLE compaction_log (
            rowid {d.rowid},
            conversation_id {d.key} NOT NULL REFERENCES conversations(id),
            reason TEXT NOT NULL,
            started_ts {d.real} NOT NULL,
            finished_ts {d.real} NOT NULL,
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
            conversation_id {d.key} PRIMARY KEY REFERENCES conversations(id),
            last_seq {d.big} NOT NULL
        );
        """
    )


def _api_keys(conn: Any, d: SchemaDialect) -> None:
    conn.execute(
        f"""
        -- Bearer keys of the HTTP server (lossless.server.keys). Only a salted hash of each
        -- key is kept: sha256(salt || secret) with a random per-key salt. The secret is 256
        -- random bits, so a fast hash is enough (no password-style stretching needed); the
        -- key itself is shown once, when it is created, and cannot be recovered.
        CREATE TABLE api_keys (
            id {d.key} PRIMARY KEY,  -- key_ + 12 hex; also inside the key, so lookup is one index hit
            tenant {d.key} NOT NULL,  -- whose conversations and memories the key reaches
            name TEXT,
            salt TEXT NOT NULL,  -- hex
            hash TEXT NOT NULL,  -- hex sha256(salt bytes || secret utf-8)
            prefix TEXT NOT NULL,  -- the key's first characters, to recognise it in listings
            created_at {d.key} NOT NULL,
            revoked_at TEXT,  -- set once; a revoked key is refused but kept for the record
            last_used_at TEXT  -- refreshed at most once a minute per key (no write per request)
        ){d.norowid};
        CREATE INDEX api_keys_tenant ON api_keys (tenant);
        """
    )


def _background_work(conn: Any, d: SchemaDialect) -> None:
    conn.execute(
        f"""
        -- Conversations with work owed by the background worker (compaction, retrieval units,
        -- embeddings). Written in the same transaction as the messages that caused it, so a
        -- crash never loses the fact that work is owed. A worker claims a row (owner,
        -- claimed_until) while it works; a claim that lapses, or whose holder is a dead
        -- process on this host, is taken over (lossless/worker.py). On PostgreSQL claims are
        -- taken with FOR UPDATE SKIP LOCKED, so workers on several hosts share the backlog.
        CREATE TABLE backlog (
            conversation_id {d.key} PRIMARY KEY REFERENCES conversations(id),
            queued_seq {d.big} NOT NULL,  -- the conversation's last seq when it was queued
            queued_ts {d.real} NOT NULL,  -- since when work has been owed (how far behind the worker is)
            due_ts {d.real} NOT NULL,  -- served in this order, not before it (fair turns, retry backoff)
            owner TEXT,  -- host:pid:thread:nonce of the worker holding the claim
            claimed_until {d.real} NOT NULL DEFAULT 0,
            attempts INTEGER NOT NULL DEFAULT 0,  -- failed attempts in a row
            last_error TEXT,
            force_reason TEXT  -- a compaction asked for (a "/compact" message): run it even under the trigger
        ){d.norowid};
        CREATE INDEX backlog_due ON backlog (due_ts);

        -- The workers serving the backlog, as they last reported (every few seconds while
        -- they run; a row whose heartbeat is old is a worker that is gone): `lossless stats`
        -- and /v1/lossless/health show them, whichever process they run in.
        CREATE TABLE workers (
            owner TEXT PRIMARY KEY,
            kind TEXT NOT NULL,  -- thread (of an open Memory), process (lossless worker), foreground
            started_ts {d.real} NOT NULL,
            heartbeat_ts {d.real} NOT NULL,
            state TEXT NOT NULL,  -- idle | working | stopping
            stats TEXT NOT NULL  -- JSON: what it has done, its catch-up rate, its circuit breaker
        ){d.norowid};

        -- Earlier texts of summaries written again (``lossless compact --redo-fallbacks``:
        -- a summary made by the deterministic fallback while the provider was down, redone
        -- by the model). The summary keeps its id and place in the DAG; what it said before
        -- is kept here, verbatim.
        CREATE TABLE summary_revisions (
            summary_id {d.key} NOT NULL REFERENCES summaries(id),
            revision INTEGER NOT NULL,  -- 1 for the first text replaced, then 2, ...
            content TEXT NOT NULL,
            token_count INTEGER NOT NULL,
            summarizer TEXT NOT NULL,
            fallback_level INTEGER NOT NULL,
            metadata TEXT NOT NULL,
            replaced_at {d.key} NOT NULL,
            PRIMARY KEY (summary_id, revision)
        ){d.norowid};
        """
    )
    # Work a database written before the worker existed may still owe (vectors were made
    # by the first query): every conversation is looked at once.
    now, mark = datetime.now(UTC).timestamp(), d.placeholder
    conn.execute("INSERT INTO backlog (conversation_id, queued_seq, queued_ts, due_ts) "
                 f"SELECT id, last_seq, {mark}, {mark} FROM conversations WHERE last_seq > 0", (now, now))


def _proxy_requests(conn: Any, d: SchemaDialect) -> None:
    conn.execute(
        f"""
        -- Proxy requests sent with an Idempotency-Key: a retry with the same key gets the
        -- same answer (the stored reply, once there is one) and stores nothing twice.
        CREATE TABLE proxy_requests (
            conversation_id {d.key} NOT NULL REFERENCES conversations(id),
            idempotency_key TEXT NOT NULL,
            request_sha256 TEXT NOT NULL,  -- of the request's model and messages: the same key for
                                           -- another request is refused
            request_seq {d.big} NOT NULL,  -- the seq of the request's last message in the conversation
            reply_id {d.key},  -- the stored reply, once there is one
            created_at {d.key} NOT NULL,
            PRIMARY KEY (conversation_id, idempotency_key)
        ){d.norowid};
        """
    )


def _tombstones(conn: Any, d: SchemaDialect) -> None:
    # The database itself refuses to alter history (issue 20, seed 000): the dialect's
    # triggers (its part of this step), so a raw UPDATE or DELETE fails however it is sent;
    # the one way to change a message's text is lossless.store.erase, which first writes
    # the tombstone the trigger looks for.
    conn.execute(
        f"""
        -- Who erased which message, when and why. The message keeps its id, seq and place
        -- and shows ERASED; its original hash is not kept (a hash of a short text can be
        -- guessed back), content_hash is the hash of the message as erased.
        CREATE TABLE tombstones (
            id {d.key} PRIMARY KEY,  -- tomb_ + 20 hex
            conversation_id {d.key} NOT NULL REFERENCES conversations(id),
            message_id {d.key} NOT NULL UNIQUE REFERENCES messages(id),
            seq {d.big} NOT NULL,
            reason TEXT NOT NULL CHECK (length(reason) > 0),
            erased_by TEXT NOT NULL CHECK (length(erased_by) > 0),
            erased_at {d.key} NOT NULL,
            content_hash TEXT NOT NULL
        ){d.norowid};
        -- the summary triggers ask "is a message of this span erased?": an index range
        CREATE INDEX tombstones_span ON tombstones (conversation_id, seq);
        """
    )


def _compaction_timers(conn: Any, d: SchemaDialect) -> None:
    conn.execute(
        f"""
        -- When a quiet conversation's interval trigger is due (compact_interval_seconds): a
        -- worker's claim moves the due rows into the backlog, one index range per poll.
        CREATE TABLE compaction_timers (
            conversation_id {d.key} PRIMARY KEY REFERENCES conversations(id),
            due_ts {d.real} NOT NULL
        ){d.norowid};
        CREATE INDEX compaction_timers_due ON compaction_timers (due_ts);
        """
    )


def _summary_roots(conn: Any, d: SchemaDialect) -> None:
    conn.execute(
        """
        -- The whole-conversation roots (issue 20, seed 000): each is its own parent, so it
        -- is off the frontier; assembly reads the current one every turn: an index range.
        CREATE INDEX summaries_roots ON summaries (conversation_id, last_seq) WHERE parent_id = id;
        """
    )


def _vector_checks(conn: Any, d: SchemaDialect) -> None:
    conn.execute(
        f"""
        -- How far each embedder has looked for conversations it owes vectors (messages
        -- stored by a process without it, e.g. before the embeddings extra was installed):
        -- a worker compares this with the newest message rowid and checks only the
        -- conversations written since, instead of every conversation on every open.
        CREATE TABLE vector_checks (
            provider {d.key} NOT NULL,
            model {d.key} NOT NULL,
            message_rowid {d.big} NOT NULL,  -- conversations with messages up to here were checked
            PRIMARY KEY (provider, model)
        ){d.norowid};
        """
    )


STEPS: list[Step] = [
    Step("core", 1, 1, _core),
    Step("settings", 2, 2, _settings),
    Step("recall", 3, 3, _recall),
    Step("compaction_state", 5, 5, _compaction_state),
    Step("trigram", None, 6, None),  # pg_trgm's indexes, where the server has it
    Step("api_keys", 7, 7, _api_keys),
    Step("background_work", 8, 9, _background_work),
    Step("proxy_requests", 9, 10, _proxy_requests),
    Step("keyword_forms", 10, 11, None),  # the search rows written again (store/reindex.py)
    Step("immutability", 11, 12, _tombstones),  # and the dialect's triggers
    Step("compaction_timers", 12, 13, _compaction_timers),
    Step("summary_roots", 14, 15, _summary_roots),
    Step("vector_checks", 15, 16, _vector_checks),
    Step("erase_clears_identity", 16, 17, None),  # store/erase_identity.py
    Step("cjk_bigrams", 17, 18, None),  # the search rows written again (store/reindex.py)
    Step("wide_forms", 18, None, None),  # SQLite's search rows of full-width text (store/reindex.py)
    Step("json_escapes", 19, 19, None),  # the search rows of JSON-escaped text (store/reindex.py)
]
"""The store's own migrations, in the order they were written. Append only: a released
step never changes."""


class Slot(NamedTuple):
    """A migration the store numbered for a plug-in, which writes it (:func:`register`)."""

    name: str
    sqlite: int | None
    postgres: int | None
    package: str  # the plug-in that registers it when imported


SLOTS: tuple[Slot, ...] = (
    Slot("memories", 4, 4, "lossless.longterm"),  # longterm/schema.py
    Slot("files", 6, 8, "lossless.files"),  # files/schema.py
    Slot("tasks_and_forgetting", 13, 14, "lossless.longterm"),  # longterm/schema.py
)
"""The plug-ins' migrations. The numbers are the store's: every migration, the store's or
a plug-in's, is one version of one list, recorded in one ``schema_migrations`` table."""

DialectOwn = Callable[[Any], None]


@dataclass(frozen=True, slots=True)
class PluginStep:
    """A plug-in's migration: its step, and per dialect name (``"sqlite"``, ``"postgres"``)
    the parts its statements name and what only that dialect runs after them."""

    step: Step
    parts: Mapping[str, Mapping[str, str]]
    own: Mapping[str, DialectOwn]


class Registry:
    """The plug-ins' migrations, by step name. :data:`REGISTRY` is the one the stores
    migrate with; a plug-in fills it when imported (:func:`register`)."""

    def __init__(self, steps: Iterable[PluginStep] = ()) -> None:
        self._steps = {p.step.name: p for p in steps}

    def register(self, step: Step, *, sqlite_parts: Mapping[str, str] | None = None,
                 postgres_parts: Mapping[str, str] | None = None, sqlite_own: DialectOwn | None = None,
                 postgres_own: DialectOwn | None = None) -> None:
        """Add a plug-in's migration: ``step`` must be the :data:`SLOTS` entry of its name
        (same versions), registered once."""
        slot = next((s for s in SLOTS if s.name == step.name), None)
        if slot is None or (slot.sqlite, slot.postgres) != (step.sqlite, step.postgres):
            raise MigrationError(f"migration {step.name} ({step.sqlite}, {step.postgres}) is not a slot of "
                                 "lossless.store.schema.SLOTS: a plug-in's migration takes the number the store gives it")
        if step.name in self._steps:
            raise MigrationError(f"migration {step.name} is registered twice")
        parts = {"sqlite": sqlite_parts or {}, "postgres": postgres_parts or {}}
        own = {name: fn for name, fn in (("sqlite", sqlite_own), ("postgres", postgres_own)) if fn is not None}
        self._steps[step.name] = PluginStep(step, parts, own)

    def without(self, name: str) -> Registry:
        """This registry but the migration ``name`` (what a store would see had its plug-in
        never been imported)."""
        return Registry(p for p in self._steps.values() if p.step.name != name)

    def __iter__(self) -> Iterator[PluginStep]:
        return iter(self._steps.values())

    def __contains__(self, name: object) -> bool:
        return name in self._steps


REGISTRY = Registry()
register = REGISTRY.register


def migrations(d: SchemaDialect, registry: Registry = REGISTRY) -> migrator.Migrations:
    """The numbered migrations of dialect ``d``: each step's shared statements, then the
    dialect's own part of it; the plug-ins' steps from ``registry``. A version missing from
    the list (a plug-in not imported) is a :class:`MigrationError`, never a skipped step."""
    schema = migrator.Migrations()
    for step in STEPS:
        _add(schema, d, step, d.steps.get(step.name))
    for plugin in registry:
        with_parts = replace(d, parts={**d.parts, **plugin.parts[d.name]})
        _add(schema, with_parts, plugin.step, plugin.own.get(d.name))
    _refuse_gaps(schema, d, registry)
    return schema


def _version(step: Step | Slot, d: SchemaDialect) -> int | None:
    return step.sqlite if d.name == "sqlite" else step.postgres


def _add(schema: migrator.Migrations, d: SchemaDialect, step: Step, own: DialectOwn | None) -> None:
    version = _version(step, d)
    if version is None:
        return
    if step.shared is None and own is None:
        raise ValueError(f"{d.name} has no statements for migration {step.name}")
    schema.migration(version, step.name)(_runner(d, step.shared, own))


def _refuse_gaps(schema: migrator.Migrations, d: SchemaDialect, registry: Registry) -> None:
    have = {version for version, _, _ in schema.steps}
    numbered = {_version(s, d) for s in STEPS} | {_version(s, d) for s in SLOTS}
    for version in range(1, max(v for v in numbered if v is not None) + 1):
        if version not in have:
            slot = next((s for s in SLOTS if _version(s, d) == version), None)
            if slot is None:
                raise MigrationError(f"{d.name} has no migration {version}")
            raise MigrationError(f"migration {version} ({slot.name}) is not registered: import {slot.package}")


def _runner(d: SchemaDialect, shared: Shared | None, own: Callable[[Any], None] | None) -> migrator.Migration:
    def run(conn: Any) -> None:
        if shared is not None:
            shared(conn, d)
        if own is not None:
            own(conn)

    return run
