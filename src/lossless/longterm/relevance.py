"""Keyword relevance for memories: FTS5 finds the candidates, term coverage ranks them.

bm25 alone ranks a small collection badly: its IDF collapses when few records exist
(FTS5 clamps a term found in half the records or more to ~0), so ten memories give
near-random scores. A memory's keyword relevance is instead the share of the query's
terms it contains (words for Latin script, bigrams for CJK runs), with bm25 only as a
tie-breaker: an absolute number in [0, 1], so ``min_score`` means the same in a store
of ten memories and of ten thousand.

Chinese is mostly two-character words, so "缓存方案" shares no trigram with "方案B…缓存"
although it shares both words. CJK terms are therefore bigrams, the ones the keyword
index holds (:func:`~lossless.store.fts.cjk_query_terms`): candidates come from one
query of words and bigrams, and coverage counts the terms a record contains.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import apsw

from lossless.core.errors import QueryError
from lossless.longterm.records import search_text
from lossless.store.fts import (
    cjk_fts_query,
    cjk_query_terms,
    cjk_runs,
    compounds,
    fts_terms,
    quote_fts,
    word_query,
)

if TYPE_CHECKING:
    from lossless.store.sqlite.store import SQLiteStore

__all__ = ["IMPORTANCE_WEIGHT", "RECENCY_HALF_LIFE_DAYS", "RECENCY_WEIGHT", "keyword_candidates",
           "query_terms", "rank_by_coverage", "relevance_boost"]

IMPORTANCE_WEIGHT = 0.2  # importance 0 scales relevance by 0.8, importance 1 by 1.0
RECENCY_WEIGHT = 0.1  # never used for a long time: ×0.9; used just now: ×1.0
RECENCY_HALF_LIFE_DAYS = 30.0
_BM25_SHARE = 0.1  # of keyword relevance; the rest is term coverage
_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)
_MAX_BIGRAMS = 32


def _fold(text: str) -> str:
    """Case and diacritics folded, as the unicode61 tokenizer (remove_diacritics 2) sees it."""
    return "".join(c for c in unicodedata.normalize("NFKD", text.casefold()) if not unicodedata.combining(c))


def query_terms(query: str) -> tuple[list[str], list[str]]:
    """(words, CJK bigrams) of a search query; a one-character CJK run is its own term.
    A query of stopwords only searches its stopwords rather than nothing."""
    words = fts_terms(query)
    if not words and not cjk_runs(query):
        words = list(dict.fromkeys(w.lower() for w in _TOKEN.findall(query)))
    return words, cjk_query_terms(query)[:_MAX_BIGRAMS]


def coverage(text: str, words: Sequence[str], grams: Sequence[str]) -> float:
    """The share of query terms found in ``text``."""
    total = len(words) + len(grams)
    if not total:
        return 0.0
    folded = _fold(text)
    tokens = set(_TOKEN.findall(folded))
    # the words inside CJK text and beside digits too, as the index has them: 用python写
    # holds python, iphone15 holds iphone and 15
    for parts, _touches, _start, _end in compounds(folded):
        tokens.update(parts)
        tokens.add("".join(parts))
    hits = sum(1 for w in words if all(t in tokens for t in _TOKEN.findall(_fold(w))))
    hits += sum(1 for g in grams if _fold(g) in folded)
    return hits / total


def _match(store: SQLiteStore, index: str, fts_query: str, where: str, args: Sequence[Any],
           limit: int) -> list[tuple[int, float]]:
    # bm25() is negative, more negative = better: flipped so bigger is better.
    sql = (f"SELECT m.rowid, -bm25({index}) FROM {index} CROSS JOIN memories m ON m.rowid = {index}.rowid "
           f"WHERE {index} MATCH ? AND {where} ORDER BY bm25({index}) LIMIT ?")
    try:
        return [(int(r), float(s)) for r, s in store.query(sql, [fts_query, *args, limit])]
    except apsw.SQLError as exc:  # cannot happen with quoted terms; say so clearly if it does
        raise QueryError(f"invalid full-text query {fts_query!r}: {exc}") from None


def keyword_candidates(store: SQLiteStore, query: str, where: str, args: Sequence[Any],
                       limit: int) -> dict[int, float]:
    """rowid → keyword relevance in [0, 1] for the memories (restricted by the SQL
    condition ``where`` on alias ``m``) that share a term with ``query``."""
    words, grams = query_terms(query)
    bm25: dict[int, float] = {}
    word_q = word_query(query) or (" OR ".join(quote_fts(w) for w in words) if words else None)
    # words and CJK bigrams are terms of one index: one query
    fts_q = " OR ".join(q for q in (word_q, cjk_fts_query(query)) if q)
    if fts_q:
        for rowid, s in _match(store, "memories_fts", fts_q, where, args, limit):
            bm25[rowid] = bm25.get(rowid, 0.0) + s
    if not bm25:
        return {}
    ids = list(bm25)
    rows = store.query(f"SELECT rowid, content, result, patterns, errors FROM memories "
                        f"WHERE rowid IN ({','.join('?' * len(ids))})", ids)
    return rank_by_coverage(rows, bm25, words, grams)


def rank_by_coverage(rows: Sequence[Sequence[Any]], bm25: dict[int, float], words: Sequence[str],
                     grams: Sequence[str]) -> dict[int, float]:
    """rowid → keyword relevance for candidate rows (rowid, content, result, patterns,
    errors) found by an index with scores ``bm25`` (any scale, bigger is better)."""
    top = max(bm25.values(), default=0.0) or 1.0
    out: dict[int, float] = {}
    for rowid, content, result, patterns, errors in rows:
        text = search_text(content, result, json.loads(patterns or "[]"), json.loads(errors or "[]"))
        cov = coverage(text, words, grams)
        if cov > 0:
            out[int(rowid)] = (1 - _BM25_SHARE) * cov + _BM25_SHARE * max(0.0, bm25[rowid]) / top
    return out


def relevance_boost(importance: float, seconds_since_use: float) -> float:
    """The modest factor importance and recency of use apply to relevance: in [0.72, 1]."""
    days = max(0.0, seconds_since_use) / 86400
    recency = math.pow(0.5, days / RECENCY_HALF_LIFE_DAYS)
    return (1 - IMPORTANCE_WEIGHT + IMPORTANCE_WEIGHT * importance) * (1 - RECENCY_WEIGHT + RECENCY_WEIGHT * recency)
