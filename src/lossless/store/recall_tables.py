"""The recall tables both stores keep alike: retrieval units (``recall_units``) and the
progress marks, the embedding cache, and how far each vector index has embedded a
conversation (``vector_progress``). Written once in ``?`` SQL over the store's runner;
:class:`~lossless.store.sqlite.recall.SQLiteRecall` (sqlite-vec or numpy) and
:class:`~lossless.store.postgres.recall.PostgresRecall` (pgvector) add what differs: how
units are written under their locks, the vector tables and the k-NN."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np

from lossless.core.errors import StoreError
from lossless.store.base import UnitRow
from lossless.store.runner import sql_runner

__all__ = ["UNIT_COLS", "RecallTables"]

UNIT_COLS = ("rowid, conversation_id, kind, first_seq, last_seq, part, role, message_ids, text, start_ts, end_ts, "
             "text_sha256")
_CACHE_BATCH = 500  # text hashes per embedding cache read


class RecallTables:
    """Units, their progress marks and the embedding cache of one store. ``unit_row``
    turns a row of :data:`UNIT_COLS` into a :class:`UnitRow` (each store reads its own
    column types)."""

    def __init__(self, store: Any, unit_row: Callable[[Sequence[Any]], UnitRow]) -> None:
        self.store = store
        self.sql = sql_runner(store)
        self._unit_row = unit_row
        self._counts: dict[tuple[str, str], tuple[int, int]] = {}
        self._keys: dict[str, tuple[str, str]] = {}  # index name -> (provider, model)

    # -- units ----------------------------------------------------------------------------

    def progress(self, conversation_id: str) -> tuple[int, int]:
        rows = self.sql.query("SELECT message_seq, window_seq FROM recall_progress WHERE conversation_id = ?",
                              (conversation_id,))
        return (int(rows[0][0]), int(rows[0][1])) if rows else (0, 0)

    def erasures(self, conversation_id: str) -> int:
        """How many of the conversation's messages were erased (tombstones are never deleted)."""
        return int(self.sql.query("SELECT count(*) FROM tombstones WHERE conversation_id = ?",
                                  (conversation_id,))[0][0])

    def units(self, rowids: Sequence[int], *, text: bool = True) -> dict[int, UnitRow]:
        """The units by rowid; without ``text`` their text comes back empty (a k-NN over
        long messages need not read them to rank them)."""
        if not rowids:
            return {}
        cols = UNIT_COLS if text else UNIT_COLS.replace(" text,", " '',")
        among, args = self.sql.in_list("rowid", list(rowids))
        rows = self.sql.query(f"SELECT {cols} FROM recall_units WHERE {among}", args)
        return {int(r[0]): self._unit_row(r) for r in rows}

    def indexed_upto(self, index: str, conversation_id: str) -> int:
        rows = self.sql.query("SELECT unit_rowid FROM vector_progress WHERE index_name = ? AND conversation_id = ?",
                              (index, conversation_id))
        return int(rows[0][0]) if rows else 0

    def pending(self, index: str, conversation_id: str, limit: int) -> list[UnitRow]:
        upto = self.indexed_upto(index, conversation_id)
        rows = self.sql.query(
            f"SELECT {UNIT_COLS} FROM recall_units WHERE conversation_id = ? AND rowid > ? ORDER BY rowid LIMIT ?",
            (conversation_id, upto, limit))
        return [self._unit_row(r) for r in rows]

    def pending_count(self, index: str, conversation_id: str, *, upto: int | None = None,
                      first_parts: bool = False) -> int:
        """Units past the index's mark (``upto``: the mark, when the caller read it
        already); ``first_parts``: only those that open a message."""
        if upto is None:
            upto = self.indexed_upto(index, conversation_id)
        only = " AND kind = 'message' AND part = 0" if first_parts else ""
        return int(self.sql.query(f"SELECT count(*) FROM recall_units WHERE conversation_id = ? AND rowid > ?{only}",
                                  (conversation_id, upto))[0][0])

    # -- embedding cache ------------------------------------------------------------------

    def cached(self, provider: str, model: str, shas: Sequence[str]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        unique = list(dict.fromkeys(shas))
        for i in range(0, len(unique), _CACHE_BATCH):
            among, args = self.sql.in_list("text_sha256", unique[i : i + _CACHE_BATCH])
            rows = self.sql.query(f"SELECT text_sha256, vector FROM embedding_cache WHERE provider = ? AND model = ? "
                                  f"AND {among}", [provider, model, *args])
            out.update((sha, np.frombuffer(bytes(blob), dtype="<f4")) for sha, blob in rows)
        return out

    def cache_put(self, provider: str, model: str, items: Sequence[tuple[str, np.ndarray]]) -> None:
        if not items:
            return
        with self.sql.transaction() as conn:
            self._cache_insert(conn, provider, model, items)

    @staticmethod
    def _cache_insert(conn: Any, provider: str, model: str, items: Sequence[tuple[str, np.ndarray]]) -> None:
        """Into the cache, in the caller's transaction (``conn`` takes ``?`` statements)."""
        now = datetime.now(UTC).isoformat()
        conn.executemany(
            "INSERT INTO embedding_cache (provider, model, text_sha256, dim, vector, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            [(provider, model, sha, int(v.shape[0]), np.asarray(v, dtype="<f4").tobytes(), now) for sha, v in items],
        )

    def cache_size(self) -> int:
        return int(self.sql.query("SELECT count(*) FROM embedding_cache")[0][0])

    def _mark_embedded(self, conn: Any, index: str, conversation_id: str, upto: int) -> None:
        """The index has the conversation's units up to rowid ``upto`` (never moved back),
        in the caller's transaction (``conn`` takes ``?`` statements)."""
        conn.execute("INSERT INTO vector_progress AS p (index_name, conversation_id, unit_rowid) VALUES (?, ?, ?) "
                     "ON CONFLICT (index_name, conversation_id) DO UPDATE SET "
                     f"unit_rowid = {self.sql.spelling.greatest}(p.unit_rowid, excluded.unit_rowid)", (index, conversation_id, upto))

    def _index_key(self, conn: Any, index: str) -> tuple[str, str]:
        """The (provider, model) an index was made for: its embedding cache key (``conn``
        takes ``?`` statements)."""
        key = self._keys.get(index)
        if key is None:
            row = conn.execute("SELECT provider, model FROM vector_indexes WHERE name = ?", (index,)).fetchone()
            if row is None:
                raise StoreError(f"no vector index {index!r}")
            key = self._keys[index] = (str(row[0]), str(row[1]))
        return key
