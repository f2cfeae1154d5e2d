"""Recall storage in the SQLite file: retrieval units, the embedding cache, and vector
indexes — sqlite-vec's ``vec0`` when the extension loads, an in-memory numpy scan over
the cached vectors otherwise (same vectors, same cosine ranking)."""

from __future__ import annotations

import json
import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Collection, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

import numpy as np

from lossless.core.errors import StoreError
from lossless.embed.base import Vectors
from lossless.store.base import NewUnit, UnitRow
from lossless.store.recall_tables import RecallTables
from lossless.store.unembedded import check_key, index_name

log = logging.getLogger("lossless")


__all__ = ["MATRIX_ABOVE", "SQLiteRecall", "UnitRow"]

_VEC_MAX_K = 4096  # the most neighbours sqlite-vec returns for one query
_PER_CONVERSATION = 200  # up to this many conversations, one k-NN query each; beyond, one for all

MATRIX_ABOVE = 256  # units in one conversation; above it "auto" searches a numpy matrix
MATRIX_BYTES = 512 * 2**20  # the in-memory matrices kept at once, least recently used dropped first




def _ids(raw: str) -> tuple[str, ...]:
    """A unit's message ids from their JSON list (as ``json.dumps`` wrote it); plain ids,
    the usual case, without the JSON parser."""
    if "\\" in raw or raw.count('"') != 2 * (raw.count('", "') + 1):
        return tuple(json.loads(raw))
    return tuple(raw[2:-2].split('", "'))


def _unit_row(r: Sequence[Any]) -> UnitRow:
    return UnitRow(r[0], r[1], r[2], r[3], r[4], r[5], r[6], _ids(r[7]), r[8], r[9], r[10], r[11])




KIND_CODES = {"message": 0, "window": 1}  # recall_units.kind's values (its CHECK) in a matrix


