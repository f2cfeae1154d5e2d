"""What an exploration is, and the outline every explorer writes into: summary lines
with priorities, fitted to a token budget by dropping the least important lines first."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from lossless.core.tokens import TokenCounter

__all__ = [
    "KINDS",
    "Exploration",
    "Kind",
    "Outline",
    "clip",
    "fit",
    "head_lines",
    "human_bytes",
    "line_at",
    "short_json",
    "tail_lines",
]

Kind = Literal["json", "csv", "tsv", "yaml", "code", "log", "text", "html", "xml"]
KINDS: tuple[Kind, ...] = ("json", "csv", "tsv", "yaml", "code", "log", "text", "html", "xml")

# One summary line never takes more than this many characters: a 5 MB single-line value
# must not crowd out the rest of the outline.
LINE_CHARS = 240

# Priorities, highest kept longest.
TITLE, KEY, MAIN, DETAIL, SAMPLE = 9, 7, 5, 3, 1


@dataclass(frozen=True, slots=True)
class Exploration:
    """A bounded description of a large text, for a model deciding whether to read it.

    ``kind`` is what the text looks like, ``summary`` a human- and model-readable outline
    within the requested token budget, ``stats`` JSON-ready numbers (``bytes``, ``chars``,
    ``lines``, ``tokens`` when it was cheap to count, ``sampled`` when only part of the
    text was parsed, and kind-specific fields such as ``language`` or ``rows``).
    """

    kind: Kind
    summary: str
    stats: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: ``{"kind", "summary", "stats"}``."""
        return {"kind": self.kind, "summary": self.summary, "stats": dict(self.stats)}


class Outline:
    """Summary lines in display order, each with a priority (9 title … 1 sample)."""

    def __init__(self) -> None:
        self.lines: list[tuple[int, str]] = []

    def add(self, text: str, priority: int = MAIN) -> None:
        for line in text.split("\n") if "\n" in text else (text,):
            self.lines.append((priority, line))

    def __len__(self) -> int:
        return len(self.lines)


def clip(text: str, width: int = LINE_CHARS) -> str:
    """One line, at most ``width`` characters, with … where it was cut."""
    if len(text) > width * 4:
        text = text[: width * 4]
    text = text.replace("\r", "\\r").replace("\n", "\\n").replace("\t", " ")
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"


def human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{int(size)} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"  # pragma: no cover - the loop always returns


def short_json(value: Any, limit: int = 80) -> str:
    """A JSON rendering of ``value`` cut near ``limit`` characters, with bounded work
    however big the value is (no full ``json.dumps`` of a large container)."""
    out: list[str] = []
    room = [limit]

    def put(piece: str) -> bool:
        out.append(piece)
        room[0] -= len(piece)
        return room[0] > 0

    def walk(v: Any) -> bool:
        if isinstance(v, str):
            return put(json.dumps(v[: max(room[0], 0) + 1], ensure_ascii=False))
        if isinstance(v, dict):
            if not put("{"):
                return False
            for i, (k, item) in enumerate(v.items()):
                if (i and not put(", ")) or not put(json.dumps(str(k)[:40], ensure_ascii=False) + ": "):
                    return False
                if not walk(item):
                    return False
            return put("}")
        if isinstance(v, list):
            if not put("["):
                return False
            for i, item in enumerate(v):
                if (i and not put(", ")) or not walk(item):
                    return False
            return put("]")
        try:
            return put(json.dumps(v))
        except (TypeError, ValueError):
            return put(json.dumps(str(v)[:limit]))

    complete = walk(value)
    text = "".join(out)
    if complete and len(text) <= limit:
        return text
    return text[:limit] + "…"


def line_at(text: str, pos: int) -> tuple[int, int, int]:
    """(1-based line number, start, end) of the line holding character ``pos``."""
    start = text.rfind("\n", 0, pos) + 1
    end = text.find("\n", pos)
    return text.count("\n", 0, start) + 1, start, len(text) if end < 0 else end


