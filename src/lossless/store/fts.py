"""Turning a user's search text into safe FTS5 queries, and cutting snippets.

User input is never passed to FTS5 as syntax: every term is quoted. Latin-script terms
go to the unicode61 index; runs of CJK characters (which have no spaces to split on)
become overlapping trigrams for the trigram index, so a Chinese question finds Chinese
text that shares phrases with it.
"""

from __future__ import annotations

import re

__all__ = ["STOPWORDS", "cjk_runs", "fts_terms", "has_cjk_trigram", "quote_fts", "snippet", "trigram_query",
           "word_query"]

_WORD = re.compile(r"[^\W_]+(?:[-_.'][^\W_]+)*", re.UNICODE)
_CJK_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+")

STOPWORDS = frozenset(
    ["a", "an", "and", "are", "as", "at", "be", "but", "by", "can", "could", "did", "do", "does", "for", "from", "had", "has", "have", "how", "i", "if", "in", "into", "is", "it", "its", "me", "my", "of", "on", "or", "our", "so", "than", "that", "the", "their", "them", "then", "there", "these", "they", "this", "to", "was", "we", "were", "what", "when", "where", "which", "who", "whom", "why", "will", "with", "would", "you", "your", "about", "after", "before", "did", "does", "tell", "remind", "again", "any", "some", "all", "just", "also", "ever"]
)


def quote_fts(term: str) -> str:
    """One FTS5 string literal: double quotes doubled, the whole term quoted."""
    return '"' + term.replace('"', '""') + '"'


def cjk_runs(text: str) -> list[str]:
    return _CJK_RUN.findall(text)


def fts_terms(text: str) -> list[str]:
    """Lower-cased non-CJK words of a query, stopwords dropped, in first-seen order."""
    seen: dict[str, None] = {}
    stripped = _CJK_RUN.sub(" ", text)
    for match in _WORD.finditer(stripped):
        word = match.group(0).lower()
        if word in STOPWORDS or (len(word) < 2 and not word.isdigit()):
            continue
        seen.setdefault(word, None)
    return list(seen)


def word_query(text: str) -> str | None:
    """An OR of quoted terms for the unicode61 index, or None if the text has none."""
    terms = fts_terms(text)
    if not terms:
        return None
    return " OR ".join(quote_fts(t) for t in terms[:64])


def trigram_query(text: str) -> str | None:
    """An OR of quoted trigrams of every CJK run (runs of 3+ characters), or None."""
    grams: dict[str, None] = {}
    for run in cjk_runs(text):
        for i in range(len(run) - 2):
            grams.setdefault(run[i : i + 3], None)
    if not grams:
        return None
    return " OR ".join(quote_fts(g) for g in list(grams)[:128])


_CJK_TRIGRAM = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]{3}")


def has_cjk_trigram(text: str) -> bool:
    """Whether ``text`` holds a run of 3+ CJK characters: the only texts a
    :func:`trigram_query` can match, so the only ones the trigram index needs."""
    return _CJK_TRIGRAM.search(text) is not None


def short_cjk_terms(text: str) -> list[str]:
    """CJK runs of 1-2 characters: too short for trigrams, matched with LIKE instead."""
    return [run for run in cjk_runs(text) if len(run) < 3]


def snippet(text: str, query: str, width: int = 160) -> str:
    """A window of ``text`` around the first query term it contains (or its start)."""
    lowered = text.lower()
    pos = -1
    needles = fts_terms(query) + [r[:3] for r in cjk_runs(query)]
    for needle in needles:
        pos = lowered.find(needle.lower())
        if pos >= 0:
            break
    if pos < 0:
        pos = 0
    start = max(0, pos - width // 3)
    end = min(len(text), start + width)
    out = text[start:end].replace("\n", " ")
    return ("…" if start > 0 else "") + out + ("…" if end < len(text) else "")
