"""The caller first (lossless.core.priority): while a caller's query runs, the worker
thread waits at its pause points (bounded), and no other thread ever does."""

from __future__ import annotations

import threading
import time

import pytest

import lossless
from lossless.core import priority

from .conftest import StoreTarget


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


def test_a_query_that_starts_cancels_a_background_native_call_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(priority, "MAX_WAIT", 30.0)
    cancelled: list[str] = []
    inside = threading.Event()
    leave = threading.Event()
    told: list[bool] = []

    def work() -> None:
        priority.mark_background()
        with priority.interruptible(lambda: cancelled.append("bg")) as fired:
            inside.set()
            leave.wait(5)
            told.append(fired())
        with priority.interruptible(lambda: cancelled.append("late")):
            pass

    thread = threading.Thread(target=work)
    thread.start()
    assert inside.wait(5)
    with priority.interruptible(lambda: cancelled.append("caller")) as fired_here:  # not a background thread
        with priority.query_running(), priority.query_running():  # a nested query cancels nothing more
            pass
        assert not fired_here()
    leave.set()
    thread.join(5)
    assert cancelled == ["bg"] and told == [True]
    with priority.query_running():  # the calls have ended: nothing is cancelled
        pass
    assert cancelled == ["bg"] and not priority._cancels


def test_no_yielding_cancels_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(priority, "MAX_WAIT", 0.0)  # the benchmark's control: the worker never steps aside
    cancelled: list[int] = []
    inside, leave = threading.Event(), threading.Event()

    def work() -> None:
        priority.mark_background()
        with priority.interruptible(lambda: cancelled.append(1)):
            inside.set()
            leave.wait(5)

    thread = threading.Thread(target=work)
    thread.start()
    assert inside.wait(5)
    with priority.query_running():
        pass
    leave.set()
    thread.join(5)
    assert cancelled == []


def test_the_worker_store_steps_aside_between_statements_never_inside_a_transaction(
        store_target: StoreTarget, monkeypatch: pytest.MonkeyPatch) -> None:
    """A background thread's SQLite reads and writes wait for a caller's query before they
    start (the worker's SQL and the Python around it held the GIL the query needed); inside
    a transaction it never waits, so it holds no write lock (or pooled connection) while parked."""
    monkeypatch.setattr(priority, "MAX_WAIT", 30.0)
    with lossless.open(store_target("steps"), embedder=None, compaction="deferred") as mem:
        store = mem.store
        in_tx, go_on = threading.Event(), threading.Event()
        steps: list[str] = []

        def work() -> None:
            priority.mark_background()
            with store.transaction():
                in_tx.set()
                go_on.wait(5)
                store._query("SELECT 1")  # inside: no pause, though a query runs
                steps.append("in transaction")
            store._query("SELECT 1")  # outside: waits for the query
            steps.append("after")

        thread = threading.Thread(target=work)
        thread.start()
        assert in_tx.wait(5)
        with priority.query_running():
            go_on.set()
            thread.join(0.5)
            assert steps == ["in transaction"] and thread.is_alive()
        thread.join(5)
        assert steps == ["in transaction", "after"]


@pytest.mark.model
def test_a_model_batch_in_flight_gives_way_to_a_query_and_runs_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker's batch in ONNX Runtime is stopped when a caller's query starts (it held
    both cores for the query's whole time) and run again after it: the vectors are those
    of an uninterrupted run."""
    import numpy as np

    from lossless.embed.local import LocalEmbedder

    monkeypatch.setattr(priority, "MAX_WAIT", 30.0)
    emb = LocalEmbedder(batch_size=64)
    texts = [f"Long note {i}: " + "the depot in Porto checks every van before the morning run, " * 12
             for i in range(64)]  # one batch of 64 texts of ~200 word pieces: a few hundred ms
    expected = emb.embed(texts)  # on this thread: never interrupted
    assert emb._session is not None
    again: list[int] = []
    real_run = emb._run
    def run(session: object, part: object, options: object = None) -> object:
        if options is None:  # the run again (the first goes with options a query can stop)
            again.append(1)
        return real_run(session, part, options)

    monkeypatch.setattr(emb, "_run", run)
    out: list[np.ndarray] = []

    def work() -> None:
        priority.mark_background()
        out.append(emb.embed(texts))

    thread = threading.Thread(target=work)
    thread.start()
    deadline = time.monotonic() + 10
    while not priority._cancels and time.monotonic() < deadline:  # the batch is in ONNX Runtime
        time.sleep(0.001)
    assert priority._cancels
    with priority.query_running():
        time.sleep(0.05)
        assert thread.is_alive()  # stopped, and waiting for the query to end
    thread.join(30)
    assert again == [1]  # run again once, to its end
    assert np.allclose(out[0], expected, atol=1e-6)
