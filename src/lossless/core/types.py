"""Value types shared by every part of lossless: frozen dataclasses and wire shapes."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, NotRequired, TypedDict

from lossless.core.content import content_text

__all__ = [
    "ROLES",
    "AssembledContext",
    "ChatMessage",
    "ContextItem",
    "ConversationInfo",
    "GrepHit",
    "Lag",
    "Message",
    "Role",
    "SourceRef",
    "Summary",
    "ToolCall",
]

Role = Literal["system", "user", "assistant", "tool"]
ROLES: tuple[str, ...] = ("system", "user", "assistant", "tool")


class ToolCallFunction(TypedDict):
    name: str
    arguments: str


class ToolCall(TypedDict):
    """An OpenAI-style tool call as stored on an assistant message."""

    id: str
    type: Literal["function"]
    function: ToolCallFunction


class ChatMessage(TypedDict):
    """One message of an assembled context, ready for an OpenAI-style chat API."""

    role: str
    content: str | list[dict[str, Any]] | None
    name: NotRequired[str]
    tool_calls: NotRequired[list[ToolCall]]
    tool_call_id: NotRequired[str]


@dataclass(frozen=True, slots=True)
class Message:
    """One stored message. Immutable: lossless never edits or deletes a message."""

    id: str
    conversation_id: str
    seq: int
    role: str
    content: str | list[dict[str, Any]] | None
    created_at: datetime
    token_count: int
    name: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    external_id: str | None = None

    @property
    def text(self) -> str:
        """The message as plain text: text parts joined, tool calls spelled out."""
        return content_text(self.content, self.tool_calls)

    def to_chat(self) -> ChatMessage:
        """The message in OpenAI chat format, exactly as it was given."""
        out: ChatMessage = {"role": self.role, "content": self.content}
        if self.name is not None:
            out["name"] = self.name
        if self.tool_calls:
            out["tool_calls"] = list(self.tool_calls)
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        return out


@dataclass(frozen=True, slots=True)
class SourceRef:
    """One ordered link from a summary to a message or a summary it covers."""

    kind: Literal["message", "summary"]
    id: str


@dataclass(frozen=True, slots=True)
class Summary:
    """A node of the summary DAG.

    ``depth`` 0 is a leaf over raw messages; depth d+1 covers depth-d (or, for the
    rolling root, mixed-depth) summaries. Every node covers the contiguous message
    span ``first_seq..last_seq``. ``root``: a whole-conversation root (seed 000's
    "root" node): it covers #1 onward through the frontier it was made from, is
    nobody's source and is never on the frontier.
    """

    id: str
    conversation_id: str
    depth: int
    content: str
    token_count: int
    first_seq: int
    last_seq: int
    earliest_at: datetime
    latest_at: datetime
    descendant_count: int
    source_token_count: int
    summarizer: str
    fallback_level: int
    created_at: datetime
    sources: tuple[SourceRef, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)
    root: bool = False

    @property
    def message_count(self) -> int:
        return self.last_seq - self.first_seq + 1

    @property
    def kind(self) -> Literal["leaf", "condensed", "root"]:
        """Seed 000's node type: a leaf over messages, condensed over summaries, or the root."""
        return "root" if self.root else "leaf" if self.depth == 0 else "condensed"


@dataclass(frozen=True, slots=True)
class ConversationInfo:
    id: str
    created_at: datetime
    updated_at: datetime
    message_count: int
    summary_count: int
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ContextItem:
    """Where one part of an assembled context came from (for inspection and tests)."""

    tier: Literal["pinned", "fresh_tail", "summary", "root", "omitted", "recall", "memory", "file"]
    ref: str
    tokens: int
    first_seq: int
    last_seq: int


@dataclass(frozen=True, slots=True)
class Lag:
    """How far behind the background worker was when a context was assembled: for how
    long work has been owed to the conversation, its messages that no summary covers
    yet, its messages not cut into retrieval units yet and its units without a vector
    (those are found by keyword recall only, until the worker catches up)."""

    seconds: float
    raw_messages: int
    messages_not_indexed: int
    units_not_embedded: int


@dataclass(frozen=True, slots=True)
class AssembledContext:
    """The result of :meth:`Conversation.assemble`.

    ``messages`` is a list of OpenAI-style chat messages; ``tokens`` is their size by
    the configured tokenizer, including per-message overhead, and never exceeds
    ``budget_tokens``. ``stable_prefix``: how many of the first ``messages`` are the
    cache-stable layout's prefix (:mod:`lossless.context.stable`), the same from turn to
    turn until the next compaction (0: no such prefix, the budgeted layout).
    """

    messages: list[ChatMessage]
    tokens: int
    budget_tokens: int
    items: tuple[ContextItem, ...] = ()
    stable_prefix: int = 0
    # set when the worker owed the conversation work (None: caught up); a measurement of
    # when it was assembled, not part of the context: two equal contexts may differ in it
    lag: Lag | None = field(default=None, compare=False)

    def tier_tokens(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for item in self.items:
            out[item.tier] = out.get(item.tier, 0) + item.tokens
        return out


@dataclass(frozen=True, slots=True)
class GrepHit:
    """One search result. ``kind`` "window" is a run of QA pairs found by vector search;
    its ``id`` is its first message's. ``matched`` says how a ``semantic`` or ``hybrid``
    search found it: ``vector``, ``keyword`` or ``both`` (a semantic search finds the
    messages not embedded yet by keywords); None for the keyword modes."""

    kind: Literal["message", "summary", "window"]
    id: str
    conversation_id: str
    first_seq: int
    last_seq: int
    role: str | None
    created_at: datetime
    snippet: str
    score: float
    depth: int | None = None
    matched: Literal["vector", "keyword", "both"] | None = None
