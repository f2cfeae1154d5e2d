"""An erase leaves nothing of the erased text in the database files (issue 30, attacker 3):
not in a page's free space, a free page, a full-text index segment or the WAL (SQLite), nor
in a table or index file after ``vacuum=True`` (PostgreSQL) — and the erased message keeps
no name and no metadata, so export and describe show only the tombstone's who, when and why.

The files are read as bytes, as an attacker holding a copy of them would."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import apsw
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lossless
from lossless.core.erasure import ERASED, erased_hash
from lossless.longterm.forgetting import ForgetPolicy
from lossless.store.fts import index_text
from lossless.testing import HashEmbedder
from tests.conftest import StoreTarget, chat

ROOT = Path(__file__).resolve().parent.parent
MARK = "zqxjvmarker"  # in no word list, no tokenizer's vocabulary as a whole
T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)


def _bytes_in_files(db: str, needle: str) -> dict[str, int]:
    """How often ``needle`` occurs in the database file and its -wal and -shm."""
    return {Path(f).name: Path(f).read_bytes().count(needle.encode()) for f in sorted(glob.glob(db + "*"))}


def _fill(mem: lossless.Memory, marker: str = MARK) -> lossless.Conversation:
    """A conversation whose message #31 carries the marker in its text, name and metadata,
    compacted (summaries quote it), cut into units and embedded, and distilled into a
    long-term memory, one of which the forgetting policy then logged."""
    conv = mem.conversation("c", {"user": "ann"})
    conv.add_many(chat(30))
    conv.add(role="user", content=f"Important: we decided the deploy key is {marker}77 and it must never change. "
                                   "The deadline is 2025-06-01.",
             name=f"ann{marker}", metadata={"note": f"{marker}meta"}, created_at=T0)
    conv.add_many(chat(40))
    assert mem.wait_idle(120)
    conv.end()
    assert any(marker in r.content for r in mem.memories.ls(limit=100))
    mem.memories.apply_policy(ForgetPolicy(importance_floor=0.99))  # logs what it forgets, text included
    return conv


@pytest.mark.sqlite_only(reason="reads the SQLite file and its WAL as bytes")
def test_erased_text_is_nowhere_in_the_database_files(tmp_path: Path) -> None:
    db = str(tmp_path / "e.db")
    with lossless.open(db, embedder=HashEmbedder(), context_window=2048) as mem:
        conv = _fill(mem)
        assert sum(_bytes_in_files(db, MARK).values()) > 0  # it is there to be found
        assert any(MARK in s.content for s in conv.summaries())
        [target] = [m for m in conv.messages() if MARK in str(m.content)]
        [stone] = conv.erase([target.seq], reason="GDPR request 17", by="dpo")
        # at once, with the store still open: the WAL was checkpointed and truncated
        assert _bytes_in_files(db, MARK) == {Path(f).name: 0 for f in sorted(glob.glob(db + "*"))}
        assert not any(MARK in s.content for s in conv.summaries())
        assert mem.verify() == []
        assert conv.grep(MARK)["hits"] == [] and conv.grep(f"ann{MARK}")["hits"] == []
    assert not any(_bytes_in_files(db, MARK).values())
    assert not any(_bytes_in_files(db, "zqxjv").values())  # no prefix of it in an index either
    with lossless.open(db, embedder=None) as mem:
        erased = mem.conversation("c").messages()[target.seq - 1]
        assert (erased.content, erased.name, erased.metadata) == (ERASED, None, {})
        assert mem.conversation("c").tombstones() == [stone]


def test_an_erased_message_shows_no_name_or_metadata(store_target: StoreTarget, tmp_path: Path) -> None:
    db = store_target("shown")
    with lossless.open(db, embedder=None) as mem:
        conv = mem.conversation("c")
        conv.add(role="user", content="my number is 0176 5550123", name="Ann Example",
                 metadata={"phone": "0176 5550123", "source": "crm"})
        conv.add(role="assistant", content="Noted.")
        [stone] = conv.erase([1], reason="asked to", by="ops")
        message_id = stone.message_id
        assert mem.verify() == []
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOSSLESS_")}
    env.update(PYTHONPATH=str(ROOT / "src"), LOSSLESS_EMBEDDER="none", LOSSLESS_HOME=str(tmp_path))

    def cli(*args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "lossless", "--db", db, *args], capture_output=True, text=True,
                              env=env, timeout=120, stdin=subprocess.DEVNULL)
        assert done.returncode == 0, done.stderr
        return done.stdout

    exported = [json.loads(line) for line in cli("export", "c").splitlines()]
    assert exported[0] == {"conversation": "c", "role": "user", "content": ERASED,
                           "created_at": exported[0]["created_at"]}
    described = json.loads(cli("--json", "describe", message_id))
    assert described["name"] is None and described["metadata"] == {} and described["preview"] == ERASED
    everything = cli("--json", "export", "c", "--format", "json") + cli("describe", message_id)
    assert "Ann Example" not in everything and "5550123" not in everything and "crm" not in everything
    listed = json.loads(cli("--json", "erase", "c", "--list"))
    assert [(t["erased_by"], t["reason"]) for t in listed] == [("ops", "asked to")]


def _as_erased_before(db: str, on_postgres: bool, message_id: str, name: str, metadata: dict[str, Any]) -> None:
    """Put a message back as an erase before the name-clearing step left it (its name,
    metadata and the tombstone's hash over the name), and that step as not applied."""
    meta = json.dumps(metadata)
    if on_postgres:
        import psycopg

        with psycopg.connect(db, autocommit=True) as conn:
            role, calls_id = conn.execute("SELECT role, tool_call_id FROM messages WHERE id = %s",
                                          (message_id,)).fetchone()
            old = erased_hash(role, name, [], calls_id)
            conn.execute("ALTER TABLE messages DISABLE TRIGGER messages_immutable")
            conn.execute("ALTER TABLE tombstones DISABLE TRIGGER tombstones_immutable")
            conn.execute("UPDATE messages SET name = %s, metadata = %s, content_hash = %s, "
                         "search = to_tsvector('simple', %s) WHERE id = %s", (name, meta, old, f"{name}: {ERASED}",
                                                                               message_id))
            conn.execute("UPDATE tombstones SET content_hash = %s WHERE message_id = %s", (old, message_id))
            conn.execute("ALTER TABLE messages ENABLE TRIGGER messages_immutable")
            conn.execute("ALTER TABLE tombstones ENABLE TRIGGER tombstones_immutable")
            conn.execute("DELETE FROM schema_migrations WHERE version = 17")
        return
    conn = apsw.Connection(db)
    rowid, role, calls_id = next(conn.execute("SELECT rowid, role, tool_call_id FROM messages WHERE id = ?",
                                              (message_id,)))
    old = erased_hash(role, name, [], calls_id)
    with conn:
        conn.execute("DROP TRIGGER messages_immutable")
        conn.execute("DROP TRIGGER tombstones_no_update")
        conn.execute("UPDATE messages SET name = ?, metadata = ?, content_hash = ? WHERE rowid = ?",
                     (name, meta, old, rowid))
        conn.execute("UPDATE tombstones SET content_hash = ? WHERE message_id = ?", (old, message_id))
        conn.execute("DELETE FROM messages_fts WHERE rowid = ?", (rowid,))
        conn.execute("INSERT INTO messages_fts (rowid, text) VALUES (?, ?)", (rowid, index_text(f"{name}: {ERASED}")))
        # the step drops these two to replace them
        conn.execute("CREATE TRIGGER messages_immutable BEFORE DELETE ON messages BEGIN SELECT 1; END")
        conn.execute("CREATE TRIGGER tombstones_no_update BEFORE DELETE ON tombstones BEGIN SELECT 1; END")
        conn.execute("DELETE FROM schema_migrations WHERE version = 16")
    conn.close()


def test_the_upgrade_clears_messages_erased_before(store_target: StoreTarget) -> None:
    db = store_target("upgrade")
    with lossless.open(db, embedder=None) as mem:
        conv = mem.conversation("c")
        conv.add_many([{"role": "user", "content": "call me on 0176 5550123"}, {"role": "assistant", "content": "ok"}])
        [stone] = conv.erase([1], reason="asked to", by="ops")
    _as_erased_before(db, store_target.on_postgres, stone.message_id, "Kowalczyk", {"phone": "5550123"})
    with lossless.open(db, embedder=None) as mem:  # the migration runs
        conv = mem.conversation("c")
        first = conv.messages()[0]
        assert (first.content, first.name, first.metadata) == (ERASED, None, {})
        assert mem.verify() == []  # the tombstone's hash follows the message's
        assert conv.grep("Kowalczyk")["hits"] == []
        # the trigger still refuses any other change, and a name back in
        with pytest.raises(Exception, match="immutable"):  # the driver's error: a trigger refused it
            mem.store.query("UPDATE messages SET name = 'x' WHERE id = ?" if not store_target.on_postgres
                            else "UPDATE messages SET name = 'x' WHERE id = %s", (first.id,))
        conv.add(role="user", content="and a new one")
        conv.erase([3], reason="again", by="ops")
        assert mem.verify() == []


@pytest.mark.sqlite_only(reason="emulates a SQLite file written without secure_delete")
def test_vacuum_clears_what_a_file_written_before_secure_delete_kept(tmp_path: Path) -> None:
    db = str(tmp_path / "old.db")
    with lossless.open(db, embedder=None, compaction="deferred") as mem:
        mem.store.query("PRAGMA secure_delete = OFF")  # as lossless ran before it cleared freed space
        conv = mem.conversation("c")
        conv.add_many([{"role": "user", "content": f"first {MARK}one"}, *chat(6),
                       {"role": "user", "content": f"second {MARK}two"}, *chat(6)])
        conv.erase([1], reason="one", by="ops")
        assert _bytes_in_files(db, f"{MARK}one")[Path(db).name] > 0  # left in a page's free space
        conv.erase([8], reason="two", by="ops", vacuum=True)
    found = _bytes_in_files(db, MARK)
    assert not any(found.values()), found
    with lossless.open(db, embedder=None) as mem:
        assert mem.verify() == [] and len(mem.conversation("c").messages()) == 14


@pytest.mark.sqlite_only(reason="reads the SQLite file as bytes")
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(erased=st.sets(st.integers(min_value=0, max_value=11), min_size=1, max_size=6))
def test_erasing_any_messages_leaves_exactly_the_others_text(tmp_path_factory: pytest.TempPathFactory,
                                                            erased: set[int]) -> None:
    db = str(tmp_path_factory.mktemp("any") / "p.db")
    markers = [f"qv{i:02d}xmark" for i in range(12)]
    with lossless.open(db, embedder=None, context_window=1024) as mem:
        conv = mem.conversation("c")
        conv.add_many([{"role": "user" if i % 2 == 0 else "assistant", "created_at": T0 + timedelta(minutes=i),
                        "content": f"note {m} about the depot " + "and more words " * 20}
                       for i, m in enumerate(markers)])
        assert mem.wait_idle(60)
        conv.erase([i + 1 for i in sorted(erased)], reason="property", by="test")
        assert mem.verify() == []
    for i, m in enumerate(markers):
        found = sum(_bytes_in_files(db, m).values())
        assert (found == 0) if i in erased else (found > 0), (m, found)


@pytest.mark.postgres
def test_vacuum_on_postgres_leaves_nothing_in_the_table_and_index_files(store_target: StoreTarget) -> None:
    import psycopg

    db = store_target("pgfiles")
    with psycopg.connect(db, autocommit=True) as conn:
        try:
            data = Path(conn.execute("SELECT current_setting('data_directory')").fetchone()[0])
        except psycopg.Error:
            pytest.skip("the server's data directory is not readable here")
    if not data.is_dir():
        pytest.skip("the server's files are not on this machine")
    with lossless.open(db, embedder=HashEmbedder(), context_window=2048) as mem:
        conv = _fill(mem)
        [target] = [m for m in conv.messages() if MARK in str(m.content)]
        conv.erase([target.seq], reason="GDPR request 17", by="dpo", vacuum=True)
        assert mem.verify() == []
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("CHECKPOINT")  # what the server holds in memory, on disk
        files = [path for (path,) in conn.execute(
            "SELECT pg_relation_filepath(c.oid) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = current_schema() AND pg_relation_filepath(c.oid) IS NOT NULL")]
    assert len(files) > 20
    found = {f: n for path in files for f in glob.glob(str(data / path) + "*")
             if (n := Path(f).read_bytes().count(MARK.encode()))}
    assert not found, found
