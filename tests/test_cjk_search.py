"""Chinese, Japanese and Korean found by their words (issue 27): CJK runs are indexed as
character bigrams (and each run's last character) on both stores, by one function
(``lossless.store.fts.cjk_index_terms``), and a query's runs become the same bigrams (a
one-character run a prefix term). Most Chinese words are two characters (公园, 电影),
which the trigram index this replaced could not match."""

from __future__ import annotations

import glob
import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lossless
from lossless.store.base import SearchSpec
from lossless.store.fts import (
    cjk_index_line,
    cjk_query_chars,
    cjk_query_terms,
    cjk_search_terms,
    index_extras,
)
from lossless.store.reindex import indexed_message_text

from .backends import raw_query
from .conftest import StoreTarget

T0 = datetime(2024, 5, 1, 20, 0, tzinfo=UTC)

DIARY = [
    "我上周末去了中山公园，看到了很多樱花。",
    "昨天晚上和朋友一起看了一部电影，特别感人。",
    "公司年底的晚会上，我表演了魔术。",
    "今天的天气很好，适合出去散步。",
    "我用Python写了一个爬虫，抓取天气数据。",
    "東京タワーに行きました。とても高かったです。",
    "어제 친구와 학교에 갔어요.",
    "我家的猫很可爱。",
    "我喜欢猫",
    "猫",
    "Unrelated English text about lunch.",
]


def _open(target: str) -> lossless.Memory:
    return lossless.open(target, embedder=None, context_window=4096)


def _found(conv: lossless.Conversation, query: str) -> list[int]:
    return [h.first_seq for h in conv.search(query, kinds=("message",), limit=50)]


@pytest.fixture
def diary(store_target: StoreTarget) -> Any:
    mem = _open(store_target("diary"))
    conv = mem.conversation("diary")
    conv.add_many([{"role": "user", "content": t, "created_at": T0 + timedelta(minutes=i)}
                   for i, t in enumerate(DIARY)])
    yield conv
    mem.close()


@pytest.mark.parametrize(("query", "seq"), [("公园", 1), ("电影", 2), ("晚会", 3), ("我上次跟你说我去了哪个公园？", 1),
                                             ("那部电影叫什么？", 2)])
def test_a_two_character_word_finds_its_message_by_keywords_alone(diary: lossless.Conversation, query: str,
                                                                  seq: int) -> None:
    assert _found(diary, query)[0] == seq


@pytest.mark.parametrize(("query", "seqs"), [
    ("爬虫", {5}), ("python", {5}), ("用Python写", {5}), ("Python 爬虫", {5}),
    ("タワー", {6}), ("東京", {6}), ("高かった", {6}),
    ("학교", {7}), ("친구", {7}),
])
def test_mixed_text_japanese_and_korean(diary: lossless.Conversation, query: str, seqs: set[int]) -> None:
    assert set(_found(diary, query)) == seqs


def test_a_one_character_query_finds_the_character_wherever_it_stands(diary: lossless.Conversation) -> None:
    # inside a run (the start of a bigram), at a run's end (its last character), alone
    assert set(_found(diary, "猫")) == {8, 9, 10}
    assert set(_found(diary, "猫？")) == {8, 9, 10}
    assert set(_found(diary, "樱")) == {1}


def test_recall_brings_back_an_old_chinese_message_by_its_words(store_target: StoreTarget) -> None:
    with _open(store_target("recall")) as mem:
        conv = mem.conversation("c")
        conv.add(role="user", content="我上周末去了中山公园，看到了很多樱花。", created_at=T0)
        conv.add_many([{"role": "user" if i % 2 == 0 else "assistant",
                        "content": f"第{i}天：今天工作很忙，开了三个会，写了很多代码。" if i % 2 == 0 else "嗯，好的。",
                        "created_at": T0 + timedelta(hours=i + 1)} for i in range(120)])
        assert mem.wait_idle(60)
        ctx = conv.assemble(budget_tokens=512, query="我上次跟你说我去了哪个公园？")
        assert any("中山公园" in str(m["content"]) for m in ctx.messages)


# -- one function, the same answers on both stores --------------------------------------------

_ALPHABET = [*"公园电影猫我的了看去学校", "タワー", "학교", "，", "。", " ", "ab", "・"]


def _oracle(texts: list[str], query: str) -> set[int]:
    """The seqs a CJK query must find: those whose text holds one of its terms (a bigram
    lies inside one run, so a substring test is exact; a character anywhere)."""
    terms = cjk_query_terms(query)
    return {i + 1 for i, t in enumerate(texts) if any(term in t for term in terms)}


_texts = st.lists(st.lists(st.sampled_from(_ALPHABET), min_size=1, max_size=8).map("".join), min_size=1, max_size=8)
_queries = st.lists(st.sampled_from([*"公园电影猫我的学校", "タ", "ワー", "학", "。"]), min_size=1,
                    max_size=4).map("".join)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=_texts, query=_queries)
