"""Row types and row readers both stores share: what a row of ``messages`` or of
``retrieval_units`` becomes in Python. The two schemas mirror each other column for
column, so one reader serves both (PostgreSQL's bigints arrive as ints already)."""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

from lossless.core.dag import StoredMessage
from lossless.core.types import GrepHit, Message, SourceRef, Summary
from lossless.store.base import SearchSpec
from lossless.store.fts import fts_terms, snippet

__all__ = ["MESSAGE_COLUMNS", "SOURCE_SUMMARY_COLUMNS", "SUMMARY_COLUMNS", "SUMMARY_READ_COLUMNS", "VERIFY_MESSAGE_COLUMNS", "grep_hit", "message_from_row", "prefix_upper", "stored_message_from_row", "summary_from_row"]

# the columns message_from_row reads, in its order
MESSAGE_COLUMNS = (
    "rowid, id, conversation_id, seq, role, name, content, content_is_json, tool_calls, "
    "tool_call_id, created_at, token_count, metadata, external_id"
)
# a summaries row as both stores read it into a Summary
SUMMARY_COLUMNS = (
    "id, conversation_id, depth, content, token_count, first_seq, last_seq, earliest_at, "
    "latest_at, descendant_count, source_token_count, summarizer, fallback_level, created_at, "
    "metadata"
)
# SUMMARY_COLUMNS and whether the row is a root (a root is its own parent): what is read
SUMMARY_READ_COLUMNS = SUMMARY_COLUMNS + ", CASE WHEN parent_id = id THEN 1 ELSE 0 END"
# the columns of a condensed node's sources, in lossless.core.dag.SourceSummary's order
SOURCE_SUMMARY_COLUMNS = ("id, depth, first_seq, last_seq, earliest_at, earliest_ts, latest_at, latest_ts, "
                          "descendant_count, token_count, parent_id")
# the columns stored_message_from_row reads: what verify re-hashes
VERIFY_MESSAGE_COLUMNS = "seq, id, role, content, content_is_json, name, tool_calls, tool_call_id, content_hash"


def message_from_row(row: tuple[Any, ...]) -> Message:
    """A Message from a row of MESSAGE_COLUMNS (JSON columns parsed)."""
    (_rowid, mid, cid, seq, role, name, content, is_json, tool_calls, tcid, created, tokens, meta, ext) = row
    return Message(
        id=mid,
        conversation_id=cid,
        seq=seq,
        role=role,
        content=json.loads(content) if is_json else content,
        created_at=datetime.fromisoformat(created),
        token_count=tokens,
        name=name,
        tool_calls=tuple(json.loads(tool_calls)) if tool_calls else (),
        tool_call_id=tcid,
        metadata=json.loads(meta),
        external_id=ext,
    )


def summary_from_row(row: tuple[Any, ...], sources: tuple[SourceRef, ...]) -> Summary:
    """A Summary from a row that starts with SUMMARY_READ_COLUMNS, and its sources."""
    (sid, cid, depth, content, tokens, first, last, earliest, latest, desc, src_tokens, summarizer, level, created,
     meta, is_root) = row[:16]
    return Summary(
        id=sid, conversation_id=cid, depth=depth, content=content, token_count=tokens,
        first_seq=int(first), last_seq=int(last), earliest_at=datetime.fromisoformat(earliest),
        latest_at=datetime.fromisoformat(latest), descendant_count=desc, source_token_count=src_tokens,
        summarizer=summarizer, fallback_level=level, created_at=datetime.fromisoformat(created), sources=sources,
        metadata=json.loads(meta), root=bool(is_root),
    )


def stored_message_from_row(row: tuple[Any, ...]) -> StoredMessage:
    """What :func:`lossless.core.dag.verify` needs of a message, from a row of
    VERIFY_MESSAGE_COLUMNS."""
    seq, mid, role, content, is_json, name, calls, tcid, digest = row
    return StoredMessage(seq=int(seq), id=mid, role=role, content=json.loads(content) if is_json else content,
                         name=name, tool_calls=tuple(json.loads(calls)) if calls else (), tool_call_id=tcid,
                         content_hash=digest)


def grep_hit(kind: Any, hid: str, cid: str, first: int, last: int, role: str | None, created: str,
             text: str, spec: SearchSpec, score: float, depth: int | None) -> GrepHit:
    """A search hit as both stores return it, its snippet cut around what matched."""
    if not text:
        snip = ""  # nothing was read (spec.snippets is off): no snippet to cut
    elif spec.mode == "regex":
        m = re.search(spec.query, text)
        start = max(0, (m.start() if m else 0) - 50)
        end = min(len(text), start + 160)
        snip = ("…" if start else "") + text[start:end].replace("\n", " ") + ("…" if end < len(text) else "")
    else:
        snip = snippet(text, spec.query if spec.mode == "fts" else " ".join(fts_terms(spec.query)))
    return GrepHit(kind=kind, id=hid, conversation_id=cid, first_seq=first, last_seq=last, role=role,
                   created_at=datetime.fromisoformat(created), snippet=snip, score=round(score, 6), depth=depth)


def prefix_upper(prefix: str) -> str:
    """The smallest string above every string starting with ``prefix``: ``@acme/`` →
    ``@acme0``, so ids with a prefix are an index range scan (compared byte-wise)."""
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)
