"""The hot-path statements use indexes: proven with EXPLAIN QUERY PLAN, so a schema or
query change that falls back to scanning a table fails here, not in production."""

from __future__ import annotations

from pathlib import Path

import pytest

import lossless
from tests.conftest import chat

pytestmark = pytest.mark.sqlite_only(reason="SQLite's EXPLAIN QUERY PLAN")

HOT = {
    "get_messages": ("SELECT * FROM messages WHERE conversation_id = ? AND seq BETWEEN ? AND ? ORDER BY seq",
                     ("c", 1, 10)),
    "get_message": ("SELECT * FROM messages WHERE id = ?", ("msg_x",)),
    "token_sum": ("SELECT coalesce(sum(token_count), 0) FROM messages WHERE conversation_id = ? AND seq BETWEEN ? AND ?",
                  ("c", 1, 10)),
    "first_message_ts": ("SELECT min(created_ts) FROM messages WHERE conversation_id = ?", ("c",)),
    "role_counts": ("SELECT role, count(*) FROM messages WHERE conversation_id = ? AND seq BETWEEN ? AND ? GROUP BY role",
                    ("c", 1, 10)),
    "last_seq": ("SELECT last_seq FROM conversations WHERE id = ?", ("c",)),
    "frontier": ("SELECT * FROM summaries WHERE conversation_id = ? AND parent_id IS NULL ORDER BY first_seq", ("c",)),
    "leaf_for": ("SELECT * FROM summaries WHERE conversation_id = ? AND depth = 0 AND first_seq <= ? AND last_seq >= ? "
                 "LIMIT 1", ("c", 5, 5)),
    "get_summary": ("SELECT * FROM summaries WHERE id = ?", ("sum_x",)),
    "summary_sources": ("SELECT source_kind, source_id FROM summary_sources WHERE summary_id = ? ORDER BY ord", ("sum_x",)),
    "parent_of_source": ("SELECT summary_id FROM summary_sources WHERE source_id = ?", ("msg_x",)),
    "compaction_log": ("SELECT * FROM compaction_log WHERE conversation_id = ? ORDER BY started_ts DESC LIMIT 1", ("c",)),
    "external_id": ("SELECT id FROM messages WHERE conversation_id = ? AND external_id = ?", ("c", "e1")),
    "recall_units": ("SELECT rowid FROM recall_units WHERE conversation_id = ? AND rowid > ? ORDER BY rowid LIMIT 10",
                     ("c", 0)),
}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> lossless.Memory:
    mem = lossless.open(tmp_path_factory.mktemp("plans") / "p.db", embedder=None, context_window=2048)
    conv = mem.conversation("c")
    conv.add_many(chat(200, words=20, tools_every=4))
    mem.store.connection.execute("ANALYZE")
    return mem


@pytest.mark.parametrize("name", sorted(HOT))
def test_hot_statement_uses_an_index(store: lossless.Memory, name: str) -> None:
    sql, args = HOT[name]
    plan = " | ".join(row[3] for row in store.store.connection.execute(f"EXPLAIN QUERY PLAN {sql}", args))
    assert "USING" in plan and ("INDEX" in plan or "PRIMARY KEY" in plan), f"{name}: {plan}"
    for table in ("messages", "summaries", "summary_sources", "conversations", "compaction_log", "recall_units"):
        assert f"SCAN {table}" not in plan.replace(f"SCAN {table} USING", ""), f"{name} scans {table}: {plan}"


def test_a_leaf_reads_its_messages_by_id(tmp_path: Path) -> None:
    """Writing a leaf looks its messages up by id. By the (conversation_id, seq) index
    instead, SQLite walked every message of the conversation for each leaf, so the cost
    of compaction grew with the length of the history."""
    mem = lossless.open(tmp_path / "leaf.db", embedder=None, context_window=2048)
    conv = mem.conversation("c")
    conv.add_many(chat(200, words=20), compact=False)
    conn = mem.store.connection  # no ANALYZE: a store does not run it, and with it SQLite guesses right
    seen: list[tuple[str, tuple[object, ...]]] = []

    def trace(cursor: object, sql: str, bindings: object) -> bool:
        if "FROM messages" in sql and " IN (" in sql:
            seen.append((sql, tuple(bindings) if isinstance(bindings, list | tuple) else ()))
        return True

    conn.exec_trace = trace
    try:
        assert conv.compact().leaves
    finally:
        conn.exec_trace = None
    assert seen, "no leaf source lookup was traced"
    for sql, args in seen:
        plan = " | ".join(row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", args))
        assert "(id=?)" in plan, plan
    mem.close()
