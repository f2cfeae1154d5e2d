"""Distilling a conversation into long-term memory: its durable items become records of
its user/agent scope, and its current task gets (or updates) its task record
(:mod:`lossless.longterm.tasks`). Run by ``conv.end()``, the turn loop's ``end_task`` and,
before each leaf summary, the memory flush compaction calls."""

from __future__ import annotations

import logging
from dataclasses import replace

from lossless.core.tokens import TokenCounter
from lossless.core.types import Message
from lossless.longterm import tasks
from lossless.longterm.memories import Memories
from lossless.longterm.records import MemoryRecord, conversation_owners
from lossless.store.base import Store
from lossless.summarize.base import Summarizer

__all__ = ["Distiller"]

log = logging.getLogger("lossless")


class Distiller:
    """Distils one store's conversations into its long-term :class:`Memories`."""

    def __init__(self, store: Store, memories: Memories, counter: TokenCounter) -> None:
        self.store = store
        self.memories = memories
        self.counter = counter

    def distill(self, conversation_id: str, upto_seq: int | None = None,
                summarizer: Summarizer | None = None, *, end_task: bool = False) -> list[MemoryRecord]:
        """Distil the conversation's messages not distilled yet (up to ``upto_seq``) into
        long-term records of its user/agent scope, and write (or merge into) the record
        of its current task: ``in_progress``, or with ``end_task`` ended (``completed``
        unless a model says otherwise), the next task then beginning after it. A
        conversation with neither user nor agent is not distilled (its records would be
        global, seen by every other conversation); with ``end_task`` its task still ends,
        so the next messages are the next task."""
        user, agent = conversation_owners(self.store, conversation_id)
        start = self.store.flushed_seq(conversation_id) + 1
        last = self.store.last_seq(conversation_id) if upto_seq is None else upto_seq
        if user is None and agent is None:
            if end_task and last >= self.memories.task_start(conversation_id):
                self.memories.end_task_at(conversation_id, last)  # no record (it would be global), but the task ended
            return []
        first = self.memories.task_start(conversation_id)
        pending = self._task_draft(conversation_id, first, start, last, end_task)
        records: list[MemoryRecord] = []
        if last >= start:
            # the task record holds its request: the rules' task item of the same words is not stored again
            request = self._request_held(conversation_id, first, pending, user, agent)
            records = self.memories.distill(self.store.get_messages(conversation_id, start, last), user=user,
                                            agent=agent, conversation_id=conversation_id, summarizer=summarizer,
                                            task_request=request)
        task = self._write_task(conversation_id, first, last, pending, user, agent,
                                summarizer if end_task else None, end_task)
        if last >= start:
            self.store.set_flushed_seq(conversation_id, last)
        return [*records, *([task] if task is not None else [])]

    def flush(self, conversation_id: str, chunk: list[Message]) -> None:
        """Before compaction summarizes ``chunk``: keep its durable items as records (the
        compactor's ``before_leaf``). A failure is logged: it must not stop compaction,
        and the messages stay stored."""
        try:
            self.distill(conversation_id, chunk[-1].seq)
        except Exception:
            log.exception("lossless: %s: the long-term memory flush failed", conversation_id)

    def _task_draft(self, cid: str, first: int, start: int, last: int,
                    ended: bool) -> tuple[tasks.TaskDraft, list[Message]] | None:
        """The extractive draft of the current task (which begins at ``first``) up to
        ``last``, with the messages it was drawn from: on its end all of them (the type
        comes from its first request), before that those not written yet. None when there
        is nothing to record (see :func:`tasks.draft`)."""
        if last < first or (not ended and last < start):
            return None
        msgs = self.store.get_messages(cid, first if ended else max(first, start), last)
        draft = tasks.draft(msgs, "completed" if ended else "in_progress")
        if draft is None:
            return None
        return replace(draft, first_seq=first), msgs  # the task's id is its first seq, whatever this write saw

    def _request_held(self, cid: str, first: int, pending: tuple[tasks.TaskDraft, list[Message]] | None,
                      user: str | None, agent: str | None) -> str | None:
        """The request the task record will hold: an earlier write's (a merge keeps the
        content), else this draft's."""
        if pending is None:
            return None
        earlier = self.memories.find_task(tasks.task_id_for(cid, first), user=user, agent=agent)
        return earlier.content if earlier is not None else pending[0].request

    def _write_task(self, cid: str, first: int, last: int, pending: tuple[tasks.TaskDraft, list[Message]] | None,
                    user: str | None, agent: str | None, summarizer: Summarizer | None,
                    ended: bool) -> MemoryRecord | None:
        """Write (or merge into) the task record from ``pending``; on the task's end, end it
        whether or not there was anything to record."""
        record = None
        if pending is not None:
            draft, msgs = pending
            if summarizer is not None:
                draft = tasks.llm_draft(msgs, draft, summarizer, self.counter, cid)
            record = self.memories.record_task(draft, conversation_id=cid, user=user, agent=agent)
        if ended and last >= first:
            self.memories.end_task_at(cid, last)
        return record
