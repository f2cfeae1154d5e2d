"""Tests for the demo conversation generators (lossless.demo: the English story and the
Chinese one, ``lang="zh"``), and that keyword recall finds the Chinese answers."""

from __future__ import annotations

import dataclasses
import itertools
import json
import re
import time
from datetime import timedelta
from typing import Any

import pytest

import lossless
from lossless.cli.demo import DEMO_BUDGET, DEMO_LANGUAGES, DEMO_WINDOW
from lossless.core.render import chat_message_text
from lossless.core.tokens import default_counter
from lossless.demo.conversation import LANGUAGES, DemoQuestion, demo_conversation, demo_questions

ROLES = {"system", "user", "assistant", "tool"}
KEYS = {"role", "content", "name", "created_at", "tool_calls", "tool_call_id"}
SEEDS = (7, 0, 1, 2, 3, 11, 99, 2024)
USERS = {"en": {"maya", "li_wei", "hana"}, "zh": {"lin_yuan", "su_qing", "chen_guodong"}}

_HAN = re.compile(r"[\u4e00-\u9fff]")
_KANA = re.compile(r"[\u3040-\u30ff]")
_FULL_WIDTH = re.compile(r"[，。？！：；（）「」、]")


@pytest.fixture(scope="module")
def conv() -> list[dict[str, Any]]:
    return demo_conversation()


@pytest.fixture(scope="module")
def zh_conv() -> list[dict[str, Any]]:
    return demo_conversation(7, "zh")


def test_same_seed_gives_identical_output() -> None:
    assert demo_conversation(7) == demo_conversation(7)
    assert demo_conversation() == demo_conversation(7) == demo_conversation(7, "en")
    assert demo_questions(7) == demo_questions(7) == demo_questions(7, "en")
    assert demo_conversation(7, "zh") == demo_conversation(7, "zh")
    assert demo_questions(7, "zh") == demo_questions(7, "zh")


@pytest.mark.parametrize("lang", LANGUAGES)
def test_different_seeds_give_different_output(lang: str) -> None:
    a, b = demo_conversation(7, lang), demo_conversation(8, lang)
    assert [m["content"] for m in a] != [m["content"] for m in b]
    assert [m["created_at"] for m in a] != [m["created_at"] for m in b]
    assert demo_questions(7, lang) != demo_questions(8, lang)


def test_the_languages_tell_different_stories() -> None:
    en, zh = demo_conversation(7), demo_conversation(7, "zh")
    assert sum(bool(_HAN.search(m["content"])) for m in en) < len(en) / 4
    assert sum(bool(_HAN.search(m["content"])) for m in zh) > len(zh) * 3 / 4


def test_an_unknown_language_is_refused() -> None:
    for call in (demo_conversation, demo_questions):
        with pytest.raises(ValueError, match=r"'fr'.*en, zh"):
            call(7, "fr")


def test_the_cli_offers_every_language() -> None:
    assert DEMO_LANGUAGES == LANGUAGES == ("en", "zh")


@pytest.mark.parametrize("lang", LANGUAGES)
def test_returns_fresh_objects(lang: str) -> None:
    a = demo_conversation(7, lang)
    a[1]["content"] = "mutated"
    a.clear()
    assert demo_conversation(7, lang)[1]["content"] != "mutated"


@pytest.mark.parametrize("lang", LANGUAGES)
@pytest.mark.parametrize("seed", SEEDS)
def test_timestamps_are_utc_and_non_decreasing(seed: int, lang: str) -> None:
    msgs = demo_conversation(seed, lang)
    stamps = [m["created_at"] for m in msgs]
    assert all(t.tzinfo is not None and t.utcoffset() == timedelta(0) for t in stamps)
    assert all(a <= b for a, b in itertools.pairwise(stamps))
    span = stamps[-1] - stamps[0]
    assert timedelta(days=17) <= span <= timedelta(days=21)
    assert len({t.date() for t in stamps}) >= 14  # several sessions on most days


