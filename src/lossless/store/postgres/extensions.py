"""The PostgreSQL extensions a store uses, as the server and the database have them.

``vector`` (pgvector) holds the recall vectors: the store creates it when it first makes a
vector table, and vector recall on PostgreSQL cannot work without it. ``pg_trgm`` serves
regex and substring pre-filters with GIN trigram indexes: the store creates it, and the
indexes, when its schema is made (migration 6), and does without where the server lacks it.

Only read here (``lossless doctor``): nothing is created. Driver-free: the caller runs the
statement, on a store's connection or on one of its own to a server with no store yet.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["EXTENSIONS", "EXTENSIONS_SQL", "TRIGRAM_INDEX_SQL", "Extension", "read_extensions"]

EXTENSIONS = ("vector", "pg_trgm")
# per name: the version the server could install (None: not on the server), and the one
# installed in this database (None: not installed); both catalogues are readable by any role
EXTENSIONS_SQL = ("SELECT n, (SELECT default_version FROM pg_available_extensions WHERE name = n), "
                  "(SELECT extversion FROM pg_extension WHERE extname = n) FROM unnest(%s::text[]) AS n")
# whether this store's schema (the search_path's first: a tenant's, not public's) has the
# trigram index migration 6 makes where pg_trgm is installed
TRIGRAM_INDEX_SQL = ("SELECT count(*) FROM pg_indexes WHERE schemaname = current_schema() "
                     "AND indexname = 'messages_trigram'")


@dataclass(frozen=True, slots=True)
class Extension:
    """One extension: ``available`` the version the server offers (None when it has no
    such extension), ``installed`` the version created in this database (None if not)."""

    name: str
    available: str | None
    installed: str | None


def read_extensions(query: Callable[[str, Sequence[Any]], Sequence[Sequence[Any]]]) -> dict[str, Extension]:
    """Each of :data:`EXTENSIONS` as ``query`` (a store's ``query``, or a cursor's
    execute-and-fetch) finds it."""
    rows = query(EXTENSIONS_SQL, (list(EXTENSIONS),))
    return {str(name): Extension(str(name), available, installed) for name, available, installed in rows}
