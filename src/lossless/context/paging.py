"""Paging through one large text: exact slices that concatenate back to the original.

Offsets count characters (Python ``str`` indices, i.e. Unicode code points), so a cut
never falls inside a UTF-8 sequence or a surrogate pair, and ``"".join`` of every page
is the stored text, byte for byte. Pages come in two forms: fixed character pages
(``page_chars`` each, numbered from 1, so page N is at a known offset), and token-capped
slices that end where the token budget does, on a line break when one is near.
"""

from __future__ import annotations

import hashlib
import unicodedata

from lossless.core.tokens import TokenCounter

__all__ = ["DEFAULT_PAGE_TOKENS", "page_chars", "page_count", "text_sha256", "token_slice"]

DEFAULT_PAGE_TOKENS = 4_000
_MIN_PAGE_CHARS = 1_000
# A slice is searched for within this many characters a token: no cl100k token is
# anywhere near that long except runs of one repeated character.
_MAX_CHARS_PER_TOKEN = 32
# Characters a cut should not fall before: they attach to what precedes them.
_JOINERS = frozenset("\u200d\ufe0e\ufe0f\u20e3")


def text_sha256(text: str) -> str:
    """Hex sha256 of the text's UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def page_chars(total_chars: int, total_tokens: int, page_tokens: int = DEFAULT_PAGE_TOKENS) -> int:
    """Characters per page so that an average page is about ``page_tokens`` tokens,
    from the text's own density (dense CJK text gets shorter pages than English).
    Rounded down to hundreds; at least 1,000."""
    if total_tokens <= 0 or total_chars <= 0:
        return max(_MIN_PAGE_CHARS, total_chars)
    size = total_chars * page_tokens // total_tokens
    return max(_MIN_PAGE_CHARS, size - size % 100)


def page_count(total_chars: int, chars_per_page: int) -> int:
    """How many pages of ``chars_per_page`` characters hold the text (1 for empty text)."""
    return max(1, -(-total_chars // chars_per_page))


def _nice_end(text: str, start: int, end: int) -> int:
    """Move a cut back (a little) so it ends a line, or at least does not split a CRLF,
    a combining mark or a joined emoji from what it belongs to."""
    if end >= len(text) or end <= start + 1:
        return end
    newline = text.rfind("\n", start + (end - start) * 4 // 5, end)
    if newline >= 0:
        return newline + 1
    for _ in range(16):
        if end <= start + 1:
            break
        ch, before = text[end], text[end - 1]
        if (ch in _JOINERS or before == "\u200d" or unicodedata.combining(ch)
                or 0x1F3FB <= ord(ch) <= 0x1F3FF or (before == "\r" and ch == "\n")):
            end -= 1
            continue
        break
    return end


def token_slice(text: str, start: int, max_tokens: int, counter: TokenCounter) -> tuple[int, int]:
    """``(end, tokens)``: ``text[start:end]`` is about the longest slice from ``start``
    within ``max_tokens`` by ``counter`` (found by interpolation and bisection, each
    candidate counted), preferably ending a line. Always at least one character while
    any remain, so paging makes progress even with a tiny budget."""
    remaining = len(text) - start
    if remaining <= 0:
        return start, 0
    cap = min(remaining, max_tokens * _MAX_CHARS_PER_TOKEN)

    def tokens(n: int) -> int:
        return counter.count(text[start:start + n])

    lo, lo_tokens = 0, 0
    hi, hi_tokens = -1, 0  # -1: no length known to exceed yet
    n = min(cap, max_tokens * 4)
    while True:  # grow until over the budget or at the cap
        t = tokens(n)
        if t > max_tokens:
            hi, hi_tokens = n, t
            break
        lo, lo_tokens = n, t
        if n >= cap:
            break
        n = min(cap, max(n + 1, int(n * max_tokens / max(t, 1) * 1.05)))
    step = 0
    while hi > 0 and hi - lo > max(1, lo // 200):
        step += 1
        if step % 2:  # interpolate; bisect every other step so it always converges
            guess = lo + (hi - lo) * (max_tokens - lo_tokens) // max(1, hi_tokens - lo_tokens)
        else:
            guess = (lo + hi) // 2
        mid = min(hi - 1, max(lo + 1, guess))
        t = tokens(mid)
        if t <= max_tokens:
            lo, lo_tokens = mid, t
        else:
            hi, hi_tokens = mid, t
    if lo == 0:  # not even one character fits: take one anyway
        return start + 1, tokens(1)
    end = _nice_end(text, start, start + lo)
    if end != start + lo:
        t = counter.count(text[start:end])
        if t <= max_tokens:
            return end, t
    return start + lo, lo_tokens
