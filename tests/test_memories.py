"""Long-term memory records: add/dedupe, scope-isolated search (keyword, CJK, vectors),
listing, updating, forgetting for good, distilling conversations, the CLI, migration 4."""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import apsw
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lossless
from lossless.cli import memory_cmd
from lossless.cli.context import CommandContext, CommandError
from lossless.core.errors import LosslessError, NotFoundError, QueryError, ValidationError
from lossless.core.types import Message
from lossless.embed.base import Vectors
from lossless.longterm import Memories, MemoryRecord
from lossless.store.sqlite import migrations
from lossless.testing import FakeSummarizer, HashEmbedder

from .conftest import T0, StoreTarget

NOW = datetime.now(UTC)


SYNONYMS = {"automobile": "car", "vehicle": "car", "crimson": "red"}


class SynonymEmbedder(HashEmbedder):
    """HashEmbedder that treats a few synonyms as one word: a meaning match that shares
    no keyword, so only the vector path can find it."""

    model = "hash-64-synonyms"

    def embed(self, texts: Sequence[str]) -> Vectors:
        canon = [re.sub(r"\w+", lambda m: SYNONYMS.get(m.group(0).lower(), m.group(0)), t) for t in texts]
        out = super().embed(canon)
        self.texts[-len(texts):] = list(texts)  # record what was asked, not the canonical form
        return out


def _open(path: Path | str, embedder: Any = None) -> tuple[lossless.Memory, Memories]:
    mem = lossless.open(path, embedder=embedder)
    return mem, Memories(mem.store, mem.embedder, mem.counter)


@pytest.fixture
def mems(backend_target: str) -> Iterator[Memories]:
    """Memories on a fresh store of each backend (SQLite, PostgreSQL)."""
    mem, memories = _open(backend_target)
    yield memories
    mem.close()


def _count(m: Memories, sql: str, args: Sequence[Any] = ()) -> int:
    return int(m.db.query(sql, args)[0][0])


# -- add, get, dedupe --------------------------------------------------------------------


def test_add_derives_scope_and_default_importance(mems: Memories) -> None:
    fact = mems.add("The staging database runs on port 6543.")
    pref = mems.add("Answers in English, please.", kind="preference", user="ann")
    err = mems.add("pytest fails on import of numpy 2", kind="error", agent="ci-bot")
    both = mems.add("Ann's CI runs nightly", user="ann", agent="ci-bot", importance=0.3)
    assert fact.id.startswith("mem_") and len(fact.id) == 24
    assert (fact.scope, pref.scope, err.scope, both.scope) == ("global", "user", "agent", "user")
    assert (fact.importance, pref.importance, err.importance, both.importance) == (0.5, 0.7, 0.8, 0.3)
    assert fact.use_count == 0 and fact.last_used_at == fact.created_at
    assert mems.get(pref.id) == pref
    assert json.loads(json.dumps(both.to_dict()))["agent"] == "ci-bot"
    with pytest.raises(NotFoundError):
        mems.get("mem_nope")


def test_same_content_in_same_scope_is_one_record(mems: Memories) -> None:
    first = mems.add("I prefer dark mode.", kind="preference", user="ann", source_message_ids=["msg_a"])
    again = mems.add("  i prefer   DARK mode. ", kind="preference", user="ann", importance=0.9,
                     source_message_ids=["msg_b"])
    assert again.id == first.id
    assert again.use_count == 1 and again.last_used_at >= first.last_used_at
    assert again.importance == 0.9  # an explicitly higher importance wins
    assert again.source_message_ids == ("msg_a", "msg_b")
    lower = mems.add("I prefer dark mode.", user="ann", importance=0.1)
    assert lower.importance == 0.9 and lower.use_count == 2
    other = mems.add("I prefer dark mode.", kind="preference", user="bob")  # another owner: its own record
    assert other.id != first.id
    assert mems.count() == 2 and mems.count(user="ann") == 1


def test_trailing_punctuation_and_spaces_do_not_make_another_record(mems: Memories) -> None:
    first = mems.add("我对花生过敏", user="ann")
    for again in ("我对花生过敏。", " 我对花生过敏！ ", "我对花生过敏 . ", "我对花生过敏～", "我对花生过敏~~"):
        assert mems.add(again, user="ann").id == first.id, again
    assert mems.add("I prefer tea!", kind="preference", user="ann").id == mems.add("i prefer  tea", user="ann").id
    assert mems.get(first.id).content == "我对花生过敏"  # stored as given, compared normalised
    assert mems.add("我对花生过敏，也对虾过敏。", user="ann").id != first.id  # punctuation inside still counts
    assert mems.count(user="ann") == 3
    with pytest.raises(ValidationError, match="already holds"):
        mems.update(mems.add("我对芒果过敏", user="ann").id, content="我对花生过敏。")


def test_a_record_stored_under_the_older_key_is_still_found(mems: Memories) -> None:
    """Records written before trailing punctuation was dropped keep their old dedupe key
    (sha256 of the text only case- and space-folded); adding the same text finds them."""
    old = mems.add("I prefer dark mode.", kind="preference", user="ann")
    legacy = hashlib.sha256(b"i prefer dark mode.").hexdigest()
    with mems.db.transaction() as conn:
        conn.execute("UPDATE memories SET content_hash = ? WHERE id = ?", (legacy, old.id))
    assert mems.add("I prefer dark mode.", kind="preference", user="ann").id == old.id
    assert mems.count(user="ann") == 1


def test_task_records_keep_their_fields(mems: Memories) -> None:
    task = mems.add("Review PR 412 (payments refactor)", kind="task", user="ann",
                    task={"task_id": "T-9", "task_type": "code_review", "status": "completed",
                          "result": "approved after the retry loop was bounded",
                          "patterns": ["unbounded retries"], "errors": ["flaky idempotency test"]})
    assert (task.task_id, task.task_type, task.status) == ("T-9", "code_review", "completed")
    assert task.patterns == ("unbounded retries",) and task.errors == ("flaky idempotency test",)
    assert task.to_dict()["task"]["result"].startswith("approved")
    # the result, patterns and errors are searchable too
    assert [r.id for r in mems.search("idempotency", user="ann")] == [task.id]
    assert "task" not in mems.add("plain fact").to_dict()


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"content": ""}, "content"),
        ({"content": "   "}, "content"),
        ({"content": 42}, "content"),
        ({"content": "x\x00y"}, "content"),
        ({"kind": "opinion"}, "kind"),
        ({"importance": 1.5}, "importance"),
        ({"importance": -0.1}, "importance"),
        ({"importance": float("nan")}, "importance"),
        ({"importance": True}, "importance"),
        ({"metadata": ["not", "a", "dict"]}, "metadata"),
        ({"metadata": {"when": datetime.now()}}, "metadata"),
        ({"user": ""}, "user"),
        ({"agent": 7}, "agent"),
        ({"source_message_ids": "msg_1"}, "source_message_ids"),
        ({"conversation_id": ""}, "conversation id"),
        ({"created_at": "yesterday"}, "created_at"),
        ({"task": {"status": "done"}}, "task"),  # a fact with task fields
        ({"kind": "task", "task": {"status": "someday"}}, "status"),
        ({"kind": "task", "task": {"owner": "x"}}, "task"),
    ],
)
def test_add_refuses_bad_input_naming_the_field(mems: Memories, kwargs: dict[str, Any], field: str) -> None:
    args: dict[str, Any] = {"content": "a memory", **kwargs}
    with pytest.raises(ValidationError, match=field):
        mems.add(**args)
    assert mems.count() == 0


