"""What the embedding model itself is owed, for the figures a user reads (the catch-up line
after ``lossless import``, ``--no-wait``'s note, ``stats`` and ``doctor``).

The worker's own bookkeeping counts every message not cut into units and every unit past
the index's mark (:meth:`Recaller.uncut`, :meth:`Recaller.unembedded`): it has to look at
each of them. But text in a language the model does not read (Chinese for the English
default) is passed without the model (:mod:`lossless.embed.languages`), so telling a user
"embedding 600 units" for a Chinese chat promises work, and an ETA, that never happens.
:class:`ModelDebt` takes those out of the counts. Each text is judged once: a conversation
keeps how far its messages and units were judged and which of them the model does not
read (for English text, none), so a progress line asking twice a second costs one indexed
read per conversation beyond the counts it already made.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from lossless.embed.languages import ScriptReader
from lossless.store.runner import SQLRunner

__all__ = ["Debt", "ModelDebt"]


@dataclass(frozen=True, slots=True)
class Debt:
    """One conversation's debt to the model: messages not cut into units yet whose text it
    reads (each will be at least one unit), units cut but not embedded whose text it reads,
    and how many of the units it does not read open a message (for "messages owed")."""

    uncut: int = 0
    units: int = 0
    unread_first_parts: int = 0
    first_parts: int = 0  # of the units it reads, those that open a message (when asked for)

    @property
    def total(self) -> int:
        """In units, a message not cut counted as one (what progress lines show)."""
        return self.uncut + self.units


@dataclass
class _Judged:
    seq: int = 0  # messages judged through this seq
    rowid: int = 0  # units judged through this rowid
    unread_seqs: set[int] = field(default_factory=set)
    unread_units: dict[int, bool] = field(default_factory=dict)  # rowid -> it opens a message


class ModelDebt:
    """Takes the text the model does not read out of one recaller's counts (thread-safe)."""

    def __init__(self, runner: SQLRunner, reader: ScriptReader) -> None:
        self.sql = runner
        self.reader = reader
        self._lock = threading.Lock()
        self._judged: dict[str, _Judged] = {}

    def of(self, conversation_id: str, *, last_seq: int, cut_through: int, uncut: int,
           indexed_through: int, pending: int) -> Debt:
        """The debt of the ``uncut`` messages past seq ``cut_through`` (up to ``last_seq``)
        and the ``pending`` units past rowid ``indexed_through``: the counts the recall
        tables give, less what the model does not read."""
        with self._lock:
            judged = self._judged.setdefault(conversation_id, _Judged())
            start = max(judged.seq, cut_through)
            if last_seq > start:
                rows = self.sql.query("SELECT seq, content FROM messages WHERE conversation_id = ? AND seq > ? "
                                      "AND seq <= ?", (conversation_id, start, last_seq))
                judged.unread_seqs.update(int(seq) for seq, text in rows if not self.reader.reads(text or ""))
                judged.seq = last_seq
            rows = self.sql.query("SELECT rowid, text, kind, part FROM recall_units WHERE conversation_id = ? "
                                  "AND rowid > ?", (conversation_id, max(judged.rowid, indexed_through)))
            for rowid, text, kind, part in rows:
                judged.rowid = max(judged.rowid, int(rowid))
                if not self.reader.reads(text or "", labels=True):
                    judged.unread_units[int(rowid)] = kind == "message" and int(part) == 0
            # what is cut or passed since is no longer owed, read or not
            judged.unread_seqs = {s for s in judged.unread_seqs if cut_through < s <= last_seq}
            judged.unread_units = {r: first for r, first in judged.unread_units.items() if r > indexed_through}
            debt = Debt(uncut=max(0, uncut - len(judged.unread_seqs)),
                        units=max(0, pending - len(judged.unread_units)),
                        unread_first_parts=sum(judged.unread_units.values()))
            if not (judged.unread_seqs or judged.unread_units or uncut or pending):
                del self._judged[conversation_id]  # caught up: nothing to keep
        return debt
