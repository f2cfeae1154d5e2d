"""The cache-stable layout, for a call with the whole window. The prefix is the pinned
messages, every frontier summary and the oldest raw messages, verbatim and in a fixed
order, up to a size fixed by the budget (``1 - dynamic_share`` of it), never by what
happens to be active. After it comes one block with what depends on the question
(recall, long-term memories, file chunks, pointers to what is not shown), then the
newest raw messages that fit, then the newest user turn. Between two compactions the
prefix is byte-identical from turn to turn and only grows (up to its size), so provider
prompt caches keep hitting, and the question keeps room for the matches it has: when
the newest turn would leave it less than half of ``dynamic_share``, the budgeted layout
is used instead."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import tzinfo

from lossless.compaction.engine import tool_groups
from lossless.context.inputs import History, Sources
from lossless.context.lookups import file_pieces, files_block_cost, memory_pieces
from lossless.context.pieces import (
    DYNAMIC_HEADER,
    LONG_TERM_HEADER,
    MEMORY_HEADER,
    RECALL_HEADER,
    SEP,
    Piece,
    memory_blocks,
    recall_block,
)
from lossless.context.recalled import recall_cost
from lossless.context.shown import MessageView
from lossless.core.config import Config
from lossless.core.render import format_span
from lossless.core.tokens import MESSAGE_OVERHEAD, REPLY_PRIMING, count_chat_tokens
from lossless.core.types import AssembledContext, ChatMessage, ContextItem, Message

__all__ = ["prefix_cap", "stable_layout"]


def prefix_cap(config: Config) -> int:
    """The most the fixed prefix may hold: (1 - ``dynamic_share``) of the window."""
    return int((config.context_window - REPLY_PRIMING) * (1 - config.dynamic_share))


def _fixed_prefix(history: History, sources: Sources, cap: int) -> tuple[list[ChatMessage], list[ContextItem], int, bool]:
    """The pinned messages and the frontier summaries in one block: chats, items, cost,
    and whether every summary is there. Past ``cap`` the block keeps the root and the
    newest summaries that fit (and says where the others are): the frontier changes only
    when compaction runs, so this choice too stays the same from turn to turn."""
    view = sources.view
    chats: list[ChatMessage] = [view.chat(m) for m in history.pinned]
    items: list[ContextItem] = []
    cost = 0
    for msg, chat in zip(history.pinned, chats, strict=True):
        c = view.chat_cost(chat)
        items.append(ContextItem("pinned", msg.id, c, msg.seq, msg.seq))
        cost += c
    # the whole-conversation root first when there is one (else the oldest frontier
    # summary stands in for it): index 0 is kept before any other summary
    frontier = ([history.root] if history.root is not None else []) + history.frontier
    if not frontier:
        return chats, items, cost, True
    texts = [sources.summaries.prefix_text(node) for node in frontier]
    costs = [view.piece_cost(text) for text in texts]
    left = cap - cost - MESSAGE_OVERHEAD - view.counter.count(MEMORY_HEADER)
    keep = set(range(len(frontier)))
    pointer = ""
    if sum(costs) > left:
        left -= 80  # the pointer to the summaries left out
        keep = {0} if costs[0] <= left else set()
        left -= costs[0] if keep else 0
        for i in range(len(frontier) - 1, 0, -1):
            if costs[i] > left:
                break
            keep.add(i)
            left -= costs[i]
        hidden = [node for i, node in enumerate(frontier) if i not in keep]
        ids = ", ".join(node.id for node in hidden[:6]) + (", …" if len(hidden) > 6 else "")
        pointer = (f"Not shown for space: {len(hidden)} summaries covering #{hidden[0].first_seq}-#{hidden[-1].last_seq} "
                   f"({format_span(hidden[0].earliest_at, hidden[-1].latest_at, view.zone)}): {ids}. "
                   "Use lcm_expand or lcm_grep.")
    shown = [texts[i] for i in sorted(keep)] + ([pointer] if pointer else [])
    block: ChatMessage = {"role": "system", "content": MEMORY_HEADER + SEP + SEP.join(shown)}
    chats.append(block)
    cost += view.chat_cost(block)
    for i in sorted(keep):
        node = frontier[i]
        items.append(ContextItem("root" if i == 0 else "summary", node.id, costs[i], node.first_seq, node.last_seq))
    return chats, items, cost, not pointer


@dataclass
class _Question:
    """What the question brings: memory records, file chunks and recalled messages."""

    memories: list[Piece] = field(default_factory=list)
    files: list[Piece] = field(default_factory=list)
    recalled: list[Piece] = field(default_factory=list)

    def blocks(self) -> list[str]:
        blocks = memory_blocks(self.memories + self.files)
        if self.recalled:
            blocks.append(recall_block(self.recalled))
        return blocks

    def items(self) -> list[ContextItem]:
        return ([p.item for p in self.memories + self.files]
                + sorted((p.item for p in self.recalled), key=lambda i: i.first_seq))

    def shrink(self) -> bool:
        """Drop the least valuable piece: recall's weakest, then file chunks, then records."""
        for pieces in (self.recalled, self.files, self.memories):
            if pieces:
                pieces.pop()
                return True
        return False


