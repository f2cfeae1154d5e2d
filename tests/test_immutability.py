"""Immutability enforced by the database, and the one audited way to erase (issue 20, item 3).

Seed 000: stored messages are never altered. The stores' triggers refuse a raw UPDATE or
DELETE of a message, of a summary's span and edges and of a tombstone; the erase path
(``conv.erase``) is the only way a message's text changes, and it leaves a tombstone.
Every test runs on SQLite and, with ``--store=postgres``, on PostgreSQL.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lossless
from lossless.core.errors import NotFoundError, ValidationError
from lossless.summarize.base import SummaryRequest, SummaryResult
from lossless.testing import HashEmbedder, ScriptedSummarizer

from .backends import StoreTarget, raw_query
from .conftest import chat

SECRET = "zebra-passport-4417"


def _open(target: str, **kw: Any) -> lossless.Memory:
    return lossless.open(target, context_window=2048, compaction="inline", **kw)


def _quoting(_n: int, request: SummaryRequest) -> SummaryResult:
    """A model that quotes the secret when it sees it (as a real one may)."""
    items = request.items
    quoted = " ".join(f"The passport is {SECRET}." for it in items if SECRET in it.text)
    return SummaryResult(f"#{items[0].first_seq}-#{items[-1].last_seq}: {len(items)} items. {quoted}".strip())


def _compacted(target: str, **kw: Any) -> tuple[lossless.Memory, lossless.Conversation]:
    """A conversation with summaries over its first messages, message #3 holding SECRET
    (quoted by the summaries over it)."""
    mem = _open(target, summarizer=ScriptedSummarizer(_quoting), **kw)
    conv = mem.conversation("c")
    msgs = chat(60, words=30, tools_every=5)
    msgs[2] = {**msgs[2], "content": f"my passport number is {SECRET}, keep it safe"}
    conv.add_many(msgs)
    conv.compact(force=True)
    assert conv.summaries() and conv.summaries()[0].first_seq <= 3 <= conv.summaries()[0].last_seq
    return mem, conv


def _refused(target: str, sql: str, params: tuple[Any, ...] = ()) -> str:
    with pytest.raises(Exception) as info:  # apsw.ConstraintError / psycopg.errors.RestrictViolation
        raw_query(target, sql, params)
    return str(info.value)


@pytest.mark.parametrize("sql", [
    "UPDATE messages SET content = 'tampered' WHERE seq = 3",
    "UPDATE messages SET role = 'assistant' WHERE seq = 3",
    "UPDATE messages SET seq = 999 WHERE seq = 3",
    "UPDATE messages SET content_hash = 'x' WHERE seq = 3",
    "UPDATE messages SET tool_calls = NULL WHERE tool_calls IS NOT NULL",
    "UPDATE messages SET created_at = '2001-01-01T00:00:00' WHERE seq = 3",
    "DELETE FROM messages WHERE seq = 3",
    "DELETE FROM messages",
])
def test_raw_writes_to_messages_are_refused(store_target: StoreTarget, sql: str) -> None:
    target = store_target("r")
    mem, _conv = _compacted(target)
    mem.close()
    assert "immutable" in _refused(target, sql)
    with _open(target) as mem:
        assert mem.verify() == []
        assert SECRET in mem.conversation("c").messages(3, 3)[0].content


@pytest.mark.parametrize("sql", [
    "DELETE FROM summaries",
    "UPDATE summaries SET first_seq = first_seq + 1",
    "UPDATE summaries SET content = 'rewritten by hand'",
    "DELETE FROM summary_sources",
    "UPDATE summary_sources SET source_id = 'msg_x'",
])
def test_raw_writes_to_the_dag_are_refused(store_target: StoreTarget, sql: str) -> None:
    target = store_target("d")
    mem, _conv = _compacted(target)
    mem.close()
    _refused(target, sql)
    with _open(target) as mem:
        assert mem.verify() == []


def test_the_paths_that_legitimately_update_still_work(store_target: StoreTarget) -> None:
    """Token counts (derived, a recount), the keyword index (store/reindex.py), a
    condensed node's parent set once, a summary redone with its old text kept."""
    target = store_target("ok")
    mem, conv = _compacted(target)
    conv.compact(full=True)  # condensing sets parent_id on the sources
    leaf = next(s for s in conv.summaries() if s.depth == 0)
    from lossless.store.base import RevisedSummary

    assert mem.store.revise_summary(leaf.id, leaf.content, RevisedSummary("redone text", 3, "test", 0, {}))
    assert mem.store.summary_revisions(leaf.id)[0]["content"] == leaf.content
    mem.close()
    raw_query(target, "UPDATE messages SET token_count = token_count + 1 WHERE seq = 3")
    if store_target.on_postgres:
        raw_query(target, "UPDATE messages SET search = to_tsvector('simple', 'x') WHERE seq = 3")
        import psycopg

        from lossless.store.reindex import reindex_postgres as reindex

        with psycopg.connect(target, autocommit=True) as conn, conn.transaction():
            reindex(conn)
    else:
        import apsw

        from lossless.store.reindex import reindex_sqlite

        conn = apsw.Connection(target)
        with conn:
            reindex_sqlite(conn)
        conn.close()
    with _open(target) as mem:
        assert mem.verify() == []
        assert mem.conversation("c").search(SECRET, mode="fts")


