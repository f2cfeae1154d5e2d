"""Recall as pieces of the memory block: older messages that match the question, whole
where they fit and cut to the sentences that share its words where they do not."""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import tzinfo
from typing import TYPE_CHECKING

from lossless.context.excerpt import excerpt_around, query_terms, shared_terms
from lossless.context.pieces import MIN_ABRIDGED, RECALL_HEADER, Piece
from lossless.context.shown import MessageView
from lossless.core.errors import EmbedderError
from lossless.core.importance import score_message
from lossless.core.render import format_time, neutralise_tags
from lossless.core.textfit import fit_text
from lossless.core.types import ContextItem, Message
from lossless.recall.rerank import rerank_order
from lossless.recall.speakers import lean_to_speakers
from lossless.store.base import SearchSpec, Store

if TYPE_CHECKING:
    from lossless.recall.hybrid import Recaller

__all__ = ["RecalledMessages", "day_line", "recall_cost"]

log = logging.getLogger("lossless")
_READ_AHEAD = 32  # recalled messages read per query, in rank order
_MIN_LINE = 8  # the least a whole recalled message's line costs (an excerpt needs MIN_ABRIDGED)
# matches scoring at least this share of the best one are packed (with their neighbours and
# excerpts) before the weaker ones are looked at
STRONG_MATCH = 0.1
_FILLER_MAX_TOKENS = 200  # no longer message is chit-chat (at most 80 characters, ~2 tokens each at worst)


class _Packing:
    """The recalled pieces chosen so far, the date lines they open and the room left."""

    def __init__(self, room: int, view: MessageView) -> None:
        self.pieces: list[Piece] = []
        self.ids: set[str] = set()
        self.groups: set[str] = set()
        self.left = room
        self.view = view

    def opening(self, group: str) -> int:
        """What a piece under ``group`` pays for the date line: nothing once it is there."""
        return 0 if group in self.groups else self.view.line_cost(group)

    def add(self, piece: Piece | None) -> None:
        if piece is not None and piece.item.ref not in self.ids:
            extra = self.opening(piece.group)
            self.pieces.append(replace(piece, item=replace(piece.item, tokens=piece.tokens + extra)))
            self.ids.add(piece.item.ref)
            self.groups.add(piece.group)
            self.left -= piece.tokens + extra


def day_line(msg: Message, zone: tzinfo | None = None) -> str:
    """The line recalled messages of one date (in ``zone``; None: UTC) are shown under:
    ``[2024-01-18]``."""
    return f"[{format_time(msg.created_at, zone)[:10]}]"


def recall_cost(view: MessageView, pieces: list[Piece]) -> int:
    """What the recall block of ``pieces`` costs: its header, each message's line and
    each date line once (0 without pieces)."""
    if not pieces:
        return 0
    groups = {p.group for p in pieces if p.group}
    return (view.piece_cost(RECALL_HEADER) + sum(p.tokens for p in pieces)
            + sum(view.line_cost(g) for g in groups))


def _head_cut(short: str, body: str) -> bool:
    """Whether ``short`` (what :func:`fit_text` made of ``body``) is nothing, or the head of
    one sentence cut at its end ("…" added), not whole sentences."""
    if not short:
        return True
    return short.endswith("…") and short not in body and short[:-1].rstrip() in body


def _filler(msg: Message, view: MessageView) -> bool:
    """Nothing but acknowledgement, greeting or laughter (bare assent such as "yes" is not:
    it may answer the question next to it). Only a short message can be (the scorer's
    chit-chat is at most 80 characters): a longer one is not scored."""
    if msg.token_count > _FILLER_MAX_TOKENS or msg.tool_calls:
        return False
    cache = view.caches.filler
    found = cache.get(msg.id)
    if found is None:
        found = any(r.label == "chitchat" for r in score_message(msg).reasons)
        if len(cache) >= 65536:
            cache.clear()
        cache[msg.id] = found
    return found


