"""Keyword relevance of file chunks and the re-ranking factors (kind, path, recency).

FTS5 finds the candidates: the porter/unicode61 index by words (so "computed" finds
``compute_backoff``) and by CJK bigrams (so "缓存" finds 缓存方案: store/fts.py), the
trigram index by substrings (so "backoff" finds ``computeBackoff``). A candidate's keyword relevance is the
share of query terms its path and text contain (matched as lower-cased substrings of
their stems), with bm25 as a smaller part: an absolute number in [0, 1] that does not
collapse in a small workspace the way bm25's IDF does.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import apsw

from lossless.core.errors import QueryError
from lossless.store.fts import cjk_fts_query, cjk_query_terms, cjk_runs, fts_terms, quote_fts

if TYPE_CHECKING:
    from lossless.store.sqlite.store import SQLiteStore

__all__ = ["keyword_candidates", "kind_prior", "path_boost", "query_terms", "query_words", "recency_factor",
           "relevance", "stem", "substrings"]

_BM25_SHARE = 0.3  # of keyword relevance; the rest is term coverage
# bm25 column weights of file_chunks_fts (path, text): a path word counts, but a chunk is
# found mostly by what it says.
_BM25 = "bm25(file_chunks_fts, 0.5, 1.0)"
_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)
_SUFFIXES = ("ations", "ation", "ings", "ing", "ers", "ied", "ies", "ed", "es", "er", "s")
PATH_WEIGHT = 0.25  # every query term in the path: ×1.25
RECENCY_WEIGHT = 0.05  # a file untouched for months: ×0.95
RECENCY_HALF_LIFE_DAYS = 30.0
_KIND_PRIOR = {"code": 1.0, "markdown": 0.95, "text": 0.9, "data": 0.85}
_DOC_PRIOR = {"markdown": 1.0, "text": 0.95, "code": 0.9, "data": 0.85}
_DOC_WORDS = frozenset({"doc", "docs", "documentation", "documented", "readme", "guide", "tutorial", "howto",
                        "explain", "explained", "overview", "changelog", "notes", "文档", "说明"})


def stem(word: str) -> str:
    """A crude suffix strip (``computed`` → ``comput``), enough to match a stem as a
    substring of identifiers and prose; never shorter than four characters."""
    w = word.lower()
    for suffix in _SUFFIXES:
        if w.endswith(suffix) and len(w) - len(suffix) >= 4:
            return w[: -len(suffix)]
    return w


def query_terms(query: str) -> tuple[list[str], list[str]]:
    """(word stems, CJK bigrams) of a query. A query of stopwords only searches them."""
    words = fts_terms(query) or list(dict.fromkeys(w.lower() for w in _TOKEN.findall(query)
                                                   if not cjk_runs(w)))
    stems = list(dict.fromkeys(stem(t) for w in words for t in _TOKEN.findall(w)))
    return stems[:32], cjk_query_terms(query)[:32]


def query_words(query: str) -> list[str]:
    """The query's lower-cased words (stopwords dropped, unless it has nothing else)."""
    return fts_terms(query) or [w.lower() for w in _TOKEN.findall(query) if not cjk_runs(w)]


def substrings(query: str, words: Sequence[str]) -> list[str]:
    """What is searched as a substring: Latin words of 3+ characters (inside identifiers),
    first-seen order (CJK is found by its bigrams in the word index)."""
    return list(dict.fromkeys(w for w in words if len(w) >= 3 and not cjk_runs(w)))


def coverage(text: str, stems: Sequence[str], grams: Sequence[str]) -> float:
    total = len(stems) + len(grams)
    if not total:
        return 0.0
    folded = text.lower()
    return sum(1 for t in (*stems, *grams) if t in folded) / total


