"""``verify`` for both stores: three reads per conversation (its messages, its summaries,
their sources), checked by :func:`lossless.core.dag.verify`. The SQL is plain and
written once with ``?`` placeholders; the caller passes a query function that runs it
(PostgreSQL's rewrites the placeholders, see :func:`lossless.store.runner.qmark`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from lossless.core.dag import StoredNode, verify
from lossless.core.erasure import ERASED
from lossless.core.types import SourceRef
from lossless.store.rows import VERIFY_MESSAGE_COLUMNS, stored_message_from_row

__all__ = ["INTEGRITY", "sqlite_integrity", "verify_conversations"]

Query = Callable[[str, Sequence[Any]], list[tuple[Any, ...]]]


def verify_conversations(query: Query, conversation_id: str | None = None) -> list[str]:
    """Every broken DAG invariant of one conversation (or of all), in words."""
    if conversation_id is not None:
        found = query("SELECT last_seq FROM conversations WHERE id = ?", (conversation_id,))
        convs = [(conversation_id, int(found[0][0]) if found else 0)]
    else:
        convs = [(r[0], int(r[1])) for r in query("SELECT id, last_seq FROM conversations ORDER BY id", ())]
    problems: list[str] = []
    for cid, last in convs:
        messages = [stored_message_from_row(r) for r in query(
            f"SELECT {VERIFY_MESSAGE_COLUMNS} FROM messages WHERE conversation_id = ? ORDER BY seq", (cid,))]
        # deepest first, then in conversation order: the order problems are reported in
        nodes = [StoredNode(id=r[0], depth=int(r[1]), first_seq=int(r[2]), last_seq=int(r[3]), parent_id=r[4])
                 for r in query("SELECT id, depth, first_seq, last_seq, parent_id FROM summaries "
                                "WHERE conversation_id = ? ORDER BY depth DESC, first_seq, rowid", (cid,))]
        sources: dict[str, list[SourceRef]] = {}
        for sid, kind, source in query(
            "SELECT s.summary_id, s.source_kind, s.source_id FROM summary_sources s JOIN summaries m "
            "ON m.id = s.summary_id WHERE m.conversation_id = ? ORDER BY s.summary_id, s.ord", (cid,)
        ):
            sources.setdefault(sid, []).append(SourceRef(kind=kind, id=source))
        problems += verify(cid, last, messages, nodes, sources)
        # an erased message reads ERASED and hashes as its tombstone says (the tombstone
        # is the audit record of the one change a message may undergo)
        problems += [f"{cid}: message #{seq} has a tombstone but is not erased as it records"
                     for (seq,) in query("SELECT t.seq FROM tombstones t JOIN messages m ON m.id = t.message_id "
                                         "WHERE t.conversation_id = ? AND (m.content IS NULL OR m.content <> ? "
                                         "OR m.content_hash <> t.content_hash) ORDER BY t.seq", (cid, ERASED))]
    return problems


INTEGRITY = "integrity_check: "  # what begins each problem of the file itself in verify's list


def sqlite_integrity(query: Query) -> list[str]:
    """The problems SQLite's ``PRAGMA integrity_check`` finds in the file, one a line
    (none when the file is sound; SQLite stops at 100). Its FTS5 check reads each full-text
    index's structure as this connection last loaded it: after another connection (the
    worker's) merged segments, it reports blobs that have moved as corruption. A query on
    each index reloads the structure; only a report that survives that is real."""
    found = _integrity_lines(query)
    if not any("fts5" in line for line in found):
        return found
    for (table,) in query("SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE '%USING fts5%'", ()):
        query(f'SELECT rowid FROM "{table}" WHERE "{table}" MATCH \'"lossless_probe"\' LIMIT 1', ())
    return _integrity_lines(query)


def _integrity_lines(query: Query) -> list[str]:
    # a row may hold several lines; "*** in database main ***" only heads them
    lines = [line for (row,) in query("PRAGMA integrity_check", ()) for line in str(row).splitlines()]
    return [line for line in lines if line.strip() and line != "ok" and not line.startswith("*** in database")]
