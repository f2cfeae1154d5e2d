"""Short conversations' units are embedded together (issue 29 item 2, "batch by length
across conversations").

The worker served one conversation a turn, and embedded its units in that turn: after an
import of many short chats the model ran 27 units at a time, in small batches of mixed
length. Now a conversation that owes fewer than ``EMBED_BATCH`` units takes other due
conversations along (claimed, so no other worker takes them meanwhile) for one embedder
call, ``Recaller.embed_across``; each conversation then has its own turn as before.

Every test runs on SQLite and, with ``--store=postgres``, on PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lossless
from lossless.compaction import worker as worker_module
from lossless.embed.base import Vectors
from lossless.testing import HashEmbedder

from .backends import StoreTarget


class _Calls(HashEmbedder):
    """Records each call's texts; a text holding ``poison`` makes the whole call fail."""

    poison = "\u2620"

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.calls.append(list(texts))
        if any(self.poison in t for t in texts):
            raise RuntimeError("the model cannot read this text")
        return super().embed(texts)


def _chat(tag: str, n: int) -> list[dict[str, Any]]:
    return [{"role": "user" if i % 2 == 0 else "assistant",
             "content": f"{tag} turn {i}: the {tag} heron stood in the reeds for a while ({i})."} for i in range(n)]


def _unit_calls(emb: _Calls) -> list[list[str]]:
    """The calls that embedded stored units (not a question)."""
    return [c for c in emb.calls if all(": " in t and " turn " in t for t in c)]


def test_short_conversations_share_one_embedder_call(store_target: StoreTarget) -> None:
    emb = _Calls()
    with lossless.open(store_target("s"), embedder=emb, compaction="deferred") as mem:
        tags = [f"c{k}" for k in range(12)]
        for tag in tags:
            mem.conversation(tag).add_many(_chat(tag, 6))
        assert mem.wait_idle(timeout=120)
        calls = _unit_calls(emb)
        # 72 units of 12 conversations: one call (the first conversation takes the others along)
        assert len(calls) == 1 and len(calls[0]) == 72
        assert mem.recaller.count_unembedded() == {"conversations": 0, "messages": 0, "units": 0}
        assert mem.scheduler.worker_stats()["units_embedded"] == 72
        assert mem.scheduler.worker_stats()["messages_indexed"] == 72  # cut before the group's call: counted too
        for tag in tags:  # each conversation's vectors are its own: a semantic search finds its turn
            hits = mem.conversation(tag).search(f"{tag} turn 3: the {tag} heron stood in the reeds", mode="semantic",
                                                limit=1)
            assert hits and hits[0].first_seq == 4, tag
            assert mem.conversation(tag).backlog().units_not_embedded == 0


def test_a_failing_text_fails_only_its_own_conversation(store_target: StoreTarget) -> None:
    """The call for the group fails (one conversation's text cannot be read): each
    conversation's own turn then embeds it alone, and only the one that owns the text
    is recorded as failing."""
    emb = _Calls()
    with lossless.open(store_target("f"), embedder=emb, compaction="deferred") as mem:
        mem.conversation("clean").add_many(_chat("clean", 4))
        mem.conversation("bad").add_many([*_chat("bad", 3), {"role": "user", "content": f"bad turn 9: {_Calls.poison}"}])
        mem.conversation("also").add_many(_chat("also", 4))
        assert not mem.wait_idle(timeout=60)  # "bad" waits for its retry
        assert mem.conversation("clean").backlog().units_not_embedded == 0
        assert mem.conversation("also").backlog().units_not_embedded == 0
        bad = mem.conversation("bad").backlog()
        assert bad.units_not_embedded == 4 and bad.failed_attempts >= 1
        assert "cannot read this text" in (bad.last_error or "")
        assert mem.conversation("clean").backlog().failed_attempts == 0


def test_a_long_conversation_is_not_held_back(store_target: StoreTarget, monkeypatch: pytest.MonkeyPatch) -> None:
    """A conversation that owes a whole batch embeds alone, in batches of its own."""
    monkeypatch.setattr(worker_module, "EMBED_BATCH", 10)
    emb = _Calls()
    with lossless.open(store_target("l"), embedder=emb, compaction="deferred") as mem:
        mem.conversation("long").add_many(_chat("long", 25))
        mem.conversation("short").add_many(_chat("short", 3))
        assert mem.wait_idle(timeout=60)
        calls = _unit_calls(emb)
        assert all(len(c) <= 10 for c in calls)
        assert not any(any(t.startswith("user: long") for t in c) and any("short" in t for t in c) for c in calls)
        assert sum(len(c) for c in calls) == 28


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sizes=st.lists(st.integers(min_value=0, max_value=12), min_size=1, max_size=5),
       limit=st.integers(min_value=1, max_value=40))
