"""Emergency compaction: a provider's "context too long" error makes lossless compact
harder, reassemble smaller and retry; then cut tool outputs; then give up clearly."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import openai
import pytest

import lossless
from lossless.agent.emergency import (
    RecoveryLog,
    context_limit_from_error,
    is_context_length_error,
    truncate_tool_outputs,
)
from lossless.core.errors import ContextOverflowError
from lossless.core.tokens import count_chat_tokens
from lossless.core.types import AssembledContext
from tests.conftest import StoreTarget, chat
from tests.fake_openai import FakeOpenAIServer, fake_openai

__all__ = ["fake_openai"]  # the fixture, imported for pytest to find

OPENAI_TOO_LONG = {
    "error": {
        "message": "This model's maximum context length is 4096 tokens. However, your messages resulted in "
                   "9000 tokens. Please reduce the length of the messages.",
        "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded",
    }
}


def _client(fake: FakeOpenAIServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=fake.base_url, api_key="test", max_retries=0, timeout=10)


def test_openai_context_length_error_is_recognised(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.respond_next(OPENAI_TOO_LONG, status=400)
    with pytest.raises(openai.BadRequestError) as caught:
        _client(fake_openai).chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert is_context_length_error(caught.value)


def test_other_provider_errors_are_not_context_errors(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.respond_next({"error": {"message": "Invalid API key", "type": "invalid_request_error",
                                        "code": "invalid_api_key"}}, status=401)
    with pytest.raises(openai.AuthenticationError) as caught:
        _client(fake_openai).chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert not is_context_length_error(caught.value)
    assert not is_context_length_error(ValueError("the model is busy"))


def test_the_limit_is_read_from_the_error_text() -> None:
    assert context_limit_from_error(RuntimeError(OPENAI_TOO_LONG["error"]["message"])) == (4096, 9000)
    assert context_limit_from_error(RuntimeError("prompt is too long: 210,455 tokens > 200000 maximum")) == (200000, 210455)
    assert context_limit_from_error(RuntimeError("too long")) == (None, None)


@pytest.mark.parametrize("text", [
    "prompt is too long: 210455 tokens > 200000 maximum",  # Anthropic
    "Input length 9000 exceeds the maximum input length",  # generic gateways
    "the request exceeds the context window of this model",
    "This model's maximum context length is 8192 tokens",  # OpenAI, without a code
])
def test_message_texts_are_recognised(text: str) -> None:
    assert is_context_length_error(RuntimeError(text))


# what the Chinese providers' OpenAI-compatible APIs answer (HTTP 400) to a prompt over the
# model's window, as their users report them, with the (limit, sent) each states
CHINESE_PROVIDERS_TOO_LONG = {
    "moonshot": ({"message": "Invalid request: Your request exceeded model token limit: 8192 (requested: 9000)",
                  "type": "invalid_request_error"}, (8192, 9000)),
    "dashscope": ({"code": "invalid_parameter_error", "type": "invalid_request_error",
                   "message": "<400> InternalError.Algo.InvalidParameter: Range of input length should be [1, 6000]"},
                  (6000, None)),
    "zhipu": ({"code": "1261", "message": "Prompt exceeds max length"}, (None, None)),
}


@pytest.mark.parametrize("provider", sorted(CHINESE_PROVIDERS_TOO_LONG))
def test_chinese_providers_context_errors_are_recognised(provider: str, fake_openai: FakeOpenAIServer) -> None:
    """Kimi, Qwen and GLM say "too long" in words of their own: read as any other 400, the
    proxy passed them on and the agent loop gave up, where an OpenAI error compacts and
    retries."""
    error, stated = CHINESE_PROVIDERS_TOO_LONG[provider]
    fake_openai.respond_next({"error": error}, status=400)
    with pytest.raises(openai.BadRequestError) as caught:
        _client(fake_openai).chat.completions.create(model="m", messages=[{"role": "user", "content": "你好"}])
    assert is_context_length_error(caught.value)
    assert context_limit_from_error(RuntimeError(error["message"])) == stated
    # a 400 about something else from the same providers is not one
    assert not is_context_length_error(RuntimeError("Invalid request: temperature must be in [0, 1]"))
    assert not is_context_length_error(RuntimeError("<400> InternalError.Algo.InvalidParameter: Range of "
                                                    "temperature should be [0.0, 2.0)"))


def test_http_413_and_chained_causes_are_recognised(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.respond_next({"error": {"message": "payload", "type": "x"}}, status=413)
    with pytest.raises(openai.APIStatusError) as caught:
        _client(fake_openai).chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert is_context_length_error(caught.value)
    try:
        try:
            raise RuntimeError("prompt is too long")
        except RuntimeError as inner:
            raise KeyError("wrapped") from inner
    except KeyError as outer:
        assert is_context_length_error(outer)


class StrictModel:
    """A model behind the fake OpenAI server that counts the prompt as its provider does
    (here: our counter plus a fixed overhead for tool schemas) and answers HTTP 400
    ``context_length_exceeded`` over its real window, through the real SDK."""

    def __init__(self, mem: lossless.Memory, fake: FakeOpenAIServer, window: int, overhead: int = 0,
                 error: dict[str, Any] | None = None) -> None:
        self.mem, self.fake, self.window, self.overhead = mem, fake, window, overhead
        self.error = error  # refuse with this error instead, one that names no sizes
        self.client = _client(fake)
        self.seen: list[int] = []

    def __call__(self, ctx: AssembledContext) -> str:
        size = count_chat_tokens(self.mem.counter, ctx.messages) + self.overhead
        self.seen.append(size)
        if size > self.window and self.error is not None:
            self.fake.respond_next({"error": self.error}, status=400)
        elif size > self.window:
            message = (f"This model's maximum context length is {self.window} tokens. However, your messages "
                       f"resulted in {size} tokens. Please reduce the length of the messages.")
            self.fake.respond_next({"error": {**OPENAI_TOO_LONG["error"], "message": message}}, status=400)
        else:
            self.fake.enqueue_chat(f"ok with {size} tokens")
        reply = self.client.chat.completions.create(model="m", messages=ctx.messages)  # type: ignore[arg-type]
        return str(reply.choices[0].message.content)


def test_recovery_compacts_and_retries_until_the_model_accepts(store_target: StoreTarget, tmp_path: Path, fake_openai: FakeOpenAIServer) -> None:
    mem = lossless.open(store_target("e"), embedder=None, context_window=8192, auto_compact=False)
    conv = mem.conversation("c")
    conv.add_many(chat(120, words=30))
    before = [m.content for m in conv.messages()]
    model = StrictModel(mem, fake_openai, window=3000, overhead=600)  # the configured window is a lie
    log = RecoveryLog()
    answer = conv.call_with_recovery(model, log_to=log)
    assert answer.startswith("ok")
    assert log.compactions >= 1 and log.attempts == log.compactions + 1
    assert log.budgets == sorted(log.budgets, reverse=True)
    assert model.seen[-1] <= 3000 < model.seen[0]
    # the emergency compaction recorded why it ran, and lost nothing
    reasons = {s.metadata.get("trigger") for s in conv.summaries()}
    assert "context-length error" in reasons
    assert [m.content for m in conv.messages()] == before
    assert mem.verify() == []


@pytest.mark.parametrize("language", ["zh", "en"])
def test_an_error_naming_no_limit_still_shrinks_what_is_sent(store_target: StoreTarget, fake_openai: FakeOpenAIServer,
                                                             language: str) -> None:
    """A window configured larger than the provider's, whose error says no size (Zhipu's
    "Prompt exceeds max length"): the whole history fit the budget and was sent, and each
    retry shrank the budget, not what was sent, so it sent as much again until lossless
    gave up (ContextOverflowError) with the model a few hundred tokens away."""
    mem = lossless.open(store_target("z"), embedder=None, context_window=128_000, auto_compact=False)
    conv = mem.conversation("c")
    line = ("第{}轮：我们比较了三家供应商的报价和交货时间，决定下周再开会。" if language == "zh"
            else "Round {}: we compared three suppliers' quotes and delivery times, and meet again next week.")
    conv.add_many([{"role": "user" if i % 2 == 0 else "assistant", "content": line.format(i) * 3}
                   for i in range(40)])
    before = [m.content for m in conv.messages()]
    model = StrictModel(mem, fake_openai, window=2000, error=CHINESE_PROVIDERS_TOO_LONG["zhipu"][0])
    log = RecoveryLog()
    answer = conv.call_with_recovery(model, log_to=log)
    assert answer.startswith("ok") and model.seen[-1] <= 2000 < model.seen[0] < 128_000
    assert all(later < earlier for earlier, later in itertools.pairwise(model.seen))
    assert [m.content for m in conv.messages()] == before and mem.verify() == []


def test_tool_outputs_are_cut_last_and_name_their_message(store_target: StoreTarget, tmp_path: Path, fake_openai: FakeOpenAIServer) -> None:
    mem = lossless.open(store_target("t"), embedder=None, context_window=32000, auto_compact=False)
    conv = mem.conversation("c")
    conv.add("user", "run the build and show me the log")
    conv.add("assistant", "", tool_calls=[{"id": "call_1", "type": "function",
                                           "function": {"name": "build", "arguments": "{}"}}])
    big = "\n".join(f"line {i}: compiling module_{i}.c ... ok" for i in range(1500))
    tool = conv.add("tool", big, tool_call_id="call_1")
    # the newest turn alone is too big for this model; the error names its window, so
    # the next budget fits it and the assembler abridges the tool output to match
    model = StrictModel(mem, fake_openai, window=2500)
    log = RecoveryLog()
    answer = conv.call_with_recovery(model, max_compactions=1, log_to=log)
    assert answer.startswith("ok") and log.attempts == 2 and log.budgets[1] <= 2500
    assert conv.messages()[-1].content == big  # the store still has every byte
    assert model.seen[-1] <= 2500
    # the marker tells the model where the whole output is
    ctx = conv.assemble()
    cut = truncate_tool_outputs(ctx.messages, mem.counter, 2000, ids=[tool.id if m.get("role") == "tool" else None
                                                                        for m in ctx.messages])
    tool_text = next(str(m["content"]) for m in cut if m.get("role") == "tool")
    assert tool.id in tool_text and "line 0:" in tool_text and "line 1499:" in tool_text


def test_gives_up_with_a_clear_error(store_target: StoreTarget, tmp_path: Path, fake_openai: FakeOpenAIServer) -> None:
    mem = lossless.open(store_target("g"), embedder=None, context_window=8192, auto_compact=False)
    conv = mem.conversation("c")
    conv.add_many(chat(40))
    model = StrictModel(mem, fake_openai, window=10, overhead=100)  # nothing fits
    log = RecoveryLog()
    with pytest.raises(ContextOverflowError, match="still refused"):
        conv.call_with_recovery(model, max_compactions=2, log_to=log)
    assert log.compactions == 2 and log.truncated and log.attempts == 4
    assert len(conv.messages()) == 40 and mem.verify() == []


def test_other_errors_propagate_at_once(store_target: StoreTarget, tmp_path: Path) -> None:
    mem = lossless.open(store_target("o"), embedder=None)
    conv = mem.conversation("c")
    conv.add("user", "hello")
    calls = []

    def broken(ctx: AssembledContext) -> str:
        calls.append(ctx)
        raise TimeoutError("the provider timed out")

    with pytest.raises(TimeoutError):
        conv.call_with_recovery(broken)
    assert len(calls) == 1 and conv.summaries() == []


def test_bad_arguments_are_refused(store_target: StoreTarget, tmp_path: Path) -> None:
    mem = lossless.open(store_target("b"), embedder=None)
    conv = mem.conversation("c")
    with pytest.raises(lossless.ValidationError, match="max_compactions"):
        conv.call_with_recovery(lambda ctx: 1, max_compactions=-1)