def head_lines(text: str, n: int, start_line: int = 1, pos: int = 0) -> list[tuple[int, str]]:
    """Up to ``n`` lines from character ``pos`` (which starts line ``start_line``),
    without splitting the whole text."""
    out: list[tuple[int, str]] = []
    lineno = start_line
    while len(out) < n and pos < len(text):
        end = text.find("\n", pos)
        if end < 0:
            end = len(text)
        out.append((lineno, text[pos:min(end, pos + LINE_CHARS * 4)]))
        pos, lineno = end + 1, lineno + 1
    return out


def tail_lines(text: str, n: int, total_lines: int) -> list[tuple[int, str]]:
    """The last ``n`` lines (``total_lines`` is the text's line count)."""
    body = text[:-1] if text.endswith("\n") else text
    pos = len(body)
    out: list[tuple[int, str]] = []
    lineno = total_lines
    while len(out) < n and pos > 0:
        start = body.rfind("\n", 0, pos) + 1
        out.append((lineno, body[max(start, pos - LINE_CHARS * 4):pos]))
        pos, lineno = start - 1, lineno - 1
    out.reverse()
    return out


def _hard_truncate(text: str, max_tokens: int, counter: TokenCounter) -> str:
    """The longest prefix within ``max_tokens`` (binary search; counts are near-monotone
    in the prefix length and every candidate kept has been checked)."""
    text = text[: max_tokens * 8]
    if counter.count(text) <= max_tokens:
        return text
    lo, hi = 0, len(text)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if counter.count(text[:mid]) <= max_tokens:
            lo = mid
        else:
            hi = mid
    return text[:lo]


def _headers(texts: list[str]) -> dict[int, range]:
    """Lines ending in ':' followed by more-indented lines: header -> the lines under it."""
    indents = [len(t) - len(t.lstrip(" ")) for t in texts]
    out: dict[int, range] = {}
    for i, text in enumerate(texts):
        if not text.endswith(":"):
            continue
        j = i + 1
        while j < len(texts) and indents[j] > indents[i]:
            j += 1
        if j > i + 1:
            out[i] = range(i + 1, j)
    return out


def fit(outline: Outline, max_tokens: int, counter: TokenCounter) -> str:
    """Render the outline within ``max_tokens``: drop the lowest-priority lines (later
    ones first; a header goes when nothing under it is left) and say how many went; cut
    the text itself only as a last resort. Near-linear in the outline's length: costs
    are counted per line once, and the whole text is counted only to confirm."""
    lines = [(p, clip(t)) for p, t in outline.lines]
    texts = [t for _, t in lines]
    full = "\n".join(texts)
    if counter.count(full) <= max_tokens:
        return full
    headers = _headers(texts)
    costs = [counter.count(t) + 1 for t in texts]
    keep = [True] * len(texts)
    live = {h: sum(1 for i in span if i not in headers) for h, span in headers.items()}
    above: list[list[int]] = [[] for _ in texts]
    for h, span in headers.items():
        for i in span:
            above[i].append(h)
    # the title (first line) goes last of all; headers only with what is under them
    order = sorted((i for i in range(1, len(texts)) if i not in headers), key=lambda i: (lines[i][0], -i))
    order += [0] if texts and 0 not in headers else []
    total = sum(costs)
    dropped = 0

    def drop(i: int) -> None:
        nonlocal total, dropped
        keep[i] = False
        total -= costs[i]
        dropped += 1
        for h in above[i]:
            live[h] -= 1
            if live[h] == 0:
                keep[h] = False
                total -= costs[h]

    note = f"(… {len(texts)} more lines left out to fit {max_tokens} tokens)"
    target = max_tokens - counter.count(note) - 1
    k = 0
    while k < len(order) - 1:
        while k < len(order) - 1 and total > target:
            drop(order[k])
            k += 1
        parts = [t for t, on in zip(texts, keep, strict=True) if on]
        parts.append(f"(… {dropped} more line{'s' if dropped != 1 else ''} left out to fit {max_tokens} tokens)")
        text = "\n".join(parts)
        excess = counter.count(text) - max_tokens
        if excess <= 0:
            return text
        target = min(target, total) - excess  # the per-line estimate was short by this much
    return _hard_truncate(texts[0] if texts else full, max_tokens, counter)
