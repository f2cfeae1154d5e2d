"""Seed 003, "长期记忆粒度：任务级": one task record per task (type, status, result, patterns,
errors), written when the turn loop ends a task, on conv.end() and by the flush before
compaction; a second write of the same task merges into its record."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import lossless
from lossless.longterm import MemoryRecord
from lossless.longterm.tasks import TASK_INSTRUCTION, task_type
from lossless.summarize.base import SummaryRequest, SummaryResult
from lossless.testing import ScriptedSummarizer
from tests.conftest import StoreTarget

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)


def _task_records(mem: lossless.Memory) -> list[MemoryRecord]:
    return [r for r in mem.memories.ls(kind="task", limit=1000) if r.task_id is not None]


def _debug_task(t0: datetime = T0) -> list[dict[str, Any]]:
    call = {"id": "call_1", "type": "function", "function": {"name": "run_tests", "arguments": "{}"}}
    return [
        {"role": "user", "content": "Please fix the failing login test in auth-service.", "created_at": t0},
        {"role": "assistant", "content": "", "tool_calls": [call], "created_at": t0 + timedelta(seconds=5)},
        {"role": "tool", "tool_call_id": "call_1", "created_at": t0 + timedelta(seconds=9),
         "content": json.dumps({"error": "AssertionError: expected 200, got 401 in test_login"})},
        {"role": "assistant", "created_at": t0 + timedelta(seconds=20),
         "content": "The token had expired in the fixture. We decided to mint a fresh token per test."},
        {"role": "assistant", "created_at": t0 + timedelta(seconds=30),
         "content": "Fixed: test_login passes now with a fresh token per test."},
    ]


def test_conv_end_writes_one_task_record_with_its_fields(store_target: StoreTarget) -> None:
    mem = lossless.open(store_target("t1"), embedder=None, compaction="inline")
    try:
        conv = mem.conversation("c1", metadata={"user": "ann"})
        conv.add_many(_debug_task())
        out = conv.end()
        tasks = _task_records(mem)
        assert len(tasks) == 1
        task = tasks[0]
        assert task in out or task.id in {r.id for r in out}
        assert task.kind == "task" and task.user == "ann" and task.conversation_id == "c1"
        assert task.content == "Please fix the failing login test in auth-service."
        assert task.task_type == "debugging"
        assert task.status == "completed"
        assert task.result == "Fixed: test_login passes now with a fresh token per test."
        assert task.errors == ("AssertionError: expected 200, got 401 in test_login",)
        assert any("fresh token per test" in p for p in task.patterns)
        assert task.metadata["first_seq"] == 1 and task.metadata["last_seq"] == 5
        # ending again with nothing new writes nothing more
        assert [r for r in conv.end() if r.kind == "task"] == []
        assert len(_task_records(mem)) == 1
        # the next messages are the next task: a second record
        conv.add_many([{"role": "user", "content": "Now deploy auth-service to staging.", "created_at": T0 + timedelta(hours=1)},
                       {"role": "assistant", "content": "Deployed to staging.", "created_at": T0 + timedelta(hours=1)}])
        conv.end()
        tasks = sorted(_task_records(mem), key=lambda r: r.metadata["first_seq"])
        assert [(t.task_type, t.status, t.metadata["first_seq"]) for t in tasks] == [
            ("debugging", "completed", 1), ("deployment", "completed", 6)]
    finally:
        mem.close()


def test_the_flush_before_compaction_writes_the_task_and_its_end_merges(store_target: StoreTarget) -> None:
    mem = lossless.open(store_target("t2"), embedder=None, compaction="inline", context_window=2048,
                        fresh_tail_count=4, compact_after_messages=12)
    try:
        conv = mem.conversation("c2", metadata={"user": "ann"})
        msgs = _debug_task()
        for i in range(10):
            t = T0 + timedelta(minutes=1 + i)
            msgs.append({"role": "user", "content": f"Also check step {i} of the login flow.", "created_at": t})
            msgs.append({"role": "assistant", "content": f"Step {i} is fine.", "created_at": t})
        conv.add_many(msgs)
        assert conv.summaries(), "compaction ran (and the flush before it)"
        tasks = _task_records(mem)
        assert len(tasks) == 1 and tasks[0].status == "in_progress"
        first_id = tasks[0].id
        assert tasks[0].errors == ("AssertionError: expected 200, got 401 in test_login",)
        conv.add("assistant", "All steps pass; the login flow is done.", created_at=T0 + timedelta(hours=1))
        conv.end()
        tasks = _task_records(mem)
        assert len(tasks) == 1, "the end merged into the flush's record"
        task = tasks[0]
        assert task.id == first_id
        assert task.status == "completed"
        assert task.result == "All steps pass; the login flow is done."
        assert task.task_type == "debugging"  # from the first request, not from a later write's messages
        assert task.content == "Please fix the failing login test in auth-service."
        assert task.errors == ("AssertionError: expected 200, got 401 in test_login",)  # not repeated
        assert task.metadata["writes"] >= 2
        # found by search, with its fields on the wire
        hit = mem.memories.search("login test", user="ann", kind="task")
        assert hit and hit[0].id == first_id
        assert hit[0].to_dict()["task"]["status"] == "completed"
    finally:
        mem.close()


def test_the_turn_loop_end_task_writes_the_record_and_it_shows_in_another_context(store_target: StoreTarget) -> None:
    mem = lossless.open(store_target("t3"), embedder=None, compaction="inline")
    try:
        conv = mem.conversation("c3", metadata={"user": "bo"})
        calls: list[int] = []

        def run_tests() -> str:
            """Run the test suite."""
            calls.append(1)
            raise RuntimeError("ImportError: no module named yaml")

        def model(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> Any:
            if messages[-1].get("role") == "tool":
                return "The suite cannot start: yaml is missing. Install pyyaml."
            return {"role": "assistant", "content": "", "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "run_tests", "arguments": "{}"}}]}

        result = conv.turn("Run the unit tests of the billing module.", call=model, tools={"run_tests": run_tests},
                           end_task=True)
        tasks = [r for r in result.memories if r.kind == "task" and r.task_id]
        assert len(tasks) == 1 and len(_task_records(mem)) == 1
        task = tasks[0]
        assert (task.task_type, task.status) == ("testing", "completed")
        assert task.result == "The suite cannot start: yaml is missing. Install pyyaml."
        assert task.errors == ("RuntimeError: ImportError: no module named yaml",)
        # another conversation of the same user is shown the task with its fields
        other = mem.conversation("c4", metadata={"user": "bo"})
        other.add("user", "earlier")
        ctx = other.assemble(4000, query="billing unit tests")
        text = "\n".join(str(m["content"]) for m in ctx.messages)
        assert f"[{task.id} · task" in text
        assert "testing (completed): Run the unit tests of the billing module." in text
        assert "errors: RuntimeError: ImportError: no module named yaml" in text
    finally:
        mem.close()


def test_an_llm_summarizer_fills_the_record(store_target: StoreTarget) -> None:
    def behave(_n: int, request: SummaryRequest) -> SummaryResult:
        if request.items and request.items[0].text == TASK_INSTRUCTION:
            return SummaryResult(json.dumps({
                "task_type": "Bug Fix", "status": "completed", "result": "Login test fixed with per-test tokens.",
                "patterns": ["Mint auth tokens per test, never share them across tests."],
                "errors": ["Expired fixture token made test_login return 401."]}), model="m")
        return SummaryResult("[]", model="m")  # no sentence-level memories: the rules take over

    mem = lossless.open(store_target("t4"), embedder=None, compaction="inline", summarizer=ScriptedSummarizer(behave))
    try:
        conv = mem.conversation("c5", metadata={"agent": "coder"})
        conv.add_many(_debug_task())
        conv.end()
        (task,) = _task_records(mem)
        assert task.agent == "coder" and task.task_type == "bug_fix"
        assert task.result == "Login test fixed with per-test tokens."
        assert "Mint auth tokens per test, never share them across tests." in task.patterns
        # the tool error the rules found stays, the model's account is added
        assert task.errors[0] == "AssertionError: expected 200, got 401 in test_login"
        assert "Expired fixture token made test_login return 401." in task.errors
        assert task.metadata["extracted"] == "llm"
    finally:
        mem.close()


def test_add_with_the_same_task_id_merges(store_target: StoreTarget) -> None:
    mem = lossless.open(store_target("t5"), embedder=None)
    try:
        a = mem.memories.add("Review PR 12", kind="task", user="ann",
                             task={"task_id": "T-1", "status": "in_progress", "errors": ["lint failed"]})
        b = mem.memories.add("Review PR 12", kind="task", user="ann",
                             task={"task_id": "T-1", "status": "completed", "result": "approved",
                                   "errors": ["Lint failed", "type error in api.py"], "patterns": ["run lint first"]})
        assert a.id == b.id and mem.memories.count(kind="task") == 1
        assert (b.status, b.result, b.errors, b.patterns) == (
            "completed", "approved", ("lint failed", "type error in api.py"), ("run lint first",))
        # the same request in another task is another record
        c = mem.memories.add("Review PR 12", kind="task", user="ann", task={"task_id": "T-2", "status": "pending"})
        assert c.id != a.id and mem.memories.count(kind="task") == 2
    finally:
        mem.close()


def test_task_types_by_rule() -> None:
    assert task_type("Please review PR 42") == "code_review"
    assert task_type("部署新版本到生产环境") == "deployment"
    assert task_type("Why is the sky blue?") == "question"
    assert task_type("Tell me a story") == "request"


def test_a_stated_fact_is_stored_once_not_also_as_the_task(store_target: StoreTarget) -> None:
    """Offline, conv.end() on a session whose user message is one stated fact stored it
    twice, as `fact` and as `task (completed)` (issue 30): the task's request was its first
    user message whatever it was. A statement is the fact's record only; the request is the
    first user message that asks for something, and a session of statements alone has no
    task record (its end still ends the task)."""
    with lossless.open(store_target("once"), embedder=None) as mem:
        conv = mem.conversation("c", metadata={"user": "bob"})
        conv.add_many([{"role": "user", "content": "My name is Bob and I live in Lisbon.", "created_at": T0},
                       {"role": "assistant", "content": "Nice to meet you, Bob.", "created_at": T0}])
        out = conv.end()
        assert [(r.kind, r.content) for r in out] == [("fact", "My name is Bob and I live in Lisbon.")]
        stored = mem.memories.ls(limit=100)
        assert [(r.kind, r.content) for r in stored] == [("fact", "My name is Bob and I live in Lisbon.")]
        # the next task begins after that end, and its request is the one that asks
        later = T0 + timedelta(hours=1)
        conv.add_many([{"role": "user", "content": "I prefer window seats.", "created_at": later},
                       {"role": "user", "content": "Please book a table for two in Lisbon tonight.", "created_at": later},
                       {"role": "assistant", "content": "Booked for 20:00.", "created_at": later}])
        out = conv.end()
        assert sorted((r.kind, r.content) for r in out) == [
            ("preference", "I prefer window seats."), ("task", "Please book a table for two in Lisbon tonight.")]
        [task] = _task_records(mem)
        assert task.metadata["first_seq"] == 3 and task.result == "Booked for 20:00."
        contents = [r.content for r in mem.memories.ls(limit=100)]
        assert len(contents) == len(set(contents)) == 3


def test_a_request_the_rules_find_is_stored_once_as_the_task_record(store_target: StoreTarget) -> None:
    """conv.end() stored "We need to fix the login bug." twice, as the rules' `task` item
    and as the task record's request: the record holds it, so the item is not written."""
    with lossless.open(store_target("req"), embedder=None) as mem:
        for i, (request, reply) in enumerate([
            ("我需要休息一下。", "嗯嗯。"),
            ("We need to fix the login bug.", "OK."),
            ("We need to move the login page to the new domain. Marketing asked for it.", "On it."),
        ]):
            conv = mem.conversation(f"c{i}", metadata={"user": f"u{i}"})
            conv.add_many([{"role": "user", "content": request, "created_at": T0},
                           {"role": "assistant", "content": reply, "created_at": T0}])
            out = conv.end()
            stored = mem.memories.ls(user=f"u{i}", limit=100)
            assert [(r.kind, r.content, r.status) for r in stored] == [("task", request, "completed")], request
            assert [r.id for r in out] == [stored[0].id] and stored[0].task_id is not None


