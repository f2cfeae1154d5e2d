"""Seed 003's hierarchical strategy by task ("活跃任务保留摘要，已完成任务保留关键点"):
messages of the turn loop carry their task, and strategy="hierarchical" shows the
summaries of the active task whole, those of completed tasks as key points, and history
of no task by age, always within the budget."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lossless
from lossless.context.pieces import MEMORY_HEADER
from lossless.context.summaries import KEY_POINTS_SHARE
from lossless.core.render import render_summary
from lossless.core.tokens import count_chat_tokens
from lossless.longterm.tasks import task_id_for

from .backends import BACKENDS, open_backend
from .conftest import T0, StoreTarget


def _model() -> Callable[[list[dict[str, Any]]], str]:
    n = itertools.count()

    def model(messages: list[dict[str, Any]]) -> str:
        i = next(n)
        return (f"Step {i}: checked the deploy config of service-{i}; port {5000 + i} is open and the "
                f"healthcheck answers in {i}ms. ") * 6

    return model


def _two_tasks(conv: lossless.Conversation, turns: int = 12) -> None:
    """Task A (ended by the turn loop), then task B, still in hand."""
    model = _model()
    for i in range(turns):
        conv.turn(f"Task A part {i}: review the deploy of service-{i} please, and note anything odd.",
                  call=model, end_task=i == turns - 1)
    for i in range(turns):
        conv.turn(f"Task B part {i}: migrate database shard {i} to the new cluster and verify the row counts.",
                  call=model)


def _text(ctx: lossless.AssembledContext) -> str:
    return "\n".join(str(m.get("content") or "") for m in ctx.messages)


def test_turn_loop_messages_carry_their_task(store_target: StoreTarget) -> None:
    mem = lossless.open(store_target("carry"), embedder=None, context_window=4096, auto_compact=False)
    try:
        conv = mem.conversation("c", metadata={"user": "ann"})
        _two_tasks(conv, turns=3)
        ended = mem.memories.task_start("c") - 1
        assert ended == 6  # three turns of (user, reply)
        messages = conv.messages()
        first, second = task_id_for("c", 1), task_id_for("c", ended + 1)
        assert [m.metadata.get("task_id") for m in messages] == [first] * ended + [second] * (len(messages) - ended)
        # the id is the id of the task record end_task wrote
        records = [r for r in mem.memories.ls(kind="task", limit=100) if r.task_id is not None]
        assert [r.task_id for r in records] == [first]
        assert records[0].status == "completed"
    finally:
        mem.close()


def test_end_task_ends_the_task_of_a_conversation_without_user_or_agent(store_target: StoreTarget) -> None:
    mem = lossless.open(store_target("unscoped"), embedder=None, auto_compact=False)
    try:
        conv = mem.conversation("c")  # no user/agent: no records, but tasks still end
        conv.turn("first task", call=lambda messages: "done", end_task=True)
        conv.turn("second task", call=lambda messages: "on it")
        assert mem.memories.task_start("c") == 3
        assert [m.metadata["task_id"] for m in conv.messages()] == [task_id_for("c", 1)] * 2 + [task_id_for("c", 3)] * 2
        assert mem.memories.ls(kind="task", limit=10) == []  # a record here would be global
    finally:
        mem.close()


def test_a_turn_naming_another_task_is_refused_before_the_model_is_called(store_target: StoreTarget) -> None:
    mem = lossless.open(store_target("refuse"), embedder=None, auto_compact=False)
    calls: list[object] = []
    try:
        conv = mem.conversation("c")
        with pytest.raises(lossless.ValidationError, match="task_id 'task_other'"):
            conv.turn({"role": "user", "content": "hi", "metadata": {"task_id": "task_other"}},
                      call=lambda messages: calls.append(messages) or "hello")
        assert calls == [] and conv.messages() == []
        # naming the current task is fine, and other metadata is kept
        own = task_id_for("c", 1)
        conv.turn({"role": "user", "content": "hi", "metadata": {"task_id": own, "source": "web"}},
                  call=lambda messages: "hello")
        assert conv.messages()[0].metadata == {"task_id": own, "source": "web"}
    finally:
        mem.close()


def test_hierarchical_keeps_the_active_task_whole_and_completed_ones_as_key_points(store_target: StoreTarget) -> None:
    mem = lossless.open(store_target("levels"), embedder=None, strategy="hierarchical", context_window=4096,
                        auto_compact=False, root_max_tokens=0)
    try:
        conv = mem.conversation("c", metadata={"user": "ann"})
        _two_tasks(conv)
        conv.compact()
        ended = mem.memories.task_start("c") - 1
        frontier = conv.frontier()
        done = [n for n in frontier if n.last_seq <= ended]
        active = [n for n in frontier if n.last_seq > ended]
        assert len(done) >= 2 and len(active) >= 2  # the root and a recent summary of task A; task B's
        for budget in (2500, 4000):
            ctx = conv.assemble(budget_tokens=budget)
            assert ctx.tokens <= budget and count_chat_tokens(mem.counter, ctx.messages) == ctx.tokens
            text = _text(ctx)
            shown = {i.ref: i for i in ctx.items if i.tier in ("summary", "root")}
            assert set(shown) == {n.id for n in frontier}  # room for all, each in its form
            for node in active:  # the active task's summaries: whole
                assert render_summary(node) in text
            root, *recent_done = done
            for node in recent_done:  # the completed task's: key points, a quarter of it at most
                assert render_summary(node) not in text and f'<summary id="{node.id}"' in text
                assert 'abridged="true"' in text.split(f'<summary id="{node.id}"')[1].split("</summary>")[0]
                assert shown[node.id].tokens < mem.counter.count(render_summary(node))
            # the root, of the completed task: statistics and key points cut the same way
            assert f"history #{root.first_seq}-#{root.last_seq}" in text
            points = text.split(f"history #{root.first_seq}-#{root.last_seq}")[1].split("Key points: ")[1]
            assert mem.counter.count(points.split("\n\n")[0]) <= max(48, int(root.token_count * KEY_POINTS_SHARE)) + 2
        # the cache-stable prefix (the turn loop's layout) shows the completed task as key points too
        ctx = mem.assembler.assemble("c", 4096, layout="stable")
        text = _text(ctx)
        assert ctx.tokens <= 4096 and MEMORY_HEADER in text
        for node in active:
            assert render_summary(node) in text
        for node in done:
            assert render_summary(node) not in text and f'<summary id="{node.id}"' in text
        # every summary shown is still expandable to the exact originals
        for node in frontier:
            assert conv.expand(node.id, max_tokens=10**9)["items"]
    finally:
        mem.close()


def test_history_of_no_task_keeps_the_age_layering(store_target: StoreTarget) -> None:
    """Plain messages (no task ever ended, none from the turn loop) are layered by age,
    as before; the turn loop's task after them is active and stays whole."""
    mem = lossless.open(store_target("plain"), embedder=None, strategy="hierarchical", context_window=4096,
                        auto_compact=False, root_max_tokens=0)
    try:
        conv = mem.conversation("c")
        model = _model()
        conv.add_many([{"role": "user" if i % 2 == 0 else "assistant", "created_at": T0 + timedelta(minutes=i),
                        "content": f"Plain note {i}: the cache on node-{i} was warmed at {i}:00 and hit {90 - i}%. " * 4}
                       for i in range(24)])
        for i in range(12):
            conv.turn(f"Task part {i}: rotate the keys of vault-{i} and confirm the audit log.", call=model)
        conv.compact()
        frontier = conv.frontier()
        plain = [n for n in frontier if n.last_seq <= 24]
        tasked = [n for n in frontier if n.first_seq > 24]
        assert len(plain) >= 2 and tasked
        ctx = conv.assemble(budget_tokens=4000)
        text = _text(ctx)
        assert ctx.tokens <= 4000
        for node in tasked:
            assert render_summary(node) in text
        root = frontier[0]
        assert f"history #{root.first_seq}-#{root.last_seq}" in text  # the oldest as statistics, as before
    finally:
        mem.close()


