"""Tokenization traps in keyword search: possessives (straight and curly), hyphens, numbers
with units, CJK beside Latin. One normaliser (``lossless.store.fts``) makes the index rows
and the queries, so the forms meet on both stores; the migration ``keyword_forms``
rebuilds the rows an older store wrote."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import apsw
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lossless
from lossless.store.fts import (
    cjk_fts_query,
    cjk_index_line,
    compounds,
    fts_terms,
    index_extras,
    index_text,
    quote_fts,
    search_terms,
    term_pattern,
    word_query,
)

from .backends import StoreTarget
from .conftest import T0, chat

# -- the normaliser ------------------------------------------------------------------------


@pytest.mark.parametrize("query", ["What is Caroline's job?", "What is Caroline’s job?", "What is Carolineʼs job?",
                                   "What is CAROLINE'S job?"])
def test_a_possessive_asks_for_the_name(query: str) -> None:
    assert search_terms(query)[:2] == ["caroline", "job"]
    assert fts_terms(query) == ["caroline", "job"]


def test_a_plural_possessive_and_contractions() -> None:
    assert search_terms("James' car") == ["james", "car"]  # not joined across the apostrophe
    assert "it" not in search_terms("it's late")  # "it's" is "it", a stopword
    assert search_terms("don't") == ["don t", "dont"]


@pytest.mark.parametrize(("text", "terms"), [
    ("follow-up", ["follow up", "followup"]),
    ("follow‑up", ["follow up", "followup"]),  # a non-breaking hyphen
    ("follow up", ["follow", "up", "followup"]),
    ("followup", ["followup"]),
    ("5km", ["5 km", "5km"]),
    ("5 km", ["5", "km"]),
    ("3kg", ["3 kg", "3kg"]),
    ("10:30", ["10 30", "1030"]),
    ("v1.2", ["v 1 2", "v12"]),
    ("$40", ["40"]),
    ("$1,000", ["1 000", "1000"]),
    ("用Python写", ["python"]),
    ("Python 3.12版本", ["python", "3 12", "312"]),
])
def test_query_terms(text: str, terms: list[str]) -> None:
    assert search_terms(text) == terms


@pytest.mark.parametrize(("text", "extra"), [
    ("Caroline's job", ""),  # unicode61 already sees "caroline"
    ("a follow-up call", "followup"),  # unicode61 splits at the hyphen itself
    ("I ran 5km", "5 km"),
    ("at 10:30", "1030"),
    ("v1.2", "v 1 2 v12 v 12"),
    ("我用Python写代码", "python"),
    ("Python 3.12版本", "3 12 312"),
    ("plain words only", ""),
])
def test_index_extras(text: str, extra: str) -> None:
    assert index_extras(text) == extra
    grams = cjk_index_line(text)  # CJK bigrams come on a line of their own (test_cjk_search.py)
    assert index_text(text) == "\n".join(line for line in (text, extra, grams) if line)


def test_every_form_finds_every_other() -> None:
    """Each form's query matches each form's index text, as the index would see it (the
    term patterns mirror the index: letters and digits are token edges, CJK is not a
    letter). One way only: "followup" does not find "follow up" written apart (that
    would take indexing every pair of neighbouring words joined)."""
    for group in (["follow-up", "follow up", "followup"], ["5km", "5 km"], ["10:30", "10 30"]):
        for query in group:
            for text in group:
                if (query, text) == ("followup", "follow up"):
                    continue
                doc = index_text(text).lower()
                assert any(term_pattern(t).search(doc) for t in search_terms(query)), (query, text)


_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=60) | st.text(
    st.sampled_from(list("ab5 -'’.:,_用写 Ü\"*()^")), max_size=30)


_TOKENS = re.compile(r"[^\W_]+")


@settings(max_examples=300, deadline=None)
@given(_TEXT)
def test_normalising_is_idempotent(text: str) -> None:
    """A compound's parts are a fixed point of the normaliser, and indexing the indexed
    text again adds no token (as unicode61 splits) it did not have."""
    for parts, *_ in compounds(text):
        assert parts and all(parts)
        assert [p for again, *_ in compounds(" ".join(parts)) for p in again] == parts
    once = index_text(text)
    again, before = set(_TOKENS.findall(index_text(once).lower())), set(_TOKENS.findall(once.lower()))
    assert before <= again
    # the only new tokens: the last character of the bigram line's two-character runs (a
    # CJK run's last character is indexed so that a one-character query finds it)
    assert all(len(t) == 1 and cjk_index_line(t) == t for t in again - before), again - before


_FTS = apsw.Connection(":memory:")
_FTS.execute("CREATE VIRTUAL TABLE t USING fts5(text, content='', contentless_delete=1, "
             "tokenize='unicode61 remove_diacritics 2')")
_FTS.execute("INSERT INTO t (rowid, text) VALUES (1, 'caroline works follow up 5 km')")


@settings(max_examples=300, deadline=None)
@given(_TEXT)
def test_a_query_from_any_text_is_valid_fts(text: str) -> None:
    for query in (word_query(text), cjk_fts_query(text)):
        if query is not None:
            _FTS.execute("SELECT rowid FROM t WHERE t MATCH ?", (query,)).fetchall()
    for term in search_terms(text):
        term_pattern(term).search(text.lower())
        _FTS.execute("SELECT rowid FROM t WHERE t MATCH ?", (quote_fts(term),)).fetchall()


# -- on the store ------------------------------------------------------------------------------

_CHAT = [
    ("Caroline", "Caroline works at the bakery on Elm Street now."),
    ("Melanie", "Nice! My brother lives in Lisbon these days."),
    ("Caroline", "Caroline’s brother lives in Porto, close to the sea."),
    ("Melanie", "We booked the follow-up appointment for Tuesday."),
    ("Caroline", "I ran 5km this morning and lifted 3kg dumbbells."),
    ("Melanie", "The train leaves at 10:30, platform 4."),
    ("Caroline", "我用Python写了一个脚本。"),
    ("Melanie", "请安装Python 3.12版本。"),
    ("Caroline", "James' guitar was stolen, he paid $40 for a new one."),
    ("Melanie", "The followup email went out yesterday."),
    ("Caroline", "We need to follow up with the landlord."),
]


def _open(target: str) -> lossless.Memory:
    return lossless.open(target, embedder=None, context_window=4096)


def _seqs(conv: Any, query: str) -> set[int]:
    return {h.first_seq for h in conv.search(query, mode="fts", limit=20) if h.kind == "message"}


@pytest.fixture
def talk(store_target: StoreTarget) -> Any:
    mem = _open(store_target("t"))
    conv = mem.conversation("talk")
    # no names on the messages: "caroline" is only where the text says it
    conv.add_many([{"role": "user" if i % 2 == 0 else "assistant", "content": text,
                    "created_at": T0 + timedelta(minutes=i)} for i, (_name, text) in enumerate(_CHAT)])
    yield conv
    mem.close()


@pytest.mark.parametrize(("query", "seq"), [
    ("What is Caroline's job?", 1),
    ("What is Caroline’s job?", 1),
    ("Where does Caroline’s brother live?", 3),
    ("Where does Caroline's brother live?", 3),
    ("How much did James's guitar cost?", 9),
    ("What did James' guitar cost?", 9),
])
def test_possessive_questions_find_the_facts(talk: Any, query: str, seq: int) -> None:
    assert seq in _seqs(talk, query)


@pytest.mark.parametrize(("query", "want"), [
    ("follow-up", {4, 10, 11}),
    ("follow up", {4, 10, 11}),
    ("followup", {4, 10}),  # "follow up" written apart is two words
    ("5 km", {5}),
    ("5km", {5}),
    ("3 kg", {5}),
    ("10:30", {6}),
    ("1030", {6}),
    ("$40", {9}),
    ("Python", {7, 8}),
    ("用Python写", {7, 8}),
    ("Python 3.12", {8}),
    ("3.12版本", {8}),
])
def test_forms_find_each_other(talk: Any, query: str, want: set[int]) -> None:
    assert want <= _seqs(talk, query)


def test_keyword_only_recall_brings_back_a_possessive_fact(store_target: StoreTarget) -> None:
    mem = lossless.open(store_target("r"), embedder=None, context_window=4096, fresh_tail_count=8,
                        compaction="deferred")
    conv = mem.conversation("r")
    conv.add(role="user", name="Caroline", content="I started working at the bakery on Elm Street.", created_at=T0)
    conv.add_many(chat(200, start=T0 + timedelta(hours=1)))
    assert mem.wait_idle(60)
    for query in ("Where does Caroline's job take her?", "Where does Caroline’s job take her?"):
        ctx = conv.assemble(budget_tokens=600, query=query)
        assert "Elm Street" in str(ctx.messages) and ctx.tokens <= 600
    mem.close()


# -- the migration that rebuilds older rows ----------------------------------------------------


@pytest.mark.sqlite_only
def test_sqlite_upgrade_rebuilds_keyword_rows(db_path: Any) -> None:
    from lossless.store.sqlite import migrations

    with _open(str(db_path)) as mem:
        conv = mem.conversation("old")
        conv.add(role="user", name="Mel", content="Booked the follow-up for 10:30 用Python写")
        conv.add(role="user", content="plain text")
        conn = mem.store.connection  # type: ignore[attr-defined]
        # what the write path gave before: the text alone, without its extra forms
        conn.execute("DELETE FROM messages_fts WHERE rowid = 1")
        conn.execute("INSERT INTO messages_fts (rowid, text) VALUES (1, 'Mel: Booked the follow-up for 10:30 用Python写')")
        conn.execute("DELETE FROM schema_migrations WHERE version = 10")
        assert _seqs(conv, "followup") == set() and _seqs(conv, "python") == set()
    with _open(str(db_path)) as mem:
        assert migrations.pending(mem.store.connection) == []  # type: ignore[attr-defined]
        conv = mem.conversation("old")
        for query in ("followup", "1030", "python", "mel", "follow up"):
            assert _seqs(conv, query) == {1}, query
        assert _seqs(conv, "plain") == {2}
        assert mem.verify() == []


@pytest.mark.postgres
def test_postgres_upgrade_rebuilds_search_vectors(pg_url: str) -> None:
    import psycopg

    with _open(pg_url) as mem:
        conv = mem.conversation("old")
        conv.add(role="user", name="Mel", content="Booked the follow-up for 10:30, 5km away")
    with psycopg.connect(pg_url, autocommit=True) as conn:
        # what an older store computed: no extra forms
        conn.execute("UPDATE messages SET search = to_tsvector('simple', content)")
        conn.execute("DELETE FROM schema_migrations WHERE version = 11")
    with _open(pg_url) as mem:
        conv = mem.conversation("old")
        for query in ("followup", "1030", "5 km", "mel"):
            assert _seqs(conv, query) == {1}, query
        assert mem.verify() == []
