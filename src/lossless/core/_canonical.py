"""Ids and content hashes: a hash contract.

Every stored message id, summary id and message content hash is computed here, and the
same values are written by both stores (``lossless migrate`` copies rows between them
as they are). Changing any function in this module changes the id of every message and
summary written afterwards and makes ``verify`` report every stored message as not
matching its hash: treat any edit as a migration (``tests/test_canonical.py`` pins the
exact values).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from lossless.core.types import SourceRef

__all__ = ["canonical_json", "message_hash", "message_id", "summary_id"]


def canonical_json(value: Any) -> str:
    """One spelling of a JSON value: sorted keys, no spaces, non-ASCII kept as is."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def message_id(conversation_id: str, seq: int) -> str:
    """``msg_`` and 20 hex digits naming the ``seq``-th message of a conversation: the
    same conversation and seq always give the same id, on any store."""
    digest = hashlib.sha256(f"{conversation_id}\x00{seq}".encode()).hexdigest()
    return f"msg_{digest[:20]}"


def message_hash(role: str, content: Any, name: str | None, tool_calls: Any, tool_call_id: str | None) -> str:
    """The SHA-256 of a message's canonical JSON (role, content, name, tool calls, tool
    call id): what ``verify`` re-computes to prove a stored message was not altered. No
    tool calls and an empty list hash alike."""
    canonical = canonical_json([role, content, name, list(tool_calls or ()), tool_call_id])
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def summary_id(conversation_id: str, depth: int, sources: Sequence[SourceRef], content: str, *,
               root: bool = False) -> str:
    """``sum_`` and 20 hex digits over the conversation, the depth, the ordered source ids
    and the text: a summary's id names what it covers and says, so its sources never
    change under it. A whole-conversation root hashes a marker too (a condensed node over
    the same run with the same text is another node)."""
    ids = ",".join(s.id for s in sources)
    mark = "\x00root" if root else ""
    digest = hashlib.sha256(f"{conversation_id}\x00{depth}\x00{ids}\x00{content}{mark}".encode()).hexdigest()
    return f"sum_{digest[:20]}"
