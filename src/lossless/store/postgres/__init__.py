"""The shared store: PostgreSQL (with pgvector) through psycopg 3, for many processes and
hosts on one store. Same layout as :mod:`lossless.store.sqlite`: ``store``, ``recall``,
``grep``, ``migrations``.

Importing this package, or its driver-free modules (``migrations``, ``grep``), needs no
driver: SQLite-only code reads them (``lossless doctor`` the latest schema version, erase
and reindex the search document) on an install without the ``postgres`` extra. Only
:mod:`~lossless.store.postgres.store` needs psycopg, so its names load on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lossless.store.postgres.store import PostgresStore, split_schema

__all__ = ["PostgresStore", "split_schema"]


def __getattr__(name: str) -> Any:
    # not at import: psycopg is an extra, and importing a sibling module runs this file
    if name in __all__:
        from lossless.store.postgres import store

        return getattr(store, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
