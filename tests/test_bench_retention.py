"""The retention benchmark's own parts: the generated chit-chat set is deterministic and its
questions are answerable from their evidence; the baselines rank and pack as documented;
answer_recall counts a date the same in every spelling."""

from __future__ import annotations

import importlib
import json
import sys
from datetime import UTC, datetime
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


# -- the four dev sets: CJK-correct measures, LongMemEval, MADial (issue 27) -------------------

DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"


@pytest.fixture(scope="module")
def sets(bench: dict[str, ModuleType]) -> dict[str, ModuleType]:
    sys.path.insert(0, str(BENCH))
    try:
        return {name: importlib.import_module(name) for name in ("retention_text", "longmemeval", "madial")}
    finally:
        sys.path.remove(str(BENCH))


def test_words_read_cjk_as_bigrams(sets: dict[str, ModuleType]) -> None:
    text = sets["retention_text"]
    assert text.words("Bart在公园玩") == ["bart", "在公", "公园", "园玩"]
    assert text.words("我 去") == ["我", "去"]  # a lone character stays itself
    assert text.content_words(["我去了人民公园。"]) == {"我去", "去了", "了人", "人民", "民公", "公园"}
    # English is cut exactly as before
    assert text.words("Caroline’s 5km on 2023-05-14") == ["carolines", "5km", "on", "d20230514", "md0514"]


def test_sentences_and_clauses_cut_at_chinese_punctuation(sets: dict[str, ModuleType]) -> None:
    text = sets["retention_text"]
    assert text.evidence_units("Bart在圣诞节晚会上跳舞，感觉非常开心。他笑了。Then he went home early today.") == \
        ["Bart在圣诞节晚会上跳舞，感觉非常开心。", "Then he went home early today."]
    assert text.clauses("Bart在生日派对上看了《辛普森一家》，感到非常开心。去了") == \
        ["Bart在生日派对上看了", "辛普森一家", "感到非常开心"]


def test_memory_recall_counts_a_clause_only_when_it_is_there_verbatim(sets: dict[str, ModuleType]) -> None:
    """A hand-built Chinese case: the gold memory's distinctive clause is in the context, the
    other memory's is not (only paraphrased); the live dialogue earns nothing even when it
    quotes a memory."""
    text, md = sets["retention_text"], sets["madial"]
    day = datetime(2023, 5, 1, tzinfo=UTC)
    gold = md.Event(1, 1, day, "活动类", "Lisa在人民公园看到了樱花，感到非常开心。")
    other = md.Event(2, 1, day, "活动类", "Lisa和爸爸去爬山，感到非常开心。")
    third = md.Event(3, 1, day, "喜好类", "Lisa在新开的冰淇淋店吃了芒果冰淇淋，感到非常开心。")
    events = [gold, other, third]
    # "感到非常开心" is in every event: not a key phrase of any
    assert md.key_phrases(gold, events, "") == ("Lisa在人民公园看到了樱花",)
    assert md.key_phrases(third, events, "") == ("Lisa在新开的冰淇淋店吃了芒果冰淇淋",)
    phrases = [md.key_phrases(e, events, "") for e in (gold, other)]
    context = [{"role": "user", "content": "Lisa在人民公园看到了樱花，感到非常开心。"},
               {"role": "assistant", "content": "她和爸爸一起爬了山。"}]
    view = text.ContextView.of(context, 30, 0.0)
    scores = text.score(view, [text.evidence_of(gold.text), text.evidence_of(other.text)], set(), phrases)
    assert scores["gold_recall"] == 1.0
    assert scores["memory_recall"] == 0.5
    assert scores["evidence_full"] == 0.5
    live = "我记得Lisa和爸爸去爬山"  # the dialogue so far quoting the other memory
    quoted = text.ContextView.of([*context, {"role": "user", "content": live}], 40, 0.0, exclude=[live])
    assert text.score(quoted, [], set(), phrases)["memory_recall"] == 0.5


