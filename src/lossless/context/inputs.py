"""What one assembly works from: the conversation's history as the store holds it at
this call, and the sources it draws on besides."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lossless.context.recalled import RecalledMessages
from lossless.context.shown import MessageView
from lossless.context.summaries import SummaryPieces
from lossless.core.types import Message, Summary

if TYPE_CHECKING:
    from lossless.files import FileHit
    from lossless.longterm import MemoryRecord

__all__ = ["History", "Sources"]


@dataclass(frozen=True)
class History:
    """The conversation at this call: its frontier, the raw messages after it that
    assembly may show (``complete``: all of them), the span the worker has not reached
    (``backlog``), the pinned opening system messages (not in ``raw``) and the
    whole-conversation root, if compaction has written one."""

    cid: str
    frontier: list[Summary]
    raw: list[Message]
    complete: bool
    backlog: tuple[int, int] | None
    pinned: list[Message]
    root: Summary | None = None

    @property
    def covered(self) -> int:
        """The last seq the frontier covers (0: nothing summarized yet)."""
        return self.frontier[-1].last_seq if self.frontier else 0


@dataclass(frozen=True)
class Sources:
    """How one assembly shows messages and summaries, recalls older messages, and looks
    up long-term memory records and workspace file chunks for a question."""

    view: MessageView
    summaries: SummaryPieces
    recalled: RecalledMessages
    records_for: Callable[[str], list[MemoryRecord]]
    hits_for: Callable[[str], list[FileHit]]
