"""The :class:`~lossless.summarize.base.Summarizer` contract, run over every implementation:
the offline extractive one, and the LLM ones (OpenAI, Anthropic) against the fake server
that speaks both wire formats, and llama.cpp over a fake ``llama_cpp`` module that answers
as ``Llama.create_chat_completion`` does (no GGUF model, no build of llama.cpp).

What ``summarize/base.py`` promises: a ``name``; ``summarize(request)`` returns a
:class:`SummaryResult` (text, optional model, metadata) for leaf and condensed requests,
in normal and aggressive mode, within ``target_tokens`` (strictly so for the extractive
summarizer, which says it never exceeds the budget); it mutates nothing; a failure is
raised, as a :class:`~lossless.LosslessError`, for the compaction engine to handle; a
:class:`GuardedSummarizer` can tell it is usable before it is called.
"""

from __future__ import annotations

import copy
import sys
import types
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from lossless.core.errors import LosslessError, SummarizerError
from lossless.core.tokens import get_counter
from lossless.summarize.base import (
    GuardedSummarizer,
    Summarizer,
    SummaryItem,
    SummaryRequest,
    SummaryResult,
)
from tests.fake_openai import FakeOpenAIServer, fake_openai, fake_summary

__all__ = ["fake_openai"]  # the fixture, imported for pytest to find

T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)
IMPLEMENTATIONS = ("extractive", "openai", "anthropic", "llama")


