"""Chinese inside JSON escapes is found by its words. A tool result written with
``json.dumps`` and its default ``ensure_ascii`` holds 杭州 as ``\\u676d\\u5dde``: the
message is stored verbatim, and the text its escapes spell is indexed too (both stores,
the small-conversation scan, and an upgrade of a store written before)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

import lossless
from lossless.store.fts import escaped_text, index_extras
from lossless.store.reindex import indexed_message_text

from .backends import raw_query
from .conftest import StoreTarget

WEATHER = json.dumps({"city": "杭州", "weather": "晴转多云", "note": "西湖边风大 🌬️"})
PLAIN = "Lunch was good; nothing about the weather."


def _turns() -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "帮我查一下天气"},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "c1", "type": "function",
                         "function": {"name": "weather", "arguments": json.dumps({"city": "杭州"})}}]},
        {"role": "tool", "tool_call_id": "c1", "content": WEATHER},
        {"role": "user", "content": PLAIN},
    ]


def _found(conv: lossless.Conversation, query: str) -> set[int]:
    return {h.first_seq for h in conv.search(query, kinds=("message",), limit=20)}


def test_the_escapes_spell_words_and_nothing_else() -> None:
    assert "\\u676d\\u5dde" in WEATHER  # (what json.dumps writes)
    assert escaped_text(WEATHER) == "杭州 晴转多云 西湖边风大 🌬️"
    assert escaped_text("no escapes here, C:\\users\\me") == ""
    assert escaped_text("\\ud83d alone") == ""  # a lone surrogate spells nothing
    assert escaped_text('{"a": "\\u000a\\u0009"}') == ""  # control characters are no word


def test_a_tool_result_in_json_escapes_is_found_by_its_chinese(store_target: StoreTarget) -> None:
    with lossless.open(store_target("esc"), embedder=None, context_window=4096) as mem:
        conv = mem.conversation("c")
        conv.add_many(_turns())
        assert conv.messages()[2].content == WEATHER  # stored verbatim
        assert _found(conv, "杭州") == {2, 3}  # the call's arguments and its result
        assert _found(conv, "晴转多云") == {3}
        assert _found(conv, "西湖") == {3}
        assert 3 in _found(conv, "杭州天气怎么样")
        assert _found(conv, "u676d") == {2, 3}  # the escapes themselves, as before
        assert {h["first_seq"] for h in conv.grep("杭州")["hits"]} == {2, 3}  # the agent's grep


def test_a_small_conversation_read_row_by_row_finds_them_too(store_target: StoreTarget) -> None:
    """SQLite reads a small conversation in a big store row by row (grep._scan)."""
    with lossless.open(store_target("scan"), embedder=None, context_window=4096) as mem:
        mem.conversation("big").add_many([{"role": "user", "content": f"message {i} about lunch"} for i in range(80)])
        conv = mem.conversation("small")
        conv.add_many(_turns())
        assert _found(conv, "杭州") == {2, 3}
        assert _found(conv, "晴转多云") == {3}


def test_recall_brings_the_escaped_result_back(store_target: StoreTarget) -> None:
    with lossless.open(store_target("recall"), embedder=None, context_window=2048, compaction="inline") as mem:
        conv = mem.conversation("c")
        conv.add_many(_turns())
        conv.add_many([{"role": "user" if i % 2 == 0 else "assistant", "content": f"Small talk number {i}."}
                       for i in range(300)])
        ctx = conv.assemble(budget_tokens=1024, query="杭州今天天气怎么样？")
        assert any(i.tier == "recall" and i.first_seq == 3 for i in ctx.items), ctx.items


def test_an_upgrade_indexes_the_escaped_text_written_before(store_target: StoreTarget) -> None:
    target = store_target("up")
    with lossless.open(target, embedder=None, context_window=4096) as mem:
        conv = mem.conversation("c")
        conv.add_many(_turns())
        before = [(m.id, m.content) for m in conv.messages()]
    if store_target.on_postgres:  # as the code before wrote the rows: the escapes only
        raw_query(target, "UPDATE messages SET search = to_tsvector('simple', coalesce(content, '')) "
                          "WHERE search IS NOT NULL")
        raw_query(target, "DELETE FROM schema_migrations WHERE version = 19")
    else:
        import apsw

        conn = apsw.Connection(target)
        with conn:
            for rowid, n, c, j, t in list(conn.execute(
                    "SELECT rowid, name, content, content_is_json, tool_calls FROM messages")):
                text = indexed_message_text(n, c, j, t)
                extra = index_extras(text)
                conn.execute("DELETE FROM messages_fts WHERE rowid = ?", (rowid,))
                conn.execute("INSERT INTO messages_fts (rowid, text) VALUES (?, ?)",
                             (rowid, f"{text}\n{extra}" if extra else text))
            conn.execute("DELETE FROM schema_migrations WHERE version = 19")
        conn.close()
        # written as before: the escapes only, the words they spell are not in the index
        assert raw_query(target, "SELECT rowid FROM messages_fts WHERE messages_fts MATCH '\"晴转\"'") == []
    with lossless.open(target, embedder=None, context_window=4096) as mem:  # the migration runs
        conv = mem.conversation("c")
        assert [(m.id, m.content) for m in conv.messages()] == before
        assert mem.verify() == []
        assert _found(conv, "晴转多云") == {3} and _found(conv, "杭州") == {2, 3}


@settings(max_examples=60, deadline=None)
@given(st.text(min_size=1, max_size=12))
@example("¡\\¡")  # ¡, a backslash, ¡: two escapes apart, not one word "¡¡" (found by this test in CI)
def test_property_escaped_text_is_what_json_would_read(value: str) -> None:
    """Every printable word the escapes of ``json.dumps(value)`` spell is in ``value``."""
    for word in escaped_text(json.dumps(value)).split(" "):
        assert not word or word in value or all(part in value for part in word.split())
