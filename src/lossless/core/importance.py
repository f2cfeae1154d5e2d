"""How much a message matters, with the reasons: errors, decisions, constraints,
corrections, memory requests and preferences score high; chit-chat, near-empty messages
and repeats score low.

    >>> imp = score("Decision: we must not deploy on Fridays.", role="user")
    >>> imp.value, [r.label for r in imp.reasons]
    (0.82, ['decision', 'constraint'])

How a value is made. A message starts at ``base`` (0.2). Each matched category with
weight ``w`` closes that share of the gap to 1 (``v = 1 - (1 - v) * (1 - w)``), so more
evidence always raises the value, never past 1, and the order of categories does not
matter. Penalties come after and remove their share of what is left
(``v = v * (1 - p)``); a :class:`Reason` shows a penalty as a negative weight. A category
counts once however often it matches; its evidence is the first match in context.

The keyword lists are English and Chinese, matched on lower-cased text: Latin phrases as
whole words, Chinese ones anywhere. Corrections and preferences count only for user
messages (or when the role is unknown): an assistant's "actually" is not a correction.

Speed: scoring runs on every message of long conversations. Each Latin phrase is filed
under its longest word; a message is split into words once, one set intersection finds
which of those words it has, and only their phrases' regexes run, each starting with a
literal so the regex engine scans for it like a substring. Chinese phrases run only on
non-ASCII text, and the identifier and error patterns start with a literal or a digit.
``bench/bench_importance.py`` measures the cost per message against bare references.
"""

from __future__ import annotations

import hashlib
import re
import string
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cache
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from lossless.core.errors import ValidationError
from lossless.core.graphemes import cluster_start

if TYPE_CHECKING:
    from lossless.core.types import Message

__all__ = [
    "DEFAULT_CATEGORIES",
    "LABELS",
    "Category",
    "DuplicateTracker",
    "Importance",
    "KeywordScorer",
    "Reason",
    "Scorer",
    "score",
    "score_message",
]


class Reason(NamedTuple):
    """One thing that moved a score: what (``label``), by how much (``weight``: positive
    raises, negative is a penalty) and the text that triggered it (``evidence``)."""

    label: str
    weight: float
    evidence: str


# What each built-in label means, for explanations; a custom label explains itself.
LABELS: dict[str, str] = {
    "error": "error or failure",
    "decision": "decision or choice",
    "constraint": "constraint or requirement",
    "correction": "user correction",
    "memory": "asks to remember",
    "preference": "stated preference",
    "identifier": "numbers, identifiers, paths or URLs",
    "tool_call": "makes a tool call",
    "tool_result": "tool result",
    "chitchat": "chit-chat",
    "short": "very short message",
    "duplicate": "duplicate of an earlier message",
}


@dataclass(frozen=True, slots=True)
class Importance:
    """A message's importance: ``value`` in [0, 1] and the reasons behind it, in the
    order they were applied (categories, then tool signals, then penalties)."""

    value: float
    reasons: tuple[Reason, ...] = ()

    def __post_init__(self) -> None:
        if not 0.0 <= self.value <= 1.0:
            raise ValidationError(f"importance must be in [0, 1], got {self.value!r}")

    def penalised(self, label: str, penalty: float, evidence: str) -> Importance:
        """This importance with a penalty applied: ``penalty`` (in [0, 1]) of the value
        is removed, and the reason recorded."""
        if not 0.0 <= penalty <= 1.0:
            raise ValidationError(f"penalty must be in [0, 1], got {penalty!r}")
        reason = Reason(label, -penalty, evidence)
        return Importance(round(self.value * (1.0 - penalty), 4), (*self.reasons, reason))

    def explain(self) -> str:
        """The score and one line per reason, e.g. ``+0.70 error or failure: “…”``."""
        if not self.reasons:
            return f"importance {self.value:.2f}: nothing notable (baseline)"
        lines = [f"importance {self.value:.2f}:"]
        for label, weight, evidence in self.reasons:
            sign = "+" if weight >= 0 else "−"
            what = LABELS.get(label, label)
            lines.append(f"  {sign}{abs(weight):.2f} {what}: “{evidence}”" if evidence else f"  {sign}{abs(weight):.2f} {what}")
        return "\n".join(lines)


class Scorer(Protocol):
    """Anything that scores one message's text."""

    def score(
        self, text: str, *, role: str | None = None, has_tool_calls: bool = False, is_tool_result: bool = False
    ) -> Importance: ...


