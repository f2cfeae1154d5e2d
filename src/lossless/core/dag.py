"""The summary DAG's rules, with no SQL and no I/O: what a new summary covers, when it
may be written, and what a stored conversation must satisfy.

A conversation's messages are numbered 1, 2, 3… (``seq``). A **leaf** (depth 0)
summarizes a contiguous run of messages; a **condensed** node (depth d + 1) summarizes a
contiguous run of nodes of depth at most d, the deepest of depth d, and becomes their
parent. The nodes with no parent are the **frontier**: read in order they cover
messages 1..n once each, with no gap and no overlap. Both stores derive a new summary's
span here (:func:`leaf_span`, :func:`condensed_span`) from the source rows they read
inside the write transaction, and :func:`verify` re-checks a whole stored conversation;
the stores keep only the SQL, the locking and the transactions.

A **root** (seed 000's whole-conversation summary) stands beside that tree: it
summarizes a contiguous cover of messages 1..k by existing summaries (the frontier when
it was made) and is its own parent, so it is never on the frontier, never condensed,
and the nodes it was made from keep their place. Each refresh writes a new root; the
current one is the root reaching furthest (:func:`root_span` derives its span).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from lossless.core._canonical import message_hash
from lossless.core.errors import NotFoundError, ValidationError
from lossless.core.types import SourceRef

__all__ = [
    "SourceMessage",
    "SourceSummary",
    "Span",
    "StoredMessage",
    "StoredNode",
    "condensed_span",
    "extends_frontier",
    "leaf_span",
    "root_span",
    "source_kind",
    "verify",
]


@dataclass(frozen=True, slots=True)
class SourceMessage:
    """What a leaf needs of one message it covers."""

    seq: int
    created_at: str  # ISO 8601, as stored
    created_ts: float  # Unix seconds
    token_count: int


@dataclass(frozen=True, slots=True)
class SourceSummary:
    """What a condensed node needs of one summary it covers."""

    id: str
    depth: int
    first_seq: int
    last_seq: int
    earliest_at: str
    earliest_ts: float
    latest_at: str
    latest_ts: float
    descendant_count: int
    token_count: int
    parent_id: str | None


@dataclass(frozen=True, slots=True)
class Span:
    """What a new summary covers, derived from its sources: its seqs, its time range (the
    ISO text and the Unix seconds of each end), how many nodes and messages lie below
    it, and the tokens of its sources."""

    first_seq: int
    last_seq: int
    earliest_at: str
    earliest_ts: float
    latest_at: str
    latest_ts: float
    descendant_count: int
    source_token_count: int


def source_kind(sources: Sequence[SourceRef]) -> Literal["message", "summary"]:
    """Whether a new summary is a leaf ("message") or condensed ("summary"); its sources
    must be at least one and all of one kind."""
    if not sources:
        raise ValidationError("a summary needs at least one source")
    kinds = {s.kind for s in sources}
    if len(kinds) != 1:
        raise ValidationError("a summary's sources are all messages or all summaries")
    return sources[0].kind


def leaf_span(depth: int, wanted: int, rows: Sequence[SourceMessage]) -> Span:
    """The span of a leaf over ``rows`` (the source messages found, in seq order) when
    ``wanted`` were named. Raises NotFoundError if some were not found and
    ValidationError unless they are a contiguous run and ``depth`` is 0."""
    if not rows or len(rows) != wanted:
        raise NotFoundError("a leaf source message does not exist in this conversation")
    first, last = int(rows[0].seq), int(rows[-1].seq)
    if last - first + 1 != len(rows) or depth != 0:
        raise ValidationError("a leaf covers a contiguous run of messages and has depth 0")
    earliest = min(rows, key=lambda r: r.created_ts)
    latest = max(rows, key=lambda r: r.created_ts)
    return Span(first_seq=first, last_seq=last, earliest_at=earliest.created_at, earliest_ts=earliest.created_ts,
                latest_at=latest.created_at, latest_ts=latest.created_ts, descendant_count=len(rows),
                source_token_count=sum(int(r.token_count) for r in rows))


def extends_frontier(span: Span, covered_seq: int) -> bool:
    """Whether a leaf over ``span`` covers the oldest messages no summary covers yet
    (``covered_seq``: the last seq the frontier covers). A leaf computed from a state
    that has moved on does not, and is not written."""
    return span.first_seq == covered_seq + 1


def condensed_span(depth: int, ids: Sequence[str], rows: Sequence[SourceSummary]) -> Span | None:
    """The span of a condensed node over ``rows`` (the source summaries found, ordered by
    first seq) when ``ids`` were named, in that order. None if a source already has a
    parent (another compaction landed first: nothing should be written). Raises
    NotFoundError if some were not found, ValidationError unless they were named in
    conversation order, are contiguous, and ``depth`` is one more than the deepest."""
    if not rows or len(rows) != len(ids):
        raise NotFoundError("a source summary does not exist in this conversation")
    if any(r.parent_id is not None for r in rows):
        return None
    if [r.id for r in rows] != list(ids):
        raise ValidationError("condensed sources must be given in conversation order")
    for a, b in itertools.pairwise(rows):
        if a.last_seq + 1 != b.first_seq:
            raise ValidationError("condensed sources must be contiguous")
    if depth != max(r.depth for r in rows) + 1:
        raise ValidationError("a condensed summary's depth is one more than its deepest source")
    earliest = min(rows, key=lambda r: r.earliest_ts)
    latest = max(rows, key=lambda r: r.latest_ts)
    return Span(first_seq=int(rows[0].first_seq), last_seq=int(rows[-1].last_seq),
                earliest_at=earliest.earliest_at, earliest_ts=earliest.earliest_ts,
                latest_at=latest.latest_at, latest_ts=latest.latest_ts,
                descendant_count=sum(int(r.descendant_count) + 1 for r in rows),
                source_token_count=sum(int(r.token_count) for r in rows))


def root_span(depth: int, ids: Sequence[str], rows: Sequence[SourceSummary], message_tokens: int) -> Span:
    """The span of a root over ``rows`` (the source summaries found, ordered by first
    seq) when ``ids`` were named, in that order. Raises NotFoundError if some were not
    found, ValidationError unless they are non-root summaries named in conversation
    order that cover #1 onward contiguously, and ``depth`` is one more than the deepest.
    What a root covers is the conversation's messages #1 onward (``message_tokens`` of
    them), not the frontier it was read from, whose words it may keep as they are: its
    ``source_token_count`` is theirs, so "shorter than what it covers" holds for it too."""
    if not rows or len(rows) != len(ids):
        raise NotFoundError("a source summary of the root does not exist in this conversation")
    if [r.id for r in rows] != list(ids):
        raise ValidationError("a root's sources must be given in conversation order")
    if any(r.parent_id == r.id for r in rows):
        raise ValidationError("a root summarizes summaries, not another root")
    if rows[0].first_seq != 1 or any(a.last_seq + 1 != b.first_seq for a, b in itertools.pairwise(rows)):
        raise ValidationError("a root's sources must cover the conversation from #1 without a gap")
    if depth != max(r.depth for r in rows) + 1:
        raise ValidationError("a root's depth is one more than its deepest source")
    earliest = min(rows, key=lambda r: r.earliest_ts)
    latest = max(rows, key=lambda r: r.latest_ts)
    return Span(first_seq=1, last_seq=int(rows[-1].last_seq),
                earliest_at=earliest.earliest_at, earliest_ts=earliest.earliest_ts,
                latest_at=latest.latest_at, latest_ts=latest.latest_ts,
                descendant_count=sum(int(r.descendant_count) + 1 for r in rows),
                source_token_count=message_tokens)


# -- verification --------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class StoredMessage:
    """A stored message as verify re-hashes it (JSON columns already parsed)."""

    seq: int
    id: str
    role: str
    content: Any
    name: str | None
    tool_calls: tuple[Any, ...]
    tool_call_id: str | None
    content_hash: str


@dataclass(frozen=True, slots=True)
class StoredNode:
    """A stored summary's place in the DAG (a root is its own parent)."""

    id: str
    depth: int
    first_seq: int
    last_seq: int
    parent_id: str | None

    @property
    def root(self) -> bool:
        return self.parent_id == self.id


