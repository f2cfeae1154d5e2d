"""What the embedding model itself is owed, for the figures a user reads (the catch-up line
after ``lossless import``, ``--no-wait``'s note, ``stats`` and ``doctor``).

The worker's own bookkeeping counts every message not cut into units and every unit past
the index's mark (:meth:`Recaller.uncut`, :meth:`Recaller.unembedded`): it has to look at
each of them. But text in a language the model does not read (Chinese for the English
default) is passed without the model (:mod:`lossless.embed.languages`), so telling a user
"embedding 600 units" for a Chinese chat promises work, and an ETA, that never happens.
:class:`ModelDebt` counts only what the model reads: an English store costs nothing more
(a model that reads every language, or no debt, is answered from the counts alone), and a
mixed one reads each owed text once (the verdicts are kept by message seq and unit rowid,
so a progress line asking twice a second does not read them again).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from lossless.embed.languages import ScriptReader
from lossless.store.runner import SQLRunner

__all__ = ["Debt", "ModelDebt"]

_READ_AT_ONCE = 2000  # texts read per query when the verdicts are first made


@dataclass(frozen=True, slots=True)
class Debt:
    """One conversation's debt to the model: messages not cut into units yet whose text it
    reads (each will be at least one unit), and units cut but not embedded whose text it
    reads (``first_parts``: those that open a message, for "messages owed")."""

    uncut: int = 0
    units: int = 0
    first_parts: int = 0

    @property
    def total(self) -> int:
        """In units, a message not cut counted as one (what progress lines show)."""
        return self.uncut + self.units


class ModelDebt:
    """Counts :class:`Debt` for one recaller's store and reader (thread-safe)."""

    def __init__(self, runner: SQLRunner, reader: ScriptReader) -> None:
        self.sql = runner
        self.reader = reader
        self._lock = threading.Lock()
        # conversation -> message seq -> whether the model reads its text
        self._messages: dict[str, dict[int, tuple[bool, ...]]] = {}
        # conversation -> unit rowid -> (the model reads it, it opens a message)
        self._units: dict[str, dict[int, tuple[bool, ...]]] = {}

    def of(self, conversation_id: str, cut_through: int, indexed_through: int) -> Debt:
        """The debt of messages past seq ``cut_through`` and units past rowid
        ``indexed_through`` (the recall tables' marks)."""
        with self._lock:
            seqs = self._verdicts(
                self._messages, conversation_id,
                "SELECT seq FROM messages WHERE conversation_id = ? AND seq > ? ORDER BY seq", cut_through,
                "SELECT seq, content FROM messages WHERE conversation_id = ? AND seq >= ? AND seq <= ? ORDER BY seq",
                lambda text: (self.reader.reads(text or ""),))
            units = self._verdicts(
                self._units, conversation_id,
                "SELECT rowid FROM recall_units WHERE conversation_id = ? AND rowid > ? ORDER BY rowid", indexed_through,
                "SELECT rowid, text, kind, part FROM recall_units WHERE conversation_id = ? AND rowid >= ? "
                "AND rowid <= ? ORDER BY rowid",
                lambda text, kind, part: (self.reader.reads(text or "", labels=True), kind == "message" and part == 0))
        return Debt(uncut=sum(1 for v in seqs if v[0]), units=sum(1 for v in units if v[0]),
                    first_parts=sum(1 for v in units if v[0] and v[1]))

    def _verdicts(self, memo: dict[str, dict[int, tuple[bool, ...]]], cid: str, ids_sql: str, after: int,
                  text_sql: str, judge: Callable[..., tuple[bool, ...]]) -> list[tuple[bool, ...]]:
        """The verdicts of the ids past ``after``: those not judged yet are read and
        judged; those no longer owed (cut, embedded, erased) are forgotten."""
        ids = [int(r[0]) for r in self.sql.query(ids_sql, (cid, after))]
        known = memo.get(cid, {})
        fresh = [i for i in ids if i not in known]
        kept = {i: known[i] for i in ids if i in known}
        for start in range(0, len(fresh), _READ_AT_ONCE):
            part: Sequence[int] = fresh[start:start + _READ_AT_ONCE]
            wanted = set(part)
            for row in self.sql.query(text_sql, (cid, part[0], part[-1])):
                if int(row[0]) in wanted:
                    kept[int(row[0])] = judge(*row[1:])
        if kept:
            memo[cid] = kept
        else:
            memo.pop(cid, None)
        return [kept[i] for i in ids if i in kept]