def _for_the_question(history: History, query: str, left: int, shown_from: int, shown_ids: set[str],
                      sources: Sources) -> tuple[_Question, int]:
    """Memory records, file chunks and recalled messages within ``left`` tokens, and the
    tokens they leave. The records and chunks take their share first and recall what it
    has matches for; what recall leaves flows back to the records, then the chunks."""
    view = sources.view
    cfg = view.config
    out = _Question()
    records = sources.records_for(query)
    hits = sources.hits_for(query)

    def memory_cost() -> int:
        return view.piece_cost(LONG_TERM_HEADER) + sum(p.tokens for p in out.memories) if out.memories else 0

    def files_cost() -> int:
        return files_block_cost(view) + sum(p.tokens for p in out.files) if out.files else 0

    if records:
        out.memories = memory_pieces(view, records, int(left * cfg.memory_share))
    if hits:
        out.files = file_pieces(view, hits, int(left * cfg.files_share))
    left -= memory_cost() + files_cost()
    out.recalled = sources.recalled.pieces(history.cid, query, shown_from, left - view.piece_cost(RECALL_HEADER),
                                           shown_ids)
    left -= recall_cost(view, out.recalled)
    if left > 0 and records:
        before = memory_cost()
        out.memories = memory_pieces(view, records, before + left) or out.memories
        left -= memory_cost() - before
    if left > 0 and hits:
        before = files_cost()
        out.files = file_pieces(view, hits, before + left) or out.files
        left -= files_cost() - before
    return out, left


def _prefix_cut(units: list[list[Message]], split: int, cost: int, cap: int, view: MessageView) -> int:
    """How many of the oldest raw units join the prefix: while it stays within ``cap``."""
    k = 0
    while k < split and cost + view.unit_cost(units[k]) <= cap:
        cost += view.unit_cost(units[k])
        k += 1
    return k


def _tail_from(units: list[list[Message]], k: int, start: int, limit: int, view: MessageView,
               avoid: set[str] | frozenset[str] = frozenset()) -> int:
    """Where the shown tail starts when it grows from ``start`` back towards ``k`` (the
    prefix's end) by whole units, newest first, within ``limit`` more tokens, stopping
    before a unit with a message in ``avoid`` (already recalled: nothing twice)."""
    while start > k and view.unit_cost(units[start - 1]) <= limit and not any(m.id in avoid for m in units[start - 1]):
        limit -= view.unit_cost(units[start - 1])
        start -= 1
    return start


def _gap_line(units: list[list[Message]], zone: tzinfo) -> str:
    first, last = units[0][0], units[-1][-1]
    return (f"Not shown for space: messages #{first.seq}-#{last.seq} "
            f"({format_span(first.created_at, last.created_at, zone)}). Use lcm_grep to search them.")


