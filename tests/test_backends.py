"""The Store contract on both backends: leases, the compaction log, search modes, message
fields, and one script that must leave the same store on SQLite and on PostgreSQL."""

from __future__ import annotations

import itertools
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import lossless

from .conftest import T0, chat


def test_lease_acquire_heartbeat_release_and_stale_takeover(store_backend: lossless.Memory) -> None:
    store = store_backend.store
    conv = store_backend.conversation("leased")
    assert store.acquire_lease("leased", "elsewhere:1:1:a", "test", 60.0)
    assert not store.acquire_lease("leased", "elsewhere:2:1:b", "test", 60.0)  # a live holder keeps it
    held = store.lease("leased")
    assert held is not None and held["owner"] == "elsewhere:1:1:a" and held["reason"] == "test"
    assert conv.state == "COMPACTING"
    first_beat = held["heartbeat_ts"]
    time.sleep(0.01)
    store.heartbeat_lease("leased", "elsewhere:1:1:a")
    assert store.lease("leased")["heartbeat_ts"] > first_beat  # type: ignore[index]
    assert store.acquire_lease("leased", "elsewhere:1:1:a", "again", 60.0)  # the holder may re-take it
    store.release_lease("leased", "elsewhere:2:1:b")  # not the holder: no effect
    assert store.lease("leased") is not None
    store.release_lease("leased", "elsewhere:1:1:a")
    assert store.lease("leased") is None and conv.state == "ACTIVE"
    # a holder that stops heart-beating loses the lease to the next contender
    assert store.acquire_lease("leased", "elsewhere:3:1:c", "test", 0.05)
    time.sleep(0.15)
    assert store.lease("leased") is None  # stale: nobody is compacting
    assert store.acquire_lease("leased", "elsewhere:4:1:d", "takeover", 60.0)
    assert store.lease("leased")["owner"] == "elsewhere:4:1:d"  # type: ignore[index]


def test_compaction_log_and_flush_marks(store_backend: lossless.Memory) -> None:
    conv = store_backend.conversation("logged")
    conv.add_many(chat(60, words=60), compact=False)
    conv.compact(force=True, reason="test: forced")
    log = conv.compaction_log()
    assert log and log[0]["reason"] == "test: forced" and log[0]["leaves"] >= 1
    assert all(a["started_ts"] >= b["started_ts"] for a, b in itertools.pairwise(log))
    assert log[0]["finished_ts"] >= log[0]["started_ts"]
    store = store_backend.store
    store.set_flushed_seq("logged", 10)
    store.set_flushed_seq("logged", 5)  # never moves back
    assert store.flushed_seq("logged") == 10 and store.flushed_seq("nobody") == 0
    usage = store.summarizer_usage("logged")
    assert usage["summaries_by_summarizer"] and sum(usage["summaries_by_fallback"].values()) == len(conv.summaries())
    assert store_backend.verify() == []


def test_search_modes_agree_on_both(store_backend: lossless.Memory) -> None:
    conv = store_backend.conversation("modes")
    conv.add(role="user", content="The handler lives in src/app.py since v2.3.1, on port 5041.")
    conv.add(role="assistant", content="Noted: lunch at the café.")
    conv.add(role="user", content="LUNCH is cancelled")
    assert [h.first_seq for h in conv.search("app.py")] == [1]
    assert [h.first_seq for h in conv.search("src/app.py")] == [1]
    assert [h.first_seq for h in conv.search("v2.3.1")] == [1]
    assert [h.first_seq for h in conv.search("cafe")] == [2]  # diacritics folded
    assert {h.first_seq for h in conv.search("lunch")} == {2, 3}
    assert [h.first_seq for h in conv.search(r"port 50\d[02468]\b", mode="regex")] == []
    assert [h.first_seq for h in conv.search(r"port 50\d[13579]\b", mode="regex")] == [1]
    assert [h.first_seq for h in conv.search("lunch", mode="regex")] == [2]  # case-sensitive, as Python's re
    assert sorted(h.first_seq for h in conv.search("(?i)lunch", mode="regex")) == [2, 3]
    assert [h.first_seq for h in conv.search(r"café\.$", mode="regex")] == [2]
    with pytest.raises(lossless.QueryError):
        conv.search("port (", mode="regex")
    with pytest.raises(lossless.QueryError):
        conv.search("lunch &", mode="raw")
    assert conv.search("...") == []  # nothing to search for


def test_message_fields_round_trip(store_backend: lossless.Memory) -> None:
    conv = store_backend.conversation("fields", metadata={"user": "ann"})
    call = {"id": "c1", "type": "function", "function": {"name": "run", "arguments": "{\"n\": 1}"}}
    naive = datetime(2024, 1, 2, 3, 4, 5)
    added = conv.add_many([
        {"role": "system", "content": "be brief", "created_at": naive},
        {"role": "assistant", "content": "", "tool_calls": [call], "created_at": T0},
        {"role": "tool", "tool_call_id": "c1", "content": "ok", "created_at": T0},
        {"role": "user", "name": "Maya", "content": [{"type": "text", "text": "part"}], "external_id": "e1",
         "metadata": {"k": [1, {"z": None}]}, "created_at": T0 + timedelta(seconds=1)},
    ])
    again = conv.add(role="user", content="different text, same external id", external_id="e1")
    assert again.id == added[3].id and again.seq == 4  # idempotent on external_id
    stored = conv.messages()
    assert stored == added
    assert stored[0].created_at == naive and stored[0].created_at.tzinfo is None
    assert stored[1].tool_calls == (call,) and stored[2].tool_call_id == "c1"
    assert stored[3].content == [{"type": "text", "text": "part"}] and stored[3].metadata == {"k": [1, {"z": None}]}
    info = store_backend.store.get_conversation("fields")
    assert info is not None and info.metadata == {"user": "ann"} and info.message_count == 4
    store_backend.conversation("fields", metadata={"agent": "bot"})  # metadata merges
    assert store_backend.store.get_conversation("fields").metadata == {"user": "ann", "agent": "bot"}  # type: ignore[union-attr]
    assert store_backend.store.role_counts("fields", 1, 4) == {"system": 1, "assistant": 1, "tool": 1, "user": 1}
    with pytest.raises(lossless.NotFoundError):
        store_backend.store.get_message("msg_nope")
    assert store_backend.verify() == []