def _match(store: SQLiteStore, table: str, rank: str, fts_query: str, where: str, args: Sequence[Any],
           limit: int) -> list[tuple[int, float]]:
    # bm25() is negative, more negative = better: flipped so bigger is better.
    sql = (f"SELECT c.rowid, -{rank} FROM {table} CROSS JOIN file_chunks c ON c.rowid = {table}.rowid "
           f"WHERE {table} MATCH ? AND {where} ORDER BY {rank} LIMIT ?")
    try:
        return [(int(r), float(s)) for r, s in store.query(sql, [fts_query, *args, limit])]
    except apsw.SQLError as exc:  # cannot happen with quoted terms; say so clearly if it does
        raise QueryError(f"invalid full-text query {fts_query!r}: {exc}") from None


def keyword_candidates(store: SQLiteStore, query: str, where: str, args: Sequence[Any],
                       limit: int) -> dict[int, float]:
    """chunk rowid → keyword relevance in [0, 1] of the chunks (restricted by the SQL
    condition ``where`` on alias ``c``) that share a term with ``query``."""
    words = query_words(query)
    stems, grams = query_terms(query)
    bm25: dict[int, float] = {}
    word_q = " OR ".join(quote_fts(w) for w in list(dict.fromkeys(words))[:64]) if words else None
    fts_q = " OR ".join(q for q in (word_q, cjk_fts_query(query)) if q)
    if fts_q:
        for rowid, s in _match(store, "file_chunks_fts", _BM25, fts_q, where, args, limit):
            bm25[rowid] = bm25.get(rowid, 0.0) + s
    subs = substrings(query, words)
    if subs:
        tri_q = " OR ".join(quote_fts(s) for s in subs[:128])
        for rowid, s in _match(store, "file_chunks_tri", "bm25(file_chunks_tri)", tri_q, where, args, limit):
            bm25[rowid] = bm25.get(rowid, 0.0) + s
    if not bm25:
        return {}
    ids = list(bm25)
    rows = store.query(
        "SELECT c.rowid, f.path, c.text FROM file_chunks c JOIN files f ON f.rowid = c.file_rowid "
        f"WHERE c.rowid IN ({','.join('?' * len(ids))})", ids)
    return relevance(rows, bm25, stems, grams)


def relevance(rows: Sequence[Sequence[Any]], rank: dict[int, float], stems: Sequence[str],
              grams: Sequence[str]) -> dict[int, float]:
    """chunk rowid → keyword relevance from rows of (rowid, path, text) and each row's
    index rank (bigger is better): mostly term coverage, partly the rank over the best."""
    top = max(rank.values()) or 1.0
    out: dict[int, float] = {}
    for rowid, path, text in rows:
        cov = coverage(f"{path}\n{text}", stems, grams)
        if cov > 0:
            out[int(rowid)] = (1 - _BM25_SHARE) * cov + _BM25_SHARE * max(0.0, rank[int(rowid)]) / top
    return out


def kind_prior(kind: str, query: str) -> float:
    """Code first, then markdown, text, data; documentation first when the query asks
    for docs ("where is X documented", "readme")."""
    words = {w.lower() for w in _TOKEN.findall(query)} | set(cjk_runs(query))
    table = _DOC_PRIOR if words & _DOC_WORDS or any(w in query for w in ("文档", "说明")) else _KIND_PRIOR
    return table.get(kind, 0.85)


def path_boost(path: str, stems: Sequence[str]) -> float:
    """×(1 + PATH_WEIGHT × the share of query terms found in the file's path)."""
    terms = [s for s in stems if len(s) >= 3]
    if not terms:
        return 1.0
    folded = path.lower()
    return 1.0 + PATH_WEIGHT * sum(1 for t in terms if t in folded) / len(terms)


def recency_factor(mtime: float, newest: float) -> float:
    """A mild preference for recently modified files: in [1 - RECENCY_WEIGHT, 1]."""
    days = max(0.0, newest - mtime) / 86400
    return 1 - RECENCY_WEIGHT + RECENCY_WEIGHT * math.pow(0.5, days / RECENCY_HALF_LIFE_DAYS)
