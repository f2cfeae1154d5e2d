"""The retention benchmark's text measures (see ``bench/retention.py``): words and content
words, evidence sentences, Chinese key phrases, and the scores of one built context.

Chinese, Japanese and Korean text is read as such, since it has no spaces between words:

* a CJK run (the same ranges the library's keyword index calls CJK: kana, CJK ideographs,
  hangul) becomes its overlapping character bigrams, so ``我去了人民公园`` gives ``我去 去了
  了人 人民 民公 公园``, and a one-character run is that character; Latin text around it is cut
  into words as before (``Bart在公园`` → ``bart`` and ``在公 公园``). A content word of CJK is
  any bigram (no stoplist: the MADial answer measure removes the bigrams the dialogue
  already holds, which takes most function pairs with it);
* sentences also end at ``。！？；`` (no space follows them), and a sentence with CJK counts
  from ``MIN_SENTENCE_CJK`` characters (a Latin one from ``MIN_SENTENCE``);
* a Chinese *key phrase* (``clauses``) is a clause of the text cut at every Chinese or Latin
  punctuation mark, of at least ``MIN_CLAUSE`` characters.

Text without CJK is measured exactly as before these rules existed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

from lossless.core.render import chat_message_text

__all__ = [
    "MIN_CLAUSE",
    "MIN_SENTENCE",
    "MIN_SENTENCE_CJK",
    "STOPWORDS",
    "ContextView",
    "Evidence",
    "clauses",
    "content_words",
    "evidence_of",
    "evidence_units",
    "has_cjk",
    "normalize",
    "normalize_dates",
    "score",
    "words",
]

MIN_SENTENCE = 20
MIN_SENTENCE_CJK = 8  # CJK characters: about four words, as 20 Latin characters are
MIN_CLAUSE = 4

_STOPWORD_TEXT = """
a about above after again against all also am an and any are aren as at be because been before being below
between both but by can cannot could couldn did didn do does doesn doing don down during each either else
ever every few for from further had hadn has hasn have haven having he her here hers herself him himself his
how however i if in into is isn it its itself just let lets may me might more most must mustn my myself no
nor not now of off on once only or other ought our ours ourselves out over own per same shall shan she
should shouldn so some such than that the their theirs them themselves then there these they this those
through to too under until up upon us very via was wasn we were weren what when where which while who whom
whose why will with won would wouldn yet you your yours yourself yourselves
dont doesnt didnt isnt arent wasnt werent hasnt havent hadnt wont wouldnt shouldnt couldnt cant mustnt
im ive id ill youre youve youd youll hes shes its weve were wed well theyre theyve theyd theyll thats
theres whats wheres whos hows lets heres e.g i.e etc
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())

# the library's CJK ranges (store/fts.py): kana, CJK ideographs (+ extension A and the
# compatibility block), hangul syllables
CJK_CLASS = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_CJK_RUN = re.compile(f"[{CJK_CLASS}]+")
_WS = re.compile(r"\s+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？；])\s*")
# a clause ends at any Chinese or Latin punctuation mark (quotes and brackets included)
_CLAUSE_END = re.compile(r"[，。！？；：、,.!?;:“”‘’\"'（）()《》〈〉「」『』【】\[\]…—~～\s]+")
_APOSTROPHE = re.compile(r"['’`]")
_TOKEN = re.compile(r"\d+(?:[.,:]\d+)+|[^\W_]+(?:\.[^\W_]+)*")
_NUMBER = re.compile(r"\d+(?:[.,:]\d+)*")

# dates in any of the usual spellings become one word, so "2023-05-14", "14 May 2023" and
# "May 14th, 2023" match each other; a date without a year matches on month and day only
_MONTH_NAMES = ("january", "february", "march", "april", "may", "june", "july", "august", "september",
                "october", "november", "december")
_MONTH = {**{m: i for i, m in enumerate(_MONTH_NAMES, 1)}, **{m[:3]: i for i, m in enumerate(_MONTH_NAMES, 1)},
          "sept": 9}
