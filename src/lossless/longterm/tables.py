"""The long-term memory's tables in the store's database, as ``lossless migrate`` copies
them (:data:`MEMORY_TABLES`, a :class:`~lossless.store.plugins.TableOwner`): every row as
stored, a memory with the keyword document its write path gives it on PostgreSQL.
(``memory_flush``, the marks of what was read for memories, is the store's.)"""

from __future__ import annotations

import json
from typing import Any

from lossless.store.documents import search_text
from lossless.store.plugins import TableOwner
from lossless.store.postgres.grep import search_document

__all__ = ["MEMORY_TABLES"]

_MEMORY_COLUMNS = ("rowid", "id", "kind", "content", "content_hash", "token_count", "importance", "user_id",
                   "agent_id", "metadata", "source_message_ids", "conversation_id", "created_at", "created_ts",
                   "last_used_at", "last_used_ts", "use_count", "updated_at", "task_id", "task_type", "status",
                   "result", "patterns", "errors")


def _memory_document(row: tuple[Any, ...]) -> str:
    """What PostgreSQL indexes for a memory row (of ``_MEMORY_COLUMNS``)."""
    content, result, patterns, errors = row[3], row[21], row[22], row[23]
    return search_document(search_text(content, result, json.loads(patterns or "[]"), json.loads(errors or "[]")))


MEMORY_TABLES = TableOwner(
    name="longterm",
    tables={
        "memories": _MEMORY_COLUMNS,
        "memory_vectors": ("memory_rowid", "provider", "model", "dim", "text_sha256", "vector"),
        "task_bounds": ("conversation_id", "ended_seq"),
        "forgotten_memories": ("rowid", "memory_id", "kind", "content", "user_id", "agent_id", "reason", "record",
                               "forgotten_at", "forgotten_ts"),
    },
    identity=("memories", "forgotten_memories"),
    documents={"memories": _memory_document},
)
