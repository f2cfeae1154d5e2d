"""``lossless assemble`` at a budget that fits nothing: the error names the budget that does.

The newest message's stored size is not what it costs in a context: the framing of each
message, the newest turn kept whole and, with ``--query``, the room set aside for recall
come on top. "the newest message alone is 20 tokens" at ``--budget 40`` told a user to give
more than 40 without saying how much; so the smallest budget that assembles something is
found by assembling (the error path only, a dozen assemblies at most).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.text import Text

from lossless.cli.context import CommandContext
from lossless.cli.render import counted
from lossless.conversation import Conversation

__all__ = ["empty_context"]


def _fits(conv: Conversation, budget: int, query: str | None) -> bool:
    return bool(conv.assemble(budget_tokens=budget, query=query).messages)


def smallest_budget(conv: Conversation, budget: int, query: str | None, ceiling: int) -> int | None:
    """The smallest budget over ``budget`` (up to ``ceiling``) whose context holds a message,
    None when even ``ceiling`` holds none. Doubling, then bisecting: what is returned was assembled."""
    low, high = budget, max(budget * 2, budget + 16)
    while not _fits(conv, min(high, ceiling), query):
        if high >= ceiling:
            return None
        low, high = high, high * 2
    high = min(high, ceiling)
    while high - low > 1:  # low fits nothing, high fits something
        middle = (low + high) // 2
        if _fits(conv, middle, query):
            high = middle
        else:
            low = middle
    return high


def empty_context(ctx: CommandContext, conv: Conversation, messages: Sequence[Any], budget: int,
                  query: str | None) -> bool:
    """Whether a conversation with messages assembled to nothing (the budget fits none of
    them); says so on stderr with the budget that would, so it never passes for a context."""
    store = conv.memory.store
    last = store.last_seq(conv.id)
    if messages or not last:
        return False
    newest = store.get_messages(conv.id, last, last)[0]
    ceiling = max(conv.memory.config.context_window, budget + 1)
    needed = smallest_budget(conv, budget, query, ceiling)
    what = "with this --query " if query else ""
    hint = (f"the smallest budget that fits it {what}is --budget {needed:,}" if needed is not None
            else f"no budget up to {ceiling:,} fits it {what}")
    ctx.err.print(Text(f"error: a budget of {budget:,} tokens fits nothing of {conv.id!r} ({counted(last, 'message')}): "
                       f"the newest message alone is {newest.token_count:,} tokens, and {hint}",
                       style="red"), soft_wrap=True)
    return True
