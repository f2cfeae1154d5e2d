"""The caller first (lossless.core.priority): while a caller's query runs, the worker
thread waits at its pause points (bounded), and no other thread ever does."""

from __future__ import annotations

import threading
import time

import pytest

import lossless
from lossless.core import priority


def _background(results: list[float], started: threading.Event) -> None:
    priority.mark_background()
    started.set()
    t0 = time.monotonic()
    priority.pause_point()
    results.append(time.monotonic() - t0)


def test_a_background_thread_waits_for_the_query_and_no_longer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(priority, "MAX_WAIT", 30.0)
    done: list[float] = []
    started = threading.Event()
    with priority.query_running():
        thread = threading.Thread(target=_background, args=(done, started))
        thread.start()
        started.wait(5)
        thread.join(0.3)
        assert thread.is_alive() and not done  # parked while the query runs
        t0 = time.monotonic()
        priority.pause_point()  # this thread is not a background one: it never waits
        assert time.monotonic() - t0 < 1.0
    thread.join(5)
    assert done and done[0] < 10.0  # released when the query ended, not by the 30 s bound


def test_a_query_that_never_ends_does_not_stop_the_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(priority, "MAX_WAIT", 0.05)
    monkeypatch.setattr(priority, "QUANTUM", 60.0)
    done: list[float] = []
    with priority.query_running():
        started = threading.Event()

        def work() -> None:
            priority.mark_background()
            started.set()
            for _ in range(200):  # the first point waits its bound; the next ones run their quantum
                priority.pause_point()
            done.append(1.0)

        thread = threading.Thread(target=work)
        thread.start()
        thread.join(10)
        assert done == [1.0]


def test_no_query_no_wait_and_nested_queries_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(priority, "MAX_WAIT", 30.0)
    done: list[float] = []
    started = threading.Event()
    thread = threading.Thread(target=_background, args=(done, started))
    thread.start()
    thread.join(5)
    assert done and done[0] < 1.0  # nothing ran: it passed
    with priority.query_running(), priority.query_running():
        pass
    assert priority._active == 0


def test_the_worker_thread_is_the_one_that_steps_aside(tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker thread's compaction reaches pause points as a background thread, and an
    assembly on the caller's thread runs as a query."""
    import lossless.summarize.extractive as extractive

    seen: list[tuple[str, bool, int]] = []
    real = extractive.pause_point

    def spy() -> None:
        seen.append((threading.current_thread().name, bool(getattr(priority._local, "background", False)),
                     priority._active))
        real()

    monkeypatch.setattr(extractive, "pause_point", spy)
    with lossless.open(str(tmp_path) + "/p.db", context_window=2048, fresh_tail_count=8) as mem:
        conv = mem.conversation("c")
        conv.add_many([{"role": "user" if i % 2 == 0 else "assistant",
                        "content": f"message {i}: the cache on node {i % 7} was warmed at {i} seconds"}
                       for i in range(400)])
        assert mem.wait_idle(timeout=120)
        conv.assemble(1000, query="which node was warmed?")
    workers = [s for s in seen if s[0] == "lossless-worker"]
    assert workers and all(background for _, background, _ in workers)
    assert priority._active == 0  # every query that started ended
