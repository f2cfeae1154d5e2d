"""The store: migrations (SQLite; PostgreSQL's are in test_postgres.py), and search, isolation,
integrity and settings on both backends (``store_backend`` / ``backend_target``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import apsw
import pytest

import lossless
from lossless.core.errors import MigrationError
from lossless.store.sqlite import migrations
from lossless.store.sqlite.store import SQLiteStore

from .backends import tamper
from .conftest import T0, StoreTarget, chat

# PostgreSQL's migrations are tested in test_postgres.py
SQLITE_MIGRATIONS = pytest.mark.sqlite_only(reason="migrations of a SQLite file")


@SQLITE_MIGRATIONS
def test_blank_database_gets_every_migration(db_path: Path) -> None:
    store = SQLiteStore(db_path)
    assert migrations.applied(store.connection) == [m[0] for m in migrations.MIGRATIONS]
    assert migrations.pending(store.connection) == []
    mode = store.connection.execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"
    store.close()


@pytest.mark.parametrize("version", [0, *[m[0] for m in migrations.MIGRATIONS]])
@SQLITE_MIGRATIONS
def test_upgrade_from_every_earlier_version(db_path: Path, version: int) -> None:
    conn = apsw.Connection(str(db_path))
    migrations.migrate(conn, upto=version)
    assert migrations.applied(conn) == [m[0] for m in migrations.MIGRATIONS if m[0] <= version]
    conn.close()
    mem = lossless.open(db_path)
    mem.conversation("c").add(role="user", content="after upgrade")
    assert migrations.pending(mem.store.connection) == []  # type: ignore[attr-defined]
    assert mem.verify() == []


@SQLITE_MIGRATIONS
def test_newer_schema_is_refused(db_path: Path) -> None:
    lossless.open(db_path).close()
    conn = apsw.Connection(str(db_path))
    conn.execute("INSERT INTO schema_migrations VALUES (9999, 'future', '2030-01-01')")
    conn.close()
    with pytest.raises(MigrationError, match="newer"):
        lossless.open(db_path)


def test_chinese_and_japanese_text_is_found(store_backend: lossless.Memory) -> None:
    conv = store_backend.conversation("cjk")
    conv.add(role="user", content="我们决定把数据库迁移到新的服务器上，端口是5433。")
    conv.add(role="assistant", content="了解しました。データベースの移行は来週です。")
    conv.add(role="user", content="Unrelated English text about lunch.")
    assert conv.search("数据库迁移")[0].first_seq == 1
    assert conv.search("迁移")[0].first_seq == 1  # two characters: below trigram size
    assert conv.search("データベース")[0].first_seq == 2
    assert conv.search("lunch")[0].first_seq == 3


def test_search_filters_and_isolation(store_backend: lossless.Memory) -> None:
    a = store_backend.conversation("alice")
    b = store_backend.conversation("bob")
    a.add_many(chat(10))
    b.add(role="user", content="Turn 0: bob's secret service-0 plans", created_at=T0)
    hits = a.search("service-0")
    assert hits and all(h.conversation_id == "alice" for h in hits)
    assert {h.conversation_id for h in store_backend.search("service-0")} == {"alice", "bob"}
    only_user = a.search("service", roles=("user",))
    assert only_user and all(h.role == "user" for h in only_user)
    late = a.search("service", since=T0 + timedelta(minutes=5))
    assert late and all(h.created_at >= T0 + timedelta(minutes=5) for h in late)
    recent = a.search("service", sort="recency", kinds=("message",))
    assert [h.first_seq for h in recent] == sorted((h.first_seq for h in recent), reverse=True)
    assert a.search(r"port 50\d[02468]\b", mode="regex")


def test_messages_survive_reopen_byte_for_byte(backend_target: str) -> None:
    text = "exact  spacing\ttabs\nnewlines 🚀 数据 \u200b zero-width"
    parts = [{"type": "text", "text": "part one"}, {"type": "image_url", "image_url": {"url": "http://x/y.png"}}]
    with lossless.open(backend_target) as mem:
        conv = mem.conversation("exact")
        conv.add(role="user", content=text, created_at=datetime(2024, 1, 2, 3, 4, 5, 678901, tzinfo=UTC),
                 metadata={"k": [1, 2]})
        conv.add(role="user", content=parts)
    with lossless.open(backend_target) as mem:
        got = mem.conversation("exact").messages()
        assert got[0].content == text
        assert got[0].created_at == datetime(2024, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
        assert got[0].metadata == {"k": [1, 2]}
        assert got[1].content == parts
        assert mem.verify() == []


def test_verify_detects_tampering(store_target: StoreTarget) -> None:
    with lossless.open(store_target("t")) as mem:
        mem.conversation("t").add(role="user", content="original")
    tamper(store_target("t"), "UPDATE messages SET content = 'tampered'")  # the triggers dropped first
    with lossless.open(store_target("t")) as mem:
        assert any("content hash" in p for p in mem.verify())


def test_second_connection_sees_committed_writes(backend_target: str) -> None:
    one = lossless.open(backend_target)
    two = lossless.open(backend_target)
    one.conversation("shared").add_many(chat(6))
    two.conversation("shared").add(role="user", content="from the second handle")
    assert [m.seq for m in one.conversation("shared").messages()] == list(range(1, 8))
    one.close()
    two.close()


def test_insert_summary_refuses_stale_frontier(store_backend: lossless.Memory) -> None:
    from lossless.core.types import SourceRef
    from lossless.store.base import NewSummary

    conv = store_backend.conversation("stale")
    conv.add_many(chat(6, words=5))
    msgs = conv.messages()
    leaf = NewSummary("stale", 0, "s", 1, (SourceRef("message", msgs[0].id), SourceRef("message", msgs[1].id)), "t")
    assert store_backend.store.insert_summary(leaf) is not None
    assert store_backend.store.insert_summary(leaf) is None  # a re-run is harmless
    gap = NewSummary("stale", 0, "s", 1, (SourceRef("message", msgs[3].id),), "t")
    assert store_backend.store.insert_summary(gap) is None  # would leave #3 uncovered
    assert store_backend.verify() == []


def test_saved_settings_are_database_defaults(backend_target: str) -> None:
    with lossless.open(backend_target, context_window=8192) as mem:
        assert mem.config.context_window == 8192
        mem.save_settings(context_window=8192, fresh_tail_count=12)
    with lossless.open(backend_target) as mem:
        assert (mem.config.context_window, mem.config.fresh_tail_count) == (8192, 12)
    with lossless.open(backend_target, context_window=4096) as mem:
        assert mem.config.context_window == 4096  # an explicit option wins
        with pytest.raises(lossless.ValidationError):
            mem.save_settings(context_window=-1)
    with lossless.open(backend_target) as mem:
        assert mem.config.context_window == 8192


def test_listing_conversations_by_id_prefix_is_a_byte_wise_range(mem: lossless.Memory) -> None:
    """The server's tenants list their conversations with ``id_prefix``: exactly the ids that
    start with it, most recently updated first — not ``@acme0`` (the range's upper bound),
    not ``@acmex/…``, and ``%``/``_`` are not wildcards."""
    ids = ["@acme/a", "@acme/b%", "@acme0", "@acmex/c", "@acm_/d", "@acme/_z", "other"]
    for cid in ids:
        mem.conversation(cid).add("user", f"hello from {cid}")
    listed = mem.store.list_conversations(limit=100, id_prefix="@acme/")
    assert sorted(c.id for c in listed) == ["@acme/_z", "@acme/a", "@acme/b%"]
    newest_first = sorted(listed, key=lambda c: c.id)
    newest_first.sort(key=lambda c: c.updated_at, reverse=True)  # stable: ties stay by id
    assert [c.id for c in listed] == [c.id for c in newest_first]
    assert [c.id for c in mem.store.list_conversations(limit=1, offset=1, id_prefix="@acme/")] == [listed[1].id]
    assert len(mem.store.list_conversations(limit=100)) == len(ids)


def test_messages_are_read_by_id_in_batches(store_backend: lossless.Memory) -> None:
    conv = store_backend.conversation("ids")
    stored = conv.add_many([{"role": "user", "content": f"message {i}"} for i in range(620)])
    wanted = [m.id for m in reversed(stored)] + [stored[0].id, "msg_missing"]  # > one batch, a repeat, a stranger
    got = store_backend.store.messages_by_id(wanted)
    assert set(got) == {m.id for m in stored}
    assert all(got[m.id] == m for m in stored)
    assert store_backend.store.messages_by_id([]) == {}
