"""The caller first: background threads step aside while a caller's query runs.

The worker thread compacts in pure Python (the extractive summarizer) and so shares the
GIL with the process's callers: an assembly that takes 15 ms alone took 30-38 ms while the
worker caught up on a big backlog, because the interpreter hands the GIL back and forth
every few milliseconds. The worker could only yield between summaries (~100 ms each).

Here a query marks itself with :func:`query_running` and the worker's long loops call
:func:`pause_point`, which on a background thread (:func:`mark_background`) waits while a
query runs. It never waits long: at most ``MAX_WAIT`` seconds (0.1) at a time, and after a wait
it runs at least ``QUANTUM`` seconds before it waits again, so a stream of queries slows
the worker down but does not stop it. On any thread not marked background, and when no
query runs, :func:`pause_point` is one global read.

A pause point cannot stop work already in native code: a model batch in flight kept both
cores for its 20-60 ms while a query ran beside it (an assembly at 50k messages: 35 ms
against 19 ms with the worker held still). So a background thread may run such a call
:func:`interruptible`: a query that starts meanwhile cancels it, and the thread does it
again once the query is done. Each call is cancelled at most once (the second run goes to
its end), so a stream of queries slows the work but never starves it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["interruptible", "mark_background", "pause_point", "query_running"]

MAX_WAIT = 0.1  # seconds a background thread waits at one pause point, at most (an assembly: 10-40 ms)
QUANTUM = 0.02  # seconds it then runs before it waits again: under a stream of queries it keeps >= 1/6 of its pace

_active = 0  # queries running now, in this process
_cond = threading.Condition()
_local = threading.local()
_cancels: set[Callable[[], None]] = set()  # native calls a starting query cancels (under _cond)


@contextmanager
def query_running() -> Iterator[None]:
    """Around a caller's query (an assembly, a search): background threads pause at their
    next pause point until it ends."""
    global _active
    with _cond:
        _active += 1
        cancels = list(_cancels) if _active == 1 and MAX_WAIT > 0 else []  # MAX_WAIT 0: no yielding at all
    for cancel in cancels:
        cancel()
    try:
        yield
    finally:
        with _cond:
            _active -= 1
            if _active == 0:
                _cond.notify_all()


def mark_background() -> None:
    """The calling thread is a background one: it pauses for queries at pause points."""
    _local.background = True
    _local.ran_from = 0.0


def pause_point() -> None:
    """On a background thread, while a query runs: wait for it to end (bounded)."""
    if not _active or not getattr(_local, "background", False):
        return
    now = time.monotonic()
    if now - _local.ran_from < QUANTUM:
        return
    deadline = now + MAX_WAIT
    with _cond:
        while _active:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            _cond.wait(left)
    _local.ran_from = time.monotonic()


@contextmanager
def interruptible(cancel: Callable[[], None]) -> Iterator[Callable[[], bool]]:
    """Around one native call on a background thread: a query that starts meanwhile calls
    ``cancel`` (which makes the call stop early, e.g. ONNX Runtime's ``terminate``). Yields
    a function telling whether it did; the caller then waits at :func:`pause_point` and
    runs the call again, uninterruptible. On other threads nothing is ever cancelled."""
    if not getattr(_local, "background", False):
        yield lambda: False
        return
    fired = threading.Event()

    def fire() -> None:
        fired.set()
        cancel()

    with _cond:
        _cancels.add(fire)
    try:
        yield fired.is_set
    finally:
        with _cond:
            _cancels.discard(fire)
