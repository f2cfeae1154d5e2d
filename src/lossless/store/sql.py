"""The store's domain methods, written once for SQLite and PostgreSQL.

:class:`SQLStore` keeps conversations, their messages, the summary DAG, compaction leases
and their log, memory watermarks and settings, in SQL written once with ``?`` placeholders
and a :class:`~lossless.store.runner.Dialect` for the few spellings that differ (a row
lock, ``greatest``, the clock, a list as one value, a byte-wise prefix range, a sum over
JSON). A store subclasses it and supplies what is its own:

* ``_run(sql, args)``: one ``?`` statement and its rows. SQLite runs the text as it is;
  PostgreSQL's ``%s`` text is made once per statement
  (:func:`~lossless.store.runner.qmark_once`), not on every call;
* ``_writing()``: a write transaction whose connection takes ``?``, and ``_write(sql,
  args)``: one write statement (a transaction of its own on SQLite, where the lock and the
  errors are the transaction's; autocommit on PostgreSQL, one round trip);
* where a row's search document lives (SQLite: an FTS5 table beside it with the same
  rowid; PostgreSQL: a ``tsvector`` column): ``_search_text``, ``_insert_messages``,
  ``_insert_summary``, ``_revise_summary``;
* how an append claims its seqs (``_start_append``: SQLite reads them under its database
  lock, PostgreSQL locks the conversation row, or claims them in one ``UPDATE …
  RETURNING`` when the count is known) and how a summary's sources are read
  (``_SUMMARY_SELECT`` and ``_summaries``: a second query and a cache on SQLite, two
  arrays in the same row on PostgreSQL).
"""

from __future__ import annotations

import json
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from typing import Any, ClassVar

from lossless.core import dag
from lossless.core._canonical import canonical_json, message_id, summary_id
from lossless.core.errors import NotFoundError, ValidationError
from lossless.core.types import ConversationInfo, Message, Summary
from lossless.core.validate import NewMessage
from lossless.store.backlog import QUEUE_SQL
from lossless.store.base import NewSummary, RevisedSummary
from lossless.store.prepared import PreparedMessage
from lossless.store.rows import (
    MESSAGE_COLUMNS,
    SOURCE_SUMMARY_COLUMNS,
    SUMMARY_COLUMNS,
    message_from_row,
    prefix_upper,
)
from lossless.store.runner import Dialect

__all__ = ["NEW_MESSAGE_COLUMNS", "NEW_SUMMARY_COLUMNS", "REVISED_SUMMARY_COLUMNS", "SQLStore"]

_dumps = canonical_json  # the JSON spelling every stored value uses

# the columns of a new messages row: id, conversation_id, seq, then PreparedMessage.columns
NEW_MESSAGE_COLUMNS = ("id, conversation_id, seq, role, name, content, content_is_json, tool_calls, tool_call_id, "
                       "created_at, created_ts, token_count, metadata, external_id, content_hash")
# the columns of a new summaries row, in the order of insert_summary's values
NEW_SUMMARY_COLUMNS = f"{SUMMARY_COLUMNS}, earliest_ts, latest_ts"
# what revise_summary sets, in the order of its values
REVISED_SUMMARY_COLUMNS = "content = ?, token_count = ?, summarizer = ?, fallback_level = ?, metadata = ?"

_CONV_SELECT = (
    "SELECT c.id, c.created_at, c.updated_at, c.metadata, c.last_seq, "
    "(SELECT count(*) FROM summaries s WHERE s.conversation_id = c.id) FROM conversations c"
)
_GET_CONVERSATION = f"{_CONV_SELECT} WHERE c.id = ?"
_GET_MESSAGES = (f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE conversation_id = ? AND seq BETWEEN ? AND ? "
                 "ORDER BY seq")
