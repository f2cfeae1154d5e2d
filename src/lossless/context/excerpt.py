"""A recalled message cut around what matches the question, when not even one of its
sentences fits whole: the clauses (cut at any punctuation mark, Chinese or Latin) that
share the most of the question's words, grown clause by clause on both sides while
they fit, rather than the sentence's head, which can leave out the very words that
made it a match (``Bart和同学们在公园玩捉迷…``)."""

from __future__ import annotations

import re

from lossless.core.scripts import CJK_LETTERS
from lossless.core.tokens import TokenCounter

__all__ = ["excerpt_around", "query_terms", "shared_terms"]

_CJK = CJK_LETTERS
_CJK_RUN = re.compile(f"[{_CJK}]+")
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
# a clause ends after a punctuation mark or a line break (kept with it: the clauses joined
# are the text again)
_CLAUSE_END = re.compile(r"(?<=[，。！？；、：,.!?;:…\n])")
_ELLIPSIS = "…"


def query_terms(text: str) -> frozenset[str]:
    """Lower-case words of three or more characters (or with a digit), and the character
    bigrams of each CJK run (which has no spaces between words)."""
    out: set[str] = set()
    for run in _CJK_RUN.findall(text):
        out.update(run[i:i + 2] for i in range(max(1, len(run) - 1)))
    latin = _CJK_RUN.sub(" ", text.lower())
    out.update(w for w in _WORD.findall(latin) if len(w) >= 3 or any(c.isdigit() for c in w))
    return frozenset(out)


def shared_terms(text: str, terms: frozenset[str]) -> int:
    """How many of ``terms`` (:func:`query_terms` of the question) ``text`` holds."""
    return len(query_terms(text) & terms) if terms else 0


def _fits(text: str, max_tokens: int, counter: TokenCounter) -> bool:
    return counter.count(text) <= max_tokens


def _render(clauses: list[str], lo: int, hi: int) -> str:
    body = "".join(clauses[lo:hi + 1]).strip()
    return (_ELLIPSIS if lo > 0 else "") + body + (_ELLIPSIS if hi < len(clauses) - 1 else "")


def _cut_clause(clause: str, terms: frozenset[str], max_tokens: int, counter: TokenCounter) -> str:
    """One clause too long to fit, cut to a window of characters centred on its first
    word shared with the question (marked with … where cut)."""
    at = min((i for t in terms if (i := clause.lower().find(t)) >= 0), default=0)
    lo_n, hi_n = 0, len(clause)
    while lo_n < hi_n:  # the most characters that fit, centred on ``at``
        mid = (lo_n + hi_n + 1) // 2
        start = max(0, min(at - mid // 2, len(clause) - mid))
        cut = _ELLIPSIS * (start > 0) + clause[start:start + mid] + _ELLIPSIS * (start + mid < len(clause))
        if _fits(cut, max_tokens, counter):
            lo_n = mid
        else:
            hi_n = mid - 1
    if lo_n == 0:
        return ""
    start = max(0, min(at - lo_n // 2, len(clause) - lo_n))
    return _ELLIPSIS * (start > 0) + clause[start:start + lo_n].strip() + _ELLIPSIS * (start + lo_n < len(clause))


def excerpt_around(text: str, query: str, max_tokens: int, counter: TokenCounter) -> str:
    """``text`` cut to ``max_tokens`` around the clause sharing the most of ``query``'s
    words (the first such), grown by whole clauses on both sides (the side whose next
    clause shares more of them first, else the following one) while it fits; "" when
    no clause shares a word with the query or nothing fits."""
    terms = query_terms(query)
    clauses = [c for c in _CLAUSE_END.split(text) if c]
    if not terms or not clauses:
        return ""
    scores = [shared_terms(c, terms) for c in clauses]
    best = max(scores)
    if best == 0:
        return ""
    anchor = scores.index(best)
    if not _fits(_render(clauses, anchor, anchor), max_tokens, counter):
        return _cut_clause(clauses[anchor].strip(), terms, max_tokens, counter)
    lo = hi = anchor
    while True:
        options = []
        if hi + 1 < len(clauses):
            options.append((scores[hi + 1], 1, lo, hi + 1))
        if lo > 0:
            options.append((scores[lo - 1], 0, lo - 1, hi))
        grown = False
        for _, _, a, b in sorted(options, reverse=True):
            if _fits(_render(clauses, a, b), max_tokens, counter):
                lo, hi, grown = a, b, True
                break
        if not grown:
            return _render(clauses, lo, hi)