def test_a_request_is_stored_once_when_the_flush_wrote_the_task_first(store_target: StoreTarget) -> None:
    mem = lossless.open(store_target("reqf"), embedder=None, compaction="inline", context_window=2048,
                        fresh_tail_count=4, compact_after_messages=12)
    try:
        conv = mem.conversation("c", metadata={"user": "ann"})
        msgs: list[dict[str, Any]] = [{"role": "user", "content": "We need to fix the login bug.", "created_at": T0}]
        for i in range(10):
            t = T0 + timedelta(minutes=1 + i)
            msgs.append({"role": "assistant", "content": f"Checked step {i} of the login flow.", "created_at": t})
            msgs.append({"role": "user", "content": f"And step {i + 1}, please.", "created_at": t})
        conv.add_many(msgs)
        assert conv.summaries(), "compaction ran (and the flush before it)"
        conv.end()
        contents = [r.content for r in mem.memories.ls(user="ann", limit=100)]
        assert contents.count("We need to fix the login bug.") == 1
        (task,) = _task_records(mem)
        assert task.content == "We need to fix the login bug." and task.status == "completed"
    finally:
        mem.close()


def test_an_acknowledgement_or_a_statement_alone_makes_no_task_record(store_target: StoreTarget) -> None:
    """"我对花生过敏。" answered "好的，我记住了。" stored the reply as a fact (0.85) and a task
    record "task of 2 messages": the reply counted as a request to remember, and that as a
    lesson of the task. The user's own statements (a fact, a decision, "remember …") are
    their own records; with nothing asked, nothing else makes a task."""
    with lossless.open(store_target("ack"), embedder=None) as mem:
        for i, (said, reply) in enumerate([
            ("我对花生过敏。", "好的，我记住了。"),
            ("I am allergic to peanuts.", "Sure, I'll remember that."),
            ("记住：生产环境的端口是8443。", "好的。"),
            ("We decided to use PostgreSQL 16 for the new service.", "OK."),
        ]):
            conv = mem.conversation(f"c{i}", metadata={"user": f"u{i}"})
            conv.add_many([{"role": "user", "content": said, "created_at": T0},
                           {"role": "assistant", "content": reply, "created_at": T0}])
            conv.end()
            stored = mem.memories.ls(user=f"u{i}", limit=100)
            assert [(r.kind, r.content, r.task_id) for r in stored] == [("fact", said, None)], said
            # the task still ended: the next messages are the next task
            assert mem.memories.task_start(f"c{i}") == 3
