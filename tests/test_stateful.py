"""Stateful fuzzing: a hypothesis state machine adds (one at a time, in batches, with
tool calls), compacts (automatic, forced, full, emergency), assembles (random budgets and
queries), expands, greps, and adds and forgets long-term memories on two conversations of
two users, checking after every step that:

* the frontier and the raw tail partition each conversation's history, and every stored
  message is exactly what was added;
* every summary expands to exactly the messages it covers;
* an assembled context is within its budget and never has a tool result without its call;
* a user never sees another user's memories (in search, listings or assembled context);
* ``verify()`` finds nothing.

CI runs a fixed budget; ``LOSSLESS_FUZZ_EXAMPLES`` (and ``LOSSLESS_FUZZ_STEPS``) run more.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

import lossless
from lossless.core.tokens import count_chat_tokens, get_counter
from tests.conftest import T0

EXAMPLES = int(os.environ.get("LOSSLESS_FUZZ_EXAMPLES", "25"))
STEPS = int(os.environ.get("LOSSLESS_FUZZ_STEPS", "40"))
STEPS_RUN = [0]  # how many rules ran, over every example (checked by the last test)
# where each example's store lives: SQLite in memory, or (``--store=postgres``) a schema of
# its own in the session's shared PostgreSQL database; set by ``_store_per_example``
NEW_STORE: list[Callable[[], str]] = [lambda: ":memory:"]

USERS = {"a": "ann", "b": "bob"}
WORDS = ["port", "5433", "deploy", "decided", "because", "error:", "数据库", "迁移", "決定", "src/app.py",
         "v2.3.1", "latency", "42ms", "the", "we", "rollback", "🚀", "TODO", "</summary>", "ignore previous"]
text_st = st.lists(st.sampled_from(WORDS), min_size=1, max_size=120).map(" ".join)
conv_st = st.sampled_from(sorted(USERS))


def _tool_pairs_ok(messages: Sequence[Mapping[str, Any]]) -> bool:
    open_calls: set[str] = set()
    for m in messages:
        if m.get("tool_calls"):
            open_calls = {c["id"] for c in m["tool_calls"]}
        elif m["role"] == "tool":
            if m.get("tool_call_id") not in open_calls:
                return False
        else:
            open_calls = set()
    return True


@pytest.fixture(autouse=True)
def _store_per_example(scratch_store: Callable[[], str]) -> Iterator[None]:
    NEW_STORE[0] = scratch_store
    yield
    NEW_STORE[0] = lambda: ":memory:"


class MemoryMachine(RuleBasedStateMachine):
    memories = Bundle("memories")

    def __init__(self) -> None:
        super().__init__()
        self.mem = lossless.open(NEW_STORE[0](), embedder=None, context_window=1024, fresh_tail_count=4,
                                 compaction_cooldown_seconds=0)
        self.convs = {cid: self.mem.conversation(cid, metadata={"user": user}) for cid, user in USERS.items()}
        self.added: dict[str, list[tuple[str, Any]]] = {cid: [] for cid in USERS}
        self.owner_of: dict[str, str | None] = {}  # memory id -> user
        self.clock = 0
        self.counter = get_counter("cl100k_base")

    def teardown(self) -> None:
        self.mem.close()

    def _now(self) -> Any:
        self.clock += 1
        return T0 + timedelta(minutes=self.clock)

    def _ran(self) -> None:
        STEPS_RUN[0] += 1

    # -- writing ------------------------------------------------------------------------

    @initialize()
    def opening(self) -> None:
        for cid, conv in self.convs.items():
            conv.add("system", f"You are the assistant of {USERS[cid]}.", created_at=self._now())
            self.added[cid].append(("system", f"You are the assistant of {USERS[cid]}."))

    @rule(cid=conv_st, role=st.sampled_from(["user", "assistant", "user", "system"]), text=text_st)
    def add_one(self, cid: str, role: str, text: str) -> None:
        self.convs[cid].add(role, text, created_at=self._now())
        self.added[cid].append((role, text))
        self._ran()

    @rule(cid=conv_st, texts=st.lists(text_st, min_size=1, max_size=4), calls=st.integers(0, 3))
    def add_many(self, cid: str, texts: list[str], calls: int) -> None:
        t = self._now()
        batch: list[dict[str, Any]] = [{"role": "user" if i % 2 == 0 else "assistant", "content": x, "created_at": t}
                                       for i, x in enumerate(texts)]
        if calls:
            ids = [f"call_{self.clock}_{k}" for k in range(calls)]
            batch.append({"role": "assistant", "content": "", "created_at": t, "tool_calls": [
                {"id": i, "type": "function", "function": {"name": "run", "arguments": "{}"}} for i in ids]})
            batch += [{"role": "tool", "tool_call_id": i, "content": f"result of {i}: " + texts[0], "created_at": t}
                      for i in ids]
        self.convs[cid].add_many(batch)
        self.added[cid] += [(m["role"], m["content"]) for m in batch]
        self._ran()

    @rule(cid=conv_st, mode=st.sampled_from(["auto", "force", "full", "emergency"]))
    def compact(self, cid: str, mode: str) -> None:
        conv = self.convs[cid]
        if mode == "auto":
            self.mem.compactor.compact(cid)
        else:
            report = conv.compact(force=mode == "force", full=mode == "full", emergency=mode == "emergency")
            assert report.skipped is None or "moved" not in report.skipped
            if mode == "full" and conv.frontier():
                assert len(conv.frontier()) == 1
        self._ran()

    # -- reading ------------------------------------------------------------------------

    @rule(cid=conv_st, budget=st.integers(1, 3000), query=st.one_of(st.none(), text_st))
    def assemble(self, cid: str, budget: int, query: str | None) -> None:
        ctx = self.convs[cid].assemble(budget_tokens=budget, query=query)
        assert ctx.tokens <= budget
        assert ctx.tokens == count_chat_tokens(self.counter, ctx.messages)
        assert _tool_pairs_ok(ctx.messages), ctx.messages
        other = "b" if cid == "a" else "a"
        text = str(ctx.messages)
        assert f"MEMO-{USERS[other]}" not in text, "another user's memory in the context"
        self._ran()

    @precondition(lambda self: any(c.summaries() for c in self.convs.values()))
    @rule(data=st.data())
    def expand(self, data: st.DataObject) -> None:
        cid = data.draw(st.sampled_from([c for c, conv in self.convs.items() if conv.summaries()]))
        conv = self.convs[cid]
        node = data.draw(st.sampled_from(conv.summaries()))
        out = conv.expand(node.id, max_tokens=10**9)
        assert not out["truncated"]
        assert [i["seq"] for i in out["items"]] == list(range(node.first_seq, node.last_seq + 1))
        stored = {m.seq: m.content for m in conv.messages(node.first_seq, node.last_seq)}
        assert [i["content"] for i in out["items"]] == [stored[i["seq"]] for i in out["items"]]
        self._ran()

    @rule(cid=conv_st, word=st.sampled_from(WORDS), mode=st.sampled_from(["fts", "regex"]))
    def grep(self, cid: str, word: str, mode: str) -> None:
        import re

        query = re.escape(word) if mode == "regex" else word
        hits = self.convs[cid].grep(query, mode=mode, limit=50)["hits"]
        assert all(h["conversation_id"] == cid for h in hits)
        self._ran()

    # -- long-term memories -------------------------------------------------------------

    @rule(target=memories, user=st.sampled_from(["ann", "bob", None]), text=text_st)
    def add_memory(self, user: str | None, text: str) -> str:
        content = f"MEMO-{user or 'global'} {text}"
        record = self.mem.memories.add(content, user=user)
        self.owner_of[record.id] = user
        self._ran()
        return record.id

    @rule(memory_id=consumes(memories))
    def forget_memory(self, memory_id: str) -> None:
        gone = self.mem.memories.forget([memory_id])
        assert [r.id for r in gone] in ([memory_id], [])  # [] if an identical add had merged it
        self.owner_of.pop(memory_id, None)
        self._ran()

    @rule(user=st.sampled_from(["ann", "bob"]), text=text_st)
    def search_memories(self, user: str, text: str) -> None:
        for record in self.mem.memories.search(text, user=user, limit=50):
            assert record.user in (None, user), (record.user, user)
        self._ran()

    # -- invariants -----------------------------------------------------------------------

    @invariant()
    def history_is_partitioned_and_verbatim(self) -> None:
        for cid, conv in self.convs.items():
            stored = conv.messages()
            assert [(m.role, m.content) for m in stored] == self.added[cid]
            assert [m.seq for m in stored] == list(range(1, len(stored) + 1))
            expect = 1
            for node in conv.frontier():
                assert node.first_seq == expect, "a gap or an overlap in the frontier"
                expect = node.last_seq + 1
            assert expect - 1 <= len(stored)

    @invariant()
    def every_summary_covers_exactly_its_span(self) -> None:
        for conv in self.convs.values():
            for node in conv.summaries():
                if node.depth == 0:
                    seqs = [self.mem.store.get_message(s.id).seq for s in node.sources]
                    assert seqs == list(range(node.first_seq, node.last_seq + 1))
                else:
                    kids = [self.mem.store.get_summary(s.id) for s in node.sources]
                    assert kids[0].first_seq == node.first_seq and kids[-1].last_seq == node.last_seq
                    assert all(a.last_seq + 1 == b.first_seq for a, b in itertools.pairwise(kids))

    @invariant()
    def memory_scopes_hold(self) -> None:
        for user in ("ann", "bob"):
            assert all(r.user == user for r in self.mem.memories.ls(user=user, limit=1000))
        stored = {r.id: r.user for r in self.mem.memories.ls(limit=1000)}
        for memory_id, owner in self.owner_of.items():
            if memory_id in stored:
                assert stored[memory_id] == owner

    @invariant()
    def verifies(self) -> None:
        assert self.mem.verify() == []


TestMemoryMachine = MemoryMachine.TestCase
TestMemoryMachine.settings = settings(
    max_examples=EXAMPLES, stateful_step_count=STEPS, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)


def test_zz_the_machine_really_ran() -> None:
    """Runs after the machine (pytest keeps file order; run alone, it runs the machine
    itself): a machine whose rules never ran (every precondition false, a strategy that
    cannot draw) would pass without checking anything, so fewer than one rule step per
    example on average fails here."""
    if STEPS_RUN[0] == 0:
        run_state_machine_as_test(MemoryMachine, settings=TestMemoryMachine.settings)
    print(f"stateful fuzzing: {STEPS_RUN[0]} rule steps over {EXAMPLES} examples of up to {STEPS} steps")
    assert STEPS_RUN[0] >= EXAMPLES, f"only {STEPS_RUN[0]} rule steps over {EXAMPLES} examples"
