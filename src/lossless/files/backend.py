"""The seam between the workspace file index and the database it lives in.

:class:`~lossless.files.index.Files` writes its SQL once, in SQLite's dialect with ``?``
placeholders, and runs it through a :class:`FilesBackend` (a
:class:`~lossless.store.runner.SQLRunner`): SQLite runs it as it is; PostgreSQL
(:mod:`lossless.files.postgres`) rewrites the placeholders. What no shared SQL can
express is the backend's own: writing a chunk with its keyword index (FTS5 tables, or
a ``tsvector`` column), moving a file's path words, deleting chunks, keyword candidates,
the chunk vectors (a numpy matrix, or pgvector), "one of these ids" and the generation
counter.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from lossless.files.sql import CHUNK_COLS, FILE_INSERT, VectorRow
from lossless.files.vectors import ChunkVectors, bump_generation, generation
from lossless.store.documents import chunk_index_text
from lossless.store.runner import SQLiteRunner, SQLRunner, sql_runner

if TYPE_CHECKING:
    from lossless.embed.base import Embedder
    from lossless.files.chunk import Chunk
    from lossless.recall.queries import QueryVectors
    from lossless.store.sqlite.store import SQLiteStore

__all__ = ["ChunkVectorIndex", "FilesBackend", "SQLiteFilesBackend", "chunk_index_text", "files_backend"]



class ChunkVectorIndex(Protocol):
    """The vectors of the chunks for one embedder."""

    embedder: Embedder
    queries: QueryVectors | None  # question vectors shared with recall (None: through the cache alone)

    def vectors_for(self, texts: Sequence[str]) -> tuple[dict[str, np.ndarray], int]:
        """sha256 → vector for each text (cache misses embedded), and how many were embedded."""
        ...

    def write(self, conn: Any, rows: Sequence[tuple[int, str, np.ndarray]]) -> None:
        """Store (chunk rowid, text sha256, vector) rows inside the caller's transaction."""
        ...

    def missing(self, file_rowids: Sequence[int]) -> list[tuple[int, str, str]]:
        """(chunk rowid, text, sha256) of these files' chunks without a vector from it."""
        ...

    def query_vector(self, query: str) -> np.ndarray: ...

    def nearest(self, query: str, k: int, *, files: Collection[int] | None = None,
                kinds: Collection[str] | None = None, min_similarity: float = 0.0) -> dict[int, float]:
        """chunk rowid → cosine similarity of the (at most ``k``) nearest chunks."""
        ...


class FilesBackend(SQLRunner, Protocol):
    def in_ids(self, column: str, ids: Collection[int]) -> tuple[str, list[Any]]:
        """A condition "``column`` is one of ``ids``" and its arguments."""
        ...

    def insert_file(self, conn: Any, values: Sequence[Any]) -> int:
        """Insert a files row (the columns of :data:`FILE_INSERT`); its rowid."""
        ...

    def insert_chunk(self, conn: Any, file_rowid: int, path: str, chunk: Chunk, kind: str, sha: str) -> int:
        """Insert a chunk and index its words (and ``path``'s); its rowid."""
        ...

    def drop_chunks(self, conn: Any, file_rowids: Sequence[int]) -> int:
        """Delete these files' chunks with their index entries and vectors; how many."""
        ...

    def move_path(self, conn: Any, file_rowid: int, path: str) -> None:
        """The file's path changed: its chunks' path words in the keyword index move too."""
        ...

    def bump_generation(self, conn: Any) -> None: ...
    def generation(self) -> int: ...

    def keyword_candidates(self, query: str, where: str, args: Sequence[Any], limit: int) -> dict[int, float]:
        """chunk rowid → keyword relevance in [0, 1] (``where``: a condition on alias ``c``)."""
        ...

    def chunk_vectors(self, embedder: Embedder) -> ChunkVectorIndex: ...
    def vector_count(self) -> int:
        """How many chunks have a vector (from any embedder)."""
        ...

    def vector_rows(self) -> Iterator[VectorRow]: ...


