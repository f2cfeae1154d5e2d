"""The Summarizer plug point: what a summarizer is given and what it returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol, runtime_checkable

from lossless.core.stats import BreakerState
from lossless.core.tokens import TokenCounter

__all__ = ["GuardedSummarizer", "Summarizer", "SummaryItem", "SummaryRequest", "SummaryResult"]


@dataclass(frozen=True, slots=True)
class SummaryItem:
    """One unit of summarizer input: a raw message (leaf pass) or a child summary
    (condense pass), in conversation order."""

    kind: Literal["message", "summary"]
    ref: str  # msg_… or sum_…
    text: str  # the message as plain text, or the child summary's content
    first_seq: int
    last_seq: int
    created_at: datetime  # a message's time; a summary's earliest time
    latest_at: datetime
    role: str | None = None  # messages only
    name: str | None = None  # messages only
    depth: int | None = None  # summaries only


@dataclass(frozen=True, slots=True)
class SummaryRequest:
    """Summarize ``items`` into at most ``target_tokens`` tokens (by ``counter``).

    ``depth`` is the depth of the node being written: 0 leaf, 1+ condensed. ``mode`` is
    ``"aggressive"`` on the retry after an output that did not shrink enough.
    ``previous_summary`` is the summary just before this span, for continuity only.
    """

    items: tuple[SummaryItem, ...]
    depth: int
    target_tokens: int
    counter: TokenCounter
    mode: Literal["normal", "aggressive"] = "normal"
    previous_summary: str | None = None
    conversation_id: str = ""
    # the zone the items' times are written in (``Config.timezone``: an IANA name, UTC, +08:00)
    timezone: str = "UTC"


@dataclass(frozen=True, slots=True)
class SummaryResult:
    text: str
    model: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Summarizer(Protocol):
    """Writes one summary. Must not mutate anything; may raise on failure (the
    compaction engine retries, escalates and finally falls back to extraction)."""

    name: str

    def summarize(self, request: SummaryRequest) -> SummaryResult: ...


@runtime_checkable
class GuardedSummarizer(Protocol):
    """A summarizer that can tell, without calling anyone, that it cannot be used now
    (the LLM summarizers: their provider's circuit breaker is open). Compaction asks
    before each summary and then falls back to extraction at once, saying why."""

    def unavailable(self) -> str | None: ...

    def breaker_state(self) -> BreakerState: ...
