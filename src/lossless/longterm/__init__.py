"""Long-term memory: records that outlive a conversation (seed 003's long-term tier)."""

from lossless.longterm import schema as _schema  # noqa: F401  (registers its migrations with the store)
from lossless.longterm.forgetting import ForgetPolicy, Forgotten
from lossless.longterm.memories import Memories
from lossless.longterm.records import KINDS, SCOPES, TASK_STATUSES, MemoryKind, MemoryRecord, Scope

__all__ = ["KINDS", "SCOPES", "TASK_STATUSES", "ForgetPolicy", "Forgotten", "Memories", "MemoryKind", "MemoryRecord", "Scope"]