@pytest.mark.parametrize("name", ["a\nb", "\x1b[31m", "ann\r", "tab\there", "del\x7f", "c1\x85", "\x00"])
@pytest.mark.parametrize("field", ["user", "agent"])
def test_an_owner_name_with_a_control_character_is_refused(mems: Memories, field: str, name: str) -> None:
    """A user or agent name is one line of printable text: "a\\nb" was stored and printed
    as two lines in every listing of owners, "\\x1b[31m" turned the terminal red. The
    error names the parameter, the character and where it is (a NUL was refused before)."""
    char = re.search(r"[\x00-\x1f\x7f-\x9f]", name)
    assert char is not None
    said = "a NUL byte" if char.group() == "\x00" else f"the control character U+{ord(char.group()):04X}"
    with pytest.raises(ValidationError, match=rf"^{field} .*{re.escape(said)} at position {char.start()}"):
        mems.add("我对花生过敏。", **{field: name})
    at = datetime(2024, 1, 1, tzinfo=UTC)
    with pytest.raises(ValidationError, match=rf"^{field} "):  # nor is one distilled under such a name
        mems.distill([Message("m1", "c", 1, "user", "我对花生过敏。", at, 10)], **{field: name})
    assert mems.count() == 0


def test_a_record_stored_before_names_were_checked_is_still_found_by_its_owner(mems: Memories) -> None:
    """Filters take any name: a record whose owner has a control character (stored before
    the rule) can still be listed, searched and forgotten by it."""
    record = mems.add("Ann prefers tea over coffee.", user="ann")
    with mems.db.transaction() as conn:
        conn.execute("UPDATE memories SET user_id = ? WHERE id = ?", ("ann\n", record.id))
    assert [r.id for r in mems.ls(user="ann\n")] == [record.id]
    assert [r.id for r in mems.search("tea", user="ann\n")] == [record.id]
    assert [r.id for r in mems.forget(user="ann\n")] == [record.id]
    assert mems.count() == 0


def test_cli_refuses_an_owner_name_with_a_control_character(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """Through the real CLI: a usage error naming the flag, no traceback, no database made."""
    from lossless.cli.main import main

    db = tmp_path / "m.db"
    for flag, name, said in (("--user", "a\nb", "U+000A"), ("--agent", "\x1b[31m", "U+001B")):
        capsys.readouterr()
        assert main(["--db", str(db), "memory", "add", "我对花生过敏", flag, name]) == 2
        err = capsys.readouterr().err
        assert f"argument {flag}: {flag[2:]} {name!r} contains the control character {said}" in err
        assert "Traceback" not in err and "\x1b" not in err  # shown escaped, not sent to the terminal
    assert not db.exists()
    # a filter still takes the name (a record stored before the rule stays reachable)
    assert main(["--db", str(db), "memory", "add", "我对花生过敏", "--user", "ann"]) == 0
    assert main(["--db", str(db), "memory", "ls", "--user", "a\nb"]) == 0


def test_other_calls_refuse_bad_input(mems: Memories) -> None:
    mems.add("something to find")
    with pytest.raises(QueryError):
        mems.search("   ")
    with pytest.raises(ValidationError, match="limit"):
        mems.search("find", limit=0)
    with pytest.raises(ValidationError, match="kind"):
        mems.search("find", kind="opinion")
    with pytest.raises(ValidationError, match="order"):
        mems.ls(order="random")
    with pytest.raises(ValidationError, match="criterion"):
        mems.forget()
    with pytest.raises(ValidationError, match="importance_below"):
        mems.forget(importance_below=2)
    with pytest.raises(ValidationError, match="keep"):
        mems.forget(keep=-1)
    with pytest.raises(ValidationError, match="older_than"):
        mems.forget(older_than=30)  # type: ignore[arg-type]
    assert mems.count() == 1


# -- search and scope isolation -----------------------------------------------------------


def test_search_ranks_by_relevance_and_counts_uses(mems: Memories) -> None:
    deadline = mems.add("The payments migration deadline is March 22.", user="ann")
    mems.add("The payments team meets on Mondays.", user="ann")
    mems.add("Lunch is at noon.", user="ann")
    hits = mems.search("payments deadline", user="ann")
    assert [h.id for h in hits][:1] == [deadline.id]
    assert len(hits) == 2 and all(h.score is not None and 0 < h.score <= 1 for h in hits)
    assert hits[0].score > hits[1].score  # type: ignore[operator]
    assert mems.get(deadline.id).use_count == 1
    assert mems.search("payments deadline", user="ann", min_score=0.6)[0].id == deadline.id
    assert len(mems.search("payments deadline", user="ann", min_score=0.6)) == 1
    assert mems.search("zebra", user="ann") == []
    assert mems.get(deadline.id).use_count == 3


def test_importance_breaks_a_relevance_tie(mems: Memories) -> None:
    low = mems.add("Deploys happen on Tuesday.", importance=0.1)
    high = mems.add("Deploys happen on Thursday.", importance=0.9)
    assert [h.id for h in mems.search("deploys happen")] == [high.id, low.id]


def _owned(mems: Memories) -> dict[str, MemoryRecord]:
    return {
        "ann": mems.add("coffee order: flat white", user="ann"),
        "bob": mems.add("coffee order: espresso", user="bob"),
        "ann@bot": mems.add("coffee order: oat latte via bot", user="ann", agent="bot"),
        "bot": mems.add("coffee machine is on floor 3", agent="bot"),
        "other-bot": mems.add("coffee budget is 200 EUR", agent="other-bot"),
        "global": mems.add("coffee is free on Fridays"),
    }


@pytest.mark.parametrize(
    ("user", "agent", "include_global", "visible"),
    [
        ("ann", None, True, {"ann", "global"}),
        ("bob", None, True, {"bob", "global"}),
        ("ann", "bot", True, {"ann", "ann@bot", "bot", "global"}),
        ("bob", "bot", True, {"bob", "bot", "global"}),
        (None, "bot", True, {"bot", "global"}),
        (None, None, True, {"global"}),
        ("carol", None, True, {"global"}),
        ("ann", "bot", False, {"ann", "ann@bot", "bot"}),
    ],
)
def test_search_sees_only_what_its_user_and_agent_may(mems: Memories, user: str | None, agent: str | None,
                                                      include_global: bool, visible: set[str]) -> None:
    records = _owned(mems)
    hits = mems.search("coffee", user=user, agent=agent, include_global=include_global, limit=50)
    names = {name for name, r in records.items() if r.id in {h.id for h in hits}}
    assert names == visible


def test_listing_filters_are_plain_filters(mems: Memories) -> None:
    records = _owned(mems)
    assert {r.id for r in mems.ls(user="ann")} == {records["ann"].id, records["ann@bot"].id}
    assert {r.id for r in mems.ls(agent="bot")} == {records["ann@bot"].id, records["bot"].id}
    assert {r.id for r in mems.ls(scope="global")} == {records["global"].id}
    assert mems.count() == 6 and mems.count(scope="agent") == 2
    assert [r.id for r in mems.ls(limit=2, offset=0, order="oldest")] == [records["ann"].id, records["bob"].id]


def test_a_namespace_lists_the_records_owned_inside_it(mems: Memories) -> None:
    """``namespace="@acme"`` (an HTTP server tenant's records): a user or agent under
    ``@acme/``, or the agent ``@acme``; not ``@acmex/…``, ``@acme_/…`` nor ``@acme`` as a user."""
    inside = [mems.add("one fact", user="@acme/ann"), mems.add("two facts", agent="@acme"),
              mems.add("three facts", user="x", agent="@acme/bot", kind="preference")]
    for user, agent in (("@acmex/ann", None), ("@acme_/ann", None), ("@acme", None), (None, "@acm"), (None, None)):
        mems.add(f"outside {user} {agent}", user=user, agent=agent)
    assert mems.ids(namespace="@acme") == [r.id for r in inside]
    assert len(mems.ids()) == 8
    assert [r.id for r in mems.ls(namespace="@acme", order="oldest")] == [r.id for r in inside]
    assert [r.id for r in mems.ls(namespace="@acme", kind="preference")] == [inside[2].id]
    assert [r.id for r in mems.ls(namespace="@acme", limit=1, offset=1, order="oldest")] == [inside[1].id]
    with pytest.raises(ValidationError, match="namespace"):
        mems.ids(namespace="")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(["u1", "u2", "u3", None]), st.sampled_from(["a1", "a2", None]),
                          st.sampled_from(["alpha", "beta", "gamma", "数据库", "迁移计划"])),
                min_size=1, max_size=25),
       st.sampled_from(["u1", "u2", "u3", None]), st.sampled_from(["a1", "a2", None]),
       st.sampled_from(["alpha", "beta gamma", "数据库迁移", "迁移", "alpha 数据库"]))
