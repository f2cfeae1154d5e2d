"""Tests for the demo conversation generator (lossless.demo.conversation)."""

from __future__ import annotations

import dataclasses
import itertools
import json
import re
import time
from datetime import timedelta
from typing import Any

import pytest

from lossless.demo.conversation import DemoQuestion, demo_conversation, demo_questions

ROLES = {"system", "user", "assistant", "tool"}
KEYS = {"role", "content", "name", "created_at", "tool_calls", "tool_call_id"}
SEEDS = (7, 0, 1, 2, 3, 11, 99, 2024)

_HAN = re.compile(r"[\u4e00-\u9fff]")
_KANA = re.compile(r"[\u3040-\u30ff]")


@pytest.fixture(scope="module")
def conv() -> list[dict[str, Any]]:
    return demo_conversation()


def test_same_seed_gives_identical_output() -> None:
    assert demo_conversation(7) == demo_conversation(7)
    assert demo_conversation() == demo_conversation(7)
    assert demo_questions(7) == demo_questions(7)


def test_different_seeds_give_different_output() -> None:
    a, b = demo_conversation(7), demo_conversation(8)
    assert [m["content"] for m in a] != [m["content"] for m in b]
    assert [m["created_at"] for m in a] != [m["created_at"] for m in b]
    assert demo_questions(7) != demo_questions(8)


def test_returns_fresh_objects() -> None:
    a = demo_conversation(7)
    a[1]["content"] = "mutated"
    a.clear()
    assert demo_conversation(7)[1]["content"] != "mutated"


@pytest.mark.parametrize("seed", SEEDS)
def test_timestamps_are_utc_and_non_decreasing(seed: int) -> None:
    msgs = demo_conversation(seed)
    stamps = [m["created_at"] for m in msgs]
    assert all(t.tzinfo is not None and t.utcoffset() == timedelta(0) for t in stamps)
    assert all(a <= b for a, b in itertools.pairwise(stamps))
    span = stamps[-1] - stamps[0]
    assert timedelta(days=17) <= span <= timedelta(days=21)
    assert len({t.date() for t in stamps}) >= 14  # several sessions on most days


@pytest.mark.parametrize("seed", SEEDS)
def test_roles_and_fields(seed: int) -> None:
    msgs = demo_conversation(seed)
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
            assert m["name"] in {"maya", "li_wei", "hana"}
    assert {m["role"] for m in msgs} == ROLES


@pytest.mark.parametrize("seed", SEEDS)
def test_tool_messages_follow_their_calls(seed: int) -> None:
    msgs = demo_conversation(seed)
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


def test_message_lengths_vary(conv: list[dict[str, Any]]) -> None:
    words = [len(m["content"].split()) for m in conv if m["content"]]
    assert sum(w < 15 for w in words) >= 80  # plenty of short ones
    assert sum(50 <= w <= 400 for w in words) >= 80
    assert sum(w >= 1000 for w in words) >= 2  # a few long documents and logs
    assert max(words) <= 2000


def test_no_empty_content_unless_tool_call(conv: list[dict[str, Any]]) -> None:
    for m in conv:
        if not m["content"].strip():
            assert m["role"] == "assistant" and m.get("tool_calls")


@pytest.mark.parametrize("seed", SEEDS)
def test_templates_fully_rendered(seed: int) -> None:
    for m in demo_conversation(seed):
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


def test_story_elements(conv: list[dict[str, Any]]) -> None:
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


def test_questions_shape() -> None:
    qs = demo_questions()
    assert 10 <= len(qs) <= 15
    assert qs == demo_questions(7)
    for q in qs:
        assert isinstance(q, DemoQuestion)
        assert q.question.endswith("?") and q.answer and q.evidence
        assert len(q.evidence) <= 80
    with pytest.raises(dataclasses.FrozenInstanceError):
        qs[0].answer = "changed"  # type: ignore[misc]


@pytest.mark.parametrize("seed", range(25))
def test_question_evidence_is_unique_and_early(seed: int) -> None:
    msgs = demo_conversation(seed)
    for q in demo_questions(seed):
        hits = [i for i, m in enumerate(msgs) if q.evidence in m["content"]]
        assert len(hits) == 1, (q.evidence, hits)
        assert hits[0] < len(msgs) / 3, (q.evidence, hits[0], len(msgs))


def test_generation_is_fast() -> None:
    start = time.perf_counter()
    demo_conversation(31337)
    demo_questions(31337)
    assert time.perf_counter() - start < 0.2
