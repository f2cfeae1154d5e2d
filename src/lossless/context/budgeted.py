"""The budgeted layout: each tier first takes up to its share of the budget. Without a
question, what the tail, summaries and root leave goes to them again in that order. With
one, recall takes all the room left (as deep as its matches go: what matches the
question outranks older recent messages), what recall leaves goes to the memories and
file chunks, the summaries, the root, and last the tail. Pointers say where the rest is. The result is then counted with
the configured tokenizer and trimmed, lowest priority first, if joining the pieces cost
a token more than the parts did."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from lossless.compaction.engine import tool_groups
from lossless.context.inputs import History, Sources
from lossless.context.pieces import (
    MEMORY_HEADER,
    SEP,
    backlog_line,
    memory_blocks,
    recall_block,
    root_pointer,
)
from lossless.context.tiers import (
    FilesTier,
    MemoriesTier,
    NewestUnitTier,
    PinnedTier,
    PointersTier,
    RecallTier,
    RootTier,
    SummariesTier,
    TailTier,
    Tier,
)
from lossless.core.tokens import MESSAGE_OVERHEAD, REPLY_PRIMING, count_chat_tokens
from lossless.core.types import AssembledContext, ChatMessage, ContextItem

if TYPE_CHECKING:
    from collections.abc import Sequence

    from lossless.core.types import Message
    from lossless.files import FileHit
    from lossless.longterm import MemoryRecord

__all__ = ["budgeted_layout"]


@dataclass(frozen=True)
class _Plan:
    """How the room left after the pinned messages is shared out."""

    body_room: int  # for the tiers
    pointer_room: int  # held back for pointers to the gaps a selective tail leaves
    backlog_room: int  # held back for the pointer to what the worker has not summarized
    allow: dict[str, int]  # each tier's share of body_room


def _plan(history: History, sources: Sources, room: int, want_recall: bool, records: list[MemoryRecord],
          hits: list[FileHit]) -> _Plan:
    view = sources.view
    config = view.config
    has_summaries = bool(history.frontier)
    shares = {
        "tail": config.tail_share,
        "summaries": config.summaries_share if has_summaries else 0.0,
        "root": config.root_share if has_summaries and history.root is None else 0.0,  # a real root is placed first
        "recall": config.recall_share if want_recall else 0.0,
        "memory": config.memory_share * max(config.recall_share, 0.1) if records else 0.0,
        "files": config.files_share * max(config.recall_share, 0.1) if hits else 0.0,
    }
    total_share = sum(shares.values()) or 1.0
    memory_overhead = MESSAGE_OVERHEAD + view.counter.count(MEMORY_HEADER) + 2
    body_room = room - (memory_overhead if (has_summaries or want_recall or records or hits) else 0)
    # selective leaves gaps in the raw messages: keep room to say where they are
    pointer_room = 0
    if config.strategy == "selective" and len(history.raw) > 1:
        pointer_room = 60 + (0 if (has_summaries or want_recall) else memory_overhead)
        pointer_room = min(pointer_room, body_room // 6)
    body_room -= pointer_room
    # what the worker has not summarized yet is not shown: its pointer goes first
    backlog_room = view.piece_cost(backlog_line(history.backlog)) if history.backlog else 0
    if backlog_room and backlog_room <= body_room // 4:
        body_room -= backlog_room
    else:
        backlog_room = 0
    allow = {k: int(body_room * v / total_share) for k, v in shares.items()}
    if not history.frontier and history.complete and sum(map(view.unit_cost, tool_groups(history.raw))) <= room:
        allow["tail"] = room  # nothing summarized and everything fits: the whole history, verbatim
    return _Plan(body_room, pointer_room, backlog_room, allow)


def budgeted_layout(history: History, budget: int, query: str | None, sources: Sources) -> AssembledContext:
    """The context for ``budget`` tokens, built tier by tier (see the module docstring)."""
    view = sources.view
    room = budget - REPLY_PRIMING
    if room <= MESSAGE_OVERHEAD:
        return AssembledContext(messages=[], tokens=0, budget_tokens=budget)
    asked = bool(query and query.strip())
    root = RootTier(history.root, sources.summaries, fixed=True) if history.root is not None else None
    placed = 0  # what the root took before the plan (its later growth counts as the tiers' spending)
    root_pointer_room = 0  # held back for the line that stands for a root left out
    if root is not None:  # the whole-conversation root first (seed 001: priority 0, never truncated) ...
        overhead = MESSAGE_OVERHEAD + view.counter.count(MEMORY_HEADER) + 2
        # ... abridged past its share; with a question, a root that does not fit its share
        # waits for what recall leaves (a pointer says where it is meanwhile)
        placed = root.place(max(0, room - overhead), view.config.root_share, at_least=not asked)
        room -= placed
        if root.piece is None and root.node is not None:
            root_pointer_room = min(view.piece_cost(root_pointer(root.node)), max(0, room - overhead) // 4)
            room -= root_pointer_room
    pinned = PinnedTier(history.pinned, view)
    room -= pinned.take(room)
    want_recall = asked and (history.covered > 0 or len(history.raw) > 0)
    records = sources.records_for(query) if query and asked else []
    hits = sources.hits_for(query) if query and asked else []
    plan = _plan(history, sources, room, want_recall, records, hits)
    allow = plan.allow

    frontier, raw = history.frontier, history.raw
    # with a question and no turn waiting for its answer (the newest message is a reply,
    # and the question is not the newest user message), the tail reserves nothing: what
    # the question recalls comes first, then the tail grows, newest first, into the rest
    # before anything else does (bench/README.md#room-per-tier)
    pending = not want_recall or _pending_turn(raw, query)
    if not pending:
        allow["tail"] = 0
    tail = TailTier(tool_groups(raw), view, selective=view.config.strategy == "selective",
                    turn_floor=plan.body_room // 4 if pending else 0,
                    turn_room=room if _pending_turn(raw, query) else 0)
    if root is None:  # no whole-conversation root yet: the oldest frontier summary stands in for it
        recent = frontier[1:] if len(frontier) > 1 else []
        root = RootTier(frontier[0] if frontier else None, sources.summaries)
    else:
        recent = list(frontier)
    summaries = SummariesTier(recent, sources.summaries, levels=True)
    # the root is given the summaries' share too when it is the only summary
    root_share = allow["root"] + max(0, allow["summaries"]) if not recent else allow["root"]
    for tier, share in ((tail, allow["tail"]), (summaries, allow["summaries"]), (root, root_share)):
        tier.take(share)
    # what the shares left: without a question, the tail first, then summaries, then the
    # root unabridged; with one, recall first (what matches the question outranks older
    # recent messages), and the tail grows last into what nothing else used
    leftover = (plan.body_room - tail.spent - summaries.spent - (root.spent - placed)
                - allow["recall"] - allow["memory"] - allow["files"])
    for tier in () if want_recall else (tail, summaries, root):
        if leftover > 0:
            leftover -= tier.take(leftover)

    spent = tail.spent + summaries.spent + root.spent - placed
    memories, files = MemoriesTier(records, view), FilesTier(hits, view)
    spent += memories.take(allow["memory"]) + files.take(allow["files"])
    fallback = raw[-1].seq + 1 if raw else history.covered + 1
    recall = RecallTier(sources.recalled, history.cid, query if want_recall else None, tail, fallback,
                        frozenset(m.id for m in history.pinned))
    spent += recall.take(plan.body_room - spent)
    if query and want_recall:  # a root left out for its cost may still carry the answer
        spent += root.contest(recall, query)
    # room recall did not use flows to the memories and file chunks a share cut short,
    # then to the summaries and the root (recall's messages are not in them: nothing twice)
    late: tuple[Tier, ...] = (
        (memories, files, summaries, root, tail) if pending else (tail, memories, files, summaries, root)
    ) if want_recall else (memories, files, summaries, root)
    for taker in late:
        if plan.body_room - spent > 0:
            spent += taker.take(plan.body_room - spent)
    if want_recall and tail.spent:
        spent -= recall.drop_shown()  # (nothing twice: the tail may have grown over recalled messages)
    pointers = PointersTier(view, frontier, raw, history.backlog, summaries=summaries, root=root, tail=tail)
    pointers.take(plan.body_room + plan.pointer_room + plan.backlog_room + root_pointer_room - spent)

    parts = _Parts(pinned, root, summaries, pointers, recall, tail, memories, files)
    ladder: list[Tier] = sorted([pinned, tail, NewestUnitTier(tail), summaries, root, memories, files, recall,
                                 pointers], key=lambda t: t.priority)
    messages, items = parts.compose()
    tokens = count_chat_tokens(view.counter, list(messages))
    while tokens > budget and any(tier.shrink() for tier in ladder):
        messages, items = parts.compose()
        tokens = count_chat_tokens(view.counter, list(messages))
    return AssembledContext(messages=messages, tokens=tokens, budget_tokens=budget, items=tuple(items))


def _pending_turn(raw: Sequence[Message], query: str | None) -> bool:
    """Whether the newest turn waits for the model's answer: the newest message is not an
    assistant's reply, or it is and the question is the newest user message itself."""
    if not raw:
        return False
    if raw[-1].role != "assistant":
        return True
    newest_user = next((m for m in reversed(raw) if m.role == "user"), None)
    return bool(query and newest_user is not None and query.strip() == newest_user.text.strip())


