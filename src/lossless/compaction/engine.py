"""Compaction: turning old raw messages into leaf summaries, and runs of summaries into
condensed ones, so the active context (frontier summaries + raw tail) stays in budget.

Nothing is ever deleted. Each new summary is written in its own transaction, and the
store refuses it if the frontier moved meanwhile, so a crash mid-compaction loses at
most the summary being written, and re-running compaction simply continues.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal, overload

from lossless.core.config import Config
from lossless.core.owners import holder_is_dead, live, new_owner, retire
from lossless.core.render import message_text
from lossless.core.textfit import fit_text
from lossless.core.tokens import TokenCounter
from lossless.core.types import Message, SourceRef, Summary
from lossless.core.validate import check_text, timestamp
from lossless.store.base import NewSummary, RevisedSummary, Store
from lossless.summarize.base import (
    GuardedSummarizer,
    Summarizer,
    SummaryItem,
    SummaryRequest,
    SummaryResult,
)
from lossless.summarize.extractive import ExtractiveSummarizer

__all__ = ["Busy", "CompactionReport", "Compactor", "RedoReport", "protected_tail_start", "tool_groups"]

FALLBACK_NORMAL, FALLBACK_AGGRESSIVE, FALLBACK_EXTRACTIVE = 0, 1, 2
_PAGE = 1000  # raw messages read per query while cutting leaf chunks


#: why :meth:`Compactor.redo_fallbacks` stopped early: the summarizer is the extractive
#: one (nothing to redo them with), another compaction holds the conversation, or the
#: provider is still unavailable (its breaker is open)
RedoStop = Literal["extractive", "busy", "provider_down"]


@dataclass
class RedoReport:
    """What :meth:`Compactor.redo_fallbacks` did: the fallback summaries it found, those
    the model wrote again, those it still could not, and why it stopped early, if so
    (``stopped_by`` for a caller that branches on it, ``skipped`` in words)."""

    conversation_id: str
    found: int = 0
    redone: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    skipped: str | None = None
    seconds: float = 0.0
    stopped_by: RedoStop | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON ``lossless compact --redo-fallbacks --json`` gives (``skipped`` says
        why it stopped)."""
        return {"conversation_id": self.conversation_id, "found": self.found, "redone": list(self.redone),
                "failed": list(self.failed), "skipped": self.skipped, "seconds": self.seconds}


@dataclass(frozen=True)
class Busy:
    """Another compaction holds the conversation's lease (:meth:`Compactor.holding`)."""

    why: str


@dataclass
class CompactionReport:
    conversation_id: str
    leaves: list[str] = field(default_factory=list)
    condensed: list[str] = field(default_factory=list)
    root: str | None = None  # the whole-conversation root written after the passes, if one was
    tokens_before: int = 0
    tokens_after: int = 0
    passes: int = 0
    skipped: str | None = None  # why nothing was done, if nothing was
    reason: str = ""  # why it ran: the trigger that fired, "manual", "context-length error", …
    seconds: float = 0.0
    stopped: bool = False  # should_stop() asked it to yield before it was done (the worker's turn ended)
    busy: bool = False  # nothing was done because another compaction of the conversation holds it

    @property
    def created(self) -> list[str]:
        return self.leaves + self.condensed + ([self.root] if self.root else [])


def tool_groups(messages: Sequence[Message]) -> list[list[Message]]:
    """Split messages into atomic units: an assistant message with tool calls together
    with the tool results that follow it; every other message alone."""
    groups: list[list[Message]] = []
    for msg in messages:
        if msg.role == "tool" and groups and (groups[-1][0].tool_calls and groups[-1][-1].role in ("assistant", "tool")):
            groups[-1].append(msg)
        else:
            groups.append([msg])
    return groups


def _streamed_groups(messages: Iterable[Message]) -> Iterator[list[Message]]:
    """:func:`tool_groups` over a stream: each group once the message after it is seen."""
    group: list[Message] = []
    for msg in messages:
        if msg.role == "tool" and group and group[0].tool_calls and group[-1].role in ("assistant", "tool"):
            group.append(msg)
            continue
        if group:
            yield group
        group = [msg]
    if group:
        yield group


