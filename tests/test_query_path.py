"""The query path reads in batches (issue 28): recall's neighbours in one read per pass,
not one per match; ``messages_at`` returns exactly the messages at the seqs asked."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lossless

from .backends import StoreTarget

# fixed times: the layout does not hang on whether adding the 300 crossed a minute (a
# summary's time span is one time or two, and a token more crowded the fresh tail out)
T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


@pytest.fixture
def chat_mem(store_target: StoreTarget) -> Any:
    with lossless.open(store_target("path"), embedder=None, compaction="inline", context_window=4096) as mem:
        conv = mem.conversation("c")
        conv.add_many([{"role": "user" if i % 2 == 0 else "assistant",
                        "content": f"message {i}: the backup of node {i % 9} ran at {i % 24}:00 and took {i} s",
                        "created_at": T0 + timedelta(seconds=i)}
                       for i in range(300)])
        yield mem


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seqs=st.lists(st.integers(min_value=-3, max_value=320), max_size=60))
def test_messages_at_returns_exactly_the_messages_at_those_seqs(chat_mem: Any, seqs: list[int]) -> None:
    every = {m.seq: m for m in chat_mem.store.get_messages("c")}
    assert chat_mem.store.messages_at("c", seqs) == {s: every[s] for s in seqs if s in every}
    assert chat_mem.store.messages_at("nobody", seqs) == {}


def test_recall_reads_its_neighbours_in_one_read_per_pass(chat_mem: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    store = chat_mem.store
    calls: dict[str, list[int]] = {"get_messages": [], "messages_at": []}
    real_get, real_at = store.get_messages, store.messages_at

    def get(*args: Any, **kwargs: Any) -> Any:
        rows = real_get(*args, **kwargs)
        calls["get_messages"].append(len(rows))
        return rows

    def at(cid: str, seqs: Any) -> Any:
        found = real_at(cid, seqs)
        calls["messages_at"].append(len(found))
        return found

    monkeypatch.setattr(store, "get_messages", get)
    monkeypatch.setattr(store, "messages_at", at)
    # (a budget where the matches leave room for neighbours on both stores: where they fill
    # it, as at 1200, no neighbour is read at all)
    ctx = chat_mem.conversation("c").assemble(1000, query="when did the backup of node 4 run?")
    recalled = [i for i in ctx.items if i.tier == "recall"]
    assert len(recalled) >= 6  # matches and their neighbours
    assert 1 <= len(calls["messages_at"]) <= 2  # the strong matches' pass, the weak ones'
    assert sum(calls["messages_at"]) >= 2
    assert [n for n in calls["get_messages"] if n == 3] == []  # no read of a match with its two neighbours
