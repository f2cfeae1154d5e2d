"""Recall storage in PostgreSQL: retrieval units, the embedding cache, and one pgvector
table per embedder — the interface :class:`~lossless.store.sqlite.recall.SQLiteRecall`
offers, so :class:`~lossless.recall.hybrid.Recaller` works on either.

Each vector table has an HNSW index (``vector_cosine_ops``). A k-NN restricted to one
conversation is exact (a scan of that conversation's vectors, ``ORDER BY embedding <=>
q``) while the conversation holds at most ``exact_below`` vectors: an HNSW search with
a filter returns the filter's share of ``ef_search`` candidates, which for a small
conversation among many is too few. Larger conversations use the HNSW index with
``ef_search`` raised to cover k, and fall back to the exact scan if that still finds
fewer than k.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

import numpy as np

from lossless.core.errors import StoreError
from lossless.embed.base import Vectors
from lossless.store.base import NewUnit, UnitRow
from lossless.store.recall_tables import RecallTables
from lossless.store.runner import QmarkConnection
from lossless.store.unembedded import index_name

__all__ = ["EXACT_BELOW", "PostgresRecall"]

EXACT_BELOW = 20_000  # vectors in one conversation; above it the HNSW index is used
_HNSW_MAX_DIM = 2000  # pgvector's limit for an HNSW index on vector(dim)



def _unit_row(r: Sequence[Any]) -> UnitRow:
    return UnitRow(int(r[0]), r[1], r[2], int(r[3]), int(r[4]), int(r[5]), r[6], tuple(json.loads(r[7])), r[8],
                   float(r[9]), float(r[10]), r[11])




class _Store(Protocol):
    """The PostgreSQL store as its recall index uses it (:class:`~lossless.store.postgres.store.PostgresStore`)."""

    dialect: str

    def _query(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...
    def transaction(self) -> AbstractContextManager[Any]: ...


class PostgresRecall(RecallTables):
    """Units, cache and vectors for one :class:`PostgresStore`. ``backend`` is accepted for
    symmetry with SQLite (``auto``, ``sqlite-vec``, ``numpy``); vectors are always pgvector."""

    backend = "pgvector"

    def __init__(self, store: _Store, backend: str = "auto") -> None:
        if backend not in ("auto", "sqlite-vec", "numpy", "pgvector"):
            raise StoreError(f"vector backend must be auto, sqlite-vec, numpy or pgvector; got {backend!r}")
        super().__init__(store, _unit_row)
        self.exact_below = EXACT_BELOW

    # -- units ----------------------------------------------------------------------------

    def forget_conversation(self, conversation_id: str) -> None:
        """Drop the cached unit counts of a conversation (after an erase replaced units)."""
        for key in [k for k in self._counts if k[1] == conversation_id]:
            self._counts.pop(key, None)

    def add_units(self, conversation_id: str, units: Sequence[NewUnit], message_seq: int, window_seq: int,
                  erasures: int | None = None) -> bool:
        """Write units and the new progress marks in one transaction (re-running is harmless).
        ``erasures``: the conversation's tombstones counted before its messages were read;
        if an erase landed since, nothing is written (False): the caller cuts them again.

        The progress row is locked first: two processes cutting one conversation take
        turns, so its unit rowids grow in commit order and ``vector_progress`` (units up
        to a rowid are embedded) never skips a unit committed late. An erase locks it too
        (:mod:`lossless.store.erase`), so the tombstone count read under it is the last word."""
        with self.store.transaction() as conn:
            conn.execute("INSERT INTO recall_progress (conversation_id) VALUES (%s) ON CONFLICT DO NOTHING",
                         (conversation_id,))
            conn.execute("SELECT 1 FROM recall_progress WHERE conversation_id = %s FOR UPDATE", (conversation_id,))
            if erasures is not None and conn.execute(
                    "SELECT count(*) FROM tombstones WHERE conversation_id = %s",
                    (conversation_id,)).fetchone()[0] != erasures:
                return False
            if units:
                with conn.cursor() as cur:
                    cur.executemany(
                        "INSERT INTO recall_units (conversation_id, kind, first_seq, last_seq, part, role, "
                        "message_ids, text, text_sha256, start_ts, end_ts) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, "
                        "%s, %s, %s) ON CONFLICT (conversation_id, kind, first_seq, last_seq, part) DO NOTHING",
                        [(conversation_id, u.kind, u.first_seq, u.last_seq, u.part, u.role,
                          json.dumps(list(u.message_ids)), u.text, u.sha256, u.start_ts, u.end_ts) for u in units],
                    )
            conn.execute(
                "UPDATE recall_progress SET message_seq = greatest(message_seq, %s), "
                "window_seq = greatest(window_seq, %s) WHERE conversation_id = %s",
                (message_seq, window_seq, conversation_id),
            )
        return True

    # -- vector indexes -------------------------------------------------------------------

    def _vector_type(self, conn: Any) -> None:
        """Teach this connection the vector type (binary numpy arrays in, not text)."""
        if conn.adapters.types.get("vector") is None:
            from pgvector.psycopg import register_vector

            register_vector(conn)

    def ensure_index(self, provider: str, model: str, dim: int) -> str:
        name = index_name(provider, model, dim)
        if not re.fullmatch(r"vec_[0-9a-f]{12}", name):  # it is spliced into DDL below
            raise StoreError(f"bad index name {name!r}")
        if not isinstance(dim, int) or dim < 1:
            raise StoreError(f"bad vector dimension {dim!r}")
        rows = self.store._query("SELECT backend FROM vector_indexes WHERE name = %s", (name,))
        if rows:
            return name
        with self.store.transaction() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(hashtext('lossless.vectors'), hashtext(current_schema()))")
            available = conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'").fetchone()
            if available is None:
                raise StoreError("vector recall on PostgreSQL needs the pgvector extension, which this server "
                                 "does not have (https://github.com/pgvector/pgvector)")
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector WITH SCHEMA public")
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {name} ("
                "unit_rowid BIGINT PRIMARY KEY REFERENCES recall_units(rowid), "
                "conversation_id TEXT COLLATE \"C\" NOT NULL, kind TEXT NOT NULL, "
                f"embedding vector({dim}) NOT NULL)"
            )
            # the exact path reads one conversation's vectors through this index
            conn.execute(f"CREATE INDEX IF NOT EXISTS {name}_conv ON {name} (conversation_id, kind)")
            if dim <= _HNSW_MAX_DIM:
                conn.execute(f"CREATE INDEX IF NOT EXISTS {name}_hnsw ON {name} USING hnsw (embedding vector_cosine_ops)")
            conn.execute(
                "INSERT INTO vector_indexes (name, provider, model, dim, backend) VALUES (%s, %s, %s, %s, %s) "
                "ON CONFLICT (name) DO NOTHING",
                (name, provider, model, dim, self.backend),
            )
        return name

    def upgrade_index(self, index: str, dim: int) -> int | None:
        """pgvector's tables have had one layout: nothing to rebuild."""
        return None

    def add_vectors(self, index: str, conversation_id: str, rows: Sequence[tuple[UnitRow, np.ndarray]],
                    fresh: Collection[str] = (), through: int = 0) -> int:
        """Store the vectors of units read by :meth:`pending` and embedded since, for the
        units still stored as read (an erase may have replaced some meanwhile: nothing of
        those is written), with the vectors of ``fresh`` text hashes in the embedding
        cache; the index counts the whole batch as done, and every unit up to rowid ``through``
        (those of the batch the embedder does not read: they get no vector). Returns how many were stored.

        The conversation's progress row is share-locked first: an erase holds it for
        update from its first write to its commit (:mod:`lossless.store.erase`), so either
        the erase waits and then deletes what this wrote, or this waits and finds the
        units gone."""
        if not rows and not through:
            return 0
        with self.store.transaction() as conn:
            conn.execute("SELECT 1 FROM recall_progress WHERE conversation_id = %s FOR SHARE", (conversation_id,))
            stored = {(int(r), sha) for r, sha in conn.execute(
                "SELECT rowid, text_sha256 FROM recall_units WHERE rowid = ANY(%s)",
                ([u.rowid for u, _ in rows],)).fetchall()}
            batch_top = max([u.rowid for u, _ in rows] + [through])
            rows = [(u, v) for u, v in rows if (u.rowid, u.text_sha256) in stored]
            if fresh and rows:
                provider, model = self._index_key(QmarkConnection(conn), index)
                new = {u.text_sha256: v for u, v in rows if u.text_sha256 in fresh}
                self._cache_insert(QmarkConnection(conn), provider, model, list(new.items()))
            if rows:
                self._vector_type(conn)
                with conn.cursor() as cur:
                    cur.executemany(
                        f"INSERT INTO {index} (unit_rowid, conversation_id, kind, embedding) VALUES (%s, %s, %s, %s) "
                        "ON CONFLICT (unit_rowid) DO UPDATE SET embedding = excluded.embedding",
                        [(u.rowid, conversation_id, u.kind, np.asarray(v, dtype=np.float32)) for u, v in rows],
                    )
            self._mark_embedded(QmarkConnection(conn), index, conversation_id, batch_top)
        return len(rows)

    def knn(self, index: str, provider: str, model: str, conversation_ids: Sequence[str], query: Vectors,
            k: int, kinds: Sequence[str] | None = None) -> list[tuple[int, float]]:
        """(unit rowid, cosine similarity) of the k nearest units, best first."""
        vec = np.asarray(query, dtype=np.float32).reshape(-1)
        out: list[tuple[int, float]] = []
        for cid in conversation_ids:
            for kind in kinds or (None,):
                out.extend(self._knn_one(index, cid, vec, k, kind))
        out.sort(key=lambda p: (-p[1], p[0]))
        return out[:k]

    def _size(self, index: str, cid: str) -> int:
        upto = self.indexed_upto(index, cid)
        hit = self._counts.get((index, cid))
        if hit is None or hit[0] != upto:
            n = int(self.store._query(f"SELECT count(*) FROM {index} WHERE conversation_id = %s", (cid,))[0][0])
            hit = self._counts[(index, cid)] = (upto, n)
        return hit[1]

    def _knn_one(self, index: str, cid: str, vec: np.ndarray, k: int, kind: str | None) -> list[tuple[int, float]]:
        extra = " AND kind = %s" if kind else ""
        args: list[Any] = [cid] + ([kind] if kind else [])
        size = self._size(index, cid)
        with self.store.transaction() as conn:
            self._vector_type(conn)
            if size > self.exact_below:
                # SET LOCAL: only this transaction searches wider than the default 40
                conn.execute(f"SET LOCAL hnsw.ef_search = {min(1000, max(100, 2 * k))}")
                rows = conn.execute(
                    f"SELECT unit_rowid, embedding <=> %s FROM {index} WHERE conversation_id = %s{extra} "
                    "ORDER BY embedding <=> %s LIMIT %s",
                    [vec, *args, vec, k],
                ).fetchall()
                if len(rows) >= min(k, size):
                    return [(int(r), 1.0 - float(d)) for r, d in rows]
            # MATERIALIZED: the planner cannot turn this into an (approximate) HNSW scan
            rows = conn.execute(
                f"WITH c AS MATERIALIZED (SELECT unit_rowid, embedding FROM {index} WHERE conversation_id = %s{extra}) "
                "SELECT unit_rowid, embedding <=> %s AS d FROM c ORDER BY d, unit_rowid LIMIT %s",
                [*args, vec, k],
            ).fetchall()
        return [(int(r), 1.0 - float(d)) for r, d in rows]
