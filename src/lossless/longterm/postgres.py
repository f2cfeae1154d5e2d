"""Long-term memories in PostgreSQL: the :class:`~lossless.longterm.backend.MemoryBackend`
for :class:`~lossless.store.postgres.store.PostgresStore`.

The shared SQL of :mod:`lossless.longterm.memories` uses ``?`` placeholders; here they become
psycopg's ``%s`` (the SQL text is lossless's own, values are always parameters, so the
rewrite never touches user text). Keyword search is the ``search`` tsvector column
(``store/postgres/grep.py``: folded words, compound parts, CJK bigrams) ranked by
``ts_rank``, then the same term-coverage relevance as on SQLite. Memory writes take a
transaction-scoped advisory lock, one writer at a time as on SQLite, so "same owner and
content is one memory" holds under concurrent writers without a unique-violation race.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import psycopg

from lossless.longterm.relevance import query_terms, rank_by_coverage
from lossless.store.postgres.grep import keyword_tsquery, search_document
from lossless.store.runner import PostgresRunner, qmark

if TYPE_CHECKING:
    from lossless.store.base import RecallIndex
    from lossless.store.postgres.store import PostgresStore

__all__ = ["PostgresMemoryBackend", "qmark"]

_LOCK = "SELECT pg_advisory_xact_lock(hashtext('lossless.memories'), hashtext(current_schema()))"


class PostgresMemoryBackend(PostgresRunner):
    """Queries are the :class:`PostgresRunner`'s; its transactions also take the lock."""

    store: PostgresStore  # the runner's store, as this backend uses it

    greatest = "greatest"
    integrity_errors: tuple[type[BaseException], ...] = (psycopg.errors.UniqueViolation,)

    @contextmanager
    def transaction(self, *, wait: bool = True) -> Iterator[Any]:
        with super().transaction(wait=wait) as conn:
            conn.execute(_LOCK)
            yield conn

    def forgetting(self, vacuum: bool) -> Any:
        return self.transaction()  # PostgreSQL frees space at VACUUM (see vacuum())

    def index_text(self, conn: Any, rowid: int, text: str) -> None:
        conn.conn.execute("UPDATE memories SET search = to_tsvector('simple', %s) WHERE rowid = %s",
                          (search_document(text), rowid))

    def unindex(self, conn: Any, rowids: Sequence[int]) -> None:
        conn.conn.execute("UPDATE memories SET search = NULL WHERE rowid = ANY(%s)", (list(rowids),))
        conn.conn.execute("DELETE FROM memory_vectors WHERE memory_rowid = ANY(%s)", (list(rowids),))

    def optimize(self, conn: Any) -> None:
        return None  # a GIN index drops deleted rows' entries at VACUUM

    def vacuum(self) -> None:
        # FULL rewrites the tables into new files and deletes the old ones, so forgotten
        # text leaves the table files (the WAL and backups keep it until they are recycled)
        self.store.query("VACUUM FULL memories, memory_vectors, embedding_cache")

    def keyword_candidates(self, query: str, where: str, args: Sequence[Any], limit: int) -> dict[int, float]:
        words, grams = query_terms(query)
        cond = qmark(where)
        scores: dict[int, float] = {}
        built = keyword_tsquery(query)  # words and CJK bigrams (a one-character run: a prefix term)
        if built is not None:
            expr, expr_args = built
            sql = (f"SELECT m.rowid, ts_rank(m.search, q.q) AS score FROM memories m, (SELECT {expr} AS q) q "
                   f"WHERE m.search @@ q.q AND {cond} ORDER BY score DESC, m.rowid DESC LIMIT %s")
            for rowid, score in self.store.query(sql, [*expr_args, *args, limit]):
                scores[int(rowid)] = float(score)
        if not scores:
            return {}
        rows = self.store.query("SELECT rowid, content, result, patterns, errors FROM memories WHERE rowid = ANY(%s)",
                                 (list(scores),))
        return rank_by_coverage(rows, scores, words, grams)

    def cache(self) -> RecallIndex:
        return self.store.recall_index("numpy")
