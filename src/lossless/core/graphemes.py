"""Where text may be cut for display without splitting what reads as one character: an
emoji joined by ZWJ (👨‍👩‍👧), a flag (two regional indicators: 🇨🇳), a skin tone, a
variation selector or keycap, a combining mark (e + U+0301), CR LF. Cut inside a flag
run at an odd place, every flag after the cut pairs with the wrong half: a snippet of
🇨🇳🇨🇳🇨🇳 showed 🇳🇨🇳🇨 (New Caledonia)."""

from __future__ import annotations

import unicodedata

__all__ = ["cluster_start"]

_JOINERS = frozenset("\u200d\ufe0e\ufe0f\u20e3")
_MAX_BACK = 32  # a cluster longer than this (a pile of combining marks) is cut where asked


def _regional(ch: str) -> bool:
    return "\U0001f1e6" <= ch <= "\U0001f1ff"


def _attached(ch: str, before: str) -> bool:
    """Whether ``ch`` belongs with the character before it."""
    return (ch in _JOINERS or before == "\u200d" or unicodedata.category(ch).startswith("M")
            or "\U0001f3fb" <= ch <= "\U0001f3ff" or "\U000e0020" <= ch <= "\U000e007f"
            or (before == "\r" and ch == "\n"))


def cluster_start(text: str, index: int) -> int:
    """``index`` moved back to the start of the character cluster it falls inside (itself
    when it falls between two): ``text[:cluster_start(text, i)]`` ends whole."""
    if index <= 0 or index >= len(text):
        return index
    i = index
    while i > 0 and index - i < _MAX_BACK and _attached(text[i], text[i - 1]):
        i -= 1
    if index - i >= _MAX_BACK:
        return index
    if i > 0 and _regional(text[i]) and _regional(text[i - 1]):
        run = i
        while run > 0 and _regional(text[run - 1]):
            run -= 1
        i -= (i - run) % 2  # flags pair from the start of their run
    return i
