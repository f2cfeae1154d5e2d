"""Query vectors, each computed once: one question's vector is shared by every search
that asks for it — assembly's recall over messages, its long-term memories and its
workspace file chunks, and recall's look-ahead (the model embeds the question on a
thread while the store is read).

Before, each of those looked the question up in the embedding cache and embedded it on
a miss; the look-ahead only stored its vector once recall used it, so an assembly with
memories in scope embedded its question twice (three times with a file reference).
Now the first to ask computes it (or takes the look-ahead's) and the others wait for
that one vector. The last few questions are kept in memory by (provider, model,
sha256(question)); the embedding cache keeps them across processes as before."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Protocol

import numpy as np

from lossless.embed.base import embed_checked
from lossless.recall.units import text_sha256

if TYPE_CHECKING:
    from lossless.embed.base import Embedder

__all__ = ["QueryVectors", "VectorCache"]

log = logging.getLogger("lossless")
_KEPT = 8  # questions remembered: an agent's follow-ups repeat the last few


class VectorCache(Protocol):
    """The embedding-cache half of a store's recall index."""

    def cached(self, provider: str, model: str, shas: Sequence[str]) -> dict[str, np.ndarray]: ...

    def cache_put(self, provider: str, model: str, items: Sequence[tuple[str, np.ndarray]]) -> None: ...


class _Entry:
    __slots__ = ("future", "unsaved")

    def __init__(self, future: Future[np.ndarray], unsaved: bool) -> None:
        self.future = future
        self.unsaved = unsaved  # computed, not yet written to the embedding cache


class QueryVectors:
    """The vectors of questions, each computed at most once while it is remembered (the
    last ``kept``), through the embedding cache. Thread-safe: a search that asks for a
    question being embedded waits for that vector instead of embedding it again."""

    def __init__(self, kept: int = _KEPT) -> None:
        self._kept = kept
        self._entries: OrderedDict[tuple[str, str, str], _Entry] = OrderedDict()
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None

    def start(self, embedder: Embedder, cache: VectorCache, query: str) -> None:
        """Look the question up in the cache, and on a miss start embedding it on a thread
        of its own (the caller reads the store meanwhile); a no-op for one remembered."""
        key = (embedder.provider, embedder.model, text_sha256(query))
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return
        hit = cache.cached(key[0], key[1], [key[2]]).get(key[2])
        with self._lock:
            if key in self._entries:
                return
            if hit is not None:
                done: Future[np.ndarray] = Future()
                done.set_result(hit)
                self._remember(key, _Entry(done, False))
                return
            if self._pool is None:
                self._pool = ThreadPoolExecutor(1, thread_name_prefix="lossless-query-embed")
            self._remember(key, _Entry(self._pool.submit(lambda: embed_checked(embedder, [query])[0]), True))

    def vector(self, embedder: Embedder, cache: VectorCache, query: str) -> np.ndarray:
        """The question's vector: remembered (or being embedded by another search: waited
        for), else from the cache, else embedded here; a new one is written to the cache."""
        key = (embedder.provider, embedder.model, text_sha256(query))
        with self._lock:
            entry = self._entries.get(key)
            mine = entry is None
            if entry is None:
                entry = _Entry(Future(), True)
                self._remember(key, entry)
            else:
                self._entries.move_to_end(key)
        if mine:
            return self._compute(embedder, cache, query, key, entry)
        try:
            vec = entry.future.result()
        except Exception as exc:  # e.g. an embedder bound to its thread: embed it on this one
            log.debug("lossless: the query embedding ahead failed (%s); embedding it here", exc)
            retry = _Entry(Future(), True)
            with self._lock:
                if self._entries.get(key) is entry:  # (else another search took it up: this one is not shared)
                    self._remember(key, retry)
            return self._compute(embedder, cache, query, key, retry)
        self._save(cache, key, entry, vec)
        return vec

    def _compute(self, embedder: Embedder, cache: VectorCache, query: str, key: tuple[str, str, str],
                 entry: _Entry) -> np.ndarray:
        try:
            hit = cache.cached(key[0], key[1], [key[2]]).get(key[2])
            if hit is not None:
                entry.unsaved = False
                entry.future.set_result(hit)
                return hit
            vec = np.asarray(embed_checked(embedder, [query])[0], dtype="<f4")
        except BaseException as exc:
            with self._lock:
                if self._entries.get(key) is entry:
                    del self._entries[key]
            entry.future.set_exception(exc)
            raise
        entry.future.set_result(vec)
        self._save(cache, key, entry, vec)
        return vec

    def _save(self, cache: VectorCache, key: tuple[str, str, str], entry: _Entry, vec: np.ndarray) -> None:
        """Write a vector computed here or ahead to the cache, once (on the asking thread:
        the look-ahead's thread has no store connection of its own)."""
        with self._lock:
            if not entry.unsaved:
                return
            entry.unsaved = False
        cache.cache_put(key[0], key[1], [(key[2], vec)])

    def _remember(self, key: tuple[str, str, str], entry: _Entry) -> None:
        self._entries[key] = entry
        self._entries.move_to_end(key)
        while len(self._entries) > self._kept:
            self._entries.popitem(last=False)

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
            self._entries.clear()
        if pool is not None:
            pool.shutdown(wait=True)
