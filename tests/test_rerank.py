"""The optional rerank of recall's candidates (issue 20 item 10, seed 001's LLM reranker):
the order follows the model, any failure leaves recall's order and never fails assembly,
what is sent is bounded, and a wrong setting is a clear error at open."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import lossless
from lossless.core.errors import ValidationError
from lossless.core.tokens import get_counter
from lossless.recall.rerank import CrossEncoderReranker, RerankError, parse_order

from .conftest import StoreTarget
from .fake_openai import FakeOpenAIServer, fake_openai

__all__ = ["fake_openai"]

QUERY = "What dashboard colour did we decide on?"
PAD = " We also went over the release checklist, the onboarding flow and the holiday rota for the team."
NEEDLES = {  # alike in length (~45 tokens), so a budget has room for one of them and not two
    3: "We debated the dashboard colour again this afternoon: maybe red, maybe orange." + PAD,
    9: "Dashboard colour, dashboard colour, dashboard colour: still undecided between options." + PAD,
    15: "Final decision on the dashboard colour, after a long meeting: navy blue." + PAD,
}
BUDGET = 96  # room for one recalled message: the one ranked first (100 also fits its short neighbour since lines are costed exactly)


def _open(target: str, **cfg: Any) -> lossless.Memory:
    return lossless.open(target, embedder=None, context_window=2048, fresh_tail_count=4, compaction="inline", **cfg)


def _fill(mem: lossless.Memory, extra: dict[int, str] | None = None, n: int = 40) -> lossless.Conversation:
    conv = mem.conversation("c")
    t0 = datetime(2024, 1, 1)
    texts = {**NEEDLES, **(extra or {})}
    for i in range(1, n + 1):
        text = texts.get(i, f"Filler message number {i} about the weather and lunch plans and other things.")
        conv.add(role="user" if i % 2 else "assistant", content=text, created_at=t0 + timedelta(minutes=i))
    return conv


def _passages(body: dict[str, Any]) -> list[tuple[int, str]]:
    prompt = body["messages"][-1]["content"]
    return [(int(n), text) for n, text in re.findall(r"^\[(\d+)\] (.*)$", prompt, re.MULTILINE)]


def _navy_first(body: dict[str, Any]) -> str:
    """A scripted model: the passage about navy first, the others in reverse."""
    found = _passages(body)
    return json.dumps([n for n, t in found if "navy" in t] + [n for n, t in reversed(found) if "navy" not in t])


def _recalled(ctx: lossless.AssembledContext) -> list[int]:
    return [item.first_seq for item in ctx.items if item.tier == "recall"]


def _llm(server: FakeOpenAIServer, **cfg: Any) -> dict[str, Any]:
    return {"rerank": "llm", "rerank_model": "ranker-1", "rerank_base_url": server.base_url, **cfg}


def test_the_order_follows_the_model(store_target: StoreTarget, fake_openai: FakeOpenAIServer) -> None:
    plain = _open(store_target("plain"))
    before = _fill(plain).assemble(budget_tokens=BUDGET, query=QUERY)
    plain.close()
    assert _recalled(before) == [9] and "navy" not in json.dumps(before.messages)  # bm25 likes repetition
    assert fake_openai.chat_requests() == []  # off by default: no request

    fake_openai.responder = _navy_first
    mem = _open(store_target("rr"), **_llm(fake_openai))
    ctx = _fill(mem).assemble(budget_tokens=BUDGET, query=QUERY)
    assert _recalled(ctx) == [15] and "navy blue" in json.dumps(ctx.messages)
    assert ctx.tokens <= BUDGET
    (request,) = fake_openai.chat_requests()
    assert request.body["model"] == "ranker-1"
    assert QUERY in request.body["messages"][-1]["content"]
    assert {t.split(": ", 1)[1] for _, t in _passages(request.body)} == set(NEEDLES.values())
    mem.close()


@pytest.mark.parametrize("failure", ["garbage", "prose-with-numbers", "out-of-range", "http-500", "malformed",
                                     "timeout"])
def test_a_failed_rerank_keeps_recalls_order(store_target: StoreTarget, fake_openai: FakeOpenAIServer,
                                             caplog: pytest.LogCaptureFixture, failure: str) -> None:
    plain = _open(store_target("plain"))
    expected = _fill(plain).assemble(budget_tokens=BUDGET, query=QUERY)
    plain.close()
    timeout = 5.0
    if failure == "garbage":
        fake_openai.enqueue_chat("I am not sure which of these passages is the most relevant one.")
    elif failure == "prose-with-numbers":
        fake_openai.enqueue_chat("Passage 2 talks about navy, and 3 about red.")  # never guessed from prose
    elif failure == "out-of-range":
        fake_openai.enqueue_chat("[7, 0, 12]")
    elif failure == "http-500":
        fake_openai.fail_next(1, status=500)
    elif failure == "malformed":
        fake_openai.respond_next({"unexpected": True})
    else:
        fake_openai.delay, timeout = 1.0, 0.2
    mem = _open(store_target("rr"), **_llm(fake_openai, rerank_timeout_seconds=timeout))
    with caplog.at_level(logging.WARNING, logger="lossless"):
        ctx = _fill(mem).assemble(budget_tokens=BUDGET, query=QUERY)
    assert ctx.messages == expected.messages and _recalled(ctx) == [9]
    assert len(fake_openai.chat_requests()) == 1  # one try, no retries
    assert any("rerank failed, recall keeps its own order" in r.getMessage() for r in caplog.records)
    mem.close()


def test_the_breaker_stops_asking_a_failing_model(store_target: StoreTarget, fake_openai: FakeOpenAIServer,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    fake_openai.fail_next(10, status=503)
    mem = _open(store_target("rr"), **_llm(fake_openai))
    conv = _fill(mem)
    with caplog.at_level(logging.WARNING, logger="lossless"):
        contexts = [conv.assemble(budget_tokens=BUDGET, query=QUERY) for _ in range(5)]
    assert len(fake_openai.chat_requests()) == 3  # the breaker opened after three failures in a row
    assert all(_recalled(c) == [9] for c in contexts)
    assert any("circuit breaker open" in r.getMessage() for r in caplog.records)
    mem.close()


def test_what_is_sent_is_bounded(store_target: StoreTarget, fake_openai: FakeOpenAIServer) -> None:
    long = " ".join(f"The dashboard colour note {k} goes on about shades and palettes and contrast." for k in range(40))
    extra = {i: f"{long} Item {i}." for i in range(1, 31)}
    fake_openai.responder = _navy_first
    mem = _open(store_target("rr"), **_llm(fake_openai, rerank_top_n=5, rerank_candidate_tokens=40))
    ctx = _fill(mem, extra, n=60).assemble(budget_tokens=600, query=QUERY)
    assert ctx.tokens <= 600
    (request,) = fake_openai.chat_requests()
    passages = _passages(request.body)
    counter = get_counter()
    assert [n for n, _ in passages] == [1, 2, 3, 4, 5]
    assert all(counter.count(text) <= 40 + 8 for _, text in passages)  # the role label and the cut marker
    assert request.body["max_tokens"] <= 16 + 4 * 5


def test_a_plugged_in_reranker_that_misbehaves_never_fails_assembly(store_target: StoreTarget,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    class Broken:
        name = "broken"

        def __init__(self, answer: object) -> None:
            self.answer = answer

        def rerank(self, query: str, texts: Sequence[str]) -> list[int]:
            if isinstance(self.answer, Exception):
                raise self.answer
            return self.answer  # type: ignore[return-value]

    mem = _open(store_target("rr"))
    conv = _fill(mem)
    expected = conv.assemble(budget_tokens=BUDGET, query=QUERY)
    for answer in (KeyError("bug"), [0, 0, 1], [5, 1, 0], []):
        mem.recaller.rerankers.override = Broken(answer)
        with caplog.at_level(logging.WARNING, logger="lossless"):
            assert conv.assemble(budget_tokens=BUDGET, query=QUERY).messages == expected.messages

    class Navy:
        name = "navy"

        def rerank(self, query: str, texts: Sequence[str]) -> list[int]:
            return sorted(range(len(texts)), key=lambda i: "navy" not in texts[i])

    mem.recaller.rerankers.override = Navy()  # a plug-in that answers well is followed
    assert _recalled(conv.assemble(budget_tokens=BUDGET, query=QUERY)) == [15]
    mem.close()


# -- settings -----------------------------------------------------------------------------


def test_wrong_settings_are_clear_errors_at_open(store_target: StoreTarget, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LOSSLESS_SUMMARIZER_MODEL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("LOSSLESS_SUMMARIZER_BASE_URL", raising=False)
    cases: list[tuple[dict[str, Any], str]] = [
        ({"rerank": "cohere"}, "rerank must be llm, cross-encoder or None"),
        ({"rerank": "llm", "rerank_top_n": 0}, "rerank_top_n must be a positive integer"),
        ({"rerank": "llm", "rerank_timeout_seconds": 0}, "rerank_timeout_seconds must be positive"),
        ({"rerank": "llm"}, "rerank='llm' needs a chat model"),
        ({"rerank": "llm", "rerank_model": "gpt-4o-mini"}, "no API key"),
        ({"rerank": "cross-encoder"}, "needs rerank_model"),
        ({"rerank": "cross-encoder", "rerank_model": str(tmp_path / "nowhere")}, "no cross-encoder model folder at"),
        ({"rerank": "cross-encoder", "rerank_model": str(tmp_path)}, "holds no config.json"),
    ]
    for i, (cfg, message) in enumerate(cases):
        with pytest.raises(ValidationError, match=re.escape(message)):
            lossless.open(store_target(f"bad{i}"), embedder=None, **cfg)


def test_the_chat_model_is_the_default_rerank_model(store_target: StoreTarget, fake_openai: FakeOpenAIServer,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOSSLESS_SUMMARIZER_BASE_URL", fake_openai.base_url)
    fake_openai.responder = _navy_first
    mem = _open(store_target("rr"), rerank="llm", model="gpt-4o-mini")  # no rerank_model: the chat model
    _fill(mem).assemble(budget_tokens=BUDGET, query=QUERY)
    assert [r.body["model"] for r in fake_openai.chat_requests()] == ["gpt-4o-mini"]
    mem.close()


@pytest.mark.torch
def test_a_folder_that_is_no_cross_encoder_fails_to_load_and_recall_keeps_its_order(
        store_target: StoreTarget, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """No cross-encoder model is on this machine (none may be downloaded): the loading
    path is tested up to the model's own loader, which refuses a folder without weights."""
    folder = tmp_path / "not-a-model"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "bert"}', encoding="utf-8")
    with pytest.raises(RerankError, match="cannot load the cross-encoder at"):
        CrossEncoderReranker(folder).rerank("q", ["a", "b"])
    plain = _open(store_target("plain"))
    expected = _fill(plain).assemble(budget_tokens=BUDGET, query=QUERY)
    plain.close()
    mem = _open(store_target("ce"), rerank="cross-encoder", rerank_model=str(folder))
    with caplog.at_level(logging.WARNING, logger="lossless"):
        assert _fill(mem).assemble(budget_tokens=BUDGET, query=QUERY).messages == expected.messages
    assert any("cannot load the cross-encoder" in r.getMessage() for r in caplog.records)
    mem.close()


