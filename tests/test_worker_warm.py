"""The worker thread loads the embedding model once its caller's writes pause (issue 29
item 4): a burst of single adds does not share the GIL and the cores with the load, and an
assembly meanwhile recalls by keywords rather than load the model on the caller's thread."""

from __future__ import annotations

import threading
from pathlib import Path

import lossless
from lossless.embed.base import warm_is_due
from lossless.testing import HashEmbedder

BURST = 100


class LoadingEmbedder(HashEmbedder):
    """A Warmable embedder that records how many adds had returned when it was warmed."""

    def __init__(self, added: list[int]) -> None:
        super().__init__()
        self.added = added
        self.warmed_after: list[int] = []
        self._lock = threading.Lock()

    def warm(self) -> None:
        with self._lock:
            self.warmed_after.append(len(self.added))

    def warming(self) -> bool:
        return self._lock.locked()


def test_the_model_loads_after_a_burst_of_adds_not_during_it(tmp_path: Path) -> None:
    added: list[int] = []
    embedder = LoadingEmbedder(added)
    with lossless.open(str(tmp_path / "burst.db"), embedder=embedder) as mem:
        conv = mem.conversation("c")
        for i in range(BURST):
            conv.add(role="user" if i % 2 == 0 else "assistant", content=f"short turn number {i} about the garden")
            added.append(i)
        # the thread waits for a pause: meanwhile the model counts as loading, so an
        # assembly recalls by keywords instead of loading it on this thread
        assert mem.recaller.warming()
        got = conv.assemble(2000, query="garden")
        assert got.messages
        assert mem.wait_idle(timeout=60)
        assert embedder.warmed_after == [BURST]
        assert not warm_is_due(embedder)
        assert not mem.recaller.warming()
        assert conv.backlog().units_not_embedded == 0
