"""Recall as pieces of the memory block: older messages that match the question, whole
where they fit and cut to the sentences that share its words where they do not."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING

from lossless.context.pieces import MIN_ABRIDGED, Piece
from lossless.context.shown import MessageView
from lossless.core.errors import EmbedderError
from lossless.core.render import message_header, neutralise_tags
from lossless.core.textfit import fit_text
from lossless.core.types import ContextItem, Message
from lossless.store.base import SearchSpec, Store

if TYPE_CHECKING:
    from lossless.recall.hybrid import Recaller

__all__ = ["RecalledMessages"]

log = logging.getLogger("lossless")


class RecalledMessages:
    """Finds (hybrid with an embedder, else keywords) and packs recalled messages."""

    def __init__(self, view: MessageView, store: Store, recaller: Recaller | None) -> None:
        self.view = view
        self.store = store
        self.recaller = recaller

    def _ranked(self, cid: str, query: str, shown_from: int, room: int,
                shown_ids: set[str] | frozenset[str]) -> dict[str, bool]:
        """The best ``recall_depth`` message ids not shown yet, in rank order, each with
        whether it came with a window (a question-and-answer pair)."""
        cfg = self.view.config
        spec = SearchSpec(query=query, conversation_ids=(cid,), kinds=("message",), max_seq=shown_from - 1,
                          limit=min(2000, max(24, cfg.recall_depth * 2 // 3, room // 100)), mode="hybrid",
                          snippets=False)
        candidates: list[tuple[tuple[str, ...], bool]] | None = None
        if self.recaller is not None and self.recaller.embedder is not None and not self.recaller.warming():
            try:
                self.recaller.refresh(cid)
                hits = self.recaller.search(spec, windows=cfg.recall_windows)
                candidates = [(h.message_ids, h.kind == "window") for h in hits]
            except EmbedderError as exc:  # a context recalled by keywords beats no context
                log.warning("lossless: %s; recall falls back to keyword search", exc)
        if candidates is None:
            candidates = [((h.id,), False) for h in self.store.search(replace(spec, mode="fts"))]
        ranked: dict[str, bool] = {}
        for ids, is_window in candidates:
            for mid in ids:
                if mid not in shown_ids and mid not in ranked and len(ranked) < cfg.recall_depth:
                    ranked[mid] = is_window
        return ranked

    def pieces(self, cid: str, query: str, shown_from: int, room: int,
               shown_ids: set[str] | frozenset[str] = frozenset()) -> list[Piece]:
        """Older messages that match the query. The best ``recall_depth`` (a window hit
        brings its pairs) are packed in two passes: first, in rank order, each that fits
        whole within ``recall_whole_share`` of the room; then the ones skipped, in rank
        order, cut to a share of the room keeping the sentences that share the query's
        words. Whole messages keep what was said verbatim; excerpts let the long ones in."""
        if room < MIN_ABRIDGED or shown_from <= 1:
            return []
        cfg = self.view.config
        ranked = self._ranked(cid, query, shown_from, room, shown_ids)
        pieces: list[Piece] = []
        spent = 0
        whole_cap = max(MIN_ABRIDGED, int(room * cfg.recall_whole_share))
        per_item = max(MIN_ABRIDGED * 2, min(int(room * cfg.recall_item_share), cfg.recall_item_max_tokens))
        skipped: list[tuple[Message, bool]] = []
        for rank, (mid, is_window) in enumerate(ranked.items()):
            if room - spent < MIN_ABRIDGED:
                return pieces
            msg = self.store.get_message(mid)
            if msg.seq >= shown_from:
                continue
            piece = self.piece(msg, query, min(whole_cap, room - spent), whole_only=True)
            if piece is None and rank < cfg.recall_lead_excerpts:  # the very best match is never crowded out
                piece = self.piece(msg, query, min(per_item // (2 if is_window else 1), room - spent))
            if piece is None:
                skipped.append((msg, is_window))
                continue
            pieces.append(piece)
            spent += piece.tokens
        for msg, is_window in skipped:
            if room - spent < MIN_ABRIDGED:
                break
            piece = self.piece(msg, query, min(per_item // (2 if is_window else 1), room - spent))
            if piece is not None:
                pieces.append(piece)
                spent += piece.tokens
        return pieces

    def piece(self, msg: Message, query: str, cap: int, *, whole_only: bool = False) -> Piece | None:
        """One recalled message: whole when it fits ``cap``, else (unless ``whole_only``)
        cut to ``cap`` keeping the sentences that share the query's words."""
        view = self.view
        large = view.is_large(msg)
        body = neutralise_tags(view.body(msg))
        header = message_header(msg)
        header_cost = view.piece_cost(header)
        text = f"{header} {body}"
        # the stored count spares re-encoding a long message that cannot be shown whole
        cost = view.piece_cost(text) if large or msg.token_count + header_cost <= cap + 8 else cap + 1
        if cost > cap:
            if whole_only:
                return None
            room = cap - header_cost - 4
            short = fit_text(body, room, view.counter, focus=query,
                             tokens=None if large else msg.token_count) if room > 16 else ""
            if not short:
                return None
            text = f"{header} {short} …"
            cost = view.piece_cost(text)
            if cost > cap:
                return None
        return Piece(text, cost, ContextItem("recall", msg.id, cost, msg.seq, msg.seq))
