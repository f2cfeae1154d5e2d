"""The task a summary's messages belong to, for the hierarchical strategy (seed 003:
"活跃任务保留摘要，已完成任务保留关键点": summaries of the active task, key points of
completed ones).

Tasks are spans of a conversation (:mod:`lossless.longterm.tasks`): the last task that
ended ends at the ``task_bounds`` row's seq, and each one began where the one before it
ended, so everything up to that seq belongs to a completed task. After it comes the
current task, which is *active* once the turn loop stores messages in it (each carries
the task's id in ``metadata["task_id"]``). A summary is

- ``active`` when it covers a message of the active task (it stays whole),
- ``completed`` when it covers messages of completed tasks only (it is shown as key points),
- ``None`` when it covers neither: history no task ever claimed (plain ``conv.add``
  messages of a conversation that never ended a task), which keeps the age layering.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from lossless.core.types import Summary
from lossless.store.base import Store

__all__ = ["TaskSpans", "TaskStatus"]

TaskStatus = Literal["active", "completed"]
# Whether a span holds a message the turn loop stamped with its task: one indexed range
# scan (UNIQUE (conversation_id, seq)) that stops at the first, rather than reading the
# messages back; a JSON null counts as no task on both (json_extract / ->> give SQL NULL).
_TAGGED = (
    "SELECT 1 FROM messages WHERE conversation_id = ? AND seq BETWEEN ? AND ? "
    "AND json_extract(metadata, '$.task_id') IS NOT NULL LIMIT 1",
    "SELECT 1 FROM messages WHERE conversation_id = %s AND seq BETWEEN %s AND %s "
    "AND (metadata::jsonb ->> 'task_id') IS NOT NULL LIMIT 1",
)


class TaskSpans:
    """Task status of summaries for one assembly. ``task_start`` gives a conversation's
    current task's first seq (``Memories.task_start``; None: no task records, so no tasks).
    ``tagged`` remembers, across calls, whether a span holds a message of a task (messages
    are immutable, so the answer for a span never changes)."""

    def __init__(self, store: Store, task_start: Callable[[str], int] | None,
                 tagged: dict[tuple[str, int, int], bool]) -> None:
        self.store = store
        self.task_start = task_start
        self.tagged = tagged
        self._ended: dict[str, int] = {}

    def ended(self, cid: str) -> int:
        """The last seq of the conversation's last completed task (0: none ended yet)."""
        if self.task_start is None:
            return 0
        if cid not in self._ended:
            self._ended[cid] = self.task_start(cid) - 1
        return self._ended[cid]

    def status(self, node: Summary) -> TaskStatus | None:
        """The task status of the messages ``node`` covers (see the module docstring)."""
        ended = self.ended(node.conversation_id)
        if node.last_seq > ended and self._has_task_message(node.conversation_id, max(node.first_seq, ended + 1),
                                                            node.last_seq):
            return "active"
        return "completed" if node.first_seq <= ended else None

    def _has_task_message(self, cid: str, lo: int, hi: int) -> bool:
        key = (cid, lo, hi)
        found = self.tagged.get(key)
        if found is None:
            found = bool(self.store.query(_TAGGED[self.store.dialect == "postgresql"], (cid, lo, hi)))
            if len(self.tagged) >= 4096:
                self.tagged.clear()
            self.tagged[key] = found
        return found
