"""Erasing messages for privacy: the one audited way to change stored history.

The stores' triggers (SQLite migration 11, PostgreSQL migration 12) refuse every UPDATE
and DELETE of a message, a summary's span and edges, and a tombstone. :func:`erase`
writes, in one transaction:

1. a tombstone per message (who, when, why, and the hash of the message as erased): the
   row the message trigger looks for before it lets the text change;
2. the message as erased (:mod:`lossless.core.erasure`; its name and metadata cleared),
   and its keyword-index rows;
3. every summary over it rewritten (the caller's texts, made without the erased text)
   with its keyword rows, and the earlier texts of those summaries (``summary_revisions``)
   dropped, as they may quote it;
4. the retrieval units that quoted it replaced by units of the erased text (new rowids,
   so the worker embeds them), their vectors and the cached embeddings of their texts
   deleted.

Either all of it is stored or none. The SQL is written once (:mod:`lossless.store.runner`);
only the keyword index differs (FTS5 tables on SQLite, a ``search`` column on PostgreSQL).

The worker cuts and embeds units outside any transaction and writes them after
(:mod:`lossless.recall.hybrid`). An erase and those writes are serialised (SQLite: one
writer; PostgreSQL: the conversation's ``recall_progress`` row, locked for update first),
and each side checks in its own transaction what the other may have done since it read:
units cut since the plan was made make it stale (:class:`StalePlan`: the caller plans
again); units cut from text erased since, and vectors of units replaced since, are not
written (:class:`~lossless.store.base.RecallIndex`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from lossless.core.errors import NotFoundError
from lossless.store.fts import index_text
from lossless.store.reindex import indexed_message_text
from lossless.store.runner import SQLRunner, sql_runner

__all__ = ["ErasePlan", "ErasedMessage", "StalePlan", "SummaryRewrite", "Tombstone", "erase", "tombstones"]


class StalePlan(Exception):
    """Retrieval units were cut since the plan was made (it may miss some that quote an
    erased message): nothing was written; make the plan again."""


@dataclass(frozen=True, slots=True)
class Tombstone:
    """The record of one erased message."""

    id: str
    conversation_id: str
    message_id: str
    seq: int
    reason: str
    erased_by: str
    erased_at: str

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "conversation_id": self.conversation_id, "message_id": self.message_id,
                "seq": self.seq, "reason": self.reason, "erased_by": self.erased_by, "erased_at": self.erased_at}


@dataclass(frozen=True, slots=True)
class ErasedMessage:
    """One message as erased (see :mod:`lossless.core.erasure`) and its tombstone."""

    tombstone: Tombstone
    name: str | None
    tool_calls: list[Any]
    token_count: int
    content_hash: str
    content: str


@dataclass(frozen=True, slots=True)
class SummaryRewrite:
    """The new text of a summary over an erased message."""

    summary_id: str
    content: str
    token_count: int
    summarizer: str
    fallback_level: int
    metadata: dict[str, Any]


@dataclass
class ErasePlan:
    """Everything one erase writes: the messages, the summaries over them, and the retrieval
    units that quoted them (``drop_units``: rowids; ``add_units``: their replacements,
    :class:`lossless.recall.units.Unit`)."""

    conversation_id: str
    messages: list[ErasedMessage]
    summaries: list[SummaryRewrite] = field(default_factory=list)
    drop_units: list[int] = field(default_factory=list)
    add_units: list[Any] = field(default_factory=list)
    # the conversation's recall_progress (message_seq, window_seq) read before its units were
    units_cut: tuple[int, int] = (0, 0)
    # the whole conversation is erased: its metadata becomes this (an imported title,
    # 周末计划, says what was in it; the owners of its memories stay); None: unchanged
    metadata: dict[str, Any] | None = None


def tombstones(store: Any, conversation_id: str | None = None) -> list[Tombstone]:
    """The tombstones (of one conversation, or all), in conversation and seq order."""
    where, args = ("WHERE conversation_id = ?", (conversation_id,)) if conversation_id is not None else ("", ())
    rows = sql_runner(store).query(f"SELECT id, conversation_id, message_id, seq, reason, erased_by, erased_at "
                                   f"FROM tombstones {where} ORDER BY conversation_id, seq", args)
    return [Tombstone(r[0], r[1], r[2], int(r[3]), r[4], r[5], r[6]) for r in rows]


def erase(store: Any, plan: ErasePlan) -> None:
    """Write ``plan`` in one transaction (see the module docstring)."""
    runner = sql_runner(store)
    with runner.transaction() as conn:
        if plan.messages:  # (else only the metadata of a conversation erased before)
            _hold_units(runner, conn, plan)
            for m in plan.messages:
                _erase_message(runner, conn, plan.conversation_id, m)
            for rewrite in plan.summaries:
                _rewrite_summary(runner, conn, plan.conversation_id, rewrite)
            _replace_units(runner, conn, plan)
        if plan.metadata is not None:
            conn.execute("UPDATE conversations SET metadata = ? WHERE id = ?",
                         (json.dumps(plan.metadata, ensure_ascii=False, sort_keys=True), plan.conversation_id))
    if hasattr(store, "common_terms"):  # SQLite: a word may be in fewer messages now (grep._bounded)
        store.common_terms.clear()


def units_cut(runner: SQLRunner, conversation_id: str) -> tuple[int, int]:
    """How far the conversation's messages are cut into retrieval units (0, 0: not at all)."""
    rows = runner.query("SELECT message_seq, window_seq FROM recall_progress WHERE conversation_id = ?",
                        (conversation_id,))
    return (int(rows[0][0]), int(rows[0][1])) if rows else (0, 0)


