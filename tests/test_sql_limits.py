"""No statement binds a number of variables its caller chose: SQLite refuses more than
32,766 in one statement ("too many SQL variables"), psycopg more than 65,535. Lists of
ids go in as one value (``SQLRunner.in_list``), on both stores; and a catch-up over many
conversations drains them all (served a slice at a time, see ``Scheduler._work_here`` in lossless.compaction.scheduler)."""

from __future__ import annotations

import lossless
from lossless.store.backlog import Backlog
from lossless.store.runner import sql_runner
from tests.conftest import StoreTarget

OVER_THE_LIMIT = 33_000  # SQLite: 32,766 variables at most; the attacker's import failed at 33k conversations


def test_a_claim_among_more_conversations_than_a_statement_may_bind(store_target: StoreTarget) -> None:
    with lossless.open(store_target("claim"), embedder=None, compaction="deferred") as mem:
        mem.conversation("real").add("user", "owed work")
        backlog = Backlog(mem.store)
        asked = [f"ghost-{i}" for i in range(OVER_THE_LIMIT)] + ["real"]
        claims = backlog.claim("me", limit=4, conversation_ids=asked)
        assert [c.conversation_id for c in claims] == ["real"]
        assert backlog.pending(asked) == ["real"]


def test_in_list_takes_any_number_of_values_on_both_stores(store_target: StoreTarget) -> None:
    with lossless.open(store_target("inlist"), embedder=None, compaction="deferred") as mem:
        for cid in ("a", "b"):
            mem.conversation(cid)
        runner = sql_runner(mem.store)
        for values in (["a"], [f"x{i}" for i in range(OVER_THE_LIMIT)] + ["b", "a"]):
            among, args = runner.in_list("id", values)
            rows = runner.query(f"SELECT id FROM conversations WHERE {among} ORDER BY id", args)
            assert [r[0] for r in rows] == sorted({"a", "b"} & set(values))
        among, args = runner.in_list("seq", list(range(OVER_THE_LIMIT)))  # integers too
        assert len(args) == 1 and runner.query(f"SELECT count(*) FROM messages WHERE {among}", args)[0][0] == 0


def test_adding_again_a_batch_larger_than_the_limit_returns_the_stored_messages(store_target: StoreTarget) -> None:
    batch = [{"role": "user", "content": f"m{i}", "external_id": f"e{i}"} for i in range(OVER_THE_LIMIT)]
    with lossless.open(store_target("again"), embedder=None, compaction="deferred", auto_compact=False) as mem:
        conv = mem.conversation("c")
        first = conv.add_many(batch)
        again = conv.add_many(batch)  # every one already stored: read back by id, in one statement
        assert [m.id for m in again] == [m.id for m in first] and mem.store.last_seq("c") == OVER_THE_LIMIT


def test_a_catch_up_over_many_conversations_drains_every_one(store_target: StoreTarget) -> None:
    n = 700  # several slices of the foreground catch-up (64 each)
    with lossless.open(store_target("drain"), embedder=None, compaction="deferred") as mem:
        for i in range(n):
            mem.conversation(f"c{i}").add("user", f"message {i}")
        backlog = Backlog(mem.store)
        ids = [f"c{i}" for i in range(n)]
        assert len(backlog.pending(ids)) == n
        seen: list[tuple[int, int]] = []
        assert mem.wait_idle(conversations=ids, progress=lambda done, total: seen.append((done, total)))
        assert backlog.pending(ids) == [] and not backlog.pending_any()