def _line_head(msg: Message) -> str:
    """``#149 user:`` (``#149 user Ann:`` with a name): the message's id in the
    conversation and who said it; its date is on the line above."""
    who = msg.role if not msg.name else f"{msg.role} {' '.join(msg.name.replace('[', '(').replace(']', ')').split())}"
    return f"#{msg.seq} {who}:"


class RecalledMessages:
    """Finds (hybrid with an embedder, else keywords) and packs recalled messages."""

    def __init__(self, view: MessageView, store: Store, recaller: Recaller | None) -> None:
        self.view = view
        self.store = store
        self.recaller = recaller
        self._known: dict[str, Message] = {}  # candidates read while ranking, by id (this assembly's)

    def _ranked(self, cid: str, query: str, shown_from: int, room: int,
                shown_ids: set[str] | frozenset[str]) -> tuple[list[tuple[str, bool]], int]:
        """Message ids not shown yet that match the query, in rank order, each with whether
        it came with a window (a question-and-answer pair), and how many of them, first,
        are strong matches (scoring at least :data:`STRONG_MATCH` of the best one). Depth
        follows the room: as many candidates as the room could hold short messages (at
        most ``recall_depth``, which bounds the work), kept while their score is at least
        ``recall_score_floor`` of the best one's. Among the best, those written by a
        person the question names come first among near-equals
        (:mod:`lossless.recall.speakers`)."""
        cfg = self.view.config
        depth = min(cfg.recall_depth, max(24, room // 16))
        spec = SearchSpec(query=query, conversation_ids=(cid,), kinds=("message",), max_seq=shown_from - 1,
                          limit=depth, mode="hybrid", snippets=False, cjk_chars=True)
        candidates: list[tuple[tuple[str, ...], bool, float]] | None = None
        if self.recaller is not None and self.recaller.embedder is not None and not self.recaller.warming():
            try:
                self.recaller.refresh(cid)
                hits = self.recaller.search(spec, windows=cfg.recall_windows)
                candidates = [(h.message_ids, h.kind == "window", h.score) for h in hits]
            except EmbedderError as exc:  # a context recalled by keywords beats no context
                log.warning("lossless: %s; recall falls back to keyword search", exc)
        if candidates is None:
            candidates = [((h.id,), False, h.score) for h in self.store.search(replace(spec, mode="fts"))]
        candidates = lean_to_speakers(self.store, query, candidates, read_into=self._known)
        best = max((score for _, _, score in candidates), default=0.0)
        floor = best * cfg.recall_score_floor if best > 0 else float("-inf")
        kept: list[tuple[tuple[str, ...], bool]] = []
        strong: set[str] = set()
        for ids, is_window, score in candidates:
            if score < floor:
                break  # ranked best first: the rest match too weakly to be worth their room
            if any(mid not in shown_ids for mid in ids):
                kept.append((ids, is_window))
                if score >= best * STRONG_MATCH:
                    strong.update(ids)
        ranked: dict[str, bool] = {}
        for ids, is_window in self._reranked(query, kept):
            for mid in ids:
                if mid not in shown_ids and mid not in ranked and len(ranked) < depth:
                    ranked[mid] = is_window
        if cfg.recall_second_round and ranked and len(ranked) < depth:
            self._second_round(spec, list(ranked)[: cfg.recall_second_round], ranked, shown_ids, depth)
        items = list(ranked.items())
        first = [item for item in items if item[0] in strong]
        return first + [item for item in items if item[0] not in strong], len(first)

    def _second_round(self, spec: SearchSpec, top: list[str], ranked: dict[str, bool],
                      shown_ids: set[str] | frozenset[str], depth: int) -> None:
        """Keyword search again with the words of the best matches added to the question
        (pseudo-relevance feedback): what the first matches name (a relative, a place)
        finds the messages that say more about it. What it finds comes after the first
        round's matches."""
        texts = [self.view.body(self.store.get_message(mid))[:2000] for mid in top]
        wider = replace(spec, query=spec.query + "\n" + "\n".join(texts), mode="fts")
        extra = [h.id for h in self.store.search(wider) if h.id not in shown_ids and h.id not in ranked]
        first = list(ranked.items())
        ranked.clear()
        ranked.update(first[: len(top)])
        rest = first[len(top):]
        for i in range(max(len(rest), len(extra))):
            if i < len(rest):
                ranked.setdefault(rest[i][0], rest[i][1])
            if i < len(extra):
                ranked.setdefault(extra[i], False)
        while len(ranked) > depth:
            ranked.popitem()

    def _reranked(self, query: str, kept: list[tuple[tuple[str, ...], bool]]) -> list[tuple[tuple[str, ...], bool]]:
        """``kept`` with its ``rerank_top_n`` best reordered by the configured reranker
        (``Config.rerank``; unchanged when it is off or fails, which it logs)."""
        cfg = self.view.config
        reranker = self.recaller.rerankers.get(cfg) if self.recaller is not None else None
        top = kept[: cfg.rerank_top_n]
        if reranker is None or len(top) < 2 or not query.strip():
            return kept
        texts = []
        for ids, _ in top:
            msgs = [self.store.get_message(mid) for mid in ids]
            texts.append("\n".join(f"{m.name or m.role}: {self.view.body(m)}" for m in msgs))
        order = rerank_order(reranker, query, texts, self.view.counter, cfg.rerank_candidate_tokens)
        if order is None:
            return kept
        return [top[i] for i in order] + kept[len(top):]

    def pieces(self, cid: str, query: str, shown_from: int, room: int,
               shown_ids: set[str] | frozenset[str] = frozenset()) -> list[Piece]:
        """Older messages that match the query (see :meth:`_ranked`), packed in three
        passes: first, in rank order, each that fits whole within ``recall_whole_share``
        of the room and ``recall_whole_max_tokens``; then the short messages next to them
        (the question a match answers, the answer to a matched question) while room is
        left; then the matches skipped, in rank order, cut to a share of the room keeping
        the sentences that share the query's words. Whole messages keep what was said
        verbatim; excerpts let the long ones in."""
        if room < MIN_ABRIDGED or shown_from <= 1:
            return []
        cfg = self.view.config
        ranked, strong = self._ranked(cid, query, shown_from, room, shown_ids)
        packed = _Packing(room, self.view)
        whole_cap = max(MIN_ABRIDGED, min(int(room * cfg.recall_whole_share), cfg.recall_whole_max_tokens))
        per_item = max(MIN_ABRIDGED * 2, min(int(room * cfg.recall_item_share), cfg.recall_item_max_tokens))
        # the strong matches, their neighbours and excerpts first; the weak ones in what is left
        # (a long strong match is not crowded out by short weak ones placed whole before it)
        for first, part in ((0, ranked[:strong]), (strong, ranked[strong:])):
            if part and packed.left >= _MIN_LINE:
                self._pack(cid, query, part, first, shown_from, shown_ids, packed, whole_cap, per_item)
        return packed.pieces

    def _pack(self, cid: str, query: str, ranked: list[tuple[str, bool]], first: int, shown_from: int,
              shown_ids: set[str] | frozenset[str], packed: _Packing, whole_cap: int, per_item: int) -> None:
        """:meth:`pieces`' three passes over ``ranked`` (ranks from ``first``) into ``packed``."""
        cfg = self.view.config
        skipped: list[tuple[Message, bool]] = []
        placed: list[Message] = []
        read: dict[str, Message] = {}
        last_look = len(ranked)  # below MIN_ABRIDGED left: one more batch is looked at for a short one
        for rank, (mid, is_window) in enumerate(ranked):
            if packed.left < MIN_ABRIDGED:
                last_look = min(last_look, rank + _READ_AHEAD)
            if packed.left < _MIN_LINE or rank >= last_look:
                break  # (a short message may still fit whole where no excerpt would)
            if mid not in read:  # read a batch ahead: the room is often full before the list ends
                wanted = [m for m, _ in ranked[rank : rank + _READ_AHEAD]]
                read = {m: self._known[m] for m in wanted if m in self._known}  # (ranking read them)
                missing = [m for m in wanted if m not in read]
                if missing:
                    read.update(self.store.messages_by_id(missing))
            msg = read.get(mid)
            if msg is None or msg.seq >= shown_from:  # (None: not in the store any more)
                continue
            opening = packed.opening(day_line(msg, self.view.zone))
            fits = msg.token_count <= min(whole_cap, packed.left - opening) + 8 or self.view.is_large(msg)
            piece = self.piece(msg, query, min(whole_cap, packed.left - opening), whole_only=True) if fits else None
            if piece is None and first + rank < cfg.recall_lead_excerpts:  # the very best is never crowded out
                piece = self.piece(msg, query, min(per_item // (2 if is_window else 1), packed.left - opening))
            if piece is None:
                skipped.append((msg, is_window))
                continue
            packed.add(piece)
            placed.append(msg)
        self._neighbours(cid, query, placed, shown_from, shown_ids, packed, per_item)
        for msg, is_window in skipped:
            if packed.left < MIN_ABRIDGED:
                break
            packed.add(self.piece(msg, query, min(per_item // (2 if is_window else 1),
                                                  packed.left - packed.opening(day_line(msg, self.view.zone)))))

    def _neighbours(self, cid: str, query: str, placed: list[Message], shown_from: int,
                    shown_ids: set[str] | frozenset[str], packed: _Packing, short: int) -> None:
        """The messages just before and after each placed match, in the matches' rank
        order, whole and only when they cost at most ``short`` tokens: a reply means
        little without the question it answers. A neighbour that is nothing but an
        acknowledgement or a greeting ("ok", "thanks!", 「嗯，好的。」: the importance
        scorer's chit-chat) adds nothing to the match and stays out."""
        if not placed or packed.left < _MIN_LINE:
            return
        # every placed match's neighbours in one read (it was a read per match: ~60 a call)
        nearby = self.store.messages_at(cid, sorted({s for m in placed for s in (m.seq - 1, m.seq + 1)
                                                     if 1 <= s < shown_from}))
        for msg in placed:
            if packed.left < _MIN_LINE:
                return
            for near in (nearby[s] for s in (msg.seq - 1, msg.seq + 1) if s in nearby):
                if (near.seq == msg.seq or near.id in shown_ids or near.id in packed.ids or near.role == "tool"
                        or _filler(near, self.view)):
                    continue
                packed.add(self.piece(near, query, min(short, packed.left - packed.opening(day_line(near, self.view.zone))),
                                      whole_only=True))

    def piece(self, msg: Message, query: str, cap: int, *, whole_only: bool = False) -> Piece | None:
        """One recalled message as its line (``#seq role: text``, under its date line,
        which ``cap`` does not include): whole when it fits ``cap``, else (unless
        ``whole_only``) cut to ``cap`` keeping the sentences that share the query's words."""
        view = self.view
        large = view.is_large(msg)
        body = neutralise_tags(view.body(msg))
        head = _line_head(msg)
        head_cost = view.line_cost(head)
        text = f"{head} {body}"
        # the stored count spares re-encoding a long message that cannot be shown whole
        cost = view.line_cost(text) if large or msg.token_count + head_cost <= cap + 8 else cap + 1
        if cost > cap:
            if whole_only:
                return None
            room = cap - head_cost - 4
            short = fit_text(body, room, view.counter, focus=query,
                             tokens=None if large else msg.token_count) if room > 16 else ""
            if _head_cut(short, body):  # not even one sentence fits: the clauses that match, if more of them
                around = excerpt_around(body, query, room, view.counter)
                terms = query_terms(query)
                if around and shared_terms(around, terms) > shared_terms(short, terms):
                    short = around
            if not short:
                return None
            text = f"{head} {short}" if short.endswith("…") else f"{head} {short} …"
            cost = view.line_cost(text)
            if cost > cap:
                return None
        return Piece(text, cost, ContextItem("recall", msg.id, cost, msg.seq, msg.seq), group=day_line(msg, view.zone))
