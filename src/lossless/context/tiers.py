"""The tiers of the budgeted layout. Each tier is an object with a ``priority``, a
``take(room)`` that adds what fits in ``room`` more tokens (and says how many it spent),
and a ``shrink()`` that drops its least valuable part. Filling asks the tiers in turn;
trimming asks them in priority order, lowest first, until the context fits.

Priorities, lowest (dropped first) to highest: pointers to what is not shown, workspace
files, long-term memories, recall, recent summaries, the root, the older tail units,
the pinned system prompt and, last of all, the newest tail unit.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Protocol

from lossless.context.excerpt import query_terms
from lossless.context.levels import finest_cut
from lossless.context.lookups import file_pieces, files_block_cost, memory_pieces
from lossless.context.pieces import (
    LONG_TERM_HEADER,
    MIN_ABRIDGED,
    RECALL_HEADER,
    Piece,
    ShownUnit,
    backlog_line,
    root_pointer,
)
from lossless.context.recalled import RecalledMessages, recall_cost
from lossless.context.shown import MessageView
from lossless.context.summaries import SummaryPieces
from lossless.core.render import format_span
from lossless.core.types import ChatMessage, ContextItem, Message, Summary

if TYPE_CHECKING:
    from lossless.files import FileHit
    from lossless.longterm import MemoryRecord

__all__ = [
    "FilesTier",
    "MemoriesTier",
    "NewestUnitTier",
    "PinnedTier",
    "PointersTier",
    "RecallTier",
    "RootTier",
    "SummariesTier",
    "TailTier",
    "Tier",
]


class Tier(Protocol):
    """One tier of the context: what it holds grows with :meth:`take`, and shrinks
    (lowest ``priority`` first) when the composed context is over the budget."""

    priority: int
    spent: int  # tokens its parts cost, as :meth:`take` counted them

    def take(self, room: int) -> int:
        """Add what fits in ``room`` more tokens; the tokens added."""
        ...

    def shrink(self) -> bool:
        """Drop the least valuable part; False when there is nothing this tier may drop."""
        ...


class PinnedTier:
    """The conversation's opening system messages, verbatim (abridged past a quarter of the room)."""

    priority = 80

    def __init__(self, messages: list[Message], view: MessageView) -> None:
        self.messages = messages
        self.view = view
        self.shown: list[tuple[ChatMessage, ContextItem]] = []
        self.spent = 0

    def take(self, room: int) -> int:
        added = 0
        for msg in self.messages:
            chat = msg.to_chat()
            cost = self.view.chat_cost(chat)
            cap = max(room // 4, 1)
            if cost > cap:
                abridged = self.view.abridge(msg, cap)
                if abridged is None:
                    continue
                chat, cost = abridged, self.view.chat_cost(abridged)
            self.shown.append((chat, ContextItem("pinned", msg.id, cost, msg.seq, msg.seq)))
            room -= cost
            added += cost
        self.spent += added
        return added

    def shrink(self) -> bool:
        if not self.shown:
            return False
        self.shown.pop()
        return True


class TailTier:
    """P0, the fresh tail: the newest raw messages, verbatim, in units that never split a
    tool call from its results. The newest user turn (and what followed it) comes first,
    abridged if it does not fit; then older units newest first, or (``selective``) by
    importance blended with recency, leaving gaps that recall can fill."""

    priority = 70

    def __init__(self, units: list[list[Message]], view: MessageView, *, selective: bool, turn_floor: int,
                 turn_room: int = 0) -> None:
        self.units = units
        self.view = view
        self.selective = selective
        self.turn_floor = turn_floor  # the newest turn gets at least this much room
        self.turn_room = turn_room  # when the turn waits for an answer: its user message may take this much
        self.shown: list[ShownUnit] = []  # newest first
        self.taken: set[int] = set()
        self.spent = 0
        self.last_user = next((i for i in range(len(units) - 1, -1, -1) if units[i][0].role == "user"), len(units) - 1)
        self.turn_placed = False

    def take(self, room: int) -> int:
        if not self.turn_placed:
            if room <= 0 and self.turn_floor <= 0:
                return 0  # nothing reserved: the newest turn waits for the room the tail gets later
            self.turn_placed = True
            added = self._take_newest_turn(room)
        else:
            added = self._take_units(room)
        self.spent += added
        return added

    def _take_newest_turn(self, share: int) -> int:
        """The newest user turn first: it is what the model must answer. It gets the
        tail's ``share`` (at least ``turn_floor``) and is abridged where it does not fit;
        whole, the rest of the share goes to older units."""
        must = self.units[self.last_user:]
        cap = max(share, self.turn_floor)
        spent = self._take_units(cap, upto=len(must))
        if len(self.shown) < len(must):
            self.shown.clear()
            self.taken.update(range(self.last_user, len(self.units)))
            self._abridged_turn(must, cap)
            return sum(c for _, _, c in self.shown)
        return spent + self._take_units(max(0, share - spent))

    def _take_units(self, limit: int, upto: int | None = None) -> int:
        """Whole units within ``limit``, newest first (the newest ``upto`` only, if given)."""
        units, selective = self.units, self.selective and upto is None
        spent = 0
        newest_first = range(len(units) - 1, -1, -1)
        order = list(newest_first)[: len(units) if upto is None else upto]
        if selective:
            order = sorted(order, key=lambda i: -self.view.unit_value(units[i], i, len(units)))
        for i in order:
            if i in self.taken:
                continue
            unit = units[i]
            cost = self.view.unit_cost(unit)
            if cost > limit - spent:
                if selective:
                    continue  # a smaller, less important unit may still fit
                break
            self.shown.append(([self.view.chat(m) for m in unit], unit, cost))
            self.taken.add(i)
            spent += cost
        self.shown.sort(key=lambda t: -t[1][0].seq)
        return spent

    def _abridged_turn(self, must: list[list[Message]], cap: int) -> None:
        """The newest turn cut to ``cap``: its user message (whole if it takes at most a
        third, else abridged to that), then its newest replies, whole or abridged, while
        room lasts. When the turn waits for the model's answer (``turn_room``, the context's
        room, is given), its user message is what the model must answer: the newest message
        is cut only if it alone is larger than ``turn_room`` (DESIGN), and where a third
        shows none of it, it takes what it needs of ``cap``, then of ``turn_room``."""
        head, replies = must[0], must[1:]
        user_cap = cap // 3 if replies else cap
        first: list[ShownUnit] = []
        cost = self.view.unit_cost(head)
        if cost <= (user_cap if replies else max(cap, self.turn_room)):
            first.append(([self.view.chat(m) for m in head], head, cost))
        for room in sorted({user_cap, cap, max(cap, self.turn_room)}) if self.turn_room else (user_cap,):
            if first:
                break
            if cost <= room:
                first.append(([self.view.chat(m) for m in head], head, cost))
            else:
                self._abridged_unit(head, first, room, keep=True)
        left = cap - sum(c for _, _, c in first)
        for unit in reversed(replies):
            whole = self.view.unit_cost(unit)
            if whole <= left:
                self.shown.append(([self.view.chat(m) for m in unit], unit, whole))
                left -= whole
                continue
            before = len(self.shown)
            if left >= MIN_ABRIDGED:
                self._abridged_unit(unit, self.shown, left)
            if len(self.shown) > before:
                left -= self.shown[-1][2]
            break
        self.shown.extend(first)

    def _abridged_unit(self, unit: list[Message], into: list[ShownUnit], allowance: int, *,
                       keep: bool = False) -> None:
        view = self.view
        if len(unit) == 1:
            chat = view.abridge(unit[0], allowance, keep=keep)
            if chat is not None:
                into.append(([chat], unit, view.chat_cost(chat)))
            return
        # a tool call with its results: keep the call whole, share the rest among results
        call = unit[0].to_chat()
        cost = view.chat_cost(call)
        per = (allowance - cost) // max(1, len(unit) - 1)
        chats: list[ChatMessage] = [call]
        for msg in unit[1:]:
            chat = view.abridge(msg, per)
            if chat is None:
                return
            chats.append(chat)
            cost += view.chat_cost(chat)
        if cost <= allowance:
            into.append((chats, unit, cost))

    def shown_ids(self) -> set[str]:
        return {m.id for _, unit, _ in self.shown for m in unit}

    def recall_from(self, fallback: int) -> int:
        """The first seq recall leaves to the tail: where the shown tail starts (the
        newest turn, when ``selective`` left gaps that recall may fill)."""
        shown_from = self.shown[-1][1][0].seq if self.shown else fallback
        if self.selective:
            shown_from = self.units[self.last_user][0].seq if self.units else shown_from
        return shown_from

    def shrink(self) -> bool:
        """Drop the oldest unit shown, never the newest (:class:`NewestUnitTier` does that)."""
        if len(self.shown) <= 1:
            return False
        self.shown.pop()
        return True


class NewestUnitTier:
    """The tail's newest unit as a tier of its own: the very last thing trimming drops."""

    priority = 90
    spent = 0

    def __init__(self, tail: TailTier) -> None:
        self.tail = tail

    def take(self, room: int) -> int:
        return 0  # the tail tier places it

    def shrink(self) -> bool:
        if not self.tail.shown:
            return False
        self.tail.shown.clear()
        return True


class SummariesTier:
    """P1: recent summaries, newest first. When the whole frontier fits, the finest cut
    of the DAG that fits is shown (:mod:`lossless.context.levels`: the recent history in
    more detail, a run of summaries swapped for its parent where room is short); when
    not even the frontier fits, its newest summaries (abridged ones end the run)."""

    priority = 50

    def __init__(self, recent: list[Summary], summaries: SummaryPieces, *, levels: bool = False) -> None:
        self.recent = recent
        self.summaries = summaries
        self.levels = levels and not summaries.hierarchical  # (hierarchical shows the frontier its own way)
        self.costs: dict[str, int] = {}
        self.chosen: list[Piece] = []  # newest first
        self.spent = 0

    def take(self, room: int) -> int:
        if self.levels and self.recent:
            cut = finest_cut(self.recent, self.spent + room, self._whole_cost, self._children)
            if cut is not None:
                pieces = [self._whole(node) for node in reversed(cut)]
                spent = sum(p.tokens for p in pieces)
                if spent <= self.spent:
                    return 0
                added, self.chosen, self.spent = spent - self.spent, pieces, spent
                return added
        spent = self.summaries.take(self.recent, self.chosen, self.spent + room, already=self.spent)
        added, self.spent = spent - self.spent, spent
        return added

    def _whole(self, node: Summary) -> Piece:
        text = self.summaries.view.summary_text(node)
        cost = self.summaries.view.piece_cost(text)
        return Piece(text, cost, ContextItem("summary", node.id, cost, node.first_seq, node.last_seq))

    def _whole_cost(self, node: Summary) -> int:
        cost = self.costs.get(node.id)
        if cost is None:  # asked again on each take: counted once per assembly
            cost = self.costs[node.id] = self.summaries.view.piece_cost(self.summaries.view.summary_text(node))
        return cost

    def _children(self, node: Summary) -> list[Summary]:
        store = self.summaries.store
        return [store.get_summary(ref.id) for ref in node.sources if ref.kind == "summary"]

    def covers(self, node: Summary) -> bool:
        """Whether the shown summaries cover ``node``'s span (it, or a cut below it)."""
        return any(node.first_seq <= p.item.first_seq and p.item.last_seq <= node.last_seq for p in self.chosen)

    def shrink(self) -> bool:
        if not self.chosen:
            return False
        self.chosen.pop()
        return True


class RootTier:
    """P2: the root. The whole-conversation root when compaction has written one
    (``fixed``: placed first, never dropped by trimming); else the oldest frontier
    summary, covering the start of the history. Given more room, an abridged root is
    made again from the whole of it."""

    priority = 60

    def __init__(self, node: Summary | None, summaries: SummaryPieces, *, fixed: bool = False) -> None:
        self.node = node
        self.summaries = summaries
        self.fixed = fixed
        self.piece: Piece | None = None
        self.spent = 0

    def take(self, room: int) -> int:
        if self.node is None or (self.piece is not None and not self.piece.abridged):
            return 0
        better = self.summaries.root(self.node, self.spent + room)
        if better is None:
            return 0
        added, self.piece, self.spent = better.tokens - self.spent, better, better.tokens
        return added

    def least_cost(self) -> int:
        """What the root's least form costs: its frame and the shortest excerpt worth showing."""
        if self.node is None:
            return 0
        return self.summaries.view.piece_cost(self.summaries.view.summary_text(self.node, "")) + MIN_ABRIDGED + 2

    def contest(self, recall: RecallTier, query: str) -> int:
        """With a question, a root left out for its cost comes in after all when its least
        form, its sentences that share the question's words first, holds more of those
        words than the recalled messages it would push out (the last ones packed, the
        weakest), counting only words the recalled text it leaves does not already
        contain. The tokens this adds (negative: it saved some), 0 when the root stays out."""
        if self.node is None or self.piece is not None or not self.fixed or not recall.pieces:
            return 0
        view = self.summaries.view
        terms = query_terms(query)
        cache = view.caches.terms
        if self.node.id not in cache:  # (a root is immutable: its words are read once)
            if len(cache) >= 256:
                cache.clear()
            cache[self.node.id] = query_terms(self.node.content)
        in_root = cache[self.node.id] & terms
        if not in_root:
            return 0
        least = self.least_cost()
        kept = list(recall.pieces)
        while kept and recall_cost(view, kept) + least > recall.spent:
            kept.pop()
        pushed = query_terms(" ".join(p.text for p in recall.pieces[len(kept):])) & terms
        kept_text = " ".join(p.text for p in kept).lower()  # (a word counts as shown where it occurs)
        shown = {t for t in in_root | pushed if t in kept_text}
        if len(in_root - shown) <= len(pushed - shown):
            return 0  # not even the whole root would bring more of the question's words
        piece = self.summaries.piece(self.node, "root", least, focus=query)
        if piece is None or len((query_terms(piece.text) & in_root) - shown) <= len(pushed - shown):
            return 0
        while kept and recall_cost(view, kept) + piece.tokens > recall.spent:
            kept.pop()  # (the piece may cost a little more than its least form)
        before = recall.spent
        recall.pieces, recall.spent = kept, recall_cost(view, kept)
        self.piece, self.spent = piece, piece.tokens
        return piece.tokens + recall.spent - before

    def place(self, room: int, share: float, *, at_least: bool = True) -> int:
        """The whole-conversation root placed first, in ``room`` tokens: whole when it
        takes at most ``share`` of them (``root_share``), else abridged to that, or (a
        budget so small that this says nothing, and ``at_least``) to the least that still
        says something; the rest stays for the newest turn and what the question
        recalls. Without ``at_least`` (a question is asked) a root that does not fit its
        share waits: it gets what recall leaves, else a pointer (:class:`PointersTier`)."""
        added = self.take(int(room * share))
        if self.piece is None and self.node is not None and at_least:
            least = self.summaries.view.piece_cost(self.summaries.view.summary_text(self.node, "")) + MIN_ABRIDGED + 2
            step = MIN_ABRIDGED // 2
            while self.piece is None and least < room + step:  # the first sentence that fits says something
                added = self.take(min(least, room))
                least += step
        return added

    def shrink(self) -> bool:
        if self.piece is None or self.fixed:
            return False
        self.piece = None
        return True


class _RepackedTier(ABC):
    """A tier of pieces that repacks its whole list each time it is offered more room (a
    piece cut before may now fit whole) and drops its last piece to shrink."""

    priority: int

    def __init__(self) -> None:
        self.pieces: list[Piece] = []
        self.spent = 0

    @abstractmethod
    def _pack(self, room: int) -> tuple[list[Piece], int]:
        """The pieces that fit in ``room`` and what they cost."""

    def take(self, room: int) -> int:
        """Repack within what it holds plus ``room``; the tokens added."""
        pieces, spent = self._pack(self.spent + room)
        if spent <= self.spent:
            return 0
        added, self.pieces, self.spent = spent - self.spent, pieces, spent
        return added

    def shrink(self) -> bool:
        if not self.pieces:
            return False
        self.pieces.pop()
        return True


class MemoriesTier(_RepackedTier):
    """Long-term memory records of this user/agent that match the question. They take
    their share first and, like the file chunks, whatever recall leaves."""

    priority = 30

    def __init__(self, records: list[MemoryRecord], view: MessageView) -> None:
        super().__init__()
        self.records = records
        self.view = view

    def _pack(self, room: int) -> tuple[list[Piece], int]:
        if not self.records:
            return [], 0
        pieces = memory_pieces(self.view, self.records, room)
        return pieces, (self.view.piece_cost(LONG_TERM_HEADER) + sum(p.tokens for p in pieces) if pieces else 0)


class FilesTier(_RepackedTier):
    """Chunks of the workspace files the question names."""

    priority = 20

    def __init__(self, hits: list[FileHit], view: MessageView) -> None:
        super().__init__()
        self.hits = hits
        self.view = view

    def _pack(self, room: int) -> tuple[list[Piece], int]:
        if not self.hits:
            return [], 0
        pieces = file_pieces(self.view, self.hits, room)
        return pieces, (files_block_cost(self.view) + sum(p.tokens for p in pieces) if pieces else 0)


class RecallTier:
    """P3: older messages matching the question that the tail does not already show."""

    priority = 40

    def __init__(self, recalled: RecalledMessages, cid: str, query: str | None, tail: TailTier,
                 fallback_from: int, pinned: frozenset[str] = frozenset()) -> None:
        self.recalled = recalled
        self.cid = cid
        self.query = query
        self.tail = tail
        self.fallback_from = fallback_from  # where recall stops when the tail shows nothing
        self.pinned = pinned  # the pinned messages' ids: shown already, never recalled again
        self.pieces: list[Piece] = []
        self.spent = 0

    def take(self, room: int) -> int:
        if not self.query:
            return 0
        header = self.recalled.view.piece_cost(RECALL_HEADER)
        self.pieces = self.recalled.pieces(self.cid, self.query, self.tail.recall_from(self.fallback_from),
                                           room - header, self.tail.shown_ids() | self.pinned)
        self.spent = recall_cost(self.recalled.view, self.pieces)
        return self.spent

    def drop_shown(self) -> int:
        """Drop the pieces the tail now shows itself (it grew into the room recall left,
        back over messages recall had placed): the tokens freed."""
        if not self.pieces:
            return 0
        start, ids = self.tail.recall_from(self.fallback_from), self.tail.shown_ids()
        kept = [p for p in self.pieces if p.item.first_seq < start and p.item.ref not in ids]
        if len(kept) == len(self.pieces):
            return 0
        before, self.pieces = self.spent, kept
        self.spent = recall_cost(self.recalled.view, kept)
        return before - self.spent

    def shrink(self) -> bool:
        if not self.pieces:
            return False
        self.pieces.pop()
        return True


class PointersTier:
    """Where what is not shown is: summaries and raw messages left out for space, and the
    messages the worker has not summarized yet. Only the pointers that fit are kept."""

    priority = 10

    def __init__(self, view: MessageView, frontier: list[Summary], raw: list[Message],
                 backlog: tuple[int, int] | None, *, summaries: SummariesTier, root: RootTier, tail: TailTier) -> None:
        self.view = view
        self.frontier = frontier
        self.raw = raw
        self.backlog = backlog
        self.summaries = summaries
        self.root = root
        self.tail = tail
        self.lines: list[str] = []
        self.spent = 0

    def take(self, room: int) -> int:
        self.lines = self._lines()
        while self.lines and sum(self.view.piece_cost(line) for line in self.lines) > room:
            self.lines.pop()
        self.spent = sum(self.view.piece_cost(line) for line in self.lines)
        return self.spent

    def _lines(self) -> list[str]:
        shown = {p.item.ref for p in self.summaries.chosen}
        if self.root.piece is not None:
            shown.add(self.root.piece.item.ref)
        lines: list[str] = []
        if self.backlog is not None and self.backlog[0] <= self.backlog[1]:
            lines.append(backlog_line(self.backlog))
        if self.root.fixed and self.root.piece is None and self.root.node is not None:
            lines.append(root_pointer(self.root.node))
        hidden = [s for s in self.frontier if s.id not in shown and not self.summaries.covers(s)]
        if hidden:
            ids = ", ".join(s.id for s in hidden[:6]) + (", …" if len(hidden) > 6 else "")
            root = self.root.piece.item if self.root.fixed and self.root.piece is not None else None
            briefly = (f" (in brief in the root {root.ref})"
                       if root is not None and root.last_seq >= hidden[-1].last_seq else "")
            lines.append(
                f"Not shown for space: {len(hidden)} summaries covering #{hidden[0].first_seq}-#{hidden[-1].last_seq} "
                f"({format_span(hidden[0].earliest_at, hidden[-1].latest_at, self.view.zone)}){briefly}: {ids}. "
                "Use lcm_expand or lcm_grep."
            )
        shown_ids = self.tail.shown_ids()
        gap = [m for m in self.raw if m.id not in shown_ids]
        if gap:
            some = "" if gap[-1].seq - gap[0].seq + 1 == len(gap) else f"{len(gap)} of the "
            lines.append(
                f"Not shown for space: {some}messages #{gap[0].seq}-#{gap[-1].seq} "
                f"({format_span(gap[0].created_at, gap[-1].created_at, self.view.zone)}), not yet summarized. Use lcm_grep to search them."
            )
        return lines

    def shrink(self) -> bool:
        if not self.lines:
            return False
        self.lines.pop()
        return True