def protected_tail_start(raw: Sequence[Message], config: Config, *, emergency: bool = False) -> int:
    """Index into ``raw`` where the protected fresh tail begins.

    The tail is the last ``fresh_tail_count`` messages, cut down to ``fresh_tail_tokens``
    (a share of the window), but always from the newest user message on, and never
    starting inside a tool call/result group. In an emergency only the newest turn is kept.
    """
    n = len(raw)
    if n == 0:
        return 0
    start = 0 if emergency else max(0, n - config.fresh_tail_count)
    if not emergency:
        total = 0
        token_start = n
        for i in range(n - 1, -1, -1):
            total += raw[i].token_count
            if total > config.fresh_tail_tokens:
                break
            token_start = i
        start = max(start, token_start)
    else:
        start = n
    last_user = next((i for i in range(n - 1, -1, -1) if raw[i].role == "user"), None)
    if last_user is not None:
        start = min(start, last_user)
    elif emergency:
        start = n - 1
    # never start on a tool result: move back to the call that produced it
    while 0 < start < n and raw[start].role == "tool":
        start -= 1
    return max(0, min(start, n))


def _message_item(msg: Message) -> SummaryItem:
    return SummaryItem(
        kind="message", ref=msg.id, text=message_text(msg), first_seq=msg.seq, last_seq=msg.seq,
        created_at=msg.created_at, latest_at=msg.created_at, role=msg.role, name=msg.name,
    )


def _summary_item(node: Summary) -> SummaryItem:
    return SummaryItem(
        kind="summary", ref=node.id, text=node.content, first_seq=node.first_seq, last_seq=node.last_seq,
        created_at=node.earliest_at, latest_at=node.latest_at, depth=node.depth,
    )


