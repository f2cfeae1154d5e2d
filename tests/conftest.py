from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import lossless
from lossless.summarize.base import SummaryRequest, SummaryResult

from .backends import (  # noqa: F401
    _pg_recycled,
    backend,
    backend_target,
    pg_server,
    pg_shared,
    pg_template,
    pg_url,
    store_backend,
)

T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test ever touches the user's real lossless data."""
    home = tmp_path_factory.mktemp("lossless-home")
    monkeypatch.setenv("LOSSLESS_HOME", str(home))
    monkeypatch.delenv("LOSSLESS_DB", raising=False)
    # files lossless may rebuild (the exported ONNX query model): one folder per session
    monkeypatch.setenv("LOSSLESS_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "lossless-cache"))
    # keyword recall unless a test asks for vectors: the real model is exercised by the
    # recall tests, the rest stay fast
    monkeypatch.setenv("LOSSLESS_EMBEDDER", "none")


@pytest.fixture(autouse=True)
def _stop_workers() -> Iterator[None]:
    """A test that leaves its Memory open leaves its worker thread running: stop it, so it
    does not poll a store (or a PostgreSQL server) that the next tests tear down."""
    yield
    from lossless.worker import running_workers

    for worker in running_workers():
        worker.stop(10)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "memory.db"


@pytest.fixture
def mem(db_path: Path) -> Iterator[lossless.Memory]:
    m = lossless.open(db_path, context_window=4096)
    yield m
    m.close()


class FakeSummarizer:
    """A summarizer you can enqueue outputs (or exceptions) into; it records its calls.
    With nothing queued it answers with a short deterministic digest of its input."""

    name = "fake"

    def __init__(self) -> None:
        self.queue: list[str | BaseException] = []
        self.calls: list[SummaryRequest] = []

    def enqueue(self, *outputs: str | BaseException) -> None:
        self.queue.extend(outputs)

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        self.calls.append(request)
        if self.queue:
            out = self.queue.pop(0)
            if isinstance(out, BaseException):
                raise out
            return SummaryResult(out, model="fake-1")
        first, last = request.items[0].first_seq, request.items[-1].last_seq
        return SummaryResult(f"Span #{first}-#{last}: {len(request.items)} items.", model="fake-1")


def chat(n: int, *, start: datetime = T0, words: int = 40, tools_every: int = 0) -> list[dict[str, Any]]:
    """n messages of a plausible user/assistant exchange, with tool calls every k turns."""
    out: list[dict[str, Any]] = []
    i = 0
    while len(out) < n:
        t = start + timedelta(minutes=len(out))
        if tools_every and i % tools_every == tools_every - 1 and len(out) + 2 <= n:
            cid = f"call_{i}"
            out.append({"role": "assistant", "content": "", "created_at": t,
                        "tool_calls": [{"id": cid, "type": "function",
                                        "function": {"name": "run_tests", "arguments": f'{{"n": {i}}}'}}]})
            out.append({"role": "tool", "tool_call_id": cid, "content": f"{i} passed, 0 failed in {i % 9}.2s",
                        "created_at": t})
        elif i % 2 == 0:
            out.append({"role": "user", "name": "Maya", "created_at": t,
                        "content": f"Turn {i}: please check service-{i} on port {5000 + i}. " + "detail " * words})
        else:
            out.append({"role": "assistant", "created_at": t,
                        "content": f"Turn {i}: service-{i} is fine; latency {i % 13} ms. We decided to keep it. " + "note " * words})
        i += 1
    return out[:n]


def fill(conv: lossless.Conversation, messages: list[dict[str, Any]]) -> None:
    conv.add_many(messages)


os.environ.setdefault("HYPOTHESIS_PROFILE", "ci")