def test_a_cjk_query_finds_exactly_the_messages_holding_its_terms(scratch_store: Callable[[], str],
                                                                  texts: list[str], query: str) -> None:
    """The contract both stores keep (run in each store mode): what is found is what
    holds a query term, so the same query finds the same messages on SQLite and PostgreSQL."""
    with _open(scratch_store()) as mem:
        conv = mem.conversation("c")
        conv.add_many([{"role": "user", "content": t} for t in texts])
        assert set(_found(conv, query)) == _oracle(texts, query)


def test_a_small_conversation_read_row_by_row_finds_the_same(store_target: StoreTarget) -> None:
    """SQLite reads a small conversation in a big store row by row instead of its index
    (grep._scan): the same CJK terms, the same answers."""
    small = ["我去了公园", "看电影", "猫", "我的猫", "学校。公园", "タワー", "학교에"]
    with _open(store_target("scan")) as mem:
        mem.conversation("big").add_many([{"role": "user", "content": f"第{i}条：公园和电影"} for i in range(80)])
        conv = mem.conversation("small")
        conv.add_many([{"role": "user", "content": t} for t in small])
        for query in ("公园", "电影", "猫", "学校", "タワー", "학교", "公园电影", "园"):
            assert set(_found(conv, query)) == _oracle(small, query), query


def test_a_long_question_is_capped() -> None:
    question = "".join(chr(0x4E00 + i) for i in range(5000))
    terms = cjk_query_terms(question)
    assert len(terms) == 256 and terms[0] == question[:2]


def test_the_index_line_keeps_the_text_order_and_repeats() -> None:
    assert cjk_index_line("公园，公园的猫 学校에 ア・イ") == "公园 园 公园 园的 的猫 猫 学校 校에 에 ア イ"
    assert cjk_index_line("plain English") == ""
    assert index_extras("用Python写") == "python"  # the Latin word inside CJK: as before


# -- upgrading a store written before ---------------------------------------------------------

_CJK_MEMORY = "李明喜欢周末去公园跑步"


def _landed(target: str, postgres: bool) -> None:
    """Put a store back as the code before this change wrote it: CJK keyword rows without
    bigrams (SQLite: the text and its Latin extras only, plus the trigram tables; PostgreSQL:
    a search vector without each run's last character), migration 17/18 not applied."""
    if postgres:
        for table in ("messages", "summaries", "memories"):
            raw_query(target, f"UPDATE {table} SET search = to_tsvector('simple', content) "
                              "WHERE search IS NOT NULL")
        raw_query(target, "DELETE FROM schema_migrations WHERE version = 18")
        return
    import apsw

    conn = apsw.Connection(target)
    with conn:
        for base in ("messages", "summaries", "memories"):
            conn.execute(f"CREATE VIRTUAL TABLE {base}_tri USING fts5(text, content='', contentless_delete=1, "
                         "tokenize='trigram')")
        rows = {
            "messages": [(r, indexed_message_text(n, c, j, t)) for r, n, c, j, t in conn.execute(
                "SELECT rowid, name, content, content_is_json, tool_calls FROM messages")],
            "summaries": list(conn.execute("SELECT rowid, content FROM summaries")),
            "memories": list(conn.execute("SELECT rowid, content FROM memories")),
        }
        for base, texts in rows.items():
            for rowid, text in texts:
                extra = index_extras(text)
                conn.execute(f"DELETE FROM {base}_fts WHERE rowid = ?", (rowid,))
                conn.execute(f"INSERT INTO {base}_fts (rowid, text) VALUES (?, ?)",
                             (rowid, f"{text}\n{extra}" if extra else text))
                conn.execute(f"INSERT INTO {base}_tri (rowid, text) VALUES (?, ?)", (rowid, text))
        conn.execute("DELETE FROM schema_migrations WHERE version = 17")
    conn.close()


