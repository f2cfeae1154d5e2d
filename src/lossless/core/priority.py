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
query runs, :func:`pause_point` is one global read."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["mark_background", "pause_point", "query_running"]

MAX_WAIT = 0.1  # seconds a background thread waits at one pause point, at most (an assembly: 10-40 ms)
QUANTUM = 0.02  # seconds it then runs before it waits again: under a stream of queries it keeps >= 1/6 of its pace

_active = 0  # queries running now, in this process
_cond = threading.Condition()
_local = threading.local()


@contextmanager
def query_running() -> Iterator[None]:
    """Around a caller's query (an assembly, a search): background threads pause at their
    next pause point until it ends."""
    global _active
    with _cond:
        _active += 1
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