def test_bm25_finds_a_two_character_chinese_word(bench: dict[str, ModuleType]) -> None:
    bl = bench["baselines"]
    assert bl.tokenize("Bart在公园abc") == ["bart", "在公", "公园", "abc"]
    docs = ["今天天气很好，我们在家看书。", "我去了人民公园，看到了很多樱花。", "晚上我们去看电影吧。"]
    # "公园" is two characters: no trigram of the message holds it
    assert bl.BM25(docs).rank("你还记得那个公园吗")[0] == 1
    assert bl.BM25(docs).rank("电影")[:1] == [2]


def test_longmemeval_reference_and_dates(sets: dict[str, ModuleType], tmp_path: Path) -> None:
    lme = sets["longmemeval"]
    assert lme.clean_reference("The user would prefer suggestions of hotels in Miami with a view. They may not "
                               "prefer budget hotels.") == "hotels in Miami with a view."
    assert lme.clean_reference("7 days. 8 days (including the last day) is also acceptable.") == "7 days."
    path = tmp_path / "lme.yaml"
    path.write_text(
        "- id: q1\n  category: single_session_user\n  query: Where did I go?\n  expected_answer: Porto\n"
        "  expected_keywords: [Porto]\n  conversations:\n"
        "    - session: 2\n      turns:\n        - {role: user, content: later}\n"
        "        - {role: assistant, content: ok}\n"
        "    - session: 1\n      turns:\n        - {role: assistant, content: hello}\n"
        "        - {role: user, content: I went to Porto}\n        - {role: assistant, content: nice}\n"
        "    - session: 3\n      turns: []\n", encoding="utf-8")
    [chat] = lme.load(path)
    assert [m.content for m in chat.messages] == ["hello", "I went to Porto", "nice", "later", "ok"]
    assert chat.turns == ((0,), (1, 2), (3, 4))
    assert (chat.messages[3].created_at - chat.messages[0].created_at).days == 1  # a day per session
    assert chat.questions[0].raw["answer_only"] and chat.questions[0].evidence_ids == ()


def _run(bench: dict[str, ModuleType], tmp_path: Path, *args: str) -> dict:
    out = tmp_path / "out.json"
    assert bench["retention"].main([*args, "--no-vectors", "--json", str(out)]) == 0
    return json.loads(out.read_text(encoding="utf-8"))


def _check_cells(result: dict, metric: str) -> None:
    assert not result["skipped"]["budget_violations"]
    for system in ("lossless", "recent", "bm25", "fts"):
        for budget in map(str, result["config"]["budgets"]):
            value = result["overall"][system][budget][metric]
            assert value is not None and 0.0 <= value <= 1.0, (system, budget)


@pytest.mark.skipif(not (DATA / "madial-zh").is_dir(), reason="shared/data/madial-zh is not here")
def test_madial_runs_on_one_dialogue(bench: dict[str, ModuleType], tmp_path: Path) -> None:
    result = _run(bench, tmp_path, "--set", "madial", "--chats", "1")
    assert result["config"]["window"] == 2048 and result["config"]["budgets"] == [512, 1024]
    assert result["config"]["questions"] == 1
    _check_cells(result, "memory_recall")
    # the whole history holds every relevant memory
    assert result["overall"]["full"]["unbudgeted"]["memory_recall"] == 1.0
    assert result["overall"]["evidence"]["512"]["memory_recall"] == 1.0
    [chat] = result["ingest"]  # user 1's history, the dialogue only the query
    assert 150 <= chat["messages"] <= 200 and chat["topic"] == "user 1"