def test_an_upgrade_indexes_the_cjk_text_written_before(store_target: StoreTarget) -> None:
    target = store_target("up")
    with lossless.open(target, embedder=None, context_window=2048) as mem:
        conv = mem.conversation("c")
        conv.add_many([{"role": "user", "content": t, "created_at": T0 + timedelta(minutes=i)}
                       for i, t in enumerate(DIARY)])
        conv.add_many([{"role": "user", "content": f"第{i}天：今天去学校上课，晚上看书。"} for i in range(60)])
        conv.compact(force=True)
        assert any("学校" in s.content for s in conv.summaries())
        mem.memories.add(_CJK_MEMORY, user="li")
        before = [(m.id, m.content) for m in conv.messages()]
    _landed(target, store_target.on_postgres)
    if not store_target.on_postgres:  # written as before: no bigram, the word is not found
        assert raw_query(target, "SELECT rowid FROM messages_fts WHERE messages_fts MATCH '\"公园\"'") == []
    with lossless.open(target, embedder=None, context_window=2048) as mem:  # the migration runs
        conv = mem.conversation("c")
        assert [(m.id, m.content) for m in conv.messages()] == before
        assert mem.verify() == []
        assert _found(conv, "公园")[0] == 1 and set(_found(conv, "猫")) == {8, 9, 10}
        assert set(_found(conv, "학교")) == {7}
        assert any(h.kind == "summary" for h in conv.search("学校", kinds=("summary",)))
        assert [r.content for r in mem.memories.search("跑步", user="li")] == [_CJK_MEMORY]
    if not store_target.on_postgres:
        tables = {r[0] for r in raw_query(target, "SELECT name FROM sqlite_master WHERE name LIKE '%_tri'")}
        assert tables == {"file_chunks_tri"}  # kept: substrings inside identifiers


