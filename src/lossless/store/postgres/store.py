"""The PostgreSQL store: the :class:`~lossless.store.base.Store` contract for many
processes and hosts, through psycopg 3 and a ``psycopg_pool`` connection pool.

The tables mirror the SQLite ones (``store/postgres/migrations.py``); what SQLite gets from
having one writer at a time, PostgreSQL gets from explicit locks:

* **seq allocation**: :meth:`append_messages` locks the conversation row
  (``SELECT … FOR UPDATE``) before reading ``last_seq``, so concurrent writers to one
  conversation queue up and the seqs stay 1, 2, 3… with no gap and no duplicate;
* **summaries**: :meth:`insert_summary` takes the same row lock, then checks the frontier
  inside its transaction, so of two compactors that computed the same pass only one
  lands and a reader sees a pass entirely or not at all;
* **compaction leases**: one conditional upsert (``INSERT … ON CONFLICT DO UPDATE …
  WHERE the holder is this owner or stopped heart-beating``) is the atomic
  compare-and-set; times come from the server's clock so hosts agree on staleness.

Tenants: every query is scoped by conversation (and memories by user/agent) as on
SQLite. For a hard wall, give each tenant a schema: ``PostgresStore(url,
schema="tenant_a")``, ``postgresql://…?schema=tenant_a`` or libpq's own
``?options=-csearch_path%3Dtenant_a``; the schema is created and migrated on first use
and every pooled connection's ``search_path`` is ``tenant_a, public`` (extensions such
as pgvector live in ``public``).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from lossless.core import dag
from lossless.core._canonical import canonical_json, message_hash, message_id, summary_id
from lossless.core.errors import MissingDependencyError, NotFoundError, StoreError, ValidationError
from lossless.core.render import content_text
from lossless.core.types import ConversationInfo, GrepHit, Message, SourceRef, Summary
from lossless.core.validate import NewMessage, timestamp
from lossless.store.backlog import QUEUE_SQL
from lossless.store.base import NewSummary, RevisedSummary, SearchSpec
from lossless.store.postgres.migrations import migrate
from lossless.store.rows import (
    MESSAGE_COLUMNS,
    SOURCE_SUMMARY_COLUMNS,
    SUMMARY_COLUMNS,
    SUMMARY_READ_COLUMNS,
    message_from_row,
    prefix_upper,
)
from lossless.store.runner import qmark
from lossless.store.urls import redact_url

try:
    import psycopg
    from psycopg import sql as pgsql
    from psycopg_pool import ConnectionPool, PoolTimeout
except ImportError as exc:  # pragma: no cover - the extra is part of the test install
    raise MissingDependencyError(
        "PostgreSQL support needs the postgres extra: pip install 'lossless[postgres]'"
    ) from exc

if TYPE_CHECKING:
    from lossless.store.postgres.recall import PostgresRecall

__all__ = ["PostgresStore", "split_schema"]

_MSG_COLS = MESSAGE_COLUMNS
_SUM_COLS = SUMMARY_COLUMNS
# a summary row with its sources as two arrays: one round trip for a frontier, not 1 + n
_SUM_SELECT = (
    f"SELECT {SUMMARY_READ_COLUMNS}, "
    "ARRAY(SELECT source_kind FROM summary_sources x WHERE x.summary_id = s.id ORDER BY x.ord), "
    "ARRAY(SELECT source_id FROM summary_sources x WHERE x.summary_id = s.id ORDER BY x.ord) "
    "FROM summaries s"
)
_SCHEMA_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
_SEARCH_PATH = re.compile(r"-c\s*search_path\s*=\s*([^\s,]+)")
_NOW = "extract(epoch from clock_timestamp())::float8"  # the server's clock, in Unix seconds


_dumps = canonical_json  # the JSON spelling every stored value uses


def split_schema(url: str) -> tuple[str, str | None]:
    """(the URL libpq should see, the tenant schema it names or None). ``?schema=x`` is
    ours and is removed; ``?options=-csearch_path%3Dx`` is libpq's and is kept."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    schema: str | None = None
    kept: list[tuple[str, str]] = []
    for key, value in query:
        if key == "schema":
            schema = value
            continue
        if key == "options" and schema is None:
            found = _SEARCH_PATH.search(unquote(value))
            if found:
                schema = found.group(1).strip("\"'")
        kept.append((key, value))
    clean = urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(kept), parts.fragment))
    return clean, schema


