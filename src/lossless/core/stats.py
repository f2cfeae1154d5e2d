"""What the engine reports about itself: a conversation's backlog and numbers
(:meth:`lossless.Conversation.backlog`, :meth:`lossless.Conversation.stats`) and the
store's background work (:meth:`lossless.Memory.stats`).

Frozen dataclasses, so a caller that branches on them reads typed fields; each has a
``to_dict()`` that is its JSON wire shape (``lossless stats --json``, the HTTP API, MCP).
What is dict-shaped by nature stays a dict, typed where its keys are fixed: a worker's
counters and a summarizer's circuit breaker (written to the ``workers`` table and read
back from other processes) are TypedDicts; the per-summarizer and per-fallback counts
are plain ``dict[str, int]``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal, TypedDict

from lossless.core.config import Compaction

__all__ = [
    "BacklogError",
    "BacklogSummary",
    "BreakerState",
    "ConversationBacklog",
    "ConversationStats",
    "MemoryStats",
    "SummarizerUsage",
    "WorkerCounters",
]

BreakerLevel = Literal["closed", "open", "half-open"]


@dataclass(frozen=True, slots=True)
class ConversationBacklog:
    """What the worker still owes one conversation (:meth:`lossless.Conversation.backlog`)."""

    queued: bool  # a backlog row is waiting for a worker
    queued_seconds: float  # since when work has been owed (0.0 when not queued)
    in_progress: bool  # a worker holds the row now
    messages_not_indexed: int  # not cut into retrieval units yet (0 without an embedder)
    units_not_embedded: int  # retrieval units without a vector
    compaction_due: str | None  # the compaction trigger that fires, as its reason; None: none is due
    failed_attempts: int
    last_error: str | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class SummarizerUsage:
    """Summarizer spend over the summaries written: provider calls, tokens sent and
    received, latency, counts per summarizer and per fallback level (``normal``,
    ``aggressive``, ``extractive``), and the cost ratio, tokens sent to a summarizer model
    per token ingested (0 for the offline extractive summarizer, which calls no model)."""

    summarizer_calls: int = 0
    summarizer_input_tokens: int = 0
    summarizer_output_tokens: int = 0
    summarizer_seconds: float = 0.0
    summaries_by_summarizer: dict[str, int] = field(default_factory=dict)
    summaries_by_fallback: dict[str, int] = field(default_factory=dict)
    summarizer_cost_ratio: float = 0.0

    @classmethod
    def of(cls, usage: dict[str, Any], message_tokens: int) -> SummarizerUsage:
        """From a store's ``summarizer_usage()`` totals, over ``message_tokens`` ingested."""
        spent = int(usage["summarizer_input_tokens"])
        return cls(summarizer_calls=int(usage["summarizer_calls"]), summarizer_input_tokens=spent,
                   summarizer_output_tokens=int(usage["summarizer_output_tokens"]),
                   summarizer_seconds=float(usage["summarizer_seconds"]),
                   summaries_by_summarizer=dict(usage["summaries_by_summarizer"]),
                   summaries_by_fallback=dict(usage["summaries_by_fallback"]),
                   summarizer_cost_ratio=round(spent / message_tokens, 4) if message_tokens else 0.0)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class ConversationStats:
    """One conversation's numbers (:meth:`lossless.Conversation.stats`). ``to_dict()``
    spreads ``usage`` among the top-level keys, as the wire shape always had it."""

    conversation: str
    messages: int
    message_tokens: int
    summaries: int
    max_depth: int  # -1 before the first summary
    frontier_summaries: int
    frontier_tokens: int
    raw_tail_messages: int
    raw_tail_tokens: int
    active_tokens: int
    context_window: int
    usage: SummarizerUsage
    backlog: ConversationBacklog

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "conversation": self.conversation, "messages": self.messages, "message_tokens": self.message_tokens,
            "summaries": self.summaries, "max_depth": self.max_depth, "frontier_summaries": self.frontier_summaries,
            "frontier_tokens": self.frontier_tokens, "raw_tail_messages": self.raw_tail_messages,
            "raw_tail_tokens": self.raw_tail_tokens, "active_tokens": self.active_tokens,
            "context_window": self.context_window,
        }
        out.update(self.usage.to_dict())
        out["backlog"] = self.backlog.to_dict()
        return out


class BacklogError(TypedDict):
    """A failing backlog row: the conversation, its failed attempts and the last error."""

    conversation: str
    attempts: int
    error: str | None


@dataclass(frozen=True, slots=True)
class BacklogSummary:
    """How far behind the workers are (:meth:`lossless.store.backlog.Backlog.summary`):
    conversations queued, since when the oldest work has been owed, how many are being
    worked on now, how many are failing, and the first few errors."""

    conversations: int
    oldest_seconds: float
    in_progress: int
    failing: int
    errors: list[BacklogError]

    def to_dict(self) -> dict[str, Any]:
        return {"conversations": self.conversations, "oldest_seconds": self.oldest_seconds,
                "in_progress": self.in_progress, "failing": self.failing,
                "errors": [dict(e) for e in self.errors]}


class WorkerCounters(TypedDict):
    """What a worker has done since it started
    (:meth:`lossless.compaction.worker.WorkerStats.as_dict`)."""

    state: str  # stopped | idle | working | stopping
    uptime_seconds: float
    busy_seconds: float
    turns: int
    conversations_finished: int
    summaries_written: int
    units_embedded: int
    messages_indexed: int
    errors: int
    memories_forgotten: int
    last_error: str | None
    current: str | None
    units_per_busy_second: float
    summaries_per_busy_second: float


class BreakerState(TypedDict):
    """A summarizer's circuit breaker: its provider, its worst circuit's state, and every
    circuit that is not plainly closed (state, failures in a row, why it opened …)."""

    provider: str
    state: BreakerLevel
    circuits: dict[str, dict[str, object]]


@dataclass(frozen=True, slots=True)
class MemoryStats:
    """The store's background work (:meth:`lossless.Memory.stats`): how it is run, the
    backlog, this process's worker's counters, every worker that reported lately (rows
    other processes wrote, as they wrote them) and this process's summarizer breaker
    (None for a summarizer without one)."""

    compaction: Compaction
    backlog: BacklogSummary
    worker: WorkerCounters
    workers: list[dict[str, Any]]
    breaker: BreakerState | None

    def to_dict(self) -> dict[str, Any]:
        return {"compaction": self.compaction, "backlog": self.backlog.to_dict(), "worker": dict(self.worker),
                "workers": self.workers, "breaker": dict(self.breaker) if self.breaker is not None else None}
