"""The workspace file index in PostgreSQL: the :class:`~lossless.files.backend.FilesBackend`
for :class:`~lossless.store.postgres.store.PostgresStore`.

The shared SQL of :mod:`lossless.files.index` runs with its ``?`` placeholders rewritten
(:class:`~lossless.store.runner.PostgresRunner`). Keyword search is the ``search``
tsvector column of ``file_chunks`` (GIN): :func:`~lossless.store.postgres.grep.search_document`
of the file's path (weight B) and of the chunk's text (weight A), under the ``english``
configuration, whose Snowball stemmer plays the part of SQLite's porter tokenizer
("computed" finds ``compute_backoff``); CJK text is found by its bigrams, as on SQLite.
Substrings inside identifiers (``backoff`` in ``computeBackoff``), which SQLite's
trigram index finds, are ``ILIKE`` matches here, served by a ``pg_trgm`` GIN index where
the server has pg_trgm. Candidates are then scored exactly as on SQLite (term coverage,
then the index rank relative to the best). Vectors: :mod:`lossless.files.postgres_vectors`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from lossless.files.postgres_vectors import PgChunkVectors, vector_count, vector_rows
from lossless.files.relevance import query_terms, query_words, relevance, substrings
from lossless.files.sql import CHUNK_COLS, FILE_INSERT, VectorRow
from lossless.store.documents import chunk_documents, chunk_search
from lossless.store.postgres.grep import keyword_tsquery
from lossless.store.runner import PostgresRunner, QmarkConnection, qmark

if TYPE_CHECKING:
    from lossless.embed.base import Embedder
    from lossless.files.chunk import Chunk
    from lossless.store.postgres.store import PostgresStore

__all__ = ["CHUNK_SEARCH", "PostgresFilesBackend", "chunk_documents", "chunk_search"]


CHUNK_SEARCH = chunk_search("?", "?")
# ts_rank weights {D, C, B, A}: a path word counts half a text word, as bm25(0.5, 1.0) on SQLite
_WEIGHTS = "'{0.1, 0.2, 0.5, 1.0}'"
_MAX_SUBSTRINGS = 32
_LOCK = "SELECT pg_advisory_xact_lock(hashtext('lossless.files'), hashtext(current_schema()))"


def _like(term: str) -> str:
    return "%" + term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


class PostgresFilesBackend(PostgresRunner):
    store: PostgresStore  # the runner's store, as this backend uses it

    @contextmanager
    def transaction(self, *, wait: bool = True) -> Iterator[QmarkConnection]:
        """One write transaction, one writer of the file tables at a time (as on SQLite):
        two processes indexing the same file cannot both insert it."""
        with super().transaction(wait=wait) as conn:
            conn.execute(_LOCK)
            yield conn

    def in_ids(self, column: str, ids: Collection[int]) -> tuple[str, list[Any]]:
        return f"{column} = ANY(?)", [sorted(ids)]

    def insert_file(self, conn: Any, values: Sequence[Any]) -> int:
        return int(conn.execute(FILE_INSERT + " RETURNING rowid", tuple(values)).fetchone()[0])

    def insert_chunk(self, conn: Any, file_rowid: int, path: str, chunk: Chunk, kind: str, sha: str) -> int:
        row = conn.execute(
            f"INSERT INTO file_chunks ({CHUNK_COLS}, search) VALUES (?, ?, ?, ?, ?, ?, ?, ?, {CHUNK_SEARCH}) "
            "RETURNING rowid",
            (file_rowid, chunk.ordinal, chunk.start_line, chunk.end_line, chunk.token_count, kind, chunk.text, sha,
             *chunk_documents(path, chunk.text)),
        ).fetchone()
        return int(row[0])

    def drop_chunks(self, conn: Any, file_rowids: Sequence[int]) -> int:
        # the vector rows go with their chunks (ON DELETE CASCADE)
        rows = conn.execute("DELETE FROM file_chunks WHERE file_rowid = ANY(?) RETURNING rowid",
                            (list(file_rowids),)).fetchall()
        return len(rows)

    def move_path(self, conn: Any, file_rowid: int, path: str) -> None:
        chunks = conn.execute("SELECT rowid, text FROM file_chunks WHERE file_rowid = ?", (file_rowid,)).fetchall()
        conn.executemany(f"UPDATE file_chunks SET search = {CHUNK_SEARCH} WHERE rowid = ?",
                         [(*chunk_documents(path, text), c) for c, text in chunks])

    def bump_generation(self, conn: Any) -> None:
        conn.execute("INSERT INTO files_generation AS g (id, value) VALUES (1, 1) "
                     "ON CONFLICT (id) DO UPDATE SET value = g.value + 1")

    def generation(self) -> int:
        return int(self.query("SELECT coalesce((SELECT value FROM files_generation WHERE id = 1), 0)")[0][0])

    def keyword_candidates(self, query: str, where: str, args: Sequence[Any], limit: int) -> dict[int, float]:
        words = query_words(query)
        stems, grams = query_terms(query)
        cond = qmark(where)
        rank: dict[int, float] = {}
        built = keyword_tsquery(query, "english")
        if built is not None:
            expr, terms = built  # each term quoted: websearch syntax in the user's text means nothing
            sql = (f"SELECT c.rowid, ts_rank({_WEIGHTS}, c.search, q.q) AS score FROM file_chunks c, "
                   f"(SELECT ({expr}) AS q) q WHERE c.search @@ q.q AND {cond} ORDER BY score DESC, c.rowid DESC "
                   "LIMIT %s")
            for rowid, score in self.store.query(sql, [*terms, *args, limit]):
                rank[int(rowid)] = rank.get(int(rowid), 0.0) + float(score)
        subs = substrings(query, words)[:_MAX_SUBSTRINGS]
        if subs:
            # the chunks holding the most substrings; ranked by the share of them held
            patterns = [_like(s) for s in subs]
            hits = " + ".join(["(c.text ILIKE %s)::int"] * len(subs))
            any_of = " OR ".join(["c.text ILIKE %s"] * len(subs))
            sql = (f"SELECT c.rowid, {hits} AS hits FROM file_chunks c WHERE ({any_of}) AND {cond} "
                   "ORDER BY hits DESC, c.rowid DESC LIMIT %s")
            for rowid, n in self.store.query(sql, [*patterns, *patterns, *args, limit]):
                rank[int(rowid)] = rank.get(int(rowid), 0.0) + int(n) / len(subs)
        if not rank:
            return {}
        rows = self.store.query("SELECT c.rowid, f.path, c.text FROM file_chunks c JOIN files f "
                                 "ON f.rowid = c.file_rowid WHERE c.rowid = ANY(%s)", (list(rank),))
        return relevance(rows, rank, stems, grams)

    def chunk_vectors(self, embedder: Embedder) -> PgChunkVectors:
        return PgChunkVectors(self.store, embedder, self.generation)

    def vector_count(self) -> int:
        return vector_count(self.store)

    def vector_rows(self) -> Iterator[VectorRow]:
        return vector_rows(self.store)
