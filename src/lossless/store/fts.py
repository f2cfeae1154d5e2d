"""Turning text into keyword-index rows and a user's search text into safe FTS5 queries.

User input is never passed to FTS5 as syntax: every term is quoted. Chinese, Japanese
and Korean are indexed as words too, by character bigrams: most Chinese words are two
characters (公园, 电影), which a trigram index cannot match, and CJK text has no spaces to
split on (hangul has, but its particles stick to the word: 학교에). Each CJK run of a text
(letters only: ・ and the kana voicing marks end one) is indexed as its overlapping
bigrams and its last character (:func:`cjk_index_terms`), and a query's runs become the
same bigrams, a one-character run a prefix term that finds the character anywhere
(:func:`cjk_query_terms`). Both stores index and query exactly these terms, so the same
CJK query finds the same messages on SQLite and PostgreSQL.

One normaliser serves the index and the query, so the forms a person writes for the same
word meet (as Lucene's English possessive and word-delimiter filters do):

* a *compound* is a run of letters and digits joined by hyphens, apostrophes, periods,
  colons, underscores, or commas between digits (``follow-up``, ``Caroline's``,
  ``10:30``, ``v1.2``, ``1,000``); a CJK character ends one (``用Python写`` holds
  ``Python``);
* an English possessive ending (``'s``, ``’s``, ``ʼs``) is dropped, and a plural one
  ("James'") is never part of a compound: the question's "Caroline's" looks for Caroline;
* a compound's *parts* are split at its joiners and between letters and digits
  (``5km`` → ``5 km``, ``v1.2`` → ``v 1 2``).

What the unicode61 index is given (:func:`index_text`) is the text, then a line of the
forms unicode61 would not make itself (``followup`` for "follow-up", ``5 km`` for
"5km", ``python`` out of ``用Python写``). A query (:func:`search_terms`) looks for a
compound's parts as a phrase and for its joined form, and for two neighbouring words
written as one (``follow up`` finds ``followup``), so "follow-up", "follow up" and
"followup" find each other (but "followup" does not find "follow up"), as do "5km" and
"5 km". PostgreSQL's store indexes the same extra line (``store/postgres/grep.py``).

Full-width letters and digits (``ｉＰｈｏｎｅ１５``, ``２０２４年``: what a Chinese or Japanese
input method types in full-width mode) are the same words as their plain forms: a query
is read in plain forms (:func:`narrow`), and a text that has full-width ones is indexed
with their plain forms on a line of their own (:func:`wide_forms_line`). PostgreSQL's
documents are NFKD-folded, which does the same.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from collections.abc import Iterator

from lossless.core.graphemes import cluster_start
from lossless.core.scripts import CJK_LETTERS, HAN_LETTERS

__all__ = ["COMMON_HAN", "MAX_CJK_TERMS", "STOPWORDS", "cjk_fts_query", "cjk_index_line", "cjk_index_terms", "cjk_query_chars",
           "cjk_query_terms", "cjk_runs", "cjk_search_terms", "compounds", "escaped_text", "fts_terms", "has_cjk", "has_wide_forms", "index_extras", "index_text", "match_position", "narrow",
           "quote_fts", "search_terms", "snippet", "symbol_query", "term_pattern", "wide_forms_line", "word_query"]

_CJK_CLASS = CJK_LETTERS
_CJK_RUN = re.compile(f"[{_CJK_CLASS}]+")
# a CJK run as the index sees it: letters only (unicode61 and PostgreSQL's parser split at
# ・, ゠ and the spacing voicing marks, which are not letters)
_CJK_WORD = re.compile(f"(?:(?=\\w)[{_CJK_CLASS}])+")
_ALNUM = f"[^\\W_{_CJK_CLASS}]"  # a letter or digit that is not CJK
# hyphens, apostrophes, a period, a colon or an underscore join the parts of one compound;
# a comma only between digits (1,000)
_JOINER = "[-\u2010\u2011'\u2019\u02bc.:_]|(?<=\\d),(?=\\d)"
_COMPOUND = re.compile(f"{_ALNUM}+(?:(?:{_JOINER}){_ALNUM}+)*")
_LETTER = f"[^\\W\\d_{_CJK_CLASS}]"
# a compound unicode61 does not see whole: one with a joiner, or digits beside letters
_SPLIT = re.compile(f"(?<!{_ALNUM})(?={_ALNUM}*(?:(?:{_JOINER}){_ALNUM}|\\d{_LETTER}|{_LETTER}\\d))"
                    f"{_ALNUM}+(?:(?:{_JOINER}){_ALNUM}+)*")
_MIXED = re.compile(r"\d[^\W\d_]|[^\W\d_]\d")  # digits beside letters: 5km, v1
_POSSESSIVE = re.compile("['\u2019\u02bc]s$")  # on lower-cased text
_PART = re.compile(r"\d+|[^\W\d_]+")  # letters and digits apart: 5km → 5, km
_SPACE_ONLY = re.compile(r"\s+")

STOPWORDS = frozenset(
    ["a", "an", "and", "are", "as", "at", "be", "but", "by", "can", "could", "did", "do", "does", "for", "from", "had", "has", "have", "how", "i", "if", "in", "into", "is", "it", "its", "me", "my", "of", "on", "or", "our", "so", "than", "that", "the", "their", "them", "then", "there", "these", "they", "this", "to", "was", "we", "were", "what", "when", "where", "which", "who", "whom", "why", "will", "with", "would", "you", "your", "about", "after", "before", "did", "does", "tell", "remind", "again", "any", "some", "all", "just", "also", "ever"]
)
_MAX_WORD_TERMS = 64
# a long question's CJK runs give at most this many bigrams (first seen first), as its
# words are capped: a pasted page must not become thousands of OR-ed terms
MAX_CJK_TERMS = 256
# A Han character carries a meaning of its own (kana and hangul spell sounds), so recall
# also searches a question's Han characters one by one, after its bigrams: 「小花」 and
# 「花束」 share no bigram but 花 (:func:`cjk_query_chars`). Not these: the hundred most
# frequent characters of written Chinese and the particles and pronouns of chat, each
# found in most messages.
COMMON_HAN = frozenset(
    "的一是不了在人有我他这个们中来上大为和国地到以说时要就出会可也你对生能而子那得于着下自之年过发后作里用道行所然"
    "家种事成方多经么去法学如都同现当没动面起看定天分还进好小部其些主样理心她本前开但因只从想实"
    "吗呢吧啊嗯哦呀哈啦嘛呗哇喔它您"
)
_HAN = re.compile(f"[{HAN_LETTERS}]")
_GRAM_SLICE = 4096  # a long run's bigrams are joined this many characters at a time
# a long text is scanned this many characters at a time, cut at whitespace (no compound or
# CJK run holds any): one regular-expression scan holds the interpreter's lock, and one over
# a pasted 8 MB message held it for a second or more, stalling every other thread
_SCAN_CHARS = 1 << 16
_SPACE = re.compile(r"\s")
# full-width ASCII (U+FF01–FF5E) to ASCII, the ideographic space to a space: one character
# for one, so positions in a narrowed text are those of the text
_NARROW = str.maketrans({**{chr(c): chr(c - 0xFEE0) for c in range(0xFF01, 0xFF5F)}, "\u3000": " "})
_WIDE_ALNUM = "\uff10-\uff19\uff21-\uff3a\uff41-\uff5a"
# a run of full-width text holding a letter or digit (with the full-width joiners between)
_WIDE_CHAR = re.compile(f"[{_WIDE_ALNUM}]")
_WIDE_RUN = re.compile(f"[\uff01-\uff5e]*[{_WIDE_ALNUM}][\uff01-\uff5e]*")


def narrow(text: str) -> str:
    """``text`` with full-width letters, digits and punctuation in their plain forms
    (``ｉＰｈｏｎｅ１５`` → ``iPhone15``); the same length."""
    return text if text.isascii() else text.translate(_NARROW)


def has_wide_forms(text: str) -> bool:
    """Whether ``text`` holds a full-width letter or digit."""
    return not text.isascii() and _WIDE_CHAR.search(text) is not None


def wide_forms_line(text: str) -> str:
    """The plain forms of ``text``'s full-width words, and their :func:`index_extras`
    (``iPhone15 iphone 15``); empty when it has none."""
    if not has_wide_forms(text):
        return ""
    runs = " ".join(narrow(m.group(0)) for m in _WIDE_RUN.finditer(text))
    return f"{runs} {index_extras(runs)}".strip()


def quote_fts(term: str) -> str:
    """One FTS5 string literal: double quotes doubled, the whole term quoted."""
    return '"' + term.replace('"', '""') + '"'


def cjk_runs(text: str) -> list[str]:
    return _CJK_RUN.findall(text)


def _parts(compound: str) -> list[str]:
    return _PART.findall(_POSSESSIVE.sub("", compound.lower()))


def _windows(text: str) -> list[tuple[int, int]]:
    """``text`` as (start, end) windows of about ``_SCAN_CHARS``, each cut at whitespace."""
    out: list[tuple[int, int]] = []
    start = 0
    while start < len(text):
        end = start + _SCAN_CHARS
        if end < len(text):
            space = _SPACE.search(text, end)
            end = space.start() if space else len(text)
        out.append((start, min(end, len(text))))
        start = end
    return out


def compounds(text: str, split_only: bool = False) -> list[tuple[list[str], bool, int, int]]:
    """Every compound of ``text`` as (its lower-cased parts, whether a CJK character
    touches it, start, end); a possessive ending is dropped, so "James'"s and
    "Caroline’s"'s parts are ``["james"]`` and ``["caroline"]``. ``split_only``: only
    those with a joiner or digits beside letters, unless ``text`` holds CJK."""
    out: list[tuple[list[str], bool, int, int]] = []
    windows = _windows(text)
    cjk = any(_CJK_RUN.search(text, a, b) for a, b in windows)
    pattern = _SPLIT if split_only and not cjk else _COMPOUND
    for a, b in windows:
        for m in pattern.finditer(text, a, b):
            parts = _parts(m.group(0))
            if not parts:
                continue
            start, end = m.span()
            touches = bool((start and _CJK_RUN.match(text, start - 1)) or _CJK_RUN.match(text, end))
            out.append((parts, touches, start, end))
    return out


def index_extras(text: str) -> str:
    """The forms of ``text``'s compounds that the unicode61 tokenizer does not make
    itself, which splits at joiners but keeps letters, digits and CJK together: a
    compound's joined form (``followup`` for "follow-up", ``isnt``), and its parts when
    digits meet letters or CJK touches it (``5 km`` for "5km", ``python`` for
    "用Python写"). Empty for most texts; nothing a word already has is repeated, so
    bm25 counts each word as often as it is written."""
    extra: list[str] = []
    for parts, touches, start, end in compounds(text, split_only=True):
        raw = text[start:end].lower()
        if touches or _MIXED.search(raw):
            extra.append(" ".join(parts))
        joined = "".join(parts)
        if len(parts) > 1 and joined != raw:
            extra.append(joined)
            runs = _PART.findall(joined)  # 10:30am → 1030am, whose own parts are 1030 am
            if len(runs) > 1 and runs != parts:
                extra.append(" ".join(runs))
    return " ".join(extra)


def _cjk_words(text: str) -> Iterator[str]:
    for a, b in _windows(text):
        for m in _CJK_WORD.finditer(text, a, b):
            yield m.group(0)


def has_cjk(text: str) -> bool:
    """Whether ``text`` holds a CJK letter (so its keyword rows carry bigrams)."""
    return any(_CJK_WORD.search(text, a, b) for a, b in _windows(text))


def cjk_index_terms(text: str) -> Iterator[str]:
    """The index terms of ``text``'s CJK runs, in text order, repeats kept (bm25 counts
    them): each run's overlapping bigrams, then its last character, so a one-character
    query (a prefix term) finds the character wherever it stands. Yielded as strings of
    space-separated terms, a slice of a long run at a time."""
    for run in _cjk_words(text):
        for i in range(0, len(run) - 1, _GRAM_SLICE):
            piece = run[i : i + _GRAM_SLICE + 1]
            yield " ".join(a + b for a, b in itertools.pairwise(piece))
        yield run[-1]


def cjk_index_line(text: str) -> str:
    """:func:`cjk_index_terms` as one line (empty when ``text`` has no CJK)."""
    return " ".join(cjk_index_terms(text))


# a run of escapes, each with as many backslashes as the first (one; two when escaped again
# inside a JSON string, \\u676d): "\u00a1\\\u00a1" is ¡, a backslash and ¡, not one word
_ESCAPE_RUN = re.compile(r"(\\+)u[0-9a-fA-F]{4}(?:\1u[0-9a-fA-F]{4})*")
_ESCAPE_HEX = re.compile(r"u([0-9a-fA-F]{4})")


def escaped_text(text: str) -> str:
    """The characters ``text`` spells as JSON ``\\u`` escapes, a run of them a word
    (``{"city": "\\u676d\\u5dde"}`` → ``杭州``): a tool result written by ``json.dumps``
    with its default ``ensure_ascii`` holds its Chinese only so, and is stored verbatim
    (tool-call arguments so written are escaped once more in the stored calls). A pair of
    surrogate escapes is one character (an emoji); a lone one is dropped. Empty when
    ``text`` has none."""
    if "\\u" not in text:
        return ""
    words: dict[str, None] = {}
    for m in _ESCAPE_RUN.finditer(text):
        chars = "".join(chr(int(h, 16)) for h in _ESCAPE_HEX.findall(m.group(0)))
        word = chars.encode("utf-16", "surrogatepass").decode("utf-16", "ignore")
        word = "".join(c if c.isprintable() else " " for c in word).strip()
        if word:
            words.setdefault(word, None)
    return " ".join(words)


def _index_lines(text: str) -> list[str]:
    return [line for line in (index_extras(text), wide_forms_line(text), cjk_index_line(text)) if line]


def index_text(text: str) -> str:
    """What a keyword index is given for ``text``: the text itself and, on lines of their
    own, :func:`index_extras`, :func:`wide_forms_line` and :func:`cjk_index_line` (so every
    raw FTS5 query that matched the text still does), then the same for the text its JSON
    escapes spell (:func:`escaped_text`)."""
    extra = _index_lines(text)
    escaped = escaped_text(text)
    if escaped:
        extra += [escaped, *_index_lines(escaped)]
    return "\n".join([text, *extra])


def cjk_query_terms(text: str) -> list[str]:
    """The CJK terms of a query, first seen first, at most :data:`MAX_CJK_TERMS`: each
    run's bigrams; a one-character run is the character itself, searched as a prefix
    (it is found as the start of a bigram or as a run's last character)."""
    terms: dict[str, None] = {}
    for run in _cjk_words(text):
        if len(run) == 1:
            terms.setdefault(run, None)
        for i in range(len(run) - 1):
            terms.setdefault(run[i : i + 2], None)
        if len(terms) >= MAX_CJK_TERMS:
            break
    return list(terms)[:MAX_CJK_TERMS]


def cjk_query_chars(text: str) -> list[str]:
    """A query's Han characters that are not :data:`COMMON_HAN`, first seen first, at most
    :data:`MAX_CJK_TERMS`; each is searched as a prefix term, which finds the character
    anywhere (see :func:`cjk_index_terms`)."""
    chars: dict[str, None] = {}
    for run in _cjk_words(text):
        for ch in run:
            if ch not in COMMON_HAN and _HAN.match(ch):
                chars.setdefault(ch, None)
        if len(chars) >= MAX_CJK_TERMS:
            break
    return list(chars)[:MAX_CJK_TERMS]


def cjk_search_terms(text: str, chars: bool = False) -> list[str]:
    """:func:`cjk_query_terms`, and with ``chars`` :func:`cjk_query_chars` after them
    (a character already a term once)."""
    terms = cjk_query_terms(text)
    return list(dict.fromkeys(terms + cjk_query_chars(text))) if chars else terms


def cjk_fts_query(text: str, chars: bool = False) -> str | None:
    """An OR of :func:`cjk_query_terms` for FTS5 (a one-character term as a prefix
    query), and with ``chars`` of :func:`cjk_query_chars`; None when the text has no CJK."""
    terms = cjk_search_terms(text, chars)
    if not terms:
        return None
    return " OR ".join(quote_fts(t) + ("*" if len(t) == 1 else "") for t in terms)


def _keep(word: str) -> bool:
    return word not in STOPWORDS and (len(word) > 1 or word.isdigit())


def search_terms(text: str) -> list[str]:
    """The keyword terms of a query, in first-seen order, each a phrase of space-separated
    tokens: a word; a compound's parts and its joined form (``follow up``, ``followup``);
    two neighbouring words joined (``followup`` for "follow up"). Stopwords, one-letter
    words and CJK runs are left out (CJK goes to :func:`cjk_query_terms`). Full-width
    forms are read as their plain ones (:func:`narrow`)."""
    text = narrow(text)
    seen: dict[str, None] = {}
    joins: dict[str, None] = {}
    found = compounds(text)
    for i, (parts, _touches, start, _end) in enumerate(found):
        if len(parts) == 1:
            if _keep(parts[0]):
                seen.setdefault(parts[0], None)
        elif any(_keep(p) for p in parts):
            seen.setdefault(" ".join(parts), None)
            seen.setdefault("".join(parts), None)
        if i and len(parts) == 1 and len(found[i - 1][0]) == 1:
            prev, word = found[i - 1][0][0], parts[0]
            between = text[found[i - 1][3] : start]
            if (_keep(prev) and _keep(word) and prev.isalpha() and word.isalpha()
                    and _SPACE_ONLY.fullmatch(between)):
                joins.setdefault(prev + word, None)
    out = list(seen)
    out += [j for j in joins if j not in seen]
    return out


def term_pattern(term: str) -> re.Pattern[str]:
    """A regular expression finding a :func:`search_terms` term in lower-cased text as
    the index does: its parts in a row, each bounded as a token (a letter part by what is
    not a letter, a digit part by what is not a digit, CJK bounding neither), so "km"
    is found in "5km" and "python" in "用python写". (The joined form of a compound,
    "followup", is found where it is written so, not in "follow-up".)"""
    parts = term.split(" ")

    def edge(ch: str) -> str:
        return r"\d" if ch.isdigit() else _LETTER

    body = r"[\W_]*".join(re.escape(p) for p in parts)
    return re.compile(f"(?<!{edge(parts[0][0])}){body}(?!{edge(parts[-1][-1])})")


def fts_terms(text: str) -> list[str]:
    """Lower-cased non-CJK words of a query, stopwords dropped, in first-seen order: a
    compound stays whole (``follow-up``, ``app.py``) with its possessive ending dropped."""
    seen: dict[str, None] = {}
    for m in _COMPOUND.finditer(narrow(text)):  # full-width forms as their plain ones
        word = _POSSESSIVE.sub("", m.group(0).lower())
        if not _keep(word) or not _PART.search(word):
            continue
        seen.setdefault(word, None)
    return list(seen)


_MAX_SYMBOLS = 64  # a symbol query looked up as written, at most this long


def symbol_query(text: str) -> str | None:
    """What to find as written when a query has no word or digit for the index but
    symbols (🎉, €, ★, +): the query without its outer spaces. The word index keeps no
    symbols, so a keyword search finds such a query by the text itself (a literal
    substring, newest first). None when the query has a word, or only punctuation and
    spaces (``?``, ``...`` would match nearly every message), or longer than
    ``_MAX_SYMBOLS`` characters (a wall of emoji: no such literal is worth a scan)."""
    stripped = text.strip()
    if not stripped or len(stripped) > _MAX_SYMBOLS or re.search(r"[^\W_]", stripped):
        return None
    return stripped if any(unicodedata.category(c).startswith("S") for c in stripped) else None


def word_query(text: str) -> str | None:
    """An OR of quoted :func:`search_terms` for the unicode61 index, or None if the text
    has none."""
    terms = search_terms(text)
    if not terms:
        return None
    return " OR ".join(quote_fts(t) for t in terms[:_MAX_WORD_TERMS])


def match_position(text: str, query: str) -> int:
    """Where in ``text`` the first query term it contains starts, as a keyword search
    reads the query (its words, its CJK runs, then their bigrams); -1 when none is there."""
    lowered = narrow(text).lower()  # one character for one: positions are the text's
    needles = fts_terms(query) + cjk_runs(query) + [t for t in cjk_query_terms(query) if len(t) > 1]
    literal = symbol_query(query)
    if literal is not None:
        needles.append(narrow(literal).lower())
    for needle in needles:
        pos = lowered.find(needle.lower())
        if pos >= 0:
            return pos
    return -1


def snippet(text: str, query: str, width: int = 160) -> str:
    """A window of ``text`` around the first query term it contains (or its start)."""
    pos = max(0, match_position(text, query))
    start = cluster_start(text, max(0, pos - width // 3))  # never half a flag or a joined emoji
    end = cluster_start(text, min(len(text), start + width))
    if end <= start:
        end = min(len(text), start + width)
    out = text[start:end].replace("\n", " ")
    return ("…" if start > 0 else "") + out + ("…" if end < len(text) else "")
