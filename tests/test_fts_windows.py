"""The keyword normaliser scans a long text in windows cut at whitespace (one regular-expression
scan holds the interpreter's lock: over a pasted 8 MB message it stalled every other thread of
the server for most of a second, issue 30). What it finds must be what one scan finds."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from lossless.store import fts

PIECES = ["follow-up", "Caroline's", "James'", "10:30am", "v1.2", "1,000", "5km", "用Python写", "東京タワー", "plain",
          "x", "a.b.c", "don’t", "_under_", "ＡＢＣ", "3", "-", ",", "'", "中文", "e.g."]
SPACES = [" ", "  ", "\n", "\t", " \r\n "]


def _one_scan(text: str, split_only: bool) -> list[tuple[list[str], bool, int, int]]:
    """compounds() as it was: one scan over the whole text."""
    out = []
    pattern = fts._SPLIT if split_only and fts._CJK_RUN.search(text) is None else fts._COMPOUND
    for m in pattern.finditer(text):
        parts = fts._parts(m.group(0))
        if parts:
            start, end = m.span()
            touches = bool((start and fts._CJK_RUN.match(text, start - 1)) or fts._CJK_RUN.match(text, end))
            out.append((parts, touches, start, end))
    return out


def _grams_in_one_scan(text: str) -> list[str]:
    out: list[str] = []
    for run in fts._CJK_WORD.findall(text):
        out += [run[i : i + 2] for i in range(len(run) - 1)] + [run[-1]]
    return out


@settings(max_examples=60)
@given(before=st.integers(min_value=0, max_value=40), pieces=st.lists(st.sampled_from(PIECES), min_size=1, max_size=30),
       spaces=st.lists(st.sampled_from(SPACES), min_size=1, max_size=30), split_only=st.booleans())
def test_a_long_text_scanned_in_windows_gives_what_one_scan_gives(before: int, pieces: list[str], spaces: list[str],
                                                                  split_only: bool) -> None:
    # the random part straddles the first window's end, wherever its whitespace falls
    middle = "".join(p + spaces[i % len(spaces)] for i, p in enumerate(pieces))
    text = "word " * ((fts._SCAN_CHARS - before) // 5) + middle + " tail-end" * 20
    assert len(text) > fts._SCAN_CHARS
    assert fts.compounds(text, split_only) == _one_scan(text, split_only)
    assert fts.has_cjk(text) == (fts._CJK_WORD.search(text) is not None)
    assert fts.cjk_index_line(text) == " ".join(_grams_in_one_scan(text))


def test_a_long_text_without_whitespace_is_one_window() -> None:
    text = "follow-up" * (fts._SCAN_CHARS // 4)
    assert fts.compounds(text, split_only=True) == _one_scan(text, split_only=True)

