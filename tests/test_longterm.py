"""Long-term memory in the engine: the flush before compaction, conv.end(), and memories
of the same user/agent shown in assembly — never another user's."""

from __future__ import annotations

import logging
import re
from datetime import datetime, timedelta
from pathlib import Path

import pytest

import lossless
from lossless.core.errors import ValidationError
from lossless.testing import FakeSummarizer
from tests.conftest import StoreTarget, chat

T0 = datetime(2025, 5, 1, 9, 0)


def _text(ctx: lossless.AssembledContext) -> str:
    return "\n".join(str(m.get("content") or "") for m in ctx.messages)


def test_flush_before_compaction_keeps_durable_items(store_target: StoreTarget, tmp_path: Path) -> None:
    mem = lossless.open(store_target("f"), embedder=None, context_window=2048)
    conv = mem.conversation("c1", metadata={"user": "ann"})
    conv.add("user", "I prefer metric units in every report.", created_at=T0)
    conv.add("assistant", "Noted: metric units from now on.", created_at=T0)
    conv.add_many(chat(80, start=T0 + timedelta(minutes=5), words=20))
    assert mem.wait_idle(30)
    assert conv.summaries()  # compaction ran (in the worker) ...
    records = mem.memories.ls(user="ann")
    assert any("metric units" in r.content for r in records)  # ... after the flush kept it
    pref = next(r for r in records if "metric units" in r.content)
    assert pref.conversation_id == "c1" and pref.source_message_ids
    assert mem.store.flushed_seq("c1") >= max(s.last_seq for s in conv.summaries() if s.depth == 0)


def test_no_flush_for_a_conversation_without_an_owner(store_target: StoreTarget, tmp_path: Path) -> None:
    mem = lossless.open(store_target("n"), embedder=None, context_window=2048)
    conv = mem.conversation("anon")
    conv.add("user", "I prefer metric units in every report.", created_at=T0)
    conv.add_many(chat(80, start=T0 + timedelta(minutes=5), words=20))
    assert mem.wait_idle(30)
    assert conv.summaries()
    assert mem.memories.count() == 0  # it would have been global: seen by everyone


def test_end_distils_the_rest_once(store_target: StoreTarget, tmp_path: Path) -> None:
    mem = lossless.open(store_target("e"), embedder=None)
    conv = mem.conversation("c", metadata={"user": "bo", "agent": "coder"})
    conv.add("user", "We decided to ship the v2 API on 2025-06-01; the deadline is firm.", created_at=T0)
    conv.add("assistant", "Understood, v2 ships on 2025-06-01.", created_at=T0)
    conv.add("user", "Remember that my staging server is staging-7.internal.", created_at=T0)
    first = conv.end()
    contents = " | ".join(r.content for r in first)
    assert "2025-06-01" in contents and "staging-7.internal" in contents
    assert all(r.user == "bo" and r.agent == "coder" for r in first)
    assert conv.end() == []  # nothing new since
    conv.add("user", "I prefer tabs over spaces.", created_at=T0)
    closed = conv.end()
    assert [r.content for r in closed if r.task_id is None] == ["I prefer tabs over spaces."]
    # stored once: a stated preference alone is not also a task record (issue 30)
    assert [r for r in closed if r.task_id is not None] == []


def test_end_uses_the_llm_summarizer_when_configured(store_target: StoreTarget, tmp_path: Path) -> None:
    fake = FakeSummarizer()
    fake.enqueue('[{"kind": "preference", "content": "Bo likes dark mode", "importance": 0.7}]')
    mem = lossless.open(store_target("l"), embedder=None, summarizer=fake)
    conv = mem.conversation("c", metadata={"user": "bo"})
    conv.add("user", "dark mode please, always", created_at=T0)
    records = [r for r in conv.end() if r.task_id is None]  # (the task record: test_task_memory.py)
    assert [r.content for r in records] == ["Bo likes dark mode"] and records[0].kind == "preference"
    assert len(fake.calls) == 2  # the memories, then the task record


def test_memories_of_the_same_user_appear_in_a_new_conversation(store_target: StoreTarget, tmp_path: Path) -> None:
    mem = lossless.open(store_target("a"), embedder=None)
    mem.memories.add("Ann's production database is Postgres 16 on db-3.", kind="fact", user="ann")
    mem.memories.add("Bob's production database is MySQL 8 on legacy-1.", kind="fact", user="bob")
    mem.memories.add("Company policy: no deploys on Fridays.", kind="fact")  # global
    ann = mem.conversation("ann-2", metadata={"user": "ann"})
    ann.add("user", "hi again", created_at=T0)
    ctx = ann.assemble(budget_tokens=1024, query="which production database do we use?")
    text = _text(ctx)
    assert "Postgres 16" in text and "Long-term memories" in text
    assert "MySQL" not in text and "legacy-1" not in text  # never another user's
    assert any(i.tier == "memory" for i in ctx.items) and ctx.tokens <= 1024
    bob = mem.conversation("bob-2", metadata={"user": "bob"})
    bob.add("user", "hello", created_at=T0)
    text = _text(bob.assemble(budget_tokens=1024, query="which production database do we use?"))
    assert "MySQL 8" in text and "Postgres" not in text
    anon = mem.conversation("anon")
    anon.add("user", "hello", created_at=T0)
    text = _text(anon.assemble(budget_tokens=1024, query="deploys on Fridays database?"))
    assert "no deploys on Fridays" in text and "Postgres" not in text and "MySQL" not in text