def files_backend(store: Any) -> FilesBackend:
    """The backend for ``store``'s dialect (StoreError for a store that is neither)."""
    runner = sql_runner(store)
    if runner.dialect == "postgresql":
        from lossless.files.postgres import PostgresFilesBackend

        return PostgresFilesBackend(store)
    return SQLiteFilesBackend(store)


class SQLiteFilesBackend(SQLiteRunner):
    """The index in the SQLite file: FTS5 (porter and trigram) tables keyed by chunk
    rowid, vectors as blobs scanned with numpy (:class:`~lossless.files.vectors.ChunkVectors`)."""

    store: SQLiteStore  # the runner's store, as this backend uses it

    def in_ids(self, column: str, ids: Collection[int]) -> tuple[str, list[Any]]:
        return f"{column} IN (SELECT value FROM json_each(?))", ["[" + ",".join(map(str, sorted(ids))) + "]"]

    def insert_file(self, conn: Any, values: Sequence[Any]) -> int:
        conn.execute(FILE_INSERT, tuple(values))
        return int(conn.last_insert_rowid())

    def insert_chunk(self, conn: Any, file_rowid: int, path: str, chunk: Chunk, kind: str, sha: str) -> int:
        conn.execute(
            f"INSERT INTO file_chunks ({CHUNK_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (file_rowid, chunk.ordinal, chunk.start_line, chunk.end_line, chunk.token_count, kind, chunk.text, sha),
        )
        chunk_rowid = int(conn.last_insert_rowid())
        conn.execute("INSERT INTO file_chunks_fts (rowid, path, text) VALUES (?, ?, ?)",
                     (chunk_rowid, chunk_index_text(path), chunk_index_text(chunk.text)))
        conn.execute("INSERT INTO file_chunks_tri (rowid, text) VALUES (?, ?)", (chunk_rowid, chunk.text))
        return chunk_rowid

    def drop_chunks(self, conn: Any, file_rowids: Sequence[int]) -> int:
        marks = ",".join("?" * len(file_rowids))
        ids = [(r[0],) for r in conn.execute(f"SELECT rowid FROM file_chunks WHERE file_rowid IN ({marks})",
                                             list(file_rowids))]
        # row by row: a rowid IN (subquery) on a contentless FTS5 table would scan all of it
        conn.executemany("DELETE FROM file_chunks_fts WHERE rowid = ?", ids)
        conn.executemany("DELETE FROM file_chunks_tri WHERE rowid = ?", ids)
        conn.executemany("DELETE FROM file_chunk_vectors WHERE chunk_rowid = ?", ids)
        conn.execute(f"DELETE FROM file_chunks WHERE file_rowid IN ({marks})", list(file_rowids))
        return len(ids)

    def move_path(self, conn: Any, file_rowid: int, path: str) -> None:
        chunks = list(conn.execute("SELECT rowid, text FROM file_chunks WHERE file_rowid = ?", (file_rowid,)))
        conn.executemany("DELETE FROM file_chunks_fts WHERE rowid = ?", [(c,) for c, _ in chunks])
        conn.executemany("INSERT INTO file_chunks_fts (rowid, path, text) VALUES (?, ?, ?)",
                         [(c, chunk_index_text(path), chunk_index_text(text)) for c, text in chunks])

    def bump_generation(self, conn: Any) -> None:
        bump_generation(conn)

    def generation(self) -> int:
        return generation(self.store)

    def keyword_candidates(self, query: str, where: str, args: Sequence[Any], limit: int) -> dict[int, float]:
        from lossless.files.relevance import keyword_candidates

        return keyword_candidates(self.store, query, where, args, limit)

    def chunk_vectors(self, embedder: Embedder) -> ChunkVectors:
        return ChunkVectors(self.store, embedder)

    def vector_count(self) -> int:
        return int(self.store.query("SELECT count(*) FROM file_chunk_vectors")[0][0])

    def vector_rows(self) -> Iterator[VectorRow]:
        yield from self.store.connection.execute(
            "SELECT chunk_rowid, provider, model, dim, text_sha256, vector FROM file_chunk_vectors")
