"""Text fitting: any text abridged to a token budget, keeping its most useful sentences.

Text is cut into units (sentences, one fenced code block, one tool-call line), each unit
is scored for what a later turn is likely to need (decisions and their reasons, numbers,
dates, names, errors, questions, identifiers, constraints, action items, minus filler),
and the best units are kept verbatim, in their original order, until the budget is spent.
Same input, same output, byte for byte. The extractive summarizer builds its summaries
with it (:mod:`lossless.summarize.extractive`) and the assembler abridges messages,
summaries, recalled excerpts and file chunks with :func:`fit_text`, so neither layer
reaches into the other.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from itertools import filterfalse
from operator import attrgetter
from typing import Any

from lossless.core.tokens import TokenCounter

__all__ = ["MESSAGE_HEADER_RE", "Group", "Unit", "fit_groups", "fit_text", "group_units", "split_sections", "split_units"]

_WIDE = (
    "\u3000-\u303f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af"
    "\uf900-\ufaff\uff00-\uffef\U00020000-\U0002ffff"
)
_WIDE_RE = re.compile(f"[{_WIDE}]")
# Emoji, with what joins them into one picture: a skin tone, VS16, a keycap, a tag, a ZWJ
# and the next emoji (👨‍👩‍👧), or two regional indicators (a flag: 🇨🇳).
_EMOJI_CHARS = "\u2300-\u23ff\u2600-\u27bf\u2b00-\u2bff\U0001f000-\U0001faff"
_EMOJI = (f"[\U0001f1e6-\U0001f1ff]{{2}}|[{_EMOJI_CHARS}]"
          f"(?:[\ufe0f\u20e3\U0001f3fb-\U0001f3ff\U000e0020-\U000e007f]|\u200d[{_EMOJI_CHARS}])*")
# Atoms are the units text may be cut between: whitespace, one wide character, one emoji,
# or a run of anything else, so a path, URL or identifier is never cut in half (and a run
# of emoji, "😂😂😂…", is not one piece too big to shorten).
_ATOM_RE = re.compile(f"\\s+|[{_WIDE}]|{_EMOJI}|[^\\s{_WIDE}{_EMOJI_CHARS}]+")
# Sentence ends: 。！？； (with closing quotes), a run of .!?… before a space, !? or a
# period before CJK. Written to start with one character class (see _DATE_RE below),
# the same matches as "[。！？；][」』”’）)]*|[.!?…]+[\"'”’)\]]*(?=\s)|[!?]+(?=[W])|\.(?=[W])".
_SPLIT_RE = re.compile(
    f"[。！？；.!?…](?:(?<=[。！？；])[」』”’）)]*|(?<=[.!?…])[.!?…]*[\"'”’)\\]]*(?=\\s)|"
    f"(?<=[!?])[!?]*(?=[{_WIDE}])|(?<=\\.)(?=[{_WIDE}]))"
)
_ABBREVIATIONS = frozenset({"e.g", "i.e", "etc", "vs", "mr", "mrs", "ms", "dr", "st", "cf"})
_UNIT_WIDTH = 400  # longest unit, in width (a wide character counts 4): ~100 tokens
_CODE_LINE_WIDTH = 160
_FENCE = "```"

_HEADER_RE = re.compile(r"^\[#\d+(?:[–-]#?\d+)?(?: [^\]\n]*)?\]$")
MESSAGE_HEADER_RE = re.compile(r"^\[#\d+ \d{4}-(\d{2}-\d{2}) \d{2}:\d{2} (\S+)(?: ([^\]\n]+))?\]$")
# "Ann 05-02: " / "user 05-02: ": who said a line of a summary of summaries, and on what day
# (lossless.summarize.extractive). Not part of what the line says: the same sentence on
# another day is a duplicate, not news.
_SPEAKER_DAY_RE = re.compile(r"^[^\n:]{1,80}? \d{2}-\d{2}: ")
_TOOL_CALL_RE = re.compile(r"^→\s*tool_call\b")
_TRACE_RE = re.compile(r"^[\w.]*(?:Error|Exception|Fault)\b:?|^(?:error|fatal|panic)\b[:\[]", re.I)
_CODE_KEY_RE = re.compile(
    r"^(?:(?:async\s+def|def|class|function|fn|func|interface|struct|impl|SELECT|INSERT|"
    r"UPDATE|CREATE|ALTER)\b|\$ |>>> )"
)


_Cue = tuple[frozenset[str], tuple[str, ...], tuple[str, ...]]


def _cue(words: str, phrases: str) -> _Cue:
    """Keywords of one kind: whole lower-case words, Latin phrases, CJK substrings."""
    split = phrases.split("|")
    wide = tuple(p for p in split if _WIDE_RE.match(p))
    return frozenset(words.split()), tuple(p for p in split if p not in wide), wide


# Set and substring look-ups, not big case-insensitive regexes: those cost ~0.4 µs a
# character in ``re`` and made 20k tokens take over 100 ms.
_DECISION = _cue(
    "decide decided decision chose choose chosen agree agreed because since opted conclusion",
    "go with|going with|instead of|so that|settled on|switch to|switched to|the plan is|"
    "决定|选择|方案|因为|所以|确定|采用|決定|決め|選ん|選択|理由|ので",
)
_ERROR = _cue(
    "fail failed fails failure crash crashed crashes bug broken refused denied "
    "timeout panic fatal errno",
    "error|exception|timed out|not found|错误|失败|异常|报错|崩溃|エラー|失敗|例外",
)
_CONSTRAINT = _cue(
    "must never always deadline limit limits require required only forbidden mandatory "
    "cannot can't don't",
    "at least|at most|no later than|do not|必须|不要|不能|务必|一定|禁止|截止|限制|必ず|いけない|締め切り",
)
_ACTION = _cue(
    "todo fixme will should remind let's",
    "next step|need to|needs to|plan to|planning to|going to|follow up|action item|"
    "下一步|待办|需要|计划|打算|记得|次に|予定|やること",
)
_FIRST_PERSON = _cue("i i'm i've my we our", "我|私")
_FILLER = _cue(
    "thanks thx ok okay sure cool awesome great nice perfect hi hello hey bye lol haha absolutely",
    "thank you|got it|sounds good|great question|no problem|you're welcome|of course|"
    "happy to help|好的|谢谢|嗯|哈哈|收到|没问题|不客气|你好|好吧|ありがとう|はい|了解",
)
_DATE_WORDS = _cue(
    "january february march april june july august september october november december jan "
    "feb mar apr jun jul aug sep sept oct nov dec monday tuesday wednesday thursday friday "
    "saturday sunday yesterday today tonight tomorrow",
    "last week|next week|this week|last month|next month|last year|next year|last night|"
    "weekend|昨天|今天|明天|上周|下周|本周|星期|周末|去年|明年|昨日|明日",
)
_CUES = (_DECISION, _ERROR, _CONSTRAINT, _ACTION, _FIRST_PERSON, _FILLER, _DATE_WORDS)


def _trie(phrases: list[str]) -> str:
    """One regular expression for a set of literal phrases, their common prefixes shared
    ("go with|going to" as "go(?: with|ing to)"): ``re`` then scans for all of them at
    once in about the time of three ``in`` tests, where the phrases one by one take forty."""
    root: dict[str, dict[str, Any]] = {}
    for phrase in phrases:
        node = root
        for ch in phrase:
            node = node.setdefault(ch, {})
        node[""] = {}

    def emit(node: dict[str, dict[str, Any]]) -> str:
        alts = [re.escape(ch) + emit(sub) for ch, sub in sorted(node.items()) if ch]
        if not alts:
            return ""
        body = alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"
        return f"(?:{body})?" if "" in node else body

    first = "".join(sorted({re.escape(p[0]) for p in phrases}))
    return f"(?=[{first}]){emit(root)}"


# Whether a text has any phrase of any cue at all: rarely, so _cue_flags seldom loops.
_LATIN_PHRASE_RE = re.compile(_trie(sorted({p for cue in _CUES for p in cue[1]})))
_WIDE_PHRASE_RE = re.compile(_trie(sorted({p for cue in _CUES for p in cue[2]})))


def _cue_bits() -> dict[str, int]:
    bits: dict[str, int] = {}
    for i, cue in enumerate(_CUES):
        for word in cue[0]:
            bits[word] = bits.get(word, 0) | 1 << i
    return bits


# Each cue word's cues as bits (bit i: _CUES[i]), and the flags for every combination.
_CUE_BITS = _cue_bits()
_ANY_CUE_WORD = frozenset(_CUE_BITS)
# Per cue, one regex for its Latin phrases and one for its CJK ones (None: it has none).
_CUE_PHRASES = tuple(
    tuple(re.compile(_trie(sorted(phrases))) if phrases else None for phrases in (cue[1], cue[2])) for cue in _CUES
)
_FLAGS = tuple(tuple(bool(m >> i & 1) for i in range(len(_CUES))) for m in range(1 << len(_CUES)))


def _cue_flags(word_list: list[str], lower: str, wide: bool) -> tuple[bool, ...]:
    """For each of _CUES in order, whether the text has one of its words (in
    ``word_list``), one of its Latin phrases (a substring of ``lower``) or, when ``wide``,
    one of its CJK phrases. One set intersection finds the words; each cue's phrases are
    only looked for when one regex for all of them says some phrase is there, which is rare."""
    mask = 0
    for word in _ANY_CUE_WORD.intersection(word_list):
        mask |= _CUE_BITS[word]
    latin = _LATIN_PHRASE_RE.search(lower) is not None
    cjk = wide and _WIDE_PHRASE_RE.search(lower) is not None
    if latin or cjk:
        for i, (latin_re, cjk_re) in enumerate(_CUE_PHRASES):
            if mask >> i & 1:
                continue
            if (latin and latin_re is not None and latin_re.search(lower) is not None) or (
                cjk and cjk_re is not None and cjk_re.search(lower) is not None
            ):
                mask |= 1 << i
    return _FLAGS[mask]


# Each pattern starts with one character class, which ``re`` skips to in a tight loop;
# a lookbehind then picks the branch that character can start. The same matches as the
# plain forms (kept here) at two to three times the speed:
#   date      \d{4}-\d\d-\d\d|\d{1,2}:\d\d|\d{1,2}/\d{1,2}|\d+\s?[年月日号時]
#   quantity  (?i)[$€£¥]\s?\d|\d\s?%|\d\.\d+\.\d|\bv\d|\d\s?[元块万个次]|\d\s?(?:k|m|gb|…|usd)\b
#   name      (?<=[\s,;(\"'])[A-Z][a-z]+|@\w+
_DATE_RE = re.compile(r"\d(?:\d{3}-\d\d-\d\d|\d?:\d\d|\d?/\d{1,2}|\d*\s?[年月日号時])")
_QUANTITY_RE = re.compile(
    r"[$€£¥\dvV](?:(?<=[$€£¥])\s?\d|(?<=\d)(?:\s?%|\.\d+\.\d|\s?[元块万个次]|"
    r"\s?(?i:k|m|gb|mb|kb|ms|s|sec|min|hours?|days?|tokens?|usd)\b)|(?<!\w[vV])(?<=[vV])\d)"
)
_NAME_RE = re.compile(r"""[A-Z@](?:(?<=[\s,;("'][A-Z])[a-z]+|(?<=@)\w+)""")
_IDENT_TOKEN_RE = re.compile(
    r"://|`|/\w|\w_\w|[a-z][A-Z]|[A-Za-z]\.[A-Za-z]|^\$\w|^[A-Z0-9]+_|:\d{2,5}$|"
    r"^(?=.*\d)(?=.*[a-f])[0-9a-f]{7,}$"
)
_LATIN_WORD_RE = re.compile(r"[a-z][a-z']*")
_NUMBER_RE = re.compile(r"\d")
_WORD_RE = re.compile(f"[^\\W_]+|[{_WIDE}]+")
_ASCII_WORD_RE = re.compile("[a-z0-9]+")  # _WORD_RE on lower-cased ASCII text, faster


Unit = tuple[str, int, str, str | None]  # text, source line, kind, role


_NOT_YET: frozenset[str] = frozenset({"\x00"})  # no word holds a NUL


@dataclass(slots=True)
class _Piece:
    group: int
    pos: int
    line: int  # the source line, so fit_text can rebuild the original layout
    text: str
    score: float
    tokens: int  # its own tokens plus one for the separator before it
    rank: tuple[float, int, int]  # (-score, group, pos): best first, then in source order
    # Its _shingles, and those with a digit in them, for the duplicate test: made when the
    # piece is first offered (_select), as most pieces never are.
    words: frozenset[str] = _NOT_YET
    numbers: frozenset[str] = _NOT_YET


@dataclass(slots=True)
class Group:
    """One source's scored units under its header ("" for running text)."""

    header: str
    header_tokens: int
    pieces: list[_Piece]


def _width(text: str) -> int:
    if text.isascii():  # O(1) on a str: no wide character to look for
        return len(text)
    return len(text) + 3 * len(_WIDE_RE.findall(text))


def _chop(text: str, width: int = _UNIT_WIDTH) -> list[str]:
    """``text`` cut between atoms into pieces of at most ``width`` (one atom wider than
    that stays whole)."""
    if _width(text) <= width:
        return [text]
    out: list[str] = []
    cur, used = "", 0
    for atom in _ATOM_RE.findall(text):
        w = _width(atom)
        if cur and used + w > width:
            out.append(cur.strip())
            cur, used = "", 0
        cur += atom
        used += w
    out.append(cur.strip())
    return [s for s in out if s]


def _clip(text: str, width: int) -> str:
    pieces = _chop(text, width)
    return pieces[0] + "…" if len(pieces) > 1 else text


def _sentences(line: str) -> list[str]:
    out: list[str] = []
    start = 0
    for m in _SPLIT_RE.finditer(line):
        if line[m.start()] == ".":
            before = line[start : m.start()].rsplit(None, 1)  # [rest,] last word
            last = before[-1].lower() if before else ""
            listed = len(before) == 1 and last.isdigit()
            if last in _ABBREVIATIONS or (len(last) == 1 and last.isalpha()) or listed:
                continue
        if line[start : m.end()].strip():
            out.append(line[start : m.end()].strip())
        start = m.end()
    if line[start:].strip():
        out.append(line[start:].strip())
    return [piece for s in out for piece in _chop(s)]


def _code_unit(fence: str, body: list[str]) -> str:
    lines = [ln.strip() for ln in body if ln.strip()]
    errors = [ln for ln in lines if _TRACE_RE.match(ln)]
    keys = [ln for ln in lines if _CODE_KEY_RE.match(ln)]
    plain = [ln for ln in lines if not ln.startswith(("#", "//", "--"))]
    key = (errors[-1:] or keys[:1] or plain[:1] or [""])[0]
    lang = fence[len(_FENCE) :].strip().split(" ")[0]
    label = f"({lang + ' ' if lang else ''}code, {len(body)} lines)"
    return f"{_clip(key, _CODE_LINE_WIDTH)} {label}".lstrip()


@lru_cache(maxsize=8192)  # the same message is abridged for many different questions
def split_units(text: str) -> tuple[tuple[str, int, str], ...]:
    """(unit, source line, kind) for each unit of ``text`` in order; kind is
    ``text``, ``code`` or ``call``."""
    out: list[tuple[str, int, str]] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        stripped = lines[i].strip()
        if stripped.startswith(_FENCE):
            j = i + 1
            while j < len(lines) and not lines[j].strip().startswith(_FENCE):
                j += 1
            out.append((_code_unit(stripped, lines[i + 1 : j]), i, "code"))
            i = j + 1
            continue
        if _TOOL_CALL_RE.match(stripped):
            out.append((_clip(stripped, _UNIT_WIDTH), i, "call"))
        elif stripped:
            out.extend((s, i, "text") for s in _sentences(stripped))
        i += 1
    return tuple(out)


def _identifiers(text: str) -> int:
    """How many words of ``text`` look like identifiers (paths, URLs, snake_case,
    camelCase, hashes, ports…), counted up to 3: the most _score gives credit for."""
    n = 0
    for tok in text.split():
        if tok.isalpha() and (tok.islower() or tok.istitle()):
            continue
        core = tok.strip(".,;!?()[]\"'")
        # a plain word in punctuation, or a bare number, has nothing the pattern needs
        # (a ``:/`_$.`` or a digit beside a-f); skipping them saves most searches
        if (core.isalpha() and (core.islower() or core.istitle())) or core.isdigit():
            continue
        if _IDENT_TOKEN_RE.search(core):
            n += 1
            if n == 3:
                break
    return n


def _size(words: list[str], text: str) -> int:
    """Content size in words; two CJK characters count as one word."""
    if text.isascii():
        return len(words)
    return len(words) + len(_WIDE_RE.findall(text)) // 2


@lru_cache(maxsize=65536)  # recall abridges the same messages again and again
def _score(text: str, kind: str, role: str | None) -> float:
    """How much a later turn is likely to need this unit; filler scores below zero."""
    lower = text.lower()
    word_list = _LATIN_WORD_RE.findall(lower)
    wide = not text.isascii() and _WIDE_RE.search(text) is not None
    decision, error, constraint, action, first_person, filler, date_words = _cue_flags(word_list, lower, wide)
    # The terms are added in the same order as ever: float sums in another order can
    # differ in the last bit, and that would reorder equal-looking units.
    # A tool call says what was tried, its result and the talk around it say what was
    # learnt: calls rank low, whether or not a condensed line's prefix hides its kind.
    score = 1.0 if kind == "code" else -1.0 if kind == "call" else 0.0
    if kind != "call" and "→ tool_call" in text:
        score -= 2.5
    if decision:
        score += 3.0
    signal = error or _TRACE_RE.match(text) is not None
    if signal:
        score += 3.0
    dates = 1 if date_words else 0
    if _NUMBER_RE.search(text):
        signal = True
        score += 1.0 + min(2, len(_QUANTITY_RE.findall(text))) * 0.75
        dates += len(_DATE_RE.findall(text))
    if dates:
        score += min(2, dates) * 1.5
    names = len(_NAME_RE.findall(text))
    if names:
        score += min(2, names) * 1.0
    idents = _identifiers(text)
    if idents:
        score += idents * 1.0
    if "?" in text or "？" in text:
        score += 1.5
    if constraint:
        score += 2.0
    if action:
        score += 1.5
    if role == "user":
        score += 0.5 + (0.5 if first_person else 0.0)
    if role == "tool":
        score -= 0.5 if signal else 1.5
    if text.rstrip().endswith((":", "：")):
        score -= 1.5  # an introduction ("Here is the plan:") without what it introduces
    size = _size(word_list, text)
    if filler:
        score -= 1.5
        rest = lower
        for phrase in _FILLER[1] + _FILLER[2]:
            rest = rest.replace(phrase, " ")
        content = [w for w in _LATIN_WORD_RE.findall(rest) if w not in _FILLER[0]]
        if _size(content, rest) < 3:
            score -= 3.0
    if size < 3:
        score -= 0.5
    return score + min(size, 20) / 20


_COUNTS: dict[tuple[str, str], int] = {}


def _count(counter: TokenCounter, text: str) -> int:
    """Token count, memoised: recall abridges the same sentences on many turns."""
    key = (counter.name, text)  # a counter's name says which tokenizer it is
    n = _COUNTS.get(key)
    if n is None:
        if len(_COUNTS) > 65536:
            _COUNTS.clear()
        n = _COUNTS[key] = counter.count(text)
    return n


@lru_cache(maxsize=65536)
def _shingles(text: str) -> frozenset[str]:
    """Words, and character bigrams inside CJK runs (which have no spaces)."""
    if text.isascii():
        return frozenset(_ASCII_WORD_RE.findall(text.lower()))
    found = _WORD_RE.findall(text.lower())
    out: set[str] = set()
    for w in found:
        if _WIDE_RE.match(w):
            out.update(w[k : k + 2] for k in range(max(1, len(w) - 1)))
        else:
            out.add(w)
    return frozenset(out)


def _is_duplicate(piece: _Piece, chosen: list[_Piece], threshold: float) -> bool:
    """Token-set Jaccard against what is already chosen (exact text when no words); a
    sentence that differs only in a number is not a duplicate: the number is the news."""
    a = piece.words
    numbers = piece.numbers
    for other in chosen:
        b = other.words
        if not a or not b:
            if piece.text == other.text:
                return True
        elif not numbers <= other.numbers:
            continue
        elif min(len(a), len(b)) >= threshold * max(len(a), len(b)) and len(a & b) >= (
            threshold * len(a | b)
        ):
            return True
    return False


_rank = attrgetter("rank")  # sort key: best first, then in source order


def _select(groups: list[Group], budget: int, min_score: float, dup: float) -> list[_Piece]:
    """Best unit of every group first (best groups first), then the rest by score."""
    chosen: list[_Piece] = []
    opened: set[int] = set()
    spent = 0

    def add(p: _Piece) -> None:
        nonlocal spent
        cost = p.tokens + (0 if p.group in opened else groups[p.group].header_tokens)
        if p.numbers is _NOT_YET:
            p.words = _shingles(_SPEAKER_DAY_RE.sub("", p.text, count=1))
            p.numbers = frozenset(filterfalse(str.isalpha, p.words))  # words hold a digit
        if spent + cost <= budget and not _is_duplicate(p, chosen, dup):
            spent += cost
            opened.add(p.group)
            chosen.append(p)

    ranked = sorted((p for g in groups for p in g.pieces if p.score >= min_score), key=_rank)
    best: dict[int, _Piece] = {}
    for p in ranked:
        best.setdefault(p.group, p)
    for p in best.values():  # in rank order: dicts keep insertion order
        add(p)
    smallest = min((p.tokens for p in ranked), default=0)
    for p in ranked:
        if spent + smallest > budget:
            break
        if best[p.group] is not p:
            add(p)
    return chosen


def _render(groups: list[Group], chosen: list[_Piece], running_text: bool) -> str:
    """Summary lines under their group headers, or (``running_text``) the units joined
    as in the source: same line by a space (none between CJK), else a newline."""
    out: list[str] = []
    prev: _Piece | None = None
    for p in sorted(chosen, key=lambda p: (p.group, p.pos)):
        if running_text and prev is not None:
            wide = _WIDE_RE.match(prev.text[-1:]) or _WIDE_RE.match(p.text[:1])
            sep = "\n" if p.line != prev.line else "" if wide else " "
            # A gap says so: glued on, the pieces would read as words the writer never
            # wrote (a long sentence cut in pieces), or as sentences that followed each
            # other when others stood between them
            if p.pos != prev.pos + 1 and not prev.text.endswith("…"):
                sep = " … " if sep == " " else "…" + sep
            out.append(sep)
        elif prev is not None:
            out.append("\n")
        new_group = prev is None or p.group != prev.group
        if not running_text and new_group and groups[p.group].header:
            out.append(groups[p.group].header + "\n")
        out.append(p.text)
        prev = p
    return "".join(out)


def _shorten(text: str, max_tokens: int, counter: TokenCounter, skip_head: bool = False) -> str:
    """The longest whole-atom prefix of one unit that fits with "…", or "". With
    ``skip_head`` (text that must be shown), when not even the first atom fits (an emoji
    flag of many tags, a long URL), the atoms after it instead, marked as cut: "…😂😂…"."""
    atoms = _ATOM_RE.findall(text)
    lo, hi = 0, len(atoms)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if counter.count("".join(atoms[:mid]).rstrip() + "…") <= max_tokens:
            lo = mid
        else:
            hi = mid - 1
    kept = "".join(atoms[:lo]).rstrip()
    if kept or not skip_head:
        return kept + "…" if kept else ""
    for start in range(1, min(len(atoms), 64)):
        if not atoms[start].isspace() and counter.count(f"…{atoms[start]}…") <= max_tokens:
            rest = _shorten("".join(atoms[start:]).lstrip(), max_tokens - 1, counter)
            return "…" + rest if rest else ""
    return ""


def fit_groups(
    groups: list[Group],
    budget: int,
    counter: TokenCounter,
    strict: bool,
    running_text: bool = False,
    keep: bool = False,
) -> str:
    """Select, render, verify by a real count (dropping the weakest unit until it fits);
    when nothing fits, the best unit shortened at an atom boundary, or "". With ``keep``
    (text that must be shown) filler is shortened too when there is nothing but filler."""
    min_score = 1.0 if strict else -0.5
    chosen = _select(groups, budget, min_score, 0.6 if strict else 0.8)
    pieces = [p for g in groups for p in g.pieces if p.score >= min_score]
    if keep and not pieces:
        pieces = [p for g in groups for p in g.pieces]
    top = min(pieces, key=_rank, default=None)
    if top is not None and top not in chosen and sum(p.score for p in chosen) < top.score / 2:
        chosen = []  # what fits is worth under half the best unit: shorten that instead
    text = _render(groups, chosen, running_text)
    while chosen and counter.count(text) > budget:
        chosen.remove(min(chosen, key=lambda p: (p.score, -p.group, -p.pos)))
        text = _render(groups, chosen, running_text)
    if chosen:
        return text
    if top is None:
        return ""
    header = groups[top.group].header
    room = budget - (groups[top.group].header_tokens if header else 0)
    # A stub of two or three words under a header says less than a bare pointer does.
    short = _shorten(top.text, room, counter, skip_head=keep) if room >= (8 if header else 4) else ""
    text = f"{header}\n{short}" if header and short else short
    return text if short and counter.count(text) <= budget else ""


def split_sections(text: str) -> list[tuple[str, list[str]]]:
    """``text`` cut at its ``[#…]`` header lines: (header or "", body lines) in order."""
    out: list[tuple[str, list[str]]] = [("", [])]
    for line in text.splitlines():
        if _HEADER_RE.match(line.strip()):
            out.append((line.strip(), []))
        else:
            out[-1][1].append(line)
    return out


def group_units(g: int, header: str, units: list[Unit], counter: TokenCounter,
                focus: frozenset[str] = frozenset(), boost: float = 0.0) -> Group:
    """Group number ``g``: its ``units`` scored (lifted by ``boost``, and by ``focus`` words
    they share) and costed, under ``header``."""
    pieces = []
    # One real count for the whole group, shared out by width: a tokenizer call per
    # sentence was the biggest cost of compaction. Selection uses these estimates; the
    # rendered summary is then counted for real and trimmed until it fits (fit_groups).
    widths = [max(1, _width(u[0])) for u in units]
    total = _count(counter, "\n".join([u[0] for u in units])) if len(units) > 1 else 0
    scale = total / sum(widths) if total else 0.0
    for pos, (text, line, kind, role) in enumerate(units):
        score = _score(text, kind, role) + boost
        if focus:
            # sentences that share words with the question come first when recalling
            score += 2.5 * min(4, len(_shingles(text) & focus))
        tokens = max(1, round(widths[pos] * scale)) if scale else _count(counter, text)
        pieces.append(_Piece(g, pos, line, text, score, tokens + 1, (-score, g, pos)))
    return Group(header, counter.count(header) + 1 if header else 0, pieces)


def _focus_words(focus: str | None) -> frozenset[str]:
    if not focus:
        return frozenset()
    return frozenset(w for w in _shingles(focus) if len(w) >= 3 or not w.isascii() or w.isdigit())


def fit_text(text: str, max_tokens: int, counter: TokenCounter, focus: str | None = None,
             tokens: int | None = None, keep: bool = False) -> str:
    """``text`` abridged to at most ``max_tokens``: unchanged when it fits, else its most
    important sentences in their original order (a code block counts as one line plus a
    marker); "" when none is worth keeping (filler: "ok", "哈哈") or not even one
    shortened sentence fits. With ``keep`` (text that must be shown: the newest user
    message) a text of filler only is shortened like any other. With ``focus`` (a
    question), sentences sharing its words rank first. ``tokens``: the text's count, if known."""
    if (counter.count(text) if tokens is None else tokens) <= max_tokens:
        return text
    if max_tokens <= 0:
        return ""
    # Text with [#…] headers is a summary being squeezed into a slot: kept lines stay
    # under their own header. Anything else is abridged as running text.
    sections = split_sections(text)
    groups = []
    for g, (header, lines) in enumerate(sections):
        m = MESSAGE_HEADER_RE.match(header)
        role = m.group(2) if m else None
        units = [(u, ln, kind, role) for u, ln, kind in split_units("\n".join(lines))]
        groups.append(group_units(g, header, units, counter, _focus_words(focus)))
    return fit_groups(groups, max_tokens, counter, False, running_text=len(sections) == 1, keep=keep)