@pytest.mark.sqlite_only(reason="a big SQLite store upgraded at open (PostgreSQL's migration reports the same way)")
def test_a_big_upgrade_says_what_it_does(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    target = str(tmp_path / "big.db")
    with lossless.open(target, embedder=None, compaction="deferred") as mem:
        conv = mem.conversation("c")
        for start in range(0, 21_000, 3_000):
            conv.add_many([{"role": "user", "content": f"第{i}条消息：公园" if i % 7 == 0 else f"message {i}"}
                           for i in range(start, start + 3_000)])
    _landed(target, postgres=False)
    with caplog.at_level(logging.WARNING, logger="lossless"), lossless.open(target, embedder=None,
                                                                             compaction="deferred") as mem:
        lines = [r.getMessage() for r in caplog.records if r.name == "lossless"]
        assert any("indexing the CJK text of this store as words" in line and "21,000" in line for line in lines)
        assert any("3,000 rows re-indexed" in line for line in lines)
        assert len(mem.conversation("c").search("公园", limit=5000, kinds=("message",))) == 3_000


# -- erase ---------------------------------------------------------------------------------------

_RARE = "鳏鲵鳜"  # characters no other text of the test holds


@pytest.mark.sqlite_only(reason="reads the SQLite file and its WAL as bytes")
def test_an_erased_chinese_message_leaves_no_bigram_behind(tmp_path: Path) -> None:
    db = str(tmp_path / "e.db")
    with lossless.open(db, embedder=None, context_window=2048) as mem:
        conv = mem.conversation("c")
        conv.add(role="user", content=f"我的密码是{_RARE}，请记住。", created_at=T0)
        conv.add_many([{"role": "user", "content": f"第{i}天：今天去学校上课。"} for i in range(60)])
        assert mem.wait_idle(60)
        assert _found(conv, _RARE[:2]) == [1]
        conv.erase([1], reason="asked to", by="ops")
        assert _found(conv, _RARE[:2]) == [] and _found(conv, _RARE[-1]) == []
        assert mem.verify() == []
    for ch in _RARE:
        found = {Path(f).name: Path(f).read_bytes().count(ch.encode()) for f in sorted(glob.glob(db + "*"))}
        assert not any(found.values()), (ch, found)


# -- full-width forms ----------------------------------------------------------------------------

# A Chinese input method in full-width mode writes Latin letters and digits as their
# full-width forms (ｉＰｈｏｎｅ１５, ２０２４年): the same words, which a search must find
# whichever way either side wrote them, on both stores alike.
_WIDE = [
    "我买了ｉＰｈｏｎｅ１５，花了５９９９元。",
    "I bought an iPhone 15 for 5999 yuan.",
    "会议在２０２４年３月开，地点是Ａ座。",
    "Unrelated text about lunch.",
]


@pytest.mark.parametrize(("query", "seqs"), [
    ("iPhone", {1, 2}), ("ｉＰｈｏｎｅ", {1, 2}), ("IPHONE 15", {1, 2}), ("5999", {1, 2}), ("５９９９", {1, 2}),
    ("2024", {3}), ("２０２４", {3}), ("2024年", {3}), ("３月", {3}),
])
def test_full_width_letters_and_digits_find_their_plain_forms(store_target: StoreTarget, query: str,
                                                              seqs: set[int]) -> None:
    with _open(store_target("wide")) as mem:
        conv = mem.conversation("w")
        conv.add_many([{"role": "user", "content": t, "created_at": T0 + timedelta(minutes=i)}
                       for i, t in enumerate(_WIDE)])
        assert set(_found(conv, query)) == seqs
        mem.memories.add("我的手机是ｉＰｈｏｎｅ１５", user="li")
        assert [r.content for r in mem.memories.search("iphone", user="li")] == ["我的手机是ｉＰｈｏｎｅ１５"]


def test_an_upgrade_indexes_the_full_width_text_written_before(store_target: StoreTarget) -> None:
    target = store_target("wide-up")
    with _open(target) as mem:
        conv = mem.conversation("w")
        conv.add_many([{"role": "user", "content": t, "created_at": T0 + timedelta(minutes=i)}
                       for i, t in enumerate(_WIDE)])
        before = [(m.id, m.content) for m in conv.messages()]
    if not store_target.on_postgres:  # as the code before wrote the rows: no plain forms
        import apsw

        conn = apsw.Connection(target)
        with conn:
            for rowid, text in list(conn.execute("SELECT rowid, content FROM messages")):
                lines = [text, index_extras(text), cjk_index_line(text)]
                conn.execute("DELETE FROM messages_fts WHERE rowid = ?", (rowid,))
                conn.execute("INSERT INTO messages_fts (rowid, text) VALUES (?, ?)",
                             (rowid, "\n".join(line for line in lines if line)))
            conn.execute("DELETE FROM schema_migrations WHERE version = 18")
        conn.close()
        assert raw_query(target, "SELECT rowid FROM messages_fts WHERE messages_fts MATCH '\"5999\"'") == [(2,)]
    with _open(target) as mem:  # the migration runs (SQLite; PostgreSQL's index folded them already)
        conv = mem.conversation("w")
        assert [(m.id, m.content) for m in conv.messages()] == before
        assert mem.verify() == []
        assert set(_found(conv, "5999")) == {1, 2} and set(_found(conv, "iphone")) == {1, 2}


@pytest.mark.parametrize(("memory", "query"), [("我用Python写了一个爬虫", "python"), ("我的手机是iPhone15", "iphone"),
                                               ("我的手机是iPhone15", "iPhone 15"), ("会议定在2024年3月", "2024")])
def test_a_memory_is_found_by_a_latin_word_inside_its_chinese(store_target: StoreTarget, memory: str,
                                                            query: str) -> None:
    """The index found 用Python写's python, but the memory's ranking read the text's words
    as whitespace runs (我用python写了一个爬虫 is one), shared none with the question and
    dropped the memory."""
    with _open(store_target("mem-latin")) as mem:
        mem.memories.add(memory, user="li")
        mem.memories.add("今天天气很好，我们去公园散步。", user="li")
        assert [r.content for r in mem.memories.search(query, user="li")] == [memory]


# -- recall also matches a question's Han characters one by one ---------------------------------

def test_recall_finds_a_memory_sharing_characters_but_no_word_with_the_question(store_target: StoreTarget) -> None:
    """「小花」 in the question, 「鲜花」 in the memory: no bigram in common, the character
    花 is. Recall searches the question's uncommon Han characters too (ranked under its
    words), by keywords alone, on both stores."""
    with _open(store_target("chars")) as mem:
        conv = mem.conversation("c")
        memory = conv.add(role="user", content="生日派对上朋友送了我一大束鲜花。", created_at=T0)
        conv.add_many([{"role": "user" if i % 2 == 0 else "assistant",
                        "content": f"第{i}天：今天工作很忙，开了三个会，写了很多代码。" if i % 2 == 0 else "嗯，好的。",
                        "created_at": T0 + timedelta(hours=i + 1)} for i in range(120)])
        assert mem.wait_idle(60)
        ctx = conv.assemble(budget_tokens=512, query="你看我衣服上的小花好看吗？")
        assert any(item.tier == "recall" and item.ref == memory.id for item in ctx.items)
        # a search for the word finds the word: 小花 is in no message
        assert _found(conv, "小花") == []


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=_texts, query=_queries)
def test_with_characters_a_query_finds_exactly_the_messages_holding_a_term_or_character(
        scratch_store: Callable[[], str], texts: list[str], query: str) -> None:
    """With ``cjk_chars`` (what recall asks) a query also finds the messages holding one of
    its Han characters outside :data:`COMMON_HAN`, and no other: the same on both stores."""
    terms = cjk_query_terms(query) + cjk_query_chars(query)
    oracle = {i + 1 for i, t in enumerate(texts) if any(term in t for term in terms)}
    with _open(scratch_store()) as mem:
        conv = mem.conversation("c")
        conv.add_many([{"role": "user", "content": t} for t in texts])
        spec = SearchSpec(query=query, conversation_ids=("c",), kinds=("message",), limit=50, cjk_chars=True)
        assert {h.first_seq for h in mem.recaller.store.search(spec)} == oracle


def test_common_characters_and_kana_are_not_searched_alone() -> None:
    assert cjk_query_chars("我的小花好看吗？タワー학교") == ["花"]
    assert cjk_search_terms("花园", chars=True) == ["花园", "花", "园"]
    assert cjk_search_terms("花", chars=True) == ["花"]  # a one-character run is a term once