@dataclass(frozen=True, slots=True)
class Category:
    """A kind of evidence and the words that show it.

    ``phrases`` are literal and case-insensitive: Latin ones match whole words, ``'``
    matches ’ or nothing, a space any whitespace; Chinese ones match anywhere.
    ``patterns`` are regular expressions run on the lower-cased text, in order, when no
    phrase matched; start each with a literal character where you can, which lets the
    regex engine skip ahead. ``hints``: lower-case substrings one of which every pattern
    match contains; when given, the patterns run only on text holding one. ``roles``:
    only messages from these roles count (an unknown role always counts).
    ``negations``: a phrase right after one of these words does not count ("no errors",
    "0 failed").
    """

    label: str
    weight: float
    phrases: tuple[str, ...] = ()
    patterns: tuple[str, ...] = ()
    hints: tuple[str, ...] = ()
    roles: frozenset[str] | None = None
    negations: tuple[str, ...] = ()


_ERROR_PHRASES = (
    "error", "errors", "exception", "exceptions", "failed", "failure", "failures", "failing", "fatal",
    "panic", "panicked", "crash", "crashed", "crashes", "segfault", "segmentation fault", "traceback",
    "stack trace", "timed out", "timeout", "connection refused", "permission denied", "not found",
    "broken", "regression", "bug", "bad gateway", "service unavailable", "gateway timeout",
    "enoent", "eacces", "econnrefused", "econnreset", "epipe", "etimedout", "eaddrinuse",
    "错误", "异常", "失败", "报错", "崩溃", "超时", "出错", "故障",
)
# each starts with a literal, so a search skips ahead to where it could match
_ERROR_PATTERNS = (
    # ValueError, java.io.IOException, lower-cased; two letters before "error" so that
    # "terror" is not one
    r"error(?<=[a-z0-9_]{2}error)|exception(?<=[a-z0-9_]exception)",
    # the ends are "not a digit", not \b: "返回了status 500。" and "exit code 1了" count too
    r"(?:http/\d(?:\.\d)?|status(?: code)?|returned|responded with)[\s:=]*5\d\d(?!\d)",
    r"exit(?:ed)?(?: with)?(?: code| status)[\s:=]*[1-9]\d*(?!\d)|non-?zero exit",
)
_ERROR_HINTS = ("error", "exception", "http", "status", "returned", "responded", "exit")
_IDENTIFIER_PATTERNS = (
    r"\d\d|\d[.:,]\d",  # 5432, 2.17.1, 10:30; no \b, so "端口5432" counts too
    r"https?://\S+|www\.\S+",
    r"/[\w.-]+/",  # /etc/hosts, src/app/mod.py
    r"\.(?:py|js|ts|tsx|jsx|rs|go|java|kt|c|h|cc|cpp|hpp|rb|php|md|json|ya?ml|toml|ini|cfg"
    r"|sql|sh|txt|csv|html|css|lock)(?![a-z0-9_])",  # not \b: "main.py文件" holds a file name
    r"@[\w-]+\.[a-z]",  # e-mail
    r"`[^`\n]{2,80}`",  # inline code
    r"_[a-z0-9_]*\d",  # err_4242, msg_01h…
)