@dataclass(frozen=True)
class _Parts:
    """The tiers, put together in the order the model reads them."""

    pinned: PinnedTier
    root: RootTier
    summaries: SummariesTier
    pointers: PointersTier
    recall: RecallTier
    tail: TailTier
    memories: MemoriesTier
    files: FilesTier

    def compose(self) -> tuple[list[ChatMessage], list[ContextItem]]:
        """The pinned messages, one memory block (the root, memories and files, pointers,
        recent summaries oldest first, recalled messages in conversation order), then the
        tail oldest first."""
        messages: list[ChatMessage] = [c for c, _ in self.pinned.shown]
        items: list[ContextItem] = [i for _, i in self.pinned.shown]
        blocks: list[str] = []
        root = self.root.piece
        if root is not None:  # first: what the whole conversation was about
            blocks.append(root.text)
            items.append(root.item)
        outside = self.memories.pieces + self.files.pieces
        blocks += memory_blocks(outside)
        items.extend(p.item for p in outside)
        blocks.extend(self.pointers.lines)
        for piece in reversed(self.summaries.chosen):  # chosen newest first; show in conversation order
            blocks.append(piece.text)
            items.append(piece.item)
        if self.recall.pieces:
            blocks.append(recall_block(self.recall.pieces))
            items.extend(sorted((p.item for p in self.recall.pieces), key=lambda i: i.first_seq))
        if blocks:
            messages.append({"role": "system", "content": MEMORY_HEADER + SEP + SEP.join(blocks)})
        for chats, unit, cost in reversed(self.tail.shown):
            messages.extend(chats)
            items.append(ContextItem("fresh_tail", unit[0].id, cost, unit[0].seq, unit[-1].seq))
        return messages, items
