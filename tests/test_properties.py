"""Property tests for the invariants DESIGN.md states, on both backends (SQLite in memory;
PostgreSQL: one shared database, a conversation of its own per example)."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import lossless
from lossless.core.tokens import count_chat_tokens, get_counter
from lossless.testing import FakeSummarizer

from .backends import BACKENDS, open_backend
from .conftest import T0

on_both = pytest.mark.parametrize("backend", BACKENDS)

WORDS = ["port", "5433", "deploy", "Maya", "decided", "because", "error:", "数据库", "迁移", "決定",
         "src/app.py", "v2.3.1", "ok", "latency", "42ms", "the", "we", "和", "🚀", "TODO"]

PROPS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])

text_st = st.lists(st.sampled_from(WORDS), min_size=1, max_size=400).map(" ".join)
latin_st = st.lists(st.sampled_from([w for w in WORDS if w.isascii()]), min_size=1, max_size=60).map(" ".join)

event_st = st.one_of(
    st.tuples(st.just("user"), text_st),
    st.tuples(st.just("assistant"), text_st),
    st.tuples(st.just("tools"), st.integers(min_value=1, max_value=3)),
    st.tuples(st.just("system"), text_st),
    st.tuples(st.just("compact"), st.sampled_from(["force", "full", "emergency"])),
)


def _play(conv: lossless.Conversation, events: list[tuple[str, Any]]) -> list[dict[str, Any]]:
    added: list[dict[str, Any]] = []
    for i, (kind, arg) in enumerate(events):
        t = T0 + timedelta(minutes=i)
        if kind == "compact":
            conv.compact(force=arg == "force", full=arg == "full", emergency=arg == "emergency")
            continue
        if kind == "tools":
            calls = [{"id": f"c{i}_{k}", "type": "function", "function": {"name": "run", "arguments": "{}"}}
                     for k in range(arg)]
            batch: list[dict[str, Any]] = [{"role": "assistant", "content": "", "tool_calls": calls, "created_at": t}]
            batch += [{"role": "tool", "tool_call_id": c["id"], "content": f"result {i} " * 30, "created_at": t}
                      for c in calls]
        else:
            batch = [{"role": kind, "content": arg, "created_at": t}]
        conv.add_many(batch)
        added.extend(batch)
    return added


def _check_partition(conv: lossless.Conversation) -> None:
    total = len(conv.messages())
    expect = 1
    for node in conv.frontier():
        assert node.first_seq == expect, "gap or overlap in the frontier"
        expect = node.last_seq + 1
    assert expect - 1 <= total
    assert conv.memory.verify(conv.id) == []


def _check_tool_pairs(messages: list[dict[str, Any]]) -> None:
    open_calls: set[str] = set()
    for m in messages:
        if m.get("tool_calls"):
            open_calls = {c["id"] for c in m["tool_calls"]}
        elif m["role"] == "tool":
            assert m["tool_call_id"] in open_calls, "a tool result without its call"
        else:
            open_calls = set()


def _fresh(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


@on_both
@PROPS
@given(events=st.lists(event_st, min_size=1, max_size=40), window=st.sampled_from([512, 1024, 4096]))
def test_frontier_and_tail_partition_history(backend: str, shared_target: str, events: list[tuple[str, Any]],
                                             window: int) -> None:
    with open_backend(backend, shared_target, context_window=window, fresh_tail_count=4) as mem:
        conv = mem.conversation(_fresh("p"))
        added = _play(conv, events)
        _check_partition(conv)
        stored = conv.messages()
        assert [m.content for m in stored] == [a["content"] for a in added]


@on_both
@PROPS
@given(events=st.lists(event_st, min_size=5, max_size=40))
def test_expand_returns_exact_originals(backend: str, shared_target: str, events: list[tuple[str, Any]]) -> None:
    with open_backend(backend, shared_target, context_window=512, fresh_tail_count=2) as mem:
        conv = mem.conversation(_fresh("e"))
        _play(conv, events)
        conv.compact(full=True)
        originals = {m.id: m for m in conv.messages()}
        for node in conv.summaries():
            out = conv.expand(node.id, max_tokens=10**9)
            assert not out["truncated"]
            got = [originals[item["id"]] for item in out["items"]]
            assert [m.seq for m in got] == list(range(node.first_seq, node.last_seq + 1))
            for item, msg in zip(out["items"], got, strict=True):
                assert item["content"] == msg.content


@on_both
@PROPS
@given(events=st.lists(event_st, min_size=1, max_size=30), budget=st.integers(min_value=1, max_value=3000),
       query=st.one_of(st.none(), text_st))
def test_assembly_within_budget_and_keeps_tool_pairs(backend: str, shared_target: str, events: list[tuple[str, Any]],
                                                     budget: int, query: str | None) -> None:
    # deferred: the whole history is a backlog the worker has not touched yet (assembly must
    # not wait for it), then the same checks once the worker has caught up
    with open_backend(backend, shared_target, context_window=1024, fresh_tail_count=6, compaction="deferred") as mem:
        conv = mem.conversation(_fresh("a"))
        _play(conv, events)
        for _ in ("with a backlog", "caught up"):
            ctx = conv.assemble(budget_tokens=budget, query=query)
            assert ctx.tokens <= budget
            assert ctx.tokens == count_chat_tokens(get_counter("cl100k_base"), ctx.messages)
            _check_tool_pairs(ctx.messages)
            assert conv.assemble(budget_tokens=budget, query=query) == ctx  # deterministic
            assert mem.wait_idle(60, conversations=[conv.id])  # (the PostgreSQL database is shared)
        assert conv.assemble(budget_tokens=budget, query=query).lag is None


@on_both
def test_compaction_terminates_on_one_giant_message(backend: str, shared_target: str) -> None:
    mem = open_backend(backend, shared_target, context_window=2048)
    conv = mem.conversation(_fresh("g"))
    conv.add(role="user", content="Setup: we use port 5433. " + ("lorem ipsum dolor sit amet " * 40_000))
    conv.add(role="assistant", content="Noted.")
    conv.add(role="user", content="Next question?")
    conv.compact()
    leaf = conv.frontier()[0]  # auto-compaction summarized it once a newer user turn came
    assert leaf.first_seq == 1
    assert leaf.token_count < leaf.source_token_count
    assert conv.assemble(budget_tokens=2048).tokens <= 2048
    _check_partition(conv)
    mem.close()


@on_both
def test_compaction_terminates_on_thousands_of_tiny_messages(backend: str, shared_target: str) -> None:
    mem = open_backend(backend, shared_target, context_window=1024, fresh_tail_count=8)
    conv = mem.conversation(_fresh("tiny"))
    conv.add_many([{"role": "user" if i % 2 == 0 else "assistant", "content": "ok"} for i in range(3000)])
    conv.compact(full=True)
    _check_partition(conv)
    assert len(conv.frontier()) <= 2
    assert conv.assemble(budget_tokens=300).tokens <= 300
    mem.close()


@on_both
def test_summarizer_that_grows_its_input_falls_back(backend: str, shared_target: str) -> None:
    fake = FakeSummarizer()
    mem = open_backend(backend, shared_target, context_window=1024, fresh_tail_count=2, summarizer=fake)
    conv = mem.conversation(_fresh("grow"))
    fake.enqueue(*(["blah " * 5000] * 200))
    conv.add_many([{"role": "user" if i % 2 == 0 else "assistant", "content": f"fact {i}: value {i * 7}. " * 20}
                   for i in range(40)])
    conv.compact(full=True)
    nodes = conv.summaries()
    assert nodes
    for node in nodes:
        assert node.token_count < node.source_token_count
    assert any(n.fallback_level == 2 and "errors" in n.metadata for n in nodes)
    _check_partition(conv)
    mem.close()


@on_both
@PROPS
@given(texts=st.lists(latin_st, min_size=1, max_size=40), query=latin_st, limit=st.integers(min_value=1, max_value=12))
@example(texts=["数据库 port"] * 10, query="数据库 port", limit=3)  # two lists merged, every score tied
def test_a_search_limit_cuts_the_ranking_and_changes_nothing_above_it(
        backend: str, shared_target: str, texts: list[str], query: str, limit: int) -> None:
    # each kind's candidates are cut to what can reach the limit before any row is read:
    # the scores returned under a limit are the best ones of an unlimited search. (Words
    # only: when a CJK list is merged in, each list is cut before the merge, so a message
    # low in both can be missed under a small limit; the pinned example has two lists.)
    with open_backend(backend, shared_target, embedder=None, auto_compact=False) as mem:
        conv = mem.conversation(_fresh("s"))
        conv.add_many([{"role": "user", "content": t, "created_at": T0 + timedelta(minutes=i)}
                       for i, t in enumerate(texts)])
        everything = conv.search(query, limit=1000)
        cut = conv.search(query, limit=limit)
        assert [h.score for h in cut] == [h.score for h in everything][:limit]
        assert {h.id for h in cut} <= {h.id for h in everything}
