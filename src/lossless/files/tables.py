"""The workspace file index's tables in the store's database, as ``lossless migrate``
copies them (:data:`FILE_TABLES`, a :class:`~lossless.store.plugins.TableOwner`): what is
not a plain row copy. A chunk is written with the search vector its file's path and its
text give on PostgreSQL (as :mod:`lossless.files.postgres` writes it); the chunk vectors
of each embedder go into that embedder's pgvector table, and are compared back as the
``(chunk_rowid, provider, model, dim, text_sha256, vector)`` rows SQLite holds.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from lossless.files.backend import SQLiteFilesBackend
from lossless.files.postgres_vectors import ensure_table, register, vector_rows
from lossless.store.documents import chunk_documents, chunk_search
from lossless.store.plugins import Digest, Progress, TableOwner

if TYPE_CHECKING:
    from lossless.store.postgres.store import PostgresStore
    from lossless.store.sqlite.store import SQLiteStore

__all__ = ["CHUNK_COLUMNS", "FILE_TABLES", "copy_file_chunks", "copy_file_vectors", "verify_file_vectors"]

CHUNK_COLUMNS = ("rowid", "file_rowid", "ordinal", "start_line", "end_line", "token_count", "kind", "text",
                 "text_sha256")
_VECTORS = ("SELECT v.chunk_rowid, c.file_rowid, c.kind, v.text_sha256, v.vector FROM file_chunk_vectors v "
            "JOIN file_chunks c ON c.rowid = v.chunk_rowid WHERE v.provider = ? AND v.model = ? AND v.dim = ? "
            "ORDER BY v.chunk_rowid")


def _stream(src: SQLiteStore, sql: str, args: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield from src.connection.execute(sql, args)


def copy_file_chunks(src: SQLiteStore, conn: Any) -> int:
    """Copy ``file_chunks`` (after ``files``) inside the copy's transaction; rows copied."""
    paths = dict(src._query("SELECT rowid, path FROM files"))
    cols = ", ".join(CHUNK_COLUMNS)
    n = 0
    with conn.cursor() as cur:
        # staged, so the server computes the tsvector from the documents we send
        cur.execute(f"CREATE TEMP TABLE _in_file_chunks ON COMMIT DROP AS SELECT {cols} FROM file_chunks WITH NO DATA")
        cur.execute("ALTER TABLE _in_file_chunks ADD COLUMN _path_doc TEXT, ADD COLUMN _text_doc TEXT")
        with cur.copy(f"COPY _in_file_chunks ({cols}, _path_doc, _text_doc) FROM STDIN") as copy:
            for row in _stream(src, f"SELECT {cols} FROM file_chunks"):
                copy.write_row((*row, *chunk_documents(paths.get(row[1], ""), row[7])))
                n += 1
        cur.execute(f"INSERT INTO file_chunks ({cols}, search) SELECT {cols}, {chunk_search('_path_doc', '_text_doc')} "
                    "FROM _in_file_chunks")
    return n


def copy_file_vectors(src: SQLiteStore, dst: PostgresStore, conn: Any, progress: Progress | None = None) -> int:
    """Copy ``file_chunk_vectors`` into one pgvector table per embedder (after
    ``file_chunks``), inside the copy's transaction; rows copied."""
    total = 0
    groups = src._query("SELECT provider, model, dim FROM file_chunk_vectors GROUP BY provider, model, dim "
                        "ORDER BY provider, model, dim")
    for provider, model, dim in groups:
        name = ensure_table(dst, provider, model, int(dim))  # joins the copy's transaction
        register(conn)
        with conn.cursor() as cur, cur.copy(
            f"COPY {name} (chunk_rowid, file_rowid, kind, text_sha256, embedding) FROM STDIN"
        ) as copy:
            for rowid, file_rowid, kind, sha, blob in _stream(src, _VECTORS, (provider, model, dim)):
                copy.write_row((rowid, file_rowid, kind, sha, np.frombuffer(blob, dtype="<f4").astype(np.float32)))
                total += 1
    if progress is not None:
        progress("file_chunk_vectors", total)
    return total


def verify_file_vectors(src: SQLiteStore, dst: PostgresStore, digest: Digest) -> list[str]:
    """The difference between the two stores' chunk vectors, compared as SQLite's rows."""
    want = digest(SQLiteFilesBackend(src).vector_rows())
    got = digest(vector_rows(dst))
    if want[0] != got[0]:
        return [f"file_chunk_vectors: {want[0]} rows in SQLite, {got[0]} in PostgreSQL"]
    if want[1] != got[1]:
        return [f"file_chunk_vectors: the rows differ (same count, {want[0]}, different content)"]
    return []


def _copy_vectors(src: SQLiteStore, dst: PostgresStore, conn: Any, progress: Progress | None) -> dict[str, int]:
    return {"file_chunk_vectors": copy_file_vectors(src, dst, conn, progress)}


FILE_TABLES = TableOwner(
    name="files",
    tables={
        "files": ("rowid", "root", "path", "abs_path", "name", "kind", "size", "mtime_ns", "sha256", "indexed_at",
                  "chunk_count"),
        "file_chunks": CHUNK_COLUMNS,  # written with its search vector (copy_file_chunks)
    },
    identity=("files", "file_chunks"),
    copy={"file_chunks": copy_file_chunks},
    copy_rest=_copy_vectors,
    verify_rest=verify_file_vectors,
)