_MONTH_RE = "(" + "|".join(sorted(_MONTH, key=len, reverse=True)) + r")\.?"
_DAY_RE = r"(\d{1,2})(?:st|nd|rd|th)?"
_DATES = (
    ("ymd", re.compile(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b")),
    ("dmy", re.compile(rf"\b{_DAY_RE}\s+(?:of\s+)?{_MONTH_RE}(?:,?\s+(\d{{4}}))?\b", re.I)),
    ("mdy", re.compile(rf"\b{_MONTH_RE}\s+{_DAY_RE}(?:,?\s+(\d{{4}}))?\b", re.I)),
)


def normalize(text: str) -> str:
    return _WS.sub(" ", text).strip()


def has_cjk(text: str) -> bool:
    return _CJK_RUN.search(text) is not None


def _long_enough(sentence: str) -> bool:
    cjk = sum(len(r) for r in _CJK_RUN.findall(sentence))
    return len(sentence) >= MIN_SENTENCE or cjk >= MIN_SENTENCE_CJK


def evidence_units(content: str) -> list[str]:
    """The sentences/lines of a message (normalised) that are long enough to count; the
    whole message when it has none."""
    units = [s for line in content.splitlines() for s in (normalize(p) for p in _SENTENCE_END.split(line))
             if s and _long_enough(s)]
    if not units:
        whole = normalize(content)
        units = [whole] if whole else []
    return units


def clauses(text: str, min_chars: int = MIN_CLAUSE) -> list[str]:
    """The clauses of ``text`` cut at every Chinese or Latin punctuation mark, of at least
    ``min_chars`` characters, in order and without repeats."""
    out: list[str] = []
    for part in _CLAUSE_END.split(text):
        if len(part) >= min_chars and part not in out:
            out.append(part)
    return out


def _date_word(year: str | None, month: int, day: int, original: str) -> str:
    try:
        date(int(year) if year else 2000, month, day)  # 2000: a leap year, so 29 February passes
    except ValueError:
        return original
    both = f" md{month:02d}{day:02d} "
    return f" d{year}{month:02d}{day:02d}{both}" if year else both


def normalize_dates(text: str) -> str:
    """Each date as ``d20230514 md0514`` (with a year) or ``md0514`` (without)."""
    for form, pattern in _DATES:
        def sub(m: re.Match[str], form: str = form) -> str:
            g = m.groups()
            if form == "ymd":
                return _date_word(g[0], int(g[1]), int(g[2]), m.group(0))
            if form == "dmy":
                return _date_word(g[2], _MONTH[g[1].lower()], int(g[0]), m.group(0))
            return _date_word(g[2], _MONTH[g[0].lower()], int(g[1]), m.group(0))
        text = pattern.sub(sub, text)
    return text


def _bigrams(run: str) -> list[str]:
    return [run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)]


def _latin_words(text: str) -> list[str]:
    return _TOKEN.findall(normalize_dates(_APOSTROPHE.sub("", text.lower())))


def words(text: str) -> list[str]:
    """Lower-case words (dates as one word each), a CJK run as its character bigrams."""
    out: list[str] = []
    pos = 0
    for m in _CJK_RUN.finditer(text):
        out.extend(_latin_words(text[pos : m.start()]))
        out.extend(_bigrams(m.group()))
        pos = m.end()
    out.extend(_latin_words(text[pos:]))
    return out


def _is_content(w: str) -> bool:
    if has_cjk(w):
        return len(w) >= 2  # a bigram; a lone character says little
    return w not in STOPWORDS and (len(w) >= 3 or _NUMBER.fullmatch(w) is not None)


def content_words(texts: Iterable[str]) -> set[str]:
    return {w for text in texts for w in words(text) if _is_content(w)}


@dataclass(frozen=True, slots=True)
class Evidence:
    units: tuple[str, ...]
    total: int
    whole: str


def evidence_of(content: str) -> Evidence:
    units = tuple(evidence_units(content))
    return Evidence(units, sum(len(u) for u in units), normalize(content))


@dataclass(slots=True)
class ContextView:
    """A built context as the metrics see it. ``exclude``: texts cut out of it first (the
    live dialogue of a MADial question, which the caller holds and which is not evidence)."""

    text: str  # normalised
    words: set[str]
    tokens: int
    ms: float

    @classmethod
    def of(cls, messages: Sequence[Any], tokens: int, ms: float, exclude: Sequence[str] = ()) -> ContextView:
        text = normalize("\n".join(chat_message_text(m) for m in messages))
        for live in exclude:
            if live:
                text = text.replace(live, " ")
        return cls(text, set(words(text)), tokens, ms)


def _phrase_share(phrases: Sequence[str], text: str) -> float:
    return sum(1 for p in phrases if p in text) / len(phrases) if phrases else 0.0


def score(view: ContextView, evidence: Sequence[Evidence], reference: set[str],
          phrases: Sequence[Sequence[str]] | None = None) -> dict[str, float | None]:
    """evidence_hit / evidence_full over ``evidence`` (None without any), answer_recall of
    ``reference`` (None when empty), and with ``phrases`` (key phrases per relevant memory,
    the first the gold one) memory_recall (their mean share present) and gold_recall."""
    hits = [sum(len(u) for u in ev.units if u in view.text) / ev.total if ev.total else 0.0 for ev in evidence]
    full = [1.0 if ev.whole and ev.whole in view.text else 0.0 for ev in evidence]
    out: dict[str, float | None] = {
        "evidence_hit": sum(hits) / len(hits) if hits else None,
        "evidence_full": sum(full) / len(full) if full else None,
        "answer_recall": len(reference & view.words) / len(reference) if reference else None,
    }
    if phrases is not None:
        shares = [_phrase_share(p, view.text) for p in phrases]
        out["memory_recall"] = sum(shares) / len(shares) if shares else None
        out["gold_recall"] = shares[0] if shares else None
    return out
