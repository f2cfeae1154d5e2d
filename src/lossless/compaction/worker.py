"""The background worker: compaction and embedding off the caller's path.

A write stores its messages and their full-text rows, queues the conversation in the
backlog (:mod:`lossless.store.backlog`) in the same transaction, and returns. The
worker owes each queued conversation three things, done in turns of ``slice_seconds``:

1. retrieval units cut from the new messages and embedded (when an embedder is set);
2. compaction when a trigger fires (the long-term memory flush runs before each leaf,
   as it always has);
3. nothing else: the row is then deleted, unless messages arrived meanwhile.

A turn that runs out of time gives the row back (it waits behind every other due row,
so one busy conversation does not starve the rest); a turn that fails keeps the row
with its error and retries after a growing delay. Every step is its own transaction:
a worker killed at any point leaves at most the step it was on undone, and the next
worker (the next ``open()``, or another process) carries on from the backlog.

Three ways to run it:

* ``compaction="background"`` (the default): :class:`Worker` is a thread of the open
  :class:`~lossless.Memory`, started by the first write (or at open, when work is owed)
  and stopped by ``close()``, which waits for the step in hand, never for the backlog.
* ``lossless worker``: a process of its own, for servers and for PostgreSQL, where any
  number of them share the backlog through their claims (and the compaction lease).
* :meth:`lossless.Memory.wait_idle` runs the work on the caller's thread when no worker
  thread does, e.g. the CLI after an import, with a progress bar
  (:mod:`lossless.compaction.scheduler` decides which).

The worker takes a :class:`~lossless.compaction.base.WorkerEngine`: the parts of one
store it works with, never the facade.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lossless.core.owners import live, new_owner, retire
from lossless.core.priority import mark_background
from lossless.core.stats import WorkerCounters
from lossless.embed.base import Warmable, warm_done, warm_due
from lossless.store import unembedded
from lossless.store.backlog import WORKER_HEARTBEAT_SECONDS, Claim

if TYPE_CHECKING:
    from lossless.compaction.base import WorkerEngine

__all__ = ["Worker", "WorkerStats", "owed", "owed_parts", "running_workers"]

log = logging.getLogger("lossless")

CUT_BATCH = 500  # messages cut into units per step
# units embedded per step (what close() and a turn's end may wait for: ~0.7 s of the local
# model on 2 cores), handed to the embedder at once: it runs them in batches of alike length,
# and 256 at a time made a 419-turn chat searchable 9 % sooner than 64 (bench_searchable)
EMBED_BATCH = 256
# a conversation that owes fewer units than EMBED_BATCH takes up to GROUP - 1 other due
# conversations along for one embedder call (each then has its turn as before): the units
# of many short conversations (an import) run ~25 % faster together than 27 at a time
GROUP = 16
MAX_RETRY_SECONDS = 300.0
# A worker thread shares the interpreter (and its GIL) with the code that writes: while
# writes keep arriving it works in short turns and waits for a pause between them, so a
# stream of writes is not slowed by compaction running beside it (the backlog waits;
# assembly does not need it). Without a pause it still works BUSY_TURN_SECONDS in every
# YIELD_SECONDS + BUSY_TURN_SECONDS, so a store that never rests is never left behind for good.
SETTLE_SECONDS = 0.05  # no write for this long: a pause
YIELD_SECONDS = 1.0
BUSY_TURN_SECONDS = 0.25
# how often a worker writes its row in the workers table while what it reports changes;
# unchanged (idle), it writes only once a WORKER_HEARTBEAT_SECONDS (store/backlog.py)
REPORT_SECONDS = 5.0
# how often a worker looks for conversations its embedder owes vectors that no backlog row
# asks for (stored by a process without one: store/unembedded.py); two index reads when
# nothing was stored since the last look
UNEMBEDDED_SECONDS = 30.0


@dataclass
class WorkerStats:
    """What a worker has done since it started (``stats()``, ``/v1/lossless/health``)."""

    state: str = "stopped"  # stopped | idle | working | stopping
    started_ts: float | None = None
    turns: int = 0  # conversations served (one turn each)
    finished: int = 0  # conversations whose work was all done
    summaries: int = 0
    units_embedded: int = 0
    messages_indexed: int = 0
    errors: int = 0
    memories_forgotten: int = 0  # by the forgetting policy
    last_error: str | None = None
    busy_seconds: float = 0.0
    current: str | None = None  # the conversation in hand
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def as_dict(self) -> WorkerCounters:
        with self.lock:
            busy = self.busy_seconds
            return {
                "state": self.state,
                "uptime_seconds": round(time.time() - self.started_ts, 1) if self.started_ts else 0.0,
                "busy_seconds": round(busy, 2),
                "turns": self.turns,
                "conversations_finished": self.finished,
                "summaries_written": self.summaries,
                "units_embedded": self.units_embedded,
                "messages_indexed": self.messages_indexed,
                "errors": self.errors,
                "memories_forgotten": self.memories_forgotten,
                "last_error": self.last_error,
                "current": self.current,
                # the catch-up rate: what a busy second gets done
                "units_per_busy_second": round(self.units_embedded / busy, 1) if busy > 0 else 0.0,
                "summaries_per_busy_second": round(self.summaries / busy, 2) if busy > 0 else 0.0,
            }


def owed(engine: WorkerEngine, conversation_id: str) -> int:
    """The work still owed to a conversation, in one unit for progress bars: messages not
    cut into retrieval units, units without a vector (both only with an embedder), and
    raw messages past the fresh tail when a compaction trigger fires."""
    return sum(owed_parts(engine, conversation_id))


def owed_parts(engine: WorkerEngine, conversation_id: str) -> tuple[int, int]:
    """:func:`owed` in its two parts: (units to embed, messages to compact). A message
    not cut into units yet counts as one unit to embed; text the model does not read
    (a Chinese message for an English model) counts as none: it is passed without the
    model (:meth:`Recaller.owed_units`)."""
    embed = compact = 0
    recaller = engine.recaller
    if recaller.embedder is not None:  # text the model does not read is owed nothing
        embed = recaller.owed_units(conversation_id)
    if engine.config.auto_compact and engine.compactor.trigger(conversation_id) is not None:
        raw = engine.store.last_seq(conversation_id) - engine.store.covered_seq(conversation_id)
        compact = max(0, raw - engine.config.fresh_tail_count)
    return embed, compact


_THREADS: weakref.WeakSet[Worker] = weakref.WeakSet()  # workers whose thread was started


def running_workers() -> list[Worker]:
    """The workers of this process whose thread is running (tests stop them between tests)."""
    return [w for w in list(_THREADS) if w.running]


class Worker:
    """Serves the backlog of one store. ``engine`` holds the store, compactor and recaller
    it uses: for a worker thread on a SQLite file, a second set of them on a connection
    of its own, so its reads never wait for the caller's writes."""

    def __init__(self, engine: WorkerEngine, *, slice_seconds: float = 2.0, poll_seconds: float = 1.0,
                 lease_seconds: float = 300.0, owns_engine: bool = False) -> None:
        self.engine = engine
        self.backlog = engine.backlog
        self.slice_seconds = slice_seconds
        self.poll_seconds = poll_seconds
        self.lease_seconds = lease_seconds
        self.owns_engine = owns_engine  # close the engine's store when the thread ends
        self.stats = WorkerStats()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._done = threading.Condition()  # notified after every turn
        # failures that could not be written (the store was failing too): written later, so a
        # claim is never left to lapse on its own while this worker lives
        self._unrecorded: dict[str, tuple[str, str, float]] = {}
        self._last_write = 0.0
        self._reported: tuple[str, float] | None = None  # what the row says, and when it was written (monotonic)
        self._policy_at: float | None = None  # when the forgetting policy last ran (monotonic)
        self._unembedded_at: float | None = None  # when it last looked for unembedded conversations
        self._writes = 0  # writes of this process in progress
        self._writes_guard = threading.Lock()

    # -- a thread of its own -------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        if self.running:
            return
        self._stop.clear()
        embedder = self.engine.embedder
        if isinstance(embedder, Warmable):
            warm_due(embedder)  # the thread loads it once the writes pause; assembly recalls by keywords till then
        self._thread = threading.Thread(target=self._thread_main, name="lossless-worker", daemon=True)
        try:
            self._thread.start()
        except BaseException:
            if isinstance(embedder, Warmable):
                warm_done(embedder)
            raise
        _THREADS.add(self)

    def writing(self) -> None:
        """A write of this process is starting (a bulk add_many can take a while)."""
        with self._writes_guard:
            self._writes += 1

    def notify(self) -> None:
        """A write of this process ended and queued work: wake the thread if it sleeps."""
        with self._writes_guard:
            self._writes = max(0, self._writes - 1)
        self._last_write = time.monotonic()
        self._wake.set()

    def _writing(self) -> bool:
        """Whether this process is writing, or wrote a moment ago (a stream of writes)."""
        return self._writes > 0 or time.monotonic() - self._last_write < SETTLE_SECONDS

    def _wait_for_a_pause(self, stop: threading.Event) -> None:
        deadline = time.monotonic() + YIELD_SECONDS
        while self._writing() and time.monotonic() < deadline and not stop.is_set():
            stop.wait(SETTLE_SECONDS)

    def stop(self, timeout: float | None = 10.0) -> bool:
        """Ask the thread to stop after the step in hand and wait up to ``timeout``
        seconds; True when it stopped. What is left stays in the backlog."""
        thread = self._thread
        if thread is None:
            return True
        with self.stats.lock:
            if self.stats.state != "stopped":
                self.stats.state = "stopping"
        self._stop.set()
        self._wake.set()
        thread.join(timeout)
        return not thread.is_alive()

    def _thread_main(self) -> None:
        _lower_priority()
        mark_background()  # its long loops pause while a caller's query runs (core.priority)
        embedder = self.engine.embedder
        if isinstance(embedder, Warmable):
            try:  # load the model here, so no query waits for it (they recall by keyword meanwhile),
                # once the writes that started the thread pause: a burst of adds does not share
                # the GIL and the cores with the load (issue 29 item 4)
                self._wait_for_a_pause(self._stop)
                if not self._stop.is_set():
                    embedder.warm()
            except Exception as exc:  # it fails again, and says why, where it is used
                log.debug("lossless: worker: warming the embedder failed: %s", exc)
            finally:
                warm_done(embedder)
        try:
            self.run(stop=self._stop, wake=self._wake, kind="thread")
        except Exception as exc:  # the store was closed under it: close() gave up waiting
            if not _closed(exc):
                log.exception("lossless: the worker thread stopped on an error")
        finally:
            if self.owns_engine:
                try:
                    self.engine.store.close()
                except Exception:  # already closed, or the disk went away: nothing to keep
                    log.debug("lossless: worker: closing its store failed", exc_info=True)

    # -- the loop ------------------------------------------------------------------------

    def run(self, *, stop: threading.Event | None = None, wake: threading.Event | None = None,
            until_idle: bool = False, conversation_ids: Sequence[str] | None = None,
            on_turn: Callable[[], None] | None = None, kind: str = "thread") -> None:
        """Serve the backlog until ``stop`` is set (or, with ``until_idle``, until no row
        (of ``conversation_ids``) is due). Used by the thread, by ``lossless worker``
        (``kind="process"``) and by :meth:`~lossless.Memory.wait_idle` (``"foreground"``).
        The worker reports itself in the store's ``workers`` table when what it says changes
        (at most every ``REPORT_SECONDS``), else once a ``WORKER_HEARTBEAT_SECONDS``."""
        stop = stop or threading.Event()
        owner = new_owner()
        live(owner)
        with self.stats.lock:
            self.stats.state = "idle"
            self.stats.started_ts = self.stats.started_ts or time.time()
        started = time.time()
        reported = 0.0
        failures = 0
        try:
            while not stop.is_set():
                if wake is not None:  # a thread: its writers go first (a burst lands as one turn)
                    self._wait_for_a_pause(stop)
                if time.monotonic() - reported >= REPORT_SECONDS:
                    reported = time.monotonic()
                    self._report(owner, kind, started)
                if self._unrecorded:
                    self._record_failures()
                self.look_for_unembedded()
                try:
                    claims = self.backlog.claim(owner, limit=1, lease_seconds=self.lease_seconds,
                                                conversation_ids=conversation_ids)
                except Exception as exc:  # the store is closed or failing: say so, try again later
                    if _closed(exc):
                        return
                    self._error(f"claiming work: {type(exc).__name__}: {exc}")
                    if until_idle:
                        raise
                    failures += 1  # the store is down: ask again less and less often
                    stop.wait(min(MAX_RETRY_SECONDS / 10, self.poll_seconds * 2.0 ** min(failures, 5)))
                    continue
                failures = 0
                if not claims:
                    with self.stats.lock:
                        self.stats.state = "idle"
                        self.stats.current = None
                    if until_idle:
                        return
                    self._forget_by_policy()
                    if wake is not None:
                        wake.wait(self.poll_seconds)
                        wake.clear()
                    else:
                        stop.wait(self.poll_seconds)
                    continue
                for claim in claims:
                    for i, turn in enumerate(self._group(claim, owner, conversation_ids)):
                        if i and wake is not None:  # each turn of a group waits for its writers' pause too
                            self._wait_for_a_pause(stop)
                        self._turn(turn, owner, stop)
                        if on_turn is not None:
                            on_turn()
                with self._done:
                    self._done.notify_all()
        finally:
            retire(owner)
            with self.stats.lock:
                self.stats.state = "stopped"
                self.stats.current = None
            try:
                self.backlog.forget_worker(owner)
            except Exception:  # the store is closed or failing: the row just goes stale
                log.debug("lossless: worker: could not remove its report", exc_info=True)
            with self._done:
                self._done.notify_all()

    def _forget_by_policy(self) -> None:
        """When idle, at most every ``memory_policy_interval_seconds``: apply the forgetting
        policy (:mod:`lossless.longterm.forgetting`); a failure is logged, never fatal."""
        config = self.engine.config
        now = time.monotonic()
        if self._policy_at is not None and now - self._policy_at < config.memory_policy_interval_seconds:
            return
        self._policy_at = now
        from lossless.longterm.forgetting import ForgetPolicy

        policy = ForgetPolicy.from_config(config)
        if not policy.active:
            return
        try:
            gone = self.engine.memories.apply_policy(policy)
        except Exception as exc:
            if not _closed(exc):
                self._error(f"forgetting policy: {type(exc).__name__}: {exc}")
            return
        if gone:
            with self.stats.lock:
                self.stats.memories_forgotten += len(gone)
            log.info("lossless: the forgetting policy removed %d memories (see `lossless memory forgotten`)", len(gone))

    def look_for_unembedded(self, *, now: bool = False) -> list[str]:
        """Queue the conversations the embedder owes vectors that no backlog row asks for
        (stored without one: :mod:`lossless.store.unembedded`), at most every
        ``UNEMBEDDED_SECONDS`` unless ``now``; returns those queued. A failure is logged,
        never fatal (the next look tries again)."""
        moment = time.monotonic()
        if not now and self._unembedded_at is not None and moment - self._unembedded_at < UNEMBEDDED_SECONDS:
            return []
        self._unembedded_at = moment
        recaller = self.engine.recaller
        if recaller.embedder is None:
            return []
        try:
            queued = recaller.queue_unembedded()
        except Exception as exc:
            if _closed(exc):
                raise
            log.warning("lossless: worker: looking for unembedded conversations failed: %s: %s",
                        type(exc).__name__, exc)
            return []
        if queued:
            log.info("lossless: worker: %d conversation(s) stored without vectors queued for embedding", len(queued))
        return queued

    def status(self) -> dict[str, Any]:
        """The counters, with the circuit breaker of the summarizer it compacts with."""
        from lossless.summarize.base import GuardedSummarizer

        summarizer = self.engine.summarizer
        breaker = summarizer.breaker_state() if isinstance(summarizer, GuardedSummarizer) else None
        return {**self.stats.as_dict(), "breaker": breaker}

    def _report(self, owner: str, kind: str, started: float) -> None:
        """Write the worker's row if what it says changed, else only when the heartbeat is
        due: an idle worker does not write its unchanged row every few seconds."""
        try:
            status = self.status()
            state = str(status.pop("state"))
            status.pop("uptime_seconds", None)  # readers count it from started_ts
            said = json.dumps([owner, state, status], sort_keys=True, default=str)
            now = time.monotonic()
            if (self._reported is not None and self._reported[0] == said
                    and now - self._reported[1] < WORKER_HEARTBEAT_SECONDS):
                return
            self.backlog.report_worker(owner, kind, started, state, status)
            self._reported = (said, now)
        except Exception as exc:  # reporting is best effort; the work is what matters
            if _closed(exc):
                raise
            log.debug("lossless: worker: could not report its state", exc_info=True)

    def wait_turn(self, timeout: float) -> None:
        """Sleep until the thread ends a turn (or ``timeout`` seconds pass)."""
        with self._done:
            self._done.wait(timeout)

    def _group(self, claim: Claim, owner: str, conversation_ids: Sequence[str] | None) -> list[Claim]:
        """``claim`` and, when it owes fewer than ``EMBED_BATCH`` units, other due
        conversations (claimed here, so no other worker takes them meanwhile) whose units
        are embedded with its own in one embedder call; each claim then has its turn as
        before (compaction, and whatever units are left). A failure here is left to the
        turns, which record it against the conversation it belongs to."""
        recaller = self.engine.recaller
        if recaller.embedder is None:
            return [claim]
        group = [claim]
        try:
            self._cut(claim.conversation_id)
            owes = recaller.unembedded(claim.conversation_id)
            if not 0 < owes < EMBED_BATCH:
                return group
            want = min(GROUP - 1, -(-(EMBED_BATCH - owes) // max(owes, 8)))
            group += self.backlog.claim(owner, limit=want, lease_seconds=self.lease_seconds,
                                        conversation_ids=conversation_ids)
            if len(group) == 1:
                return group
            for other in group[1:]:
                self._cut(other.conversation_id)
            passed = recaller.embed_across([c.conversation_id for c in group], limit=EMBED_BATCH)
            with self.stats.lock:
                self.stats.units_embedded += sum(p.vectors for p in passed.values())
        except Exception as exc:
            if _closed(exc):
                raise
            log.debug("lossless: worker: embedding %d conversations together failed: %s", len(group), exc)
        return group

    def _turn(self, claim: Claim, owner: str, stop: threading.Event) -> None:
        cid = claim.conversation_id
        started = time.monotonic()
        with self.stats.lock:
            self.stats.state = "working"
            self.stats.current = cid
            self.stats.turns += 1
        try:
            outcome = self.serve(cid, owner=owner, stop=stop, started=started, forced=claim.force_reason)
        except Exception as exc:
            if _closed(exc):
                raise
            retry = min(MAX_RETRY_SECONDS, 2.0 ** (claim.attempts + 1))
            message = f"{type(exc).__name__}: {exc}"
            self._error(f"{cid}: {message}")
            log.warning("lossless: worker: %s failed (%s); retrying in %.0f s", cid, message, retry)
            self._unrecorded[cid] = (owner, message, retry)
            self._record_failures()
            return
        finally:
            with self.stats.lock:
                self.stats.busy_seconds += time.monotonic() - started
        if outcome == "done":
            if self.backlog.finish(claim, owner):
                with self.stats.lock:
                    self.stats.finished += 1
                self._arm_interval(cid)
        else:  # "more" (the turn ran out): back of the line; "busy" (compacted elsewhere): a pause first
            self.backlog.release(cid, owner, delay=self.poll_seconds if outcome == "busy" else 0.0)

    def _arm_interval(self, cid: str) -> None:
        """A conversation left with raw messages past its fresh tail is queued again when
        ``compact_interval_seconds`` since its last compaction (or since it was first
        stored) has passed, so it is compacted if it stays quiet; not sooner than one interval from
        now if that moment is past (the trigger did not fire: e.g. too little to summarize)."""
        cfg = self.engine.config
        if cfg.compact_interval_seconds is None or not cfg.auto_compact:
            return
        store = self.engine.store
        try:
            if store.last_seq(cid) - store.covered_seq(cid) <= cfg.fresh_tail_count:
                return
            since = self.engine.compactor.interval_since(cid)
            now = time.time()
            due = (since or now) + cfg.compact_interval_seconds
            self.backlog.arm_timer(cid, due if due > now else now + cfg.compact_interval_seconds)
        except Exception as exc:  # a timer is a convenience: the next message checks the trigger too
            if _closed(exc):
                raise
            log.debug("lossless: worker: %s: arming the interval timer failed: %s", cid, exc)

    def serve(self, conversation_id: str, *, owner: str, stop: threading.Event | None = None,
              started: float | None = None, forced: str | None = None) -> str:
        """One turn on one conversation: compaction for half the slice, then vectors for the
        rest (either takes it all when the other has nothing to do: a compaction that ends
        early leaves its time to the vectors, and the vectors' steps are small, so neither
        starves the other whatever the summarizer or the embedder costs). Returns
        ``done`` (nothing more is owed), ``more`` (out of time) or ``busy`` (another
        process is compacting it). ``forced``: the reason of a compaction asked for by a
        ``/compact`` message, run even under the trigger."""
        engine = self.engine
        t0 = time.monotonic() if started is None else started
        end = t0 + self.slice_seconds
        half = t0 + self.slice_seconds / 2

        def out_of_time(deadline: float) -> Callable[[], bool]:
            def stop_now() -> bool:
                now = time.monotonic()
                if (stop is not None and stop.is_set()) or now >= deadline:
                    return True
                return now - t0 >= BUSY_TURN_SECONDS and self._writing()  # writers are waiting

            return stop_now

        busy = stopped = False
        if engine.config.auto_compact or forced:
            report = engine.compactor.compact(conversation_id, force=forced is not None, reason=forced,
                                              should_stop=out_of_time(half))
            with self.stats.lock:
                self.stats.summaries += len(report.created)
            busy = report.busy
            stopped = report.stopped
            if forced is not None and not busy and not stopped:
                self.backlog.forced_done(conversation_id, owner)  # asked and done
        indexed = False
        if not (stop is not None and stop.is_set()):
            # an embedder that fails does not hold compaction back: it ran first
            indexed = self._index(conversation_id, out_of_time(end), owner)
        if stopped and not (stop is not None and stop.is_set()) and time.monotonic() < end:
            # the vectors left time over: compaction goes on with it
            report = engine.compactor.compact(conversation_id, should_stop=out_of_time(end))
            with self.stats.lock:
                self.stats.summaries += len(report.created)
            stopped = report.stopped
        if busy:
            return "busy"
        return "done" if indexed and not stopped else "more"

    def _index(self, cid: str, should_stop: Callable[[], bool], owner: str) -> bool:
        """Cut units and embed them until done (True) or out of time (False)."""
        recaller = self.engine.recaller
        if recaller.embedder is None:
            # an embedder elsewhere (another process, a later open) is owed its vectors
            unembedded.owed_elsewhere(self.backlog.runner, cid)
            return True
        while True:
            cut = self._cut(cid)
            passed = recaller.embed_units(cid, limit=EMBED_BATCH, batch_size=EMBED_BATCH)
            with self.stats.lock:
                self.stats.units_embedded += passed.vectors  # not those left keyword-only (language)
            if cut <= 0 and passed.units == 0:
                return True
            self.backlog.heartbeat(cid, owner, self.lease_seconds)
            if should_stop():
                return recaller.uncut(cid) == 0 and recaller.unembedded(cid) == 0

    def _cut(self, cid: str) -> int:
        """Cut units for up to ``CUT_BATCH`` more messages; returns (and counts) how many
        messages were cut."""
        index_store = self.engine.recaller.index_store
        before = index_store.progress(cid)[0]
        self.engine.recaller.cut_units(cid, limit=CUT_BATCH)
        cut = max(0, index_store.progress(cid)[0] - before)
        with self.stats.lock:
            self.stats.messages_indexed += cut
        return cut

    def _record_failures(self) -> None:
        for cid, (owner, message, retry) in list(self._unrecorded.items()):
            try:
                self.backlog.fail(cid, owner, message, retry_in=retry)
            except Exception as exc:  # the store is failing too (a full disk): try again next time round
                if _closed(exc):
                    raise
                log.warning("lossless: worker: could not record the failure of %s yet: %s", cid, exc)
                return
            del self._unrecorded[cid]

    def _error(self, message: str) -> None:
        with self.stats.lock:
            self.stats.errors += 1
            self.stats.last_error = message[:500]


def _closed(exc: BaseException) -> bool:
    """Whether ``exc`` says the store was closed under the worker (``close()`` gave up
    waiting for it): then the worker just ends."""
    text = f"{type(exc).__name__}: {exc}".lower()
    return "closed" in text and ("connection" in text or "pool" in text or "cursor" in text)


def _lower_priority() -> None:
    """A worker thread yields the CPU to its caller's threads (Linux: a thread's nice
    value is its own). Best effort; elsewhere a no-op."""
    with contextlib.suppress(AttributeError, OSError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
