"""Chunk vectors: one per chunk in ``file_chunk_vectors``, made through the store's shared
``embedding_cache`` (the same text is never embedded twice by one model) and searched
by a numpy product over an in-memory matrix.

The matrix is loaded once and caught up only when ``files_generation`` changes (every
write to the file tables bumps it, in this process or another): then the ids of the
vectors are read from an index, deleted rows are masked out and only new chunks' vectors
are loaded. At 100k chunks of 384 dimensions (bench/bench_files.py, 2 cores) a query
takes ~6 ms, the first one of a process ~0.35 s (loading 146 MB), the first after
re-indexing a file ~30 ms.
Why not sqlite-vec's ``vec0`` is in migration 6; bench/bench_files.py measures both.
That is SQLite's side; on PostgreSQL chunk vectors live in pgvector tables
(:mod:`lossless.files.postgres_vectors`), and both embed through :class:`CachedEmbeddings`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from lossless.embed.languages import ScriptReader, declared_languages
from lossless.files.chunk import FILE_KINDS
from lossless.recall.units import text_sha256
from lossless.store.sqlite.recall import SQLiteRecall

if TYPE_CHECKING:
    from lossless.embed.base import Embedder
    from lossless.recall.queries import QueryVectors
    from lossless.store.sqlite.store import SQLiteStore

__all__ = ["CachedEmbeddings", "ChunkVectors", "bump_generation", "generation", "text_sha256"]

EMBED_BATCH = 256


def generation(store: SQLiteStore) -> int:
    return int(store.query("SELECT value FROM files_generation WHERE id = 1")[0][0])


def bump_generation(conn: Any) -> None:
    """Mark the file tables changed; call inside the writing transaction."""
    conn.execute("UPDATE files_generation SET value = value + 1 WHERE id = 1")


@dataclass(frozen=True, slots=True)
class _Segment:
    """Vectors loaded together; ``alive`` masks out chunks deleted since."""

    chunk_ids: npt.NDArray[np.int64]
    file_ids: npt.NDArray[np.int64]
    kinds: npt.NDArray[np.int8]  # index into FILE_KINDS
    vectors: npt.NDArray[np.float32]
    alive: npt.NDArray[np.bool_]


@dataclass(frozen=True, slots=True)
class _Matrix:
    generation: int
    segments: tuple[_Segment, ...]


_MAX_SEGMENTS = 8
_MAX_DEAD = 0.25  # share of deleted rows that makes a compaction worth one copy


class CachedEmbeddings:
    """Chunk texts embedded through the store's embedding cache (``_cache``: a recall
    index, only its ``cached``/``cache_put`` half is used)."""

    embedder: Embedder
    _cache: Any
    queries: QueryVectors | None = None  # question vectors shared with recall (Files sets it)
    _reader: tuple[object, ScriptReader] | None = None  # (the embedder it was made for, the reader)

    def reads(self, text: str) -> bool:
        """Whether the embedder reads ``text``'s language (:mod:`lossless.embed.languages`):
        a chunk or a query it does not read gets no vector and is found by keywords."""
        if self._reader is None or self._reader[0] is not self.embedder:
            self._reader = (self.embedder, ScriptReader(declared_languages(self.embedder)))
        return self._reader[1].reads(text)

    def vectors_for(self, texts: Sequence[str]) -> tuple[dict[str, np.ndarray], int]:
        """sha256 → vector for each text the embedder reads, embedding only those the
        cache lacks (in batches, each stored in the cache as it comes back). Returns the
        vectors and how many texts were embedded; a text in a language the embedder does
        not read has no entry."""
        e = self.embedder
        by_sha = {text_sha256(t): t for t in texts if self.reads(t)}
        out = self._cache.cached(e.provider, e.model, list(by_sha))
        missing = [(sha, t) for sha, t in by_sha.items() if sha not in out]
        for i in range(0, len(missing), EMBED_BATCH):
            batch = missing[i : i + EMBED_BATCH]
            vectors = e.embed([t for _, t in batch])
            fresh = [(sha, np.asarray(v, dtype="<f4")) for (sha, _), v in zip(batch, vectors, strict=True)]
            self._cache.cache_put(e.provider, e.model, fresh)
            out.update(fresh)
        return out, len(missing)

    def query_vector(self, query: str) -> np.ndarray:
        """The query's vector, through the cache (agents repeat questions); computed once
        with the recall and memory searches of the same question when ``queries`` is set."""
        if self.queries is not None:
            return self.queries.vector(self.embedder, self._cache, query)
        vectors, _ = self.vectors_for([query])
        return vectors[text_sha256(query)]


class ChunkVectors(CachedEmbeddings):
    """Embeds chunks and finds the nearest ones for one embedder (SQLite: numpy over an
    in-memory matrix)."""

    def __init__(self, store: SQLiteStore, embedder: Embedder) -> None:
        self.store = store
        self.embedder = embedder
        self._cache = SQLiteRecall(store, "numpy")  # only its embedding-cache half is used
        self._matrix: _Matrix | None = None
        self._lock = threading.Lock()

    def write(self, conn: Any, rows: Sequence[tuple[int, str, np.ndarray]]) -> None:
        """Store (chunk rowid, text sha256, vector) rows; inside the caller's transaction."""
        e = self.embedder
        conn.executemany(
            "INSERT INTO file_chunk_vectors (chunk_rowid, provider, model, dim, text_sha256, vector) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (chunk_rowid) DO UPDATE SET provider = excluded.provider, "
            "model = excluded.model, dim = excluded.dim, text_sha256 = excluded.text_sha256, "
            "vector = excluded.vector",
            [(rowid, e.provider, e.model, int(v.shape[0]), sha, np.asarray(v, dtype="<f4").tobytes())
             for rowid, sha, v in rows],
        )

    def missing(self, file_rowids: Sequence[int]) -> list[tuple[int, str, str]]:
        """(chunk rowid, text, sha256) of the chunks of these files without a vector from
        this embedder (indexed before it was configured, or their embedding failed)."""
        e = self.embedder
        out: list[tuple[int, str, str]] = []
        for i in range(0, len(file_rowids), 500):
            batch = list(file_rowids[i : i + 500])
            out.extend(self.store.query(
                "SELECT c.rowid, c.text, c.text_sha256 FROM file_chunks c "
                "LEFT JOIN file_chunk_vectors v ON v.chunk_rowid = c.rowid "
                f"WHERE c.file_rowid IN ({','.join('?' * len(batch))}) "
                "AND (v.chunk_rowid IS NULL OR v.provider != ? OR v.model != ? OR v.dim != ?)",
                [*batch, e.provider, e.model, e.dim],
            ))
        return out

    def matrix(self) -> _Matrix:
        """The vectors of this embedder, caught up with the store. Chunk rowids are never
        reused and a chunk never changes, so catching up after a write reads the ids
        (from an index), masks out the deleted rows and loads only new chunks' vectors
        as a new segment: no copy of the big matrix on every write."""
        gen = generation(self.store)
        with self._lock:
            old = self._matrix
        if old is not None and old.generation == gen:
            return old
        if old is None:
            built = _Matrix(gen, (self._load(None),))
            with self._lock:
                self._matrix = built
            return built
        e = self.embedder
        key = (e.provider, e.model, e.dim)
        live = self.store.query(
            "SELECT chunk_rowid FROM file_chunk_vectors WHERE provider = ? AND model = ? AND dim = ? "
            "ORDER BY chunk_rowid", key)
        live_ids = np.fromiter((r[0] for r in live), dtype=np.int64, count=len(live))
        segments: list[_Segment] = []
        known = np.zeros(0, dtype=np.int64)
        for seg in old.segments:
            alive = seg.alive & np.isin(seg.chunk_ids, live_ids, assume_unique=True)
            if alive.any():
                segments.append(_Segment(seg.chunk_ids, seg.file_ids, seg.kinds, seg.vectors, alive))
                known = np.concatenate([known, seg.chunk_ids[alive]])
        fresh = np.setdiff1d(live_ids, known, assume_unique=True)
        if len(fresh):
            segments.append(self._load(fresh))
        rows = sum(len(seg.alive) for seg in segments)
        dead = rows - sum(int(seg.alive.sum()) for seg in segments)
        if len(segments) > _MAX_SEGMENTS or (rows and dead > _MAX_DEAD * rows):
            segments = [_compact(segments)]
        built = _Matrix(gen, tuple(segments))
        with self._lock:
            self._matrix = built
        return built

    def _load(self, chunk_ids: npt.NDArray[np.int64] | None) -> _Segment:
        """A segment of these chunks' vectors (None: all of this embedder's)."""
        e = self.embedder
        rows: list[tuple[Any, ...]] = []
        if chunk_ids is None:
            rows = self.store.query(
                "SELECT v.chunk_rowid, c.file_rowid, c.kind, v.vector FROM file_chunk_vectors v "
                "JOIN file_chunks c ON c.rowid = v.chunk_rowid WHERE v.provider = ? AND v.model = ? AND v.dim = ?",
                (e.provider, e.model, e.dim))
            chunk_ids = np.zeros(0, dtype=np.int64)
        for i in range(0, len(chunk_ids), 5000):
            batch = json.dumps(chunk_ids[i : i + 5000].tolist())
            rows.extend(self.store.query(
                "SELECT v.chunk_rowid, c.file_rowid, c.kind, v.vector FROM file_chunk_vectors v "
                "JOIN file_chunks c ON c.rowid = v.chunk_rowid WHERE v.chunk_rowid IN (SELECT value FROM json_each(?)) "
                "AND v.provider = ? AND v.model = ? AND v.dim = ?", (batch, e.provider, e.model, e.dim)))
        kind_ids = {k: i for i, k in enumerate(FILE_KINDS)}
        n = len(rows)
        return _Segment(
            np.fromiter((r[0] for r in rows), dtype=np.int64, count=n),
            np.fromiter((r[1] for r in rows), dtype=np.int64, count=n),
            np.fromiter((kind_ids[r[2]] for r in rows), dtype=np.int8, count=n),
            np.frombuffer(b"".join(r[3] for r in rows), dtype=np.float32).reshape(n, e.dim) if n
            else np.zeros((0, e.dim), dtype=np.float32),
            np.ones(n, dtype=bool),
        )

    def nearest(self, query: str, k: int, *, files: Collection[int] | None = None,
                kinds: Collection[str] | None = None, min_similarity: float = 0.0) -> dict[int, float]:
        """chunk rowid → cosine similarity of the (at most ``k``) chunks nearest the query,
        among those of ``files`` (file rowids) and ``kinds`` when given."""
        m = self.matrix()
        if not m.segments or not self.reads(query):  # a query the model does not read: keywords alone
            return {}
        qvec = np.asarray(self.query_vector(query), dtype=np.float32).reshape(-1)
        wanted_files = np.fromiter(files, dtype=np.int64, count=len(files)) if files is not None else None
        wanted_kinds = np.asarray([i for i, kind in enumerate(FILE_KINDS) if kinds is None or kind in kinds],
                                  dtype=np.int8)
        best: list[tuple[float, int]] = []
        for seg in m.segments:
            mask = seg.alive.copy()
            if wanted_files is not None:
                mask &= np.isin(seg.file_ids, wanted_files)
            if kinds is not None:
                mask &= np.isin(seg.kinds, wanted_kinds)
            idx = np.nonzero(mask)[0]
            if len(idx) == 0:
                continue
            sims = (seg.vectors @ qvec)[idx]  # the whole product is cheaper than gathering rows first
            take = min(k, len(idx))
            top = np.argpartition(-sims, take - 1)[:take]
            best.extend((float(sims[i]), int(seg.chunk_ids[idx[i]])) for i in top)
        best.sort(key=lambda p: (-p[0], p[1]))
        return {rowid: sim for sim, rowid in best[:k] if sim >= min_similarity}


def _compact(segments: Sequence[_Segment]) -> _Segment:
    """One segment of the live rows (one copy of the matrix)."""
    return _Segment(
        np.concatenate([s.chunk_ids[s.alive] for s in segments]),
        np.concatenate([s.file_ids[s.alive] for s in segments]),
        np.concatenate([s.kinds[s.alive] for s in segments]),
        np.concatenate([s.vectors[s.alive] for s in segments]),
        np.ones(sum(int(s.alive.sum()) for s in segments), dtype=bool),
    )
