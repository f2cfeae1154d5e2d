"""The agent tools' results as they go over the wire (JSON to a model, the HTTP API, MCP
and the CLI): TypedDicts, so a caller that branches on a result is typed while the result
stays the plain JSON object it always was.

- ``lcm_grep`` → :class:`GrepResult` (its hits :class:`HitDict`);
- ``lcm_describe`` → :class:`MessageDescription` or :class:`SummaryDescription`;
- ``lcm_expand`` → :class:`ExpandResult` for a summary (its items
  :class:`ExpandedMessage` or :class:`ExpandedSummary`), :class:`MessageSlice` for a message
  read a slice at a time, :class:`SummarySlice` for a summary's own text read so.
"""

# (no ``from __future__ import annotations``: TypedDict reads NotRequired and total=False
# at run time from evaluated annotations, so ``__required_keys__`` is right)
from typing import Any, Literal, NotRequired, TypedDict, final

from lossless.core.types import ToolCall

__all__ = [
    "ExpandResult",
    "ExpandedMessage",
    "ExpandedSummary",
    "FirstSlice",
    "GrepResult",
    "HitDict",
    "ImportanceDict",
    "LargeContent",
    "MessageBrief",
    "MessageDescription",
    "MessageSlice",
    "PartialMessage",
    "PartialSummary",
    "SummaryBrief",
    "SummaryDescription",
    "SummarySlice",
    "ToolParts",
    "ToolResult",
]


class HitDict(TypedDict):
    """A search hit (:class:`~lossless.core.types.GrepHit`) as JSON; ``matched`` only
    from a semantic or hybrid search."""

    id: str
    kind: Literal["message", "summary", "window"]
    conversation_id: str
    first_seq: int
    last_seq: int
    role: str | None
    depth: int | None
    created_at: str  # ISO 8601
    score: float
    snippet: str
    matched: NotRequired[Literal["vector", "keyword", "both"]]


class GrepResult(TypedDict):
    query: str
    count: int
    hits: list[HitDict]


class SummaryBrief(TypedDict):
    id: str
    kind: Literal["summary"]
    depth: int
    first_seq: int
    last_seq: int
    earliest_at: str
    latest_at: str
    tokens: int


class MessageBrief(TypedDict):
    id: str
    kind: Literal["message"]
    seq: int
    role: str
    name: str | None
    created_at: str
    tokens: int


class ImportanceReason(TypedDict):
    label: str
    weight: float
    evidence: str


class ImportanceDict(TypedDict):
    value: float
    reasons: list[ImportanceReason]
    explanation: str


class LargeContent(TypedDict, total=False):
    """What ``lcm_describe`` adds for a large message: an exploration of its content
    (``{"kind", "summary", "stats"}``) and how to page through it."""

    exploration: dict[str, Any]
    total_chars: int
    sha256: str
    text_source: Literal["content", "parts", "tool_calls"]
    page_chars: int
    pages: int
    read: str


class MessageDescription(MessageBrief, LargeContent):
    """``lcm_describe`` of a message; a large one (``large``) also has the
    :class:`LargeContent` keys."""

    conversation_id: str
    metadata: dict[str, Any]
    external_id: str | None
    summarized_in: str | None  # the leaf summary over it
    importance: ImportanceDict
    preview: str
    large: bool


class SummaryDescription(SummaryBrief):
    """``lcm_describe`` of a summary: how it was made, its parent and direct sources."""

    conversation_id: str
    type: str  # leaf, condensed or root
    message_count: int
    descendant_count: int
    source_tokens: int
    summarizer: str
    fallback_level: int
    created_at: str
    parent: str | None
    children: list[SummaryBrief | MessageBrief]
    metadata: dict[str, Any]
    content: str


@final
class ExpandedSummary(SummaryBrief):
    """A source summary in ``lcm_expand(to="sources")``."""

    content: str


class ToolParts(TypedDict, total=False):
    """An expanded message's tool calls (an assistant's) or the call it answers (a tool's)."""

    tool_calls: list[ToolCall]
    tool_call_id: str


@final
class ExpandedMessage(MessageBrief, ToolParts):
    """An original message in ``lcm_expand``: its content as stored (text or parts)."""

    header: str
    content: str | list[dict[str, Any]] | None


class FirstSlice(TypedDict):
    """The first slice of an item whose text alone is over the budget: ``partial``, the
    rest read by the item's own id from ``next_offset`` (None: nothing is left)."""

    content: str
    partial: bool
    next_offset: int | None
    total_chars: int


@final
class PartialSummary(SummaryBrief, FirstSlice):
    """A source summary too large for the budget: its first slice."""


@final
class PartialMessage(MessageBrief, FirstSlice):
    """An original message too large for the budget: the first slice of its text."""

    header: str


@final
class ExpandResult(TypedDict):
    """``lcm_expand`` of a summary: what it covers from ``next_from_seq`` on, up to a budget."""

    id: str
    to: Literal["messages", "sources"]
    first_seq: int
    last_seq: int
    tokens: int
    truncated: bool
    next_from_seq: int | None
    items: list[ExpandedMessage | PartialMessage | ExpandedSummary | PartialSummary]


class _Slice(TypedDict):
    """Where a slice of a text stands in it, and the slice (what message and summary
    slices share)."""

    offset: int
    next_offset: int | None
    chars: int
    total_chars: int
    page_chars: int
    pages: int
    page: int | None
    sha256: str
    tokens: NotRequired[int]  # a max_tokens slice: the tokens it holds
    content: str


@final
class MessageSlice(_Slice):
    """``lcm_expand`` of a message: one exact slice of its text; the slices joined from
    ``offset=0`` on (``next_offset`` until it is None) are the original."""

    id: str
    kind: Literal["message"]
    conversation_id: str
    seq: int
    role: str
    header: str
    text_source: Literal["content", "parts", "tool_calls"]
    tool_call_id: NotRequired[str]


@final
class SummarySlice(_Slice):
    """``lcm_expand`` of a summary with ``offset``, ``max_chars`` or ``page``: one exact
    slice of the summary's own text (its ``content``), as :class:`MessageSlice` is of a
    message's; how the rest of a :class:`PartialSummary` is read."""

    id: str
    kind: Literal["summary"]
    conversation_id: str
    depth: int
    first_seq: int
    last_seq: int


ToolResult = (GrepResult | MessageDescription | SummaryDescription | ExpandResult | MessageSlice
              | SummarySlice)
