"""The Store plug point. SQLite is the embedded default; PostgreSQL implements the same
contract for many processes and hosts. Every write method is one transaction."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, Protocol, runtime_checkable

from lossless.core.types import ConversationInfo, GrepHit, Message, SourceRef, Summary
from lossless.core.validate import NewMessage

if TYPE_CHECKING:
    import numpy as np

    from lossless.embed.base import Vectors

__all__ = [
    "CompactionLeases",
    "FileIndex",
    "MemoryWatermarks",
    "MessageLog",
    "NewSummary",
    "NewUnit",
    "RecallIndex",
    "RecallUnits",
    "RevisedSummary",
    "SQLAccess",
    "Search",
    "SearchSpec",
    "Settings",
    "Store",
    "SummaryDAG",
    "UnitRow",
]


@dataclass(frozen=True, slots=True)
class NewSummary:
    """A summary about to be written. The store derives its span, times and counts from
    ``sources`` inside the write transaction, and refuses it if the sources are no longer
    on the frontier (another process compacted first). ``root``: a whole-conversation
    root over summaries covering #1 onward (:func:`lossless.core.dag.root_span`); its
    sources keep their place on the frontier."""

    conversation_id: str
    depth: int
    content: str
    token_count: int
    sources: tuple[SourceRef, ...]
    summarizer: str
    fallback_level: int = 0
    metadata: dict[str, Any] = field(default_factory=dict)
    root: bool = False


class NewUnit(Protocol):
    """A retrieval unit about to be written (``RecallUnits.add_units``): what the store
    reads of one. :class:`lossless.recall.units.Unit` is one; recall cuts them, the store
    only keeps them, so it names the shape rather than importing recall (issue 28)."""

    @property
    def kind(self) -> str: ...
    @property
    def first_seq(self) -> int: ...
    @property
    def last_seq(self) -> int: ...
    @property
    def part(self) -> int: ...
    @property
    def role(self) -> str | None: ...
    @property
    def message_ids(self) -> tuple[str, ...]: ...
    @property
    def text(self) -> str: ...
    @property
    def sha256(self) -> str: ...
    @property
    def start_ts(self) -> float: ...
    @property
    def end_ts(self) -> float: ...


@dataclass(frozen=True, slots=True)
class RevisedSummary:
    """A summary's new text (``lossless compact --redo-fallbacks``): its id, span and
    sources stay; the earlier text is kept in ``summary_revisions``."""

    content: str
    token_count: int
    summarizer: str
    fallback_level: int
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
    min_seq: int | None = None  # only messages/summaries starting at or after this seq
    mode: Literal["fts", "raw", "regex", "semantic", "hybrid"] = "fts"
    sort: Literal["relevance", "recency"] = "relevance"
    limit: int = 20
    snippets: bool = True  # False: hits carry no snippet (recall ranks ids; it needs no text)
    # also match a CJK query's Han characters one by one (store/fts.py cjk_query_chars),
    # ranked under its words: what recall asks, as a question's words may be written
    # differently in the message; a search for a word (the default) finds the word
    cjk_chars: bool = False


class UnitRow(NamedTuple):
    """One retrieval unit as stored (see :mod:`lossless.recall.units`). A named tuple: a
    k-NN reads hundreds per query, and one is built three times as fast as a frozen
    dataclass."""

    rowid: int
    conversation_id: str
    kind: str
    first_seq: int
    last_seq: int
    part: int
    role: str | None
    message_ids: tuple[str, ...]
    text: str
    start_ts: float
    end_ts: float
    text_sha256: str


class RecallIndex(Protocol):
    """Where recall keeps retrieval units, the embedding cache and vector indexes:
    ``SQLiteRecall`` (sqlite-vec or numpy) or ``PostgresRecall`` (pgvector).

    Units and vectors are made outside any transaction (a model call takes a while) and
    written after; an erase may replace the units meanwhile. So ``add_units`` writes
    nothing (False) if the conversation got a tombstone since ``erasures`` was read before
    its messages, and ``add_vectors`` stores vectors, and the cached embeddings of the
    ``fresh`` text hashes, only for units still stored as they were read (returning how
    many), checked in the transaction that writes them. ``upgrade_index`` rebuilds an index
    stored in an older layout (the number of vectors moved, None when there was nothing to
    do); the one that writes vectors calls it, so no query waits for it."""

    backend: str

    def progress(self, conversation_id: str) -> tuple[int, int]: ...
    def erasures(self, conversation_id: str) -> int: ...
    def add_units(self, conversation_id: str, units: Sequence[NewUnit], message_seq: int, window_seq: int,
                  erasures: int | None = None) -> bool: ...
    def units(self, rowids: Sequence[int], *, text: bool = True) -> dict[int, UnitRow]: ...
    def cached(self, provider: str, model: str, shas: Sequence[str]) -> dict[str, np.ndarray]: ...
    def cache_put(self, provider: str, model: str, items: Sequence[tuple[str, np.ndarray]]) -> None: ...
    def cache_size(self) -> int: ...
    def ensure_index(self, provider: str, model: str, dim: int) -> str: ...
    def upgrade_index(self, index: str, dim: int) -> int | None: ...
    def indexed_upto(self, index: str, conversation_id: str) -> int: ...
    def pending(self, index: str, conversation_id: str, limit: int) -> list[UnitRow]: ...
    def pending_count(self, index: str, conversation_id: str, *, upto: int | None = None,
                      first_parts: bool = False) -> int: ...
    def add_vectors(self, index: str, conversation_id: str, rows: Sequence[tuple[UnitRow, np.ndarray]],
                    fresh: Collection[str] = (), through: int = 0) -> int: ...
    def knn(self, index: str, provider: str, model: str, conversation_ids: Sequence[str], query: Vectors,
            k: int, kinds: Sequence[str] | None = None) -> list[tuple[int, float]]: ...


class SQLAccess(Protocol):
    """The one public way for a plug-in (``files/``, ``memory/``) to run SQL against the
    store's database: statements in the store's own dialect and placeholder style
    (``?`` on SQLite, ``%s`` on PostgreSQL; :mod:`lossless.store.runner` writes one
    ``?`` text for both)."""

    dialect: str  # "sqlite" or "postgresql": which SQL a plug-in speaks to it

    def query(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one statement (inside this thread's transaction, if one is open) and
        return its rows; a write returns none."""
        ...

    def transaction(self) -> AbstractContextManager[Any]:
        """One write transaction (re-entrant: a nested one joins it); yields the
        database connection, whose ``execute`` takes the store's placeholders."""
        ...


