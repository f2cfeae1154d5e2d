"""Reads over the core tables scoped to an id prefix (a tenant's namespace), on SQLite and
PostgreSQL alike: what the server asks of the store for a keyed tenant, so that no SQL
against messages, summaries, conversations or the backlog lives outside the store.

A prefix of ``""`` is the whole store (the operator). Ranges, not ``LIKE``: ``_`` and ``%``
are legal in tenant names."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from lossless.store.rows import prefix_upper
from lossless.store.runner import SQLRunner, sql_runner

__all__ = ["BacklogTotals", "Totals", "backlog_totals", "conversation_ids", "ids_under", "totals"]


def _range(db: SQLRunner, column: str, prefix: str) -> tuple[str, tuple[Any, ...]]:
    if not prefix:
        return db.true, ()
    return db.text_range(column), (prefix, prefix_upper(prefix))


@dataclass(frozen=True)
class Totals:
    conversations: int
    messages: int
    message_tokens: int
    summaries: int
    max_depth: int


def totals(store: Any, prefix: str) -> Totals:
    """Conversations, messages, their tokens, summaries and the deepest summary's depth
    (-1 without any) under ``prefix``."""
    db = sql_runner(store)
    where, args = _range(db, "conversation_id", prefix)
    conv_where, _ = _range(db, "id", prefix)
    convs, messages = db.query(f"SELECT count(*), coalesce(sum(last_seq), 0) FROM conversations WHERE {conv_where}",
                               args)[0]
    tokens = db.query(f"SELECT coalesce(sum(token_count), 0) FROM messages WHERE {where}", args)[0][0]
    summaries, depth = db.query(f"SELECT count(*), coalesce(max(depth), -1) FROM summaries WHERE {where}", args)[0]
    # int(): PostgreSQL's sum of integers is a numeric (a Decimal)
    return Totals(int(convs), int(messages), int(tokens), int(summaries), int(depth))


@dataclass(frozen=True)
class BacklogTotals:
    conversations: int
    oldest_ts: float | None
    in_progress: int
    failing: int


def backlog_totals(store: Any, prefix: str, now: float) -> BacklogTotals:
    """The backlog rows under ``prefix``: how many, the oldest queued, those claimed at
    ``now`` and those that failed at least once."""
    db = sql_runner(store)
    where, args = _range(db, "conversation_id", prefix)
    count, oldest, working, failing = db.query(
        "SELECT count(*), min(queued_ts), coalesce(sum(CASE WHEN claimed_until >= ? THEN 1 ELSE 0 END), 0), "
        f"coalesce(sum(CASE WHEN attempts > 0 THEN 1 ELSE 0 END), 0) FROM backlog WHERE {where}", (now, *args))[0]
    return BacklogTotals(int(count), float(oldest) if oldest else None, int(working), int(failing))


def conversation_ids(store: Any, prefix: str) -> list[str]:
    """Every stored conversation id under ``prefix``, in order."""
    db = sql_runner(store)
    where, args = _range(db, "id", prefix)
    return [r[0] for r in db.query(f"SELECT id FROM conversations WHERE {where} ORDER BY id", args)]


def ids_under(store: Any, kind: Literal["message", "summary"], *, id_prefix: str = "",
              conversation_id: str | None = None, conversations_prefix: str = "", limit: int) -> list[str]:
    """Up to ``limit`` message or summary ids (in order) that start with ``id_prefix``, in
    ``conversation_id`` when given, else in the conversations under ``conversations_prefix``."""
    db = sql_runner(store)
    table = "summaries" if kind == "summary" else "messages"
    where: list[str] = []
    args: list[Any] = []
    if id_prefix:
        where.append(db.text_range("id"))
        args += [id_prefix, prefix_upper(id_prefix)]
    if conversation_id is not None:
        where.append("conversation_id = ?")
        args.append(conversation_id)
    elif conversations_prefix:
        where.append(db.text_range("conversation_id"))
        args += [conversations_prefix, prefix_upper(conversations_prefix)]
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    return [r[0] for r in db.query(f"SELECT id FROM {table}{clause} ORDER BY id LIMIT {int(limit)}", args)]