def test_embed_across_takes_the_first_units_in_order(scratch_store: Any, sizes: list[int], limit: int) -> None:
    """``embed_across`` passes at most ``limit`` units, each conversation's first ones, the
    conversations in the order given; what it passed has exactly the vector its text
    alone gets; and the rest is still owed, no more and no less."""
    emb = _Calls()
    with lossless.open(scratch_store(), embedder=emb, compaction="deferred") as mem:
        cids = [f"p{k}" for k in range(len(sizes))]
        for cid, n in zip(cids, sizes, strict=True):
            if n:
                mem.conversation(cid).add_many(_chat(cid, n))
            mem.recaller.cut_units(cid)
        passed = mem.recaller.embed_across(cids, limit=limit)
        left = limit
        for cid, n in zip(cids, sizes, strict=True):
            took = min(n, left)
            left -= took
            assert (passed[cid].units if cid in passed else 0) == took
            assert mem.recaller.unembedded(cid) == n - took
        assert sum(p.units for p in passed.values()) == min(limit, sum(sizes))
        assert len(_unit_calls(emb)) == (1 if sum(sizes) else 0)
        for cid, n in zip(cids, sizes, strict=True):
            if n:
                mem.recaller.embed_units(cid)
                assert mem.recaller.unembedded(cid) == 0
        for cid, n in zip(cids, sizes, strict=True):  # the vectors are the texts' own
            if n:
                hits = mem.conversation(cid).search(f"{cid} turn {n - 1}: the {cid} heron stood in the reeds",
                                                    mode="semantic", limit=1)
                assert hits and hits[0].first_seq == n


@pytest.mark.model
def test_lossless_embed_all_embeds_short_conversations_together(store_target: StoreTarget,
                                                               monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """``lossless embed --all`` after storing without an embedder: ten short conversations
    and a long one; the short ones' units go to the model in one call, each conversation's
    count is its own, and nothing is left owed."""
    import json

    from lossless.cli import main as cli_main
    from lossless.embed.local import LocalEmbedder

    db = store_target("cli")
    with lossless.open(db, embedder=None) as mem:
        for k in range(10):
            mem.conversation(f"s{k}").add_many(_chat(f"s{k}", 4))
        mem.conversation("long").add_many(_chat("long", 300))
    calls: list[int] = []
    real = LocalEmbedder.embed

    def counted(self: LocalEmbedder, texts: Sequence[str]) -> Vectors:
        calls.append(len(texts))
        return real(self, texts)

    monkeypatch.setattr(LocalEmbedder, "embed", counted)
    monkeypatch.setenv("LOSSLESS_EMBEDDER", "local")
    assert cli_main(["--db", str(db), "--json", "embed", "--all"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["embedded"] == {**{f"s{k}": 4 for k in range(10)}, "long": 300}
    assert 40 in calls  # the ten short conversations' units, together
    assert sum(n for n in calls if n > 1) == 340
    with lossless.open(db, embedder=LocalEmbedder()) as mem:
        assert mem.recaller.count_unembedded() == {"conversations": 0, "messages": 0, "units": 0}


def test_a_search_catches_up_short_conversations_together(store_target: StoreTarget) -> None:
    """A semantic search over conversations stored without an embedder first embeds what
    they owe (bounded): ten short conversations' units go to the model in one call, and
    each finds its own turn by its vector."""
    target = store_target("search")
    with lossless.open(target, embedder=None) as mem:
        for k in range(10):
            mem.conversation(f"s{k}").add_many(_chat(f"s{k}", 4))
    emb = _Calls()
    with lossless.open(target, embedder=emb, compaction="deferred") as mem:
        hits = mem.search("s7 turn 2 the s7 heron stood in the reeds", mode="semantic", limit=1)
        assert [(h.conversation_id, h.first_seq, h.matched) for h in hits] == [("s7", 3, "vector")]
        assert [len(c) for c in _unit_calls(emb)] == [40]
        assert mem.recaller.count_unembedded() == {"conversations": 0, "messages": 0, "units": 0}