DEFAULT_CATEGORIES: tuple[Category, ...] = (
    Category("error", 0.70, _ERROR_PHRASES, _ERROR_PATTERNS, _ERROR_HINTS,
             negations=("no", "0", "zero", "without", "never")),
    Category("decision", 0.55, (
        "decided", "decide", "decision", "decisions", "chose", "chosen", "we choose", "opted", "opt for",
        "settled on", "settle on", "let's go with", "we'll go with", "going with", "agreed on", "agreed to",
        "we'll use", "we will use", "conclusion",
        "决定", "选择", "方案", "确定", "采用", "选用", "定下", "就用", "结论", "就这么定", "定了",
    )),
    Category("constraint", 0.50, (
        "must", "must not", "mustn't", "never", "always", "deadline", "due by", "budget", "at most",
        "at least", "no more than", "no later than", "not exceed", "limited to", "required", "requirement",
        "mandatory", "only use", "under no circumstances", "forbidden", "not allowed",
        "必须", "不能", "禁止", "限制", "截止", "不得", "务必", "不允许", "最多", "至少", "上限", "预算",
        "期限", "不超过", "永远不要", "绝对不要", "千万不要", "千万别", "绝不", "决不", "一定要", "一律",
        "不许", "不可以", "只能用",
    )),
    Category("correction", 0.55, (
        "no,", "no.", "no!", "nope", "actually", "that's wrong", "that is wrong", "you're wrong",
        "that's not right", "that's incorrect", "not what i meant", "not what i asked", "i meant",
        "instead", "you misunderstood", "scratch that", "correction",
        "不对", "错了", "应该是", "其实", "不是这样", "搞错", "更正", "纠正",
    ), roles=frozenset({"user"})),
    Category("memory", 0.60, (
        "remember", "don't forget", "do not forget", "keep in mind", "note that", "make a note",
        "for future reference", "from now on", "going forward",
        "记住", "记得", "别忘", "不要忘", "以后都", "今后", "从现在开始", "记着", "请注意", "以后请",
    )),
    Category("preference", 0.45, (
        "i prefer", "i'd prefer", "i would prefer", "i like", "i love", "i hate", "i dislike",
        "i don't like", "i'd rather", "i would rather", "my preference", "my favorite", "my favourite",
        "喜欢", "偏好", "更喜欢", "倾向于", "习惯用", "讨厌",
    ), roles=frozenset({"user"})),
    Category("identifier", 0.15, (), _IDENTIFIER_PATTERNS),
)

# Acknowledgements and greetings. Bare assent ("yes", "no", "sure", "对") is left out:
# it may answer a question that mattered, so it only counts as short.
_CHITCHAT_WORDS = (
    "thanks", "thank you", "thank u", "thx", "ty", "tysm", "ok", "okay", "okey", "k", "kk", "cool", "nice",
    "great", "awesome", "perfect", "lol", "lmao", "rofl", "hehe", "hi", "hello", "hey", "heya", "yo", "bye",
    "goodbye", "cheers", "np", "no problem", "no worries", "got it", "gotcha", "sounds good", "good",
    "great job", "nice one", "you're welcome", "welcome", "alright", "all right", "mhm", "hmm", "wow",
    "amazing", "love it", "good morning", "morning", "good night", "gn", "see you", "see ya", "ttyl",
    "continue", "go ahead", "go on", "carry on", "please",
)
_CHITCHAT_CJK = (
    "谢谢", "多谢", "感谢", "好的", "好滴", "好吧", "好", "行", "嗯", "嘿嘿", "呵呵", "你好", "您好",
    "再见", "拜拜", "收到", "明白", "了解", "没问题", "辛苦了", "继续", "太棒了", "棒", "厉害", "早上好",
    "晚安", "啊", "哦", "噢", "呀", "吧", "啦", "呢", "了",
)
_CHITCHAT = re.compile(
    r"\b(?:" + "|".join(re.escape(w).replace(r"\ ", r"\s+") for w in sorted(_CHITCHAT_WORDS, key=len, reverse=True))
    + r"|ha(?:ha)+|a?ha)\b|哈+|"
    + "|".join(sorted(_CHITCHAT_CJK, key=len, reverse=True))
)
_WORDISH = re.compile(r"\w")
_EMOJI = re.compile(r"[\u2600-\u27bf\U0001f300-\U0001faff]")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")
_TOOL_CALL_NAME = re.compile(r"tool_call (\S+?)\(")
_CHITCHAT_MAX_CHARS = 80


_WORD_CHARS = "a-z0-9_"
_IS_WORD = re.compile(f"[{_WORD_CHARS}]")
_LATIN_WORD = re.compile(f"[{_WORD_CHARS}]+")
# ASCII punctuation and control characters become spaces, so split() yields the words
_SEPARATORS = str.maketrans(
    {c: " " for c in string.punctuation.replace("_", "")} | {chr(i): " " for i in range(32)}
)


def _words(lower: str) -> list[str]:
    """The Latin words of lower-cased text, as runs of ``[a-z0-9_]``."""
    if lower.isascii():  # the same split, about twice as fast
        return lower.translate(_SEPARATORS).split()
    return _LATIN_WORD.findall(lower)


