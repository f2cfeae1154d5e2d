"""Chunk vectors in PostgreSQL: one pgvector table per embedder, as the recall vectors
(:mod:`lossless.store.postgres.recall`).

A table ``file_vec_<hash of provider, model, dim>`` is made on first use (registered in
``file_vector_indexes``), with the chunk's file and kind beside its vector so the path
and kind filters need no join, and an HNSW index (``vector_cosine_ops``). A chunk row is
deleted with its chunk (``ON DELETE CASCADE``). Texts are embedded through the shared
``embedding_cache`` exactly as on SQLite.

A k-NN is exact (a scan, ``ORDER BY embedding <=> q``) while the table holds at most
``exact_below`` vectors; above that the HNSW index answers, with ``ef_search`` raised to
cover k, and the exact scan runs when a filter left it fewer than k.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from lossless.core.errors import StoreError
from lossless.files.vectors import CachedEmbeddings
from lossless.store.postgres.recall import EXACT_BELOW

if TYPE_CHECKING:
    from lossless.embed.base import Embedder
    from lossless.store.postgres.store import PostgresStore

__all__ = ["PgChunkVectors", "ensure_table", "register", "table_name", "vector_count", "vector_rows",
           "vector_tables"]

_NAME = re.compile(r"file_vec_[0-9a-f]{12}")
_HNSW_MAX_DIM = 2000  # pgvector's limit for an HNSW index on vector(dim)


def table_name(provider: str, model: str, dim: int) -> str:
    digest = hashlib.sha256(f"{provider}\x00{model}\x00{dim}".encode()).hexdigest()[:12]
    return f"file_vec_{digest}"


def _checked(name: str) -> str:
    if not _NAME.fullmatch(name):  # it is spliced into SQL
        raise StoreError(f"bad file vector table name {name!r}")
    return name


def register(conn: Any) -> None:
    """Teach this connection the vector type (numpy arrays in and out, binary)."""
    if conn.adapters.types.get("vector") is None:
        from pgvector.psycopg import register_vector

        register_vector(conn)


def _array(value: Any) -> np.ndarray:
    """A loaded vector (pgvector's ``Vector``, or an array) as float32 numpy."""
    to_numpy = getattr(value, "to_numpy", None)
    return np.asarray(to_numpy() if callable(to_numpy) else value, dtype=np.float32)


def vector_tables(store: PostgresStore) -> list[tuple[str, str, str, int]]:
    """(table, provider, model, dim) of every embedder's chunk vectors."""
    rows = store.query("SELECT name, provider, model, dim FROM file_vector_indexes ORDER BY name")
    return [(_checked(r[0]), r[1], r[2], int(r[3])) for r in rows]


def vector_count(store: PostgresStore) -> int:
    """How many chunks have a vector from any embedder."""
    tables = [t[0] for t in vector_tables(store)]
    if not tables:
        return 0
    union = " UNION ".join(f"SELECT chunk_rowid FROM {t}" for t in tables)
    return int(store.query(f"SELECT count(*) FROM ({union}) AS u")[0][0])


def vector_rows(store: PostgresStore) -> Iterator[tuple[int, str, str, int, str, bytes]]:
    """Every chunk vector as SQLite's ``file_chunk_vectors`` holds it, streamed."""
    for name, provider, model, dim in vector_tables(store):
        with store.transaction() as conn:  # the caller's, if it has one (a copy verified before it commits)
            register(conn)
            with conn.cursor(name=f"rows_{name}", binary=True) as cur:  # binary: the float32s exactly
                cur.itersize = 2000
                cur.execute(f"SELECT chunk_rowid, text_sha256, embedding FROM {name}")
                for rowid, sha, emb in cur:
                    yield int(rowid), provider, model, dim, sha, _array(emb).astype("<f4").tobytes()


def ensure_table(store: PostgresStore, provider: str, model: str, dim: int) -> str:
    """The chunk vector table of this embedder, made (with the pgvector extension, and
    registered) if it is not there yet; inside the caller's transaction if it has one."""
    name = _checked(table_name(provider, model, dim))
    if not isinstance(dim, int) or dim < 1:
        raise StoreError(f"bad vector dimension {dim!r}")
    with store.transaction() as conn:
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('lossless.vectors'), hashtext(current_schema()))")
        if conn.execute("SELECT 1 FROM file_vector_indexes WHERE name = %s", (name,)).fetchone() is not None:
            return name
        if conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'").fetchone() is None:
            raise StoreError("vector search of files on PostgreSQL needs the pgvector extension, which this "
                             "server does not have (https://github.com/pgvector/pgvector)")
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector WITH SCHEMA public")
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {name} ("
            "chunk_rowid BIGINT PRIMARY KEY REFERENCES file_chunks(rowid) ON DELETE CASCADE, "
            "file_rowid BIGINT NOT NULL, kind TEXT NOT NULL, text_sha256 TEXT NOT NULL, "
            f"embedding vector({dim}) NOT NULL)"
        )
        if dim <= _HNSW_MAX_DIM:
            conn.execute(f"CREATE INDEX IF NOT EXISTS {name}_hnsw ON {name} USING hnsw (embedding vector_cosine_ops)")
        conn.execute("INSERT INTO file_vector_indexes (name, provider, model, dim) VALUES (%s, %s, %s, %s)",
                     (name, provider, model, dim))
    return name