def verify(conversation_id: str, last_seq: int, messages: Sequence[StoredMessage],
           summaries: Sequence[StoredNode], sources: Mapping[str, Sequence[SourceRef]]) -> list[str]:
    """Every broken invariant of one stored conversation, in words; empty when all hold.

    ``last_seq``: the conversation's message count as recorded; ``messages`` in seq
    order; ``summaries`` in the order problems should be reported; ``sources``: each
    summary's sources in order. Checks that the seqs are exactly 1..last_seq, each
    message matches its content hash, the frontier covers a prefix of the messages once,
    each leaf covers exactly its span's messages, and each condensed node's sources are
    summaries of this conversation, cover its span contiguously, and have it as parent;
    a root's sources are non-root summaries covering #1..its last seq contiguously.
    """
    cid = conversation_id
    problems: list[str] = []
    if [m.seq for m in messages] != list(range(1, last_seq + 1)):
        problems.append(f"{cid}: message seqs are not exactly 1..{last_seq}")
    for m in messages:
        if message_hash(m.role, m.content, m.name, m.tool_calls, m.tool_call_id) != m.content_hash:
            problems.append(f"{cid}: message #{m.seq} does not match its content hash")
    problems += _frontier_problems(cid, last_seq, summaries)
    seq_of = {m.id: m.seq for m in messages}
    nodes = {n.id: n for n in summaries}
    for node in summaries:
        refs = sources.get(node.id, ())
        if node.root:
            problems += _root_problems(cid, node, [nodes.get(ref.id) for ref in refs],
                                       all(ref.kind == "summary" for ref in refs))
        elif node.depth == 0:
            seqs = [seq_of.get(ref.id, -1) for ref in refs if ref.kind == "message"]
            if len(seqs) != len(refs) or seqs != list(range(node.first_seq, node.last_seq + 1)):
                problems.append(f"{cid}: leaf {node.id} does not cover exactly #{node.first_seq}..#{node.last_seq}")
        else:
            problems += _condensed_problems(cid, node, [nodes.get(ref.id) for ref in refs])
    return problems