def test_property_no_record_of_another_owner_is_ever_returned(
        scratch_store: Callable[[], str], rows: list[tuple[str | None, str | None, str]], user: str | None,
        agent: str | None, query: str) -> None:
    mem, mems = _open(scratch_store())
    try:
        for i, (u, a, word) in enumerate(rows):
            mems.add(f"note {i} about {word}", user=u, agent=a)
        for hit in mems.search(query, user=user, agent=agent, limit=100):
            assert hit.user is None or hit.user == user
            assert hit.agent is None or hit.agent == agent
    finally:
        mem.close()


def test_kind_filter(mems: Memories) -> None:
    err = mems.add("Build failed: missing libpq", kind="error")
    fact = mems.add("Build server is build-01")
    task = mems.add("Build the release notes", kind="task", task={"status": "pending"})
    assert {h.id for h in mems.search("build", kind="error")} == {err.id}
    assert {h.id for h in mems.search("build", kind=["fact", "task"])} == {fact.id, task.id}
    assert [r.id for r in mems.ls(kind="task")] == [task.id]
    assert mems.count(kind=("error", "fact")) == 2


def test_chinese_memories_are_found(mems: Memories) -> None:
    db = mems.add("我们决定把数据库迁移到新的服务器上，端口是5433。", user="li")
    pref = mems.add("李雷喜欢简洁的回答。", kind="preference", user="li")
    mems.add("Unrelated English memory.", user="li")
    assert mems.search("数据库迁移", user="li")[0].id == db.id
    assert mems.search("迁移", user="li")[0].id == db.id  # two characters: below trigram size
    assert [h.id for h in mems.search("简洁的回答", user="li")] == [pref.id]
    assert mems.search("数据库迁移", user="someone-else") == []


# -- vectors and the embedding cache ------------------------------------------------------


def test_vector_search_finds_meaning_without_shared_keywords(store_target: StoreTarget, tmp_path: Path) -> None:
    emb = SynonymEmbedder()
    mem, mems = _open(store_target("v"), emb)
    car = mems.add("Ann drives a red car to work.", user="ann")
    mems.add("Ann's office is in Berlin.", user="ann")
    mems.add("Bob drives a red car too.", user="bob")
    hits = mems.search("crimson automobile", user="ann")
    assert [h.id for h in hits] == [car.id]  # found by its vector; Bob's never
    assert _count(mems, "SELECT count(*) FROM memory_vectors") == 3
    mem.close()
    mem2, keyword_only = _open(store_target("v"))
    assert keyword_only.search("crimson automobile", user="ann") == []
    mem2.close()


def test_the_cache_means_no_text_is_embedded_twice(store_target: StoreTarget, tmp_path: Path) -> None:
    emb = SynonymEmbedder()
    mem, mems = _open(store_target("c"), emb)
    mems.add("The red car is parked in bay 4.", user="ann")
    mems.add("The red car is parked in bay 4.", user="bob")  # same text, another owner: a cache hit
    mems.add("The red car is parked in bay 4.", user="ann")  # a duplicate: nothing to embed
    assert emb.texts == ["The red car is parked in bay 4."]
    mems.search("vehicle bay", user="ann")
    mems.search("vehicle bay", user="bob")
    assert emb.texts == ["The red car is parked in bay 4.", "vehicle bay"]
    mem.close()
    emb2 = SynonymEmbedder()  # across restarts, too
    mem2, again = _open(store_target("c"), emb2)
    assert again.search("vehicle bay", user="ann")
    assert emb2.texts == []
    mem2.close()


def test_records_added_without_an_embedder_are_embedded_at_search(store_target: StoreTarget, tmp_path: Path) -> None:
    mem, plain = _open(store_target("b"))
    car = plain.add("My car is a red Volvo.", user="ann")
    assert _count(plain, "SELECT count(*) FROM memory_vectors") == 0
    mem.close()
    emb = SynonymEmbedder()
    mem2, mems = _open(store_target("b"), emb)
    assert [h.id for h in mems.search("automobile", user="ann")] == [car.id]
    assert emb.texts == ["My car is a red Volvo.", "automobile"]
    mems.search("automobile", user="ann")
    assert len(emb.texts) == 2
    mem2.close()


# -- update -------------------------------------------------------------------------------


