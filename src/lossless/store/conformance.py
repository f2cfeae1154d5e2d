"""Typing-only proof that both stores implement the :class:`~lossless.store.base.Store`
protocol: mypy (strict, run over ``src/lossless``) checks each return below, so a store
that drifts from the protocol fails type checking, not a user. Nothing here runs."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lossless.store.base import Store
    from lossless.store.postgres.store import PostgresStore
    from lossless.store.sqlite.store import SQLiteStore

__all__: list[str] = []


def _sqlite_is_a_store(store: SQLiteStore) -> Store:
    return store


def _postgres_is_a_store(store: PostgresStore) -> Store:
    return store
