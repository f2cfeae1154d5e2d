"""What a search does the same on both stores: the filters a spec puts on a table, and the
step after each store has scored its candidates (rank them, read the rows of the ones
returned, cut their snippets). Each store's own module (``sqlite/grep.py``,
``postgres/grep.py``) finds and scores the candidates with its full-text index and passes
its placeholder and its list clause (:class:`Clauses`)."""

from __future__ import annotations

import heapq
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from lossless.core.errors import QueryError
from lossless.core.render import content_text
from lossless.core.types import GrepHit
from lossless.core.validate import timestamp
from lossless.store.base import SearchSpec
from lossless.store.rows import grep_hit

__all__ = ["Clauses", "check_spec", "rank_hits", "spec_filters"]

Query = Callable[[str, Sequence[Any]], list[tuple[Any, ...]]]
# (score, ts, id, kind, rowid) of a scored candidate
Ranked = tuple[float, float, str, str, int]


@dataclass(frozen=True, slots=True)
class Clauses:
    """How one store spells a bound value (``?`` or ``%s``) and "column is one of these
    values" (a clause and its arguments: never one variable per value)."""

    ph: str
    in_list: Callable[[str, Sequence[Any]], tuple[str, list[Any]]]


def check_spec(spec: SearchSpec) -> None:
    if not isinstance(spec.query, str) or not spec.query.strip():
        raise QueryError("search query is empty")
    if spec.limit < 1:
        raise QueryError(f"limit must be >= 1, got {spec.limit}")


# (message column, summary column, comparison, SearchSpec field): a summary matches a time
# range when its span overlaps it, and a seq range by its first and last seqs
_BOUNDS = (("created_ts", "latest_ts", ">=", "since"), ("created_ts", "earliest_ts", "<=", "until"),
           ("seq", "last_seq", "<=", "max_seq"), ("seq", "first_seq", ">=", "min_seq"))


def spec_filters(spec: SearchSpec, kind: str, alias: str, sql: Clauses) -> tuple[str, list[Any]]:
    """`` AND …`` for the spec's conversations, roles, times and seqs on ``alias`` (a
    messages or summaries row), and its arguments ("" and [] when the spec sets none)."""
    clauses: list[str] = []
    args: list[Any] = []
    if spec.conversation_ids is not None:
        clause, ids = sql.in_list(f"{alias}.conversation_id", spec.conversation_ids)
        clauses.append(clause)
        args.extend(ids)
    if kind == "message" and spec.roles:
        clause, roles = sql.in_list(f"{alias}.role", spec.roles)
        clauses.append(clause)
        args.extend(roles)
    for message_column, summary_column, op, name in _BOUNDS:
        value = getattr(spec, name)
        if value is not None:
            clauses.append(f"{alias}.{message_column if kind == 'message' else summary_column} {op} {sql.ph}")
            args.append(timestamp(value) if name in ("since", "until") else value)
    return (" AND " + " AND ".join(clauses)) if clauses else "", args


def rank_hits(query: Query, sql: Clauses, spec: SearchSpec,
              candidates: Callable[[str], dict[int, float]]) -> list[GrepHit]:
    """The hits of ``spec`` from each kind's scored candidates (``candidates(kind)``: rowid
    → score): best first (or newest, ``sort="recency"``), at most ``spec.limit``. Ranks
    first, then reads the text (to cut snippets) of the ones returned only, and none
    without ``spec.snippets``. A row: rowid, id, conversation, first seq, last seq, role,
    created at, ts, depth."""
    check_spec(spec)
    ranked: list[Ranked] = []
    rows_by_key: dict[tuple[str, int], tuple[Any, ...]] = {}
    for kind in spec.kinds:
        if kind == "summary" and spec.roles:
            continue  # summaries have no role
        scores = candidates(kind)
        if spec.sort != "recency" and len(scores) > spec.limit:
            # by relevance, only what scores at least the limit-th best of this kind can be returned
            least = heapq.nlargest(spec.limit, scores.values())[-1]
            scores = {rowid: score for rowid, score in scores.items() if score >= least}
        if not scores:
            continue
        among, ids = sql.in_list("rowid", list(scores))
        if kind == "message":
            text = f"SELECT rowid, id, conversation_id, seq, seq, role, created_at, created_ts, NULL FROM messages WHERE {among}"
        else:
            text = (f"SELECT rowid, id, conversation_id, first_seq, last_seq, NULL, earliest_at, latest_ts, depth "
                    f"FROM summaries WHERE {among}")
        for row in query(text, ids):
            rows_by_key[(kind, row[0])] = row
            ranked.append((scores[row[0]], row[7], row[1], kind, row[0]))
    if spec.sort == "recency":
        ranked.sort(key=lambda r: (-r[1], -rows_by_key[(r[3], r[4])][4], r[2]))
    else:
        ranked.sort(key=lambda r: (-r[0], -r[1], r[2]))
    top = ranked[: spec.limit]
    texts = _texts(query, sql, top) if spec.snippets else {}
    out: list[GrepHit] = []
    for score, _ts, _id, hit_kind, rowid in top:
        (_r, hid, cid, first, last, role, created, _t, depth) = rows_by_key[(hit_kind, rowid)]
        # without snippets nothing was read: the hit gets an empty one
        out.append(grep_hit(hit_kind, hid, cid, first, last, role, created, texts.get((hit_kind, rowid), ""), spec,
                            score, depth))
    return out


def _texts(query: Query, sql: Clauses, top: list[Ranked]) -> dict[tuple[str, int], str]:
    """The searchable text of the hits, to cut their snippets from."""
    out: dict[tuple[str, int], str] = {}
    for kind in ("message", "summary"):
        want = [r[4] for r in top if r[3] == kind]
        if not want:
            continue
        among, args = sql.in_list("rowid", want)
        if kind == "message":
            for rowid, content, is_json, calls in query(
                    f"SELECT rowid, content, content_is_json, tool_calls FROM messages WHERE {among}", args):
                out[(kind, rowid)] = content_text(json.loads(content) if is_json else content,
                                                  json.loads(calls) if calls else None)
        else:
            for rowid, content in query(f"SELECT rowid, content FROM summaries WHERE {among}", args):
                out[(kind, rowid)] = content
    return out