def test_update_changes_content_index_and_vector(store_target: StoreTarget, tmp_path: Path) -> None:
    emb = SynonymEmbedder()
    mem, mems = _open(store_target("u"), emb)
    rec = mems.add("The standup is at 9:30.", user="ann", metadata={"source": "chat"})
    updated = mems.update(rec.id, content="The standup moved to 10:15.", importance=0.9, metadata={"v": 2})
    assert updated.id == rec.id and updated.content.endswith("10:15.")
    assert (updated.importance, updated.metadata) == (0.9, {"v": 2})
    assert mems.search("9:30", user="ann") == []  # the old text left the index
    assert [h.id for h in mems.search("moved", user="ann")] == [rec.id]
    assert emb.texts.count("The standup moved to 10:15.") == 1
    row = mem.store._query("SELECT text_sha256 FROM memory_vectors")[0][0]
    assert row == hashlib.sha256(b"The standup moved to 10:15.").hexdigest()
    other = mems.add("Retro is on Friday.", user="ann")
    with pytest.raises(ValidationError, match="content"):
        mems.update(other.id, content="the standup moved to 10:15.")
    with pytest.raises(ValidationError, match="status"):
        mems.update(other.id, status="completed")
    with pytest.raises(NotFoundError):
        mems.update("mem_missing", importance=0.1)
    mem.close()


def test_update_task_status(mems: Memories) -> None:
    task = mems.add("Write the rollback runbook", kind="task", task={"status": "pending"})
    done = mems.update(task.id, status="completed", result="runbook in docs/rollback.md")
    assert (done.status, done.result) == ("completed", "runbook in docs/rollback.md")
    assert [h.id for h in mems.search("docs rollback.md")] == [task.id]
    with pytest.raises(ValidationError, match="status"):
        mems.update(task.id, status="finished")


# -- forgetting ---------------------------------------------------------------------------


def _tables_hold(mems: Memories, rowid: int, word: str) -> dict[str, int]:
    if getattr(mems.store, "dialect", "sqlite") == "postgresql":
        # PostgreSQL keeps the keyword index on the row (a tsvector)
        fts = "SELECT count(*) FROM memories WHERE search @@ websearch_to_tsquery('simple', ?)"
    else:  # (CJK is in memories_fts too, as bigrams: there is no trigram table any more)
        fts = "SELECT count(*) FROM memories_fts WHERE memories_fts MATCH ?"
        word = f'"{word}"'
    return {
        "memories": _count(mems, "SELECT count(*) FROM memories WHERE rowid = ?", (rowid,)),
        "fts": _count(mems, fts, (word,)),
        "vectors": _count(mems, "SELECT count(*) FROM memory_vectors WHERE memory_rowid = ?", (rowid,)),
    }


def _rowid(mems: Memories, memory_id: str) -> int:
    return int(mems.db.query("SELECT rowid FROM memories WHERE id = ?", (memory_id,))[0][0])


def test_forget_by_age_dry_run_then_for_real(store_target: StoreTarget, tmp_path: Path) -> None:
    emb = SynonymEmbedder()
    mem, mems = _open(store_target("f"), emb)
    old = mems.add("Quarterly zeppelin report is due", user="ann", created_at=NOW - timedelta(days=90))
    used = mems.add("Old but recalled: zeppelin hangar code 4711", user="ann", created_at=NOW - timedelta(days=90))
    mems.search("hangar code", user="ann")  # a use: no longer "old"
    fresh = mems.add("Fresh zeppelin memory", user="ann")
    rowid = _rowid(mems, old.id)
    assert _tables_hold(mems, rowid, "quarterly") == {"memories": 1, "fts": 1, "vectors": 1}
    would = mems.forget(older_than=timedelta(days=30), dry_run=True)
    assert [r.id for r in would] == [old.id]
    assert mems.count() == 3  # a dry run deletes nothing
    gone = mems.forget(older_than=timedelta(days=30))
    assert [r.id for r in gone] == [r.id for r in would]
    assert _tables_hold(mems, rowid, "quarterly") == {"memories": 0, "fts": 0, "vectors": 0}
    assert {h.id for h in mems.search("zeppelin", user="ann")} == {used.id, fresh.id}
    # its cached embedding went with it (no message or other memory holds that text)
    sha = hashlib.sha256(old.content.encode()).hexdigest()
    assert _count(mems, "SELECT count(*) FROM embedding_cache WHERE text_sha256 = ?", (sha,)) == 0
    assert mems.forget(older_than=NOW - timedelta(days=30)) == []
    mem.close()


def test_forget_by_importance_and_scope(mems: Memories) -> None:
    trivia = mems.add("Ann once mentioned the weather", user="ann", importance=0.1)
    mems.add("Ann is allergic to peanuts", user="ann", importance=0.95)
    bob_trivia = mems.add("Bob likes the colour teal", user="bob", importance=0.1)
    assert [r.id for r in mems.forget(user="ann", importance_below=0.3)] == [trivia.id]
    assert mems.count(user="bob") == 1
    assert [r.id for r in mems.forget(importance_below=0.3)] == [bob_trivia.id]
    assert mems.count() == 1


def test_forget_by_capacity_keeps_the_most_recently_used_per_owner(mems: Memories) -> None:
    ann = [mems.add(f"ann memory {i}", user="ann", created_at=NOW - timedelta(days=10 - i),
                    importance=0.5) for i in range(5)]
    bob = [mems.add(f"bob memory {i}", user="bob", created_at=NOW - timedelta(days=10 - i)) for i in range(3)]
    tie_low = mems.add("global tie low", created_at=NOW - timedelta(days=20), importance=0.2)
    tie_high = mems.add("global tie high", created_at=NOW - timedelta(days=20), importance=0.8)
    mems.search("ann memory 0", user="ann", limit=1)  # recalled just now: the one most worth keeping
    would = mems.forget(keep=2, dry_run=True)
    expected = {ann[1].id, ann[2].id, ann[3].id, bob[0].id}
    assert {r.id for r in would} == expected  # globals: 2 records, capacity 2 → both stay
    assert {r.id for r in mems.forget(keep=1, dry_run=True, scope="global")} == {tie_low.id}
    gone = mems.forget(keep=2)
    assert [r.id for r in gone] == [r.id for r in would]
    assert {r.id for r in mems.ls(user="ann")} == {ann[0].id, ann[4].id}
    assert mems.count(scope="global") == 2 and tie_high.id in {r.id for r in mems.ls(scope="global")}
    assert len(mems.forget(keep=0, user="bob")) == 2 and mems.count(user="bob") == 0


def test_forget_by_ids_needs_criteria_or_all(mems: Memories) -> None:
    a = mems.add("first memory")
    mems.add("second memory")
    assert mems.forget(ids=["mem_unknown"]) == []
    assert [r.id for r in mems.forget([a.id])] == [a.id]
    assert mems.forget([a.id]) == []  # forgetting twice is harmless
    assert mems.forget(ids=[]) == []
    with pytest.raises(ValidationError):
        mems.forget(dry_run=True)
    assert len(mems.forget(all=True)) == 1 and mems.count() == 0


