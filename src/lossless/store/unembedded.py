"""Conversations an embedder owes vectors that no backlog row asks for.

A write queues its conversation for the worker, and a worker with an embedder cuts and
embeds it. A worker *without* one (the ``embeddings`` extra not installed yet,
``LOSSLESS_EMBEDDER=none``, another process) finishes the row with no vectors made, and a
new embedder finds every earlier conversation unembedded. So each embedder keeps a mark
in ``vector_checks``: the newest message rowid it has looked behind. While no message was
stored since, the check is two index reads (:func:`unchecked`); otherwise
:func:`queue_unembedded` looks only at the conversations written since (all of them the
first time), queues those whose messages are not all cut into units and embedded in its
index, and moves the mark, in one transaction after the look (a crash re-checks).

PostgreSQL hands out message rowids at insert, so one may commit after a higher one was
read: the look starts ``RECHECK`` rowids below the mark. :func:`count_unembedded` counts
the debt for ``stats`` and ``doctor``. The SQL is written once (:mod:`lossless.store.runner`).

QA-pair windows are cut and embedded only for a recaller that searches them
(``Config.recall_windows``): its debt also counts conversations with a window to cut
(:data:`WINDOWS_OWED`: four user messages past ``recall_progress.window_seq``, so three
closed pairs), and it keeps its own mark (:func:`check_key`), so a store switched to
windows has the windows of every earlier conversation cut by the worker's next look.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from typing import Any

from lossless.store.backlog import QUEUE_SQL
from lossless.store.runner import SQLRunner

__all__ = ["RECHECK", "WINDOWS_OWED", "check_key", "count_unembedded", "first_unembedded", "index_name", "owed_elsewhere", "queue_unembedded",
           "unchecked"]

RECHECK = 1000  # message rowids below the mark looked at again (a late PostgreSQL commit)
_WINDOWS_MARK = "#windows"  # the mark of a recaller that cuts windows: its model name and this

# a window can be cut past the conversation's window_seq: three closed pairs after it (a
# fourth user message closes the third; recall.units.window_units)
WINDOWS_OWED = (
    " OR (SELECT count(*) FROM (SELECT 1 FROM messages m WHERE m.conversation_id = c.id "
    "AND m.seq > coalesce(p.window_seq, 0) AND m.role = 'user' LIMIT 4) w) >= 4"
)

# conversations not all cut into units, or with units past what the index holds; {new}
# keeps it to conversations with messages past a rowid
_OWED = (
    "SELECT c.id, c.last_seq FROM conversations c "
    "LEFT JOIN recall_progress p ON p.conversation_id = c.id "
    "LEFT JOIN vector_progress v ON v.index_name = ? AND v.conversation_id = c.id "
    "WHERE (c.last_seq > coalesce(p.message_seq, 0) OR coalesce(v.unit_rowid, 0) < "
    "coalesce((SELECT max(u.rowid) FROM recall_units u WHERE u.conversation_id = c.id), 0){windows}){new}"
)
_SINCE = " AND c.id IN (SELECT m.conversation_id FROM messages m WHERE m.rowid > ?)"
_UNQUEUED = " AND NOT EXISTS (SELECT 1 FROM backlog b WHERE b.conversation_id = c.id)"
# the same conversations, with what a search needs to tell the part its vectors cover
_FIRST = _OWED.replace("{windows}", "").replace("SELECT c.id, c.last_seq", "SELECT c.id, c.last_seq, coalesce(p.message_seq, 0), "
                       "(SELECT min(u.first_seq) FROM recall_units u WHERE u.conversation_id = c.id "
                       "AND u.rowid > coalesce(v.unit_rowid, 0))", 1)


def index_name(provider: str, model: str, dim: int) -> str:
    """The vector index (table) of one embedder: a hash, so it is safe to splice into SQL."""
    digest = hashlib.sha256(f"{provider}\x00{model}\x00{dim}".encode()).hexdigest()[:12]
    return f"vec_{digest}"


def check_key(model: str, windows: bool) -> str:
    """The ``vector_checks.model`` of an embedder's mark: windows are owed only to a
    recaller that cuts them, so it looks behind its own mark."""
    return model + _WINDOWS_MARK if windows else model


def _owed_sql(new: str, windows: bool) -> str:
    return _OWED.format(new=new, windows=WINDOWS_OWED if windows else "")


def _marks(runner: SQLRunner, provider: str, model: str) -> tuple[int, int]:
    """(the newest message rowid, the mark of ``model``, a :func:`check_key`)."""
    top = int(runner.query("SELECT coalesce(max(rowid), 0) FROM messages")[0][0])
    rows = runner.query("SELECT message_rowid FROM vector_checks WHERE provider = ? AND model = ?", (provider, model))
    return top, int(rows[0][0]) if rows else 0


def unchecked(runner: SQLRunner, provider: str, model: str, *, windows: bool = False) -> bool:
    """Whether messages were stored since the embedder (cutting windows or not) last
    looked (two index reads)."""
    top, mark = _marks(runner, provider, check_key(model, windows))
    return top > mark


def queue_unembedded(runner: SQLRunner, index: str, provider: str, model: str, *,
                     windows: bool = False) -> list[str]:
    """Queue every conversation written since the embedder last looked whose messages are
    not all cut and embedded in ``index`` (with ``windows``: or that has a window to cut)
    and that no backlog row asks for yet, and move its mark; returns those queued."""
    model = check_key(model, windows)
    top, mark = _marks(runner, provider, model)
    if top <= mark:
        return []
    args: list[Any] = [index]
    new = ""
    if mark > RECHECK:
        new, args = _SINCE, [index, mark - RECHECK]
    owed = runner.query(_owed_sql(new + _UNQUEUED, windows), args)
    now = time.time()
    with runner.transaction() as conn:
        conn.executemany(QUEUE_SQL, [(cid, int(last), now, now) for cid, last in owed])
        lock = " FOR UPDATE" if runner.dialect == "postgresql" else ""
        row = conn.execute(f"SELECT message_rowid FROM vector_checks WHERE provider = ? AND model = ?{lock}",
                           (provider, model)).fetchone()
        if row is None:
            conn.execute("INSERT INTO vector_checks (provider, model, message_rowid) VALUES (?, ?, ?) "
                         "ON CONFLICT (provider, model) DO NOTHING", (provider, model, top))
        elif int(row[0]) == mark:  # not moved since the look began (owed_elsewhere may have lowered it)
            conn.execute("UPDATE vector_checks SET message_rowid = ? WHERE provider = ? AND model = ?",
                         (top, provider, model))
    return [cid for cid, _ in owed]


def owed_elsewhere(runner: SQLRunner, conversation_id: str) -> None:
    """A worker without an embedder finished the conversation: no vectors were made for
    its messages not cut into units, so every embedder's mark goes back below the first
    of them (its next look queues the conversation). Two index reads and, when some
    embedder looked past it, one write."""
    # the first message not cut has the lowest rowid of them: seqs are given in rowid order
    rows = runner.query(
        "SELECT m.rowid FROM messages m WHERE m.conversation_id = ? AND m.seq = 1 + coalesce("
        "(SELECT p.message_seq FROM recall_progress p WHERE p.conversation_id = ?), 0)",
        (conversation_id, conversation_id))
    if rows and rows[0][0] is not None:
        below = int(rows[0][0]) - 1
        runner.query("UPDATE vector_checks SET message_rowid = ? WHERE message_rowid > ?", (below, below))


def first_unembedded(runner: SQLRunner, index: str, conversation_ids: Sequence[str] | None) -> dict[str, int]:
    """Of these conversations (None: all), those whose messages are not all cut and
    embedded in ``index``, each with the first seq not covered (a message not cut yet, or
    the first message of a unit not embedded): one query, for a search to know what its
    vectors cannot answer."""
    args: list[Any] = [index]
    among = ""
    if conversation_ids is not None:
        if not conversation_ids:
            return {}
        clause, values = runner.in_list("c.id", list(conversation_ids))
        among, args = f" AND {clause}", [index, *values]
    out: dict[str, int] = {}
    for cid, last, cut, first in runner.query(_FIRST.format(new=among), args):
        starts = [int(first)] if first is not None else []
        if int(last) > int(cut):
            starts.append(int(cut) + 1)
        if starts:
            out[str(cid)] = min(starts)
    return out


def count_unembedded(runner: SQLRunner, index: str, *, windows: bool = False) -> dict[str, int]:
    """The vectors ``index`` is owed, store-wide: conversations (with ``windows``, also
    those with a window to cut), messages not cut into units or whose first unit is not
    embedded, and units not embedded (a scan of the conversations and the units not
    embedded: for ``stats`` and ``doctor``)."""
    conversations = len(runner.query(_owed_sql("", windows), (index,)))
    uncut = runner.query(
        "SELECT coalesce(sum(c.last_seq - coalesce(p.message_seq, 0)), 0) FROM conversations c "
        "LEFT JOIN recall_progress p ON p.conversation_id = c.id WHERE c.last_seq > coalesce(p.message_seq, 0)")
    messages, units = runner.query(
        "SELECT coalesce(sum(CASE WHEN u.kind = 'message' AND u.part = 0 THEN 1 ELSE 0 END), 0), count(*) "
        "FROM recall_units u LEFT JOIN vector_progress v ON v.index_name = ? AND v.conversation_id = u.conversation_id "
        "WHERE u.rowid > coalesce(v.unit_rowid, 0)", (index,))[0]
    return {"conversations": conversations, "messages": int(uncut[0][0]) + int(messages), "units": int(units)}
