"""Exceptions raised by lossless.

Every error the library raises on purpose derives from :class:`LosslessError`, so a
caller can catch one type at a boundary (the CLI prints it and exits non-zero)::

    LosslessError
    ├── ValidationError        bad input: a message, an argument, a config value
    │   ├── BudgetError        a token budget that cannot be honoured
    │   └── QueryError         a malformed search query (raw FTS syntax, bad regex)
    ├── NotFoundError          a conversation, message or summary id that does not exist
    ├── StoreError             the store failed or is in a state we refuse to touch
    │   ├── MigrationError     the schema is newer than this code, or a migration failed
    │   └── CompactionBusyError  another compaction of the conversation is running
    ├── SummarizerError        a summarizer failed (the engine falls back; raised only
    │                          when the caller asked for that summarizer explicitly)
    ├── EmbedderError          an embedder failed or returned unusable vectors (assembly
    │                          and hybrid search fall back to keywords; raised when the
    │                          caller asked for vectors: semantic search, ``index()``)
    ├── ContextOverflowError   a provider kept refusing the context as too long after
    │                          emergency compaction and truncation
    └── MissingDependencyError an optional extra is not installed

Builtins are never shadowed: there is no ``lossless.MemoryError``.
"""

from __future__ import annotations

__all__ = [
    "BudgetError",
    "CompactionBusyError",
    "ContextOverflowError",
    "EmbedderError",
    "LosslessError",
    "MigrationError",
    "MissingDependencyError",
    "NotFoundError",
    "QueryError",
    "StoreError",
    "SummarizerError",
    "ValidationError",
]


class LosslessError(Exception):
    """Base class of every error lossless raises on purpose."""


class ValidationError(LosslessError, ValueError):
    """Input that lossless refuses; the message names what was wrong."""


class BudgetError(ValidationError):
    """A token budget that is not a positive integer."""


class QueryError(ValidationError):
    """A search query that cannot be run (malformed raw FTS syntax, a bad regex)."""


class NotFoundError(LosslessError, LookupError):
    """An id (conversation, message, summary) that does not exist in the store."""


class StoreError(LosslessError):
    """The store failed, or refuses an operation that would damage it. ``reason`` says what
    happened without naming the database (what a server may tell its clients);
    ``transient``: retrying soon may succeed (the database was locked, busy)."""

    def __init__(self, message: str, *, reason: str | None = None, transient: bool = False) -> None:
        super().__init__(message)
        self.reason = reason or "the store failed"
        self.transient = transient


class MigrationError(StoreError):
    """The database schema cannot be brought to the version this code needs."""


class CompactionBusyError(StoreError):
    """A conversation is being compacted (by another thread or process) right now."""


class SummarizerError(LosslessError):
    """A summarizer could not produce a summary."""


class EmbedderError(LosslessError):
    """An embedder raised, or returned vectors of the wrong shape or with NaN/inf."""


class ContextOverflowError(LosslessError):
    """The model still said the context was too long after every recovery step."""


class MissingDependencyError(LosslessError, ImportError):
    """An optional dependency is missing; the message says which extra to install."""