def _frontier_problems(cid: str, last_seq: int, summaries: Sequence[StoredNode]) -> list[str]:
    problems: list[str] = []
    expect = 1
    for node in sorted((n for n in summaries if n.parent_id is None and not n.root), key=lambda n: n.first_seq):
        if node.first_seq != expect:
            problems.append(f"{cid}: frontier gap or overlap at {node.id} (starts #{node.first_seq}, "
                            f"expected #{expect})")
        expect = node.last_seq + 1
    if expect - 1 > last_seq:
        problems.append(f"{cid}: summaries cover #{expect - 1} but only {last_seq} messages exist")
    return problems


def _condensed_problems(cid: str, node: StoredNode, kids: Sequence[StoredNode | None]) -> list[str]:
    found = [k for k in kids if k is not None]
    if not kids or len(found) != len(kids):
        return [f"{cid}: {node.id} has a source that is not a summary of this conversation"]
    problems: list[str] = []
    spans = [(k.first_seq, k.last_seq) for k in found]
    if spans[0][0] != node.first_seq or spans[-1][1] != node.last_seq or any(
        a[1] + 1 != b[0] for a, b in itertools.pairwise(spans)
    ):
        problems.append(f"{cid}: {node.id} sources are not a contiguous cover of its span")
    if any(k.parent_id != node.id for k in found):
        problems.append(f"{cid}: a source of {node.id} has another parent")
    return problems


def _root_problems(cid: str, node: StoredNode, kids: Sequence[StoredNode | None], all_summaries: bool) -> list[str]:
    found = [k for k in kids if k is not None]
    if not kids or not all_summaries or len(found) != len(kids):
        return [f"{cid}: root {node.id} has a source that is not a summary of this conversation"]
    problems: list[str] = []
    spans = [(k.first_seq, k.last_seq) for k in found]
    if node.first_seq != 1 or spans[0][0] != 1 or spans[-1][1] != node.last_seq or any(
        a[1] + 1 != b[0] for a, b in itertools.pairwise(spans)
    ):
        problems.append(f"{cid}: root {node.id} sources are not a contiguous cover of #1..#{node.last_seq}")
    if any(k.root for k in found):
        problems.append(f"{cid}: root {node.id} has another root as a source")
    if node.depth != max(k.depth for k in found) + 1:
        problems.append(f"{cid}: root {node.id} is not one level above its deepest source")
    return problems