def test_memories_respect_small_budgets(store_target: StoreTarget, tmp_path: Path) -> None:
    mem = lossless.open(store_target("b"), embedder=None)
    for i in range(20):
        mem.memories.add(f"Fact {i}: the build cache lives in /var/cache/build-{i} " + "detail " * 40, user="ann")
    conv = mem.conversation("c", metadata={"user": "ann"})
    conv.add_many(chat(30, words=20))
    for budget in (128, 300, 800, 2000):
        ctx = conv.assemble(budget_tokens=budget, query="where is the build cache?")
        assert ctx.tokens <= budget
    ctx = conv.assemble(budget_tokens=2000, query="where is the build cache?")
    memory_tokens = ctx.tier_tokens().get("memory", 0)
    # the records take the room the conversation leaves, and never crowd it out
    alone = mem.conversation("c2")
    alone.add_many(chat(30, words=20))
    without = alone.assemble(budget_tokens=2000, query="where is the build cache?")
    assert 0 < memory_tokens <= 2000 - without.tokens
    assert ctx.tier_tokens()["fresh_tail"] == without.tier_tokens()["fresh_tail"]


def test_a_matching_memory_uses_room_the_context_leaves(store_target: StoreTarget, tmp_path: Path) -> None:
    """Issue 19: a 60-token record matching the question is not left out of an 800-token
    budget whose conversation uses 30, whatever share memories get at first; in the
    budgeted layout (window 8192) and the cache-stable one (window = budget)."""
    for window in (8192, 800):
        mem = lossless.open(store_target(f"m{window}"), embedder=None, memory_share=0.01, context_window=window)
        record = "The staging database password rotates every 90 days; ask Priya. " + "Noted in the runbook. " * 8
        mem.memories.add(record, user="ann")
        conv = mem.conversation("c", metadata={"user": "ann"})
        conv.add("user", "hello there")
        conv.add("assistant", "hi, what can I do?")
        ctx = conv.assemble(budget_tokens=800, query="how often does the staging database password rotate?")
        assert "ask Priya" in _text(ctx) and ctx.tokens <= 800, window
        mem.close()


def test_an_owner_that_could_own_no_record_is_refused_when_the_conversation_is_made(store_target: StoreTarget) -> None:
    """metadata {"user": ""} was taken, and then every assembly with a question failed
    (the memory search refused the owner); now the conversation is refused, naming the key."""
    mem = lossless.open(store_target("a"), embedder=None)
    for metadata, named in (({"user": ""}, 'metadata["user"]'), ({"agent": "a\nb"}, 'metadata["agent"]'),
                            ({"user_id": "x" * 600}, 'metadata["user_id"]'), ({"agent_id": ["bot"]}, 'metadata["agent_id"]')):
        with pytest.raises(ValidationError, match=re.escape(named)):
            mem.conversation("对话-1", metadata=metadata)
    assert mem.get_conversation("对话-1") is None  # nothing half-made
    mem.memories.add("小美的数据库是 Postgres 16。", user="小美")
    conv = mem.conversation("对话-2", metadata={"user": "小美"})
    conv.add("user", "你好", created_at=T0)
    assert "Postgres 16" in _text(conv.assemble(budget_tokens=1024, query="我们用的是哪个数据库？"))
    mem.close()


def test_a_stored_owner_that_owns_nothing_does_not_break_assembly(store_target: StoreTarget,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    """A store written before owners were checked can hold {"user": ""}: its assembly with a
    question shows the shared memories (no record can be under that owner) and says why."""
    mem = lossless.open(store_target("a"), embedder=None)
    mem.memories.add("公司规定：周五不上线。", kind="fact")  # global
    mem.memories.add("Ann's production database is Postgres 16.", user="ann")
    mem.store.ensure_conversation("old", {"user": ""})  # as an older version stored it
    conv = mem.conversation("old")
    conv.add("user", "你好", created_at=T0)
    with caplog.at_level(logging.WARNING, logger="lossless"):
        text = _text(conv.assemble(budget_tokens=1024, query="周五可以上线吗？database"))
    assert "周五不上线" in text and "Postgres" not in text
    assert "'old'" in caplog.text and "non-empty string" in caplog.text
    mem.close()
