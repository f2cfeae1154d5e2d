"""The Store plug point. SQLite is the embedded default; PostgreSQL implements the same
contract for many processes and hosts. Every write method is one transaction."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol, runtime_checkable

from lossless.types import ConversationInfo, GrepHit, Message, SourceRef, Summary
from lossless.validate import NewMessage

__all__ = ["NewSummary", "SearchSpec", "Store"]


@dataclass(frozen=True, slots=True)
class NewSummary:
    """A summary about to be written. The store derives its span, times and counts from
    ``sources`` inside the write transaction, and refuses it if the sources are no longer
    on the frontier (another process compacted first)."""

    conversation_id: str
    depth: int
    content: str
    token_count: int
    sources: tuple[SourceRef, ...]
    summarizer: str
    fallback_level: int = 0
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SearchSpec:
    """What to search for and where. ``mode``: ``fts`` (quoted terms, bm25), ``raw``
    (caller's FTS5 syntax), ``regex`` (Python regular expression, a scan); ``semantic``
    (vectors) and ``hybrid`` (both, fused) are served by the recall engine."""

    query: str
    conversation_ids: tuple[str, ...] | None = None  # None: every conversation
    kinds: tuple[Literal["message", "summary"], ...] = ("message", "summary")
    roles: tuple[str, ...] | None = None
    since: datetime | None = None
    until: datetime | None = None
    max_seq: int | None = None  # only messages/summaries ending at or before this seq
    mode: Literal["fts", "raw", "regex", "semantic", "hybrid"] = "fts"
    sort: Literal["relevance", "recency"] = "relevance"
    limit: int = 20


@runtime_checkable
class Store(Protocol):
    def close(self) -> None: ...

    # per-database settings (JSON values)
    def get_settings(self) -> dict[str, Any]: ...
    def set_settings(self, values: dict[str, Any]) -> None: ...

    # conversations
    def ensure_conversation(
        self, conversation_id: str, metadata: dict[str, Any] | None = None
    ) -> ConversationInfo: ...
    def get_conversation(self, conversation_id: str) -> ConversationInfo | None: ...
    def list_conversations(self, limit: int = 100, offset: int = 0) -> list[ConversationInfo]: ...

    # messages
    def append_messages(
        self, conversation_id: str, messages: Sequence[NewMessage], token_counts: Sequence[int]
    ) -> list[Message]: ...
    def get_messages(
        self, conversation_id: str, first_seq: int = 1, last_seq: int | None = None
    ) -> list[Message]: ...
    def get_message(self, message_id: str) -> Message: ...
    def last_seq(self, conversation_id: str) -> int: ...
    def token_sum(self, conversation_id: str, first_seq: int, last_seq: int | None = None) -> int: ...

    # the summary DAG
    def insert_summary(self, new: NewSummary) -> Summary | None: ...
    def get_summary(self, summary_id: str) -> Summary: ...
    def parent_of(self, summary_id: str) -> str | None: ...
    def frontier(self, conversation_id: str) -> list[Summary]: ...
    def covered_seq(self, conversation_id: str) -> int: ...
    def summaries(self, conversation_id: str) -> list[Summary]: ...
    def leaf_for(self, conversation_id: str, seq: int) -> Summary | None: ...
    def summarizer_usage(self, conversation_id: str | None = None) -> dict[str, Any]: ...
    def first_message_ts(self, conversation_id: str) -> float | None: ...
    def role_counts(self, conversation_id: str, first_seq: int, last_seq: int) -> dict[str, int]: ...

    # compaction leases (one compactor per conversation) and the compaction log
    def acquire_lease(self, conversation_id: str, owner: str, reason: str, stale_after: float) -> bool: ...
    def heartbeat_lease(self, conversation_id: str, owner: str) -> None: ...
    def release_lease(self, conversation_id: str, owner: str) -> None: ...
    def lease(self, conversation_id: str) -> dict[str, Any] | None: ...
    def log_compaction(self, conversation_id: str, entry: dict[str, Any]) -> None: ...
    def compaction_log(self, conversation_id: str, limit: int = 100) -> list[dict[str, Any]]: ...

    # search
    def search(self, spec: SearchSpec) -> list[GrepHit]: ...

    # integrity
    def verify(self, conversation_id: str | None = None) -> list[str]: ...