_GET_MESSAGE = f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE id = ?"
_MESSAGES_AT = f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE conversation_id = ? AND "
_MESSAGES_BY_ID = f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE "
_LAST_SEQ = "SELECT last_seq FROM conversations WHERE id = ?"
_COVERED_SEQ = "SELECT coalesce(max(last_seq), 0) FROM summaries WHERE conversation_id = ? AND parent_id IS NULL"
_LEASE_COLUMNS = "owner, reason, acquired_ts, heartbeat_ts"
_LOG_KEYS = ("reason", "started_ts", "finished_ts", "tokens_before", "tokens_after", "leaves", "condensed", "skipped",
             "owner")
_COMPACTION_LOG = (f"SELECT {', '.join(_LOG_KEYS)} FROM compaction_log WHERE conversation_id = ? "
                   "ORDER BY started_ts DESC, rowid DESC LIMIT ?")


def _conversation(row: tuple[Any, ...]) -> ConversationInfo:
    cid, created, updated, meta, last_seq, n_sum = row
    return ConversationInfo(id=cid, created_at=datetime.fromisoformat(created),
                            updated_at=datetime.fromisoformat(updated), message_count=int(last_seq),
                            summary_count=int(n_sum), metadata=json.loads(meta))


class SQLStore(ABC):
    """Conversations, messages, the summary DAG, leases, watermarks and settings over
    one :class:`~lossless.store.runner.Dialect` (see the module docstring for what a
    store subclassing it supplies)."""

    _sql: ClassVar[Dialect]
    # a summaries row as read (SUMMARY_READ_COLUMNS first) FROM summaries s, for _summaries
    _SUMMARY_SELECT: ClassVar[str]
    # the newest of a conversation's roots first (see root)
    _NEWEST_ROOT: ClassVar[str]

    # -- what a store supplies --------------------------------------------------------

    @abstractmethod
    def _query(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one statement in this store's own placeholders (in this thread's
        transaction, if one is open)."""

    def query(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one statement in this store's dialect (see :class:`~lossless.store.base.SQLAccess`):
        the public way for plug-ins (``files/``, ``memory/``) to reach their tables."""
        return self._query(sql, args)

    @abstractmethod
    def _run(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one ``?`` statement (in this thread's transaction, if one is open)."""

    @abstractmethod
    def _write(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one ``?`` write statement as a transaction of its own (or in the open one)."""

    @abstractmethod
    def _writing(self) -> AbstractContextManager[Any]:
        """A write transaction; yields a connection whose ``execute`` and ``executemany``
        take ``?`` placeholders."""

    @staticmethod
    @abstractmethod
    def _search_text(text: str) -> str:
        """What a message's or a summary's search index is given for its text."""

    @abstractmethod
    def _start_append(self, conn: Any, conversation_id: str, count: int | None,
                      now: str) -> tuple[int, int, bool] | None:
        """(the conversation's last seq, the rowid after which new messages go or 0,
        whether ``count`` seqs were claimed already), under the write lock append needs;
        None if there is no such conversation. ``count`` is None while duplicates are
        possible (external ids)."""

    @abstractmethod
    def _insert_messages(self, conn: Any, rows: list[tuple[Any, ...]], documents: list[tuple[int, str]]) -> None:
        """Insert new messages: ``rows`` are (rowid, NEW_MESSAGE_COLUMNS…), ``documents``
        (rowid, search text) each; a rowid counts on from ``_start_append``'s."""

    @abstractmethod
    def _insert_summary(self, conn: Any, values: tuple[Any, ...], text: str) -> None:
        """Insert a summaries row (``values`` of NEW_SUMMARY_COLUMNS) and its search document."""

    @abstractmethod
    def _revise_summary(self, conn: Any, rowid: int, values: tuple[Any, ...], text: str) -> None:
        """Set a summary's REVISED_SUMMARY_COLUMNS and its search document."""

    @abstractmethod
    def _summaries(self, rows: list[tuple[Any, ...]], cached: bool = False) -> list[Summary]:
        """Summaries from rows of ``_SUMMARY_SELECT``. ``cached``: their sources may come
        from earlier reads (a summary's sources never change: its id hashes them)."""

    # -- settings -----------------------------------------------------------------------

    def get_settings(self) -> dict[str, Any]:
        return {k: json.loads(v) for k, v in self._run("SELECT key, value FROM settings ORDER BY key")}

    def set_settings(self, values: dict[str, Any]) -> None:
        with self._writing() as conn:
            conn.executemany(
                "INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                [(k, _dumps(v)) for k, v in sorted(values.items())],
            )

    # -- conversations ------------------------------------------------------------------

    def ensure_conversation(self, conversation_id: str, metadata: dict[str, Any] | None = None) -> ConversationInfo:
        now = datetime.now(UTC).isoformat()
        with self._writing() as conn:
            conn.execute(
                "INSERT INTO conversations (id, created_at, updated_at, metadata) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (id) DO NOTHING",
                (conversation_id, now, now, _dumps(metadata or {})),
            )
            if metadata:
                row = conn.execute(f"SELECT metadata FROM conversations WHERE id = ?{self._sql.for_update}",
                                   (conversation_id,)).fetchone()
                merged = {**json.loads(row[0]), **metadata}
                conn.execute("UPDATE conversations SET metadata = ? WHERE id = ?", (_dumps(merged), conversation_id))
        info = self.get_conversation(conversation_id)
        assert info is not None
        return info

    def get_conversation(self, conversation_id: str) -> ConversationInfo | None:
        rows = self._run(_GET_CONVERSATION, (conversation_id,))
        return _conversation(rows[0]) if rows else None

    def drop_if_empty(self, conversation_id: str) -> bool:
        with self._writing() as conn:
            gone = conn.execute(
                "DELETE FROM conversations WHERE id = ? AND last_seq = 0 "
                "AND NOT EXISTS (SELECT 1 FROM messages WHERE conversation_id = ?) "
                "AND NOT EXISTS (SELECT 1 FROM summaries WHERE conversation_id = ?) RETURNING id",
                (conversation_id, conversation_id, conversation_id)).fetchall()
        return bool(gone)

    def list_conversations(
        self, limit: int = 100, offset: int = 0, *, id_prefix: str | None = None
    ) -> list[ConversationInfo]:
        where: str = ""
        args: tuple[str, ...] = ()
        if id_prefix:  # a range, so the primary key's index does the work
            where = f"WHERE {self._sql.text_range('c.id')} "
            args = (id_prefix, prefix_upper(id_prefix))
        rows = self._run(f"{_CONV_SELECT} {where}ORDER BY c.updated_at DESC, c.id LIMIT ? OFFSET ?",
                         (*args, limit, offset))
        return [_conversation(r) for r in rows]

    # -- messages -----------------------------------------------------------------------

    def append_messages(
        self, conversation_id: str, messages: Sequence[NewMessage], token_counts: Sequence[int]
    ) -> list[Message]:
        """Append in one transaction. A message whose external id is already stored in
        this conversation is not added again; the stored one is returned in its place."""
        if len(messages) != len(token_counts):
            raise ValidationError("messages and token_counts differ in length")
        # The returned messages are built from the values written (as a read would give
        # them back) instead of read back, and what does not depend on the seq (JSON, hash,
        # search document) is made before the transaction: it holds SQLite's lock, which
        # every read of the process waits for, or the conversation's row on PostgreSQL.
        search_text = self._search_text
        prepared = [PreparedMessage.of(m, t, search_text) for m, t in zip(messages, token_counts, strict=True)]
        wanted = [m.external_id for m in messages if m.external_id is not None]
        out: list[Message | str] = []  # a new message, or the id of one stored earlier
        rows: list[tuple[Any, ...]] = []
        documents: list[tuple[int, str]] = []
        now = datetime.now(UTC).isoformat()
        with self._writing() as conn:
            start = self._start_append(conn, conversation_id, None if wanted else len(messages), now)
            if start is None:
                raise NotFoundError(f"no conversation {conversation_id!r}")
            seq, rowid, claimed = start
            known: dict[str, str] = {}  # external id -> the id of the message stored with it
            if wanted:
                among, args = self._sql.in_list("external_id", list(dict.fromkeys(wanted)))
                known = dict(conn.execute(f"SELECT external_id, id FROM messages WHERE conversation_id = ? AND {among}",
                                          (conversation_id, *args)).fetchall())
            batch: dict[str, Message] = {}  # external id -> the message of this batch that has it
            for msg, p in zip(messages, prepared, strict=True):
                ext = msg.external_id
                if ext is not None:
                    earlier: Message | str | None = batch.get(ext)
                    if earlier is None:
                        earlier = known.get(ext)
                    if earlier is not None:
                        out.append(earlier)
                        continue
                seq += 1
                rowid += 1
                mid = message_id(conversation_id, seq)
                rows.append((rowid, mid, conversation_id, seq, *p.columns))
                documents.append((rowid, p.document))
                new = p.message(mid, conversation_id, seq)
                if ext is not None:
                    batch[ext] = new
                out.append(new)
            self._insert_messages(conn, rows, documents)
            if not claimed:
                conn.execute("UPDATE conversations SET last_seq = ?, updated_at = ? WHERE id = ?",
                             (seq, now, conversation_id))
            if rows:  # the worker owes this conversation compaction and vectors (store/backlog.py)
                queued = time.time()
                conn.execute(QUEUE_SQL, (conversation_id, seq, queued, queued))
            earlier_ids = [o for o in out if isinstance(o, str)]
            by_id = {}
            if earlier_ids:
                among, args = self._sql.in_list("id", earlier_ids)
                found = conn.execute(f"{_MESSAGES_BY_ID}{among}", args).fetchall()
                by_id = {r[1]: message_from_row(r) for r in found}
        return [o if isinstance(o, Message) else by_id[o] for o in out]

    def get_messages(self, conversation_id: str, first_seq: int = 1, last_seq: int | None = None) -> list[Message]:
        hi = last_seq if last_seq is not None else 2**62
        return list(map(message_from_row, self._run(_GET_MESSAGES, (conversation_id, first_seq, hi))))

    def messages_at(self, conversation_id: str, seqs: Sequence[int]) -> dict[int, Message]:
        """The conversation's messages at these seqs that exist, by seq: one read."""
        if not seqs:
            return {}
        among, args = self._sql.in_list("seq", list(dict.fromkeys(map(int, seqs))))
        rows = self._run(_MESSAGES_AT + among, (conversation_id, *args))
        return {m.seq: m for m in map(message_from_row, rows)}

    def get_message(self, message_id: str) -> Message:
        rows = self._run(_GET_MESSAGE, (message_id,))
        if not rows:
            raise NotFoundError(f"no message with id {message_id!r}")
        return message_from_row(rows[0])

    def messages_by_id(self, message_ids: Sequence[str]) -> dict[str, Message]:
        """The messages with these ids that exist, by id: one read for a batch."""
        if not message_ids:
            return {}
        out: dict[str, Message] = {}
        for among, args in self._sql.in_batches("id", list(dict.fromkeys(message_ids))):
            out.update((m.id, m) for m in map(message_from_row, self._run(_MESSAGES_BY_ID + among, args)))
        return out

    def last_seq(self, conversation_id: str) -> int:
        rows = self._run(_LAST_SEQ, (conversation_id,))
        return int(rows[0][0]) if rows else 0

    def role_counts(self, conversation_id: str, first_seq: int, last_seq: int) -> dict[str, int]:
        rows = self._run("SELECT role, count(*) FROM messages WHERE conversation_id = ? AND seq BETWEEN ? AND ? "
                         "GROUP BY role", (conversation_id, first_seq, last_seq))
        return {role: int(n) for role, n in rows}

    def has_files(self) -> bool:
        """Whether the workspace file index holds anything (one indexed lookup)."""
        return bool(self._run("SELECT 1 FROM files LIMIT 1"))

    def first_message_ts(self, conversation_id: str) -> float | None:
        rows = self._run("SELECT min(created_ts) FROM messages WHERE conversation_id = ?", (conversation_id,))
        return float(rows[0][0]) if rows and rows[0][0] is not None else None

    def token_sum(self, conversation_id: str, first_seq: int, last_seq: int | None = None) -> int:
        hi = last_seq if last_seq is not None else 2**62
        rows = self._run("SELECT coalesce(sum(token_count), 0) FROM messages WHERE conversation_id = ? "
                         "AND seq BETWEEN ? AND ?", (conversation_id, first_seq, hi))
        return int(rows[0][0])

    # -- summaries ----------------------------------------------------------------------

    def insert_summary(self, new: NewSummary) -> Summary | None:
        """Write one summary and link its sources, in one transaction.

        Returns None (writing nothing) if the state it was computed from has moved on:
        a leaf whose messages are no longer the oldest uncovered ones, or a condensed
        node whose sources already have a parent. That makes a re-run harmless and two
        compactions of one conversation unable to both land. The rules are
        :mod:`lossless.core.dag`'s; the write lock (SQLite's BEGIN IMMEDIATE, the
        conversation's row on PostgreSQL) makes the check and the write atomic.
        """
        kind = dag.source_kind(new.sources)
        cid = new.conversation_id
        ids = [s.id for s in new.sources]
        among, values = self._sql.in_list("id", ids)
        with self._writing() as conn:
            if self._sql.for_update and conn.execute(  # a row lock: two compactors queue up here
                    f"SELECT 1 FROM conversations WHERE id = ?{self._sql.for_update}", (cid,)).fetchone() is None:
                raise NotFoundError(f"no conversation {cid!r}")
            span: dag.Span | None
            if kind == "message":
                # SQLite's +conversation_id: not by that index, which made SQLite walk every
                # message of the conversation (a leaf's write grew with its length); by id instead
                rows = conn.execute(f"SELECT seq, created_at, created_ts, token_count FROM messages "
                                    f"WHERE {self._sql.unindexed('conversation_id')} = ? AND {among} ORDER BY seq",
                                    (cid, *values)).fetchall()
                span = dag.leaf_span(new.depth, len(ids), [dag.SourceMessage(*r) for r in rows])
                if not dag.extends_frontier(span, int(conn.execute(_COVERED_SEQ, (cid,)).fetchone()[0])):
                    return None
            else:
                rows = conn.execute(f"SELECT {SOURCE_SUMMARY_COLUMNS} FROM summaries WHERE conversation_id = ? "
                                    f"AND {among} ORDER BY first_seq", (cid, *values)).fetchall()
                sources = [dag.SourceSummary(*r) for r in rows]
                if new.root:
                    last = max((int(r.last_seq) for r in sources), default=0)
                    covered = conn.execute("SELECT coalesce(sum(token_count), 0) FROM messages WHERE conversation_id = ? "
                                           "AND seq <= ?", (cid, last)).fetchone()[0]
                    span = dag.root_span(new.depth, ids, sources, int(covered))
                else:
                    span = dag.condensed_span(new.depth, ids, sources)
                if span is None:
                    return None
            sid = summary_id(cid, new.depth, new.sources, new.content, root=new.root)
            if new.root and conn.execute("SELECT 1 FROM summaries WHERE id = ?", (sid,)).fetchone():
                return self.get_summary(sid)  # this very root is written already
            now = datetime.now(UTC).isoformat()
            self._insert_summary(conn, (
                sid, cid, new.depth, new.content, new.token_count, span.first_seq, span.last_seq,
                span.earliest_at, span.latest_at, span.descendant_count, span.source_token_count,
                new.summarizer, new.fallback_level, now, _dumps(new.metadata), span.earliest_ts, span.latest_ts,
            ), new.content)
            conn.executemany(
                "INSERT INTO summary_sources (summary_id, ord, source_kind, source_id) VALUES (?, ?, ?, ?)",
                [(sid, i, s.kind, s.id) for i, s in enumerate(new.sources)],
            )
            if new.root:  # a root is its own parent: never on the frontier, never condensed
                conn.execute("UPDATE summaries SET parent_id = id WHERE id = ?", (sid,))
            elif kind == "summary":
                conn.execute(f"UPDATE summaries SET parent_id = ? WHERE {among}", (sid, *values))
            conn.execute("UPDATE conversations SET updated_at = ? WHERE id = ?", (now, cid))
        return self.get_summary(sid)

    def covered_seq(self, conversation_id: str) -> int:
        return int(self._run(_COVERED_SEQ, (conversation_id,))[0][0])

    def revise_summary(self, summary_id: str, expected: str, revision: RevisedSummary) -> Summary | None:
        """Replace a summary's text (``lossless compact --redo-fallbacks``) in one
        transaction: its earlier text goes to ``summary_revisions``, its id, span and
        place in the DAG stay. None (nothing written) if its text is no longer
        ``expected`` (someone else revised it first)."""
        with self._writing() as conn:
            row = conn.execute("SELECT rowid, content, token_count, summarizer, fallback_level, metadata "
                               f"FROM summaries WHERE id = ?{self._sql.for_update}", (summary_id,)).fetchone()
            if row is None:
                raise NotFoundError(f"no summary with id {summary_id!r}")
            rowid, content, tokens, summarizer, level, meta = row
            if content != expected:
                return None
            number = conn.execute("SELECT coalesce(max(revision), 0) + 1 FROM summary_revisions WHERE summary_id = ?",
                                  (summary_id,)).fetchone()[0]
            conn.execute("INSERT INTO summary_revisions (summary_id, revision, content, token_count, summarizer, "
                         "fallback_level, metadata, replaced_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                         (summary_id, number, content, tokens, summarizer, level, meta, datetime.now(UTC).isoformat()))
            self._revise_summary(conn, rowid, (revision.content, revision.token_count, revision.summarizer,
                                               revision.fallback_level, _dumps(revision.metadata)), revision.content)
        return self.get_summary(summary_id)

    def summary_revisions(self, summary_id: str) -> list[dict[str, Any]]:
        """The earlier texts of a summary, oldest first."""
        from lossless.store.revisions import summary_revisions

        return summary_revisions(self, summary_id)

    def get_summary(self, summary_id: str) -> Summary:
        rows = self._run(f"{self._SUMMARY_SELECT} WHERE s.id = ?", (summary_id,))
        if not rows:
            raise NotFoundError(f"no summary with id {summary_id!r}")
        return self._summaries(rows)[0]

    def parent_of(self, summary_id: str) -> str | None:
        rows = self._run("SELECT nullif(parent_id, id) FROM summaries WHERE id = ?", (summary_id,))  # a root: none
        if not rows:
            raise NotFoundError(f"no summary with id {summary_id!r}")
        return rows[0][0]  # type: ignore[no-any-return]

    def frontier(self, conversation_id: str) -> list[Summary]:
        rows = self._run(f"{self._SUMMARY_SELECT} WHERE s.conversation_id = ? AND s.parent_id IS NULL "
                         "ORDER BY s.first_seq", (conversation_id,))
        # compaction reads the frontier several times a pass, assembly on every turn
        return self._summaries(rows, cached=True)

    def root(self, conversation_id: str) -> Summary | None:
        """The conversation's current whole-conversation root: the one reaching furthest
        (the newest of those), or None."""
        rows = self._run(f"{self._SUMMARY_SELECT} WHERE s.conversation_id = ? AND s.parent_id = s.id "
                         f"ORDER BY {self._NEWEST_ROOT} LIMIT 1", (conversation_id,))
        return self._summaries(rows, cached=True)[0] if rows else None

    def leaf_for(self, conversation_id: str, seq: int) -> Summary | None:
        rows = self._run(f"{self._SUMMARY_SELECT} WHERE s.conversation_id = ? AND s.depth = 0 AND s.first_seq <= ? "
                         "AND s.last_seq >= ? LIMIT 1", (conversation_id, seq, seq))
        return self._summaries(rows)[0] if rows else None

    def summaries(self, conversation_id: str) -> list[Summary]:
        # a total order, the same on both stores: two summaries of one depth may start at
        # the same message (an older root and the newer one that reaches further); they
        # are listed in the order they were written (PostgreSQL returned such ties in
        # whatever order its heap held them)
        return self._summaries(self._run(f"{self._SUMMARY_SELECT} WHERE s.conversation_id = ? "
                                         "ORDER BY s.depth DESC, s.first_seq, s.rowid", (conversation_id,)))

    def summarizer_usage(self, conversation_id: str | None = None) -> dict[str, Any]:
        """Totals over the summaries' recorded spend (see ``Compactor._write``): provider
        calls, tokens sent to and received from a model, latency, and counts per
        summarizer and per fallback level."""
        where, args = ("WHERE conversation_id = ?", (conversation_id,)) if conversation_id else ("", ())
        # sums over the metadata JSON: accounting fields are written once and only read
        # here, so they do not earn columns of their own
        total = self._sql.json_number_sum
        rows = self._run(
            f"SELECT summarizer, fallback_level, count(*), {total('calls')}, {total('summarizer_input_tokens')}, "
            f"{total('summarizer_output_tokens')}, {total('latency_ms')} FROM summaries {where} "
            "GROUP BY summarizer, fallback_level ORDER BY summarizer, fallback_level",
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
        now = self._sql.now
        rows = self._write(
            "INSERT INTO compaction_leases AS l (conversation_id, owner, reason, acquired_ts, heartbeat_ts, "
            f"stale_after) VALUES (?, ?, ?, {now}, {now}, ?) ON CONFLICT (conversation_id) DO UPDATE SET "
            "owner = excluded.owner, reason = excluded.reason, acquired_ts = excluded.acquired_ts, "
            "heartbeat_ts = excluded.heartbeat_ts, stale_after = excluded.stale_after "
            "WHERE l.owner = excluded.owner OR l.heartbeat_ts + l.stale_after <= excluded.acquired_ts "
            "RETURNING owner",
            (conversation_id, owner, reason, float(stale_after)),
        )
        return bool(rows)

    def heartbeat_lease(self, conversation_id: str, owner: str) -> None:
        self._write(f"UPDATE compaction_leases SET heartbeat_ts = {self._sql.now} WHERE conversation_id = ? "
                    "AND owner = ?", (conversation_id, owner))

    def release_lease(self, conversation_id: str, owner: str) -> None:
        self._write("DELETE FROM compaction_leases WHERE conversation_id = ? AND owner = ?", (conversation_id, owner))

    def lease(self, conversation_id: str) -> dict[str, Any] | None:
        """The live lease on this conversation (who is compacting it, since when, why)."""
        rows = self._run(f"SELECT {_LEASE_COLUMNS} FROM compaction_leases WHERE conversation_id = ? "
                         f"AND heartbeat_ts + stale_after > {self._sql.now}", (conversation_id,))
        if not rows:
            return None
        owner, reason, acquired, beat = rows[0]
        return {"owner": owner, "reason": reason, "acquired_ts": acquired, "heartbeat_ts": beat}

    def flushed_seq(self, conversation_id: str) -> int:
        rows = self._run("SELECT last_seq FROM memory_flush WHERE conversation_id = ?", (conversation_id,))
        return int(rows[0][0]) if rows else 0

    def set_flushed_seq(self, conversation_id: str, last_seq: int) -> None:
        self._write("INSERT INTO memory_flush AS f (conversation_id, last_seq) VALUES (?, ?) ON CONFLICT "
                    f"(conversation_id) DO UPDATE SET last_seq = {self._sql.greatest}(f.last_seq, excluded.last_seq)",
                    (conversation_id, last_seq))

    def log_compaction(self, conversation_id: str, entry: dict[str, Any]) -> None:
        self._write(
            "INSERT INTO compaction_log (conversation_id, reason, started_ts, finished_ts, tokens_before, "
            "tokens_after, leaves, condensed, skipped, owner) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (conversation_id, entry["reason"], entry["started_ts"], entry["finished_ts"], entry["tokens_before"],
             entry["tokens_after"], entry["leaves"], entry["condensed"], entry.get("skipped"), entry["owner"]),
        )

    def compaction_log(self, conversation_id: str, limit: int = 100) -> list[dict[str, Any]]:
        """The newest compactions of this conversation first."""
        rows = self._run(_COMPACTION_LOG, (conversation_id, limit))
        return [dict(zip(_LOG_KEYS, r, strict=True)) for r in rows]
