"""The summary DAG's rules on plain values (``lossless.core.dag``): no store involved."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lossless.core import dag
from lossless.core._canonical import message_hash
from lossless.core.errors import NotFoundError, ValidationError
from lossless.core.types import SourceRef


def _messages(first: int, last: int) -> list[dag.SourceMessage]:
    return [dag.SourceMessage(seq=s, created_at=f"t{s}", created_ts=float(s), token_count=10) for s in range(first, last + 1)]


def _node(sid: str, depth: int, first: int, last: int, parent: str | None = None) -> dag.SourceSummary:
    return dag.SourceSummary(id=sid, depth=depth, first_seq=first, last_seq=last, earliest_at=f"t{first}",
                             earliest_ts=float(first), latest_at=f"t{last}", latest_ts=float(last),
                             descendant_count=last - first + 1, token_count=5, parent_id=parent)


# -- source kinds --------------------------------------------------------------------------

def test_a_summary_needs_sources_of_one_kind() -> None:
    with pytest.raises(ValidationError, match="at least one source"):
        dag.source_kind(())
    with pytest.raises(ValidationError, match="all messages or all summaries"):
        dag.source_kind((SourceRef("message", "m"), SourceRef("summary", "s")))
    assert dag.source_kind((SourceRef("summary", "s"),)) == "summary"


# -- leaves --------------------------------------------------------------------------------

def test_a_leaf_spans_its_messages() -> None:
    span = dag.leaf_span(0, 3, _messages(4, 6))
    assert (span.first_seq, span.last_seq, span.descendant_count, span.source_token_count) == (4, 6, 3, 30)
    assert (span.earliest_at, span.latest_at, span.earliest_ts, span.latest_ts) == ("t4", "t6", 4.0, 6.0)


def test_a_leaf_takes_its_times_from_the_earliest_and_latest_message() -> None:
    rows = [dag.SourceMessage(1, "late", 9.0, 1), dag.SourceMessage(2, "early", 1.0, 1)]
    span = dag.leaf_span(0, 2, rows)
    assert (span.earliest_at, span.latest_at) == ("early", "late")


def test_a_leaf_refuses_missing_gapped_or_deep_sources() -> None:
    with pytest.raises(NotFoundError):
        dag.leaf_span(0, 3, _messages(1, 2))
    with pytest.raises(ValidationError, match="contiguous"):
        dag.leaf_span(0, 2, [*_messages(1, 1), *_messages(3, 3)])
    with pytest.raises(ValidationError, match="depth 0"):
        dag.leaf_span(1, 2, _messages(1, 2))


def test_a_leaf_lands_only_right_after_the_frontier() -> None:
    span = dag.leaf_span(0, 2, _messages(5, 6))
    assert dag.extends_frontier(span, 4)
    assert not dag.extends_frontier(span, 6)  # another compactor covered these already
    assert not dag.extends_frontier(span, 2)


# -- condensed nodes -------------------------------------------------------------------------

def test_a_condensed_node_spans_its_sources() -> None:
    rows = [_node("a", 0, 1, 3), _node("b", 1, 4, 9)]
    span = dag.condensed_span(2, ["a", "b"], rows)
    assert span is not None
    assert (span.first_seq, span.last_seq, span.descendant_count, span.source_token_count) == (1, 9, 3 + 1 + 6 + 1, 10)
    assert (span.earliest_at, span.latest_at) == ("t1", "t9")


def test_a_condensed_node_over_parented_sources_is_not_written() -> None:
    assert dag.condensed_span(1, ["a", "b"], [_node("a", 0, 1, 2), _node("b", 0, 3, 4, parent="x")]) is None


def test_a_condensed_node_refuses_bad_sources() -> None:
    rows = [_node("a", 0, 1, 2), _node("b", 0, 3, 4)]
    with pytest.raises(NotFoundError):
        dag.condensed_span(1, ["a", "b", "c"], rows)
    with pytest.raises(ValidationError, match="conversation order"):
        dag.condensed_span(1, ["b", "a"], rows)
    with pytest.raises(ValidationError, match="contiguous"):
        dag.condensed_span(1, ["a", "b"], [_node("a", 0, 1, 2), _node("b", 0, 4, 5)])
    with pytest.raises(ValidationError, match="one more than its deepest"):
        dag.condensed_span(2, ["a", "b"], rows)


# -- verify ----------------------------------------------------------------------------------

def _stored(seq: int) -> dag.StoredMessage:
    text = f"message {seq}"
    return dag.StoredMessage(seq=seq, id=f"m{seq}", role="user", content=text, name=None, tool_calls=(),
                             tool_call_id=None, content_hash=message_hash("user", text, None, (), None))


def _healthy() -> tuple[list[dag.StoredMessage], list[dag.StoredNode], dict[str, list[SourceRef]]]:
    messages = [_stored(s) for s in range(1, 7)]
    nodes = [dag.StoredNode("top", 1, 1, 4, None), dag.StoredNode("l1", 0, 1, 2, "top"),
             dag.StoredNode("l2", 0, 3, 4, "top"), dag.StoredNode("l3", 0, 5, 6, None)]
    sources = {"top": [SourceRef("summary", "l1"), SourceRef("summary", "l2")],
               **{f"l{i}": [SourceRef("message", f"m{2 * i - 1}"), SourceRef("message", f"m{2 * i}")]
                  for i in (1, 2, 3)}}
    return messages, nodes, sources


def test_a_healthy_conversation_verifies() -> None:
    messages, nodes, sources = _healthy()
    assert dag.verify("c", 6, messages, nodes, sources) == []


def test_verify_finds_each_broken_rule() -> None:
    messages, nodes, sources = _healthy()
    assert dag.verify("c", 7, messages, nodes, sources) == ["c: message seqs are not exactly 1..7"]
    altered = [*messages[:2], dag.StoredMessage(3, "m3", "user", "changed", None, (), None, messages[2].content_hash),
               *messages[3:]]
    assert dag.verify("c", 6, altered, nodes, sources) == ["c: message #3 does not match its content hash"]
    gap = [n for n in nodes if n.id != "l3"] + [dag.StoredNode("l3", 0, 6, 6, None)]
    assert "c: frontier gap or overlap at l3 (starts #6, expected #5)" in dag.verify("c", 6, messages, gap, sources)
    assert "c: summaries cover #6 but only 4 messages exist" in dag.verify("c", 4, messages[:4], nodes, sources)
    stray = {**sources, "l1": [SourceRef("message", "m1"), SourceRef("message", "elsewhere")]}
    assert dag.verify("c", 6, messages, nodes, stray) == ["c: leaf l1 does not cover exactly #1..#2"]
    missing = {**sources, "top": [SourceRef("summary", "l1"), SourceRef("summary", "gone")]}
    assert dag.verify("c", 6, messages, nodes, missing) == [
        "c: top has a source that is not a summary of this conversation"]
    reparented = [nodes[0], dag.StoredNode("l1", 0, 1, 2, "other"), *nodes[2:]]
    assert "c: a source of top has another parent" in dag.verify("c", 6, messages, reparented, sources)


# -- properties ------------------------------------------------------------------------------

@st.composite
def histories(draw: st.DrawFn) -> tuple[int, list[int]]:
    """A message count and the sizes of consecutive leaves over a prefix of it."""
    sizes = draw(st.lists(st.integers(1, 5), max_size=8))
    extra = draw(st.integers(0, 5))
    return sum(sizes) + extra, sizes


@given(histories(), st.data())
def test_leaves_and_condensed_nodes_partition_the_history(history: tuple[int, list[int]], data: st.DataObject) -> None:
    """Leaves written one after another, then condensed in random contiguous groups,
    always leave a frontier that verify accepts and whose spans tile 1..covered."""
    total, sizes = history
    messages = [_stored(s) for s in range(1, total + 1)]
    nodes: dict[str, dag.StoredNode] = {}
    sources: dict[str, list[SourceRef]] = {}
    covered = 0
    for i, size in enumerate(sizes):
        span = dag.leaf_span(0, size, _messages(covered + 1, covered + size))
        assert dag.extends_frontier(span, covered)
        sid = f"leaf{i}"
        nodes[sid] = dag.StoredNode(sid, 0, span.first_seq, span.last_seq, None)
        sources[sid] = [SourceRef("message", f"m{s}") for s in range(span.first_seq, span.last_seq + 1)]
        covered = span.last_seq
    for round_ in range(data.draw(st.integers(0, 3))):
        frontier = sorted((n for n in nodes.values() if n.parent_id is None), key=lambda n: n.first_seq)
        if len(frontier) < 2:
            break
        start = data.draw(st.integers(0, len(frontier) - 2))
        end = data.draw(st.integers(start + 2, len(frontier)))
        group = frontier[start:end]
        rows = [_node(n.id, n.depth, n.first_seq, n.last_seq) for n in group]
        depth = max(n.depth for n in group) + 1
        span = dag.condensed_span(depth, [n.id for n in group], rows)
        assert span is not None and (span.first_seq, span.last_seq) == (group[0].first_seq, group[-1].last_seq)
        sid = f"node{round_}"
        nodes[sid] = dag.StoredNode(sid, depth, span.first_seq, span.last_seq, None)
        sources[sid] = [SourceRef("summary", n.id) for n in group]
        for n in group:
            nodes[n.id] = dag.StoredNode(n.id, n.depth, n.first_seq, n.last_seq, sid)
    assert dag.verify("c", total, messages, list(nodes.values()), sources) == []
    frontier = sorted((n for n in nodes.values() if n.parent_id is None), key=lambda n: n.first_seq)
    assert [s for n in frontier for s in range(n.first_seq, n.last_seq + 1)] == list(range(1, covered + 1))


@given(st.lists(st.integers(1, 30), min_size=1, max_size=8, unique=True))
def test_a_leaf_is_accepted_exactly_when_its_seqs_are_a_run(seqs: list[int]) -> None:
    rows = [dag.SourceMessage(s, f"t{s}", float(s), 1) for s in sorted(seqs)]
    run = sorted(seqs) == list(range(min(seqs), max(seqs) + 1))
    if run:
        assert dag.leaf_span(0, len(rows), rows).descendant_count == len(seqs)
    else:
        with pytest.raises(ValidationError):
            dag.leaf_span(0, len(rows), rows)
