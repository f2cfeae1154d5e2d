"""The SQL text both file backends write rows with, and the shape of a chunk vector row
(:mod:`lossless.files.backend` for SQLite, :mod:`lossless.files.postgres`)."""

from __future__ import annotations

__all__ = ["CHUNK_COLS", "FILE_INSERT", "VectorRow"]

FILE_INSERT = ("INSERT INTO files (root, path, name, kind, size, mtime_ns, sha256, indexed_at, chunk_count, "
               "abs_path) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
CHUNK_COLS = "file_rowid, ordinal, start_line, end_line, token_count, kind, text, text_sha256"
# (chunk rowid, provider, model, dim, text sha256, float32 little-endian bytes): a chunk
# vector as SQLite's file_chunk_vectors holds it, whichever backend it comes from
VectorRow = tuple[int, str, str, int, str, bytes]
