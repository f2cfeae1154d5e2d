from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

import lossless
from lossless.testing import FakeSummarizer as FakeSummarizer  # its old home: still importable

from .backends import (  # noqa: F401
    PG_URL_ENV,
    STORE_MODES,
    _pg_borrowed,
    _pg_recycled,
    backend,
    backend_target,
    lasting_store_target,
    pg_server,
    pg_shared,
    pg_template,
    pg_url,
    scratch_store,
    shared_target,
    store_backend,
    store_mode,
    store_target,
)
from .backends import StoreTarget as StoreTarget

T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)

# Hypothesis: no deadline (a shared CI machine makes timings noisy; a slow example is not a
# bug) and no health check failing a test for slow data generation; the examples each test
# asks for are its own (``@settings(max_examples=…)``). ``--hypothesis-profile=dev`` runs fewer.
settings.register_profile("ci", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", parent=settings.get_profile("ci"), max_examples=20)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--store", choices=STORE_MODES, default="sqlite",
                     help="where per-test stores live: sqlite files (default) or databases on a PostgreSQL "
                          f"server (pgserver, or ${PG_URL_ENV}); tests marked for the other store are deselected")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Run the suite in one store mode: deselect (not skip) the tests that need the other
    store, the ``postgres`` ones in SQLite mode and the ``sqlite_only`` ones with PostgreSQL."""
    for item in items:
        uses_pg = {"pg_url", "pg_server", "pg_shared", "pg_template"} & set(getattr(item, "fixturenames", ()))
        if uses_pg and item.get_closest_marker("postgres") is None:
            raise pytest.UsageError(f"{item.nodeid} asks for {sorted(uses_pg)}: mark it @pytest.mark.postgres")
    other = "postgres" if store_mode(config) == "sqlite" else "sqlite_only"
    kept = [item for item in items if item.get_closest_marker(other) is None]
    if len(kept) < len(items):
        config.hook.pytest_deselected(items=[item for item in items if item.get_closest_marker(other)])
        items[:] = kept
    _deselect_torch(config, items)


def _deselect_torch(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``torch`` compare with sentence-transformers: deselected where it is
    not installed (the ``[test]`` extra has no torch), required with LOSSLESS_TEST_TORCH=1
    (.ci/run installs it)."""
    import importlib.util

    if importlib.util.find_spec("sentence_transformers") is not None:
        return
    marked = [item for item in items if item.get_closest_marker("torch")]
    if marked and os.environ.get("LOSSLESS_TEST_TORCH") == "1":
        raise pytest.UsageError("LOSSLESS_TEST_TORCH=1 but sentence-transformers is not installed "
                                "(pip install torch --index-url https://download.pytorch.org/whl/cpu "
                                "&& pip install -e '.[test,torch]')")
    if marked:
        config.hook.pytest_deselected(items=marked)
        items[:] = [item for item in items if not item.get_closest_marker("torch")]


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
    from lossless.compaction.worker import running_workers

    for worker in running_workers():
        worker.stop(10)


@pytest.fixture
def closing() -> Iterator[contextlib.ExitStack]:
    """Closes what a test opened through it when the test ends, e.g.
    ``client = closing.enter_context(openai.OpenAI(...))``. An SDK client left open sits in a
    reference cycle until the garbage collector frees it, and its pooled keep-alive socket can be
    finalized before the client closes it: an unclosed-socket ResourceWarning, an error in
    whichever later test the collector happened to run in."""
    with contextlib.ExitStack() as stack:
        yield stack


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """A SQLite file for one test (tests about the file itself; others use ``store_target``)."""
    return tmp_path / "memory.db"


@pytest.fixture
def mem(store_target: StoreTarget) -> Iterator[lossless.Memory]:  # noqa: F811 (the fixture)
    """A Memory on a fresh store of the suite's mode (SQLite file, or PostgreSQL database)."""
    m = lossless.open(store_target("memory"), context_window=4096)
    yield m
    m.close()


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

