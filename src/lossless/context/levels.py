"""Recent summaries at the level the room allows (seed 000's assembly flow: "预算充足 →
加载 Recent Summaries", "预算不足 → 加载 Higher-Level Summaries").

The summaries tier shows a *cut* of the DAG: nodes that cover the summarized history
once, in order. The finest cut that fits is the one shown: from the most detailed
level the room allows, each run of summaries that does not fit is swapped for its
parent, one level up, repeatedly, up to the frontier (which has no parent but the
whole-conversation root, shown anyway). It is found top down, which reads only the
nodes it may show: from the frontier, the newest node is replaced by its sources while
the whole cut still fits, then the next newest, so the recent history gets the detail.
When not even the frontier fits, the tier abridges and drops (with a pointer) as before.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from lossless.core.types import Summary

__all__ = ["MAX_EXPANSIONS", "finest_cut"]

MAX_EXPANSIONS = 16  # nodes opened per assembly at most: a bound on its reads, not on detail that matters


def finest_cut(frontier: Sequence[Summary], limit: int, cost: Callable[[Summary], int],
               children: Callable[[Summary], list[Summary]]) -> list[Summary] | None:
    """The most detailed cut of the DAG under ``frontier`` (oldest first) that costs at
    most ``limit`` by ``cost``, the newest history opened first; None when the frontier
    itself costs more. ``children``: a condensed node's source summaries, in order."""
    cut = list(frontier)
    total = sum(cost(node) for node in cut)
    if total > limit:
        return None
    opened = 0
    i = len(cut) - 1
    while i >= 0 and opened < MAX_EXPANSIONS:
        node = cut[i]
        kids = children(node) if node.depth > 0 and not node.root else []
        extra = sum(cost(k) for k in kids) - cost(node) if kids else 0
        if kids and total + extra <= limit:
            cut[i:i + 1] = kids
            total += extra
            opened += 1
            i += len(kids) - 1  # the newest of them next: the latest history gets the detail first
            continue
        i -= 1
    return cut
