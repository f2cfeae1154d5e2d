"""What a question brings in from outside the conversation: long-term memory records of
its user and agent, and chunks of the workspace files it names."""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING

from lossless.context.pieces import (
    FILES_FOOTER,
    FILES_HEADER,
    LONG_TERM_HEADER,
    MIN_ABRIDGED,
    Piece,
)
from lossless.context.shown import MessageView
from lossless.core.config import Config
from lossless.core.errors import LosslessError, ValidationError
from lossless.core.render import format_time, neutralise_tags
from lossless.core.textfit import fit_text
from lossless.core.types import ContextItem
from lossless.longterm.records import conversation_owners
from lossless.longterm.validate import check_owner
from lossless.store.base import Store

if TYPE_CHECKING:
    from lossless.files import FileHit, Files
    from lossless.longterm import Memories, MemoryRecord

__all__ = ["file_hits", "file_pieces", "files_block_cost", "memory_pieces", "memory_records", "record_text"]

log = logging.getLogger("lossless")
_CONTEXT_TAG = re.compile(r"<(/?)(context)\b", re.IGNORECASE)


def memory_records(store: Store, memories: Memories | None, config: Config, cid: str, query: str) -> list[MemoryRecord]:
    """Long-term records of this conversation's user/agent scope (and global ones)
    that match the query; records distilled from this very conversation are left to
    recall, which shows their messages verbatim."""
    if memories is None or config.memory_share <= 0:
        return []
    owners = conversation_owners(store, cid)
    # a server tenant's conversation (its owners are namespaced "@tenant…"): its "global"
    # is the tenant-wide owner; records without any owner (added outside the server)
    # belong to the operator and are never shown to a tenant (told from the owners as
    # stored, before an unusable one is dropped)
    tenant = any(isinstance(v, str) and v.startswith("@") for v in owners)
    user, agent = (owner if _usable(owner, cid) else None for owner in owners)
    found = memories.search(query, user=user, agent=agent, limit=8, include_global=not tenant)
    return [r for r in found if r.conversation_id != cid]


def _usable(owner: str | None, cid: str) -> bool:
    """Whether ``owner`` (from a conversation's metadata) can own records: one stored before
    owners were checked (``""``) owns none, and is searched as no owner, not as an error."""
    try:
        check_owner(owner, "owner")
    except ValidationError as exc:
        log.warning("conversation %r: %s; its memories are searched without that owner", cid, exc)
        return False
    return True


def file_hits(files: Files | None, query: str, config: Config | None = None) -> list[FileHit]:
    """Chunks of indexed workspace files the message asks for (at most
    ``config.files_top_k``): the files it names (a path, or a file name only one indexed
    file has), what a ``/context …`` line asks, or, when it refers to earlier documents
    without a path ("the API doc I shared", "参考之前的 API 文档"), the chunks most like
    it within the thresholds (seed 004). Files named come first and need no threshold:
    their best chunks for the message, or their first ones."""
    if files is None:
        return []
    cfg = config if config is not None else Config()
    k = cfg.files_top_k
    try:
        request = files.context_request(query)
        if request is not None:
            named = files.mentioned(request) if request else []
            if named:
                return files.for_path(named[0], None, limit=k)
            return _similar(files, request, cfg) if request else []
        named = files.mentioned(query)[:k]
        if named:
            hits: list[FileHit] = []
            for path in named:
                hits += files.for_path(path, query, limit=max(1, k // len(named)))
            return hits[:k]
        if cfg.files_reference_phrases:
            wanted = files.document_reference(query)
            if wanted:
                return _similar(files, wanted, cfg)
        return []
    except LosslessError as exc:  # an index problem must not cost the context
        log.warning("lossless: file context skipped: %s", exc)
        return []


def _similar(files: Files, query: str, cfg: Config) -> list[FileHit]:
    return files.search(query, limit=cfg.files_top_k, max_distance=cfg.files_max_distance,
                        min_relevance=cfg.files_min_relevance)


def files_block_cost(view: MessageView) -> int:
    """What the <context> block's opening and closing lines cost."""
    return view.piece_cost(FILES_HEADER) + view.counter.count("\n" + FILES_FOOTER)


def file_pieces(view: MessageView, hits: list[FileHit], room: int) -> list[Piece]:
    """File chunks within ``room`` (the block's opening and closing lines included), best
    first, the last cut where it does not fit whole."""
    pieces: list[Piece] = []
    spent = files_block_cost(view)
    for hit in hits:
        head = f"[{hit.path}:{hit.start_line}-{hit.end_line}]"
        left = room - spent - view.piece_cost(head) - 4
        if left < MIN_ABRIDGED:
            break
        body = _CONTEXT_TAG.sub(lambda m: f"&lt;{m.group(1)}{m.group(2)}", neutralise_tags(hit.text))
        if view.counter.count(body) > left:
            body = fit_text(body, left, view.counter) + "\n…"
        text = f"{head}\n{body}"
        cost = view.piece_cost(text)
        if spent + cost > room:
            continue
        pieces.append(Piece(text, cost, ContextItem("file", f"{hit.path}:{hit.start_line}", cost, 0, 0)))
        spent += cost
    return pieces


def record_text(record: MemoryRecord) -> str:
    """What the model reads of a record: its content; a task record (seed 003) also its
    type, status, result, patterns and errors."""
    if record.kind != "task" or record.status is None:
        return record.content
    parts = [f"{record.task_type or 'task'} ({record.status}): {record.content}"]
    if record.result:
        parts.append(f"result: {record.result}")
    if record.patterns:
        parts.append("patterns: " + "; ".join(record.patterns))
    if record.errors:
        parts.append("errors: " + "; ".join(record.errors))
    return " — ".join(parts)


def memory_pieces(view: MessageView, records: list[MemoryRecord], room: int) -> list[Piece]:
    """Dated memory records within ``room`` (their header's cost included), the last cut to fit."""
    pieces: list[Piece] = []
    spent = view.piece_cost(LONG_TERM_HEADER)
    for record in records:
        when = format_time(record.created_at, view.zone)[:10]
        body = neutralise_tags(record_text(record))
        text = f"[{record.id} · {record.kind} · {when}] {body}"
        cost = view.line_cost(text)  # records are lines of one block
        if spent + cost > room:
            short = fit_text(body, room - spent - 24, view.counter) if room - spent > 64 else ""
            if not short:
                continue
            text = f"[{record.id} · {record.kind} · {when}] {short} …"
            cost = view.line_cost(text)
            if spent + cost > room:
                continue
        pieces.append(Piece(text, cost, ContextItem("memory", record.id, cost, 0, 0)))
        spent += cost
    return pieces
