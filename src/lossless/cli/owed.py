"""The background work a store owes, in the figures the CLI shows: units to embed (vectors
not made yet; a message not cut into units counts as one) and messages to compact. The
catch-up after ``import``, ``lossless stats`` and ``lossless doctor`` count them the same
way (:func:`lossless.compaction.worker.owed_parts`, one conversation at a time)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from lossless.compaction.worker import owed_parts
from lossless.engine import Memory

__all__ = ["Owed", "owed_by", "owed_text", "store_owed"]

_PAGE = 1000  # conversations listed per read


@dataclass
class Owed:
    """What the ``conversations`` looked at are owed. ``units_to_embed`` is None without
    an embedder (keyword recall only: no vectors are owed)."""

    units_to_embed: int | None = 0
    messages_to_compact: int = 0
    each: dict[str, int] = field(default_factory=dict)  # conversation -> both parts, those owed anything

    @property
    def total(self) -> int:
        return (self.units_to_embed or 0) + self.messages_to_compact

    @property
    def conversations(self) -> int:
        return len(self.each)

    def what(self) -> str:
        """The work in words: 'embedding 3,000 units for vector search and compacting
        200 messages'."""
        parts = []
        if self.units_to_embed:
            parts.append(f"embedding {self.units_to_embed:,} unit{_s(self.units_to_embed)} for vector search")
        if self.messages_to_compact:
            parts.append(f"compacting {self.messages_to_compact:,} message{_s(self.messages_to_compact)}")
        return " and ".join(parts) or "nothing"

    def label(self) -> str:
        """A short name for a progress line."""
        if self.units_to_embed and self.messages_to_compact:
            return "embedding and compacting"
        return "compacting" if self.messages_to_compact else "embedding"

    def to_json(self) -> dict[str, int | None]:
        return {"conversations": self.conversations, "units_to_embed": self.units_to_embed,
                "messages_to_compact": self.messages_to_compact}


def owed_by(memory: Memory, conversations: Iterable[str]) -> Owed:
    """What each of ``conversations`` is owed (about 40 µs a conversation on SQLite)."""
    owed = Owed(units_to_embed=0 if memory.recaller.embedder is not None else None)
    for cid in conversations:
        embed, compact = owed_parts(memory, cid)
        if embed or compact:
            owed.each[cid] = embed + compact
            owed.messages_to_compact += compact
            if owed.units_to_embed is not None:
                owed.units_to_embed += embed
    return owed


def store_owed(memory: Memory) -> Owed:
    """What every conversation of the store is owed, queued for a worker or not."""
    return owed_by(memory, _every_conversation(memory))


def _every_conversation(memory: Memory) -> Iterator[str]:
    offset = 0
    while batch := memory.conversations(limit=_PAGE, offset=offset):
        offset += len(batch)
        yield from (info.id for info in batch)
        if len(batch) < _PAGE:
            break


def owed_text(figures: dict[str, int | None]) -> str:
    """:meth:`Owed.to_json`'s figures as one line (``stats``)."""
    units, compact, convs = figures["units_to_embed"], figures["messages_to_compact"] or 0, figures["conversations"] or 0
    vectors = ("no embedder (keyword recall only)" if units is None
               else f"{units:,} unit{_s(units)} to embed (vectors not made yet)")
    return f"{vectors}, {compact:,} message{_s(compact)} to compact, in {convs:,} conversation{_s(convs)}"


def _s(n: int) -> str:
    return "" if n == 1 else "s"