@pytest.mark.parametrize("lang", LANGUAGES)
@pytest.mark.parametrize("seed", SEEDS)
def test_roles_and_fields(seed: int, lang: str) -> None:
    msgs = demo_conversation(seed, lang)
    assert msgs[0]["role"] == "system"
    assert sum(m["role"] == "system" for m in msgs) == 1
    for m in msgs:
        assert set(m) <= KEYS
        assert m["role"] in ROLES
        assert isinstance(m["content"], str)
        if "name" in m:
            assert isinstance(m["name"], str)
            assert re.fullmatch(r"[A-Za-z0-9_-]+", m["name"])
        if m["role"] == "user":
            assert m["name"] in USERS[lang]
    assert {m["role"] for m in msgs} == ROLES


@pytest.mark.parametrize("lang", LANGUAGES)
@pytest.mark.parametrize("seed", SEEDS)
def test_tool_messages_follow_their_calls(seed: int, lang: str) -> None:
    msgs = demo_conversation(seed, lang)
    seen_ids: set[str] = set()
    i = 0
    while i < len(msgs):
        m = msgs[i]
        assert m["role"] != "tool", f"tool message {i} does not follow an assistant call"
        calls = m.get("tool_calls")
        if calls:
            assert m["role"] == "assistant"
            for k, call in enumerate(calls):
                assert call["type"] == "function"
                assert call["id"].startswith("call_")
                assert call["id"] not in seen_ids
                seen_ids.add(call["id"])
                assert isinstance(json.loads(call["function"]["arguments"]), dict)
                result = msgs[i + 1 + k]
                assert result["role"] == "tool"
                assert result["tool_call_id"] == call["id"]
                assert result["name"] == call["function"]["name"]
                assert result["content"].strip()
            i += 1 + len(calls)
        else:
            assert "tool_call_id" not in m
            i += 1
    assert len(seen_ids) >= 40


@pytest.mark.parametrize("seed", SEEDS)
def test_size_is_in_range(seed: int) -> None:
    msgs = demo_conversation(seed)
    chars = sum(len(m["content"]) for m in msgs)
    assert 400 <= len(msgs) <= 600
    assert 120_000 <= chars <= 200_000


@pytest.mark.parametrize("seed", SEEDS)
def test_chinese_size_is_in_range(seed: int) -> None:
    """Chinese says more per character: fewer characters, about as many tokens as the
    English story, so the demo's window compacts it as much."""
    msgs = demo_conversation(seed, "zh")
    chars = sum(len(m["content"]) for m in msgs)
    counter = default_counter()
    tokens = sum(counter.count(m["content"]) for m in msgs)
    assert 380 <= len(msgs) <= 480
    assert 65_000 <= chars <= 95_000
    assert 38_000 <= tokens <= 50_000
    assert tokens > 4 * DEMO_WINDOW


def test_message_lengths_vary(conv: list[dict[str, Any]]) -> None:
    words = [len(m["content"].split()) for m in conv if m["content"]]
    assert sum(w < 15 for w in words) >= 80  # plenty of short ones
    assert sum(50 <= w <= 400 for w in words) >= 80
    assert sum(w >= 1000 for w in words) >= 2  # a few long documents and logs
    assert max(words) <= 2000


def test_chinese_message_lengths_vary(zh_conv: list[dict[str, Any]]) -> None:
    chars = [len(m["content"]) for m in zh_conv if m["content"]]
    assert sum(c < 30 for c in chars) >= 60  # plenty of short ones (好的, 辛苦了)
    assert sum(100 <= c <= 1500 for c in chars) >= 80
    assert sum(c >= 2000 for c in chars) >= 2  # a few long documents and logs
    assert max(chars) <= 12_000


@pytest.mark.parametrize("lang", LANGUAGES)
def test_no_empty_content_unless_tool_call(lang: str) -> None:
    for m in demo_conversation(7, lang):
        if not m["content"].strip():
            assert m["role"] == "assistant" and m.get("tool_calls")


@pytest.mark.parametrize("lang", LANGUAGES)
@pytest.mark.parametrize("seed", SEEDS)
def test_templates_fully_rendered(seed: int, lang: str) -> None:
    for m in demo_conversation(seed, lang):
        text = m["content"] + "".join(c["function"]["arguments"] for c in m.get("tool_calls", []))
        assert not re.search(r"<<[a-z_0-9]+>>", text)
        assert not re.search(r"\{\{[^{}]*\|[^{}]*\}\}", text)
        assert not re.search(r"(?m)^%%", text)


