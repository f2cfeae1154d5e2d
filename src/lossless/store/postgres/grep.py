"""Search for the PostgreSQL store (kept apart from the write path).

Keyword search is a ``tsvector`` column with a GIN index, ``simple`` configuration (no
stemming, no stopwords: ``src/app.py`` and ``v2.3.1`` stay whole tokens). What the
writer feeds ``to_tsvector`` is :func:`search_document`: the text with Latin diacritics
folded (as SQLite's ``unicode61 remove_diacritics 2`` does), then the parts of compound
tokens (``src app py``, so ``app.py`` is found too), then the line SQLite's index gets
too (:func:`~lossless.store.fts.index_extras`: ``follow up followup``, ``5 km``), then
the CJK terms SQLite's index gets (:func:`~lossless.store.fts.cjk_index_terms`: each
run's bigrams and its last character), each once. Chinese and Japanese have no spaces,
so bigrams are what makes them searchable by an index that works under any database
locale (``pg_trgm`` extracts no trigrams from CJK under the C locale).

User input is never tsquery syntax: each of its :func:`~lossless.store.fts.search_terms`
and CJK bigrams becomes ``websearch_to_tsquery`` of the quoted term (a one-character CJK
run the prefix query ``'字':*``, as SQLite's ``"字"*``) and the terms are OR-ed (``||``),
ranked by ``ts_rank``, as SQLite ORs quoted FTS5 terms ranked by bm25. ``mode="raw"``
passes the text to ``to_tsquery`` (PostgreSQL's own syntax: ``&``, ``|``, ``!``,
``<->``) and reports bad syntax as a :class:`~lossless.core.errors.QueryError`.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Protocol

from lossless.core.errors import QueryError
from lossless.core.scripts import CJK_LETTERS
from lossless.core.types import GrepHit
from lossless.store.base import SearchSpec
from lossless.store.fts import (
    cjk_index_terms,
    cjk_search_terms,
    escaped_text,
    index_extras,
    search_terms,
    symbol_query,
)
from lossless.store.searching import Clauses, rank_hits, spec_filters


class _Reads(Protocol):
    """What a search reads the store with (a :class:`~lossless.store.postgres.store.PostgresStore`)."""

    def _query(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...

__all__ = ["fold", "keyword_tsquery", "run_search", "search_document"]

_CANDIDATES = 2  # fetch this many times the limit from each kind before merging (as on SQLite)
_SQL = Clauses("%s", lambda column, values: (f"{column} = ANY(%s)", [list(values)]))
# A tsvector holds at most 1 MB: the first 200k characters of a text are indexed, with at
# most 20k distinct CJK bigrams (a long Chinese text has far more; its start is enough to
# find it). The text itself is stored whole; regex search reads all of it.
_DOC_LIMIT = 200_000
_DOC_GRAMS = 20_000
_CJK = re.compile(f"[{CJK_LETTERS}]+")  # as store/fts.py
_PART = re.compile(r"[^\W_]+")
_MAX_WORDS = 64


def _fold_latin(text: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFKD", text.lower()) if not unicodedata.combining(c))


def fold(text: str) -> str:
    """Lower-cased with diacritics removed outside CJK runs (kana keep their marks)."""
    out: list[str] = []
    pos = 0
    for m in _CJK.finditer(text):
        out.append(_fold_latin(text[pos : m.start()]))
        out.append(m.group(0))
        pos = m.end()
    out.append(_fold_latin(text[pos:]))
    return "".join(out)


def search_document(text: str) -> str:
    """What ``to_tsvector('simple', …)`` indexes for ``text`` (see the module docstring)."""
    raw = text[:_DOC_LIMIT]
    escaped = escaped_text(raw)  # the text its JSON escapes spell, as SQLite indexes it
    if escaped:
        raw = f"{raw}\n{escaped}"
    text = fold(raw)
    parts: list[str] = []
    for chunk in text.split():
        has_cjk = _CJK.search(chunk) is not None
        pieces = _PART.findall(_CJK.sub(" ", chunk) if has_cjk else chunk)
        if has_cjk or len(pieces) > 1:
            parts.extend(pieces)
    # each term once: a tsvector holds at most 1 MB, and matching needs no repeats; made from
    # the text unfolded, as SQLite's are (NFKD would turn halfwidth kana into CJK letters)
    grams: dict[str, None] = {}
    for line in cjk_index_terms(raw):
        grams.update(dict.fromkeys(line.split(" ")))
        if len(grams) >= _DOC_GRAMS:
            break
    return "\n".join([text, " ".join(parts), index_extras(text), " ".join(list(grams)[:_DOC_GRAMS])])


def keyword_tsquery(query: str, config: str = "simple", chars: bool = False) -> tuple[str, list[str]] | None:
    """(SQL tsquery expression, its arguments) OR-ing every term of ``query``: its
    :func:`~lossless.store.fts.search_terms` (a compound's parts as a phrase, and joined)
    and :func:`~lossless.store.fts.cjk_search_terms` (with ``chars``, the Han characters too);
    None when it has none. ``config``:
    the text search configuration (a constant, not user input)."""
    words = search_terms(query)
    grams = cjk_search_terms(query, chars)
    if not words and not grams:
        # the query held only stopwords: search them rather than nothing (as on SQLite)
        words = list(dict.fromkeys(w.lower() for w in _PART.findall(query)))
    phrases = list(dict.fromkeys(fold(w) for w in words[:_MAX_WORDS]))
    if not phrases and not grams:
        return None
    # each term quoted: websearch syntax (or, -, quotes) in the user's text means nothing;
    # a one-character CJK term is a prefix (a CJK letter is never tsquery syntax)
    exprs = [f"websearch_to_tsquery('{config}', %s)"] * len(phrases)
    exprs += [f"to_tsquery('{config}', %s)" if len(g) == 1 else f"websearch_to_tsquery('{config}', %s)" for g in grams]
    args = ['"' + t.replace('"', " ") + '"' for t in phrases]
    args += [f"'{g}':*" if len(g) == 1 else f'"{g}"' for g in grams]
    return f"({' || '.join(exprs)})", args


def _table(kind: str) -> str:
    return "messages" if kind == "message" else "summaries"


def _ranked(store: _Reads, kind: str, expr: str, expr_args: list[Any], spec: SearchSpec,
            limit: int) -> list[tuple[int, float]]:
    where, args = spec_filters(spec, kind, "t", _SQL)
    # The tsquery is a constant expression: the GIN index finds the matches, ts_rank
    # orders only those. Ties go to the newer row so results are deterministic.
    sql = (f"SELECT t.rowid, ts_rank(t.search, q.q) AS score FROM {_table(kind)} t, (SELECT {expr} AS q) q "
           f"WHERE t.search @@ q.q{where} ORDER BY score DESC, t.rowid DESC LIMIT %s")
    return [(int(r), float(s)) for r, s in store._query(sql, [*expr_args, *args, limit])]


def _raw(store: _Reads, kind: str, spec: SearchSpec, limit: int) -> list[tuple[int, float]]:
    import psycopg

    try:
        return _ranked(store, kind, "to_tsquery('simple', %s)", [fold(spec.query)], spec, limit)
    except (psycopg.errors.SyntaxError, psycopg.errors.InvalidTextRepresentation) as exc:
        raise QueryError(f"invalid full-text query {spec.query!r} (PostgreSQL tsquery syntax: words joined "
                         f"by & | ! <->, quotes for phrases): {exc.diag.message_primary or exc}") from None


# -- regular expressions ---------------------------------------------------------------------

_SAFE_GROUP = re.compile(r"\(\?(?!:|=|!|<=|<!)")  # any (? other than these is a flag or a named group
_CLASS_ESCAPES = "dDwWsS"  # Unicode-aware in Python, locale-bound in PostgreSQL
_OPEN_BOUND = re.compile(r"(?<!\\)\{,(\d+)\}")


def _class_end(body: str, i: int) -> int:
    """The index just past the ``]`` closing the class that opens at ``body[i]``."""
    j = i + 1
    if body[j : j + 1] == "^":
        j += 1
    if body[j : j + 1] == "]":
        j += 1  # a leading ] is a literal
    while j < len(body) and body[j] != "]":
        j += 2 if body[j] == "\\" else 1
    return j + 1


def pg_regex(pattern: str) -> str | None:
    """A PostgreSQL ARE matching at least every text ``pattern`` (Python ``re`` syntax)
    matches, or None when that cannot be promised (then the rows are scanned in Python).
    It only narrows the rows: each one is confirmed with Python's ``re``, so the answer
    is exactly Python's, as on SQLite.

    What PostgreSQL does differently is widened, never narrowed: ``\\d \\w \\s`` (and
    classes holding them) become ``.`` (PostgreSQL's are bound to the database locale,
    Python's are Unicode), word boundaries are dropped, ``$`` also matches before a final
    newline, ``{,n}`` is spelled ``{0,n}``; inline flags other than a leading ``(?i)``,
    named groups and ``(?i)`` with non-ASCII letters are scanned in Python instead."""
    body = pattern
    prefix = ""
    if body.startswith("(?i)"):
        prefix, body = "(?i)", body[4:]
        if any(ord(c) > 127 for c in body):
            return None  # PostgreSQL's case folding of non-ASCII depends on the locale
    if _SAFE_GROUP.search(body) or "\\N" in body or "[:" in body:
        return None
    out: list[str] = []
    i = 0
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt in "bB":
                pass  # a boundary is a condition: without it more texts match
            elif nxt in _CLASS_ESCAPES:
                out.append(".")
            else:
                out.append(body[i : i + 2])
            i += 2
        elif c == "[":
            end = _class_end(body, i)
            cls = body[i:end]
            out.append("." if re.search(r"\\[dDwWsSbB]", cls) else cls)
            i = end
        elif c == "$":
            out.append("(?=\\n?$)")  # Python's $ also matches before a final newline
            i += 1
        else:
            out.append(c)
            i += 1
    return prefix + _OPEN_BOUND.sub(r"{0,\1}", "".join(out))


def _regex(store: _Reads, kind: str, spec: SearchSpec, limit: int) -> list[tuple[int, float]]:
    import psycopg

    try:
        rx = re.compile(spec.query)
    except re.error as exc:
        raise QueryError(f"invalid regular expression {spec.query!r}: {exc}") from None
    where, args = spec_filters(spec, kind, "t", _SQL)
    field = ("coalesce(t.content, '') || chr(10) || coalesce(t.tool_calls, '')" if kind == "message"
             else "t.content")
    order = "t.seq DESC" if kind == "message" else "t.last_seq DESC"
    translated = pg_regex(spec.query)
    if translated is not None:
        # case-sensitive ~ like Python's re (and SQLite's regex mode); (?i) works on both
        sql = f"SELECT t.rowid, {field} FROM {_table(kind)} t WHERE {field} ~ %s{where} ORDER BY {order}"
        params: list[Any] = [translated, *args]
    else:
        sql = f"SELECT t.rowid, {field} FROM {_table(kind)} t WHERE TRUE{where} ORDER BY {order}"
        params = list(args)
    out: list[tuple[int, float]] = []
    page = max(limit * 4, 200)
    offset = 0
    while len(out) < limit:
        try:
            rows = store._query(f"{sql} LIMIT %s OFFSET %s", [*params, page, offset])
        except psycopg.errors.InvalidRegularExpression:
            if translated is None:
                raise
            translated = None  # PostgreSQL does not take it: scan in Python instead
            sql = f"SELECT t.rowid, {field} FROM {_table(kind)} t WHERE TRUE{where} ORDER BY {order}"
            params = list(args)
            continue
        out.extend((int(r), 1.0) for r, text in rows if rx.search(text) is not None)
        if len(rows) < page:
            break
        offset += page
    return out[:limit]


# -- running a search ----------------------------------------------------------------------

def _candidates(store: _Reads, kind: str, spec: SearchSpec) -> dict[int, float]:
    limit = max(spec.limit, 1) * _CANDIDATES
    if spec.mode == "regex":
        pairs = _regex(store, kind, spec, limit)
    elif spec.mode == "raw":
        pairs = _raw(store, kind, spec, limit)
    elif (literal := symbol_query(spec.query)) is not None:
        # 🎉, €: the index keeps no symbols, so the text itself (newest first)
        pairs = _regex(store, kind, replace(spec, query=re.escape(literal)), limit)
    else:
        if not re.search(r"[^\W_]", spec.query):
            return {}
        pairs = []
        built = keyword_tsquery(spec.query, chars=spec.cjk_chars)
        if built is not None:
            pairs += _ranked(store, kind, built[0], built[1], spec, limit)
    scores: dict[int, float] = {}
    for rowid, score in pairs:
        scores[rowid] = scores.get(rowid, 0.0) + score
    return scores


def run_search(store: _Reads, spec: SearchSpec) -> list[GrepHit]:
    return rank_hits(store._query, _SQL, spec, lambda kind: _candidates(store, kind, spec))
