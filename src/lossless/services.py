"""The parts of one open store, built once in one place (:func:`build_services`) and
passed to whatever needs them through its constructor: nothing is attached afterwards.

:class:`lossless.Memory` is the facade over one :class:`Services`; a worker thread on a
SQLite file gets a second one over its own connection; the worker, an erase and the
agent tools take the narrow parts they need (:mod:`lossless.compaction.base`,
:mod:`lossless.agent.base`), which a :class:`Services` provides.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lossless.compaction.engine import Compactor
from lossless.context import Assembler
from lossless.core.config import Config
from lossless.core.tokens import TokenCounter
from lossless.embed.base import Embedder
from lossless.longterm.distill import Distiller
from lossless.longterm.memories import Memories
from lossless.recall.hybrid import Recaller
from lossless.store.backlog import Backlog
from lossless.store.base import Store
from lossless.summarize.base import Summarizer

if TYPE_CHECKING:
    from lossless.files import Files

__all__ = ["FileIndex", "Services", "build_services"]


class FileIndex:
    """The workspace file index of a store, built on first use (most stores have none)."""

    def __init__(self, store: Store, embedder: Embedder | None, counter: TokenCounter, recaller: Recaller) -> None:
        self._args = (store, embedder, counter, recaller)
        self._files: Files | None = None
        self._guard = threading.Lock()

    def get(self) -> Files:
        """The index, built now if it was not yet (``lossless index`` fills it)."""
        with self._guard:
            if self._files is None:
                from lossless.files import Files

                store, embedder, counter, recaller = self._args
                # question vectors are shared with recall: an assembly embeds its question once
                self._files = Files(store, embedder, counter, queries=recaller.queries)
            return self._files

    def indexed(self) -> Files | None:
        """The index once anything is indexed, by this process or by ``lossless index``
        in another one (a server sees files indexed after it started): one indexed read
        until then."""
        if self._files is not None:
            return self._files
        return self.get() if self._args[0].has_files() else None


@dataclass(frozen=True, slots=True)
class Services:
    """One store's engine parts, wired together once."""

    store: Store
    config: Config
    counter: TokenCounter
    summarizer: Summarizer
    embedder: Embedder | None
    recaller: Recaller
    memories: Memories
    distiller: Distiller
    file_index: FileIndex
    compactor: Compactor
    assembler: Assembler
    backlog: Backlog


def build_services(store: Store, config: Config, *, summarizer: Summarizer, counter: TokenCounter,
                   embedder: Embedder | None) -> Services:
    """Every part of one store, each given what it needs at construction."""
    recaller = Recaller(store, embedder, counter, config)
    memories = Memories(store, embedder, counter, queries=recaller.queries)
    distiller = Distiller(store, memories, counter)
    file_index = FileIndex(store, embedder, counter, recaller)
    if store.has_files():
        file_index.get()  # built at open, as the index is there: the first assembly does not pay for it
    backlog = Backlog(store)
    compactor = Compactor(store, config, counter, summarizer,
                          before_leaf=distiller.flush if config.memory_flush else None)
    assembler = Assembler(store, config, counter, recaller, memories=memories, files=file_index.indexed,
                          backlog=backlog)
    return Services(store=store, config=config, counter=counter, summarizer=summarizer, embedder=embedder,
                    recaller=recaller, memories=memories, distiller=distiller, file_index=file_index,
                    compactor=compactor, assembler=assembler, backlog=backlog)