class Compactor:
    """Runs leaf and condense passes for one store with one configuration."""

    def __init__(self, store: Store, config: Config, counter: TokenCounter, summarizer: Summarizer, *,
                 before_leaf: Callable[[str, list[Message]], None] | None = None) -> None:
        """``before_leaf`` is called with each chunk of raw messages just before it is
        summarized (the long-term memory flush)."""
        self.store = store
        self.config = config
        self.counter = counter
        self.summarizer = summarizer
        self.fallback = ExtractiveSummarizer()
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()
        self._cooldown: dict[str, tuple[float, int]] = {}  # conversation -> (until, tokens then)
        self._root_owed: set[str] = set()  # conversations whose last run here stopped before its root
        self.before_leaf = before_leaf
        # a lease not heart-beaten for this long belongs to a dead compactor; one summary
        # call (with its retries and timeouts) must fit inside it
        self.lease_seconds = 600.0

    # -- measuring ----------------------------------------------------------------------

    def active_tokens(self, conversation_id: str) -> int:
        """Tokens of the full active context: frontier summaries plus the raw tail."""
        frontier = self.store.frontier(conversation_id)
        covered = frontier[-1].last_seq if frontier else 0
        return sum(s.token_count for s in frontier) + self.store.token_sum(conversation_id, covered + 1)

    def needs_compaction(self, conversation_id: str) -> bool:
        return self.active_tokens(conversation_id) > self.config.trigger_tokens

    # -- the passes ---------------------------------------------------------------------

    def compact(
        self, conversation_id: str, *, force: bool = False, emergency: bool = False, full: bool = False,
        reason: str | None = None, wait: float = 0.0, should_stop: Callable[[], bool] | None = None,
    ) -> CompactionReport:
        """Compact one conversation.

        Without ``force`` it does nothing unless a trigger fired (:meth:`trigger`);
        ``force`` summarizes everything outside the fresh tail even under the trigger;
        ``emergency`` keeps only the newest turn raw (after a context-length error);
        ``full`` also condenses the frontier down to a single root. ``reason`` is recorded
        in the compaction log and on every summary written.

        At most one compaction of a conversation runs at a time, across threads and
        processes (a lease row in the store): a second one waits up to ``wait`` seconds,
        then returns a report that says it was skipped, having changed nothing.

        ``should_stop`` is asked after each summary written: when it says True the run
        ends there (``report.stopped``), every summary so far kept; the worker uses it
        to take turns between conversations and to stop promptly on ``close()``.
        """
        t0 = time.perf_counter()
        report = CompactionReport(conversation_id)
        report.tokens_before = self.active_tokens(conversation_id)
        manual = force or emergency or full
        if not manual:
            fired = self.trigger(conversation_id, report.tokens_before)
            if fired is None:
                if conversation_id in self._root_owed:
                    self._catch_up_root(conversation_id, report, wait)
                report.skipped = "no trigger fired"
                report.tokens_after = report.tokens_before
                return report
            reason = reason or fired
            # message-count and interval triggers compact whatever lies outside the tail
            force = not fired.startswith("tokens")
        report.reason = reason or ("emergency" if emergency else "manual")
        with self.holding(conversation_id, report.reason, wait) as held:
            if isinstance(held, Busy):
                return self._busy(report, held.why)
            owner = held
            # the log's time range is while this run held the lease, so the ranges of
            # one conversation never overlap (waiting for the lease is not compacting)
            started = time.time()
            try:
                self._leaf_passes(conversation_id, report, force=force or full, emergency=emergency, owner=owner,
                                  should_stop=should_stop)
                if not report.stopped:
                    self._condense_passes(conversation_id, report, full=full or emergency, owner=owner,
                                          should_stop=should_stop)
                if not report.stopped:
                    self._refresh_root(conversation_id, report)
                elif report.created:
                    self._root_owed.add(conversation_id)
            finally:
                finished = time.time()
                self.store.release_lease(conversation_id, owner)
            report.tokens_after = self.active_tokens(conversation_id)
            report.seconds = time.perf_counter() - t0
            if not manual and not report.stopped and not report.created:
                # nothing could be summarized (the fresh tail alone is over the trigger):
                # no automatic retry until the cooldown is over (stops compaction storms).
                # A run that wrote summaries but ended over the trigger is not fruitless:
                # messages may have arrived meanwhile (the worker compacts while the
                # caller writes); the next run finds out, and writes nothing if nothing is due
                self._cooldown[conversation_id] = (time.monotonic() + self.config.compaction_cooldown_seconds,
                                                   report.tokens_after)
            self.store.log_compaction(conversation_id, {
                "reason": report.reason, "started_ts": started, "finished_ts": finished,
                "tokens_before": report.tokens_before, "tokens_after": report.tokens_after,
                "leaves": len(report.leaves), "condensed": len(report.condensed), "skipped": report.skipped,
                "owner": owner,
            })
        return report

    @contextmanager
    def holding(self, conversation_id: str, reason: str, wait: float = 0.0) -> Iterator[str | Busy]:
        """Hold the conversation's compaction lease (and this process's lock for it) for
        the block: yields the owner string (the block releases the lease when it is done
        with it; a holder that dies leaves it to be taken over), or :class:`Busy` when
        another compaction still holds it after ``wait`` seconds."""
        lock = self._lock_for(conversation_id)
        if not (lock.acquire(timeout=wait) if wait > 0 else lock.acquire(blocking=False)):
            yield Busy("another compaction of this conversation is running in this process")
            return
        owner = new_owner()
        live(owner)  # before the lease exists: no other thread may take it for dead
        try:
            deadline = time.monotonic() + wait
            while not self.store.acquire_lease(conversation_id, owner, reason, self.lease_seconds):
                holder = self.store.lease(conversation_id)
                if holder is not None and holder_is_dead(holder["owner"]):
                    # its process was killed mid-compaction: take over now, not in lease_seconds
                    self.store.release_lease(conversation_id, holder["owner"])
                    continue
                if time.monotonic() >= deadline:
                    holder = self.store.lease(conversation_id) or {}
                    yield Busy(f"another compaction of this conversation is running "
                               f"({holder.get('owner', 'another process')})")
                    return
                time.sleep(0.05)
            try:
                yield owner
            finally:
                self.store.release_lease(conversation_id, owner)  # (again: harmless)
        finally:
            retire(owner)
            lock.release()

    # -- redoing fallbacks --------------------------------------------------------------

    def redo_fallbacks(self, conversation_id: str, *, wait: float = 0.0,
                       progress: Callable[[int, int], None] | None = None) -> RedoReport:
        """Write again, with the summarizer's model, every summary of the conversation
        that the deterministic fallback made (the provider was down, or its answers did
        not fit): deepest last, so a condensed node is redone from its redone children.
        Each keeps its id and place in the DAG; its earlier text is kept in the store
        (``summary_revisions``). Stops, redoing nothing more, while the provider's breaker
        is open; a summary the model still cannot write is left as it is."""
        t0 = time.perf_counter()
        report = RedoReport(conversation_id)
        nodes = sorted((s for s in self.store.summaries(conversation_id) if s.fallback_level == FALLBACK_EXTRACTIVE),
                       key=lambda s: (s.depth, s.first_seq))
        report.found = len(nodes)
        if not nodes:
            return report
        if self.summarizer.name == self.fallback.name:
            report.skipped = "the summarizer is the offline extractive one: configure a model to redo them with"
            report.stopped_by = "extractive"
            return report
        with self.holding(conversation_id, "redo fallbacks", wait) as held:
            if isinstance(held, Busy):
                report.skipped, report.stopped_by = held.why, "busy"
                return report
            for done, node in enumerate(nodes):
                down = self.summarizer.unavailable() if isinstance(self.summarizer, GuardedSummarizer) else None
                if down is not None:
                    report.skipped = f"the provider is still unavailable: {down}"
                    report.stopped_by = "provider_down"
                    break
                redone = self._redo(node)
                if redone is None:
                    report.failed.append(node.id)
                else:
                    report.redone.append(node.id)
                self.store.heartbeat_lease(conversation_id, held)
                if progress is not None:
                    progress(done + 1, len(nodes))
        report.seconds = time.perf_counter() - t0
        return report

    def _redo(self, node: Summary) -> Summary | None:
        cfg = self.config
        cid = node.conversation_id
        if node.depth == 0:
            messages = self.store.get_messages(cid, node.first_seq, node.last_seq)
            items = tuple(_message_item(m) for m in messages)
            target, tokens = cfg.effective_leaf_target_tokens, sum(m.token_count for m in messages)
        else:
            children = [self.store.get_summary(src.id) for src in node.sources]  # as redone just before
            items = tuple(_summary_item(c) for c in children)
            target, tokens = cfg.effective_condensed_target_tokens, sum(c.token_count for c in children)
        written = self._write(items, depth=node.depth, target=target, previous=None, cid=cid, input_tokens=tokens,
                              fallback=False)
        if written is None:
            return None
        text, count, level, meta = written
        meta["trigger"] = "redo fallbacks"
        meta["redone"] = {"summarizer": node.summarizer, "fallback_reason": node.metadata.get("fallback_reason"),
                          "first_trigger": node.metadata.get("trigger")}
        return self.store.revise_summary(node.id, node.content,
                                         RevisedSummary(text, count, self._name(level), level, meta))

    def _busy(self, report: CompactionReport, why: str) -> CompactionReport:
        report.skipped = why
        report.busy = True
        report.tokens_after = report.tokens_before
        return report

    def trigger(self, conversation_id: str, active_tokens: int | None = None) -> str | None:
        """Which automatic trigger fires now, as the reason to record, or None: the active
        context over ``context_threshold`` of the window; more raw messages than
        ``compact_after_messages``; longer than ``compact_interval_seconds`` since the last
        compaction with raw messages waiting. Quiet during a cooldown after a fruitless
        automatic run, unless a leaf's worth of new tokens arrived since."""
        cfg = self.config
        tokens = self.active_tokens(conversation_id) if active_tokens is None else active_tokens
        until, tokens_then = self._cooldown.get(conversation_id, (0.0, 0))
        if time.monotonic() < until and tokens < tokens_then + cfg.effective_leaf_target_tokens:
            return None  # cooling down, and too little new material to make a summary worth it
        if tokens > cfg.trigger_tokens:
            return f"tokens over threshold ({tokens} > {cfg.trigger_tokens})"
        if cfg.compact_after_messages is None and cfg.compact_interval_seconds is None:
            return None
        raw = self.store.last_seq(conversation_id) - self.store.covered_seq(conversation_id)
        if cfg.compact_after_messages is not None and raw > cfg.compact_after_messages:
            return f"message count over limit ({raw} raw > {cfg.compact_after_messages})"
        if cfg.compact_interval_seconds is not None and raw > cfg.fresh_tail_count:
            since = self.interval_since(conversation_id)
            if since is not None and time.time() - since > cfg.compact_interval_seconds:
                return f"interval elapsed ({time.time() - since:.0f} s > {cfg.compact_interval_seconds:g} s)"
        return None

    def interval_since(self, conversation_id: str) -> float | None:
        """Where ``compact_interval_seconds`` counts from, on the store's clock: the end of
        the last compaction, else when the conversation was first stored (not its first
        message's time: imported history from last year is not an hour overdue)."""
        log = self.store.compaction_log(conversation_id, 1)
        if log:
            return float(log[0]["finished_ts"])
        info = self.store.get_conversation(conversation_id)
        return timestamp(info.created_at) if info is not None else None

    def state(self, conversation_id: str) -> Literal["ACTIVE", "COMPACTING"]:
        """``COMPACTING`` while any thread or process holds the conversation's lease."""
        lease = self.store.lease(conversation_id)
        return "COMPACTING" if lease is not None and not holder_is_dead(lease["owner"]) else "ACTIVE"

    def _lock_for(self, conversation_id: str) -> threading.Lock:
        with self._locks_guard:
            return self._locks.setdefault(conversation_id, threading.Lock())

    def _leaf_passes(self, cid: str, report: CompactionReport, *, force: bool, emergency: bool, owner: str,
                     should_stop: Callable[[], bool] | None = None) -> None:
        cfg = self.config
        frontier = self.store.frontier(cid)
        covered = frontier[-1].last_seq if frontier else 0
        previous = frontier[-1].content if frontier else None
        tail_seq = self._tail_start_seq(cid, covered, emergency=emergency)
        eligible_tokens = self.store.token_sum(cid, covered + 1, tail_seq - 1) if tail_seq > covered + 1 else 0
        # Below this a summary cannot be shorter than what it covers; wait for more.
        minimum = 64 if (force or emergency) else cfg.effective_leaf_target_tokens * 2
        if tail_seq <= covered + 1 or eligible_tokens < minimum:
            return
        for chunk in self._chunks(cid, covered + 1, tail_seq - 1):
            if report.passes >= cfg.max_compaction_passes:
                return
            if self.before_leaf is not None:
                self.before_leaf(cid, chunk)  # e.g. the long-term memory flush
            items = tuple(_message_item(m) for m in chunk)
            text, tokens, level, meta = self._write(items, depth=0, target=cfg.effective_leaf_target_tokens, previous=previous, cid=cid,
                                                    input_tokens=sum(m.token_count for m in chunk))
            meta["trigger"] = report.reason
            node = self.store.insert_summary(
                NewSummary(cid, 0, text, tokens, tuple(SourceRef("message", m.id) for m in chunk),
                           self._name(level), level, meta)
            )
            report.passes += 1
            if node is None:  # someone else compacted this span first
                report.skipped = "the frontier moved during compaction"
                return
            report.leaves.append(node.id)
            self.store.heartbeat_lease(cid, owner)
            previous = node.content
            if should_stop is not None and should_stop():
                report.stopped = True
                return

    def _tail_start_seq(self, cid: str, covered: int, *, emergency: bool) -> int:
        """The seq where the protected fresh tail begins: what :func:`protected_tail_start`
        says over every raw message, found from the newest ones only, read in growing
        windows, so a backlog of many thousands is not read to protect a few dozen."""
        last = self.store.last_seq(cid)
        size = max(256, 2 * self.config.fresh_tail_count)
        while last > covered:
            lo = max(covered + 1, last - size + 1)
            window = self.store.get_messages(cid, lo, last)
            start = protected_tail_start(window, self.config, emergency=emergency)
            # a suffix gives the same answer once it holds the newest user turn and the
            # whole tail, and the tail does not begin at its very start
            settled = start > 0 and len(window) >= self.config.fresh_tail_count and any(
                m.role == "user" for m in window)
            if lo == covered + 1 or settled:
                return window[start].seq if start < len(window) else last + 1
            size *= 4
        return covered + 1

    def _chunks(self, cid: str, first: int, last: int) -> Iterator[list[Message]]:
        """Messages ``first..last`` in leaf chunks of at most ``effective_leaf_chunk_tokens``
        (a tool call stays with its results), read a page at a time as they are needed."""
        cap = self.config.effective_leaf_chunk_tokens
        current: list[Message] = []
        current_tokens = 0
        for group in _streamed_groups(self._pages(cid, first, last)):
            size = sum(m.token_count for m in group)
            if current and current_tokens + size > cap:
                yield current
                current, current_tokens = [], 0
            current.extend(group)
            current_tokens += size
        if current:
            yield current

    def _pages(self, cid: str, first: int, last: int) -> Iterator[Message]:
        for lo in range(first, last + 1, _PAGE):
            yield from self.store.get_messages(cid, lo, min(last, lo + _PAGE - 1))

    def _condense_passes(self, cid: str, report: CompactionReport, *, full: bool, owner: str,
                         should_stop: Callable[[], bool] | None = None) -> None:
        cfg = self.config
        while report.passes < cfg.max_compaction_passes:
            frontier = self.store.frontier(cid)
            total = sum(s.token_count for s in frontier)
            if len(frontier) < 2 or (not full and total <= cfg.summary_share_tokens):
                return
            run = self._pick_run(frontier)
            if run is None:
                return
            items = tuple(_summary_item(s) for s in run)
            depth = max(s.depth for s in run) + 1
            index = frontier.index(run[0])
            previous = frontier[index - 1].content if index > 0 else None
            text, tokens, level, meta = self._write(items, depth=depth, target=cfg.effective_condensed_target_tokens, previous=previous, cid=cid,
                                                    input_tokens=sum(s.token_count for s in run))
            meta["trigger"] = report.reason
            node = self.store.insert_summary(
                NewSummary(cid, depth, text, tokens, tuple(SourceRef("summary", s.id) for s in run),
                           self._name(level), level, meta)
            )
            report.passes += 1
            if node is None:
                report.skipped = "the frontier moved during compaction"
                return
            report.condensed.append(node.id)
            self.store.heartbeat_lease(cid, owner)
            if should_stop is not None and should_stop():
                report.stopped = True
                return

    def _catch_up_root(self, cid: str, report: CompactionReport, wait: float) -> None:
        """The root a run of this process cut short never wrote (the worker's turn ended
        after its last summary): written now, under the lease, although no trigger fired."""
        with self.holding(cid, "root", wait) as held:
            if isinstance(held, Busy):
                return
            try:
                self._refresh_root(cid, report)
            finally:
                self.store.release_lease(cid, held)

    def _refresh_root(self, cid: str, report: CompactionReport) -> None:
        """A new whole-conversation root (seed 000's root, seed 001's rolling summary) when
        the current one no longer reaches the end of the frontier: over the whole frontier
        (so it expands back to every summarized message), at most ``root_max_tokens``:
        the frontier's own texts when they fit, else their summary (the previous root
        given to the summarizer as context). Old roots are kept as they are: a root is
        written, never rewritten."""
        self._root_owed.discard(cid)
        cap = self.config.root_max_tokens
        frontier = self.store.frontier(cid)
        if cap <= 0 or not frontier:
            return
        current = self.store.root(cid)
        if current is not None and current.last_seq >= frontier[-1].last_seq:
            return
        depth = max(s.depth for s in frontier) + 1
        inputs = sum(s.token_count for s in frontier)
        text = "\n\n".join(f"[#{s.first_seq}–#{s.last_seq}]\n{s.content}" for s in frontier)
        tokens = self.counter.count(text) if inputs <= cap else cap + 1
        if tokens <= cap:  # the frontier fits as it is: its own words, no summarizer call, nothing lost
            meta: dict[str, Any] = {"input_tokens": inputs, "fallback_level": 0}
            name, level = "frontier", FALLBACK_NORMAL
        else:
            items = tuple(_summary_item(s) for s in frontier)
            text, tokens, level, meta = self._write(items, depth=depth, target=cap, cid=cid, input_tokens=inputs,
                                                    previous=current.content if current else None)
            name = self._name(level)
        if tokens > cap:  # the summarizer's leeway (half again its target) is not the root's: its cap is hard
            text = fit_text(text, cap, self.counter) or f"[#1–#{frontier[-1].last_seq}]"
            tokens = self.counter.count(text)
        meta.update(trigger=report.reason, kind="root")
        node = self.store.insert_summary(NewSummary(cid, depth, text, tokens, tuple(SourceRef("summary", s.id) for s in frontier),
                                                    name, level, meta, root=True))
        if node is not None:
            report.root = node.id

    def _pick_run(self, frontier: list[Summary]) -> list[Summary] | None:
        """The oldest run of 2..max_fanout contiguous same-depth frontier summaries whose
        text fits one summarizer input; failing that, the two oldest nodes (the rolling
        root absorbs the next-oldest node, whatever its depth)."""
        cfg = self.config
        cap = cfg.effective_leaf_chunk_tokens
        i = 0
        while i < len(frontier):
            j = i
            while j + 1 < len(frontier) and frontier[j + 1].depth == frontier[i].depth:
                j += 1
            if j - i + 1 >= cfg.condense_min_fanout:
                run = [frontier[i]]
                tokens = frontier[i].token_count
                for node in frontier[i + 1 : j + 1]:
                    if len(run) >= cfg.condense_max_fanout or tokens + node.token_count > cap:
                        break
                    run.append(node)
                    tokens += node.token_count
                if len(run) >= cfg.condense_min_fanout:
                    return run
            i = j + 1
        return frontier[:2] if len(frontier) >= 2 else None

    # -- writing one summary ------------------------------------------------------------

    def _name(self, level: int) -> str:
        return self.summarizer.name if level < FALLBACK_EXTRACTIVE else f"{self.fallback.name}-fallback"

    @overload
    def _write(self, items: tuple[SummaryItem, ...], *, depth: int, target: int, previous: str | None, cid: str,
               input_tokens: int | None = None, fallback: Literal[True] = True) -> tuple[str, int, int, dict[str, Any]]:
        ...

    @overload
    def _write(self, items: tuple[SummaryItem, ...], *, depth: int, target: int, previous: str | None, cid: str,
               input_tokens: int | None = None, fallback: bool) -> tuple[str, int, int, dict[str, Any]] | None:
        ...

    def _write(
        self, items: tuple[SummaryItem, ...], *, depth: int, target: int, previous: str | None, cid: str,
        input_tokens: int | None = None, fallback: bool = True,
    ) -> tuple[str, int, int, dict[str, Any]] | None:
        """One summary that is shorter than its input: the configured summarizer, then an
        aggressive retry, then deterministic extraction, which always fits (without
        ``fallback``: None instead of extraction). ``input_tokens``: the items' stored
        token counts, summed (counted when None)."""
        if input_tokens is None:
            input_tokens = sum(self.counter.count(it.text) for it in items)
        target = max(1, min(target, int(input_tokens * self.config.max_summary_ratio)))
        ceiling = max(1, min(int(target * 1.5), input_tokens - 1))
        meta: dict[str, Any] = {"input_tokens": input_tokens, "target_tokens": target}
        errors: list[str] = []
        modes: tuple[Literal["normal", "aggressive"], ...] = ("normal", "aggressive")
        down = self.summarizer.unavailable() if isinstance(self.summarizer, GuardedSummarizer) else None
        if down is not None:  # its provider's breaker is open: no request, the fallback at once
            errors.append(f"not asked: {down}"[:300])
            modes = ()
        for level, mode in enumerate(modes):
            if level == FALLBACK_AGGRESSIVE and self.summarizer.name == self.fallback.name:
                break
            request = SummaryRequest(items, depth, target if mode == "normal" else max(1, target // 2),
                                     self.counter, mode, previous, cid, self.config.timezone)
            started = time.perf_counter()
            try:
                result = self.summarizer.summarize(request)
                text = _output_text(result)
            except Exception as exc:  # a summarizer failure must never cost a message
                errors.append(f"{mode}: {type(exc).__name__}: {exc}"[:300])
                spent = getattr(exc, "metadata", None)
                _account_attempt(meta, spent if isinstance(spent, dict) else None, started)
                continue
            _account_attempt(meta, result.metadata, started)
            tokens = self.counter.count(text)
            if text and tokens <= ceiling:
                meta.update(_result_meta(result.metadata))
                meta["provider"] = str(result.metadata.get("provider") or self.summarizer.name)
                if result.model:
                    meta["model"] = str(result.model)
                meta["output_tokens"] = _number(result.metadata.get("output_tokens")) or tokens
                meta["fallback_level"] = level
                if errors:
                    meta["errors"] = errors
                return text, tokens, level, meta
            errors.append(f"{mode}: output of {tokens} tokens does not fit {ceiling}")
        if not fallback:
            return None
        request = SummaryRequest(items, depth, target, self.counter, "normal", previous, cid, self.config.timezone)
        started = time.perf_counter()
        text = self.fallback.summarize(request).text.strip()
        meta["latency_ms"] = round(meta.get("latency_ms", 0.0) + (time.perf_counter() - started) * 1000, 2)
        if not text:
            text = f"[#{items[0].first_seq}–#{items[-1].last_seq}]"
        if errors:
            meta["errors"] = errors
            meta["fallback_reason"] = errors[-1]
        level = FALLBACK_EXTRACTIVE if errors else FALLBACK_NORMAL
        meta["provider"] = self.fallback.name
        meta["output_tokens"] = tokens = self.counter.count(text)
        meta["fallback_level"] = level
        return text, tokens, level, meta


# What a summarizer may report about its own work (see lossless.summarize.llm); copied
# into the summary's metadata so `lossless stats` can total the spend.
_RESULT_KEYS = ("provider", "parts", "used_fallback_model")


def _result_meta(metadata: dict[str, Any]) -> dict[str, Any]:
    return {k: metadata[k] for k in _RESULT_KEYS if isinstance(metadata.get(k), str | int | float)}


def _output_text(result: object) -> str:
    """A summarizer's answer as the text to store. Raises (so the engine escalates, as on
    any summarizer failure) on an answer that is not a SummaryResult, or on text SQLite
    and the tokenizer would mangle: a lone surrogate, a NUL byte."""
    if not isinstance(result, SummaryResult):
        raise TypeError(f"the summarizer returned {type(result).__name__}, not a SummaryResult")
    if not isinstance(result.metadata, dict):
        raise TypeError(f"the summarizer's metadata is {type(result.metadata).__name__}, not a dict")
    text = result.text.strip() if isinstance(result.text, str) else ""
    check_text(text, "the summary")
    return text


def _number(value: Any) -> int:
    """A count a summarizer reported, or 0 when what it reported is not a number."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value or abs(value) == float("inf"):
        return 0
    return int(value)


def _account_attempt(meta: dict[str, Any], reported: dict[str, Any] | None, started: float) -> None:
    """Add one summarizer attempt (failed ones too) to the running totals: provider calls,
    tokens sent to and received from the provider, wall time."""
    meta["attempts"] = meta.get("attempts", 0) + 1
    meta["latency_ms"] = round(meta.get("latency_ms", 0.0) + (time.perf_counter() - started) * 1000, 2)
    if reported:
        meta["calls"] = meta.get("calls", 0) + _number(reported.get("calls", 1))
        meta["summarizer_input_tokens"] = meta.get("summarizer_input_tokens", 0) + _number(reported.get("input_tokens", 0))
        meta["summarizer_output_tokens"] = meta.get("summarizer_output_tokens", 0) + _number(reported.get("output_tokens", 0))
