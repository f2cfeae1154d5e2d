"""What each tier of a lossless context earns for its tokens (``bench/retention.py``'s
"lossless tier yield" table): the assembled context cut back into the parts its tiers
made, each part scored alone on the set's headline metric.

A budgeted context is the pinned messages, one memory block (``MEMORY_HEADER``, then the
root, long-term memories and file chunks, pointers, recent summaries and the recall
block, in that order), then the fresh tail. ``tier_texts`` finds each part by what marks
it (``<summary id=…>`` … ``</summary>``, the recall and memory headers) and the ids on
``ctx.items``; what no tier owns (the block's own header, pointer lines, the recall
header) is ``frame``. The cache-stable layout is read the same way (its question block
has its own header).

Per tier and question:

  tokens  what the tier cost (``ctx.tier_tokens()``; ``frame`` is the rest of the context,
          ``recall_headers`` the part of recall spent on the per-message headers)
  alone   the headline metric of the tier's text alone (how much of the reference it holds)
  only    the metric of the whole context minus that of the context without the tier's
          text (what nothing else shows: what cutting the tier would lose)

Yield (points of the metric per 100 tokens) = mean ``alone`` / mean ``tokens`` × 100.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

from retention_text import ContextView

from lossless.context.pieces import (
    DYNAMIC_HEADER,
    FILES_FOOTER,
    FILES_HEADER,
    LONG_TERM_HEADER,
    MEMORY_HEADER,
    RECALL_HEADER,
)
from lossless.core.render import chat_message_text
from lossless.core.tokens import TokenCounter

__all__ = ["TIERS", "tier_scores", "tier_texts", "yield_rows"]

TIERS = ("pinned", "root", "summary", "memory", "file", "recall", "fresh_tail", "frame")
_SUMMARY = re.compile(r'<summary id="([^"]+)"[^>]*>.*?</summary>', re.S)
# what labels a recalled message: "[#149 2024-01-18 20:00 user]" (until issue 27), then a
# date line "[2024-01-18]" and "#149 user:" at the head of each message's line
_RECALL_HEAD = re.compile(r"^(?:\[#\d+[^\]\n]*\]|\[\d{4}-\d\d-\d\d\]$|#\d+ [^:\n]*:)", re.M)


def _block_index(messages: Sequence[Any]) -> int | None:
    for i, m in enumerate(messages):
        if m.get("role") == "system" and str(m.get("content", "")).startswith((MEMORY_HEADER, DYNAMIC_HEADER)):
            return i
    return None


def tier_texts(messages: Sequence[Any], items: Sequence[Any]) -> dict[str, str]:
    """The context's text cut by tier (see the module docstring); ``recall_headers`` holds
    the recalled messages' headers (also inside ``recall``)."""
    out: dict[str, list[str]] = defaultdict(list)
    block_at = _block_index(messages)
    pinned = sum(1 for i in items if i.tier == "pinned")
    for n, m in enumerate(messages):
        text = chat_message_text(m)
        if n == block_at:
            continue
        if n < pinned:  # the pinned messages come first in both layouts
            out["pinned"].append(text)
        else:
            out["fresh_tail"].append(text)  # (the stable layout's prefix messages count as the tail's)
    if block_at is not None:
        content = str(messages[block_at]["content"])
        tier_of = {i.ref: i.tier for i in items}
        rest = content
        for match in _SUMMARY.finditer(content):
            out[tier_of.get(match.group(1), "summary")].append(match.group(0))
            rest = rest.replace(match.group(0), "", 1)
        at = rest.find(RECALL_HEADER)
        if at >= 0:  # the recall block is the block's last part
            recall = rest[at + len(RECALL_HEADER):]
            out["recall"].append(recall)
            out["recall_headers"].extend(_RECALL_HEAD.findall(recall))
            rest = rest[:at + len(RECALL_HEADER)]
        for header, end, tier in ((LONG_TERM_HEADER, "\n\n", "memory"), (FILES_HEADER, FILES_FOOTER, "file")):
            at = rest.find(header)
            if at >= 0:
                stop = rest.find(end, at + len(header))
                stop = len(rest) if stop < 0 else stop + len(end)
                out[tier].append(rest[at + len(header):stop])
                rest = rest[:at + len(header)] + rest[stop:]
        out["frame"].append(rest)
    return {k: "\n".join(v) for k, v in out.items()}


def tier_scores(messages: Sequence[Any], items: Sequence[Any], tokens: int, counter: TokenCounter,
                exclude: Sequence[str], metric: Callable[[ContextView], float | None]) -> dict[str, dict[str, float]]:
    """Per tier: tokens, ``alone`` and ``only`` (see the module docstring) on ``metric``."""
    texts = tier_texts(messages, items)
    spent: dict[str, int] = defaultdict(int)
    for item in items:
        spent[item.tier] += item.tokens
    spent["frame"] = max(0, tokens - sum(spent.values()))
    whole = metric(ContextView.of([{"role": "user", "content": t} for t in texts.values()], tokens, 0.0, exclude))
    out: dict[str, dict[str, float]] = {}
    for tier in TIERS:
        if tier not in texts and not spent.get(tier):
            continue
        text = texts.get(tier, "")
        alone = metric(ContextView.of([{"role": "user", "content": text}], 0, 0.0, exclude))
        others = [t for k, t in texts.items() if k not in (tier, "recall_headers")]
        without = metric(ContextView.of([{"role": "user", "content": t} for t in others], 0, 0.0, exclude))
        out[tier] = {"tokens": float(spent.get(tier, 0)), "alone": alone or 0.0,
                     "only": (whole or 0.0) - (without or 0.0)}
    if texts.get("recall_headers"):
        out["recall_headers"] = {"tokens": float(counter.count(texts["recall_headers"])), "alone": 0.0, "only": 0.0}
    return out


def yield_rows(records: Sequence[dict[str, Any]], system: str, budgets: Sequence[int]) -> dict[str, list[Any]]:
    """Rows for the yield table of one system: per tier, at each budget, mean tokens, mean
    ``alone``, mean ``only`` and the yield (``alone`` points per 100 tokens)."""
    cells: dict[tuple[str, int], list[dict[str, float]]] = defaultdict(list)
    for r in records:
        if r.get("system") != system or "tier_scores" not in r:
            continue
        for tier, s in r["tier_scores"].items():
            cells[(tier, r["budget"])].append(s)
    rows: dict[str, list[Any]] = {}
    for tier in (*TIERS, "recall_headers"):
        if not any((tier, b) in cells for b in budgets):
            continue
        row: list[Any] = []
        for b in budgets:
            got = cells.get((tier, b), [])
            n = len([r for r in records if r.get("system") == system and r["budget"] == b and "tier_scores" in r])
            tok = sum(s["tokens"] for s in got) / n if n else 0.0
            alone = sum(s["alone"] for s in got) / n if n else 0.0
            only = sum(s["only"] for s in got) / n if n else 0.0
            row += [round(tok, 1), round(alone, 3), round(only, 3), round(100 * alone / tok, 3) if tok else None]
        rows[tier] = row
    return rows