def _script(mem: lossless.Memory) -> dict[str, Any]:
    """A deterministic session; what it leaves behind, without times the store sets itself."""
    a = mem.conversation("a", metadata={"user": "ann"})
    b = mem.conversation("b")
    a.add_many(chat(150, words=30, tools_every=5))
    b.add_many(chat(40, words=10, start=T0 + timedelta(days=1)))
    assert mem.wait_idle(60, conversations=["a", "b"])  # the automatic passes, then the same full one on both
    a.compact(full=True)
    mem.memories.add("Prefers metric units", kind="preference", user="ann")
    out: dict[str, Any] = {}
    for conv in (a, b):
        out[conv.id] = {
            "messages": conv.messages(),
            "summaries": [(s.id, s.depth, s.first_seq, s.last_seq, s.content, s.sources, s.descendant_count,
                           s.earliest_at, s.latest_at) for s in conv.summaries()],
            "frontier": [s.id for s in conv.frontier()],
            "context": conv.assemble(budget_tokens=1500).messages,
            "stats": {k: v for k, v in conv.stats().to_dict().items() if "seconds" not in k},
        }
    out["memories"] = [(r.id, r.content, r.scope) for r in mem.memories.ls()]
    out["conversations"] = sorted((c.id, c.message_count, c.summary_count) for c in mem.conversations())
    return out


@pytest.mark.postgres
def test_the_same_script_leaves_the_same_store_on_both(tmp_path: Path, pg_url: str) -> None:
    # inline: the DAG's shape must not hang on the worker's timing (a background worker's
    # turn that ran out of time on a loaded machine split the same passes differently)
    with lossless.open(tmp_path / "s.db", context_window=2048, compaction="inline") as sqlite_mem:
        on_sqlite = _script(sqlite_mem)
        assert sqlite_mem.verify() == []
    with lossless.open(pg_url, context_window=2048, compaction="inline") as pg_mem:
        on_postgres = _script(pg_mem)
        assert pg_mem.verify() == []
    assert on_postgres["a"]["summaries"], "the script compacts"
    for key in ("a", "b"):
        assert on_postgres[key]["stats"] == on_sqlite[key]["stats"]
        for part in ("messages", "summaries", "frontier", "context"):
            assert on_postgres[key][part] == on_sqlite[key][part], part
    assert on_postgres["conversations"] == on_sqlite["conversations"]
    assert [m[1:] for m in on_postgres["memories"]] == [m[1:] for m in on_sqlite["memories"]]


def test_memory_update_onto_existing_content_is_refused(store_backend: lossless.Memory) -> None:
    memories = store_backend.memories
    first = memories.add("Deploys happen on Tuesday", user="ann")
    second = memories.add("Deploys happen on Thursday", user="ann")
    with pytest.raises(lossless.ValidationError, match="already holds this content"):
        memories.update(second.id, content="deploys happen on  TUESDAY")
    assert memories.get(second.id).content == "Deploys happen on Thursday"  # rolled back whole
    assert [h.id for h in memories.search("Thursday", user="ann")] == [second.id]
    assert memories.count() == 2 and memories.get(first.id).use_count == 0


def test_summaries_are_listed_in_one_order_on_both(backend_target: str) -> None:
    """An older root and a newer summary of the same depth may start at the same message:
    ``summaries()`` lists such ties in the order they were written, on both stores,
    whatever order the database holds the rows in (CI once saw PostgreSQL return them
    swapped). On PostgreSQL the rows are first rewritten newest first (``CLUSTER``)."""
    from .backends import raw_query

    with lossless.open(backend_target, context_window=2048, compaction="inline") as mem:
        _script(mem)
    ids = "SELECT id FROM summaries WHERE conversation_id = 'a' ORDER BY rowid"
    written = [r[0] for r in raw_query(backend_target, ids)]
    if backend_target.startswith("postgresql"):
        raw_query(backend_target, "CREATE INDEX newest_first ON summaries (rowid DESC)")
        raw_query(backend_target, "CLUSTER summaries USING newest_first")
        raw_query(backend_target, "DROP INDEX newest_first")
    with lossless.open(backend_target, context_window=2048, compaction="inline") as mem:
        listed = mem.conversation("a").summaries()
    spans = [(s.depth, s.first_seq) for s in listed]
    tied = [s.id for s in listed if spans.count((s.depth, s.first_seq)) > 1]
    assert len(tied) >= 2, "the script leaves two summaries of one depth from one message"
    assert tied == sorted(tied, key=written.index)
    assert [(-s.depth, s.first_seq) for s in listed] == sorted((-s.depth, s.first_seq) for s in listed)
