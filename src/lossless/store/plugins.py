"""Tables a package above the store keeps in the store's database (issue 28: plug-ins own
their tables; the store imports none of them).

The long-term memory (:data:`lossless.longterm.tables.MEMORY_TABLES`) and the workspace
file index (:data:`lossless.files.tables.FILE_TABLES`) each declare theirs as a
:class:`TableOwner`: what ``lossless migrate`` copies and compares of them, and the hooks
for what is not a plain row copy. The caller of :func:`lossless.store.transfer.copy_sqlite_to_postgres`
passes the owners in (``lossless migrate`` passes both).

Their migrations are theirs too (``longterm/schema.py``, ``files/schema.py``), registered
with :mod:`lossless.store.schema` in the slots it numbers for them. What their rows give
the keyword index (:mod:`lossless.store.documents`) stays in the store, with the store's
migrations that write every table's keyword rows again (``keyword_forms``, ``cjk_bigrams``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lossless.store.postgres.store import PostgresStore
    from lossless.store.sqlite.store import SQLiteStore

__all__ = ["Digest", "Progress", "TableOwner"]

Progress = Callable[[str, int], None]  # (table, rows copied)
Digest = Callable[[Iterator[tuple[Any, ...]]], tuple[int, int]]  # rows -> (count, order-free digest)


def _nothing_more(src: SQLiteStore, dst: PostgresStore, conn: Any, progress: Progress | None) -> dict[str, int]:
    return {}


def _nothing_to_verify(src: SQLiteStore, dst: PostgresStore, digest: Digest) -> list[str]:
    return []


@dataclass(frozen=True)
class TableOwner:
    """A plug-in's tables as ``lossless migrate`` copies them into PostgreSQL.

    ``tables``: table -> the columns copied and compared as they are (SQLite's names), in
    the order they are copied (a table after those it references). ``identity``: the
    tables whose rowid sequence must continue after the copied rows. ``documents``: the
    tables written with a keyword document computed from the row (``to_tsvector('simple',
    …)`` of it). ``copy``: the tables copied their own way (into the copy's open
    transaction; returns the rows copied). ``copy_rest`` copies what is not a row of
    ``tables`` (vectors into pgvector tables; rows per name) and ``verify_rest`` compares
    it back (the differences, in words)."""

    name: str
    tables: Mapping[str, tuple[str, ...]]
    identity: tuple[str, ...] = ()
    documents: Mapping[str, Callable[[tuple[Any, ...]], str]] = field(default_factory=dict)
    copy: Mapping[str, Callable[[SQLiteStore, Any], int]] = field(default_factory=dict)
    copy_rest: Callable[[SQLiteStore, PostgresStore, Any, Progress | None], dict[str, int]] = _nothing_more
    verify_rest: Callable[[SQLiteStore, PostgresStore, Digest], list[str]] = _nothing_to_verify