class Settings(Protocol):
    """Per-database settings (JSON values), and closing the database."""

    def close(self) -> None: ...
    def get_settings(self) -> dict[str, Any]: ...
    def set_settings(self, values: dict[str, Any]) -> None: ...


class MessageLog(Protocol):
    """Conversations and their messages, kept verbatim and numbered 1, 2, 3…"""

    def ensure_conversation(
        self, conversation_id: str, metadata: dict[str, Any] | None = None
    ) -> ConversationInfo: ...
    def get_conversation(self, conversation_id: str) -> ConversationInfo | None: ...
    def drop_if_empty(self, conversation_id: str) -> bool:
        """Delete the conversation's row if it holds no message (one created by a write
        that was then rolled back); whether it did. A conversation with messages is never
        touched."""
        ...
    def list_conversations(
        self, limit: int = 100, offset: int = 0, *, id_prefix: str | None = None
    ) -> list[ConversationInfo]:
        """Most recently updated first; ``id_prefix`` keeps the ids that start with it (an
        index range scan, compared byte-wise: a server tenant's ``@name/``)."""
        ...
    def append_messages(
        self, conversation_id: str, messages: Sequence[NewMessage], token_counts: Sequence[int]
    ) -> list[Message]: ...
    def get_messages(
        self, conversation_id: str, first_seq: int = 1, last_seq: int | None = None
    ) -> list[Message]: ...
    def get_message(self, message_id: str) -> Message: ...
    def messages_by_id(self, message_ids: Sequence[str]) -> dict[str, Message]: ...
    def messages_at(self, conversation_id: str, seqs: Sequence[int]) -> dict[int, Message]: ...
    def last_seq(self, conversation_id: str) -> int: ...
    def token_sum(self, conversation_id: str, first_seq: int, last_seq: int | None = None) -> int: ...
    def first_message_ts(self, conversation_id: str) -> float | None: ...
    def role_counts(self, conversation_id: str, first_seq: int, last_seq: int) -> dict[str, int]: ...


class SummaryDAG(Protocol):
    """The summaries: written by compaction under :mod:`lossless.core.dag`'s rules."""

    def insert_summary(self, new: NewSummary) -> Summary | None: ...
    def revise_summary(self, summary_id: str, expected: str, revision: RevisedSummary) -> Summary | None: ...
    def summary_revisions(self, summary_id: str) -> list[dict[str, Any]]: ...
    def get_summary(self, summary_id: str) -> Summary: ...
    def parent_of(self, summary_id: str) -> str | None: ...
    def frontier(self, conversation_id: str) -> list[Summary]: ...
    def root(self, conversation_id: str) -> Summary | None: ...
    def covered_seq(self, conversation_id: str) -> int: ...
    def summaries(self, conversation_id: str) -> list[Summary]: ...
    def leaf_for(self, conversation_id: str, seq: int) -> Summary | None: ...
    def summarizer_usage(self, conversation_id: str | None = None) -> dict[str, Any]: ...


class CompactionLeases(Protocol):
    """One compactor per conversation at a time, and the log of what compaction did."""

    def acquire_lease(self, conversation_id: str, owner: str, reason: str, stale_after: float) -> bool: ...
    def heartbeat_lease(self, conversation_id: str, owner: str) -> None: ...
    def release_lease(self, conversation_id: str, owner: str) -> None: ...
    def lease(self, conversation_id: str) -> dict[str, Any] | None: ...
    def log_compaction(self, conversation_id: str, entry: dict[str, Any]) -> None: ...
    def compaction_log(self, conversation_id: str, limit: int = 100) -> list[dict[str, Any]]: ...


class MemoryWatermarks(Protocol):
    """How far each conversation's messages were flushed to long-term memories (the
    memories themselves are ``memory/``'s tables, reached through :class:`SQLAccess`)."""

    def flushed_seq(self, conversation_id: str) -> int: ...
    def set_flushed_seq(self, conversation_id: str, last_seq: int) -> None: ...


class Search(Protocol):
    """Keyword and regex search over messages and summaries, and the integrity check."""

    def search(self, spec: SearchSpec) -> list[GrepHit]: ...
    def verify(self, conversation_id: str | None = None, *, integrity: bool = True) -> list[str]: ...


class RecallUnits(Protocol):
    """Recall storage (units, embedding cache, vectors) in the same database."""

    def recall_index(self, backend: str = "auto") -> RecallIndex: ...


class FileIndex(Protocol):
    """The workspace file index (``files/``; its tables are reached through :class:`SQLAccess`)."""

    def has_files(self) -> bool: ...


@runtime_checkable
class Store(SQLAccess, Settings, MessageLog, SummaryDAG, CompactionLeases, MemoryWatermarks,
            Search, RecallUnits, FileIndex, Protocol):
    """Everything the engine needs of a database: the role protocols above, together.
    ``SQLiteStore`` and ``PostgresStore`` implement it; ``store/conformance.py`` makes
    mypy prove it. Every write method is one transaction."""