# -- the budget, whatever the tasks ------------------------------------------------------

WORDS = ["deploy", "port", "5433", "decided", "because", "error:", "数据库", "迁移", "ok", "latency", "42ms", "we"]
text_st = st.lists(st.sampled_from(WORDS), min_size=10, max_size=150).map(" ".join)
event_st = st.one_of(
    st.tuples(st.just("turn"), text_st),
    st.tuples(st.just("end"), text_st),  # a turn that ends its task
    st.tuples(st.just("add"), text_st),  # a plain message, of no task unless one ends after it
    st.tuples(st.just("compact"), st.just("")),
)


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=st.lists(event_st, min_size=4, max_size=30), budgets=st.lists(st.integers(150, 3000), min_size=1,
                                                                           max_size=4),
       query=st.sampled_from([None, "which port did we decide on?"]),
       layout=st.sampled_from(["auto", "stable", "budgeted"]))
def test_hierarchical_by_task_never_exceeds_the_budget(backend: str, shared_target: str, events: list[tuple[str, str]],
                                                       budgets: list[int], query: str | None, layout: Any) -> None:
    with open_backend(backend, shared_target, embedder=None, strategy="hierarchical", context_window=1024,
                      fresh_tail_count=2, auto_compact=False) as mem:
        conv = mem.conversation(f"h-{uuid.uuid4().hex[:12]}", metadata={"user": "u"})
        for i, (kind, text) in enumerate(events):
            if kind == "compact":
                conv.compact(force=True)
            elif kind == "add":
                conv.add("user", text, created_at=T0 + timedelta(minutes=i))
            else:
                conv.turn(text, call=lambda messages, text=text: f"{text}. {text}. {text}", end_task=kind == "end",
                          memory_tools=False)
        for budget in budgets:
            ctx = mem.assembler.assemble(conv.id, budget, query, layout=layout)
            assert ctx.tokens <= budget
            assert count_chat_tokens(mem.counter, ctx.messages) == ctx.tokens


def test_hierarchical_with_the_whole_conversation_root(store_target: StoreTarget) -> None:
    """With the root compaction writes (the default), the hierarchical strategy places it
    first and whole while a task in it is active, and still shows the finished task's
    summaries as key points and the active task's whole, within the budget."""
    mem = lossless.open(store_target("rooted"), embedder=None, strategy="hierarchical", context_window=4096,
                        auto_compact=False)
    try:
        conv = mem.conversation("c", metadata={"user": "ann"})
        _two_tasks(conv)
        conv.compact()
        root = conv.root()
        assert root is not None and root.first_seq == 1
        ended = mem.memories.task_start("c") - 1
        frontier = conv.frontier()
        done = [n for n in frontier if n.last_seq <= ended]
        active = [n for n in frontier if n.last_seq > ended]
        assert done and active
        ctx = conv.assemble(budget_tokens=4000)
        assert ctx.tokens <= 4000 and count_chat_tokens(mem.counter, ctx.messages) == ctx.tokens
        text = _text(ctx)
        roots = [i for i in ctx.items if i.tier == "root"]
        assert [i.ref for i in roots] == [root.id]
        assert text.index(f'<summary id="{root.id}"') < min(text.index(f'<summary id="{n.id}"') for n in active)
        for node in active:
            assert render_summary(node) in text
        for node in done:
            if f'<summary id="{node.id}"' in text:
                assert render_summary(node) not in text
    finally:
        mem.close()
