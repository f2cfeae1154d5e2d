"""The long-term memory record: one fact, preference, error, pattern or task that outlives
the conversation it came from (seed 003's long-term tier)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from lossless.store.documents import search_text  # the store's keyword index is given it too

if TYPE_CHECKING:
    from lossless.store.base import Store

__all__ = [
    "DEFAULT_IMPORTANCE",
    "KINDS",
    "OWNER_KEYS",
    "SCOPES",
    "TASK_STATUSES",
    "MemoryKind",
    "MemoryRecord",
    "Scope",
    "conversation_owners",
    "owners_of",
    "scope_of",
    "search_text",
]

MemoryKind = Literal["task", "fact", "preference", "error", "pattern"]
Scope = Literal["user", "agent", "global"]

KINDS: tuple[str, ...] = ("task", "fact", "preference", "error", "pattern")
SCOPES: tuple[str, ...] = ("user", "agent", "global")
TASK_STATUSES: tuple[str, ...] = ("pending", "in_progress", "blocked", "completed", "failed", "cancelled")

# When the caller gives no importance. Errors and what the user asked for (preferences,
# tasks) are what an agent most regrets forgetting (seed 003: errors 0.8, decisions 0.6).
DEFAULT_IMPORTANCE: dict[str, float] = {
    "error": 0.8,
    "preference": 0.7,
    "task": 0.7,
    "pattern": 0.6,
    "fact": 0.5,
}


def scope_of(user: str | None, agent: str | None) -> Scope:
    """The scope a record with these owners has: user set → user, else agent → agent,
    else global. (The database derives the same value in a generated column.)"""
    if user is not None:
        return "user"
    if agent is not None:
        return "agent"
    return "global"


OWNER_KEYS = ("user", "user_id", "agent", "agent_id")  # conversation metadata that scopes memories


def owners_of(metadata: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """The (user, agent) a conversation's metadata names (``user`` or ``user_id``;
    ``agent`` or ``agent_id``): the owners of the long-term records it is distilled
    into and of those its assembly may show."""
    user = metadata.get("user", metadata.get("user_id"))
    agent = metadata.get("agent", metadata.get("agent_id"))
    return (None if user is None else str(user), None if agent is None else str(agent))


def conversation_owners(store: Store, conversation_id: str) -> tuple[str | None, str | None]:
    """:func:`owners_of` a stored conversation (none when it does not exist)."""
    info = store.get_conversation(conversation_id)
    return owners_of(info.metadata if info else {})


@dataclass(frozen=True, slots=True)
class MemoryRecord:
    """One stored memory.

    ``user`` and ``agent`` are its owners; ``scope`` is derived from them. ``last_used_at``
    starts at ``created_at`` and moves whenever a search returns the record or the same
    content is added again; ``use_count`` counts those uses. The task fields are set on
    ``kind="task"`` records only. ``score`` is set on records returned by a search.
    """

    id: str
    kind: MemoryKind
    content: str
    importance: float
    user: str | None
    agent: str | None
    scope: Scope
    created_at: datetime
    last_used_at: datetime
    use_count: int = 0
    token_count: int = 0
    metadata: dict[str, Any] = field(default_factory=dict)
    source_message_ids: tuple[str, ...] = ()
    conversation_id: str | None = None
    task_id: str | None = None
    task_type: str | None = None
    status: str | None = None
    result: str | None = None
    patterns: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()
    score: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (times as ISO 8601 strings, tuples as lists)."""
        out: dict[str, Any] = {
            "id": self.id,
            "kind": self.kind,
            "content": self.content,
            "importance": self.importance,
            "user": self.user,
            "agent": self.agent,
            "scope": self.scope,
            "metadata": dict(self.metadata),
            "source_message_ids": list(self.source_message_ids),
            "conversation_id": self.conversation_id,
            "created_at": self.created_at.isoformat(),
            "last_used_at": self.last_used_at.isoformat(),
            "use_count": self.use_count,
            "token_count": self.token_count,
        }
        if self.kind == "task":
            out["task"] = {
                "task_id": self.task_id,
                "task_type": self.task_type,
                "status": self.status,
                "result": self.result,
                "patterns": list(self.patterns),
                "errors": list(self.errors),
            }
        if self.score is not None:
            out["score"] = self.score
        return out
