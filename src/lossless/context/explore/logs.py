"""Logs: line count, time range, error / warning / exception lines (first distinct ones
with line numbers), head and tail. One regex pass per category over the whole text, so
the counts are exact at any size; nothing is split into a list of lines."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from lossless.context.explore.base import (
    DETAIL,
    KEY,
    MAIN,
    TITLE,
    Outline,
    clip,
    head_lines,
    human_bytes,
    tail_lines,
)

__all__ = ["explore_log", "looks_like_log"]

_TIMESTAMP = re.compile(
    r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?"  # ISO 8601
    r"|[A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2}"  # syslog: Mar  1 09:00:00
    r"|\d{2}/[A-Z][a-z]{2}/\d{4}:\d{2}:\d{2}:\d{2}(?: [+-]\d{4})?"  # common log format
    r"|\b\d{2}:\d{2}:\d{2}(?:[.,]\d+)?\b"  # time of day only
)
_LEVEL = re.compile(r"\b(TRACE|DEBUG|INFO|NOTICE|WARN|WARNING|ERROR|ERR|FATAL|CRITICAL|SEVERE|PANIC)\b"
                    r"|level=(\w+)|\"level\":\s*\"(\w+)\"", re.IGNORECASE)
# Keywords, matched case-sensitively where case carries the meaning ("ERROR", not
# "error-free"). No leading \b: with one, re cannot skip ahead to the keyword's first
# letters and a 10 MB scan is 5-10x slower; the left boundary is checked in _accept.
_ERROR = re.compile(r"(?:ERROR|ERR|FATAL|CRITICAL|CRIT|SEVERE|PANIC|EMERG)\b|\[(?:error|crit|alert|emerg|fatal)\]"
                    r"|level=(?:error|fatal|panic)\b|\"level\":\s*\"(?:error|fatal|panic)\"")
_WARN = re.compile(r"(?:WARN|WARNING)\b|\[warn(?:ing)?\]|level=warn(?:ing)?\b|\"level\":\s*\"warn(?:ing)?\"")
_EXCEPTION = re.compile(r"(?:Exception|Error)\b|Traceback \(most recent call last\)|panic:")


def _is_word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def _accept(text: str, start: int, end: int) -> bool:
    """A keyword match starts a word; an ...Exception / ...Error word starts upper-case."""
    if not _is_word(text[start]) or start == 0:
        return True
    if text.startswith(("Exception", "Error"), start) and end - start in (5, 9):
        first = start
        while first > 0 and start - first < 100 and _is_word(text[first - 1]):
            first -= 1
        return text[first].isupper()
    return not _is_word(text[start - 1])


_NOISE = re.compile(r"\d{4}-\d{2}-\d{2}[T ][\d:.,]+(?:Z|[+-][\d:]+)?|0x[0-9a-fA-F]+|[0-9a-f]{8,}|\d+")
_DISTINCT = 8


def looks_like_log(sample: str) -> bool:
    """Most lines start with a timestamp or a level."""
    lines = [ln for ln in sample.split("\n")[:300] if ln.strip()]
    if len(lines) < 2:
        return False
    stamped = sum(bool(_TIMESTAMP.search(ln[:40]) or _LEVEL.match(ln.lstrip("[ "))) for ln in lines)
    return stamped >= 0.5 * len(lines)


def _matches(pattern: re.Pattern[str], text: str) -> tuple[int, list[tuple[int, str]]]:
    """(how many lines hold a match, the first few distinct ones as (line number, text)).
    Distinct: equal once numbers, hex and timestamps are masked."""
    count = 0
    seen: set[str] = set()
    first: list[tuple[int, str]] = []
    lineno, last, line_end = 1, 0, -1
    for m in pattern.finditer(text):
        if m.start() <= line_end or not _accept(text, m.start(), m.end()):
            continue  # this line is counted already, or not a whole keyword
        start = text.rfind("\n", 0, m.start()) + 1
        end = text.find("\n", m.end())
        line_end = len(text) if end < 0 else end
        count += 1
        if len(first) < _DISTINCT and count <= 20_000:
            line = text[start:min(line_end, start + 1000)]
            key = _NOISE.sub("#", line)[:120]
            if key not in seen:
                seen.add(key)
                lineno += text.count("\n", last, start)
                last = start
                first.append((lineno, line))
    return count, first


def _time_range(text: str, head: list[tuple[int, str]], tail: list[tuple[int, str]]) -> tuple[str, str] | None:
    def first_stamp(lines: list[tuple[int, str]]) -> str | None:
        for _, line in lines:
            m = _TIMESTAMP.search(line[:80])
            if m:
                return m.group(0)
        return None

    start = first_stamp(head)
    end = first_stamp(list(reversed(tail)))
    return (start, end) if start and end else None


def explore_log(text: str, out: Outline, stats: dict[str, Any]) -> bool:
    total = stats["lines"]
    head = head_lines(text, 40)
    tail = tail_lines(text, 40, total)
    errors, first_errors = _matches(_ERROR, text)
    warnings, _ = _matches(_WARN, text)
    exceptions, first_exceptions = _matches(_EXCEPTION, text)
    levels: Counter[str] = Counter()
    for m in _LEVEL.finditer(text[:200_000]):
        levels[(m.group(1) or m.group(2) or m.group(3) or "").upper()] += 1
    span = _time_range(text, head, tail)
    stats.update({"error_lines": errors, "warning_lines": warnings, "exception_lines": exceptions})
    if span:
        stats["first_time"], stats["last_time"] = span
    out.add(f"Log · {total:,} lines · {human_bytes(stats['bytes'])}" + (f" · {span[0]} → {span[1]}" if span else ""), TITLE)
    out.add(f"{errors:,} error lines · {warnings:,} warning lines · {exceptions:,} exception/traceback lines", TITLE)
    if levels:
        sampled = " (first 200,000 characters)" if len(text) > 200_000 else ""
        out.add("levels" + sampled + ": " + ", ".join(f"{k} {n:,}" for k, n in levels.most_common(8)), DETAIL)
    distinct = sorted({*first_errors, *first_exceptions})[:_DISTINCT]
    if distinct:
        out.add("first distinct errors:", KEY)
        for lineno, line in distinct:
            out.add(f"  L{lineno}: {clip(line.strip(), 200)}", KEY)
    out.add("head:", MAIN)
    for lineno, line in head[:5]:
        out.add(f"  L{lineno}: {clip(line, 200)}", MAIN if lineno <= 2 else DETAIL)
    if total > 10:
        out.add("tail:", MAIN)
        for lineno, line in tail[-5:]:
            out.add(f"  L{lineno}: {clip(line, 200)}", KEY if lineno == total else MAIN if lineno >= total - 2 else DETAIL)
    return True