class _Matrix:
    """One conversation's vectors, unit rowids and kinds, grown in place: rows are written
    into spare capacity, and a full buffer is replaced by one half again as big (views
    handed out earlier keep the old one alive and unchanged). The vectors are stored one
    dimension per row (``dim × capacity``): a query's product over them runs about 1.5×
    as fast as over one vector per row (measured at 125k × 384), and it is memory-bound."""

    def __init__(self) -> None:
        self.upto = 0
        self.n = 0
        self.ids = np.zeros(0, dtype=np.int64)
        self.kinds = np.zeros(0, dtype=np.uint8)  # KIND_CODES: a byte compare, not a string one, per query
        self.mat = np.zeros((1, 0), dtype="<f4")

    @property
    def nbytes(self) -> int:
        return int(self.mat.nbytes + self.ids.nbytes + self.kinds.nbytes)

    def view(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(unit rowids, vectors as ``dim × n``, kinds as :data:`KIND_CODES`)."""
        return self.ids[: self.n], self.mat[:, : self.n], self.kinds[: self.n]

    def extend(self, upto: int, rows: Sequence[Any]) -> None:
        self.upto = upto
        if not rows:
            return
        vecs = np.vstack([np.frombuffer(r[2], dtype="<f4") for r in rows])
        if self.mat.shape[0] != vecs.shape[1]:
            self.n = 0  # the first rows (the empty start has no width yet)
            self.mat = np.zeros((vecs.shape[1], 0), dtype="<f4")
        need = self.n + len(rows)
        if need > self.mat.shape[1]:
            cap = max(need + need // 8, self.n + self.n // 2, 64)  # spare room: the next turns add a few
            ids, mat, kinds = self.view()
            self.ids = np.zeros(cap, dtype=np.int64)
            self.mat = np.zeros((vecs.shape[1], cap), dtype="<f4")
            self.kinds = np.zeros(cap, dtype=np.uint8)
            self.ids[: self.n], self.mat[:, : self.n], self.kinds[: self.n] = ids, mat, kinds
        self.mat[:, self.n : need] = vecs.T
        self.ids[self.n : need] = [r[0] for r in rows]
        self.kinds[self.n : need] = [KIND_CODES[r[1]] for r in rows]
        self.n = need


VEC_CHUNK = 64  # vectors per vec0 chunk: sqlite-vec's default, 1,024, reserves 1.6 MB per conversation


def _vec0_ddl(name: str, dim: int) -> str:
    """The vec0 table of an index. Partition key: a k-NN only scans the asked
    conversation's vectors. Chunks of ``VEC_CHUNK``: a conversation of two messages took
    1.6 MB (1,000 of them 1.6 GB) with the default 1,024, and inserts were 13-40x slower."""
    return (f"CREATE VIRTUAL TABLE IF NOT EXISTS {name} USING vec0(conversation_id text partition key, kind text, "
            f"embedding float[{dim}] distance_metric=cosine, chunk_size={VEC_CHUNK})")


class _Store(Protocol):
    """The SQLite store as its recall index uses it (:class:`~lossless.store.sqlite.store.SQLiteStore`)."""

    dialect: str

    def _query(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...
    def transaction(self, *, wait: bool = True) -> AbstractContextManager[Any]: ...
    def load_sqlite_vec(self) -> bool: ...


class SQLiteRecall(RecallTables):
    """Units, cache and vectors for one :class:`SQLiteStore` (the tables both stores keep
    alike are :class:`RecallTables`'; here: units written under SQLite's write lock, vec0
    tables or in-memory matrices, and the k-NN)."""

    def __init__(self, store: _Store, backend: str = "auto") -> None:
        if backend not in ("auto", "sqlite-vec", "numpy"):
            raise StoreError(f"vector backend must be auto, sqlite-vec or numpy; got {backend!r}")
        super().__init__(store, _unit_row)
        self.has_vec = store.load_sqlite_vec() if backend != "numpy" else False
        if backend == "sqlite-vec" and not self.has_vec:
            raise StoreError("the sqlite-vec extension could not be loaded (pip install sqlite-vec)")
        self.backend = "sqlite-vec" if self.has_vec else "numpy"
        # "auto" also scans big conversations from an in-memory matrix of the cached vectors:
        # a vec0 k-NN reads every vector of the partition through SQLite (~40 ms at 100k),
        # a numpy product over them takes a few ms once the matrix is loaded.
        self.matrix_above = MATRIX_ABOVE if backend == "auto" else None
        self._matrices: OrderedDict[tuple[str, str], _Matrix] = OrderedDict()
        self._matrix_bytes = 0
        self._lock = threading.Lock()

    def forget_conversation(self, conversation_id: str) -> None:
        """Drop what this process holds in memory of a conversation's vectors (after an
        erase replaced some of its units): read again on the next query."""
        with self._lock:
            for key in [k for k in self._matrices if k[1] == conversation_id]:
                self._matrix_bytes -= self._matrices.pop(key).nbytes
            for key in [k for k in self._counts if k[1] == conversation_id]:
                del self._counts[key]

    # -- units ----------------------------------------------------------------------------

    def add_units(self, conversation_id: str, units: Sequence[NewUnit], message_seq: int, window_seq: int,
                  erasures: int | None = None) -> bool:
        """Write units and the new progress marks in one transaction (re-running is harmless).
        ``erasures``: the conversation's tombstones counted before its messages were read;
        if an erase landed since, the units may quote erased text and nothing is written
        (False): the caller cuts them again."""
        with self.store.transaction() as conn:
            if erasures is not None and conn.execute(
                    "SELECT count(*) FROM tombstones WHERE conversation_id = ?", (conversation_id,)).fetchone()[0] != erasures:
                return False
            # numbered above every unit and every index's progress mark: SQLite's own choice,
            # max(rowid) + 1, may be the rowid of a unit an erase dropped, which a mark already
            # counts as embedded (an erased message leaves no unit behind)
            top = int(conn.execute("SELECT max(coalesce((SELECT max(rowid) FROM recall_units), 0), "
                                   "coalesce((SELECT max(unit_rowid) FROM vector_progress), 0))").fetchone()[0])
            conn.executemany(
                "INSERT INTO recall_units (rowid, conversation_id, kind, first_seq, last_seq, part, role, message_ids, "
                "text, text_sha256, start_ts, end_ts) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (conversation_id, kind, first_seq, last_seq, part) DO NOTHING",
                [(top + 1 + i, conversation_id, u.kind, u.first_seq, u.last_seq, u.part, u.role,
                  json.dumps(list(u.message_ids)), u.text, u.sha256, u.start_ts, u.end_ts) for i, u in enumerate(units)],
            )
            conn.execute(
                "INSERT INTO recall_progress (conversation_id, message_seq, window_seq) VALUES (?, ?, ?) "
                "ON CONFLICT (conversation_id) DO UPDATE SET message_seq = max(message_seq, excluded.message_seq), "
                "window_seq = max(window_seq, excluded.window_seq)",
                (conversation_id, message_seq, window_seq),
            )
        return True

    # -- vector indexes -------------------------------------------------------------------

    def ensure_index(self, provider: str, model: str, dim: int) -> str:
        name = index_name(provider, model, dim)
        if not re.fullmatch(r"vec_[0-9a-f]{12}", name):  # it is spliced into DDL below
            raise StoreError(f"bad index name {name!r}")
        rows = self.store._query("SELECT backend FROM vector_indexes WHERE name = ?", (name,))
        if rows and (rows[0][0] == self.backend or self.backend == "numpy"):
            return name
        with self.store.transaction() as conn:
            if self.backend == "sqlite-vec":
                conn.execute(_vec0_ddl(name, dim))
            conn.execute(
                "INSERT INTO vector_indexes (name, provider, model, dim, backend) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (name) DO UPDATE SET backend = excluded.backend",
                (name, provider, model, dim, self.backend),
            )
            if rows and rows[0][0] != self.backend:
                # the vec0 table was never filled (it was built by the numpy path): rebuild it,
                # and look for the conversations that now owe it again (store/unembedded.py)
                conn.execute("DELETE FROM vector_progress WHERE index_name = ?", (name,))
                conn.execute("DELETE FROM vector_checks WHERE provider = ? AND model IN (?, ?)",
                             (provider, check_key(model, False), check_key(model, True)))
        return name

    def upgrade_index(self, name: str, dim: int) -> int | None:
        """Rebuild a vec0 table made before ``chunk_size`` was set (sqlite-vec's default
        reserves 1,024 vectors, 1.6 MB, per conversation): its rows are copied into a
        table of chunks of ``VEC_CHUNK``, once, in one transaction (about 1.5 s per 50k
        vectors). Returns the vectors moved, None when the table needs nothing."""
        if self.backend != "sqlite-vec":
            return None
        ddl = self.store._query("SELECT sql FROM sqlite_master WHERE name = ?", (name,))
        if not ddl or "chunk_size" in str(ddl[0][0]):
            return None
        with self.store.transaction() as conn:
            if "chunk_size" in str(conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (name,)).fetchone()[0]):
                return None  # another process rebuilt it meanwhile
            conn.execute(f"CREATE TEMP TABLE rechunk_{name} AS "
                         f"SELECT rowid AS id, conversation_id, kind, embedding FROM {name}")
            conn.execute(f"DROP TABLE {name}")
            conn.execute(_vec0_ddl(name, dim))
            conn.execute(f"INSERT INTO {name} (rowid, conversation_id, kind, embedding) "
                         f"SELECT id, conversation_id, kind, embedding FROM rechunk_{name} ORDER BY id")
            moved = conn.execute(f"SELECT count(*) FROM rechunk_{name}").fetchone()[0]
            conn.execute(f"DROP TABLE rechunk_{name}")
        log.info("lossless: rebuilt the vector index %s in chunks of %d (%d vectors)", name, VEC_CHUNK, moved)
        return int(moved)

    def add_vectors(self, index: str, conversation_id: str, rows: Sequence[tuple[UnitRow, np.ndarray]],
                    fresh: Collection[str] = (), through: int = 0) -> int:
        """Store the vectors of units read by :meth:`pending` and embedded since, for the
        units still stored as read (an erase may have replaced some meanwhile: nothing of
        those is written), with the vectors of ``fresh`` text hashes in the embedding
        cache; the index counts the whole batch as done, and every unit up to rowid ``through``
        (those of the batch the embedder does not read: they get no vector). One transaction (BEGIN IMMEDIATE:
        no erase can land between the check and the writes). Returns how many were stored."""
        if not rows and not through:
            return 0
        with self.store.transaction() as conn:
            marks = ",".join("?" * len(rows))
            stored = set(conn.execute(f"SELECT rowid, text_sha256 FROM recall_units WHERE rowid IN ({marks})",
                                      [u.rowid for u, _ in rows]).fetchall()) if rows else set()
            batch_top = max([u.rowid for u, _ in rows] + [through])
            rows = [(u, v) for u, v in rows if (u.rowid, u.text_sha256) in stored]
            if fresh and rows:
                provider, model = self._index_key(conn, index)
                new = {u.text_sha256: v for u, v in rows if u.text_sha256 in fresh}
                self._cache_insert(conn, provider, model, list(new.items()))
            if self.backend == "sqlite-vec" and rows:
                # vec0 ignores OR REPLACE: a unit embedded twice (the worker and conv.index() at
                # once) would break its primary key, so an earlier vector is deleted first
                conn.executemany(f"DELETE FROM {index} WHERE rowid = ?", [(u.rowid,) for u, _ in rows])
                conn.executemany(
                    f"INSERT INTO {index} (rowid, conversation_id, kind, embedding) VALUES (?, ?, ?, ?)",
                    [(u.rowid, conversation_id, u.kind, np.asarray(v, dtype="<f4").tobytes()) for u, v in rows],
                )
            self._mark_embedded(conn, index, conversation_id, batch_top)
        return len(rows)

    def knn(self, index: str, provider: str, model: str, conversation_ids: Sequence[str], query: Vectors,
            k: int, kinds: Sequence[str] | None = None) -> list[tuple[int, float]]:
        """(unit rowid, cosine similarity) of the k nearest units, best first."""
        vec = np.asarray(query, dtype="<f4").reshape(-1)
        out: list[tuple[int, float]] = []
        if self.backend == "sqlite-vec" and len(conversation_ids) > _PER_CONVERSATION:
            return self._knn_wide(index, set(conversation_ids), vec, k, kinds)
        for cid in conversation_ids:
            if self.backend == "sqlite-vec" and not self._big(index, cid):
                out.extend(self._knn_vec(index, cid, vec, k, kinds))
            else:
                out.extend(self._knn_numpy(index, provider, model, cid, vec, k, kinds))
        out.sort(key=lambda p: (-p[1], p[0]))
        return out[:k]

    def _knn_wide(self, index: str, wanted: set[str], vec: np.ndarray, k: int,
                  kinds: Sequence[str] | None) -> list[tuple[int, float]]:
        """Many conversations (a tenant-wide search): one k-NN over the whole index, kept
        to the wanted conversations, instead of one query per conversation."""
        out: list[tuple[int, float]] = []
        for kind in kinds or (None,):
            extra = " AND kind = ?" if kind else ""
            rows = self.store._query(
                f"SELECT rowid, distance, conversation_id FROM {index} WHERE embedding MATCH ? AND k = ?{extra}",
                [vec.tobytes(), _VEC_MAX_K, *([kind] if kind else [])])
            out.extend((int(r), 1.0 - float(d)) for r, d, cid in rows if cid in wanted)
        out.sort(key=lambda p: (-p[1], p[0]))
        return out[:k]

    def _big(self, index: str, cid: str) -> bool:
        if self.matrix_above is None:
            return False
        upto = self.indexed_upto(index, cid)
        hit = self._counts.get((index, cid))
        if hit is None or hit[0] != upto:
            # units only grow at the end (an erasure's few deletions leave the count a bound
            # above, good enough to choose a backend): count the new ones only
            since, before = hit if hit is not None and hit[0] < upto else (0, 0)
            n = before + int(self.store._query(
                "SELECT count(*) FROM recall_units WHERE conversation_id = ? AND rowid > ? AND rowid <= ?",
                (cid, since, upto))[0][0])
            hit = self._counts[(index, cid)] = (upto, n)
        return hit[1] > self.matrix_above

    def _knn_vec(self, index: str, cid: str, vec: np.ndarray, k: int, kinds: Sequence[str] | None) -> list[tuple[int, float]]:
        out: list[tuple[int, float]] = []
        k = min(k, _VEC_MAX_K)  # sqlite-vec refuses more ("k value in knn query too large")
        for kind in kinds or (None,):
            extra = " AND kind = ?" if kind else ""
            args: list[Any] = [vec.tobytes(), k, cid] + ([kind] if kind else [])
            rows = self.store._query(
                f"SELECT rowid, distance FROM {index} WHERE embedding MATCH ? AND k = ? AND conversation_id = ?{extra}",
                args,
            )
            out.extend((int(r), 1.0 - float(d)) for r, d in rows)
        return out

    def _matrix(self, index: str, provider: str, model: str, cid: str,
                attempt: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The conversation's cached vectors as one matrix (with unit rowids and kinds).

        Units are append-only and their rowids grow, so when more have been indexed since
        the matrix was built, only the new rows are read and appended (into spare capacity,
        so nothing is copied most turns): an agent that adds a turn and then assembles pays
        for its new units, not for the whole conversation."""
        upto = self.indexed_upto(index, cid)
        key = (index, cid)
        with self._lock:
            hit = self._matrices.get(key)
            if hit is not None:
                self._matrices.move_to_end(key)
                if hit.upto == upto:
                    return hit.view()
        since = hit.upto if hit is not None and hit.upto < upto and attempt < 3 else 0
        rows = self.store._query(
            "SELECT u.rowid, u.kind, c.vector FROM recall_units u JOIN embedding_cache c ON c.provider = ? "
            "AND c.model = ? AND c.text_sha256 = u.text_sha256 WHERE u.conversation_id = ? AND u.rowid > ? "
            "AND u.rowid <= ? ORDER BY u.rowid",
            (provider, model, cid, since, upto),
        )
        with self._lock:
            now = self._matrices.get(key)
            grow: _Matrix | None = None
            if not since:
                if now is not None:
                    self._matrix_bytes -= now.nbytes
                grow = self._matrices[key] = _Matrix()
            elif now is not None and now is hit and now.upto == since:
                grow = now
            # else another thread moved the matrix meanwhile: these rows may not follow on
            fresh = None
            if grow is not None:
                before = grow.nbytes
                grow.extend(upto, rows)
                self._matrix_bytes += grow.nbytes - before
                fresh = grow.view()
                while self._matrix_bytes > MATRIX_BYTES and len(self._matrices) > 1:
                    _, dropped = self._matrices.popitem(last=False)
                    self._matrix_bytes -= dropped.nbytes
        return fresh if fresh is not None else self._matrix(index, provider, model, cid, attempt + 1)

    def _knn_numpy(self, index: str, provider: str, model: str, cid: str, vec: np.ndarray, k: int,
                   kinds: Sequence[str] | None) -> list[tuple[int, float]]:
        ids, mat, unit_kinds = self._matrix(index, provider, model, cid)
        if len(ids) == 0:
            return []
        sims = vec @ mat
        out: list[tuple[int, float]] = []
        for kind in kinds or (None,):
            idx = None if kind is None else np.flatnonzero(unit_kinds == KIND_CODES.get(kind, 255))
            if idx is not None and len(idx) == len(sims):
                idx = None  # every unit is of that kind (no windows): no gather
            among = sims if idx is None else sims[idx]
            take = min(k, len(among))
            if take == 0:
                continue
            top = np.argpartition(-among, take - 1)[:take]
            if idx is not None:
                top = idx[top]
            out.extend(zip(ids[top].tolist(), sims[top].tolist(), strict=True))
        return out