class PgChunkVectors(CachedEmbeddings):
    """Embeds chunks and finds the nearest ones for one embedder, with pgvector.
    ``generation`` reads the file tables' change counter (it keys the cached size)."""

    def __init__(self, store: PostgresStore, embedder: Embedder, generation: Callable[[], int]) -> None:
        self.store = store
        self.embedder = embedder
        self._cache = store.recall_index("numpy")  # only its embedding-cache half is used
        self._generation = generation
        self.name = _checked(table_name(embedder.provider, embedder.model, int(embedder.dim)))
        self.exact_below = EXACT_BELOW
        self._ready = False
        self._size: tuple[int, int] | None = None  # (generation, rows)

    # -- the table ----------------------------------------------------------------------

    def exists(self) -> bool:
        if not self._ready:
            self._ready = bool(self.store.query("SELECT 1 FROM file_vector_indexes WHERE name = %s", (self.name,)))
        return self._ready

    def ensure(self) -> str:
        """The table, made (with the pgvector extension) if it is not there yet."""
        if not self.exists():
            e = self.embedder
            ensure_table(self.store, e.provider, e.model, int(e.dim))
            self._ready = True
        return self.name

    # -- writing --------------------------------------------------------------------------

    def vectors_for(self, texts: Sequence[str]) -> tuple[dict[str, np.ndarray], int]:
        self.ensure()  # before embedding: without pgvector, fail before paying for it
        return super().vectors_for(texts)

    def write(self, conn: Any, rows: Sequence[tuple[int, str, np.ndarray]]) -> None:
        """Store (chunk rowid, text sha256, vector) rows; ``conn`` is the caller's
        transaction (a :class:`~lossless.store.runner.QmarkConnection`)."""
        if not rows:
            return
        name = self.ensure()
        raw = getattr(conn, "conn", conn)
        register(raw)
        with raw.cursor() as cur:
            cur.executemany(
                f"INSERT INTO {name} (chunk_rowid, file_rowid, kind, text_sha256, embedding) "
                "SELECT c.rowid, c.file_rowid, c.kind, %s, %s FROM file_chunks c WHERE c.rowid = %s "
                "ON CONFLICT (chunk_rowid) DO UPDATE SET text_sha256 = excluded.text_sha256, "
                "embedding = excluded.embedding",
                [(sha, np.asarray(v, dtype=np.float32), rowid) for rowid, sha, v in rows],
            )

    def missing(self, file_rowids: Sequence[int]) -> list[tuple[int, str, str]]:
        """(chunk rowid, text, sha256) of the chunks of these files without a vector from
        this embedder (indexed before it was configured, or their embedding failed)."""
        ids = list(file_rowids)
        if not self.exists():
            rows = self.store.query("SELECT rowid, text, text_sha256 FROM file_chunks WHERE file_rowid = ANY(%s) "
                                     "ORDER BY rowid", (ids,))
        else:
            rows = self.store.query(
                f"SELECT c.rowid, c.text, c.text_sha256 FROM file_chunks c LEFT JOIN {self.name} v "
                "ON v.chunk_rowid = c.rowid WHERE c.file_rowid = ANY(%s) AND v.chunk_rowid IS NULL ORDER BY c.rowid",
                (ids,))
        return [(int(r[0]), r[1], r[2]) for r in rows]

    # -- searching ------------------------------------------------------------------------

    def size(self) -> int:
        gen = self._generation()
        if self._size is None or self._size[0] != gen:
            self._size = (gen, int(self.store.query(f"SELECT count(*) FROM {self.name}")[0][0]))
        return self._size[1]

    def nearest(self, query: str, k: int, *, files: Collection[int] | None = None,
                kinds: Collection[str] | None = None, min_similarity: float = 0.0) -> dict[int, float]:
        """chunk rowid → cosine similarity of the (at most ``k``) chunks nearest the query,
        among those of ``files`` (file rowids) and ``kinds`` when given."""
        if not self.exists() or (files is not None and not files) or (kinds is not None and not kinds):
            return {}
        if not self.reads(query):  # a query the model does not read: keywords alone
            return {}
        size = self.size()
        if size == 0:
            return {}
        qvec = np.asarray(self.query_vector(query), dtype=np.float32).reshape(-1)
        where = ""
        args: list[Any] = []
        if files is not None:
            where += " AND file_rowid = ANY(%s)"
            args.append(sorted(files))
        if kinds is not None:
            where += " AND kind = ANY(%s)"
            args.append(sorted(kinds))
        rows: list[tuple[Any, ...]] | None = None
        with self.store.transaction() as conn:
            register(conn)
            if size > self.exact_below:
                # SET LOCAL: only this transaction searches wider than the default 40
                conn.execute(f"SET LOCAL hnsw.ef_search = {min(1000, max(100, 2 * k))}")
                found = conn.execute(
                    f"SELECT chunk_rowid, embedding <=> %s FROM {self.name} WHERE TRUE{where} "
                    "ORDER BY embedding <=> %s LIMIT %s", [qvec, *args, qvec, k]).fetchall()
                rows = found if len(found) >= min(k, size) else None
            if rows is None:
                # MATERIALIZED: the planner cannot turn this into an (approximate) HNSW scan
                rows = conn.execute(
                    f"WITH c AS MATERIALIZED (SELECT chunk_rowid, embedding FROM {self.name} WHERE TRUE{where}) "
                    "SELECT chunk_rowid, embedding <=> %s AS d FROM c ORDER BY d, chunk_rowid LIMIT %s",
                    [*args, qvec, k]).fetchall()
        best = sorted(((1.0 - float(d), int(r)) for r, d in rows), key=lambda p: (-p[0], p[1]))
        return {rowid: sim for sim, rowid in best[:k] if sim >= min_similarity}
