"""One entry point for every search mode, used by the API, the tools and the CLI."""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import UTC, datetime, tzinfo
from typing import TYPE_CHECKING, Literal

from lossless.core.errors import EmbedderError, QueryError, ValidationError
from lossless.core.types import ROLES, GrepHit
from lossless.core.validate import parse_datetime, parse_until, timestamp
from lossless.store.base import SearchSpec, Store

if TYPE_CHECKING:
    from lossless.recall.hybrid import Recaller

__all__ = ["SEARCH_MODES", "SearchMode", "run_search"]

SearchMode = Literal["fts", "raw", "regex", "semantic", "hybrid"]
SEARCH_MODES: tuple[str, ...] = ("fts", "raw", "regex", "semantic", "hybrid")

log = logging.getLogger("lossless")


def _strings(value: object, what: str, allowed: tuple[str, ...] | None = None) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, tuple | list) or not all(isinstance(v, str) for v in value):
        raise ValidationError(f"{what} must be a list of strings, got {value!r}")
    bad = [v for v in value if allowed is not None and v not in allowed]
    if bad:
        raise ValidationError(f"{what}: unknown value(s) {', '.join(map(repr, bad))} (expected: {', '.join(allowed or ())})")
    return tuple(value)


def _in(bound: datetime, zone: tzinfo | None) -> datetime:
    """A bound without an offset read as a time of ``zone`` (None, or UTC: left as it is,
    which the filters read as UTC)."""
    if bound.tzinfo is not None or zone is None or zone is UTC or bound in (datetime.min, datetime.max):
        return bound
    try:
        return bound.replace(tzinfo=zone).astimezone(UTC)
    except OverflowError:  # (the first or last day a datetime holds, a zone away from UTC)
        return bound


def checked_spec(spec: SearchSpec, zone: tzinfo | None = None) -> SearchSpec:
    """``spec`` with every filter checked (a ValidationError naming the field, never a
    TypeError from deep inside) and ``since``/``until`` given as ISO strings read as times;
    a bound without an offset ("2024-05-20", "2024-05-20T08:00") is a time of ``zone``
    (``Config.timezone``; None: UTC), the zone the context shows dates in."""
    if spec.mode not in SEARCH_MODES:
        raise QueryError(f"search mode must be one of {', '.join(SEARCH_MODES)}; got {spec.mode!r}")
    if not isinstance(spec.query, str):
        raise QueryError(f"search query must be a string, got {type(spec.query).__name__}")
    if isinstance(spec.limit, bool) or not isinstance(spec.limit, int) or spec.limit < 1:
        raise QueryError(f"limit must be a positive integer, got {spec.limit!r}")
    if spec.sort not in ("relevance", "recency"):
        raise ValidationError(f"sort must be relevance or recency, got {spec.sort!r}")
    kinds = _strings(spec.kinds, "kinds", ("message", "summary"))
    if not kinds:
        raise ValidationError("kinds is empty: give message, summary or both")
    since = None if spec.since is None else _in(parse_datetime(spec.since, "since"), zone)
    until = None if spec.until is None else _in(parse_until(spec.until, "until"), zone)
    # compared as the filters read them (a naive bound is UTC): a naive and an aware bound
    # cannot be compared as datetimes (a TypeError from `--since 2024-05-01T02:00+08:00 --until 2024-05-01`)
    if since is not None and until is not None and timestamp(since) > timestamp(until):
        # (an empty answer said nothing of the reversed range)
        raise ValidationError(f"since ({since.isoformat()}) is after until ({until.isoformat()}): no time is in "
                              "both; swap them")
    return replace(
        spec,
        kinds=kinds,  # type: ignore[arg-type]
        roles=None if spec.roles is None else _strings(spec.roles, "roles", ROLES),
        conversation_ids=None if spec.conversation_ids is None else _strings(spec.conversation_ids, "conversations"),
        since=since,
        until=until,
    )


def run_search(store: Store, recaller: Recaller, spec: SearchSpec) -> list[GrepHit]:
    """The hits for ``spec``: keyword modes from the store, ``semantic`` and ``hybrid``
    from the recaller's vectors (``hybrid`` falls back to keywords without an embedder,
    or when the embedder fails), each hit dated and, with ``sort="recency"``, newest first."""
    spec = checked_spec(spec, recaller.config.zone)
    if spec.mode in ("fts", "raw", "regex"):
        return store.search(spec)
    if not isinstance(spec.query, str) or not spec.query.strip():
        raise QueryError("search query is empty")
    if recaller.embedder is None:
        if spec.mode == "semantic":
            raise QueryError(
                "semantic search needs an embedder: install the embeddings extra or pass embedder= to lossless.open"
            )
        return store.search(replace(spec, mode="fts"))
    if not recaller.reads(spec.query):
        # a language the model does not read: its vector would rank at random, and neither
        # the query nor what the conversations owe is embedded for it
        log.info("lossless: the embedder does not read the language of this query; the %s search uses keywords",
                 spec.mode)
        return [replace(h, matched="keyword") for h in store.search(replace(spec, mode="fts"))]
    try:
        # what the searched conversations owe is embedded first (bounded); the rest is
        # searched by keywords, so a search covers every stored message
        owed = recaller.catch_up(spec.conversation_ids) if "message" in spec.kinds else {}
        hits = recaller.search(spec, not_embedded=owed)
    except EmbedderError as exc:
        if spec.mode == "semantic":
            raise
        log.warning("lossless: %s; hybrid search falls back to keyword search", exc)
        return store.search(replace(spec, mode="fts"))
    if owed:
        log.info("lossless: messages of %d conversation(s) are not embedded yet (the worker is behind): this %s "
                 "search found them by keywords", len(owed), spec.mode)
    out: list[GrepHit] = []
    for h in hits:
        if h.kind == "summary":
            node = store.get_summary(h.id)
            created, role, depth = node.earliest_at, None, node.depth
        else:
            msg = store.get_message(h.id)
            created, role, depth = msg.created_at, (msg.role if h.kind == "message" else None), None
        matched: Literal["vector", "keyword", "both"] = ("both" if h.vector_rank is not None else "keyword") \
            if h.keyword_rank is not None else "vector"
        out.append(GrepHit(kind=h.kind, id=h.id, conversation_id=h.conversation_id, first_seq=h.first_seq,
                           last_seq=h.last_seq, role=role, created_at=created, snippet=h.snippet, score=h.score,
                           depth=depth, matched=matched))
    if spec.sort == "recency":
        out.sort(key=lambda g: (-timestamp(g.created_at), -g.last_seq, g.id))
    return out

