"""Long-term memory: records that outlive a conversation (seed 003's long-term tier)."""

from lossless.memory.records import KINDS, SCOPES, TASK_STATUSES, MemoryKind, MemoryRecord, Scope
from lossless.memory.store import Memories

__all__ = ["KINDS", "SCOPES", "TASK_STATUSES", "Memories", "MemoryKind", "MemoryRecord", "Scope"]