def test_forgetting_keeps_an_embedding_a_message_still_uses(store_target: StoreTarget, tmp_path: Path) -> None:
    emb = SynonymEmbedder()
    mem, mems = _open(store_target("k"), emb)
    conv = mem.conversation("c")
    conv.add(role="user", content="The red car is in bay 4.")
    conv.index()
    rec = mems.add("The red car is in bay 4.")
    assert emb.texts.count("The red car is in bay 4.") == 1  # embedded once, for both
    mems.forget([rec.id])
    assert conv.search("vehicle bay", mode="semantic")  # the message's vector is intact
    mem.close()


@pytest.mark.sqlite_only(reason="reads the SQLite file's bytes after VACUUM")
def test_vacuum_leaves_no_trace_of_forgotten_text_in_the_file(tmp_path: Path) -> None:
    path = tmp_path / "scrub.db"
    mem, mems = _open(path)
    secret = mems.add("the vault passphrase is xylophone-quasar-7781", user="ann")
    for i in range(50):
        mems.add(f"filler memory number {i}", user="ann")
    mems.forget([secret.id], vacuum=True)
    mem.close()
    for file in tmp_path.iterdir():
        assert b"xylophone" not in file.read_bytes(), file.name
        assert b"quasar-7781" not in file.read_bytes(), file.name


# -- distill ------------------------------------------------------------------------------


def _call(i: int) -> list[dict[str, Any]]:
    return [{"id": f"c{i}", "type": "function", "function": {"name": "deploy", "arguments": "{}"}}]


def _english(mem: lossless.Memory) -> list[Message]:
    return mem.conversation("en").add_many([
        {"role": "user", "content": "Hi! My name is Maya. I prefer short answers with code examples.",
         "created_at": T0},
        {"role": "assistant", "content": "Nice to meet you, Maya. How can I help?"},
        {"role": "user", "content": "We decided to use PostgreSQL 16 instead of MySQL. "
                                    "The migration must finish by March 22. Can you check the deploy?"},
        {"role": "assistant", "content": "", "tool_calls": _call(1)},
        {"role": "tool", "tool_call_id": "c1", "content": "running deploy\nERROR: connection refused on port 5433"},
        {"role": "assistant", "content": "Fixed by opening port 5433 in the firewall; the deploy is green."},
        {"role": "user", "content": "Great. TODO: write the rollback runbook. Do you like tea?"},
    ])


def _chinese(mem: lossless.Memory) -> list[Message]:
    return mem.conversation("zh").add_many([
        {"role": "user", "content": "我喜欢简洁的回答。"},
        {"role": "user", "content": "我们决定采用方案B，用Redis做缓存。项目必须在五月底之前上线。"},
        {"role": "assistant", "content": "好的。", "tool_calls": _call(2)},
        {"role": "tool", "tool_call_id": "c2", "content": "构建报错：找不到模块 redis-py"},
        {"role": "assistant", "content": "已经修复：在依赖里加入了 redis 包。"},
        {"role": "user", "content": "记住：生产环境的端口是8443。"},
    ])


def _by_category(records: list[MemoryRecord]) -> dict[str, MemoryRecord]:
    return {r.metadata["category"]: r for r in records}


def test_distill_an_english_conversation(store_target: StoreTarget, tmp_path: Path) -> None:
    mem, mems = _open(store_target("d"))
    msgs = _english(mem)
    found = mems.distill(msgs, user="maya")
    cats = _by_category(found)
    assert cats["preference"].kind == "preference"
    assert cats["preference"].content == "I prefer short answers with code examples."
    assert cats["preference"].source_message_ids == (msgs[0].id,)
    assert cats["preference"].created_at == T0
    assert cats["decision"].content == "We decided to use PostgreSQL 16 instead of MySQL."
    assert cats["decision"].source_message_ids == (msgs[2].id,)
    assert "March 22" in cats["constraint"].content
    error = cats["error_fix"]
    assert error.kind == "error" and "connection refused" in error.content and "firewall" in error.content
    assert error.source_message_ids == (msgs[4].id, msgs[5].id)
    assert cats["task"].kind == "task" and cats["task"].status == "pending"
    assert cats["personal"].content == "My name is Maya."
    assert all(r.user == "maya" and r.conversation_id == "en" for r in found)
    assert not any("like tea" in r.content or "How can I help" in r.content for r in found)  # questions skipped
    # distilling again adds nothing new
    assert mems.count() == len(found)
    assert {r.id for r in mems.distill(msgs, user="maya")} == {r.id for r in found}
    assert mems.count() == len(found)
    assert mems.search("postgresql decided", user="maya")[0].id == cats["decision"].id
    mem.close()


def test_distill_a_chinese_conversation(store_target: StoreTarget, tmp_path: Path) -> None:
    mem, mems = _open(store_target("z"))
    msgs = _chinese(mem)
    cats = _by_category(mems.distill(msgs, user="li"))
    assert cats["preference"].content == "我喜欢简洁的回答。"
    assert cats["decision"].content == "我们决定采用方案B，用Redis做缓存。"
    assert cats["decision"].source_message_ids == (msgs[1].id,)
    assert cats["constraint"].content == "项目必须在五月底之前上线。"
    assert cats["error_fix"].kind == "error"
    assert cats["error_fix"].source_message_ids == (msgs[3].id, msgs[4].id)
    assert cats["remember"].importance >= 0.85
    assert mems.search("缓存方案", user="li")[0].id == cats["decision"].id
    mem.close()


@pytest.mark.parametrize(("english", "chinese"), [
    ("I work at Acme as a data engineer.", "我在字节跳动上班，做数据工程。"),
    ("My sister works in Berlin now.", "我的妹妹叫小美，她在北京工作。"),
    ("I am allergic to peanuts and shellfish.", "我对花生和海鲜过敏。"),
    ("I don't eat spicy food at all.", "我不吃辣的东西，一点都不行。"),
    ("The release must ship before Friday.", "永远不要在周五部署生产环境。"),
    # short Chinese facts: four characters say as much as an English sentence
    ("My name is Li Ming.", "我叫李明"),
    ("My name is Mei.", "我叫小美。"),
    ("I am a doctor.", "我是医生"),
    ("I am a teacher.", "我是一名老师。"),
    ("I am allergic to peanuts.", "我对花生过敏"),
    ("I don't eat coriander.", "我不吃香菜"),
    ("Call me Ann.", "我叫安妮。"),
    ("I work on the payments team.", "我在支付团队上班。"),
    ("My wife is a nurse.", "我的妻子是护士。"),
])
def test_rules_find_the_same_durable_facts_in_english_and_chinese(english: str, chinese: str) -> None:
    from lossless.longterm.extract import extract

    at = datetime(2024, 1, 1, tzinfo=UTC)
    for text in (english, chinese):
        found = extract([Message("m1", "c", 1, "user", text, at, 10)])
        assert [c.content for c in found] == [text], text