def _phrase_regex(phrase: str, negations: Sequence[str]) -> str:
    """One Latin phrase as a regex that begins with its first word as a literal, so the
    regex engine finds candidates with a fast substring scan. The start-of-word check is
    therefore a lookbehind placed after that word. Boundaries are ASCII word characters,
    not ``\\b``, so a word touching Chinese ("这个error") still counts."""
    p = phrase.lower()
    head = _LATIN_WORD.match(p)
    first = head.group() if head else ""
    out = re.escape(first)
    if first:
        out += f"(?<![{_WORD_CHARS}]{out})"
        out += "".join(rf"(?<!\b{re.escape(n.lower())} {re.escape(first)})" for n in negations)
    out += re.escape(p[len(first):]).replace(r"\ ", r"\s+").replace("'", "['’]?")
    if _IS_WORD.match(p[-1]):
        out += f"(?![{_WORD_CHARS}])"
    return out


# Words too common to file a phrase under: a phrase is filed under its longest other word.
_COMMON = frozenset({
    "a", "an", "and", "at", "by", "d", "do", "dont", "for", "from", "go", "i", "in", "is", "it", "lets", "ll",
    "me", "my", "of", "on", "re", "s", "t", "that", "thats", "the", "this", "to", "we", "well", "will",
    "with", "you",
})


def _needles(phrase: str) -> set[str]:
    """Words one of which any match of ``phrase`` contains: its longest uncommon word,
    written with and without its apostrophes ("mustn't" matches "mustnt" too)."""
    p = phrase.lower()
    return {
        max(words, key=lambda w: (w not in _COMMON, len(w)))
        for words in (_words(p), _words(p.replace("'", "")))
        if words
    }


@dataclass(frozen=True, slots=True)
class _Compiled:
    category: Category
    # needle word -> the phrases (as regexes) that can match only where it is a word
    phrases: dict[str, tuple[re.Pattern[str], ...]]
    cjk: re.Pattern[str] | None
    hints: tuple[str, ...]
    patterns: tuple[re.Pattern[str], ...]

    def search(self, lower: str, candidates: Sequence[re.Pattern[str]]) -> re.Match[str] | None:
        """The first match in ``lower`` (the longest where two start together) of the
        ``candidates`` (phrases whose needle word the text has), the Chinese phrases or
        the patterns; None if nothing matches."""
        best: re.Match[str] | None = None
        for regex in candidates:
            m = regex.search(lower)
            if m is not None and (best is None or (m.start(), -m.end()) < (best.start(), -best.end())):
                best = m
        if best is None and self.cjk is not None and not lower.isascii():
            best = self.cjk.search(lower)
        if best is None and self.patterns and (not self.hints or any(map(lower.__contains__, self.hints))):
            for regex in self.patterns:
                best = regex.search(lower)
                if best is not None:
                    break
        return best


def _compile(category: Category) -> _Compiled:
    if any(not p.strip() for p in category.phrases):
        raise ValidationError(f"category {category.label!r} has an empty phrase")
    if not category.phrases and not category.patterns:
        raise ValidationError(f"category {category.label!r} has no phrases or patterns")
    latin = [p.strip() for p in category.phrases if _words(p.lower())]
    cjk = sorted((p.strip().lower() for p in category.phrases if not _words(p.lower())), key=len, reverse=True)
    phrases: dict[str, list[re.Pattern[str]]] = {}
    try:
        for phrase in latin:
            regex = re.compile(_phrase_regex(phrase, category.negations))
            for needle in _needles(phrase):
                phrases.setdefault(needle, []).append(regex)
        cjk_re = re.compile("|".join(map(re.escape, cjk))) if cjk else None
        patterns = tuple(re.compile(p) for p in category.patterns)
    except re.error as exc:
        raise ValidationError(f"category {category.label!r} has a bad pattern: {exc}") from exc
    hints = tuple(h.lower() for h in category.hints)
    return _Compiled(category, {k: tuple(v) for k, v in phrases.items()}, cjk_re, hints, patterns)


def _snippet(text: str, start: int, end: int, width: int = 24) -> str:
    # never half a flag or a joined emoji at either end
    left, right = cluster_start(text, max(0, start - width)), cluster_start(text, min(len(text), end + width))
    body = " ".join(text[left:right].split())
    return ("…" if left else "") + body + ("…" if right < len(text) else "")