class _FakeLlama:
    """What ``llama_cpp.Llama`` offers the summarizer: a chat completion in OpenAI's shape
    (the fake server's summary of the prompt), or an error while ``failing`` is set."""

    failing = False

    def __init__(self, model_path: str, **options: Any) -> None:
        self.model_path, self.options = model_path, options

    def create_chat_completion(self, messages: list[dict[str, str]], max_tokens: int, **_: Any) -> dict[str, Any]:
        if _FakeLlama.failing:
            raise RuntimeError("llama_decode returned -1")
        text = fake_summary(messages[-1]["content"], max_tokens) or ""
        return {"choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 100, "completion_tokens": len(text.split())}}


class Subject:
    """One implementation under contract: the summarizer and a way to make it fail."""

    def __init__(self, kind: str, summarizer: Summarizer, fail: Callable[[], None] | None) -> None:
        self.kind, self.summarizer, self.fail = kind, summarizer, fail

    @property
    def strict_budget(self) -> bool:
        return self.kind == "extractive"


@pytest.fixture(params=IMPLEMENTATIONS)
def subject(request: pytest.FixtureRequest, fake_openai: FakeOpenAIServer, tmp_path: Path,
            monkeypatch: pytest.MonkeyPatch) -> Iterator[Subject]:
    kind = str(request.param)
    options: dict[str, Any] = {"timeout": 5.0, "max_retries": 0}
    if kind == "extractive":
        from lossless.summarize.extractive import ExtractiveSummarizer

        yield Subject(kind, ExtractiveSummarizer(), None)
        return
    made: Any
    if kind == "openai":
        from lossless.summarize.openai_chat import OpenAISummarizer

        made = OpenAISummarizer("gpt-test", base_url=fake_openai.base_url, **options)
        fail: Callable[[], None] = lambda: fake_openai.fail_next(10)  # noqa: E731
    elif kind == "anthropic":
        from lossless.summarize.anthropic_chat import AnthropicSummarizer

        made = AnthropicSummarizer("claude-test", base_url=fake_openai.root_url, **options)
        fail = lambda: fake_openai.fail_next(10)  # noqa: E731
    else:
        monkeypatch.setitem(sys.modules, "llama_cpp", types.SimpleNamespace(Llama=_FakeLlama))
        monkeypatch.setattr(_FakeLlama, "failing", False)
        from lossless.summarize.llamacpp import LlamaCppSummarizer

        model = tmp_path / "tiny.gguf"
        model.write_bytes(b"GGUF")  # only its existence is checked: the fake Llama loads nothing
        made = LlamaCppSummarizer(model)
        fail = lambda: setattr(_FakeLlama, "failing", True)  # noqa: E731
    yield Subject(kind, made, fail)
    made.close()


def _leaf(target: int = 160, mode: str = "normal") -> SummaryRequest:
    items = tuple(
        SummaryItem("message", f"msg_{i}", f"We decided to move the billing API to port {5000 + i} "
                    f"because the old one clashed with the cache. " * 3,
                    i, i, T0 + timedelta(minutes=i), T0 + timedelta(minutes=i), role="user" if i % 2 else "assistant")
        for i in range(1, 11)
    )
    return SummaryRequest(items, 0, target, get_counter(), mode=mode)  # type: ignore[arg-type]


def _condensed(target: int = 160) -> SummaryRequest:
    items = tuple(
        SummaryItem("summary", f"sum_{i}", f"- Billing API moved to port {5000 + i}; the cache clash is fixed.\n"
                    f"- Deploys wait for review {i}.", 10 * i + 1, 10 * i + 10, T0 + timedelta(hours=i),
                    T0 + timedelta(hours=i, minutes=9), depth=0)
        for i in range(6)
    )
    return SummaryRequest(items, 1, target, get_counter(), previous_summary="- Earlier: the team chose Postgres.")


def test_it_is_a_summarizer_with_a_name(subject: Subject) -> None:
    assert isinstance(subject.summarizer, Summarizer)
    assert isinstance(subject.summarizer.name, str) and subject.summarizer.name


@pytest.mark.parametrize("make", [_leaf, _condensed, lambda: _leaf(mode="aggressive")],
                         ids=["leaf", "condensed", "aggressive"])
def test_a_request_gets_a_summary_within_its_budget(subject: Subject, make: Callable[[], SummaryRequest]) -> None:
    request = make()
    result = subject.summarizer.summarize(request)
    assert isinstance(result, SummaryResult)
    assert isinstance(result.text, str) and result.text.strip()
    assert request.counter.count(result.text) <= request.target_tokens
    assert result.model is None or (isinstance(result.model, str) and result.model)
    assert isinstance(result.metadata, dict)
    assert "billing" in result.text.lower() or "port" in result.text.lower()  # about what it was given


def test_a_tight_budget_is_kept_where_promised(subject: Subject) -> None:
    request = _leaf(target=24)
    result = subject.summarizer.summarize(request)
    assert isinstance(result.text, str)
    if subject.strict_budget:
        assert request.counter.count(result.text) <= 24
    else:  # an LLM may overshoot: the compaction engine retries aggressively, then extracts
        assert result.text.strip()


def test_the_request_is_not_mutated(subject: Subject) -> None:
    request = _condensed()
    before = copy.deepcopy((request.items, request.depth, request.target_tokens, request.mode,
                            request.previous_summary, request.conversation_id))
    subject.summarizer.summarize(request)
    assert (request.items, request.depth, request.target_tokens, request.mode, request.previous_summary,
            request.conversation_id) == before


def test_nothing_to_summarize_is_an_empty_summary_or_a_lossless_error(subject: Subject) -> None:
    request = SummaryRequest((), 0, 100, get_counter())
    try:
        result = subject.summarizer.summarize(request)
    except LosslessError:
        return
    assert isinstance(result, SummaryResult) and result.text.strip() == ""


def test_a_failure_is_raised_as_a_summarizer_error(subject: Subject) -> None:
    if subject.fail is None:
        assert subject.kind == "extractive"  # offline: nothing can fail
        return
    subject.fail()
    with pytest.raises(SummarizerError):
        subject.summarizer.summarize(_leaf())


def test_a_guarded_summarizer_says_it_is_usable_before_any_call(subject: Subject) -> None:
    if not isinstance(subject.summarizer, GuardedSummarizer):
        assert subject.kind == "extractive"
        return
    assert subject.summarizer.unavailable() is None
    assert isinstance(subject.summarizer.breaker_state(), dict)


def test_the_extractive_summarizer_is_deterministic() -> None:
    from lossless.summarize.extractive import ExtractiveSummarizer

    one, two = ExtractiveSummarizer(), ExtractiveSummarizer()
    for make in (_leaf, _condensed):
        assert one.summarize(make()) == two.summarize(make()) == one.summarize(make())
