"""Frontier summaries as pieces of the memory block: whole when they fit, else abridged
to their most important lines, and (hierarchical) grouped by task: the active task's
summaries whole, completed tasks' as key points, history of no task by age (the newest
whole, older ones as key points, the oldest as statistics)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from lossless.context.pieces import MIN_ABRIDGED, Piece
from lossless.context.shown import MessageView
from lossless.context.tasks import TaskSpans
from lossless.core.render import format_span, neutralise_tags
from lossless.core.textfit import fit_text
from lossless.core.types import ContextItem, Summary
from lossless.store.base import Store

__all__ = ["KEY_POINTS_SHARE", "SummaryPieces"]

KEY_POINTS_SHARE = 0.25  # hierarchical: a completed task's summary as key points, at most this share of it


class SummaryPieces:
    """Summaries cut to the room a tier gives them, the way the config's strategy says."""

    def __init__(self, view: MessageView, store: Store, task_start: Callable[[str], int] | None = None) -> None:
        self.view = view
        self.store = store
        self.tasks = TaskSpans(store, task_start, view.caches.task_tagged)

    @property
    def hierarchical(self) -> bool:
        return self.view.config.strategy == "hierarchical"

    def fit(self, node: Summary, room: int, focus: str | None = None) -> str:
        """The summary's text abridged to ``room`` tokens (remembered between calls), the
        sentences sharing ``focus``'s words first when given (not remembered)."""
        if focus:
            return fit_text(node.content, room, self.view.counter, focus=focus)
        cache = self.view.caches.abridged_summaries
        key = (node.id, room)
        text = cache.get(key)
        if text is None:
            text = fit_text(node.content, room, self.view.counter)
            if len(cache) >= 4096:
                cache.clear()
            cache[key] = text
        return text

    def piece(self, node: Summary, tier: Literal["summary", "root"], allowance: int,
              focus: str | None = None) -> Piece | None:
        """The summary whole if it fits ``allowance``, else abridged (its sentences that
        share ``focus``'s words first, when given), else None."""
        piece_cost = self.view.piece_cost
        text = self.view.summary_text(node)
        cost = piece_cost(text)
        if cost <= allowance:
            return Piece(text, cost, ContextItem(tier, node.id, cost, node.first_seq, node.last_seq))
        frame = piece_cost(self.view.summary_text(node, ""))
        room = allowance - frame - 2
        if room < MIN_ABRIDGED:
            return None
        short = self.fit(node, room, focus)
        if not short:
            return None
        text = self.view.summary_text(node, short, abridged=True)
        cost = piece_cost(text)
        if cost > allowance:
            return None
        return Piece(text, cost, ContextItem(tier, node.id, cost, node.first_seq, node.last_seq), True)

    def take(self, recent: list[Summary], chosen: list[Piece], limit: int, already: int = 0) -> int:
        """More of ``recent`` (oldest first) into ``chosen`` (newest first) within ``limit``
        tokens, ``already`` of them spent; the tokens spent after."""
        if self.hierarchical:
            return self._take_key_points(recent, chosen, limit, already)
        spent = already
        if any(p.abridged for p in chosen):
            return spent  # an abridged summary ends the run: older ones would leave a hole
        while len(chosen) < len(recent):
            node = recent[len(recent) - 1 - len(chosen)]
            piece = self.piece(node, "summary", limit - spent)
            if piece is None:
                break
            chosen.append(piece)
            spent += piece.tokens
            if piece.abridged:
                break
        return spent

    def _take_key_points(self, recent: list[Summary], chosen: list[Piece], limit: int, already: int) -> int:
        """Hierarchical, newest first: a summary of the active task whole if it fits (else
        abridged); one of completed tasks as its key points (at most
        :data:`KEY_POINTS_SHARE` of it, within an even share of the room left); one of no
        task by age: the newest whole if it fits, each older one within an even share."""
        spent = already
        while len(chosen) < len(recent):
            node = recent[len(recent) - 1 - len(chosen)]
            left = limit - spent
            share = left if not chosen else left // (len(recent) - len(chosen))
            status = self.tasks.status(node)
            if status == "completed":
                piece = self.key_points(node, "summary", share)
            else:
                piece = self.piece(node, "summary", left if status == "active" else share)
            if piece is None:
                break
            chosen.append(piece)
            spent += piece.tokens
        return spent

    def root(self, root: Summary | None, allowance: int) -> Piece | None:
        """The root piece: the whole-conversation root, or (without one) the oldest frontier
        summary, as a summary or (hierarchical) statistics."""
        if root is None:
            return None
        if not self.hierarchical:
            return self.piece(root, "root", allowance)
        status = self.tasks.status(root)
        if status == "active":
            return self.piece(root, "root", allowance)
        return self._statistics(root, allowance, completed=status == "completed")

    def prefix_text(self, node: Summary) -> str:
        """``node`` as the cache-stable prefix shows it: whole, except (hierarchical) a
        completed task's as its key points. Both change only when compaction runs or a
        task ends, so the prefix stays byte-identical between those."""
        if self.hierarchical and self.tasks.status(node) == "completed":
            piece = self.key_points(node, "summary", 2**31 - 1)
            if piece is not None:
                return piece.text
        return self.view.summary_text(node)

    def key_points(self, node: Summary, tier: Literal["summary", "root"], allowance: int) -> Piece | None:
        """A completed task's summary as its most important lines: at most
        :data:`KEY_POINTS_SHARE` of it (never under ``MIN_ABRIDGED`` tokens), within
        ``allowance``; None when not even that fits."""
        room = min(self._key_points_room(node), allowance - self.view.piece_cost(self.view.summary_text(node, "")) - 2)
        if room < MIN_ABRIDGED:
            return None
        short = self.fit(node, room)
        if not short:
            return None
        text = self.view.summary_text(node, short, abridged=short != node.content)
        cost = self.view.piece_cost(text)
        if cost > allowance:
            return None
        return Piece(text, cost, ContextItem(tier, node.id, cost, node.first_seq, node.last_seq), True)

    @staticmethod
    def _key_points_room(node: Summary) -> int:
        return max(MIN_ABRIDGED, int(node.token_count * KEY_POINTS_SHARE))

    def _role_counts(self, root: Summary) -> dict[str, int]:
        cache = self.view.caches.role_counts
        roles = cache.get(root.id)
        if roles is None:
            roles = self.store.role_counts(root.conversation_id, root.first_seq, root.last_seq)
            if len(cache) >= 4096:
                cache.clear()
            cache[root.id] = roles
        return roles

    def _statistics(self, root: Summary, allowance: int, *, completed: bool = False) -> Piece | None:
        """Hierarchical: the oldest history as statistics (how many messages of each kind,
        over what time), with its key points if room is left (of a ``completed`` task: at
        most :data:`KEY_POINTS_SHARE` of it)."""
        roles = self._role_counts(root)
        mix = ", ".join(f"{n:,} {role}" for role, n in sorted(roles.items(), key=lambda kv: -kv[1]))
        stats = (f"[{root.id} · history #{root.first_seq}-#{root.last_seq} · "
                 f"{format_span(root.earliest_at, root.latest_at, self.view.zone)}] {root.last_seq - root.first_seq + 1:,} messages "
                 f"({mix}), {root.source_token_count:,} tokens, condensed {root.depth + 1} level(s).")
        cost = self.view.piece_cost(stats)
        if cost > allowance:
            return None
        room = allowance - cost - 2
        if completed:
            room = min(room, self._key_points_room(root))
        if room >= MIN_ABRIDGED:
            short = self.fit(root, room) if root.token_count > room else root.content
            text = f"{stats}\nKey points: {neutralise_tags(short)}"
            full = self.view.piece_cost(text)
            if full <= allowance:
                return Piece(text, full, ContextItem("root", root.id, full, root.first_seq, root.last_seq), True)
        return Piece(stats, cost, ContextItem("root", root.id, cost, root.first_seq, root.last_seq), True)