def _hold_units(runner: SQLRunner, conn: Any, plan: ErasePlan) -> None:
    """Keep the conversation's units as the plan saw them until this transaction ends, or
    raise :class:`StalePlan` if some were cut since. PostgreSQL: the ``recall_progress``
    row locked for update (as unit and vector writes lock it), so no unit, vector or
    cached embedding of the old text is written between this check and the commit."""
    if runner.dialect == "postgresql":
        # the row first, as add_units does: a conversation never cut has none to lock, and a cut
        # beside this erase would then write units of the old text unseen
        conn.execute("INSERT INTO recall_progress (conversation_id) VALUES (?) ON CONFLICT DO NOTHING",
                     (plan.conversation_id,))
        conn.execute("SELECT 1 FROM recall_progress WHERE conversation_id = ? FOR UPDATE", (plan.conversation_id,))
    row = conn.execute("SELECT message_seq, window_seq FROM recall_progress WHERE conversation_id = ?",
                       (plan.conversation_id,)).fetchone()
    now = (int(row[0]), int(row[1])) if row else (0, 0)
    if now != plan.units_cut:
        raise StalePlan(f"retrieval units of {plan.conversation_id!r} were cut since the erase was planned")


def _erase_message(runner: SQLRunner, conn: Any, cid: str, m: ErasedMessage) -> None:
    t = m.tombstone
    row = conn.execute("SELECT rowid, id FROM messages WHERE conversation_id = ? AND id = ?",
                       (cid, t.message_id)).fetchone()
    if row is None:
        raise NotFoundError(f"no message {t.message_id!r} in conversation {cid!r}")
    rowid = row[0]
    # the tombstone first: the trigger lets the text change only to what a tombstone names
    conn.execute("INSERT INTO tombstones (id, conversation_id, message_id, seq, reason, erased_by, erased_at, "
                 "content_hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                 (t.id, cid, t.message_id, t.seq, t.reason, t.erased_by, t.erased_at, m.content_hash))
    calls = json.dumps(m.tool_calls, ensure_ascii=False, sort_keys=True, separators=(",", ":")) if m.tool_calls else None
    text = indexed_message_text(m.name, m.content, 0, calls)
    sql = ("UPDATE messages SET content = ?, content_is_json = 0, tool_calls = ?, token_count = ?, "
           "content_hash = ?, name = ?, metadata = '{}'")
    args: list[Any] = [m.content, calls, m.token_count, m.content_hash, m.name]
    if runner.dialect == "postgresql":
        from lossless.store.postgres.grep import search_document

        sql += ", search = to_tsvector('simple', ?)"
        args.append(search_document(text))
    conn.execute(sql + " WHERE rowid = ?", (*args, rowid))
    if runner.dialect == "sqlite":
        _refts(conn, "messages", rowid, text)


def _refts(conn: Any, base: str, rowid: int, text: str) -> None:
    """Rewrite a row's SQLite keyword rows (contentless_delete=1: deleted by rowid)."""
    conn.execute(f"DELETE FROM {base}_fts WHERE rowid = ?", (rowid,))
    conn.execute(f"INSERT INTO {base}_fts (rowid, text) VALUES (?, ?)", (rowid, index_text(text)))


def _rewrite_summary(runner: SQLRunner, conn: Any, cid: str, r: SummaryRewrite) -> None:
    row = conn.execute("SELECT rowid FROM summaries WHERE conversation_id = ? AND id = ?",
                       (cid, r.summary_id)).fetchone()
    if row is None:
        raise NotFoundError(f"no summary {r.summary_id!r} in conversation {cid!r}")
    conn.execute("DELETE FROM summary_revisions WHERE summary_id = ?", (r.summary_id,))
    sql = "UPDATE summaries SET content = ?, token_count = ?, summarizer = ?, fallback_level = ?, metadata = ?"
    args: list[Any] = [r.content, r.token_count, r.summarizer, r.fallback_level,
                       json.dumps(r.metadata, ensure_ascii=False, sort_keys=True)]
    if runner.dialect == "postgresql":
        from lossless.store.postgres.grep import search_document

        sql += ", search = to_tsvector('simple', ?)"
        args.append(search_document(r.content))
    conn.execute(sql + " WHERE rowid = ?", (*args, row[0]))
    if runner.dialect == "sqlite":
        _refts(conn, "summaries", row[0], r.content)


def _replace_units(runner: SQLRunner, conn: Any, plan: ErasePlan) -> None:
    if not plan.drop_units:
        return
    # a conversation may have more units than a statement may bind variables: one list value
    units, args = runner.in_list("rowid", plan.drop_units)
    shas = [r[0] for r in conn.execute(f"SELECT text_sha256 FROM recall_units WHERE {units}", args).fetchall()]
    for (name, backend) in conn.execute("SELECT name, backend FROM vector_indexes").fetchall():
        if runner.dialect == "postgresql":
            among, values = runner.in_list("unit_rowid", plan.drop_units)
            conn.execute(f"DELETE FROM {name} WHERE {among}", values)
        elif backend == "sqlite-vec" and conn.execute(
                "SELECT 1 FROM sqlite_master WHERE name = ?", (name,)).fetchone() is not None:
            # one rowid at a time: how a vec0 table finds a row (an IN list would scan it)
            conn.executemany(f"DELETE FROM {name} WHERE rowid = ?", [(r,) for r in plan.drop_units])
    # SQLite gives a new row max(rowid) + 1, which may be a rowid just deleted (and counted
    # as embedded by vector_progress): replacements are numbered above every unit instead
    top = int(conn.execute("SELECT coalesce(max(rowid), 0) FROM recall_units").fetchone()[0])
    conn.execute(f"DELETE FROM recall_units WHERE {units}", args)
    if shas:  # a vector is the text in another form: the cached ones go too
        among, values = runner.in_list("text_sha256", shas)
        conn.execute(f"DELETE FROM embedding_cache WHERE {among}", values)
    # new rowids, above every conversation's vector progress: the worker embeds them
    rows = [(plan.conversation_id, u.kind, u.first_seq, u.last_seq, u.part, u.role, json.dumps(list(u.message_ids)),
             u.text, u.sha256, u.start_ts, u.end_ts) for u in plan.add_units]
    columns = ("conversation_id, kind, first_seq, last_seq, part, role, message_ids, text, text_sha256, start_ts, "
               "end_ts")
    if runner.dialect == "sqlite":
        conn.executemany(f"INSERT INTO recall_units (rowid, {columns}) VALUES (?, {', '.join('?' * 11)})",
                         [(top + 1 + i, *row) for i, row in enumerate(rows)])
    else:  # an identity column never hands out a number twice
        conn.executemany(f"INSERT INTO recall_units ({columns}) VALUES ({', '.join('?' * 11)})", rows)
