"""What the background work needs of an open store: the worker
(:mod:`~lossless.compaction.worker`), its scheduler (:mod:`~lossless.compaction.scheduler`)
and an erase (:mod:`~lossless.compaction.erase`) take these, not the facade. A
:class:`lossless.services.Services` is each of them (and so is a :class:`lossless.Memory`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from lossless.compaction.engine import Compactor
    from lossless.core.config import Config
    from lossless.embed.base import Embedder
    from lossless.longterm.memories import Memories
    from lossless.recall.hybrid import Recaller
    from lossless.store.backlog import Backlog
    from lossless.store.base import Store
    from lossless.summarize.base import Summarizer

__all__ = ["EraseEngine", "WorkerEngine"]


class EraseEngine(Protocol):
    """The parts an erase plans and writes with, and the derived places it clears
    (long-term memories, cached vectors, the backlog)."""

    @property
    def store(self) -> Store: ...
    @property
    def compactor(self) -> Compactor: ...
    @property
    def recaller(self) -> Recaller: ...
    @property
    def memories(self) -> Memories: ...
    @property
    def backlog(self) -> Backlog: ...


class WorkerEngine(EraseEngine, Protocol):
    """The parts the worker serves the backlog with: compaction, vectors and the
    forgetting policy over one store (an erase's parts, and these)."""

    @property
    def config(self) -> Config: ...
    @property
    def embedder(self) -> Embedder | None: ...
    @property
    def summarizer(self) -> Summarizer: ...