@pytest.mark.parametrize("text", [
    # a sentence that only starts like a fact is not a memory
    "我在想这个问题怎么办才好呢", "我们在公园里散步了很久", "我的电脑在重启，等一下", "春天到了，很多人花粉过敏",
    # chit-chat a tester found stored as facts about the user
    "我是开玩笑的。",  # I was joking
    "我是说我们明天去公园吧。",  # I mean, let's go to the park tomorrow
    "我叫了外卖。",  # I ordered takeout (叫 as "order", not "my name is")
    "我的天是真的好热。",  # my god it's hot
    "我在想要不要去上班。",  # I'm wondering whether to go to work
    "我的咖啡是冷的。",  # my coffee is cold: a state of the moment
    "我住在酒店里两天。",  # a stay, not a home
    "如果我是你，我会去的。", "我是认真的。", "我叫他过来一下。", "我在找工作呢。", "我的意思是明天再说。",
    "I was joking.", "I mean, let's go to the park tomorrow.", "I ordered takeout.",
    # English chatter that starts like a fact (each one was stored as a personal fact)
    "I'm a bit tired today.", "I am a little confused by this.", "Call me when you get home.",
    "My question is whether it works.", "My guess is the cache is stale.", "My code is broken again.",
    "My head is spinning.", "My internet is slow today.", "I live in hope.", "I work on it tomorrow maybe.",
    "My understanding is that it's fine.", "I'm a total mess today.",
    "好的。", "出错了。",  # too short to carry anything durable
])
def test_chit_chat_is_not_a_fact_about_the_user(text: str) -> None:
    from lossless.longterm.extract import extract

    assert extract([Message("m1", "c", 1, "user", text, datetime(2024, 1, 1, tzinfo=UTC), 10)]) == []


@pytest.mark.parametrize(("said", "reply"), [
    ("我对花生过敏。", "好的，我记住了。"),
    ("I am allergic to peanuts.", "Sure, I'll remember that."),
    ("我对花生过敏。", "好的，我会记住你对花生过敏，推荐餐厅时会注意。"),
    ("I am allergic to peanuts.", "Got it, I will always remember that you are allergic to peanuts."),
])
def test_an_assistant_acknowledgement_is_not_a_fact(said: str, reply: str) -> None:
    """The assistant saying it will remember is not itself a fact, and the facts about the
    user come from what the user said (a tester's "好的，我会记住你对花生过敏…" became the
    user's top fact at 0.85)."""
    from lossless.longterm.extract import extract

    at = datetime(2024, 1, 1, tzinfo=UTC)
    found = extract([Message("m1", "c", 1, "user", said, at, 10), Message("m2", "c", 2, "assistant", reply, at, 10)])
    assert [(c.kind, c.content, c.source_message_ids) for c in found] == [("fact", said, ("m1",))]


@pytest.mark.parametrize(("text", "remembered"), [
    ("记住：生产环境的端口是8443。", True),
    ("帮我记住：周五交报告。", True),
    ("Remember that my staging server is staging-7.internal.", True),
    ("I want you to remember that the office closes at six.", True),
    ("好的，我记住了。", False),  # the speaker's own "I'll remember", not a request
    ("I remember when we met in Paris last spring.", False),
])
def test_only_a_request_to_remember_is_a_remember_fact(text: str, remembered: bool) -> None:
    from lossless.longterm.extract import extract

    at = datetime(2024, 1, 1, tzinfo=UTC)
    found = extract([Message("m1", "c", 1, "user", text, at, 10)])
    assert [c.metadata["category"] for c in found] == (["remember"] if remembered else [])
    # the same words from the assistant are never a request to remember
    assert extract([Message("m2", "c", 2, "assistant", text, at, 10)]) == []


def test_distill_with_a_summarizer_parses_its_json(store_target: StoreTarget, tmp_path: Path) -> None:
    mem, mems = _open(store_target("l"))
    msgs = _english(mem)
    fake = FakeSummarizer()
    fake.enqueue("```json\n" + json.dumps([
        {"kind": "preference", "content": "Maya wants short answers with code.", "importance": 0.8,
         "source_message_ids": [msgs[0].id, "msg_invented"]},
        {"kind": "fact", "content": "The team moved to PostgreSQL 16."},
        {"kind": "opinion", "content": "skipped: unknown kind"},
        {"kind": "error", "content": ""},
    ]) + "\n```")
    found = mems.distill(msgs, user="maya", summarizer=fake)
    assert [r.content for r in found] == ["Maya wants short answers with code.", "The team moved to PostgreSQL 16."]
    assert found[0].source_message_ids == (msgs[0].id,) and found[0].importance == 0.8
    assert found[1].source_message_ids == tuple(m.id for m in msgs) and found[1].importance == 0.5
    assert found[0].metadata == {"extracted": "llm", "summarizer": "fake"}
    request = fake.calls[0]
    assert request.items[0].role == "system" and "JSON array" in request.items[0].text
    assert [i.ref for i in request.items[1:]] == [m.id for m in msgs]
    mem.close()


@pytest.mark.parametrize("answer", ["Here is a summary of the chat.", "[1, 2", RuntimeError("model down"), "[]"])
def test_distill_falls_back_to_rules_when_the_llm_answer_is_unusable(store_target: StoreTarget, tmp_path: Path, answer: str | Exception) -> None:
    mem, mems = _open(store_target("fb"))
    msgs = _english(mem)
    fake = FakeSummarizer()
    fake.enqueue(answer)
    found = mems.distill(msgs, user="maya", summarizer=fake)
    assert "decision" in _by_category(found)
    assert all(r.metadata["extracted"] == "rules" for r in found)
    mem.close()


# -- migration ----------------------------------------------------------------------------


@pytest.mark.sqlite_only(reason="upgrades a SQLite file written by migration 3")
def test_a_version_3_database_gains_memories(tmp_path: Path) -> None:
    path = tmp_path / "v3.db"
    conn = apsw.Connection(str(path))
    migrations.migrate(conn, upto=3)
    assert migrations.applied(conn) == [1, 2, 3]
    conn.execute("INSERT INTO conversations (id, created_at, updated_at) VALUES ('old', '2024-01-01', '2024-01-01')")
    assert not list(conn.execute("SELECT name FROM sqlite_master WHERE name = 'memories'"))
    conn.close()
    mem, mems = _open(path)
    assert migrations.applied(mem.store.connection) == [m[0] for m in migrations.MIGRATIONS]
    assert [c.id for c in mem.conversations()] == ["old"]
    rec = mems.add("added after the upgrade", user="ann")
    assert mems.search("upgrade", user="ann")[0].id == rec.id
    assert mem.verify() == []
    mem.close()


# -- the CLI ------------------------------------------------------------------------------


