"""Where the backlog's work runs for one open store: a worker thread, started by the
first write that queues work (or at open, when work is owed), or the caller's own thread
in :meth:`Scheduler.wait_idle`; and the foreground lease a caller holds while it does a
conversation's work itself (:meth:`Scheduler.foreground`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from lossless.compaction.base import WorkerEngine
from lossless.compaction.worker import Worker, WorkerStats, owed
from lossless.core.owners import live, new_owner, retire
from lossless.core.stats import WorkerCounters

__all__ = ["Scheduler"]

log = logging.getLogger("lossless")

# the conversations one foreground claim chooses among (see Scheduler._work_here): a claim
# reads each of them (64: 0.3 ms a claim, as with no list; 256: 1.3 ms)
_CLAIM_SLICE = 64


class Scheduler:
    """Runs one store's backlog. ``engine``: the parts the caller's thread works with;
    ``thread_engine``: those of a worker thread and whether the thread closes their store
    when it ends (a SQLite file: a connection of its own; default: ``engine``);
    ``start_thread``: whether writes may start a thread (``compaction="background"``)."""

    def __init__(self, engine: WorkerEngine, *, start_thread: bool,
                 thread_engine: Callable[[], tuple[WorkerEngine, bool]] | None = None) -> None:
        self.engine = engine
        self.backlog = engine.backlog
        self.start_thread = start_thread
        self._thread_engine = thread_engine or (lambda: (engine, False))
        self._thread_worker: Worker | None = None
        self._here_worker: Worker | None = None
        self._guard = threading.Lock()

    # -- the worker thread ---------------------------------------------------------------

    @property
    def thread_worker(self) -> Worker | None:
        """The worker thread's worker, once a write or :attr:`worker` made it."""
        return self._thread_worker

    @property
    def worker(self) -> Worker:
        """The worker that serves this store's backlog in a thread (made now if need be)."""
        with self._guard:
            if self._thread_worker is None:
                engine, owns = self._thread_engine()
                self._thread_worker = Worker(engine, owns_engine=owns)
            return self._thread_worker

    def start_if_owed(self) -> None:
        """At open: start the thread when work is owed from before (a crash, a close that
        did not wait, a process without the embedder)."""
        if self.start_thread and (self.backlog.pending_any() or self._queue_unembedded()):
            self.worker.start()

    def _queue_unembedded(self) -> bool:
        """Queue the conversations this embedder owes vectors that no backlog row asks for
        (stored by a process without it, :mod:`lossless.store.unembedded`); two index
        reads when nothing was stored since it last looked. True if any was queued."""
        recaller = self.engine.recaller
        try:
            return recaller.unembedded_unchecked() and bool(recaller.queue_unembedded())
        except Exception as exc:  # the embedder does not load, the store is busy: the worker looks again
            log.warning("lossless: looking for conversations without vectors failed: %s: %s", type(exc).__name__, exc)
            return False

    def writing(self) -> None:
        """A write is starting: the worker thread, if any, yields to it (see compaction/worker.py)."""
        worker = self._thread_worker
        if worker is not None:
            worker.writing()

    def work_queued(self, conversation_id: str, *, started: bool = True) -> None:
        """A write queued work for the worker (``started``: it said so with
        :meth:`writing` before): start the thread if need be, wake it."""
        if self.start_thread:
            fresh = self._thread_worker is None
            worker = self.worker
            if fresh and started:
                worker.writing()  # balances this write's notify below
            worker.start()
            worker.notify()

    def worker_stats(self) -> WorkerCounters:
        """The counters of this process's worker (the thread's, else the caller's)."""
        worker = self._thread_worker if self._thread_worker is not None else self._here_worker
        return worker.stats.as_dict() if worker is not None else WorkerStats().as_dict()

    def stop(self, timeout: float) -> bool:
        """Stop the thread after the step in hand, waiting at most ``timeout`` seconds;
        True when it stopped (or there was none)."""
        worker = self._thread_worker
        return worker is None or worker.stop(timeout)

    # -- the caller's thread -------------------------------------------------------------

    def wait_idle(self, timeout: float | None = None, *, conversations: Sequence[str] | None = None,
                  progress: Callable[[int, int], None] | None = None, retry_failed: bool = False) -> bool:
        """See :meth:`lossless.Memory.wait_idle`."""
        deadline = None if timeout is None else time.monotonic() + timeout
        ids = None if conversations is None else list(dict.fromkeys(conversations))
        total = 0
        reported = 0.0
        # where report() counts the work owed: the conversations left, or the slices in hand
        # of a catch-up on this thread (a count over every conversation given, twice a
        # second, made a long catch-up quadratic again)
        counted: list[Sequence[str] | None] = [ids]

        def report(force: bool = False) -> None:
            nonlocal total, reported
            if progress is None or (not force and time.monotonic() - reported < 0.5):
                return
            reported = time.monotonic()
            remaining = sum(owed(self.engine, cid) for cid in self.backlog.pending(counted[0])[:200])
            total = max(total, remaining)
            progress(total - remaining, total)

        retried: set[str] = set()  # retry_failed retries each failing row once per call
        # the conversations still looked at: narrowed to those left on each pass (a poll
        # costs what is left, not all that was given), all of them once more before returning
        watch = ids
        report(force=True)
        while True:
            left = self.backlog.pending(watch)
            if not left:
                if watch is not ids:
                    watch = ids  # a last look at all of them: work may have been queued again
                    continue
                report(force=True)
                return True
            if ids is not None:
                watch = counted[0] = left
            if retry_failed:
                again = [cid for cid in self.backlog.failing(left) if cid not in retried]
                if again:
                    self.backlog.retry_now(again)
                    retried.update(again)
            if not self.backlog.due(left):
                left = self.backlog.pending(left if ids is not None else None)  # (a row may have been finished)
                if not left:
                    continue
                if not self.backlog.due(left):
                    if set(left) <= set(self.backlog.failing(left)):
                        return False  # only failing rows are left, waiting for their retry
                    if deadline is not None and time.monotonic() >= deadline:
                        return False
                    time.sleep(0.05)  # a row put back for a moment (compacted elsewhere)
                    continue
            if deadline is not None and time.monotonic() >= deadline:
                return False
            worker = self._thread_worker
            if worker is not None and worker.running:
                worker.wait_turn(0.1 if deadline is None else max(0.0, min(0.1, deadline - time.monotonic())))
                report()
                continue
            self._work_here(None if ids is None else left, deadline, report, counted)
            if not self.backlog.due(self.backlog.pending(watch)):
                continue  # done, or only failures left: said above
            time.sleep(0.05)  # rows held by other processes' workers: give them a moment

    def _work_here(self, conversations: list[str] | None, deadline: float | None, report: Callable[[], None],
                   counted: list[Sequence[str] | None]) -> None:
        """Serve the backlog (of ``conversations``) on this thread until none is due, or
        until ``deadline``. The list is served a slice at a time (``counted[0]``, where
        ``report`` looks, follows it): a claim reads its whole list, so claiming from all
        of them each time made a catch-up over n conversations cost n² (10,000: 200 s)."""
        stop = threading.Event()
        timer = None
        if deadline is not None:
            timer = threading.Timer(max(0.0, deadline - time.monotonic()), stop.set)
            timer.daemon = True
            timer.start()
        try:
            parts = [None] if conversations is None else [
                conversations[i : i + _CLAIM_SLICE] for i in range(0, len(conversations), _CLAIM_SLICE)]
            for i, part in enumerate(parts):
                if part is not None and conversations is not None:
                    counted[0] = conversations[i * _CLAIM_SLICE : (i + 2) * _CLAIM_SLICE]
                self._here.run(stop=stop, until_idle=True, conversation_ids=part, on_turn=report, kind="foreground")
                if stop.is_set():
                    break
        finally:
            if timer is not None:
                timer.cancel()

    @property
    def _here(self) -> Worker:
        """A worker that runs on the calling thread, through the caller's own store."""
        if self._here_worker is None:
            self._here_worker = Worker(self.engine)
        return self._here_worker

    @contextmanager
    def foreground(self, conversation_id: str, wait: float = 60.0) -> Iterator[None]:
        """Hold the conversation's backlog row while the caller does its work in the
        foreground (``conv.index()``), so a worker does not do the same work at the same
        time; waits (up to ``wait`` seconds) for a worker that holds it to end its turn."""
        owner = new_owner()
        live(owner)
        claimed = False
        deadline = time.monotonic() + wait
        try:
            while True:
                claimed = bool(self.backlog.claim(owner, limit=1, conversation_ids=[conversation_id]))
                row = None if claimed else self.backlog.row(conversation_id)
                if claimed or row is None or not row.in_progress or time.monotonic() >= deadline:
                    break
                time.sleep(0.05)
            yield
        finally:
            if claimed:
                self.backlog.release(conversation_id, owner)
            retire(owner)
