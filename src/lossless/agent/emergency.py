"""Emergency compaction: recovering from a provider's "context too long" error.

The budget lossless assembles to is counted with our tokenizer; the provider counts with
its own, adds tool schemas and images, and may simply have a smaller window than the one
configured. When it refuses the request, :func:`call_with_recovery` compacts harder
(emergency: only the newest turn stays raw), reassembles into a smaller budget and tries
again, a bounded number of times; then it cuts the largest tool outputs down (they stay
whole in the store, and the marker names the message id to expand); then it gives up with
:class:`~lossless.core.errors.ContextOverflowError`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, TypeVar

from lossless.core.errors import ContextOverflowError, ValidationError
from lossless.core.tokens import TokenCounter, count_chat_tokens
from lossless.core.types import AssembledContext, ChatMessage
from lossless.providers.errors import (  # re-exported
    context_limit_from_error,
    is_context_length_error,
)

if TYPE_CHECKING:
    from lossless.agent.base import ConversationHandle

__all__ = ["RecoveryLog", "call_with_recovery", "context_limit_from_error", "is_context_length_error",
           "smaller_budget", "truncate_tool_outputs"]

log = logging.getLogger("lossless")
T = TypeVar("T")

_TRUNCATED = "[… {n} tokens of this tool output cut to fit the window; the whole output is message {id}]"


def truncate_tool_outputs(messages: list[ChatMessage], counter: TokenCounter, budget: int,
                          *, ids: list[str | None] | None = None) -> list[ChatMessage]:
    """Cut the largest tool outputs (role ``tool``), biggest first, keeping their head and
    tail, until the messages fit ``budget`` or no tool output is left to cut. ``ids``
    (parallel to ``messages``) names each message's stored id for the marker."""
    out = [dict(m) for m in messages]
    sizes = [(counter.count(str(m.get("content") or "")), i) for i, m in enumerate(out) if m.get("role") == "tool"]
    for size, i in sorted(sizes, reverse=True):
        over = count_chat_tokens(counter, out) - budget
        if over <= 0 or size < 64:
            break
        text = str(out[i].get("content") or "")
        keep = max(32, size - over - 48)
        if keep >= size:
            continue
        head = _prefix(text, counter, keep * 2 // 3)
        tail = _suffix(text, counter, keep // 3)
        marker = _TRUNCATED.format(n=size - keep, id=(ids[i] if ids and ids[i] else "in the store"))
        out[i]["content"] = f"{head}\n{marker}\n{tail}"
    return out  # type: ignore[return-value]


def _prefix(text: str, counter: TokenCounter, tokens: int) -> str:
    lo, hi = 0, len(text)
    while lo < hi:  # the longest prefix within ``tokens``
        mid = (lo + hi + 1) // 2
        if counter.count(text[:mid]) <= tokens:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo]


def _suffix(text: str, counter: TokenCounter, tokens: int) -> str:
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if counter.count(text[len(text) - mid:]) <= tokens:
            lo = mid
        else:
            hi = mid - 1
    return text[len(text) - lo:] if lo else ""


def _tool_message_ids(conv: ConversationHandle, ctx: AssembledContext) -> list[str | None]:
    """The stored id of each tool message in ``ctx`` (matched by tool_call_id within the
    fresh tail it came from), for the truncation marker."""
    by_call: dict[str, str] = {}
    for item in ctx.items:
        if item.tier == "fresh_tail":
            for msg in conv.messages(item.first_seq, item.last_seq):
                if msg.role == "tool" and msg.tool_call_id:
                    by_call[msg.tool_call_id] = msg.id
    return [by_call.get(str(m.get("tool_call_id"))) if m.get("role") == "tool" else None for m in ctx.messages]


@dataclass
class RecoveryLog:
    """What :func:`call_with_recovery` had to do; pass one in to see it afterwards."""

    attempts: int = 0
    compactions: int = 0
    truncated: bool = False
    budgets: list[int] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def call_with_recovery(
    conv: ConversationHandle,
    call: Callable[[AssembledContext], T],
    *,
    budget_tokens: int | None = None,
    query: str | None = None,
    max_compactions: int = 3,
    shrink: float = 0.8,
    log_to: RecoveryLog | None = None,
) -> T:
    """Assemble a context for ``conv`` and hand it to ``call`` (your model call). If the
    provider says the context is too long, compact in emergency mode, reassemble into a
    budget ``shrink`` times smaller, and call again — at most ``max_compactions`` times;
    then once more with the largest tool outputs cut down; then raise
    :class:`~lossless.core.errors.ContextOverflowError`. Any other error propagates at once.
    """
    if max_compactions < 0:
        raise ValidationError(f"max_compactions must be >= 0, got {max_compactions}")
    if not 0.1 <= shrink <= 1.0:
        raise ValidationError(f"shrink must be between 0.1 and 1.0, got {shrink}")
    record = log_to if log_to is not None else RecoveryLog()
    budget = budget_tokens or conv.memory.config.context_window
    last: BaseException | None = None
    for attempt in range(max_compactions + 2):
        ctx = conv.assemble(budget_tokens=budget, query=query)
        if attempt == max_compactions + 1:  # the last resort: cut the biggest tool outputs
            ids = _tool_message_ids(conv, ctx)
            messages = truncate_tool_outputs(ctx.messages, conv.memory.counter, budget, ids=ids)
            ctx = replace(ctx, messages=messages, tokens=count_chat_tokens(conv.memory.counter, messages))
            record.truncated = True
        record.attempts += 1
        record.budgets.append(budget)
        try:
            return call(ctx)
        except Exception as exc:
            if not is_context_length_error(exc):
                raise
            last = exc
            record.errors.append(f"{type(exc).__name__}: {exc}"[:300])
            log.warning("lossless: %s: the provider refused %d tokens as too long; compacting", conv.id, ctx.tokens)
        budget = smaller_budget(budget, ctx.tokens, last, shrink)
        if attempt < max_compactions:
            conv.compact(emergency=True, reason="context-length error")
            record.compactions += 1
    raise ContextOverflowError(
        f"the provider still refused the context as too long after {record.compactions} emergency "
        f"compactions (last budget {budget} tokens) and cutting tool outputs: {last}"
    ) from last


def smaller_budget(budget: int, our_tokens: int, error: BaseException | None, shrink: float = 0.8) -> int:
    """The budget to assemble to after the provider refused a context of ``our_tokens``
    (by our count) assembled within ``budget``: ``shrink`` times what it refused, or smaller
    still when the error names the model's limit: that limit scaled by how our count
    compares with the provider's, less 10 %.

    Shrunk from what was sent, not from the budget: a history smaller than the budget (a
    window configured larger than the provider's) was sent whole, and a budget shrunk from
    its own size let the next context be as large again (emergency summaries and recall fill
    the room), so an error that names no limit (Zhipu's "Prompt exceeds max length") was
    retried with no smaller a context until lossless gave up."""
    target = int(min(budget, our_tokens or budget) * shrink)
    if error is not None:
        limit, sent = context_limit_from_error(error)
        if limit:
            scale = our_tokens / sent if sent and our_tokens else 1.0
            target = min(target, int(limit * min(scale, 1.0) * 0.9))
    return max(64, target)
