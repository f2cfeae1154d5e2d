"""CSV and TSV: delimiter, header, columns with inferred types, row count, first rows.

Rows are read with the C ``csv`` reader (quoted newlines count as one row). Types and
ranges come from the first ``TYPE_ROWS`` rows or ``TYPE_SECONDS``, whichever ends first;
the rest of the file is only counted.
"""

from __future__ import annotations

import csv
import io
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from lossless.context.explore.base import (
    DETAIL,
    KEY,
    MAIN,
    SAMPLE,
    TITLE,
    Outline,
    clip,
    human_bytes,
)

__all__ = ["explore_table", "sniff_delimiter"]

TYPE_ROWS = 20_000
TYPE_SECONDS = 0.4
COUNT_SECONDS = 1.0
_DELIMITERS = (",", "\t", ";")
_INT = re.compile(r"[+-]?\d{1,18}")
_FLOAT = re.compile(r"[+-]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?|[+-]?(?:inf|nan)", re.IGNORECASE)
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?"
                   r"|\d{1,2}/\d{1,2}/\d{2,4}")
_NULLS = frozenset({"", "na", "n/a", "null", "none", "nil", "-"})


def _sample_text(text: str, chars: int = 64_000) -> str:
    if len(text) <= chars:
        return text
    cut = text.rfind("\n", 0, chars)
    return text[: cut if cut > 0 else chars]


def sniff_delimiter(text: str, preferred: str | None = None) -> tuple[str, int] | None:
    """(delimiter, columns) when the first lines split into the same number (>= 2) of
    fields for nearly every row; None for prose, code and ragged text."""
    sample = _sample_text(text)
    candidates: list[tuple[bool, float, int, str]] = []
    for delim in dict.fromkeys(((preferred,) if preferred else ()) + _DELIMITERS):
        try:
            rows = [r for _, r in zip(range(60), csv.reader(io.StringIO(sample), delimiter=delim), strict=False) if r]
        except csv.Error:
            continue
        if len(rows) < (2 if delim == preferred else 3):
            continue
        columns, n = Counter(len(r) for r in rows).most_common(1)[0]
        share = n / len(rows)
        if columns < 2 or share < 0.9:
            continue
        fields = [f for r in rows for f in r[1:]]
        if delim != preferred and (
            sum(len(f) for f in fields) > 200 * len(fields)  # paragraphs, not fields
            or sum(f[:1] == " " for f in fields) > 0.5 * len(fields)  # "prose, with commas"
            or sum(not r[-1] for r in rows) > 0.5 * len(rows)  # "statements;" of code
        ):
            continue
        candidates.append((delim == preferred, share, columns, delim))
    if not candidates:
        return None
    _, _, columns, delim = max(candidates, key=lambda c: c[:3])
    return delim, columns


@dataclass
class _Column:
    name: str
    nulls: int = 0
    ints: int = 0
    floats: int = 0
    dates: int = 0
    texts: int = 0
    low: float | None = None
    high: float | None = None
    first_date: str | None = None
    last_date: str | None = None
    values: Counter[str] = field(default_factory=Counter)

    def see(self, value: str) -> None:
        v = value.strip()
        if v.lower() in _NULLS:
            self.nulls += 1
            return
        number: float | None = None
        if _INT.fullmatch(v):
            self.ints += 1
            number = float(int(v))
        elif _FLOAT.fullmatch(v):
            self.floats += 1
            number = float(v)
        elif _DATE.fullmatch(v):
            self.dates += 1
            self.first_date = v if self.first_date is None or v < self.first_date else self.first_date
            self.last_date = v if self.last_date is None or v > self.last_date else self.last_date
        else:
            self.texts += 1
        if number is not None and number == number:  # NaN has no place in a range
            self.low = number if self.low is None or number < self.low else self.low
            self.high = number if self.high is None or number > self.high else self.high
        if len(self.values) < 1000 or v in self.values:
            self.values[v] += 1

    def kind(self) -> str:
        seen = self.ints + self.floats + self.dates + self.texts
        if not seen:
            return "empty"
        if self.ints == seen:
            return "int"
        if self.ints + self.floats == seen:
            return "float"
        if self.dates == seen:
            return "date"
        return "text"

    def describe(self) -> str:
        kind = self.kind()
        parts = [f"{self.name[:60]}: {kind}"]
        if self.nulls:
            parts.append(f"{self.nulls:,} null")
        if kind in ("int", "float") and self.low is not None and self.high is not None:
            parts.append(f"min {_num(self.low)}, max {_num(self.high)}")
        elif kind == "date":
            parts.append(f"{self.first_date} → {self.last_date}")
        elif kind == "text":
            distinct = f"{len(self.values):,}{'+' if len(self.values) >= 1000 else ''} distinct"
            common = ", ".join(repr(clip(v, 24)) for v, _ in self.values.most_common(3))
            mixed = self.ints + self.floats + self.dates
            parts.append(distinct + (f", e.g. {common}" if common else "")
                         + (f" ({mixed:,} numeric/date values)" if mixed else ""))
        return " · ".join(parts)


