"""The embedded store: one SQLite file (WAL, FTS5, sqlite-vec through apsw) holding messages,
the summary DAG, recall units and the rest. :mod:`~lossless.store.sqlite.store` is the store,
``recall`` its units and vectors, ``grep`` its keyword and regex search, ``migrations`` its
schema."""

from lossless.store.sqlite.store import SQLiteStore, message_hash, message_id, summary_id

__all__ = ["SQLiteStore", "message_hash", "message_id", "summary_id"]