@pytest.mark.skipif(not (DATA / "madial-zh").is_dir(), reason="shared/data/madial-zh is not here")
def test_madial_live_dialogue_is_in_the_store_but_never_counted(bench: dict[str, ModuleType],
                                                                  tmp_path: Path) -> None:
    """--madial-live: each dialogue continues a copy of its user's history (ingested once per
    user); the dialogue's turns are stored but the baselines do not rank them and no metric
    counts them."""
    result = _run(bench, tmp_path, "--set", "madial", "--madial-live", "--chats", "1", "2", "3")
    assert result["config"]["questions"] == 3
    _check_cells(result, "memory_recall")
    histories = [i for i in result["ingest"] if str(i["chat"]).startswith("user")]
    assert len(histories) == 2  # dialogues 1 and 3 are user 1's, 2 is user 2's
    dialogues = [i for i in result["ingest"] if not str(i["chat"]).startswith("user")]
    for d, h in zip(dialogues, [histories[0], histories[1], histories[0]], strict=True):
        assert d["messages"] > h["messages"]  # the history and the live turns
    assert result["overall"]["full"]["unbudgeted"]["memory_recall"] == 1.0
    ranked = [r for r in result["questions"] if r["system"] == "bm25"]
    assert ranked and all(r["tokens"] <= r["budget"] for r in ranked)


@pytest.mark.skipif(not (DATA / "longmemeval-s-smoke").is_dir(), reason="the LongMemEval sample is not here")
def test_longmemeval_runs_on_one_question(bench: dict[str, ModuleType], tmp_path: Path) -> None:
    result = _run(bench, tmp_path, "--set", "longmemeval", "--chats", "1", "6")
    assert result["config"]["questions"] == 1  # question 6's answer is a bare count: skipped
    assert result["skipped"]["numbers_only_reference"] == ["6/multi_session_reasoning/0"]  # "3"
    _check_cells(result, "answer_recall")
    assert result["overall"]["full"]["unbudgeted"]["answer_recall"] == 1.0
    assert "evidence" not in result["overall"]  # no evidence ids in this set


@pytest.mark.slow
@pytest.mark.skipif(not all((DATA / d).is_dir() for d in ("beam-128k", "longmemeval-s-smoke", "madial-zh")),
                    reason="the dev sets are not here")
def test_all_four_sets_make_one_table(bench: dict[str, ModuleType], tmp_path: Path) -> None:
    out = _run(bench, tmp_path, "--set", "all", "--limit", "1")
    assert list(out["sets"]) == ["beam", "chitchat", "longmemeval", "madial"]
    head, _rule, *rows = out["table"].splitlines()
    assert "beam ans@1024" in head and "longmemeval ans@4096" in head and "madial mem@512" in head
    assert "madial mem@2048" not in head and "beam ans@512" not in head
    assert {r.split(" | ")[0].strip("| ") for r in rows} >= {"lossless", "recent", "bm25", "fts", "full"}
    assert all(len(r.split(" | ")) == len(head.split(" | ")) for r in rows)


@pytest.mark.skipif(not (DATA / "madial-zh").is_dir(), reason="shared/data/madial-zh is not here")
def test_dated_bm25_shows_what_lossless_must_and_fits(bench: dict[str, ModuleType], tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """--dated-baseline: bm25's ranking in one system message, each message as ``#seq role:``
    under its date line (once per date), within the budget and filling it."""
    import re

    systems = sys.modules["retention_systems"]
    built: list[tuple[int, object]] = []
    plain = systems.BUILDERS["bm25-dated"]

    def spy(run, question, budget):  # type: ignore[no-untyped-def]
        out = plain(run, question, budget)
        built.append((budget, out))
        return out

    monkeypatch.setitem(systems.BUILDERS, "bm25-dated", spy)
    result = _run(bench, tmp_path, "--set", "madial", "--chats", "1", "--dated-baseline")
    assert "bm25-dated" in result["config"]["systems"]
    assert {b for b, _ in built} == {512, 1024}
    for budget, b in built:
        [msg] = b.messages
        text = msg["content"]
        assert msg["role"] == "system" and "Recalled verbatim for the current question:" in text
        days = re.findall(r"^\[(\d{4}-\d{2}-\d{2})\]$", text, re.M)
        lines = re.findall(r"^#(\d+) user: ", text, re.M)
        assert lines and len(days) == len(set(days)) <= len(lines)
        assert [int(s) for s in lines] == sorted(int(s) for s in lines)  # time order
        assert budget * 0.8 <= b.tokens <= budget
    assert all(r["tokens"] <= r["budget"] for r in result["questions"] if r["system"] == "bm25-dated")
