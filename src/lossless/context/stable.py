"""The cache-stable layout, for a call with the whole window: when the active context
(every frontier summary and every raw message) fits with room to spare, all of it is
shown, verbatim and in a fixed order, and what depends on the question (recall,
long-term memories, file chunks) goes in one block just before the newest user turn.
Between two compactions the prefix is then byte-identical from turn to turn and only
grows, so provider prompt caches keep hitting."""

from __future__ import annotations

from lossless.context.inputs import History, Sources
from lossless.context.lookups import file_pieces, memory_pieces
from lossless.context.pieces import (
    DYNAMIC_HEADER,
    LONG_TERM_HEADER,
    MEMORY_HEADER,
    RECALL_HEADER,
    SEP,
    Piece,
    memory_blocks,
)
from lossless.core.render import render_summary
from lossless.core.tokens import MESSAGE_OVERHEAD, REPLY_PRIMING, count_chat_tokens
from lossless.core.types import AssembledContext, ChatMessage, ContextItem

__all__ = ["stable_layout"]


def _fixed_prefix(history: History, sources: Sources) -> tuple[list[ChatMessage], list[ContextItem], int]:
    """The pinned messages and every frontier summary in one block: chats, items, cost."""
    view = sources.view
    chats: list[ChatMessage] = [view.chat(m) for m in history.pinned]
    items: list[ContextItem] = []
    cost = 0
    for msg, chat in zip(history.pinned, chats, strict=True):
        c = view.chat_cost(chat)
        items.append(ContextItem("pinned", msg.id, c, msg.seq, msg.seq))
        cost += c
    if history.frontier:
        texts = [render_summary(node) for node in history.frontier]
        block: ChatMessage = {"role": "system", "content": MEMORY_HEADER + SEP + SEP.join(texts)}
        chats.append(block)
        cost += view.chat_cost(block)
        for i, (node, text) in enumerate(zip(history.frontier, texts, strict=True)):
            items.append(ContextItem("root" if i == 0 else "summary", node.id, view.piece_cost(text),
                                     node.first_seq, node.last_seq))
    return chats, items, cost


def _for_the_question(history: History, query: str, left: int, sources: Sources) -> tuple[list[Piece], list[Piece]]:
    """Recalled messages, and memory records with file chunks, within ``left`` tokens."""
    view = sources.view
    memories: list[Piece] = []
    records = sources.records_for(query)
    if records:
        memories = memory_pieces(view, records, int(left * view.config.memory_share))
        left -= view.piece_cost(LONG_TERM_HEADER) + sum(p.tokens for p in memories)
    hits = sources.hits_for(query)
    if hits:
        files = file_pieces(view, hits, int(left * view.config.files_share))
        memories += files
        left -= sum(p.tokens for p in files)
    raw, frontier = history.raw, history.frontier
    shown_from = raw[0].seq if raw else (frontier[-1].last_seq + 1 if frontier else 1)
    dynamic = sources.recalled.pieces(history.cid, query, shown_from, left - view.piece_cost(RECALL_HEADER))
    return dynamic, memories


def stable_layout(history: History, budget: int, query: str | None, sources: Sources) -> AssembledContext | None:
    """The cache-stable context (see the module docstring), or None when the active
    context does not fit (the budgeted layout then decides what to leave out)."""
    view = sources.view
    room = budget - REPLY_PRIMING
    chats, items, cost = _fixed_prefix(history, sources)
    raw = history.raw
    cost += sum(view.message_cost(m) for m in raw)
    asked = bool(query and query.strip())
    if cost > (room * (1 - view.config.dynamic_share) if asked else room):
        return None
    split = next((i for i in range(len(raw) - 1, -1, -1) if raw[i].role == "user"), len(raw))
    older, newest = raw[:split], raw[split:]
    dynamic: list[Piece] = []
    memories: list[Piece] = []
    if asked and query:
        left = room - cost - MESSAGE_OVERHEAD - view.counter.count(DYNAMIC_HEADER) - 2
        dynamic, memories = _for_the_question(history, query, left, sources)
    tail_items = [ContextItem("fresh_tail", m.id, view.message_cost(m), m.seq, m.seq) for m in raw]

    def compose() -> list[ChatMessage]:
        out = list(chats) + [view.chat(m) for m in older]
        blocks = memory_blocks(memories)
        if dynamic:
            ordered = sorted(dynamic, key=lambda p: p.item.first_seq)
            blocks.append(RECALL_HEADER + "\n" + "\n".join(p.text for p in ordered))
        if blocks:
            out.append({"role": "system", "content": DYNAMIC_HEADER + SEP + SEP.join(blocks)})
        return out + [view.chat(m) for m in newest]

    messages = compose()
    tokens = count_chat_tokens(view.counter, messages)
    while tokens > budget and (dynamic or memories):
        (dynamic or memories).pop()
        messages = compose()
        tokens = count_chat_tokens(view.counter, messages)
    if tokens > budget:
        return None
    extra = [p.item for p in memories] + sorted((p.item for p in dynamic), key=lambda i: i.first_seq)
    return AssembledContext(messages=messages, tokens=tokens, budget_tokens=budget,
                            items=tuple(items + extra + tail_items))
