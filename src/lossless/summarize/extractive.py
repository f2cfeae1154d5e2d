"""Deterministic, offline extractive summarization: the default summarizer and the
compaction engine's last resort.

The items to summarize are grouped under a header naming their source (a message's
``[#seq time role name]``, a child summary's ``[#first–last span]``) and fitted to the
token budget by :mod:`lossless.core.textfit`: the units a later turn is likely to need
are kept verbatim, in their original order. Same input, same output, byte for byte.
"""

from __future__ import annotations

from datetime import datetime, tzinfo

from lossless.core.importance import score as score_importance
from lossless.core.priority import pause_point
from lossless.core.textfit import (
    MESSAGE_HEADER_RE,
    Group,
    Unit,
    fit_groups,
    fit_text,
    group_units,
    split_sections,
    split_units,
)
from lossless.core.zones import in_zone, zone_of
from lossless.summarize.base import SummaryItem, SummaryRequest, SummaryResult

__all__ = ["ExtractiveSummarizer", "extract", "fit_text"]  # fit_text: re-exported from lossless.core.textfit


def _minute(t: datetime) -> str:
    if t.year < 1000:  # strftime does not pad the year to four digits
        return t.strftime("%Y-%m-%d %H:%M")
    return f"{t.year}-{t.month:02d}-{t.day:02d} {t.hour:02d}:{t.minute:02d}"


def _span_header(first: int, last: int, start: datetime, end: datetime, zone: tzinfo) -> str:
    start, end = in_zone(start, zone), in_zone(end, zone)
    if start.date() == end.date():
        when = f"{_minute(start)}–{end.strftime('%H:%M')}"
    else:
        when = f"{start.strftime('%Y-%m-%d')} → {end.strftime('%Y-%m-%d')}"
    return f"[#{first}–{last} {when}]"


def _message_header(item: SummaryItem, zone: tzinfo) -> str:
    parts = [f"#{item.first_seq}", _minute(in_zone(item.created_at, zone)), item.role or "message"]
    if item.name:
        parts.append(" ".join(item.name.replace("]", ")").split()))
    return "[" + " ".join(parts) + "]"


def _summary_units(text: str) -> list[Unit]:
    """Units of a child summary, each prefixed with who said it and on what day when the
    child names its messages with leaf headers; the child's own headers are dropped so a
    summary of summaries never nests them."""
    out: list[Unit] = []
    for n, (header, lines) in enumerate(split_sections(text)):
        m = MESSAGE_HEADER_RE.match(header)
        prefix = f"{m.group(3) or m.group(2)} {m.group(1)}: " if m else ""
        role = m.group(2) if m else None
        out.extend((prefix + u, n, kind, role) for u, _, kind in split_units("\n".join(lines)))
    return out


def _message_boost(item: SummaryItem) -> float:
    """A message the importance scorer rates high (a correction, a preference, an error, a
    memory request) lifts all its sentences a little; tool output is scored by the
    sentence rules alone, or logs would crowd out the conversation."""
    if item.role == "tool":
        return 0.0
    return 1.5 * max(0.0, score_importance(item.text, role=item.role).value - 0.3)


def _groups(request: SummaryRequest) -> list[Group]:
    groups: list[Group] = []
    zone = zone_of(request.timezone)
    for g, item in enumerate(request.items):
        pause_point()  # ~0.1 ms of pure Python per item: a query on another thread goes first
        if item.kind == "message":
            header = _message_header(item, zone)
            units = [(u, ln, kind, item.role) for u, ln, kind in split_units(item.text)]
            boost = _message_boost(item)
        else:
            header = _span_header(item.first_seq, item.last_seq, item.created_at, item.latest_at, zone)
            units = _summary_units(item.text)
            boost = 0.0
        groups.append(group_units(g, header, units, request.counter, boost=boost))
    return groups


def extract(request: SummaryRequest) -> str:
    """The extractive summary of ``request.items``: never over ``request.target_tokens``
    by ``request.counter``; in ``aggressive`` mode about half that, keeping only units
    with real signal. When nothing fits, a bare span header, or "" below that."""
    if not request.items or request.target_tokens <= 0:
        return ""
    counter = request.counter
    groups = _groups(request)
    budget = request.target_tokens
    strict = request.mode == "aggressive"
    if strict:
        source = sum(p.tokens for g in groups for p in g.pieces)
        budget = max(1, min(budget // 2, source // 2))
    text = fit_groups(groups, budget, counter, strict)
    if text:
        return text
    items = request.items
    first, last = items[0].first_seq, max(i.last_seq for i in items)
    start, end = items[0].created_at, max(i.latest_at for i in items)
    for pointer in (_span_header(first, last, start, end, zone_of(request.timezone)), f"[#{first}–{last}]"):
        if counter.count(pointer) <= request.target_tokens:
            return pointer
    return ""


class ExtractiveSummarizer:
    """The deterministic, offline default :class:`~lossless.summarize.base.Summarizer`:
    picks the sentences that carry decisions, facts, errors and identifiers, grouped under
    ``[#seq time role name]`` headers (leaf) or ``[#first–last span]`` headers (condensed)."""

    name = "extractive"

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        """Summarize ``request``; never raises on odd text and never exceeds the budget."""
        text = extract(request)
        # calls 0: no model was asked, so nothing counts toward the summarizer spend
        meta = {"summarizer": self.name, "provider": self.name, "calls": 0, "mode": request.mode,
                "lines": len(text.splitlines())}
        return SummaryResult(text, None, meta)
