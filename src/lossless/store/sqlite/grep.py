"""Search for the SQLite store (kept apart from the write path)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import Any, Protocol

import apsw

from lossless.core.errors import QueryError
from lossless.core.types import GrepHit
from lossless.store.base import SearchSpec
from lossless.store.fts import (
    cjk_fts_query,
    cjk_search_terms,
    escaped_text,
    narrow,
    quote_fts,
    search_terms,
    symbol_query,
    term_pattern,
    word_query,
)
from lossless.store.runner import sqlite_in
from lossless.store.searching import Clauses, rank_hits, spec_filters
from lossless.store.sqlite.regexp import RegexTimeout, regex_deadline


class _Reads(Protocol):
    """What a search reads the store with (a :class:`~lossless.store.sqlite.store.SQLiteStore`):
    its connection, a read connection of its own for a regex scan, and the terms found too
    common to rank (see :func:`_bounded`)."""

    common_terms: set[tuple[str, str]]

    def _query(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...
    def reader(self, wait: float = 5.0) -> AbstractContextManager[Callable[[str, Sequence[Any]], list[tuple[Any, ...]]]]: ...

__all__ = ["run_search"]

_CANDIDATES = 2  # fetch this many times the limit from each index before merging
_SQL = Clauses("?", sqlite_in)



# bm25() costs O(matches) per query term: FTS5 counts every row holding a term to weigh
# it. Past WORK_CAP rows, the work is bounded instead: a word with more rows than that is
# dropped when rarer words are in the query (its weight would be near zero anyway); when
# every word is that common, the newest rows holding all of them (else any) are taken,
# newest first. Small stores never get here: nothing changes below WORK_CAP matches.
WORK_CAP = 2_000


def _capped_count(store: _Reads, index: str, query: str, cap: int) -> int:
    return int(store._query(f"SELECT count(*) FROM (SELECT 1 FROM {index} WHERE {index} MATCH ? LIMIT ?)",
                            [query, cap + 1])[0][0])


def _bounded(store: _Reads, index: str, query: str, cap: int) -> tuple[str, bool]:
    """(the query to run, whether to rank by bm25 — else by recency). A term found in more
    than ``cap`` messages is remembered as such, as messages only grow in number (an
    erasure in this process forgets them; one in another process can leave a term treated
    as common a while after it no longer is, which changes ranking, not what is stored)."""
    common = store.common_terms
    split = query.split(" OR ")
    if not any((index, term) in common for term in split) and _capped_count(store, index, query, cap) <= cap:
        return query, True
    counts = {term: cap + 1 if (index, term) in common else _capped_count(store, index, term, cap) for term in split}
    if len(common) > 50_000:
        common.clear()
    if index.startswith("messages"):  # (a summary's text can be revised; a message's never changes)
        common.update((index, term) for term, n in counts.items() if n > cap)
    terms = [t for t in counts if counts[t]]  # a term found nowhere (a joined pair, often) adds nothing
    rare = sorted((t for t in terms if counts[t] <= cap), key=lambda t: counts[t])
    if rare:
        kept: list[str] = []
        work = 0
        for term in rare:  # the rarest first, while the work stays bounded
            if kept and work + counts[term] > 2 * cap:
                break
            kept.append(term)
            work += counts[term]
        return " OR ".join(kept), True
    if len(terms) > 1:
        every = " AND ".join(terms)
        if _capped_count(store, index, every, 1):
            return every, False
    return query, False


# A conversation this small, in a store at least _SCAN_RATIO times bigger, is searched by
# reading its own rows: the indexes are global, so their matches (and bm25's per-term
# counts) grow with every other conversation, while this stays O(the conversation).
SCAN_MAX = 5_000
_SCAN_RATIO = 8


def _scan(store: _Reads, kind: str, spec: SearchSpec, limit: int) -> list[tuple[int, float]]:
    """The rows of the filtered conversations that hold the query's terms (whole words,
    a compound's parts in a row) or its CJK bigrams (a one-character run: the character),
    scored like bm25 without length normalisation: the sum of log(1 + n / df) over the
    terms present, df counted in these rows. A CJK term is in a row exactly when the index
    has it (a bigram lies inside one run; a prefix term's character anywhere)."""
    table = "messages" if kind == "message" else "summaries"
    where, args = spec_filters(spec, kind, "t", _SQL)
    text = ("coalesce(t.content, '') || char(10) || coalesce(t.tool_calls, '')" if kind == "message"
            else "t.content")
    rows = store._query(f"SELECT t.rowid, lower({text}) FROM {table} t WHERE 1{where}", args)
    grams = cjk_search_terms(spec.query, spec.cjk_chars)
    terms = search_terms(spec.query) or ([] if grams else [w.lower() for w in re.findall(r"[^\W_]+", narrow(spec.query))])
    needles: list[tuple[str, re.Pattern[str] | None]] = [(t.split(" ")[0], term_pattern(t)) for t in terms[:64]]
    needles += [(g, None) for g in grams]
    if not needles or not rows:
        return []
    present: list[list[int]] = []
    df = [0] * len(needles)
    for _rowid, lowered in rows:
        body = narrow(lowered)  # full-width forms are the query's plain ones
        if "\\u" in body:  # and what its JSON escapes spell (as the index has it)
            body = f"{body}\n{narrow(escaped_text(body)).lower()}"
        hits = [i for i, (needle, pattern) in enumerate(needles)
                if needle in body and (pattern is None or pattern.search(body))]
        for i in hits:
            df[i] += 1
        present.append(hits)
    n = len(rows)
    weight = [math.log(1 + n / d) if d else 0.0 for d in df]
    scored = [(sum(weight[i] for i in hits), rows[k][0]) for k, hits in enumerate(present) if hits]
    scored.sort(key=lambda x: (-x[0], -x[1]))
    return [(int(rowid), float(score)) for score, rowid in scored[:limit]]


def _scope_rows(store: _Reads, kind: str, spec: SearchSpec) -> int | None:
    """How many rows the conversation filter leaves (None: no conversation filter)."""
    if spec.conversation_ids is None:
        return None
    if kind == "message":
        clause, args = sqlite_in("id", spec.conversation_ids)
        sql = f"SELECT coalesce(sum(last_seq), 0) FROM conversations WHERE {clause}"
    else:
        clause, args = sqlite_in("conversation_id", spec.conversation_ids)
        sql = f"SELECT count(*) FROM summaries WHERE {clause}"
    return int(store._query(sql, args)[0][0])


def _small_scope(store: _Reads, kind: str, spec: SearchSpec) -> bool:
    scoped = _scope_rows(store, kind, spec)
    if scoped is None or scoped > SCAN_MAX:
        return False
    table = "messages" if kind == "message" else "summaries"
    total = store._query(f"SELECT coalesce(max(rowid), 0) FROM {table}")[0][0]
    return bool(total >= _SCAN_RATIO * max(scoped, 1))


def _match(store: _Reads, kind: str, index: str, query: str, spec: SearchSpec, limit: int) -> list[tuple[int, float]]:
    table = "messages" if kind == "message" else "summaries"
    where, args = spec_filters(spec, kind, "t", _SQL)
    try:
        ranked = True
        if spec.mode != "raw":
            query, ranked = _bounded(store, index, query, WORK_CAP)
        if not ranked:
            # every word is common: the newest rows that hold them, scored by rank
            rows = store._query(f"SELECT t.rowid FROM {index} CROSS JOIN {table} t ON t.rowid = {index}.rowid "
                                f"WHERE {index} MATCH ?{where} ORDER BY {index}.rowid DESC LIMIT ?",
                                [query, *args, limit])
            return [(int(r[0]), 1.0 / (1 + i)) for i, r in enumerate(rows)]
    except apsw.SQLError as exc:
        raise QueryError(f"invalid full-text query {spec.query!r}: {exc}") from None
    fast = (
        f"SELECT t.rowid, m.score FROM (SELECT rowid, -bm25({index}) AS score FROM {index} WHERE {index} MATCH ? "
        f"ORDER BY bm25({index}) LIMIT ?) AS m CROSS JOIN {table} t ON t.rowid = m.rowid WHERE 1{where} "
        "ORDER BY m.score DESC"
    )
    full = (
        f"SELECT t.rowid, -bm25({index}) FROM {index} CROSS JOIN {table} t ON t.rowid = {index}.rowid "
        f"WHERE {index} MATCH ?{where} ORDER BY bm25({index}) LIMIT ?"
    )
    try:
        over = limit * 4
        rows = store._query(fast, [query, over, *args])
        if len(rows) < limit and len(rows) < over:
            # the unfiltered top was not all ours: maybe more matches exist beyond it
            total = store._query(f"SELECT count(*) FROM (SELECT 1 FROM {index} WHERE {index} MATCH ? LIMIT ?)",
                                 [query, over + 1])[0][0]
            if total > over:
                rows = store._query(full, [query, *args, limit])
        return [(int(r), float(s)) for r, s in rows[:limit]]
    except apsw.SQLError as exc:
        raise QueryError(f"invalid full-text query {spec.query!r}: {exc}") from None


# A group that repeats and holds a repetition itself, e.g. (a+)+ or (\w*)*: Python's re
# backtracks exponentially on such patterns and has no timeout, and agents write regexes.
_NESTED_REPEAT = re.compile(r"\((?:[^()\\]|\\.)*[+*}](?:[^()\\]|\\.)*\)(?:[+*]|\{\d*,\d*\})")
_MAX_PATTERN = 512
REGEX_SECONDS = 2.0  # a regex search's whole budget, across every row it reads


def _regex(store: _Reads, kind: str, spec: SearchSpec, limit: int) -> list[tuple[int, float]]:
    if len(spec.query) > _MAX_PATTERN:
        raise QueryError(f"regular expression too long ({len(spec.query)} characters, at most {_MAX_PATTERN})")
    if _NESTED_REPEAT.search(spec.query):
        raise QueryError(f"regular expression {spec.query!r} nests a repetition inside a repeated group "
                         "(like (a+)+), which can take exponential time; simplify it")
    try:
        re.compile(spec.query)
    except re.error as exc:
        raise QueryError(f"invalid regular expression {spec.query!r}: {exc}") from None
    table = "messages" if kind == "message" else "summaries"
    where, args = spec_filters(spec, kind, "t", _SQL)
    field = "coalesce(t.content, '') || char(10) || coalesce(t.tool_calls, '')" if kind == "message" else "t.content"
    order = "t.seq DESC" if kind == "message" else "t.last_seq DESC"
    sql = f"SELECT t.rowid FROM {table} t WHERE regexp(?, {field}){where} ORDER BY {order} LIMIT ?"

    try:
        # on a read connection of its own: a slow pattern holds neither the store nor its lock
        with store.reader() as run, regex_deadline(REGEX_SECONDS):
            return [(int(r[0]), 1.0) for r in run(sql, [spec.query, *args, limit])]
    except RegexTimeout:
        raise QueryError(f"regular expression {spec.query!r} took longer than {REGEX_SECONDS:g} s; "
                         "simplify it (nested or overlapping repetitions backtrack exponentially)") from None


def _candidates(store: _Reads, kind: str, spec: SearchSpec) -> dict[int, float]:
    limit = max(spec.limit, 1) * _CANDIDATES
    scores: dict[int, float] = {}
    if spec.mode == "regex":
        pairs = _regex(store, kind, spec, limit)
    elif spec.mode == "raw":
        index = "messages_fts" if kind == "message" else "summaries_fts"
        pairs = _match(store, kind, index, spec.query, spec, limit)
    elif (literal := symbol_query(spec.query)) is not None:
        # 🎉, €: the index keeps no symbols, so the text itself (newest first)
        pairs = _regex(store, kind, replace(spec, query=re.escape(literal)), limit)
    elif _small_scope(store, kind, spec):
        pairs = _scan(store, kind, spec, limit)
    else:
        pairs = []
        words = word_query(spec.query)
        grams = cjk_fts_query(spec.query, spec.cjk_chars)
        if words is None and grams is None:
            # the query held only stopwords: search them rather than nothing
            raw = [w.lower() for w in re.findall(r"[^\W_]+", spec.query)]
            if not raw:
                return {}
            words = " OR ".join(quote_fts(w) for w in dict.fromkeys(raw))
        index = "messages_fts" if kind == "message" else "summaries_fts"
        # words and CJK bigrams are terms of one index: one query, one bm25 over both
        query = " OR ".join(q for q in (words, grams) if q)
        pairs += _match(store, kind, index, query, spec, max(spec.limit, 1))
    for rowid, score in pairs:
        scores[rowid] = scores.get(rowid, 0.0) + score
    return scores


def run_search(store: _Reads, spec: SearchSpec) -> list[GrepHit]:
    return rank_hits(store._query, _SQL, spec, lambda kind: _candidates(store, kind, spec))