def test_multilingual(conv: list[dict[str, Any]]) -> None:
    from_li_wei = [m for m in conv if m.get("name") == "li_wei"]
    assert len(from_li_wei) >= 10
    assert all(_HAN.search(m["content"]) for m in from_li_wei)
    chinese_answers = [
        a for q, a in itertools.pairwise(conv)
        if q.get("name") == "li_wei" and a["role"] == "assistant" and _HAN.search(a["content"])
    ]
    assert len(chinese_answers) >= 5
    assert sum(bool(_KANA.search(m["content"])) for m in conv) >= 5


@pytest.mark.parametrize("lang", LANGUAGES)
def test_story_elements(lang: str) -> None:
    conv = demo_conversation(7, lang)
    text = "\n".join(m["content"] for m in conv)
    assert "```python" in text and "Traceback (most recent call last)" in text
    tools = {c["function"]["name"] for m in conv for c in m.get("tool_calls", [])}
    assert {"run_tests", "read_file", "run_shell", "query_metrics"} <= tools
    assert any(len(m.get("tool_calls", [])) > 1 for m in conv)  # parallel calls
    assert any(m["content"] and m.get("tool_calls") for m in conv)  # text + calls


@pytest.mark.parametrize("seed", SEEDS)
def test_knowledge_updates_come_later(seed: int) -> None:
    msgs = demo_conversation(seed)
    n = len(msgs)
    port_first = next(i for i, m in enumerate(msgs) if "plain port 5432" in m["content"])
    moved = [i for i, m in enumerate(msgs) if re.search(r"staging DB is on \d+ from now on", m["content"])]
    assert len(moved) == 1 and port_first < n / 3 < moved[0]
    new_port = re.search(r"staging DB is on (\d+)", msgs[moved[0]]["content"])
    assert new_port is not None and new_port.group(1) != "5432"
    launch_moves = [i for i, m in enumerate(msgs) if "Go-live moves from" in m["content"]]
    assert len(launch_moves) == 1 and launch_moves[0] > n / 3


@pytest.mark.parametrize("lang", LANGUAGES)
def test_questions_shape(lang: str) -> None:
    qs = demo_questions(lang=lang)
    assert 10 <= len(qs) <= 15
    assert qs == demo_questions(7, lang)
    for q in qs:
        assert isinstance(q, DemoQuestion)
        assert q.question.endswith("?" if lang == "en" else "？") and q.answer and q.evidence
        assert len(q.evidence) <= 80
    with pytest.raises(dataclasses.FrozenInstanceError):
        qs[0].answer = "changed"  # type: ignore[misc]


def test_chinese_questions_name_their_search_word() -> None:
    """Chinese has no spaces to find words by: each question names the word the demo greps
    for, a two-character one (most Chinese words are two characters) where it is Chinese."""
    qs = demo_questions(7, "zh")
    assert all(_HAN.search(q.question) for q in qs)
    for q in qs:
        assert q.keyword and q.keyword.lower() in q.evidence.lower()
        assert len(q.keyword) == 2 or not _HAN.search(q.keyword)
    assert qs[0].keyword == "缓存"  # the question the demo shows first
    assert all(q.keyword == "" for q in demo_questions(7))  # English derives it from the question


@pytest.mark.parametrize("lang", LANGUAGES)
@pytest.mark.parametrize("seed", range(25))
def test_question_evidence_is_unique_and_early(seed: int, lang: str) -> None:
    msgs = demo_conversation(seed, lang)
    for q in demo_questions(seed, lang):
        hits = [i for i, m in enumerate(msgs) if q.evidence in m["content"]]
        assert len(hits) == 1, (q.evidence, hits)
        assert hits[0] < len(msgs) / 3, (q.evidence, hits[0], len(msgs))


@pytest.mark.parametrize("lang", LANGUAGES)
def test_generation_is_fast(lang: str) -> None:
    start = time.perf_counter()
    demo_conversation(31337, lang)
    demo_questions(31337, lang)
    assert time.perf_counter() - start < 0.2


# --------------------------------------------------------------------------- the Chinese story