# -- reading the model's answer -----------------------------------------------------------


@pytest.mark.parametrize(("answer", "order"), [
    ("[3, 1, 2]", [2, 0, 1]),
    ("```json\n[2,3]\n```", [1, 2, 0]),
    ("Ranking: [3] > [1] > [2]", [2, 0, 1]),
    ("1. [2]\n2. [3]", [1, 2, 0]),
    ("3, 1", [2, 0, 1]),
    ("3 > 3 > 9 > 1", [2, 0, 1]),
    ("The most relevant are [2, 3].", [1, 2, 0]),
])
def test_answers_read_leniently(answer: str, order: list[int]) -> None:
    assert parse_order(answer, 3) == order


@pytest.mark.parametrize("answer", ["", "none of them", "Passage 2 is best", "[0]", "[4, 5]", "42"])
def test_answers_without_an_ordering_are_refused(answer: str) -> None:
    with pytest.raises(RerankError):
        parse_order(answer, 3)


@given(st.integers(min_value=1, max_value=40).flatmap(
    lambda n: st.tuples(st.just(n), st.permutations(list(range(n))), st.sampled_from(["json", "brackets", "bare"]))))
def test_a_written_order_reads_back(case: tuple[int, list[int], str]) -> None:
    n, perm, style = case
    numbers = [p + 1 for p in perm]
    text = {"json": json.dumps(numbers), "brackets": " > ".join(f"[{k}]" for k in numbers),
            "bare": ", ".join(map(str, numbers))}[style]
    if n == 1 and style == "json":
        text = "[1]"
    assert parse_order(text, n) == perm


@given(st.text(max_size=200), st.integers(min_value=1, max_value=30))
def test_any_answer_is_an_order_or_refused(answer: str, n: int) -> None:
    try:
        order = parse_order(answer, n)
    except RerankError:
        return
    assert sorted(order) == list(range(n))