@pytest.mark.sqlite_only(reason="rewinds a SQLite file's migrations; the PostgreSQL pool's template is always at the "
                                "newest version")
def test_upgrade_from_before_the_triggers_keeps_everything(store_target: StoreTarget) -> None:
    """A store written before the immutability migration gets the triggers on open, with
    its rows as they were."""
    target = store_target("up")
    mem, conv = _compacted(target)
    before = [(m.id, m.content, m.token_count) for m in conv.messages()]
    mem.close()
    import apsw

    conn = apsw.Connection(target)
    with conn:
        for (name,) in list(conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")):
            conn.execute(f'DROP TRIGGER "{name}"')
        conn.execute("DROP TABLE tombstones")
        conn.execute("DROP TABLE compaction_timers")
        conn.execute("DROP TABLE task_bounds")  # (migration 13, after the triggers: redone too)
        conn.execute("DROP TABLE forgotten_memories")
        conn.execute("DROP INDEX summaries_roots")  # (migration 14, also redone)
        conn.execute("DROP TABLE vector_checks")  # (migration 15; 16 replaces triggers 11 makes)
        conn.execute("DELETE FROM schema_migrations WHERE version >= 11")
    conn.close()
    raw_query(target, "UPDATE messages SET token_count = token_count WHERE seq = 1")  # no trigger yet
    with _open(target) as mem:
        conv = mem.conversation("c")
        assert [(m.id, m.content, m.token_count) for m in conv.messages()] == before
        assert mem.verify() == []
    assert "immutable" in _refused(target, "DELETE FROM messages WHERE seq = 1")


def test_erase_one_message_everywhere(store_target: StoreTarget) -> None:
    target = store_target("e")
    mem, conv = _compacted(target, embedder=HashEmbedder())
    conv.index()
    assert conv.search(SECRET, mode="fts")
    victim = conv.messages(3, 3)[0]
    over = [s.id for s in conv.summaries() if s.first_seq <= 3 <= s.last_seq]
    assert any(SECRET in s.content for s in conv.summaries())
    mem.memories.add(f"passport {SECRET}", kind="fact", conversation_id="c", source_message_ids=[victim.id])

    stones = conv.erase([victim.id], reason="GDPR request #881", by="dpo@example.com")

    assert [(t.seq, t.message_id, t.reason, t.erased_by) for t in stones] == [
        (3, victim.id, "GDPR request #881", "dpo@example.com")]
    assert conv.tombstones() == stones
    erased = conv.messages(3, 3)[0]
    assert (erased.id, erased.seq, erased.role, erased.created_at) == (victim.id, 3, victim.role, victim.created_at)
    assert victim.name and erased.name is None and erased.metadata == {}  # who said it goes too (issue 30)
    assert erased.content == "[erased]"
    assert mem.verify() == []
    # every derived place lost it: keyword search, summaries, units, memories
    assert not conv.search(SECRET, mode="fts")
    assert not conv.search("passport", mode="fts") or all(h.id != victim.id for h in conv.search("passport", mode="fts"))
    for s in conv.summaries():
        assert SECRET not in s.content
        if s.id in over:
            assert s.fallback_level == 2 and "erased" in s.content
            assert mem.store.summary_revisions(s.id) == []
    units = raw_query(target, "SELECT text FROM recall_units")
    assert units and not any(SECRET in u[0] for u in units)
    assert not any(SECRET in r.content for r in mem.memories.ls())
    # the replacement units are embedded again
    conv.index()
    assert mem.stats().backlog is not None
    # other messages are untouched, and erasing again changes nothing
    assert conv.erase([3], reason="again", by="x") == stones
    assert len(conv.tombstones()) == 1
    mem.close()
    assert "immutable" in _refused(target, "DELETE FROM tombstones")
    assert "immutable" in _refused(target, "UPDATE tombstones SET reason = 'nothing to see'")


def test_erase_tool_calls_keep_their_pairing(store_target: StoreTarget) -> None:
    with _open(store_target("t")) as mem:
        conv = mem.conversation("t")
        conv.add_many(chat(12, tools_every=2))
        call = next(m for m in conv.messages() if m.tool_calls)
        conv.erase([call.seq, call.seq + 1], reason="secrets in arguments", by="me")
        after = conv.messages(call.seq, call.seq + 1)
        assert after[0].tool_calls[0]["id"] == call.tool_calls[0]["id"]
        assert after[0].tool_calls[0]["function"] == {"name": "run_tests", "arguments": "[erased]"}
        assert after[1].tool_call_id == call.tool_calls[0]["id"] and after[1].content == "[erased]"
        assert mem.verify() == []
        conv.assemble(budget_tokens=1000)


def test_erase_a_whole_conversation(store_target: StoreTarget) -> None:
    target = store_target("w")
    mem, conv = _compacted(target)
    stones = mem.erase_conversation("c", reason="account closed", by="ops")
    assert [t.seq for t in stones] == list(range(1, 61))
    assert all(m.content == "[erased]" for m in conv.messages())
    assert all("Turn" not in s.content and SECRET not in s.content for s in conv.summaries())
    assert not conv.search("service", mode="fts")
    assert mem.verify() == []
    mem.close()


def test_erase_message_by_id_and_bad_input(store_target: StoreTarget) -> None:
    with _open(store_target("b")) as mem:
        conv = mem.conversation("b")
        conv.add_many(chat(4))
        mid = conv.messages(2, 2)[0].id
        assert mem.erase_message(mid, reason="typo'd a password", by="me").seq == 2
        with pytest.raises(ValidationError, match="reason"):
            conv.erase([1], reason=" ", by="me")
        with pytest.raises(ValidationError, match="by="):
            conv.erase([1], reason="r", by="")
        with pytest.raises(NotFoundError, match="msg_nope"):
            conv.erase(["msg_nope"], reason="r", by="me")
        with pytest.raises(NotFoundError):
            mem.erase_message("msg_nope", reason="r", by="me")
        with pytest.raises(ValidationError, match="messages="):
            conv.erase([], reason="r", by="me")
        assert [t.seq for t in conv.tombstones()] == [2]


def test_cli_erase(store_target: StoreTarget, capsys: pytest.CaptureFixture[str]) -> None:
    from lossless.cli.main import main

    target = store_target("cli")
    with _open(target) as mem:
        mem.conversation("c").add_many(chat(6))
    assert main(["--db", target, "--json", "erase", "c", "--message", "2", "--reason", "asked", "--by", "ann"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [(t["seq"], t["erased_by"], t["reason"]) for t in out] == [(2, "ann", "asked")]
    assert main(["--db", target, "erase", "c", "--reason", "all"]) == 2  # the whole conversation needs --yes
    assert "--yes" in capsys.readouterr().err
    assert main(["--db", target, "--json", "erase", "c", "--list"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 1
    assert main(["--db", target, "verify"]) == 0


_OPS = st.lists(st.sampled_from(["add", "compact", "full", "redo", "assemble", "search", "erase", "memory"]),
                min_size=1, max_size=8)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_OPS, pick=st.integers(min_value=1, max_value=10_000))
def test_no_public_operation_changes_a_message_except_erase(store_target: StoreTarget, ops: list[str],
                                                              pick: int) -> None:
    """Whatever public operations run, every stored message reads exactly as written,
    except the ones erased, which read ``[erased]`` and have a tombstone each."""
    mem = _open(store_target("h"))
    try:
        conv = mem.conversation(f"h{pick}-{len(ops)}-{'.'.join(ops)}"[:120])
        written: dict[int, Any] = {}

        def add(n: int) -> None:
            for m in conv.add_many(chat(n, words=20, tools_every=4)):
                written[m.seq] = (m.role, m.content, m.name, m.tool_calls, m.tool_call_id, m.created_at)

        add(30)
        for op in ops:
            if op == "add":
                add(8)
            elif op == "compact":
                conv.compact(force=True)
            elif op == "full":
                conv.compact(full=True)
            elif op == "redo":
                conv.redo_fallbacks()
            elif op == "assemble":
                conv.assemble(budget_tokens=600, query="service port")
            elif op == "search":
                conv.search("service", mode="fts")
            elif op == "erase":
                conv.erase([pick % len(written) + 1], reason="property test", by="hypothesis")
            else:
                mem.memories.add(f"fact {pick}", conversation_id=conv.id)
        erased = {t.seq for t in conv.tombstones()}
        for m in conv.messages():
            if m.seq in erased:
                assert m.content == "[erased]"
            else:
                assert (m.role, m.content, m.name, m.tool_calls, m.tool_call_id, m.created_at) == written[m.seq]
        assert mem.verify(conv.id) == []
    finally:
        mem.close()


def test_erasing_a_whole_conversation_clears_its_metadata_but_its_owners(store_target: StoreTarget) -> None:
    """An imported title (周末计划) says what was in the conversation: erasing all of it
    clears it, and every other field but the owners of its memories. Erasing some of its
    messages leaves the metadata as it is; erasing the rest afterwards clears it."""
    with _open(store_target("meta")) as mem:
        meta = {"title": "周末计划", "source": "chatgpt", "user": "li", "agent_id": "helper"}
        conv = mem.conversation("c", metadata=meta)
        conv.add_many([{"role": "user", "content": f"第{i}条：周末去西湖"} for i in range(6)])
        conv.erase([1, 2], reason="part", by="me")
        assert mem.store.get_conversation("c").metadata == meta
        mem.erase_conversation("c", reason="account closed", by="ops")
        assert mem.store.get_conversation("c").metadata == {"user": "li", "agent_id": "helper"}
        assert mem.verify() == []
        other = mem.conversation("d", metadata={"title": "旅行"})
        other.add(role="user", content="去杭州")
        other.erase([1], reason="all of it, by seq", by="me")
        assert mem.store.get_conversation("d").metadata == {"title": "旅行"}
        mem.erase_conversation("d", reason="now the whole", by="me")  # nothing left to erase but the title
        assert mem.store.get_conversation("d").metadata == {}
        assert mem.erase_conversation("d", reason="again", by="me") == other.tombstones()
