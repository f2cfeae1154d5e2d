"""Recall leans toward what the person a question names said (issue 27 item 4,
``lossless.recall.speakers``): among near-equal keyword matches, the named writer's
message comes first; nothing else moves."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lossless
from lossless.recall.speakers import SPEAKER_BOOST, Candidate, lean_to_speakers, named_authors

from .conftest import StoreTarget

T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)
PAD = (", anyway the rest of the week was groceries, laundry, the dentist, a late train and a long call with "
       "the landlord about heating")


def _chat(n: int) -> dict[str, Any]:
    return {"role": "user" if n % 2 == 0 else "assistant", "name": "Ann" if n % 2 == 0 else "Bo",
            "content": f"day {n}: the weather was fine and we talked about football and lunch plans",
            "created_at": T0 + timedelta(minutes=10 + n)}


def _two_sisters(conv: lossless.Conversation) -> None:
    """Ann's sister is a nurse, Bo's works at a bank; Bo's message (which names Ann too)
    matches "sister" and "job" more often, so by keywords alone it ranks first for "Ann's
    sister's job", on both stores."""
    conv.add_many([
        {"role": "user", "name": "Ann", "content": "my sister finally got a job as a nurse" + PAD, "created_at": T0},
        *[_chat(n) for n in (-5, -4, -3)],
        {"role": "assistant", "name": "Bo", "content": "Ann, my sister's new job is at the bank, the job of her dreams" + PAD,
         "created_at": T0 + timedelta(minutes=5)},
        *[_chat(n) for n in range(200)],
    ])


def test_a_question_naming_a_person_recalls_what_they_said(store_target: StoreTarget) -> None:
    with lossless.open(store_target("sisters"), embedder=None, context_window=2048) as mem:
        conv = mem.conversation("c")
        _two_sisters(conv)
        assert [h.first_seq for h in conv.search("What is Ann's sister's job?", kinds=("message",), limit=2)] == [5, 1]
        # room for one of the two: Ann's own message, not Bo's that matches the words more
        shown = str(conv.assemble(budget_tokens=120, query="What is Ann’s sister’s job?").messages[0]["content"])
        assert "nurse" in shown and "bank" not in shown
        # a question that names no one keeps the keyword order
        shown = str(conv.assemble(budget_tokens=120, query="What is the sister's job?").messages[0]["content"])
        assert "bank" in shown and "nurse" not in shown


ZH_PAD = "，然后这一周就是买菜、洗衣服、看牙医、赶晚班火车，还和房东打了很久的电话说暖气的事"


def _zh_chat(n: int) -> dict[str, Any]:
    return {"role": "user" if n % 2 == 0 else "assistant", "name": "小美" if n % 2 == 0 else "阿强",
            "content": f"第{n}天：天气不错，我们聊了足球和午饭的安排", "created_at": T0 + timedelta(minutes=10 + n)}


def test_a_chinese_question_naming_a_person_recalls_what_they_said(store_target: StoreTarget) -> None:
    # the same two sisters in Chinese: 阿强's message names 小美 and says 姐姐 and 工作 more often
    with lossless.open(store_target("zh-sisters"), embedder=None, context_window=2048) as mem:
        conv = mem.conversation("c")
        conv.add_many([
            {"role": "user", "name": "小美", "content": "我姐姐终于找到了一份护士的工作" + ZH_PAD, "created_at": T0},
            *[_zh_chat(n) for n in (-5, -4, -3)],
            {"role": "assistant", "name": "阿强", "content": "小美，我姐姐的新工作在银行，是她梦想的工作" + ZH_PAD,
             "created_at": T0 + timedelta(minutes=5)},
            *[_zh_chat(n) for n in range(200)],
        ])
        assert [h.first_seq for h in conv.search("小美的姐姐做什么工作？", kinds=("message",), limit=2)] == [5, 1]
        shown = str(conv.assemble(budget_tokens=140, query="小美的姐姐做什么工作？").messages[0]["content"])
        assert "护士" in shown and "银行" not in shown
        shown = str(conv.assemble(budget_tokens=140, query="姐姐做什么工作？").messages[0]["content"])
        assert "银行" in shown and "护士" not in shown


def test_names_are_words_of_the_question() -> None:
    authors = {"Ann", "Bo", "Li Wei"}
    assert named_authors("What is Ann's sister's job?", authors) == {"ann"}
    assert named_authors("Where does BO live? and ann?", authors) == {"ann", "bo"}
    assert named_authors("Is Anna or Bob there? Boring.", authors) == set()
    # a name of several words, in a row; a name in CJK, wherever it stands
    assert named_authors("What did Li  Wei's brother say?", authors) == {"li wei"}
    assert named_authors("Did Li say that? Wei did.", authors) == set()
    assert named_authors("小美的姐姐做什么工作？阿强呢", {"小美", "阿强", "小明"}) == {"小美", "阿强"}
    assert named_authors("What did 小美 say?", {"小美"}) == {"小美"}


# -- property: a boost only reorders near-equals, exactly as it says -------------------------------

_NAMES = ["Ann", "Bo", None]


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[lossless.Memory, dict[str, str | None]]]:
    """A real SQLite file of 30 messages by Ann, Bo and no one, and each id's writer."""
    path: Path = tmp_path_factory.mktemp("speakers") / "memory.db"
    mem = lossless.open(str(path), embedder=None, context_window=4096)
    msgs = mem.conversation("c").add_many([
        {"role": "user", "content": f"message {i}", **({"name": _NAMES[i % 3]} if _NAMES[i % 3] else {})}
        for i in range(30)])
    yield mem, {m.id: m.name for m in msgs}
    mem.close()


@settings(max_examples=100, deadline=None)
@given(picks=st.lists(st.tuples(st.integers(0, 29), st.floats(0.01, 50)), max_size=80, unique_by=lambda p: p[0]),
       query=st.sampled_from(["What did Ann say?", "bo's car", "what did they say", "Ann and Bo", "ANN", "", "anna"]))
def test_a_boost_only_raises_the_named_writers_scores(written: tuple[lossless.Memory, dict[str, str | None]],
                                                      picks: list[tuple[int, float]], query: str) -> None:
    mem, writers = written
    ids = list(writers)
    candidates: list[Candidate] = sorted((((ids[i],), False, score) for i, score in picks), key=lambda c: -c[2])
    out = lean_to_speakers(mem.store, query, candidates)
    assert sorted(c[0] for c in out) == sorted(c[0] for c in candidates)  # the same matches, none added
    named = named_authors(query, {"Ann", "Bo"})
    if not named:
        assert out == candidates
    looked_at = candidates[:64]
    assert out[64:] == candidates[64:]  # past the best 64, nothing moves
    before = {ids_: score for ids_, _window, score in looked_at}
    for ids_, _window, score in out[:64]:
        writer = writers[ids_[0]]
        by_named = writer is not None and writer.lower() in named
        assert score == (before[ids_] * (1 + SPEAKER_BOOST) if by_named else before[ids_])
    assert [c[2] for c in out[:64]] == sorted((c[2] for c in out[:64]), reverse=True)