def test_chinese_reads_as_chinese(zh_conv: list[dict[str, Any]]) -> None:
    people = [m for m in zh_conv if m["role"] == "user"]
    answers = [m for m in zh_conv if m["role"] == "assistant" and m["content"]]
    assert sum(bool(_HAN.search(m["content"])) for m in people) >= 0.8 * len(people)
    assert sum(bool(_HAN.search(m["content"])) for m in answers) >= 0.9 * len(answers)
    assert {m["name"] for m in people} == USERS["zh"]
    text = "\n".join(m["content"] for m in zh_conv)
    assert len(_FULL_WIDTH.findall(text)) >= 2000  # full-width punctuation, as Chinese is written
    # English identifiers inside Chinese prose, as Chinese developers write
    mixed = [m for m in zh_conv if _HAN.search(m["content"]) and re.search(r"`[A-Za-z_][\w.()]*`", m["content"])]
    assert len(mixed) >= 40
    for said in ("哈哈", "辛苦了", "好的", "我更喜欢", "收到"):  # small talk and stated preferences
        assert said in text, said
    assert not _KANA.search(text)


@pytest.mark.parametrize("seed", SEEDS)
def test_chinese_knowledge_updates_come_later(seed: int) -> None:
    msgs = demo_conversation(seed, "zh")
    n = len(msgs)
    port_first = next(i for i, m in enumerate(msgs) if "默认的 3306 端口" in m["content"])
    moved = [i for i, m in enumerate(msgs) if re.search(r"测试库从今天起改用 \d+ 端口", m["content"])]
    assert len(moved) == 1 and port_first < n / 3 < moved[0]
    new_port = re.search(r"测试库从今天起改用 (\d+) 端口", msgs[moved[0]]["content"])
    assert new_port is not None and new_port.group(1) != "3306"
    launch_moves = [i for i, m in enumerate(msgs) if re.search(r"上线从.+推迟到", m["content"])]
    assert len(launch_moves) == 1 and launch_moves[0] > n / 3


# The answer-format preference shares no two-character word with the message that states
# it (the question says 回答/默认/组织, the message 偏好/结论/要点), so keyword recall
# cannot reach it; its English twin ("How does Maya want answers formatted by default?")
# is missed by keyword recall at this budget too. Strict: when recall finds it, say so here.
_KEYWORD_MISSES = {"林远希望回答默认怎么组织？"}


@pytest.fixture(scope="module")
def zh_demo_store(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The Chinese demo (seed 7) fed as ``lossless demo --lang zh`` feeds it: a SQLite file,
    the demo's window, no embedder (keyword recall only), batches of 25 while a worker
    thread compacts, then caught up."""
    mem = lossless.open(tmp_path_factory.mktemp("zh-demo") / "demo.db", embedder=None,
                        context_window=DEMO_WINDOW, compaction="background")
    conv = mem.conversation("demo")
    msgs = demo_conversation(7, "zh")
    for start in range(0, len(msgs), 25):
        conv.add_many(msgs[start:start + 25])
    mem.wait_idle()
    yield conv
    mem.close()


def test_chinese_demo_is_compacted(zh_demo_store: Any) -> None:
    stats = zh_demo_store.stats()
    assert stats.messages == len(demo_conversation(7, "zh"))
    assert stats.summaries >= 10 and stats.max_depth >= 1
    assert stats.active_tokens <= DEMO_WINDOW


@pytest.mark.parametrize("question", [
    pytest.param(q, id=q.keyword, marks=[pytest.mark.xfail(strict=True, reason="no word in common with its evidence")]
                 if q.question in _KEYWORD_MISSES else [])
    for q in demo_questions(7, "zh")
])
def test_chinese_answers_are_recalled_by_keywords(zh_demo_store: Any, question: DemoQuestion) -> None:
    """Each answer was compacted away long before the end; the context assembled for the
    question at the demo's budget brings its message back, found by the question's words
    (character bigrams)."""
    tail = "\n".join(chat_message_text(m) for m in zh_demo_store.assemble(budget_tokens=DEMO_BUDGET).messages)
    assert question.evidence not in tail  # not there without the question
    assembled = zh_demo_store.assemble(budget_tokens=DEMO_BUDGET, query=question.question)
    assert assembled.tokens <= DEMO_BUDGET
    context = "\n".join(chat_message_text(m) for m in assembled.messages)
    assert question.evidence in context