def _aggregate(field: str) -> str:
    # A number in the summary's metadata JSON, summed; absent or not a number counts 0,
    # like SQLite's total(json_extract(…)).
    return (f"coalesce(sum(CASE WHEN jsonb_typeof(metadata::jsonb -> '{field}') = 'number' "
            f"THEN (metadata::jsonb ->> '{field}')::float8 END), 0)")


class PostgresStore:
    """PostgreSQL implementation of :class:`~lossless.store.base.Store`.

    ``url`` is a libpq URI (``postgresql://user:pass@host:5432/db``); ``pool_size`` caps
    this process's connections; ``schema`` puts every table in that schema (created if
    missing), one schema per tenant.
    """

    dialect = "postgresql"

    def __init__(self, url: str, *, pool_size: int = 4, schema: str | None = None,
                 connect_timeout: float = 30.0) -> None:
        clean, from_url = split_schema(url)
        self.schema = schema or from_url
        if self.schema is not None and not _SCHEMA_NAME.match(self.schema):
            raise ValidationError(f"schema must be a plain identifier (letters, digits, _), got {self.schema!r}")
        if pool_size < 1:
            raise ValidationError(f"pool_size must be >= 1, got {pool_size}")
        self.url = clean
        self.label = redact_url(url)
        self._local = threading.local()
        try:
            # a connect_timeout in the URL wins over the keyword argument
            if "connect_timeout" not in psycopg.conninfo.conninfo_to_dict(clean):
                clean = psycopg.conninfo.make_conninfo(clean, connect_timeout=max(1, int(connect_timeout)))
            first = psycopg.connect(clean, autocommit=True)
        except psycopg.Error as exc:
            raise StoreError(f"cannot connect to PostgreSQL at {self.label}: {exc}".strip()) from exc
        with first:
            if self.schema is not None:
                with first.transaction():
                    first.execute("SELECT pg_advisory_xact_lock(hashtext('lossless.migrate'), hashtext(%s))",
                                  (self.schema,))
                    first.execute(pgsql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(pgsql.Identifier(self.schema)))
            self._configure(first)
            migrate(first)
        self._pool: ConnectionPool[Any] = ConnectionPool(
            clean, min_size=1, max_size=pool_size, kwargs={"autocommit": True}, configure=self._configure,
            open=False, name="lossless", timeout=connect_timeout,
        )
        try:
            self._pool.open(wait=True, timeout=connect_timeout)
        except PoolTimeout as exc:
            raise StoreError(f"cannot open a connection pool to PostgreSQL at {self.label}") from exc

    # -- plumbing ---------------------------------------------------------------------

    def _configure(self, conn: Any) -> None:
        if self.schema is not None:
            conn.execute(pgsql.SQL("SET search_path TO {}, public").format(pgsql.Identifier(self.schema)))

    def close(self) -> None:
        self._pool.close()

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        """One write transaction on one pooled connection (re-entrant within a thread:
        nested uses join the outer one). Yields the psycopg connection."""
        current = getattr(self._local, "conn", None)
        if current is not None:
            yield current
            return
        try:
            with self._pool.connection() as conn, conn.transaction():
                self._local.conn = conn
                try:
                    yield conn
                finally:
                    self._local.conn = None
        except psycopg.OperationalError as exc:
            raise StoreError(f"PostgreSQL at {self.label}: {exc}".strip()) from exc

    def _query(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one statement (inside this thread's transaction if there is one)."""
        current = getattr(self._local, "conn", None)
        try:
            if current is not None:
                cur = current.execute(sql, args)
                return cur.fetchall() if cur.description else []
            with self._pool.connection() as conn:
                cur = conn.execute(sql, args)
                return cur.fetchall() if cur.description else []
        except psycopg.OperationalError as exc:
            if current is not None:
                raise
            raise StoreError(f"PostgreSQL at {self.label}: {exc}".strip()) from exc
        except UnicodeEncodeError as exc:  # an id or a filter with a lone surrogate (as SQLiteStore says)
            raise ValidationError(f"not valid UTF-8 text: {exc.object[:80]!r} (a lone surrogate at "
                                  f"position {exc.start})") from None

    def query(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one statement in this store's dialect (see :class:`~lossless.store.base.SQLAccess`):
        the public way for plug-ins (``files/``, ``memory/``) to reach their tables."""
        return self._query(sql, args)

    def recall_index(self, backend: str = "auto") -> PostgresRecall:
        """Retrieval units, the embedding cache and pgvector indexes in this database."""
        from lossless.store.postgres.recall import PostgresRecall

        return PostgresRecall(self, backend)

    # -- settings -----------------------------------------------------------------------

    def get_settings(self) -> dict[str, Any]:
        return {k: json.loads(v) for k, v in self._query("SELECT key, value FROM settings ORDER BY key")}

    def set_settings(self, values: dict[str, Any]) -> None:
        with self.transaction() as conn, conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO settings (key, value) VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                [(k, _dumps(v)) for k, v in sorted(values.items())],
            )

    # -- conversations ------------------------------------------------------------------

    _CONV_SELECT = (
        "SELECT c.id, c.created_at, c.updated_at, c.metadata, c.last_seq, "
        "(SELECT count(*) FROM summaries s WHERE s.conversation_id = c.id) FROM conversations c"
    )

    @staticmethod
    def _conv_row(row: tuple[Any, ...]) -> ConversationInfo:
        cid, created, updated, meta, last_seq, n_sum = row
        return ConversationInfo(
            id=cid,
            created_at=datetime.fromisoformat(created),
            updated_at=datetime.fromisoformat(updated),
            message_count=int(last_seq),
            summary_count=int(n_sum),
            metadata=json.loads(meta),
        )

    def ensure_conversation(self, conversation_id: str, metadata: dict[str, Any] | None = None) -> ConversationInfo:
        now = datetime.now(UTC).isoformat()
        with self.transaction() as conn:
            conn.execute(
                "INSERT INTO conversations (id, created_at, updated_at, metadata) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (id) DO NOTHING",
                (conversation_id, now, now, _dumps(metadata or {})),
            )
            if metadata:
                row = conn.execute("SELECT metadata FROM conversations WHERE id = %s FOR UPDATE",
                                   (conversation_id,)).fetchone()
                merged = {**json.loads(row[0]), **metadata}
                conn.execute("UPDATE conversations SET metadata = %s WHERE id = %s", (_dumps(merged), conversation_id))
        info = self.get_conversation(conversation_id)
        assert info is not None
        return info

    def get_conversation(self, conversation_id: str) -> ConversationInfo | None:
        rows = self._query(f"{self._CONV_SELECT} WHERE c.id = %s", (conversation_id,))
        return self._conv_row(rows[0]) if rows else None

    def list_conversations(
        self, limit: int = 100, offset: int = 0, *, id_prefix: str | None = None
    ) -> list[ConversationInfo]:
        where: str = ""
        args: tuple[str, ...] = ()
        if id_prefix:  # a range, so the primary key's index does the work
            where = 'WHERE c.id >= %s COLLATE "C" AND c.id < %s COLLATE "C" '
            args = (id_prefix, prefix_upper(id_prefix))
        rows = self._query(f"{self._CONV_SELECT} {where}ORDER BY c.updated_at DESC, c.id LIMIT %s OFFSET %s",
                           (*args, limit, offset))
        return [self._conv_row(r) for r in rows]

    # -- messages -----------------------------------------------------------------------

    _message = staticmethod(message_from_row)  # the same columns as SQLite, the same Message

    def append_messages(
        self, conversation_id: str, messages: Sequence[NewMessage], token_counts: Sequence[int]
    ) -> list[Message]:
        """Append in one transaction. A message whose external id is already stored in
        this conversation is not added again; the stored one is returned in its place."""
        from lossless.store.postgres.grep import search_document

        if len(messages) != len(token_counts):
            raise ValidationError("messages and token_counts differ in length")
        now = datetime.now(UTC).isoformat()
        out: list[Message | str] = []  # a new message, or the id of one stored before (external id)
        with self.transaction() as conn:
            wanted = sorted({m.external_id for m in messages if m.external_id is not None})
            if wanted:
                # The row lock serializes writers of this conversation: seqs never collide or
                # skip, and a concurrent writer of the same external id is seen here.
                row = conn.execute("SELECT last_seq FROM conversations WHERE id = %s FOR UPDATE",
                                   (conversation_id,)).fetchone()
                known: dict[str, str] = dict(conn.execute(
                    "SELECT external_id, id FROM messages WHERE conversation_id = %s AND external_id = ANY(%s)",
                    (conversation_id, wanted),
                ).fetchall()) if row is not None else {}
            else:
                # Without external ids the count is known: take the lock and the seqs in one
                # statement (the row stays locked until commit).
                row = conn.execute(
                    "UPDATE conversations SET last_seq = last_seq + %s, updated_at = %s WHERE id = %s "
                    "RETURNING last_seq - %s",
                    (len(messages), now, conversation_id, len(messages)),
                ).fetchone()
                known = {}
            if row is None:
                raise NotFoundError(f"no conversation {conversation_id!r}")
            seq = int(row[0])
            rows: list[tuple[Any, ...]] = []
            for msg, tokens in zip(messages, token_counts, strict=True):
                if msg.external_id is not None and msg.external_id in known:
                    out.append(known[msg.external_id])
                    continue
                seq += 1
                mid = message_id(conversation_id, seq)
                if msg.external_id is not None:
                    known[msg.external_id] = mid
                is_json = isinstance(msg.content, list)
                text = content_text(msg.content, msg.tool_calls)
                if msg.name:
                    text = f"{msg.name}: {text}"
                stored = (
                    mid, conversation_id, seq, msg.role, msg.name,
                    _dumps(msg.content) if is_json else msg.content, int(is_json),
                    _dumps(list(msg.tool_calls)) if msg.tool_calls else None, msg.tool_call_id,
                    msg.created_at.isoformat(), timestamp(msg.created_at), tokens, _dumps(msg.metadata),
                    msg.external_id, message_hash(msg.role, msg.content, msg.name, msg.tool_calls, msg.tool_call_id),
                    search_document(text),
                )
                rows.append(stored)
                # what reading the row back would give (the stored strings, parsed)
                out.append(self._message((None, *stored[:10], *stored[11:14])))
            sql = ("INSERT INTO messages (id, conversation_id, seq, role, name, content, content_is_json, "
                   "tool_calls, tool_call_id, created_at, created_ts, token_count, metadata, external_id, "
                   "content_hash, search) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, "
                   "to_tsvector('simple', %s))")
            if len(rows) == 1:
                conn.execute(sql, rows[0])
            elif rows:
                with conn.cursor() as cur:
                    cur.executemany(sql, rows)
            if wanted:
                conn.execute("UPDATE conversations SET last_seq = %s, updated_at = %s WHERE id = %s",
                             (seq, now, conversation_id))
            if rows:  # the worker owes this conversation compaction and vectors (store/backlog.py)
                queued = time.time()
                conn.execute(qmark(QUEUE_SQL), (conversation_id, seq, queued, queued))
            before = [i for i in out if isinstance(i, str)]
            found = {r[1]: self._message(r) for r in conn.execute(
                f"SELECT {_MSG_COLS} FROM messages WHERE id = ANY(%s)", (before,)
            ).fetchall()} if before else {}
        return [found[i] if isinstance(i, str) else i for i in out]

    def get_messages(self, conversation_id: str, first_seq: int = 1, last_seq: int | None = None) -> list[Message]:
        hi = last_seq if last_seq is not None else 2**62
        rows = self._query(
            f"SELECT {_MSG_COLS} FROM messages WHERE conversation_id = %s AND seq BETWEEN %s AND %s ORDER BY seq",
            (conversation_id, first_seq, hi),
        )
        return [self._message(r) for r in rows]

    def messages_at(self, conversation_id: str, seqs: Sequence[int]) -> dict[int, Message]:
        """The conversation's messages at these seqs that exist, by seq: one read."""
        if not seqs:
            return {}
        rows = self._query(f"SELECT {_MSG_COLS} FROM messages WHERE conversation_id = %s AND seq = ANY(%s)",
                           (conversation_id, list(dict.fromkeys(int(s) for s in seqs))))
        return {m.seq: m for m in map(self._message, rows)}

    def get_message(self, message_id: str) -> Message:
        rows = self._query(f"SELECT {_MSG_COLS} FROM messages WHERE id = %s", (message_id,))
        if not rows:
            raise NotFoundError(f"no message with id {message_id!r}")
        return self._message(rows[0])

    def messages_by_id(self, message_ids: Sequence[str]) -> dict[str, Message]:
        """The messages with these ids that exist, by id: one read for a batch."""
        if not message_ids:
            return {}
        rows = self._query(f"SELECT {_MSG_COLS} FROM messages WHERE id = ANY(%s)", (list(dict.fromkeys(message_ids)),))
        return {m.id: m for m in map(self._message, rows)}

    def last_seq(self, conversation_id: str) -> int:
        rows = self._query("SELECT last_seq FROM conversations WHERE id = %s", (conversation_id,))
        return int(rows[0][0]) if rows else 0

    def role_counts(self, conversation_id: str, first_seq: int, last_seq: int) -> dict[str, int]:
        rows = self._query("SELECT role, count(*) FROM messages WHERE conversation_id = %s AND seq BETWEEN %s AND %s "
                           "GROUP BY role", (conversation_id, first_seq, last_seq))
        return {role: int(n) for role, n in rows}

    def has_files(self) -> bool:
        """Whether the workspace file index holds anything (one indexed lookup)."""
        return bool(self._query("SELECT 1 FROM files LIMIT 1"))

    def first_message_ts(self, conversation_id: str) -> float | None:
        rows = self._query("SELECT min(created_ts) FROM messages WHERE conversation_id = %s", (conversation_id,))
        return float(rows[0][0]) if rows and rows[0][0] is not None else None

    def token_sum(self, conversation_id: str, first_seq: int, last_seq: int | None = None) -> int:
        hi = last_seq if last_seq is not None else 2**62
        rows = self._query(
            "SELECT coalesce(sum(token_count), 0) FROM messages WHERE conversation_id = %s AND seq BETWEEN %s AND %s",
            (conversation_id, first_seq, hi),
        )
        return int(rows[0][0])

    # -- summaries ----------------------------------------------------------------------

    @staticmethod
    def _summaries(rows: list[tuple[Any, ...]]) -> list[Summary]:
        """Summaries from rows of ``_SUM_SELECT``."""
        out: list[Summary] = []
        for row in rows:
            (sid, cid, depth, content, tokens, first, last, earliest, latest, desc, src_tokens, summarizer, level,
             created, meta, is_root, kinds, ids) = row
            out.append(Summary(
                id=sid, conversation_id=cid, depth=depth, content=content, token_count=tokens,
                first_seq=int(first), last_seq=int(last), earliest_at=datetime.fromisoformat(earliest),
                latest_at=datetime.fromisoformat(latest), descendant_count=desc, source_token_count=src_tokens,
                summarizer=summarizer, fallback_level=level, created_at=datetime.fromisoformat(created),
                sources=tuple(SourceRef(kind=k, id=i) for k, i in zip(kinds, ids, strict=True)),
                metadata=json.loads(meta), root=bool(is_root),
            ))
        return out

    def insert_summary(self, new: NewSummary) -> Summary | None:
        """Write one summary and link its sources, in one transaction.

        Returns None (writing nothing) if the state it was computed from has moved on:
        a leaf whose messages are no longer the oldest uncovered ones, or a condensed
        node whose sources already have a parent (the rules are
        :mod:`lossless.core.dag`'s). The conversation row is locked first, so two
        compactors cannot both pass that check.
        """
        from lossless.store.postgres.grep import search_document

        kind = dag.source_kind(new.sources)
        cid = new.conversation_id
        ids = [s.id for s in new.sources]
        with self.transaction() as conn:
            if conn.execute("SELECT 1 FROM conversations WHERE id = %s FOR UPDATE", (cid,)).fetchone() is None:
                raise NotFoundError(f"no conversation {cid!r}")
            span: dag.Span | None
            if kind == "message":
                rows = conn.execute("SELECT seq, created_at, created_ts, token_count FROM messages "
                                    "WHERE conversation_id = %s AND id = ANY(%s) ORDER BY seq", (cid, ids)).fetchall()
                span = dag.leaf_span(new.depth, len(ids), [dag.SourceMessage(*r) for r in rows])
                if not dag.extends_frontier(span, self._covered_seq(conn, cid)):
                    return None
            else:
                rows = conn.execute(f"SELECT {SOURCE_SUMMARY_COLUMNS} FROM summaries WHERE conversation_id = %s "
                                    "AND id = ANY(%s) ORDER BY first_seq", (cid, ids)).fetchall()
                sources = [dag.SourceSummary(*r) for r in rows]
                if new.root:
                    last = max((int(r.last_seq) for r in sources), default=0)
                    covered = conn.execute("SELECT coalesce(sum(token_count), 0) FROM messages "
                                           "WHERE conversation_id = %s AND seq <= %s", (cid, last)).fetchone()[0]
                    span = dag.root_span(new.depth, ids, sources, int(covered))
                else:
                    span = dag.condensed_span(new.depth, ids, sources)
                if span is None:
                    return None
            sid = summary_id(cid, new.depth, new.sources, new.content, root=new.root)
            if new.root and conn.execute("SELECT 1 FROM summaries WHERE id = %s", (sid,)).fetchone():
                return self.get_summary(sid)  # this very root is written already
            now = datetime.now(UTC).isoformat()
            conn.execute(
                f"INSERT INTO summaries ({_SUM_COLS}, earliest_ts, latest_ts, search) VALUES "
                "(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, to_tsvector('simple', %s))",
                (
                    sid, cid, new.depth, new.content, new.token_count, span.first_seq, span.last_seq,
                    span.earliest_at, span.latest_at, span.descendant_count, span.source_token_count,
                    new.summarizer, new.fallback_level, now, _dumps(new.metadata), span.earliest_ts, span.latest_ts,
                    search_document(new.content),
                ),
            )
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO summary_sources (summary_id, ord, source_kind, source_id) VALUES (%s, %s, %s, %s)",
                    [(sid, i, s.kind, s.id) for i, s in enumerate(new.sources)],
                )
            if new.root:  # a root is its own parent: never on the frontier, never condensed
                conn.execute("UPDATE summaries SET parent_id = id WHERE id = %s", (sid,))
            elif kind == "summary":
                conn.execute("UPDATE summaries SET parent_id = %s WHERE id = ANY(%s)", (sid, ids))
            conn.execute("UPDATE conversations SET updated_at = %s WHERE id = %s", (now, cid))
        return self.get_summary(sid)

    @staticmethod
    def _covered_seq(conn: Any, conversation_id: str) -> int:
        row = conn.execute(
            "SELECT coalesce(max(last_seq), 0) FROM summaries WHERE conversation_id = %s AND parent_id IS NULL",
            (conversation_id,),
        ).fetchone()
        return int(row[0])

    def covered_seq(self, conversation_id: str) -> int:
        rows = self._query(
            "SELECT coalesce(max(last_seq), 0) FROM summaries WHERE conversation_id = %s AND parent_id IS NULL",
            (conversation_id,),
        )
        return int(rows[0][0])

    def revise_summary(self, summary_id: str, expected: str, revision: RevisedSummary) -> Summary | None:
        """As :meth:`SQLiteStore.revise_summary`: the earlier text kept, the row updated
        with its search document, or None if the text is no longer ``expected``."""
        from lossless.store.postgres.grep import search_document

        with self.transaction() as conn:
            row = conn.execute("SELECT content, token_count, summarizer, fallback_level, metadata FROM summaries "
                               "WHERE id = %s FOR UPDATE", (summary_id,)).fetchone()
            if row is None:
                raise NotFoundError(f"no summary with id {summary_id!r}")
            content, tokens, summarizer, level, meta = row
            if content != expected:
                return None
            number = conn.execute("SELECT coalesce(max(revision), 0) + 1 FROM summary_revisions WHERE summary_id = %s",
                                  (summary_id,)).fetchone()[0]
            conn.execute("INSERT INTO summary_revisions (summary_id, revision, content, token_count, summarizer, "
                         "fallback_level, metadata, replaced_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                         (summary_id, number, content, tokens, summarizer, level, meta, datetime.now(UTC).isoformat()))
            conn.execute("UPDATE summaries SET content = %s, token_count = %s, summarizer = %s, fallback_level = %s, "
                         "metadata = %s, search = to_tsvector('simple', %s) WHERE id = %s",
                         (revision.content, revision.token_count, revision.summarizer, revision.fallback_level,
                          _dumps(revision.metadata), search_document(revision.content), summary_id))
        return self.get_summary(summary_id)

    def summary_revisions(self, summary_id: str) -> list[dict[str, Any]]:
        """The earlier texts of a summary, oldest first."""
        from lossless.store.revisions import summary_revisions

        return summary_revisions(self, summary_id)

    def get_summary(self, summary_id: str) -> Summary:
        rows = self._query(f"{_SUM_SELECT} WHERE s.id = %s", (summary_id,))
        if not rows:
            raise NotFoundError(f"no summary with id {summary_id!r}")
        return self._summaries(rows)[0]

    def parent_of(self, summary_id: str) -> str | None:
        rows = self._query("SELECT nullif(parent_id, id) FROM summaries WHERE id = %s", (summary_id,))  # a root: none
        if not rows:
            raise NotFoundError(f"no summary with id {summary_id!r}")
        return rows[0][0]  # type: ignore[no-any-return]

    def frontier(self, conversation_id: str) -> list[Summary]:
        return self._summaries(self._query(
            f"{_SUM_SELECT} WHERE s.conversation_id = %s AND s.parent_id IS NULL ORDER BY s.first_seq",
            (conversation_id,),
        ))

    def root(self, conversation_id: str) -> Summary | None:
        """As :meth:`SQLiteStore.root`: the current whole-conversation root, or None."""
        rows = self._query(f"{_SUM_SELECT} WHERE s.conversation_id = %s AND s.parent_id = s.id "
                           "ORDER BY s.last_seq DESC, s.created_at DESC, s.id LIMIT 1", (conversation_id,))
        return self._summaries(rows)[0] if rows else None

    def leaf_for(self, conversation_id: str, seq: int) -> Summary | None:
        rows = self._query(
            f"{_SUM_SELECT} WHERE s.conversation_id = %s AND s.depth = 0 AND s.first_seq <= %s AND s.last_seq >= %s "
            "LIMIT 1",
            (conversation_id, seq, seq),
        )
        return self._summaries(rows)[0] if rows else None

    def summaries(self, conversation_id: str) -> list[Summary]:
        return self._summaries(self._query(
            f"{_SUM_SELECT} WHERE s.conversation_id = %s ORDER BY s.depth DESC, s.first_seq",
            (conversation_id,),
        ))

    def summarizer_usage(self, conversation_id: str | None = None) -> dict[str, Any]:
        """Totals over the summaries' recorded spend, as :meth:`SQLiteStore.summarizer_usage`."""
        where, args = ("WHERE conversation_id = %s", (conversation_id,)) if conversation_id else ("", ())
        rows = self._query(
            f"SELECT summarizer, fallback_level, count(*), {_aggregate('calls')}, "
            f"{_aggregate('summarizer_input_tokens')}, {_aggregate('summarizer_output_tokens')}, "
            f"{_aggregate('latency_ms')} FROM summaries {where} GROUP BY summarizer, fallback_level "
            "ORDER BY summarizer, fallback_level",
            args,
        )
        usage: dict[str, Any] = {"summarizer_calls": 0, "summarizer_input_tokens": 0, "summarizer_output_tokens": 0,
                                 "summarizer_seconds": 0.0, "summaries_by_summarizer": {}, "summaries_by_fallback": {}}
        for name, level, n, calls, tin, tout, ms in rows:
            usage["summarizer_calls"] += int(calls)
            usage["summarizer_input_tokens"] += int(tin)
            usage["summarizer_output_tokens"] += int(tout)
            usage["summarizer_seconds"] = round(usage["summarizer_seconds"] + float(ms) / 1000, 3)
            by_name = usage["summaries_by_summarizer"]
            by_name[name] = by_name.get(name, 0) + int(n)
            label = ("normal", "aggressive", "extractive")[level] if 0 <= level <= 2 else str(level)
            usage["summaries_by_fallback"][label] = usage["summaries_by_fallback"].get(label, 0) + int(n)
        return usage

    # -- compaction leases and log ------------------------------------------------------

    def acquire_lease(self, conversation_id: str, owner: str, reason: str, stale_after: float) -> bool:
        """Take the conversation's compaction lease, or take over one whose holder stopped
        heart-beating; False when a live holder has it. One statement: the upsert locks
        the lease row, so two contenders cannot both see it free."""
        rows = self._query(
            "INSERT INTO compaction_leases AS l (conversation_id, owner, reason, acquired_ts, heartbeat_ts, "
            f"stale_after) VALUES (%s, %s, %s, {_NOW}, {_NOW}, %s) ON CONFLICT (conversation_id) DO UPDATE SET "
            "owner = excluded.owner, reason = excluded.reason, acquired_ts = excluded.acquired_ts, "
            "heartbeat_ts = excluded.heartbeat_ts, stale_after = excluded.stale_after "
            "WHERE l.owner = excluded.owner OR l.heartbeat_ts + l.stale_after <= excluded.acquired_ts "
            "RETURNING l.owner",
            (conversation_id, owner, reason, float(stale_after)),
        )
        return bool(rows)

    def heartbeat_lease(self, conversation_id: str, owner: str) -> None:
        self._query(f"UPDATE compaction_leases SET heartbeat_ts = {_NOW} WHERE conversation_id = %s AND owner = %s",
                    (conversation_id, owner))

    def release_lease(self, conversation_id: str, owner: str) -> None:
        self._query("DELETE FROM compaction_leases WHERE conversation_id = %s AND owner = %s", (conversation_id, owner))

    def lease(self, conversation_id: str) -> dict[str, Any] | None:
        """The live lease on this conversation (who is compacting it, since when, why)."""
        rows = self._query(
            f"SELECT owner, reason, acquired_ts, heartbeat_ts FROM compaction_leases WHERE conversation_id = %s "
            f"AND heartbeat_ts + stale_after > {_NOW}",
            (conversation_id,),
        )
        if not rows:
            return None
        owner, reason, acquired, beat = rows[0]
        return {"owner": owner, "reason": reason, "acquired_ts": acquired, "heartbeat_ts": beat}

    def flushed_seq(self, conversation_id: str) -> int:
        rows = self._query("SELECT last_seq FROM memory_flush WHERE conversation_id = %s", (conversation_id,))
        return int(rows[0][0]) if rows else 0

    def set_flushed_seq(self, conversation_id: str, last_seq: int) -> None:
        self._query("INSERT INTO memory_flush AS f (conversation_id, last_seq) VALUES (%s, %s) ON CONFLICT "
                    "(conversation_id) DO UPDATE SET last_seq = greatest(f.last_seq, excluded.last_seq)",
                    (conversation_id, last_seq))

    def log_compaction(self, conversation_id: str, entry: dict[str, Any]) -> None:
        self._query(
            "INSERT INTO compaction_log (conversation_id, reason, started_ts, finished_ts, tokens_before, "
            "tokens_after, leaves, condensed, skipped, owner) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            (conversation_id, entry["reason"], entry["started_ts"], entry["finished_ts"], entry["tokens_before"],
             entry["tokens_after"], entry["leaves"], entry["condensed"], entry.get("skipped"), entry["owner"]),
        )

    def compaction_log(self, conversation_id: str, limit: int = 100) -> list[dict[str, Any]]:
        """The newest compactions of this conversation first."""
        rows = self._query(
            "SELECT reason, started_ts, finished_ts, tokens_before, tokens_after, leaves, condensed, skipped, owner "
            "FROM compaction_log WHERE conversation_id = %s ORDER BY started_ts DESC, rowid DESC LIMIT %s",
            (conversation_id, limit),
        )
        keys = ("reason", "started_ts", "finished_ts", "tokens_before", "tokens_after", "leaves", "condensed",
                "skipped", "owner")
        return [dict(zip(keys, r, strict=True)) for r in rows]

    # -- search and integrity -----------------------------------------------------------

    def search(self, spec: SearchSpec) -> list[GrepHit]:
        from lossless.store.postgres.grep import run_search

        return run_search(self, spec)

    def verify(self, conversation_id: str | None = None, *, integrity: bool = True) -> list[str]:
        """Re-check every invariant the design states (:func:`lossless.core.dag.verify`);
        empty when all hold. ``integrity`` is SQLite's file check; PostgreSQL checks its
        own pages."""
        from lossless.store.integrity import verify_conversations

        return verify_conversations(lambda sql, args: self._query(qmark(sql), list(args)), conversation_id)
