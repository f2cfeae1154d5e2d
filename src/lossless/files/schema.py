"""The workspace file index's tables (issue 28: plug-ins own their tables): migration 6
on SQLite, 8 on PostgreSQL (``files``: the files, their chunks with their keyword index,
the chunks' vectors and the generation a reader's matrix checks). Registered with the
store's schema (:func:`lossless.store.schema.register`) when this package is imported.

Released migrations never change (``tests/test_schema_same.py`` pins the SQL they run).
The steps that write the keyword rows of every table again, file chunks' too, are the
store's (``keyword_forms``, ``cjk_bigrams``: :mod:`lossless.store.reindex`).
"""

from __future__ import annotations

from typing import Any

from lossless.store import schema
from lossless.store.postgres.migrations import trigram_ops
from lossless.store.schema import SchemaDialect, Step
from lossless.store.sqlite.migrations import fts_table

__all__: list[str] = []


def _files(conn: Any, d: SchemaDialect) -> None:
    conn.execute(
        f"""
        -- Workspace files indexed for retrieval (lossless.files). abs_path is the resolved
        -- real path, so a file reached through a symlink or a second root is one row.
        CREATE TABLE files (
            rowid {d.rowid},
            root {d.key} NOT NULL,  -- the resolved directory ``path`` is relative to
            path {d.key} NOT NULL,  -- relative to root, '/'-separated: what users see and name
            abs_path {d.key} NOT NULL UNIQUE,
            name {d.key} NOT NULL,  -- the basename, for "a unique basename" lookups
            kind TEXT NOT NULL CHECK (kind IN ('code', 'markdown', 'text', 'data')),
            size {d.big} NOT NULL,
            mtime_ns {d.big} NOT NULL,  -- exact: same size and mtime means skip without reading
            sha256 TEXT NOT NULL,  -- of the bytes: a touched file with the same hash is not re-chunked
            indexed_at {d.key} NOT NULL,
            chunk_count INTEGER NOT NULL,
            UNIQUE (root, path)
        );
        CREATE INDEX files_path ON files (path);
        CREATE INDEX files_name ON files (name);

        -- A chunk rowid is never handed out twice: a chunk id (and its vector) always
        -- means the same text, and re-indexing one file leaves every other file's rows alone.
        CREATE TABLE file_chunks (
            rowid {d.serial},
            file_rowid {d.big} NOT NULL REFERENCES files(rowid) ON DELETE CASCADE,
            ordinal INTEGER NOT NULL,
            start_line INTEGER NOT NULL,  -- 1-based, inclusive
            end_line INTEGER NOT NULL,
            token_count INTEGER NOT NULL,
            kind TEXT NOT NULL CHECK (kind IN ('code', 'markdown', 'text', 'data')),
            text TEXT NOT NULL,
            text_sha256 TEXT NOT NULL,{d.part('search_column')}  -- the embedding_cache key
            UNIQUE (file_rowid, ordinal),
            CHECK (start_line <= end_line)
        );
        {d.part('file_chunks_search')}
        -- Bumped by every write to the tables above, so a reader's in-memory vector matrix
        -- learns it is stale (from this process or another) with one indexed read.
        CREATE TABLE files_generation (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            value {d.big} NOT NULL
        );
        INSERT INTO files_generation (id, value) VALUES (1, 0);
        """
    )


_SQLITE_PARTS = {
    "file_chunks_search": """
        -- Contentless like memories_fts: the text lives once, in file_chunks; rowids match.
        -- porter over unicode61 so "computed" finds compute_backoff (unicode61 splits at "_");
        -- the path column lets a query naming the file find its chunks (weighted low in bm25).
        CREATE VIRTUAL TABLE file_chunks_fts USING fts5(
            path, text, content='', contentless_delete=1,
            tokenize='porter unicode61 remove_diacritics 2'
        );
        -- trigram: substrings inside identifiers (camelCase, snake_case) and CJK text.
        """ + fts_table("file_chunks_tri", "trigram") + """

        -- One vector per chunk, scanned with numpy from an in-memory matrix, not vec0: at 100k
        -- x 384 a query takes ~6 ms where a vec0 k-NN, which reads every vector through SQLite
        -- per query, takes ~64 ms (bench/bench_files.py, 2 cores); the path/kind filters are
        -- a numpy mask; and it works where the sqlite-vec extension cannot load.
        CREATE TABLE file_chunk_vectors (
            chunk_rowid INTEGER PRIMARY KEY REFERENCES file_chunks(rowid) ON DELETE CASCADE,
            provider TEXT NOT NULL,
            model TEXT NOT NULL,
            dim INTEGER NOT NULL,
            text_sha256 TEXT NOT NULL,
            vector BLOB NOT NULL  -- float32, little-endian, L2-normalised
        );
        -- Which chunks have a vector from one embedder, without reading the vectors: a
        -- reader's matrix catches up by these ids after a write (only new rows are read).
        CREATE INDEX file_chunk_vectors_model ON file_chunk_vectors (provider, model, dim, chunk_rowid);
""",
}

_POSTGRES_PARTS = {
    # ``search``: the path's words (weight B) and the text's (weight A) of search_document(),
    # 'english' config, so "computed" finds compute_backoff as SQLite's porter tokenizer does.
    "file_chunks_search": """CREATE INDEX file_chunks_search ON file_chunks USING gin (search);

        -- One pgvector table per embedder (provider, model, dim), made on first use
        -- (files/postgres_vectors.py), as the recall vectors are: pgvector may be missing, and a
        -- keyword-only index must not need it.
        CREATE TABLE file_vector_indexes (
            name TEXT PRIMARY KEY,
            provider TEXT NOT NULL,
            model TEXT NOT NULL,
            dim INTEGER NOT NULL
        );
""",
}


def _postgres_trigram(conn: Any) -> None:
    ops = trigram_ops(conn)
    if ops is not None:  # substrings inside identifiers and CJK text: ILIKE served by an index
        conn.execute(f"CREATE INDEX file_chunks_trigram ON file_chunks USING gin (text {ops})")


schema.register(Step("files", 6, 8, _files), sqlite_parts=_SQLITE_PARTS, postgres_parts=_POSTGRES_PARTS,
                postgres_own=_postgres_trigram)
