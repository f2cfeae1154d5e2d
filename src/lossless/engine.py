"""The entry point: :func:`open` a store and get a :class:`Memory`."""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

from lossless.assemble import Assembler
from lossless.compaction import Compactor
from lossless.config import Config
from lossless.conversation import Conversation
from lossless.errors import ValidationError
from lossless.store.base import SearchSpec, Store
from lossless.store.sqlite import SQLiteStore
from lossless.summarize.base import Summarizer
from lossless.summarize.extractive import ExtractiveSummarizer
from lossless.tokens import TokenCounter, get_counter
from lossless.tools import ToolBox
from lossless.types import ConversationInfo, GrepHit
from lossless.validate import check_conversation_id

__all__ = ["Memory", "default_db_path", "open"]


def default_db_path() -> Path:
    """``$LOSSLESS_DB``, else ``$LOSSLESS_HOME/lossless.db``, else the user data dir."""
    env = os.environ.get("LOSSLESS_DB")
    if env:
        return Path(env).expanduser()
    home = os.environ.get("LOSSLESS_HOME")
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
    ) -> None:
        self.store = store
        self.config = config
        self.counter = counter or get_counter(config.tokenizer)
        self.summarizer: Summarizer = summarizer or ExtractiveSummarizer()
        self.compactor = Compactor(store, config, self.counter, self.summarizer)
        self.assembler = Assembler(store, config, self.counter)

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
        limit: int = 20,
        kinds: tuple[Literal["message", "summary"], ...] = ("message", "summary"),
        roles: tuple[str, ...] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        mode: Literal["fts", "raw", "regex"] = "fts",
        sort: Literal["relevance", "recency"] = "relevance",
    ) -> list[GrepHit]:
        """Keyword search; across every conversation unless ``conversations`` is given."""
        spec = SearchSpec(query=query, conversation_ids=tuple(conversations) if conversations is not None else None,
                          kinds=kinds, roles=roles, since=since, until=until, mode=mode, sort=sort, limit=limit)
        return self.store.search(spec)

    def tools(self, conversation_id: str | None) -> ToolBox:
        """The agent tools, scoped to one conversation (None: every conversation)."""
        return ToolBox(self, conversation_id)

    def save_settings(self, **values: Any) -> None:
        """Store config values as this database's defaults: a later :func:`open` that does
        not pass them gets these instead of the built-in defaults."""
        Config.from_kwargs(**{**self.store.get_settings(), **values})  # validate first
        self.store.set_settings(values)

    def verify(self, conversation_id: str | None = None) -> list[str]:
        """Re-check hashes and DAG invariants; returns the problems found (none: [])."""
        return self.store.verify(conversation_id)

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


def open(
    path: str | os.PathLike[str] | None = None,
    *,
    summarizer: Summarizer | None = None,
    counter: TokenCounter | None = None,
    **config: Any,
) -> Memory:
    """Open (creating if needed) a lossless store.

    ``path`` is a SQLite file, ``":memory:"``, or None for :func:`default_db_path`.
    Keyword arguments are :class:`~lossless.config.Config` fields, e.g.
    ``context_window=8192``; fields not given come from the database's saved settings
    (:meth:`Memory.save_settings`), then from the built-in defaults.
    """
    Config.from_kwargs(**config)  # refuse bad options before touching any file
    target = ":memory:" if path == ":memory:" else (Path(path) if path is not None else default_db_path())
    store = SQLiteStore(target)
    saved = {k: v for k, v in store.get_settings().items() if k in Config.field_names()}
    try:
        cfg = Config.from_kwargs(**{**saved, **config})
    except Exception:
        store.close()
        raise
    return Memory(store, cfg, summarizer=summarizer, counter=counter)
