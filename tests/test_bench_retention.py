"""The retention benchmark's own parts: the generated chit-chat set is deterministic and its
questions are answerable from their evidence; the baselines rank and pack as documented;
answer_recall counts a date the same in every spelling."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


@pytest.fixture(scope="module")
def bench() -> dict[str, ModuleType]:
    sys.path.insert(0, str(BENCH))
    try:
        return {name: importlib.import_module(name) for name in ("beam", "chitchat", "baselines", "retention")}
    finally:
        sys.path.remove(str(BENCH))


@pytest.fixture(scope="module")
def chats(bench: dict[str, ModuleType]) -> list:
    return bench["chitchat"].generate(seed=7, conversations=2)


def test_chitchat_is_deterministic(bench: dict[str, ModuleType], chats: list) -> None:
    again = bench["chitchat"].generate(seed=7, conversations=2)
    assert [c.messages for c in again] == [c.messages for c in chats]
    assert [c.questions for c in again] == [c.questions for c in chats]
    other = bench["chitchat"].generate(seed=8, conversations=2)
    assert [c.messages for c in other] != [c.messages for c in chats]


def test_chitchat_shape(bench: dict[str, ModuleType], chats: list) -> None:
    cc = bench["chitchat"]
    pairs = {frozenset(m.name for m in c.messages) for c in chats}
    assert len(pairs) == len(chats) and all(len(p) == 2 for p in pairs)
    for chat in chats:
        assert 380 <= len(chat.messages) <= 1300
        times = [m.created_at for m in chat.messages]
        assert times == sorted(times)
        assert [m.id for m in chat.messages] == list(range(len(chat.messages)))
        assert len(chat.questions) == sum(cc.QUOTA.values())
        assert {q.ability for q in chat.questions} == set(cc.CATEGORIES)
        assert any("’" in q.question for q in chat.questions) or any("’" in m.content for m in chat.messages)


def test_chitchat_answers_are_in_their_evidence(bench: dict[str, ModuleType], chats: list) -> None:
    """Every reference word (a date: at least its month and day) is in the evidence messages,
    and multi-hop and temporal evidence spans two sessions."""
    ret = bench["retention"]
    for chat in chats:
        by_id = chat.by_id()
        for q in chat.questions:
            evidence = [by_id[i] for i in q.evidence_ids]
            found = set(ret.words(" ".join(m.content for m in evidence)))
            reference = ret.content_words(q.reference)
            assert reference, q.key
            missing = reference - found
            if q.ability == "date":
                assert len(missing) <= 1 and not any(w.startswith("md") for w in missing), (q.key, missing)
            else:
                assert not missing, (q.key, q.question, missing)
            if q.ability in ("multi_hop", "temporal"):
                assert len({m.batch for m in evidence}) == 2, q.key


def test_chitchat_written_set_loads_back(bench: dict[str, ModuleType], chats: list, tmp_path: Path) -> None:
    bench["chitchat"].write(chats, tmp_path)
    loaded = bench["beam"].load_chat(1, tmp_path)
    assert loaded.messages == chats[0].messages
    assert [(q.ability, q.question, q.evidence_ids, q.reference) for q in loaded.questions] == \
        [(q.ability, q.question, q.evidence_ids, q.reference) for q in chats[0].questions]


def test_dates_match_in_every_spelling(bench: dict[str, ModuleType]) -> None:
    words = bench["retention"].words
    iso = set(words("on 2023-05-14"))
    assert "d20230514" in iso
    assert iso & {"d20230514", "md0514"} == set(words("14 May 2023")) & {"d20230514", "md0514"}
    assert {"d20230514", "md0514"} <= set(words("May 14th, 2023 was fun"))
    assert set(words("see you May 14th")) & {"d20230514", "md0514"} == {"md0514"}
    assert "md0231" not in words("February 31 2023")  # not a date: left as it was


def test_bm25_rrf_and_pack(bench: dict[str, ModuleType]) -> None:
    bl = bench["baselines"]
    assert bl.tokenize("Caroline’s 5km run, sister-in-law") == ["caroline", "s", "5km", "run", "sister", "in", "law"]
    docs = ["the cat sat", "my sister is a baker", "a baker's dozen of cats", "nothing here"]
    ranking = bl.BM25(docs).rank("what does my sister bake? a baker")
    assert ranking[0] == 1 and 3 not in ranking
    assert bl.rrf([1, 2, 0], [2, 1, 3])[:2] == [1, 2]
    picked, total = bl.pack([2, 0, 1, 3], lambda i: [5, 8, 3, 1][i], budget=12, start=2)
    # in rank order: doc 2 (3) and doc 0 (5) fit after the 2 to start with, doc 1 (8) does
    # not, doc 3 (1) still does; shown in position order
    assert (picked, total) == ([0, 2, 3], 11)
