"""A handle on one conversation: add messages, assemble context, compact, search."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

from lossless.agent.base import AgentServices
from lossless.agent.emergency import RecoveryLog, call_with_recovery
from lossless.agent.loop import arun_turn, run_turn
from lossless.agent.results import (
    ExpandResult,
    GrepResult,
    MessageDescription,
    MessageSlice,
    SummaryDescription,
    SummarySlice,
)
from lossless.agent.tools import ToolBox
from lossless.compaction.engine import CompactionReport, RedoReport
from lossless.core.errors import StoreError, ValidationError
from lossless.core.stats import ConversationBacklog, ConversationStats, SummarizerUsage
from lossless.core.types import AssembledContext, ConversationInfo, GrepHit, Message, Summary
from lossless.core.validate import NewMessage, validate_message
from lossless.recall.dispatch import SearchMode
from lossless.store.erase import Tombstone

if TYPE_CHECKING:
    from lossless.agent.loop import TurnResult
    from lossless.context import Assembler
    from lossless.context.assemble import Layout
    from lossless.embed.base import Embedder
    from lossless.longterm import MemoryRecord
    from lossless.store.backlog import Backlog
    from lossless.summarize.base import Summarizer

__all__ = ["Conversation", "ConversationHost"]

T = TypeVar("T")

log = logging.getLogger("lossless")


class ConversationHost(AgentServices, Protocol):
    """What a conversation's handle uses of its :class:`lossless.Memory` (which is one):
    the store's parts and the scheduler's hooks. Typed so, this module does not import
    the engine that imports it."""

    @property
    def summarizer(self) -> Summarizer: ...
    @property
    def embedder(self) -> Embedder | None: ...
    @property
    def assembler(self) -> Assembler: ...
    @property
    def backlog(self) -> Backlog: ...
    def writing(self) -> None: ...
    def work_queued(self, conversation_id: str, *, started: bool = True) -> None: ...
    def foreground(self, conversation_id: str, wait: float = 60.0) -> AbstractContextManager[None]: ...
    def distill(self, conversation_id: str, upto_seq: int | None = None, summarizer: Summarizer | None = None, *,
                end_task: bool = False) -> list[MemoryRecord]: ...
    def search(self, query: str, *, conversations: list[str] | None = None, where: dict[str, Any] | None = None,
               limit: int = 20, kinds: tuple[Literal["message", "summary"], ...] = ("message", "summary"),
               roles: tuple[str, ...] | None = None, since: datetime | None = None, until: datetime | None = None,
               mode: SearchMode = "fts", sort: Literal["relevance", "recency"] = "relevance") -> list[GrepHit]: ...


class Conversation:
    """Get one with :meth:`lossless.Memory.conversation`; it is cheap to create."""

    def __init__(self, memory: ConversationHost, conversation_id: str) -> None:
        self.memory = memory
        self.id = conversation_id

    def __repr__(self) -> str:
        return f"Conversation({self.id!r})"

    # -- writing ------------------------------------------------------------------------

    def add(
        self,
        role: str,
        content: str | list[dict[str, Any]] | None = None,
        *,
        name: str | None = None,
        created_at: datetime | str | None = None,
        tool_calls: list[dict[str, Any]] | None = None,
        tool_call_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        external_id: str | None = None,
    ) -> Message:
        """Store one message (immutable from now on) and compact if a trigger fired."""
        fields: dict[str, Any] = {"role": role, "content": content}
        for key, value in (("name", name), ("created_at", created_at), ("tool_calls", tool_calls),
                           ("tool_call_id", tool_call_id), ("metadata", metadata), ("external_id", external_id)):
            if value is not None:
                fields[key] = value
        return self.add_many([fields])[0]

    def add_many(self, messages: Iterable[Mapping[str, Any] | NewMessage], *, compact: bool = True) -> list[Message]:
        """Store many messages in one transaction: all are validated first, so one bad
        message means none is written (a :class:`~lossless.core.validate.NewMessage` is
        one :func:`~lossless.core.validate.validate_message` made already: it is stored as
        it is). Idempotent on ``external_id``.

        With ``compaction="background"`` (the default) this returns as soon as the
        messages and their full-text rows are stored: the worker thread compacts and
        embeds. ``compact=False`` neither compacts inline nor wakes the worker (the work
        stays owed, for a worker or :meth:`lossless.Memory.wait_idle`)."""
        if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Iterable):
            raise ValidationError(f"add_many takes a list of messages, got {type(messages).__name__}")
        validated: list[NewMessage] = []
        for i, data in enumerate(messages):
            if isinstance(data, NewMessage):
                validated.append(data)
                continue
            try:
                validated.append(validate_message(data, max_bytes=self.memory.config.max_message_bytes))
            except Exception as exc:
                if len(validated) or i:
                    raise type(exc)(f"message {i}: {exc}") from None
                raise
        if not validated:
            return []
        counter = self.memory.counter
        config = self.memory.config
        if config.zone is not UTC:  # a time without an offset is a time of the zone times are shown in
            validated = [replace(m, created_at=m.created_at.replace(tzinfo=config.zone))
                         if m.created_at.tzinfo is None else m for m in validated]
        background = config.compaction != "inline" and compact  # (then work_queued() ends the write)
        if background:
            self.memory.writing()  # the worker thread yields while this process writes
        try:
            counts = [counter.count(_new_text(m)) for m in validated]
            # stored with their full-text rows, and the conversation queued for the worker,
            # in one transaction: from here on they are found by keyword search
            stored = self.memory.store.append_messages(self.id, validated, counts)
        except BaseException:
            if background:
                self.memory.work_queued(self.id)  # (balances writing(); nothing new is queued)
            raise
        asked = config.chat_commands and any(_is_compact_command(m) for m in stored)
        if config.compaction != "inline":
            # compaction and vectors are the worker's (lossless/worker.py): the caller never waits
            try:
                if asked:
                    self.memory.backlog.force(self.id, "/compact command")
            finally:
                if compact:
                    self.memory.work_queued(self.id)
            return stored
        try:
            if asked:
                self.memory.compactor.compact(self.id, force=True, reason="/compact command",
                                              wait=config.tool_wait_seconds)
            elif config.auto_compact and compact:
                self.memory.compactor.compact(self.id)
            # Inline, vectors are made by the next query that needs them (or conv.index());
            # with no embedder nothing more is owed
            if self.memory.embedder is None and compact and stored:
                self.memory.backlog.clear(self.id, max(m.seq for m in stored))
        except StoreError as exc:
            # The messages are stored (their transaction committed): an error here would
            # make the caller add them again. The next trigger compacts; say why it did not.
            log.warning("lossless: %s: automatic compaction failed after the messages were stored: %s",
                        self.id, exc)
        return stored

    # -- reading ------------------------------------------------------------------------

    def messages(self, first_seq: int = 1, last_seq: int | None = None) -> list[Message]:
        """Every stored message in seq order (or the range asked for), verbatim."""
        return self.memory.store.get_messages(self.id, first_seq, last_seq)

    @property
    def info(self) -> ConversationInfo:
        info = self.memory.store.get_conversation(self.id)
        assert info is not None
        return info

    def frontier(self) -> list[Summary]:
        """The summaries with no parent yet, oldest first; with the raw tail after them
        they partition the whole history."""
        return self.memory.store.frontier(self.id)

    def root(self) -> Summary | None:
        """The whole-conversation root (seed 000): the summary of everything summarized
        that compaction keeps current and assembly shows first; None before the first
        compaction (or with ``root_max_tokens=0``)."""
        return self.memory.store.root(self.id)

    def summaries(self) -> list[Summary]:
        return self.memory.store.summaries(self.id)

    def assemble(self, budget_tokens: int | None = None, query: str | None = None, *,
                 layout: Layout = "auto") -> AssembledContext:
        """The context for one model call: at most ``budget_tokens`` (default: the
        context window) by the configured tokenizer. ``layout``: ``stable`` tries the
        cache-stable layout first, ``budgeted`` never does, ``auto`` (the default) tries
        it when the budget is the whole window (:class:`~lossless.context.Assembler`)."""
        return self.memory.assembler.assemble(self.id, budget_tokens, query, layout=layout)

    def compact(self, *, force: bool = True, full: bool = False, emergency: bool = False,
                reason: str | None = None, wait: float | None = None) -> CompactionReport:
        """Compact now. ``force`` (the default here) summarizes everything outside the
        fresh tail even under the trigger; ``full`` condenses down to one root;
        ``emergency`` keeps only the newest turn raw (after a context-length error).
        ``reason`` is recorded with the report and every summary written (default:
        ``manual``). ``wait``: seconds to wait for a compaction running elsewhere
        (default: the config's ``tool_wait_seconds``), then the report says it was skipped."""
        waited = self.memory.config.tool_wait_seconds if wait is None else wait
        return self.memory.compactor.compact(self.id, force=force, full=full, emergency=emergency, reason=reason,
                                             wait=waited)

    def erase(self, messages: Sequence[str | int] | str | int | None = None, *, reason: str,
              by: str, vacuum: bool = False) -> list[Tombstone]:
        """Erase messages for privacy — the one way stored history changes. ``messages``:
        message ids or seqs (None: every message of the conversation); ``reason`` and
        ``by`` (who erases) are required and recorded in a tombstone per message with the
        time. Each message keeps its id, seq, role and place and reads ``[erased]`` (its
        tool calls keep their ids and names); in the same transaction the summaries over
        it are rewritten without it (marked as fallbacks, for ``compact
        --redo-fallbacks``), its keyword rows and the retrieval units, vectors and cached
        embeddings that quoted it are replaced; then long-term memories distilled from it
        are forgotten. Its name and metadata are cleared too; erasing every message
        (``messages=None``) clears the conversation's metadata as well, but for the owners
        of its memories (``user``, ``agent``). ``verify()`` stays clean.

        The database files keep nothing of it: freed space is overwritten, the keyword
        indexes merged, SQLite's WAL checkpointed (PostgreSQL: the tables VACUUMed; see
        :mod:`lossless.store.scrub` for what a server's WAL and backups keep).
        ``vacuum=True`` also rewrites the files (SQLite ``VACUUM``, PostgreSQL ``VACUUM
        FULL``): for a SQLite file written before lossless cleared freed space, and slow
        on a large store. Returns the tombstones, in seq order."""
        from lossless.compaction.erase import erase_messages

        return erase_messages(self.memory, self.id, messages, reason=reason, by=by,
                              wait=max(30.0, self.memory.config.tool_wait_seconds), vacuum=vacuum,
                              work_queued=self.memory.work_queued)

    def tombstones(self) -> list[Tombstone]:
        """The erased messages of this conversation: who erased each, when and why."""
        from lossless.store.erase import tombstones

        return tombstones(self.memory.store, self.id)

    def redo_fallbacks(self, progress: Callable[[int, int], None] | None = None) -> RedoReport:
        """Write again, with the summarizer's model, the summaries its deterministic
        fallback made while the provider was down (see
        :meth:`~lossless.compaction.engine.Compactor.redo_fallbacks`); ``progress(done, total)``
        after each one."""
        return self.memory.compactor.redo_fallbacks(self.id, wait=self.memory.config.tool_wait_seconds,
                                                    progress=progress)

    def call_with_recovery(self, call: Callable[[AssembledContext], T], *, budget_tokens: int | None = None,
                           query: str | None = None, max_compactions: int = 3,
                           log_to: RecoveryLog | None = None) -> T:
        """Assemble a context and pass it to ``call`` (your model call); when the provider
        answers that the context is too long, compact in emergency mode and retry with a
        smaller budget, then cut the largest tool outputs, then raise
        :class:`~lossless.core.errors.ContextOverflowError`. See :mod:`lossless.agent.emergency`."""
        return call_with_recovery(self, call, budget_tokens=budget_tokens, query=query,
                                  max_compactions=max_compactions, log_to=log_to)

    def turn(self, user_message: str | Mapping[str, Any], call: Any, **options: Any) -> TurnResult:
        """One agent turn around your model call: memories and context assembled, the
        model called (an ``openai`` / ``anthropic`` client with ``model=``, or a function
        from messages to a reply), tool calls run, everything stored in one transaction,
        compaction if due. A failed turn stores nothing. See :mod:`lossless.agent.loop`."""
        return run_turn(self, user_message, call, **options)

    async def aturn(self, user_message: str | Mapping[str, Any], call: Any, **options: Any) -> TurnResult:
        """:meth:`turn` for async code; async clients (``AsyncOpenAI``) work too."""
        return await arun_turn(self, user_message, call, **options)

    def end(self, *, use_summarizer: bool = True) -> list[MemoryRecord]:
        """Close the session (and its current task): distil the messages not distilled yet
        into long-term memory records of this conversation's user/agent scope (its metadata
        ``user`` / ``agent``), write the task's record (type, status, result, patterns,
        errors; merged into the record an earlier write of the same task made, see
        :mod:`lossless.longterm.tasks`) and return them. With an LLM summarizer configured it writes the records (unless
        ``use_summarizer`` is False), else the extractive rules do; the conversation itself
        stays as it is and can go on."""
        from lossless.summarize.extractive import ExtractiveSummarizer

        summarizer = self.memory.summarizer
        llm = use_summarizer and not isinstance(summarizer, ExtractiveSummarizer)
        return self.memory.distill(self.id, summarizer=summarizer if llm else None, end_task=True)


    @property
    def state(self) -> Literal["ACTIVE", "COMPACTING"]:
        """``COMPACTING`` while a compaction of this conversation runs (in any thread or
        process sharing the store), else ``ACTIVE``."""
        return self.memory.compactor.state(self.id)

    def compaction_log(self, limit: int = 100) -> list[dict[str, Any]]:
        """The compactions that ran, newest first: reason (the trigger), times, tokens
        before and after, summaries written, and why a run stopped early if it did."""
        return self.memory.store.compaction_log(self.id, limit)

    def active_tokens(self) -> int:
        return self.memory.compactor.active_tokens(self.id)

    def search(
        self,
        query: str,
        *,
        limit: int = 20,
        kinds: tuple[Literal["message", "summary"], ...] = ("message", "summary"),
        roles: tuple[str, ...] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        mode: SearchMode = "fts",
        sort: Literal["relevance", "recency"] = "relevance",
    ) -> list[GrepHit]:
        """Search this conversation only. ``mode``: ``fts`` keywords (bm25), ``raw`` FTS5
        syntax, ``regex``, ``semantic`` vectors, ``hybrid`` keywords and vectors fused."""
        return self.memory.search(query, conversations=[self.id], limit=limit, kinds=kinds, roles=roles,
                                  since=since, until=until, mode=mode, sort=sort)

    def index(self, progress: Callable[[int, int], None] | None = None) -> int:
        """Cut retrieval units for new messages and embed them now (assembly and search
        otherwise do it lazily); ``progress(done, total)`` after each batch. Returns how
        many units were passed: embedded, or left to keyword search when the embedder
        does not read their language."""
        with self.memory.foreground(self.id):  # the worker leaves it alone meanwhile
            self.memory.recaller.cut_units(self.id)
            return self.memory.recaller.embed_pending(self.id, progress=progress)

    @property
    def tools(self) -> ToolBox:
        """lcm_grep / lcm_describe / lcm_expand scoped to this conversation."""
        return ToolBox(self.memory, self.id)

    def grep(self, query: str, **kwargs: Any) -> GrepResult:
        return self.tools.lcm_grep(query, **kwargs)

    def describe(self, node_id: str) -> MessageDescription | SummaryDescription:
        return self.tools.lcm_describe(node_id)

    def expand(self, summary_id: str, **kwargs: Any) -> ExpandResult | MessageSlice | SummarySlice:
        return self.tools.lcm_expand(summary_id, **kwargs)

    def backlog(self) -> ConversationBacklog:
        """What the worker still owes this conversation: whether it is queued (and since
        when, whether a worker is on it now, failed attempts), messages not cut into
        retrieval units, units without a vector, and the compaction trigger that fires
        (None: no compaction is due). ``to_dict()`` is its JSON."""
        row = self.memory.backlog.row(self.id)
        recaller = self.memory.recaller
        return ConversationBacklog(
            queued=row is not None,
            queued_seconds=row.queued_seconds if row else 0.0,
            in_progress=bool(row and row.in_progress),
            messages_not_indexed=recaller.uncut(self.id) if recaller.embedder is not None else 0,
            units_not_embedded=recaller.unembedded(self.id),
            compaction_due=self.memory.compactor.trigger(self.id) if self.memory.config.auto_compact else None,
            failed_attempts=row.attempts if row else 0,
            last_error=row.last_error if row else None,
        )

    def stats(self) -> ConversationStats:
        """Sizes, tokens, the DAG's depth and frontier, the raw tail, summarizer spend and
        the backlog. ``to_dict()`` is its JSON (``lossless stats CONV --json``, the API)."""
        store = self.memory.store
        frontier = store.frontier(self.id)
        everything = store.summaries(self.id)
        covered = frontier[-1].last_seq if frontier else 0
        total = store.last_seq(self.id)
        message_tokens = store.token_sum(self.id, 1)
        return ConversationStats(
            conversation=self.id,
            messages=total,
            message_tokens=message_tokens,
            summaries=len(everything),
            max_depth=max((s.depth for s in everything), default=-1),
            frontier_summaries=len(frontier),
            frontier_tokens=sum(s.token_count for s in frontier),
            raw_tail_messages=total - covered,
            raw_tail_tokens=store.token_sum(self.id, covered + 1),
            active_tokens=self.active_tokens(),
            context_window=self.memory.config.context_window,
            usage=SummarizerUsage.of(store.summarizer_usage(self.id), message_tokens),
            backlog=self.backlog(),
        )

    # -- async wrappers (one sync core, run in a worker thread) --------------------------

    async def aadd(self, role: str, content: str | list[dict[str, Any]] | None = None, **kwargs: Any) -> Message:
        return await asyncio.to_thread(self.add, role, content, **kwargs)

    async def aadd_many(self, messages: Iterable[Mapping[str, Any]]) -> list[Message]:
        return await asyncio.to_thread(self.add_many, list(messages))

    async def aassemble(self, budget_tokens: int | None = None, query: str | None = None) -> AssembledContext:
        return await asyncio.to_thread(self.assemble, budget_tokens, query)

    async def acompact(self, **kwargs: Any) -> CompactionReport:
        return await asyncio.to_thread(self.compact, **kwargs)

    async def asearch(self, query: str, **kwargs: Any) -> list[GrepHit]:
        return await asyncio.to_thread(self.search, query, **kwargs)

    async def agrep(self, query: str, **kwargs: Any) -> GrepResult:
        return await asyncio.to_thread(self.grep, query, **kwargs)

    async def aexpand(self, summary_id: str, **kwargs: Any) -> ExpandResult | MessageSlice | SummarySlice:
        return await asyncio.to_thread(self.expand, summary_id, **kwargs)

    async def aend(self) -> list[MemoryRecord]:
        return await asyncio.to_thread(self.end)


def _is_compact_command(msg: Message) -> bool:
    return msg.role == "user" and isinstance(msg.content, str) and msg.content.strip().lower() == "/compact"


def _new_text(msg: NewMessage) -> str:
    from lossless.core.render import content_text

    return content_text(msg.content, msg.tool_calls)

