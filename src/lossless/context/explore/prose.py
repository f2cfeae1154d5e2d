"""Plain text and Markdown: head, a sample from the middle, tail (with line numbers), and
the heading outline when it is Markdown. Also the fallback for anything unrecognised."""

from __future__ import annotations

import re
from typing import Any

from lossless.context.explore.base import (
    DETAIL,
    KEY,
    MAIN,
    SAMPLE,
    TITLE,
    Outline,
    clip,
    head_lines,
    human_bytes,
    line_at,
    tail_lines,
)

__all__ = ["explore_text", "looks_like_markdown"]

_HEADING = re.compile(r"^(#{1,6})[ \t]+([^\n]+?)[ \t#]*$|^(```|~~~)", re.MULTILINE)
# Han and kana have no spaces between words: each character counts as one (as a Chinese
# or Japanese word count does); hangul is written with spaces and counts by them
_CJK_CHAR = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_CJK_PUNCT = re.compile(r"[\u3000-\u303f\uff01-\uff0f\uff1a-\uff20]")  # 。，、「」！？： between them
_MARKDOWN = re.compile(r"^#{1,6} \S|^```|^\s*[-*+] \S|^\s*\d+\. \S|\[[^\]\n]+\]\([^)\n]+\)|^\|.*\|$|\*\*\S", re.MULTILINE)
_LONG_LINE = 2_000  # above this, samples are character ranges rather than lines


def looks_like_markdown(sample: str) -> bool:
    headings = len(re.findall(r"^#{1,6} \S", sample, re.MULTILINE))
    return headings >= 1 and len(_MARKDOWN.findall(sample)) >= 3


def _headings(text: str) -> list[tuple[int, int, str]]:
    """(line, level, title) of ATX headings outside fenced code, at most 200."""
    out: list[tuple[int, int, str]] = []
    fenced = False
    lineno, last = 1, 0
    for m in _HEADING.finditer(text):
        if m.group(3):
            fenced = not fenced
            continue
        if fenced:
            continue
        lineno += text.count("\n", last, m.start())
        last = m.start()
        out.append((lineno, len(m.group(1)), m.group(2)))
        if len(out) >= 200:
            break
    return out


def explore_text(text: str, out: Outline, stats: dict[str, Any], *, markdown: bool | None = None) -> bool:
    total = stats["lines"]
    if markdown is None:
        markdown = looks_like_markdown(text[:64_000])
    if markdown:
        stats["format"] = "markdown"
    sample = text[:1_000_000]
    wide = len(_CJK_CHAR.findall(sample))
    words = len((_CJK_PUNCT.sub(" ", _CJK_CHAR.sub(" ", sample)) if wide else sample).split()) + wide
    if len(text) > 1_000_000:
        words = int(words * len(text) / 1_000_000)
    unit = "words (a CJK character counts as one)" if wide * 2 >= words else "words"
    out.add(f"Text{' (Markdown)' if markdown else ''} · {total:,} lines · ~{words:,} {unit} · "
            f"{human_bytes(stats['bytes'])}", TITLE)
    if markdown:
        headings = _headings(text)
        if headings:
            out.add(f"headings ({len(headings)}{'+' if len(headings) >= 200 else ''}):", KEY)
            for lineno, level, title in headings:
                out.add(f"  L{lineno} {'#' * level} {clip(title, 120)}", KEY if level <= 2 else DETAIL)
    if total and len(text) / total > _LONG_LINE:
        _char_samples(text, out)
        return True
    head = head_lines(text, 8)
    out.add("head:", MAIN)
    for lineno, line in head:
        out.add(f"  L{lineno}: {clip(line, 200)}", MAIN if lineno <= 3 else DETAIL)
    if total > 20:
        mid_line, start, _ = line_at(text, len(text) // 2)
        out.add("middle:", SAMPLE)
        for i, (lineno, line) in enumerate(head_lines(text, 4, mid_line, start)):
            out.add(f"  L{lineno}: {clip(line, 200)}", DETAIL + 1 if i == 0 else SAMPLE)
    if total > len(head):
        tail = tail_lines(text, 5, total)
        out.add("tail:", MAIN)
        for lineno, line in tail:
            if lineno > len(head):
                out.add(f"  L{lineno}: {clip(line, 200)}", KEY if lineno == total else MAIN if lineno >= total - 2 else DETAIL)
    return True


def _char_samples(text: str, out: Outline) -> None:
    """Very long lines (minified or unbroken text): samples by character offset."""
    n = len(text)
    out.add(f"long lines: samples by character offset of {n:,}", KEY)
    for label, start, width, priority in (("start", 0, 600, MAIN), ("middle", n // 2, 300, SAMPLE),
                                          ("end", max(0, n - 300), 300, MAIN)):
        out.add(f"{label} [{start:,}…]: {clip(text[start:start + width], width)}", priority)
