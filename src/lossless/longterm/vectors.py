"""Memory vectors: one per record in ``memory_vectors``, made through the store's shared
``embedding_cache`` and searched by a numpy scan.

Why a plain table and not sqlite-vec's ``vec0`` (which message recall uses): memory sets
are small (a scan of thousands of vectors takes well under a millisecond), the scope
filter is ordinary SQL on the same query, nothing depends on the extension loading, and
a forgotten record's vector is an ordinary row that goes in the same transaction.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from lossless.embed.base import embed_checked
from lossless.embed.languages import ScriptReader, declared_languages
from lossless.longterm.backend import memory_backend
from lossless.longterm.records import search_text
from lossless.recall.queries import QueryVectors
from lossless.recall.units import text_sha256

if TYPE_CHECKING:
    from lossless.embed.base import Embedder
    from lossless.store.base import Store

__all__ = ["MemoryVectors", "drop_cached", "text_sha256"]

_BATCH = 256


def drop_cached(conn: Any, shas: Sequence[str]) -> None:
    """Delete cached embeddings of forgotten text, unless a recall unit (a message) or
    another memory's vector still uses that exact text. Runs on ``conn`` inside the
    caller's transaction."""
    for i in range(0, len(shas), 300):
        batch = list(shas[i : i + 300])
        marks = ",".join("?" * len(batch))
        conn.execute(
            f"DELETE FROM embedding_cache WHERE text_sha256 IN ({marks}) "
            f"AND text_sha256 NOT IN (SELECT text_sha256 FROM recall_units WHERE text_sha256 IN ({marks})) "
            f"AND text_sha256 NOT IN (SELECT text_sha256 FROM memory_vectors WHERE text_sha256 IN ({marks}))",
            batch * 3,
        )


class MemoryVectors:
    """Embeds memories and finds the nearest ones for one embedder."""

    def __init__(self, store: Store, embedder: Embedder, min_similarity: float,
                 queries: QueryVectors | None = None) -> None:
        self.store = store
        self.db = memory_backend(store)
        self.embedder = embedder
        self.min_similarity = min_similarity
        self._cache = self.db.cache()  # only its embedding-cache half is used
        self.queries = queries if queries is not None else QueryVectors()
        # a record or a query in a language the model does not read gets no vector: it is
        # found by keywords (lossless.embed.languages)
        self.reader = ScriptReader(declared_languages(embedder))

    def embed(self, items: Sequence[tuple[int, str]]) -> None:
        """Store a vector for each (memory rowid, text), embedding only texts the cache
        does not hold yet."""
        e = self.embedder
        items = [(rowid, text) for rowid, text in items if self.reader.reads(text)]
        if not items:
            return
        shas = [text_sha256(text) for _, text in items]
        cached = self._cache.cached(e.provider, e.model, shas)
        missing = list(dict.fromkeys(text for (_, text), sha in zip(items, shas, strict=True) if sha not in cached))
        if missing:
            vectors = embed_checked(e, missing)
            fresh = [(text_sha256(t), np.asarray(v, dtype="<f4")) for t, v in zip(missing, vectors, strict=True)]
            self._cache.cache_put(e.provider, e.model, fresh)
            cached.update(fresh)
        with self.db.transaction() as conn:
            for (rowid, _), sha in zip(items, shas, strict=True):
                vec = np.asarray(cached[sha], dtype="<f4")
                # the record may have been forgotten while we embedded: then write nothing
                conn.execute(
                    "INSERT INTO memory_vectors (memory_rowid, provider, model, dim, text_sha256, vector) "
                    "SELECT ?, ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM memories WHERE rowid = ?) "
                    "ON CONFLICT (memory_rowid) DO UPDATE SET provider = excluded.provider, model = excluded.model, "
                    "dim = excluded.dim, text_sha256 = excluded.text_sha256, vector = excluded.vector",
                    (rowid, e.provider, e.model, int(vec.shape[0]), sha, vec.tobytes(), rowid),
                )

    def backfill(self, where: str, args: Sequence[Any]) -> int:
        """Embed the records matching ``where`` (alias ``m``) that have no vector from this
        embedder: added before it was configured, or their embedding failed."""
        e = self.embedder
        rows = self.db.query(
            "SELECT m.rowid, m.content, m.result, m.patterns, m.errors FROM memories m "
            f"LEFT JOIN memory_vectors v ON v.memory_rowid = m.rowid WHERE {where} "
            "AND (v.memory_rowid IS NULL OR v.provider != ? OR v.model != ? OR v.dim != ?)",
            [*args, e.provider, e.model, e.dim],
        )
        items = [(r[0], search_text(r[1], r[2], json.loads(r[3] or "[]"), json.loads(r[4] or "[]"))) for r in rows]
        for i in range(0, len(items), _BATCH):
            self.embed(items[i : i + _BATCH])
        return len(items)

    def query_vector(self, query: str) -> np.ndarray:
        """The query's vector, computed once (:mod:`lossless.recall.queries`), through
        the cache (agents repeat questions)."""
        return self.queries.vector(self.embedder, self._cache, query)

    def nearest(self, query: str, where: str, args: Sequence[Any], k: int) -> dict[int, float]:
        """rowid → cosine similarity of the (at most ``k``) records matching ``where``
        nearest the query, leaving out those below ``min_similarity``; none for a query in
        a language the model does not read."""
        e = self.embedder
        if not self.reader.reads(query):
            return {}
        self.backfill(where, args)
        rows = self.db.query(
            "SELECT m.rowid, v.vector FROM memories m JOIN memory_vectors v ON v.memory_rowid = m.rowid "
            f"WHERE {where} AND v.provider = ? AND v.model = ? AND v.dim = ?",
            [*args, e.provider, e.model, e.dim],
        )
        if not rows:
            return {}
        qvec = self.query_vector(query)
        matrix = np.vstack([np.frombuffer(r[1], dtype="<f4") for r in rows])
        sims = matrix @ qvec
        top = np.argsort(-sims, kind="stable")[:k]
        return {int(rows[i][0]): float(sims[i]) for i in top if sims[i] >= self.min_similarity}