def _num(x: float) -> str:
    return f"{int(x):,}" if x.is_integer() and abs(x) < 1e18 else f"{x:.6g}"


def _is_header(first: list[str], data: list[list[str]]) -> bool:
    """A header row: its fields are names (not numbers or dates) where the data has
    numbers or dates, or all distinct names never repeated in the column below."""
    def typed(v: str) -> bool:
        v = v.strip()
        return bool(_FLOAT.fullmatch(v) or _DATE.fullmatch(v))

    if not data or any(typed(v) for v in first):
        return False
    for col, name in enumerate(first):
        column = [r[col] for r in data[:50] if col < len(r)]
        if column and name.strip() and sum(typed(v) for v in column) >= 0.8 * len(column):
            return True
    names = [v.strip() for v in first]
    if any(not n or len(n) > 40 for n in names) or len(set(names)) != len(names):
        return False
    return all(names[c] not in {r[c] for r in data[:50] if c < len(r)} for c in range(len(names)))


def explore_table(text: str, out: Outline, stats: dict[str, Any], *, preferred: str | None = None) -> bool:
    """Outline a delimited table; False (nothing written) when the text is not one."""
    sniffed = sniff_delimiter(text, preferred)
    if sniffed is None:
        return False
    delim, width = sniffed
    reader = csv.reader(io.StringIO(text), delimiter=delim)
    rows_seen: list[list[str]] = []
    for row in reader:
        if row:
            rows_seen.append(row)
        if len(rows_seen) >= 51:
            break
    if len(rows_seen) < 2:
        return False
    header = _is_header(rows_seen[0], rows_seen[1:])
    names = [v.strip() or f"col{i + 1}" for i, v in enumerate(rows_seen[0])] if header else []
    names += [f"col{i + 1}" for i in range(len(names), width)]
    columns = [_Column(n) for n in names[:width]]
    # restart: the type pass reads from the first data row
    reader = csv.reader(io.StringIO(text), delimiter=delim)
    deadline = time.monotonic() + TYPE_SECONDS
    rows = ragged = typed_rows = 0
    first_rows: list[list[str]] = []
    skipped_header = not header
    complete = True
    count_deadline = time.monotonic() + COUNT_SECONDS
    for row in reader:
        if not row:
            continue
        if not skipped_header:
            skipped_header = True
            continue
        rows += 1
        if len(first_rows) < 3:
            first_rows.append(row)
        if len(row) != width:
            ragged += 1
        if typed_rows < TYPE_ROWS and (typed_rows < 100 or time.monotonic() < deadline):
            typed_rows += 1
            for col, value in zip(columns, row, strict=False):
                col.see(value)
        elif rows % 4096 == 0 and time.monotonic() > count_deadline:
            complete = False
            break
    consumed = -1
    if not complete:
        # the reader does not expose its position; estimate rows from the newline count
        lines_total = text.count("\n") + (0 if text.endswith("\n") else 1)
        consumed = rows
        rows = max(rows, lines_total - (1 if header else 0))
        stats["sampled"] = True
    kind = "tsv" if delim == "\t" else "csv"
    shown = {",": "comma", "\t": "tab", ";": "semicolon"}.get(delim, repr(delim))
    stats.update({"delimiter": delim, "rows": rows, "columns": width, "header": header})
    out.add(f"{kind.upper()} · {rows:,}{' (estimated)' if consumed >= 0 else ''} rows × {width} columns · "
            f"{shown}-delimited · {human_bytes(stats['bytes'])}", TITLE)
    out.add("header: " + (" | ".join(clip(n, 40) for n in names) if header else "none (columns named col1…)"), KEY)
    if typed_rows < rows:
        out.add(f"types from the first {typed_rows:,} rows", KEY)
    if ragged:
        out.add(f"{ragged:,} row(s) with a different number of fields than {width}", KEY)
    out.add("columns:", MAIN)
    for col in columns[:60]:
        out.add("  " + col.describe(), MAIN if len(columns) <= 20 else DETAIL)
    if len(columns) > 60:
        out.add(f"  … {len(columns) - 60} more columns", MAIN)
    out.add("first rows:", SAMPLE + 1)
    for row in first_rows:
        out.add("  " + " | ".join(clip(v, 40) for v in row[:20]) + (" | …" if len(row) > 20 else ""), SAMPLE + 1)
    return True