def stable_layout(history: History, budget: int, query: str | None, sources: Sources) -> AssembledContext | None:
    """The cache-stable context (see the module docstring), or None when the summaries
    and the newest turn do not fit (the budgeted layout then decides what to leave out)."""
    view = sources.view
    room = budget - REPLY_PRIMING
    units = tool_groups(history.raw)
    if not (query and query.strip()):  # nothing depends on a question: everything active, or the budgeted layout
        chats, items, cost, whole = _fixed_prefix(history, sources, room)
        if not whole or _prefix_cut(units, len(units), cost, room, view) < len(units):
            return None
        return _Composer(chats, items, units, len(units), len(units), None, view).result(budget)
    # the prefix's size comes from the window, never from this call's budget (an agent's
    # turn passes the window less its own new message, which differs from turn to turn)
    cap = prefix_cap(view.config)
    chats, items, cost, _ = _fixed_prefix(history, sources, cap)
    split = next((i for i in range(len(units) - 1, -1, -1) if units[i][0].role == "user"), len(units))
    k = _prefix_cut(units, split, cost, cap, view)
    block = MESSAGE_OVERHEAD + view.counter.count(DYNAMIC_HEADER) + 2
    newest = sum(view.unit_cost(u) for u in units[split:])
    while k and cost + sum(view.unit_cost(u) for u in units[:k]) + newest + block > room:
        k -= 1  # a budget well below the window: the prefix gives way (only then)
    cost += sum(view.unit_cost(u) for u in units[:k]) + newest
    left = room - cost - block
    if left < room * view.config.dynamic_share / 2:
        return None  # the newest turn leaves the question too little: the budgeted layout serves it better
    # the newest raw messages after the prefix take the tail's share, then the question
    shown = _tail_from(units, k, split, min(left, int(room * view.config.tail_share)), view)
    left -= sum(view.unit_cost(u) for u in units[shown:split])
    pointer = view.piece_cost(_gap_line(units[k:shown], view.zone)) if shown > k else 0
    if units[shown:]:
        shown_from = units[shown][0].seq
    else:
        shown_from = history.raw[-1].seq + 1 if history.raw else history.covered + 1
    prefix_ids = {m.id for u in units[:k] for m in u} | {m.id for m in history.pinned}
    question, left = _for_the_question(history, query, left - pointer, shown_from, prefix_ids, sources)
    recalled = {p.item.ref for p in question.recalled}
    shown = _tail_from(units, k, shown, left + pointer, view, recalled)  # what the question left: more of the tail
    return _Composer(chats, items, units, k, shown, question, view).result(budget)


class _Composer:
    """The prefix (pinned, summaries, ``units[:k]``), the question's block, then
    ``units[shown:]`` (the tail and the newest turn). With a question the block is there
    (if only its header) whenever any raw message follows it: what comes before it is
    then exactly the prefix, and the next turn's context starts with it."""

    def __init__(self, chats: list[ChatMessage], items: list[ContextItem], units: list[list[Message]], k: int,
                 shown: int, question: _Question | None, view: MessageView) -> None:
        self.prefix = list(chats) + [view.chat(m) for u in units[:k] for m in u]
        # what the next turn's context starts with too: without a question every raw message
        # is "prefix" here, and the next turn's (with one) may hold fewer of them
        self.stable = len(self.prefix) if question is not None else len(chats)
        self.items = items
        self.units = units
        self.k = k
        self.shown = shown
        self.question = question
        self.view = view
        self.newest_user = next((i for i in range(len(units) - 1, -1, -1) if units[i][0].role == "user"), len(units))

    def compose(self) -> list[ChatMessage]:
        out = list(self.prefix)
        if self.question is not None:
            blocks = self.question.blocks()
            if self.shown > self.k:
                blocks.append(_gap_line(self.units[self.k:self.shown], self.view.zone))
            if blocks:
                out.append({"role": "system", "content": DYNAMIC_HEADER + SEP + SEP.join(blocks)})
        return out + [self.view.chat(m) for u in self.units[self.shown:] for m in u]

    def result(self, budget: int) -> AssembledContext | None:
        """The context, trimmed (the question's weakest pieces first, then the tail's
        oldest units) if joining its parts cost more than they did apart; None if even
        that does not fit."""
        messages = self.compose()
        tokens = count_chat_tokens(self.view.counter, messages)
        while tokens > budget:
            if not (self.question is not None and self.question.shrink()):
                if self.shown >= self.newest_user:
                    return None
                self.shown += 1
            messages = self.compose()
            tokens = count_chat_tokens(self.view.counter, messages)
        view = self.view
        raw_items = [ContextItem("fresh_tail", m.id, view.message_cost(m), m.seq, m.seq)
                     for u in self.units[:self.k] + self.units[self.shown:] for m in u]
        extra = self.question.items() if self.question is not None else []
        return AssembledContext(messages=messages, tokens=tokens, budget_tokens=budget,
                                items=tuple(self.items + extra + raw_items), stable_prefix=self.stable)
