"""The shared store: PostgreSQL (with pgvector) through psycopg 3, for many processes and
hosts on one store. Same layout as :mod:`lossless.store.sqlite`: ``store``, ``recall``,
``grep``, ``migrations``. Importing this package needs no driver; opening a store does."""

from lossless.store.postgres.store import PostgresStore, split_schema

__all__ = ["PostgresStore", "split_schema"]
