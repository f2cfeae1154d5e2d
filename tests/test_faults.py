"""Summarizer and embedder faults: whatever a provider does (raise, hang past the
timeout, answer empty, garbage, too long, text SQLite cannot store, fail every other
call), the engine keeps working, falls back, loses nothing, and says what happened in
the summary's metadata (``errors``, ``fallback_level``) or a logged warning."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import lossless
from lossless.embed.base import Vectors
from lossless.summarize.base import SummaryRequest, SummaryResult
from lossless.summarize.llm import LLMSummarizer
from lossless.summarize.openai_chat import OpenAISummarizer
from lossless.testing import HashEmbedder, ScriptedSummarizer
from tests.conftest import StoreTarget, chat
from tests.fake_openai import FakeOpenAIServer, _Failure

# -- an in-process summarizer that misbehaves on cue ------------------------------------


def _good(request: SummaryRequest) -> SummaryResult:
    return SummaryResult(f"Span #{request.items[0].first_seq}-#{request.items[-1].last_seq}: service checks.",
                         model="scripted-1", metadata={"calls": 1})


def _raise(_n: int, _r: SummaryRequest) -> Any:
    raise RuntimeError("provider exploded")


def _raise_once(n: int, r: SummaryRequest) -> Any:
    if n == 1:
        raise ConnectionError("connection reset by peer")
    return _good(r)


def _every_other(n: int, r: SummaryRequest) -> Any:
    if n % 2:
        raise TimeoutError("timed out")
    return _good(r)


def _slow(_n: int, r: SummaryRequest) -> Any:
    time.sleep(0.02)
    return _good(r)


FAULTS: dict[str, tuple[Callable[[int, SummaryRequest], Any], set[int], str | None]] = {
    # name: (behaviour, the fallback levels expected, a phrase every summary's errors hold)
    "raises-always": (_raise, {2}, "RuntimeError: provider exploded"),
    "raises-once": (_raise_once, {0, 1}, None),
    "summarizer-error": (lambda n, r: (_ for _ in ()).throw(lossless.SummarizerError("quota")), {2}, "quota"),
    "fails-every-other-call": (_every_other, {1}, "TimeoutError: timed out"),
    "slow": (_slow, {0}, None),
    "empty": (lambda n, r: SummaryResult(""), {2}, "output of 0 tokens"),
    "whitespace": (lambda n, r: SummaryResult(" \n\t "), {2}, "output of 0 tokens"),
    "text-is-none": (lambda n, r: SummaryResult(None), {2}, "output of 0 tokens"),  # type: ignore[arg-type]
    "over-long": (lambda n, r: SummaryResult("very long rambling words " * 2000), {2}, "does not fit"),
    "not-a-result": (lambda n, r: "a bare string, not a SummaryResult", {2}, "not a SummaryResult"),
    "none-returned": (lambda n, r: None, {2}, "not a SummaryResult"),
    "lone-surrogate": (lambda n, r: SummaryResult("Summary with a broken \ud800 character."), {2}, "UTF-8"),
    "nul-byte": (lambda n, r: SummaryResult("Summary with a \x00 NUL byte."), {2}, "NUL byte"),
    "bad-metadata": (lambda n, r: SummaryResult("Fine text about services.", metadata={"calls": "lots"}),
                     {0}, None),
    "metadata-not-a-dict": (lambda n, r: SummaryResult("Fine text.", metadata="oops"),  # type: ignore[arg-type]
                            {2}, "not a dict"),
}


def _fingerprint(conv: lossless.Conversation) -> list[tuple[int, str, Any]]:
    return [(m.seq, m.role, m.content) for m in conv.messages()]


@pytest.mark.parametrize("fault", list(FAULTS))
def test_summarizer_fault_falls_back_and_records_it(store_target: StoreTarget, tmp_path: Path, fault: str) -> None:
    behave, levels, phrase = FAULTS[fault]
    summarizer = ScriptedSummarizer(behave)
    with lossless.open(store_target("f"), summarizer=summarizer, embedder=None, context_window=2048,
                       fresh_tail_count=4) as mem:
        conv = mem.conversation("c")
        messages = chat(60, words=30, tools_every=5)
        conv.add_many(messages)  # auto-compaction runs into the fault here
        conv.compact(full=True)
        assert mem.verify() == []
        assert [m.content for m in conv.messages()] == [m["content"] for m in messages]
        summaries = [s for s in conv.summaries() if not s.root]  # (the root copies the one frontier node)
        assert summaries and summarizer.calls > 0
        assert {s.fallback_level for s in summaries} == levels
        for s in summaries:
            assert s.metadata["fallback_level"] == s.fallback_level
            if s.fallback_level:
                assert s.metadata["errors"], s.metadata
                if phrase:
                    assert any(phrase in e for e in s.metadata["errors"]), s.metadata["errors"]
            else:
                assert "errors" not in s.metadata or fault in ("raises-once", "fails-every-other-call")
        assert len(conv.frontier()) == 1
        assert conv.assemble(budget_tokens=1000, query="service port").tokens <= 1000
        # the engine goes on working after the fault
        conv.add("user", "one more message after the fault")
        assert conv.messages()[-1].content == "one more message after the fault"


# -- the LLM summarizer against a fake provider -----------------------------------------


@dataclass
class FlakyServer(FakeOpenAIServer):
    """Fails every other request with a 500 (the first one fails)."""

    _seen: int = 0

    def _next_override(self) -> Any:
        with self._lock:
            self._seen += 1
            if self._seen % 2:
                return _Failure(500, "flaky upstream", {})
        return super()._next_override()


@pytest.fixture
def flaky() -> Iterator[FlakyServer]:
    server = FlakyServer()
    server.start()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def fake() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture(autouse=True)
def _no_provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "LOSSLESS_SUMMARIZER_MODEL"):
        monkeypatch.delenv(name, raising=False)


def _llm(server: FakeOpenAIServer, **options: Any) -> LLMSummarizer:
    settings: dict[str, Any] = {"timeout": 2.0, "max_retries": 0, "context_window": 4000, **options}
    return OpenAISummarizer("gpt-test", base_url=server.base_url, **settings)


def _compact_through(summarizer: LLMSummarizer, path: Path) -> list[lossless.Summary]:
    messages = chat(36, words=30, tools_every=5)
    try:
        with lossless.open(path, summarizer=summarizer, context_window=2048, auto_compact=False,
                           embedder=None) as mem:
            conv = mem.conversation("c")
            conv.add_many(messages)
            assert conv.compact(force=True).leaves
            conv.compact(full=True)
            assert mem.verify() == []
            assert [m.content for m in conv.messages()] == [m["content"] for m in messages]
            assert len(conv.frontier()) == 1
            return [s for s in conv.summaries() if not s.root]  # (the root copies the one frontier node)
    finally:
        summarizer.close()


def test_provider_failing_every_other_call_uses_the_fallback_model(store_target: StoreTarget, flaky: FlakyServer, tmp_path: Path) -> None:
    summaries = _compact_through(_llm(flaky, fallback_model="backup-model"), store_target("a"))
    assert {s.fallback_level for s in summaries} == {0}
    assert all(s.metadata["used_fallback_model"] and s.metadata["calls"] == 2 for s in summaries)
    assert {s.metadata["model"] for s in summaries} == {"backup-model"}


def test_provider_failing_every_other_call_without_a_fallback_model(store_target: StoreTarget, flaky: FlakyServer, tmp_path: Path) -> None:
    summaries = _compact_through(_llm(flaky), store_target("b"))
    assert {s.fallback_level for s in summaries} == {1}  # the aggressive retry got through
    for s in summaries:
        assert any("500" in e or "flaky upstream" in e for e in s.metadata["errors"]), s.metadata["errors"]
        assert s.metadata["calls"] == 2 and s.metadata["attempts"] == 2


def test_provider_hanging_past_the_timeout(store_target: StoreTarget, fake: FakeOpenAIServer, tmp_path: Path) -> None:
    fake.delay = 1.0
    t0 = time.monotonic()
    summaries = _compact_through(_llm(fake, timeout=0.1), store_target("c"))
    fake.delay = 0.0
    assert {s.fallback_level for s in summaries} == {2}
    for s in summaries:
        assert s.metadata["errors"] and all("timed out" in e.lower() or "circuit breaker open" in e
                                            for e in s.metadata["errors"])
    # three timeouts in a row open the breaker: the summaries after that ask nobody
    assert sum("timed out" in e.lower() for s in summaries for e in s.metadata["errors"]) == 3
    assert any(s.metadata["errors"][0].startswith("not asked") for s in summaries)
    assert time.monotonic() - t0 < 30  # every call gave up after its timeout


@pytest.mark.parametrize(
    ("reply", "level"),
    [
        (b"this is not JSON at all", 1),
        ({"id": "x", "object": "chat.completion", "choices": []}, 1),  # no choices
        ({"id": "x", "object": "chat.completion", "created": 0, "model": "gpt-test", "choices": [
            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Broken \ud800 text"}}]},
         1),
    ],
    ids=["not-json", "no-choices", "lone-surrogate"],
)
def test_provider_garbage_reply(store_target: StoreTarget, fake: FakeOpenAIServer, tmp_path: Path, reply: Any, level: int) -> None:
    fake.respond_next(reply)  # the first call gets garbage; the aggressive retry a real answer
    summaries = _compact_through(_llm(fake), store_target("d"))
    first = min(summaries, key=lambda s: (s.depth, s.first_seq))
    assert first.fallback_level == level and first.metadata["errors"]
    assert {s.fallback_level for s in summaries} <= {0, level}


# -- embedders ----------------------------------------------------------------------------


class BrokenEmbedder(HashEmbedder):
    """A HashEmbedder that breaks in one chosen way while ``broken`` is set."""

    def __init__(self, how: str) -> None:
        super().__init__()
        self.how = how
        self.broken = True
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.calls += 1
        good = super().embed(texts)
        if not self.broken or (self.how == "every-other-call" and self.calls % 2 == 0):
            return good
        if self.how in ("raises", "every-other-call"):
            raise RuntimeError("embedding service unavailable")
        if self.how == "wrong-dim":
            return np.hstack([good, good[:, :3]]).astype(np.float32)
        if self.how == "too-few-rows":
            return good[:-1]
        if self.how == "nan":
            good[:, 5] = math.nan
            return good
        if self.how == "inf":
            good[0, 0] = math.inf
            return good
        if self.how == "not-an-array":
            return "vectors"  # type: ignore[return-value]
        raise AssertionError(self.how)


EMBEDDER_FAULTS = ["raises", "every-other-call", "wrong-dim", "too-few-rows", "nan", "inf", "not-an-array"]


def _store_snapshot(mem: lossless.Memory) -> tuple[Any, ...]:
    q = mem.store._query
    return (q("SELECT seq, content_hash FROM messages ORDER BY conversation_id, seq"),
            q("SELECT id, content FROM summaries ORDER BY id"))


@pytest.mark.parametrize("how", EMBEDDER_FAULTS)
def test_embedder_fault_during_assembly_falls_back_to_keywords(store_target: StoreTarget,
    tmp_path: Path, how: str, caplog: pytest.LogCaptureFixture
) -> None:
    emb = BrokenEmbedder(how)
    mem = lossless.open(store_target("e"), embedder=emb, context_window=2048, fresh_tail_count=4)
    try:
        conv = mem.conversation("c")
        conv.add_many(chat(50, words=25))
        conv.add("user", "Which port did we pick for service-7 back then?")
        # the worker compacts, but its embedding fails: the work stays owed, with the error
        assert not mem.wait_idle(30)
        assert conv.summaries() and "embedder" in (conv.backlog().last_error or "")
        before = _store_snapshot(mem)
        with caplog.at_level(logging.WARNING, logger="lossless"):
            ctx = conv.assemble(budget_tokens=1500, query="service-7 port 5007")
        assert ctx.tokens <= 1500
        if how != "every-other-call":
            assert any("keyword" in r.getMessage() for r in caplog.records), caplog.text
            assert any(i.tier == "recall" for i in ctx.items)  # keyword recall still found it
        assert _store_snapshot(mem) == before
        # nothing broken was cached or indexed
        for (blob,) in mem.store._query("SELECT vector FROM embedding_cache"):
            vec = np.frombuffer(blob, dtype="<f4")
            assert vec.shape == (emb.dim,) and np.isfinite(vec).all()
        assert mem.verify() == []
        # hybrid search falls back the same way; semantic says what went wrong
        assert conv.search("service-7 port", mode="hybrid")
        if how != "every-other-call":
            with pytest.raises(lossless.LosslessError, match="embedder"):
                conv.search("service-7 port", mode="semantic")
        # once the embedder works again, the worker makes the vectors and vector recall comes back
        emb.broken = False
        assert mem.wait_idle(30, retry_failed=True)
        conv.assemble(budget_tokens=1500, query="service-7 port 5007")
        assert conv.search("service-7 port", mode="semantic")
        assert mem.verify() == []
    finally:
        mem.close()


@pytest.mark.parametrize("how", ["raises", "nan", "wrong-dim"])
def test_embedder_fault_in_long_term_memories(store_target: StoreTarget, tmp_path: Path, how: str) -> None:
    emb = BrokenEmbedder(how)
    mem = lossless.open(store_target("m"), embedder=emb)
    try:
        record = mem.memories.add("Prefers metric units for every report", kind="preference", user="ann")
        found = mem.memories.search("metric units", user="ann")
        assert [r.id for r in found] == [record.id]
        for (blob,) in mem.store._query("SELECT vector FROM memory_vectors"):
            vec = np.frombuffer(blob, dtype="<f4")
            assert vec.shape == (emb.dim,) and np.isfinite(vec).all()
    finally:
        mem.close()
