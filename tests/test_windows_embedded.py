"""Windows are embedded only when a search reads them (issue 29 item 1).

The worker cut every conversation into single messages *and* QA-pair windows and
embedded both, though no default search read the windows (assembly's recall left them
out since ``recall_windows`` became False): for a 419-turn chat they were 58 % of the
characters the model read. Now windows are cut and embedded only with
``recall_windows=True`` (which also has searches read them); nothing counts windows as
owed otherwise; a store switched to windows has the windows of its earlier
conversations cut and embedded by the worker's normal catch-up; window vectors a store
holds are kept.

Every test runs on SQLite and, with ``--store=postgres``, on PostgreSQL.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lossless
from lossless.recall.hybrid import Recaller
from lossless.recall.units import window_units
from lossless.store.base import SearchSpec
from lossless.testing import HashEmbedder

from .backends import StoreTarget, raw_query

HERON = "I went to the park and saw a heron."
NOTHING_OWED = {"conversations": 0, "messages": 0, "units": 0}


def _chat(n: int) -> list[dict[str, Any]]:
    """``n`` short casual turns, user and assistant by turns."""
    topics = ["the weather", "lunch", "the train", "a film", "the weekend", "coffee", "work", "a book"]
    return [{"role": "user" if i % 2 == 0 else "assistant",
             "content": f"Turn {i}: not much, just thinking about {topics[i % len(topics)]} again."}
            for i in range(n)]


def _kinds(target: str) -> dict[str, int]:
    return {str(k): int(n) for k, n in raw_query(target, "SELECT kind, count(*) FROM recall_units GROUP BY kind")}


def _embedded_through(target: str) -> int:
    rows = raw_query(target, "SELECT coalesce(max(unit_rowid), 0) FROM vector_progress")
    return int(rows[0][0])


def _max_unit(target: str) -> int:
    return int(raw_query(target, "SELECT coalesce(max(rowid), 0) FROM recall_units")[0][0])


def test_the_default_config_embeds_no_windows_and_owes_none(store_target: StoreTarget) -> None:
    """With the default config a chat's messages are embedded and no window is cut,
    embedded or counted as owed: not by the conversation's backlog, not store-wide
    (``stats``/``doctor``), not by the look for conversations without vectors at open."""
    target = store_target("default")
    emb = HashEmbedder()
    with lossless.open(target, embedder=emb) as mem:
        conv = mem.conversation("c")
        conv.add_many(_chat(40))
        assert mem.wait_idle(timeout=120)
        assert conv.backlog().units_not_embedded == 0 and conv.backlog().messages_not_indexed == 0
        assert mem.recaller.count_unembedded() == NOTHING_OWED
        assert mem.recaller.not_embedded(None) == {}
    assert _kinds(target) == {"message": 40}
    assert not any(text.count("\nassistant: ") >= 2 for text in emb.texts), "a window's digest was embedded"
    assert _embedded_through(target) == _max_unit(target)
    with lossless.open(target, embedder=HashEmbedder(), compaction="deferred") as mem:
        assert mem.recaller.count_unembedded() == NOTHING_OWED
        assert mem.recaller.queue_unembedded() == []
        assert mem.backlog.pending(None) == []


def test_windows_switched_on_are_cut_embedded_and_searched(store_target: StoreTarget) -> None:
    """``recall_windows=True``: windows are cut and embedded with the messages, nothing is
    left owed, and a semantic search may answer with a window."""
    target = store_target("windows")
    with lossless.open(target, embedder=HashEmbedder(), recall_windows=True) as mem:
        conv = mem.conversation("c")
        conv.add_many(_chat(40))
        assert mem.wait_idle(timeout=120)
        assert conv.backlog().units_not_embedded == 0
        assert mem.recaller.count_unembedded() == NOTHING_OWED
        spec = SearchSpec(query="thinking about lunch", conversation_ids=("c",), mode="semantic", limit=50)
        assert "window" in {h.kind for h in mem.recaller.search(spec)}
    kinds = _kinds(target)
    assert kinds["message"] == 40 and kinds["window"] >= 8  # 20 pairs, stride two
    assert _embedded_through(target) == _max_unit(target)


def test_a_store_switched_to_windows_has_them_embedded_by_the_catch_up(store_target: StoreTarget) -> None:
    """A store written without windows, opened with them: its earlier conversation is
    owed its windows (counted, queued by the look for what the embedder is owed, cut and
    embedded by the catch-up, with the background worker too); opened without them
    again, the window vectors are kept, owed nothing and not searched."""
    target = store_target("switched")
    with lossless.open(target, embedder=HashEmbedder()) as mem:
        mem.conversation("c").add_many(_chat(40))
        mem.conversation("short").add_many(_chat(5))  # two closed pairs: no window to cut
        assert mem.wait_idle(timeout=120)
    messages = raw_query(target, "SELECT rowid, text FROM recall_units ORDER BY rowid")
    with lossless.open(target, embedder=HashEmbedder(), compaction="deferred", recall_windows=True) as mem:
        owed = mem.recaller.count_unembedded()
        assert owed is not None and owed["conversations"] == 1 and owed["units"] == 0
        assert mem.recaller.unembedded_unchecked()
        assert mem.recaller.queue_unembedded() == ["c"]
        assert mem.wait_idle(timeout=120)
        assert mem.recaller.count_unembedded() == NOTHING_OWED
        assert not mem.recaller.unembedded_unchecked()
    windows = _kinds(target)["window"]
    assert windows >= 8
    assert raw_query(target, "SELECT rowid, text FROM recall_units WHERE kind = 'message' ORDER BY rowid") == messages
    assert _embedded_through(target) == _max_unit(target)
    with lossless.open(target, embedder=HashEmbedder()) as mem:
        conv = mem.conversation("c")
        conv.add_many(_chat(12))
        assert mem.wait_idle(timeout=120)
        assert mem.recaller.count_unembedded() == NOTHING_OWED
        hits = conv.search("thinking about lunch", mode="semantic", limit=50)
        assert hits and {h.kind for h in hits} == {"message"}
    assert _kinds(target)["window"] == windows  # kept, and none cut for the new turns
    # and once more with windows, through the background worker this time
    with lossless.open(target, embedder=HashEmbedder(), recall_windows=True) as mem:
        assert mem.wait_idle(timeout=120)
        assert mem.recaller.count_unembedded() == NOTHING_OWED
    assert _kinds(target)["window"] > windows
    assert _embedded_through(target) == _max_unit(target)


def test_a_search_that_reads_windows_works_when_there_are_none(store_target: StoreTarget) -> None:
    """Windows wanted, none cut yet (a store written without them, no worker run): a
    semantic and a hybrid search answer from the message vectors, no error, not empty."""
    target = store_target("none")
    with lossless.open(target, embedder=HashEmbedder()) as mem:
        conv = mem.conversation("c")
        conv.add_many(_chat(30))
        heron = conv.add(role="user", content=HERON)
        assert mem.wait_idle(timeout=120)
    with lossless.open(target, embedder=HashEmbedder(), compaction="deferred", recall_windows=True) as mem:
        conv = mem.conversation("c")
        for mode in ("semantic", "hybrid"):
            hits = conv.search("saw a heron", mode=mode, limit=5)
            assert hits and hits[0].id == heron.id and hits[0].kind == "message", mode
    assert "window" not in _kinds(target)


@pytest.mark.model
def test_semantic_search_finds_a_message_by_meaning_without_windows(store_target: StoreTarget) -> None:
    """The default embedder and config: no windows, and a semantic search still finds a
    message by meaning (no shared word) among casual turns."""
    from lossless.embed.local import LocalEmbedder

    target = store_target("meaning")
    with lossless.open(target, embedder=LocalEmbedder()) as mem:
        conv = mem.conversation("c")
        conv.add_many(_chat(30))
        heron = conv.add(role="user", content=HERON)
        conv.add_many(_chat(10))
        assert mem.wait_idle(timeout=300)
        hits = conv.search("bird by the water", mode="semantic", limit=3)
        assert [(h.id, h.matched) for h in hits[:1]] == [(heron.id, "vector")]
        assert mem.recaller.count_unembedded() == NOTHING_OWED
    assert "window" not in _kinds(target)


_ROLES = st.sampled_from(["user", "assistant", "tool"])


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(first=st.lists(_ROLES, max_size=20), then=st.lists(_ROLES, max_size=20))
def test_windows_are_owed_exactly_when_one_can_be_cut(scratch_store: Callable[[], str], first: list[str],
                                                      then: list[str]) -> None:
    """Property: after turns cut with windows and more cut without, the store counts the
    conversation as owed windows (in SQL, for ``stats``, ``doctor`` and the worker's look)
    exactly when cutting would make a window; once cut, it owes nothing. A recaller
    without windows never counts it."""
    with lossless.open(scratch_store(), embedder=HashEmbedder(), compaction="deferred") as mem:
        plain = mem.recaller
        both = Recaller(mem.store, plain.embedder, plain.counter, dataclasses.replace(mem.config, recall_windows=True))
        try:
            conv = mem.conversation("p")
            for recaller, roles in ((both, first), (plain, then)):
                if roles:
                    conv.add_many([{"role": r, "content": f"turn {i}"} if r != "tool" else
                                   {"role": "tool", "content": f"out {i}", "tool_call_id": f"t{i}"}
                                   for i, r in enumerate(roles)])
                recaller.cut_units("p")
                recaller.embed_pending("p")
            assert plain.count_unembedded() == NOTHING_OWED
            _, window_seq = both.index_store.progress("p")
            tail = mem.store.get_messages("p", window_seq + 1, mem.store.last_seq("p")) if first or then else []
            cuttable = bool(window_units(tail, closed=False)[0])
            assert both.count_unembedded() == {**NOTHING_OWED, "conversations": int(cuttable)}
            both.cut_units("p")
            both.embed_pending("p")
            assert both.count_unembedded() == NOTHING_OWED
            assert plain.count_unembedded() == NOTHING_OWED
        finally:
            both.close()