def _unit(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
        raise ValidationError(f"{name} must be a number in [0, 1], got {value!r}")
    return float(value)


class KeywordScorer:
    """The default :class:`Scorer`: keyword and pattern categories, English and Chinese.

    ``weights`` changes a category's weight by label (including ``tool_call``,
    ``tool_result``, ``chitchat`` and ``short``); ``extra_keywords`` adds phrases to a
    category; ``categories`` replaces the whole set. Unknown labels are an error.
    """

    def __init__(
        self,
        categories: Sequence[Category] = DEFAULT_CATEGORIES,
        *,
        weights: Mapping[str, float] | None = None,
        extra_keywords: Mapping[str, Iterable[str]] | None = None,
        base: float = 0.2,
        tool_call: float = 0.35,
        tool_result: float = 0.30,
        chitchat: float = 0.60,
        short: float = 0.30,
        short_tokens: int = 5,
    ) -> None:
        self.base = _unit("base", base)
        fixed = {"tool_call": tool_call, "tool_result": tool_result, "chitchat": chitchat, "short": short}
        labels = [c.label for c in categories]
        if len(set(labels)) != len(labels):
            raise ValidationError(f"category labels must be unique, got {labels}")
        known = set(labels) | set(fixed)
        for given in (weights or {}, extra_keywords or {}):
            unknown = sorted(set(given) - known)
            if unknown:
                raise ValidationError(f"unknown importance label(s) {unknown}; known: {sorted(known)}")
        weights = dict(weights or {})
        extra = {label: (words,) if isinstance(words, str) else tuple(words)
                 for label, words in (extra_keywords or {}).items()}
        for label in extra:
            if label in fixed:
                raise ValidationError(f"{label!r} has no keywords to extend")
        cats: list[_Compiled] = []
        for given_cat in categories:
            label = given_cat.label
            cat = replace(given_cat, weight=_unit(f"weight of {label!r}", weights.get(label, given_cat.weight)),
                          phrases=given_cat.phrases + extra.get(label, ()))
            cats.append(_compile(cat))
        self._categories = tuple(cats)
        # needle word -> (category index, phrase regex) for every phrase filed under it
        index: dict[str, list[tuple[int, re.Pattern[str]]]] = {}
        for i, compiled in enumerate(cats):
            for word, regexes in compiled.phrases.items():
                index.setdefault(word, []).extend((i, regex) for regex in regexes)
        self._needles = {word: tuple(pairs) for word, pairs in index.items()}
        self._all_needles = frozenset(index)
        self.tool_call = _unit("tool_call", weights.get("tool_call", fixed["tool_call"]))
        self.tool_result = _unit("tool_result", weights.get("tool_result", fixed["tool_result"]))
        self.chitchat = _unit("chitchat", weights.get("chitchat", fixed["chitchat"]))
        self.short = _unit("short", weights.get("short", fixed["short"]))
        if isinstance(short_tokens, bool) or not isinstance(short_tokens, int) or short_tokens < 0:
            raise ValidationError(f"short_tokens must be a non-negative integer, got {short_tokens!r}")
        self.short_tokens = short_tokens

    @property
    def categories(self) -> tuple[Category, ...]:
        return tuple(c.category for c in self._categories)

    def score(
        self, text: str, *, role: str | None = None, has_tool_calls: bool = False, is_tool_result: bool = False
    ) -> Importance:
        if not isinstance(text, str):
            raise ValidationError(f"text must be a string, got {type(text).__name__}")
        lower = text.lower()
        if len(lower) != len(text):
            # a few characters lower to two (İ → i̇); keep offsets aligned with the text
            lower = "".join(ch.lower()[:1] for ch in text)
        reasons: list[Reason] = []
        value = self.base
        gap = 1.0 - value
        # one set intersection finds the needle words present; phrase regexes run only
        # for those, so most of the keyword lists cost nothing on most messages
        candidates: dict[int, list[re.Pattern[str]]] = {}
        for word in self._all_needles.intersection(_words(lower)):
            for i, regex in self._needles[word]:
                candidates.setdefault(i, []).append(regex)
        for i, compiled in enumerate(self._categories):
            cat = compiled.category
            if cat.roles is not None and role is not None and role not in cat.roles:
                continue
            m = compiled.search(lower, candidates.get(i, ()))
            if m is not None:
                reasons.append(Reason(cat.label, cat.weight, _snippet(text, m.start(), m.end())))
                gap *= 1.0 - cat.weight
        if has_tool_calls:
            found = _TOOL_CALL_NAME.search(text)
            reasons.append(Reason("tool_call", self.tool_call, found.group(1) if found else ""))
            gap *= 1.0 - self.tool_call
        if is_tool_result or role == "tool":
            reasons.append(Reason("tool_result", self.tool_result, _snippet(text, 0, 0, 40)))
            gap *= 1.0 - self.tool_result
        value = 1.0 - gap
        if len(text) <= _CHITCHAT_MAX_CHARS:
            stripped = " ".join(text.split())
            rest = _CHITCHAT.sub("", lower)
            # nothing but greetings, thanks, laughter and emoji ("ok thanks!", "好的👍")
            if stripped and not _WORDISH.search(rest) and (rest != lower or _EMOJI.search(lower)):
                reasons.append(Reason("chitchat", -self.chitchat, stripped))
                value *= 1.0 - self.chitchat
            elif not reasons and self._rough_tokens(stripped) < self.short_tokens:
                reasons.append(Reason("short", -self.short, stripped))
                value *= 1.0 - self.short
        return Importance(min(1.0, max(0.0, round(value, 4))), tuple(reasons))

    @staticmethod
    def _rough_tokens(text: str) -> int:
        # a CJK character is about a token, Latin text about four characters a token
        cjk = len(_CJK.findall(text))
        return cjk + (len(text) - cjk + 3) // 4


class DuplicateTracker:
    """Remembers what it has seen (as hashes of normalised text) to spot repeats.

    Text is compared lower-cased with whitespace collapsed. Texts shorter than
    ``min_chars`` after that are never duplicates: two "yes" answers to two questions
    are two answers. At most ``max_entries`` hashes are kept, oldest dropped first.
    ``penalty`` is the share of the score a repeat loses.
    """

    def __init__(self, *, min_chars: int = 16, max_entries: int = 100_000, penalty: float = 0.85) -> None:
        for name, value in (("min_chars", min_chars), ("max_entries", max_entries)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValidationError(f"{name} must be a positive integer, got {value!r}")
        self.min_chars = min_chars
        self.max_entries = max_entries
        self.penalty = _unit("penalty", penalty)
        self._seen: dict[bytes, None] = {}  # insertion-ordered, so the oldest is first

    def _digest(self, text: str) -> bytes | None:
        norm = " ".join(text.lower().split())
        if len(norm) < self.min_chars:
            return None
        return hashlib.blake2b(norm.encode("utf-8", "surrogatepass"), digest_size=12).digest()

    def observe(self, text: str) -> bool:
        """True if ``text`` repeats an earlier one; otherwise remember it and say False."""
        digest = self._digest(text)
        if digest is None:
            return False
        if digest in self._seen:
            return True
        self._seen[digest] = None
        if len(self._seen) > self.max_entries:
            del self._seen[next(iter(self._seen))]
        return False

    def __contains__(self, text: object) -> bool:
        return isinstance(text, str) and (digest := self._digest(text)) is not None and digest in self._seen

    def __len__(self) -> int:
        return len(self._seen)

    def clear(self) -> None:
        self._seen.clear()


@cache
def _default_scorer() -> KeywordScorer:
    return KeywordScorer()


def _mark_duplicate(importance: Importance, text: str, seen: DuplicateTracker | None) -> Importance:
    if seen is None or not seen.observe(text):
        return importance
    return importance.penalised("duplicate", seen.penalty, _snippet(text, 0, 0, 40))


def score(
    text: str,
    *,
    role: str | None = None,
    has_tool_calls: bool = False,
    is_tool_result: bool = False,
    seen: DuplicateTracker | None = None,
) -> Importance:
    """Score ``text`` with the default :class:`KeywordScorer`; with ``seen``, a repeat of
    an earlier text scored with the same tracker loses ``seen.penalty`` of its value."""
    result = _default_scorer().score(text, role=role, has_tool_calls=has_tool_calls, is_tool_result=is_tool_result)
    return _mark_duplicate(result, text, seen)


def _parts_of_kind(content: Any, kind: str) -> bool:
    return isinstance(content, list) and any(isinstance(p, Mapping) and p.get("type") == kind for p in content)


def score_message(
    msg: Message, scorer: Scorer | None = None, *, seen: DuplicateTracker | None = None
) -> Importance:
    """Score a stored message: its text (tool calls spelled out), its role, whether it
    calls tools (OpenAI ``tool_calls`` or Anthropic ``tool_use`` parts) or answers one."""
    from lossless.core.render import message_text

    text = message_text(msg)
    result = (scorer or _default_scorer()).score(
        text,
        role=msg.role,
        has_tool_calls=bool(msg.tool_calls) or _parts_of_kind(msg.content, "tool_use"),
        is_tool_result=msg.role == "tool" or msg.tool_call_id is not None or _parts_of_kind(msg.content, "tool_result"),
    )
    return _mark_duplicate(result, text, seen)