def _cli(db: Path, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """A parser with only the memory command (the lead wires it into ``lossless``), run
    through the same error boundary as ``main``."""
    from lossless.cli.options import common_options

    parser = argparse.ArgumentParser(prog="lossless", parents=[common_options(False)])
    memory_cmd.register(parser.add_subparsers(dest="command", required=True))
    capsys.readouterr()
    try:
        args = parser.parse_args(["--db", str(db), *argv])
    except SystemExit as exc:
        return int(exc.code or 0), *capsys.readouterr()
    ctx = CommandContext.create(args)
    try:
        status = int(args.run(ctx))
    except (LosslessError, CommandError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        status = 1
    finally:
        ctx.close()
    out, err = capsys.readouterr()
    return status, out, err


def test_cli_add_search_ls_forget(store_target: StoreTarget, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = store_target("cli")
    status, out, _ = _cli(db, capsys, "memory", "add", "Ann prefers tea over coffee", "--kind", "preference",
                          "--user", "ann", "--json")
    assert status == 0
    added = json.loads(out)
    assert added["kind"] == "preference" and added["scope"] == "user" and added["importance"] == 0.7
    _cli(db, capsys, "memory", "add", "Bob prefers coffee", "--user", "bob", "--importance", "0.2")
    status, out, _ = _cli(db, capsys, "memory", "search", "tea coffee", "--user", "ann", "--json")
    assert status == 0 and [h["id"] for h in json.loads(out)] == [added["id"]]
    assert json.loads(out)[0]["score"] > 0
    status, out, _ = _cli(db, capsys, "memory", "search", "coffee", "--user", "ann")
    assert status == 0 and "Ann prefers tea" in out and "Bob" not in out
    status, out, _ = _cli(db, capsys, "memory", "ls", "--json")
    assert len(json.loads(out)) == 2
    status, out, _ = _cli(db, capsys, "memory", "ls", "--user", "bob")
    assert status == 0 and "Bob prefers coffee" in out and "Ann" not in out
    status, out, _ = _cli(db, capsys, "memory", "forget", "--importance-below", "0.5", "--dry-run", "--json")
    assert json.loads(out)["count"] == 1 and json.loads(out)["dry_run"] is True
    status, out, _ = _cli(db, capsys, "memory", "forget", "--importance-below", "0.5")
    assert status == 0 and "forgot 1 memory" in out
    status, out, _ = _cli(db, capsys, "memory", "forget", "--older-than", "30d", "--json")
    assert json.loads(out)["count"] == 0
    status, out, _ = _cli(db, capsys, "memory", "ls", "--json")
    assert [r["id"] for r in json.loads(out)] == [added["id"]]


def test_cli_errors_and_usage(store_target: StoreTarget, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = store_target("cli")
    if not store_target.on_postgres:  # a PostgreSQL test database exists already
        status, _, err = _cli(db, capsys, "memory", "ls")
        assert status == 1 and "no database" in err  # reading never creates the file
    _cli(db, capsys, "memory", "add", "something")
    status, _, err = _cli(db, capsys, "memory", "forget")
    assert status == 1 and "criterion" in err
    # in the CLI's words: it said "or all=True to forget every memory", the Python API's
    assert "--older-than" in err and "--all to forget every memory" in err and "all=True" not in err
    status, _, err = _cli(db, capsys, "memory", "add", " ", "--user", "ann")
    assert status == 1 and "content" in err
    assert _cli(db, capsys, "memory", "forget", "--older-than", "soon")[0] == 2
    assert _cli(db, capsys, "memory", "add", "x", "--importance", "3")[0] == 2
    assert _cli(db, capsys, "memory", "add", "x", "--kind", "opinion")[0] == 2
    # a mistyped id is named (as restore names it) and the call forgets nothing, the right id neither
    status, out, _ = _cli(db, capsys, "memory", "ls", "--json")
    [kept] = [r["id"] for r in json.loads(out)]
    status, _, err = _cli(db, capsys, "memory", "forget", kept, "mem_nope")
    assert status == 1 and "no memory with id 'mem_nope'" in err and "nothing forgotten" in err
    status, out, _ = _cli(db, capsys, "memory", "ls", "--json")
    assert [r["id"] for r in json.loads(out)] == [kept]
    status, out, _ = _cli(db, capsys, "memory", "forget", "--all", "--keep", "0", "--json")
    assert json.loads(out)["count"] == 1


def test_parse_duration() -> None:
    assert memory_cmd.parse_duration("30d") == timedelta(days=30)
    assert memory_cmd.parse_duration("12h") == timedelta(hours=12)
    assert memory_cmd.parse_duration("2W") == timedelta(weeks=2)
    assert memory_cmd.parse_duration("1.5m") == timedelta(seconds=90)
    with pytest.raises(argparse.ArgumentTypeError):
        memory_cmd.parse_duration("30 days")


def test_vectors_are_float32_unit_length(store_target: StoreTarget, tmp_path: Path) -> None:
    emb = SynonymEmbedder()
    mem, mems = _open(store_target("f32"), emb)
    mems.add("a unit vector please")
    dim, blob = mem.store._query("SELECT dim, vector FROM memory_vectors")[0]
    vec = np.frombuffer(blob, dtype="<f4")
    assert dim == emb.dim == len(vec) and abs(float(np.linalg.norm(vec)) - 1.0) < 1e-5
    mem.close()


@pytest.mark.parametrize("text", ["我叫李明～", "我叫李明~很高兴认识你。", "我叫李明…", "我叫王小明😄",
                                  "我叫李明（木子李）。", "我叫Tom～"])
def test_a_chinese_name_followed_by_a_tilde_an_ellipsis_or_an_emoji_is_a_fact(text: str) -> None:
    """"我叫李明～" is as much the user's name as "我叫李明。": chat writes a name followed by
    ～, …, an emoji or a bracket, and the rule wanted only the punctuation of a clause's end."""
    from lossless.longterm.extract import extract

    found = extract([Message("m1", "c", 1, "user", text, datetime(2024, 1, 1, tzinfo=UTC), 10)])
    assert [(c.kind, c.metadata["category"], c.content) for c in found] == [("fact", "personal", text)]


@pytest.mark.parametrize(("text", "fact"), [
    ("我家住在北京。", True), ("我现在住在杭州。", True), ("我目前住在上海。", True), ("我一直住在深圳。", True),
    ("我现在在腾讯工作。", True), ("我目前在浙江大学读书。", True),
    # a stay and a thought are still not a home or a workplace
    ("我现在住在酒店里。", False), ("我目前住在民宿，住三晚。", False), ("我现在在想要不要去上班。", False),
    # near a hotel or a hospital is still a home
    ("我住在医院附近。", True), ("我住在酒店旁边的小区。", True),
])
def test_a_chinese_home_or_workplace_said_with_now_or_my_family_is_a_fact(text: str, fact: bool) -> None:
    """"我现在住在杭州" and "我家住在北京" say where the user lives as "我住在杭州" does; the
    rules wanted 住在 and 在…工作 right after 我."""
    from lossless.longterm.extract import extract

    found = extract([Message("m1", "c", 1, "user", text, datetime(2024, 1, 1, tzinfo=UTC), 10)])
    assert [(c.metadata["category"], c.content) for c in found] == ([("personal", text)] if fact else [])


@pytest.mark.parametrize(("text", "category"), [
    ("这个API timeout了，查了半天。", "error"),
    ("部署又failed了。", "error"),
    ("出现了ValueError，程序退出。", "error"),
    ("deadline是下周五。", "constraint"),
    ("这个bug已经fixed了。", "fix"),
    # still whole words only: an English cue inside a longer Latin word is none
    ("relationship和prefixes都是英文单词。", None),
])
def test_english_cue_words_in_chinese_text_are_found(text: str, category: str | None) -> None:
    """Chinese developers write English words into Chinese sentences; the English cues
    were matched with \\b, which counts a Chinese character as a word character, so
    "这个API timeout了" (no space before 了) was no error and "deadline是下周五" no constraint."""
    from lossless.longterm.extract import extract
    from lossless.longterm.tasks import task_type

    found = extract([Message("m1", "c", 1, "user", text, datetime(2024, 1, 1, tzinfo=UTC), 10)])
    assert [c.metadata["category"] for c in found] == ([category] if category else [])
    assert task_type("帮我review一下这段代码") == "code_review"
    assert task_type("帮我debug一下登录的问题") == "debugging"


@pytest.mark.parametrize("text", ["你喜欢喝咖啡吗", "你还记得我住在哪里吗", "我们决定了吗～", "你知道我喜欢什么吗。",
                                  "Do you remember where I live?"])
def test_a_chinese_question_without_a_question_mark_is_no_memory(text: str) -> None:
    """Questions are skipped; chat writes a Chinese one with its final 吗 and no "？", and
    "你喜欢喝咖啡吗" was stored as the user's preference, "你还记得我住在哪里吗" as a fact."""
    from lossless.longterm.extract import extract

    assert extract([Message("m1", "c", 1, "user", text, datetime(2024, 1, 1, tzinfo=UTC), 10)]) == []
    # a word with 吗 inside is no question
    said = "我对吗啡过敏。"
    assert [c.content for c in extract([Message("m2", "c", 2, "user", said, datetime(2024, 1, 1, tzinfo=UTC), 10)])] == [said]


@pytest.mark.parametrize("text", ["我叫车去机场。", "我叫醒你。", "我叫他过来。", "我叫外卖。", "我叫人来修。"])
def test_jiao_as_call_for_or_tell_is_not_a_name(text: str) -> None:
    """叫 is also "call for" and "tell to": "我叫车去机场" (I'm calling a cab to the airport)
    was stored as the user's name, as "我叫了外卖" no longer was."""
    from lossless.longterm.extract import extract

    assert extract([Message("m1", "c", 1, "user", text, datetime(2024, 1, 1, tzinfo=UTC), 10)]) == []


@pytest.mark.parametrize(("english", "chinese"), [
    ("My daughter is called Lily.", "我女儿叫小红"),
    ("My daughter is called Lily.", "我女儿叫小红。"),
    ("My son's name is Tom.", "我儿子叫小明。"),
    ("My daughter's name is Lily.", "我女儿的名字叫小红。"),
    ("My mom is a teacher.", "我妈是老师"),
    ("My dad is a doctor.", "我爸是医生。"),
    ("My cat is called Mimi.", "我家猫叫咪咪。"),
    ("I live in Hangzhou.", "我住杭州"),
    ("I live in Hangzhou.", "我住在杭州"),
    ("My hometown is Chengdu.", "我老家在成都。"),
    ("I'm from Chengdu.", "我老家是成都的。"),
    ("I grew up in Chengdu.", "我在成都长大。"),
    ("My surname is Li.", "我姓李"),
    ("My surname is Wang, my given name is Qiang.", "我姓王，叫王强。"),
    ("I have diabetes.", "我有糖尿病"),
    ("I have high blood pressure.", "我有高血压。"),
    ("I have asthma too.", "我也有哮喘。"),
    ("I was diagnosed with heart disease.", "我患有心脏病。"),
    ("I'm lactose intolerant.", "我有乳糖不耐受。"),
    ("I have a peanut allergy.", "我对花生过敏。"),
])
def test_family_home_surname_and_illness_are_facts_in_chinese_as_in_english(english: str, chinese: str) -> None:
    """A new-user pass in Chinese: "我女儿叫小红", "我妈是老师", "我住杭州", "我姓李" (three
    characters: too short to look at) and "我有糖尿病" were no memories, nor was "I have
    diabetes" in English; the rules knew family only after 的 ("我的妻子是护士"), a home only
    as 住在, and illness not at all. Each is the user's fact, said either way."""
    from lossless.longterm.extract import extract

    at = datetime(2024, 1, 1, tzinfo=UTC)
    for text in (english, chinese):
        found = extract([Message("m1", "c", 1, "user", text, at, 10)])
        assert [(c.kind, c.metadata["category"], c.content) for c in found] == [("fact", "personal", text)], text


@pytest.mark.parametrize("text", [
    # a one-off remark or a question said as a statement (each was stored as a fact)
    "我是第一次来", "我是第一次用这个软件。", "我是今天才知道。", "我的问题是怎么部署", "我的需求是怎么部署。",
    "我的想法是先部署再测试。", "我的建议是先重启。", "I'm a first-time visitor.",
    "我住在医院。",  # a stay in hospital, as 我住在酒店 is a stay
    # 叫 as "tell to", an animal's cry, a question (each was stored as a fact)
    "我的妈妈叫我吃饭。", "我家狗叫个不停。", "我的猫叫得很大声。", "我的狗叫什么名字来着",
    # the same shapes the new rules must not take
    "我是来问问题的", "我的意思是这样", "我住院了", "我住院三天。", "我住酒店。", "我住哪比较好",
    "我住北京的时候很开心。", "我有个问题", "我有点累", "我有个朋友有糖尿病。", "我没有糖尿病。", "我有毛病。",
    "我有懒癌。", "我有点感冒。", "我姓名填错了。", "我姓李的同事走了。", "我妈是不是生气了", "我妈叫我回家吃饭。",
    "我爸叫车去机场。", "我女儿是第一次来。", "我老家在哪里", "我老家在装修呢。",
    "My question is how to deploy.", "I have a question.", "I'm here to ask a question.", "I am in hospital.",
    "I have a headache today.", "I have a migraine.", "I have no disease.", "I don't have diabetes.",
    "my sister's friend is moving to Bergen apparently.",
])
def test_one_off_remarks_and_look_alikes_are_not_facts_about_the_user(text: str) -> None:
    """What starts like a fact about the user and is none: "我是第一次来" (this is my first
    visit) and "我的问题是怎么部署" (a question said as a statement) were stored as facts,
    and so was 叫 as "tell to" or a dog's barking after 我的/我家. The new rules for family,
    home and illness are held to the same: 我住院了 is a stay, 我有个问题 no illness."""
    from lossless.longterm.extract import extract

    assert extract([Message("m1", "c", 1, "user", text, datetime(2024, 1, 1, tzinfo=UTC), 10)]) == []
