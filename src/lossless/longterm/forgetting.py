"""The forgetting policy (seed 003, "长期记忆怎么防止无限增长"): the three ways the seed
forgets, as configuration the worker applies.

* **importance floor** (``memory_importance_floor``): a record under it goes;
* **age since last use** (``memory_max_unused_days``): a record neither recalled into a
  context, returned by a search nor added again for this long goes (``last_used_at``
  starts at ``created_at``; a record that keeps being recalled is never old);
* **capacity** (``memory_capacity``): at most this many records per owner pool (each
  user, each agent-only owner, and the global pool); over it, the least valuable go
  first: lowest importance, then least recently used, then oldest, then first stored.

Each record gone is logged in ``forgotten_memories`` with its reason and its whole record
(``MemoryRecord.to_dict()``), so :func:`restore` can put it back (same id, content, owners,
importance, task fields and times) and ``lossless memory forgotten`` lists what went. A
manual :meth:`~lossless.longterm.Memories.forget` is a deletion for good (privacy) and is
not logged. Memories are derived from messages the store keeps forever, so forgetting one
loses no original text either way.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from lossless.core.errors import NotFoundError, ValidationError
from lossless.core.validate import timestamp

if TYPE_CHECKING:
    from lossless.core.config import Config
    from lossless.longterm.backend import MemoryBackend
    from lossless.longterm.records import MemoryRecord

__all__ = ["CAPACITY_ORDER", "ForgetPolicy", "Forgotten", "apply_policy", "forgotten", "restore"]


class Pool(Protocol):
    """What the policy reads and writes of :class:`~lossless.longterm.memories.Memories`
    (the pool it forgets from): its backend, clock and row helpers."""

    db: MemoryBackend
    clock: Callable[[], datetime]

    def _record(self, row: Sequence[Any], score: float | None = None) -> MemoryRecord: ...
    def _by_rowids(self, rowids: Sequence[int]) -> dict[int, tuple[Any, ...]]: ...
    def _rows_in(self, conn: Any, rowids: Sequence[int]) -> dict[int, tuple[Any, ...]]: ...
    def _delete(self, conn: Any, rowids: list[int], *, optimize: bool) -> None: ...
    def get(self, memory_id: str) -> MemoryRecord: ...
    def add(self, content: str, kind: str = "fact", user: str | None = None, agent: str | None = None,
            importance: float | None = None, metadata: dict[str, Any] | None = None,
            source_message_ids: Sequence[str] | None = None, conversation_id: str | None = None,
            created_at: datetime | str | None = None, task: dict[str, Any] | None = None) -> MemoryRecord: ...

# least valuable first, within an owner pool
CAPACITY_ORDER = "m.importance ASC, m.last_used_ts ASC, m.created_ts ASC, m.rowid ASC"
_POOL = "m.scope, coalesce(m.user_id, m.agent_id, '')"


@dataclass(frozen=True, slots=True)
class ForgetPolicy:
    """What the policy forgets (``None``: that rule is off)."""

    capacity: int | None = None
    max_unused_days: float | None = None
    importance_floor: float | None = None

    def __post_init__(self) -> None:
        if self.capacity is not None and (isinstance(self.capacity, bool) or not isinstance(self.capacity, int)
                                          or self.capacity < 1):
            raise ValidationError(f"memory_capacity must be a positive integer or None, got {self.capacity!r}")
        if self.max_unused_days is not None and not self.max_unused_days > 0:
            raise ValidationError(f"memory_max_unused_days must be positive or None, got {self.max_unused_days!r}")
        if self.importance_floor is not None and not 0 <= self.importance_floor <= 1:
            raise ValidationError(f"memory_importance_floor must be in [0, 1] or None, got {self.importance_floor!r}")

    @classmethod
    def from_config(cls, config: Config) -> ForgetPolicy:
        return cls(config.memory_capacity, config.memory_max_unused_days, config.memory_importance_floor)

    @property
    def active(self) -> bool:
        return not (self.capacity is None and self.max_unused_days is None and self.importance_floor is None)


@dataclass(frozen=True, slots=True)
class Forgotten:
    """One record the policy removed (or, in a dry run, would remove), and why."""

    record: MemoryRecord
    reason: str  # importance | unused | capacity
    forgotten_at: datetime | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {"reason": self.reason, "memory": self.record.to_dict()}
        if self.forgotten_at is not None:
            out["forgotten_at"] = self.forgotten_at.isoformat()
        return out


def _victims(mem: Pool, policy: ForgetPolicy, now: datetime, run: Any) -> list[tuple[int, str]]:
    """(rowid, reason) of every record the policy removes, the first rule that holds named."""
    out: dict[int, str] = {}
    spared: list[str] = []
    args: list[Any] = []
    if policy.importance_floor is not None:
        for (rowid,) in run("SELECT m.rowid FROM memories m WHERE m.importance < ?", [policy.importance_floor]):
            out.setdefault(rowid, "importance")
        spared.append("m.importance >= ?")
        args.append(policy.importance_floor)
    if policy.max_unused_days is not None:
        cutoff = timestamp(now - timedelta(days=policy.max_unused_days))
        for (rowid,) in run("SELECT m.rowid FROM memories m WHERE m.last_used_ts < ?", [cutoff]):
            out.setdefault(rowid, "unused")
        spared.append("m.last_used_ts >= ?")
        args.append(cutoff)
    if policy.capacity is not None:
        where = " AND ".join(spared) or "TRUE"
        sql = (f"SELECT rowid FROM (SELECT m.rowid AS rowid, row_number() OVER (PARTITION BY {_POOL} "
               f"ORDER BY {CAPACITY_ORDER.replace('ASC', 'DESC')}) AS rank FROM memories m WHERE {where}) AS ranked "
               "WHERE rank > ?")
        for (rowid,) in run(sql, [*args, policy.capacity]):
            out.setdefault(rowid, "capacity")
    return sorted(out.items())


def apply_policy(mem: Pool, policy: ForgetPolicy, *, dry_run: bool = False) -> list[Forgotten]:
    """Forget what ``policy`` says (see the module docstring) in one transaction, logging
    each record with its reason; with ``dry_run`` only say what would go."""
    if not policy.active:
        return []
    now = mem.clock()
    if dry_run:
        victims = _victims(mem, policy, now, mem.db.query)
        rows = mem._by_rowids([r for r, _ in victims])
        return [Forgotten(mem._record(rows[r]), why) for r, why in victims if r in rows]
    out: list[Forgotten] = []
    with mem.db.forgetting(False) as conn:
        victims = _victims(mem, policy, now, lambda sql, a: [tuple(r) for r in conn.execute(sql, a)])
        if not victims:
            return []
        rows = mem._rows_in(conn, [r for r, _ in victims])
        for rowid, why in victims:
            record = mem._record(rows[rowid])
            conn.execute(
                "INSERT INTO forgotten_memories (memory_id, kind, content, user_id, agent_id, reason, record, "
                "forgotten_at, forgotten_ts) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (record.id, record.kind, record.content, record.user, record.agent, why,
                 json.dumps(record.to_dict(), ensure_ascii=False), now.isoformat(), timestamp(now)))
            out.append(Forgotten(record, why, now))
        mem._delete(conn, list(rows), optimize=False)
    return out


def forgotten(mem: Pool, limit: int = 100, offset: int = 0) -> list[Forgotten]:
    """What the policy forgot, newest first."""
    from lossless.longterm.validate import check_limit

    check_limit(limit)
    check_limit(offset, "offset", 0)
    rows = mem.db.query("SELECT reason, record, forgotten_at FROM forgotten_memories "
                        "ORDER BY forgotten_ts DESC, rowid DESC LIMIT ? OFFSET ?", [limit, offset])
    return [Forgotten(_from_dict(json.loads(rec)), why, datetime.fromisoformat(at)) for why, rec, at in rows]


def _from_dict(data: dict[str, Any]) -> MemoryRecord:
    from lossless.longterm.records import MemoryRecord

    task = data.get("task") or {}
    return MemoryRecord(
        id=data["id"], kind=data["kind"], content=data["content"], importance=data["importance"],
        user=data["user"], agent=data["agent"], scope=data["scope"],
        created_at=datetime.fromisoformat(data["created_at"]),
        last_used_at=datetime.fromisoformat(data["last_used_at"]), use_count=data.get("use_count", 0),
        token_count=data.get("token_count", 0), metadata=data.get("metadata", {}),
        source_message_ids=tuple(data.get("source_message_ids", ())), conversation_id=data.get("conversation_id"),
        task_id=task.get("task_id"), task_type=task.get("task_type"), status=task.get("status"),
        result=task.get("result"), patterns=tuple(task.get("patterns", ())), errors=tuple(task.get("errors", ())),
    )


def restore(mem: Pool, memory_id: str) -> MemoryRecord:
    """Put back the record the policy forgot most recently under ``memory_id`` (its id,
    content, owners, importance, metadata, task fields and creation time), and drop it
    from the log. If the same content was added again meanwhile, that record is returned."""
    rows = mem.db.query("SELECT rowid, record FROM forgotten_memories WHERE memory_id = ? "
                        "ORDER BY forgotten_ts DESC, rowid DESC LIMIT 1", [memory_id])
    if not rows:
        raise NotFoundError(f"no forgotten memory with id {memory_id!r}")
    log_rowid, data = rows[0][0], json.loads(rows[0][1])
    old = _from_dict(data)
    task = data.get("task")
    record = mem.add(old.content, kind=old.kind, user=old.user, agent=old.agent, importance=old.importance,
                     metadata=old.metadata, source_message_ids=old.source_message_ids,
                     conversation_id=old.conversation_id, created_at=old.created_at, task=task)
    now = mem.clock()
    with mem.db.transaction() as conn:
        conn.execute("DELETE FROM forgotten_memories WHERE rowid = ?", (log_rowid,))
        # restoring is a use: the age rule does not take it again at the next poll
        conn.execute(f"UPDATE memories SET last_used_at = ?, last_used_ts = {mem.db.greatest}(last_used_ts, ?) "
                     "WHERE id = ?", (now.isoformat(), timestamp(now), record.id))
    return mem.get(record.id)
