"""Planning an erase: what every derived place becomes once messages are erased.

:func:`lossless.store.erase.erase` writes a plan in one transaction; this module makes it
from the conversation as stored, holding its compaction lease so no summary over the
erased messages is written meanwhile:

* each message as erased (:mod:`lossless.core.erasure`), with its tombstone;
* each summary whose span holds an erased message — its leaf and every ancestor — written
  again, bottom up, by the deterministic extractive summarizer from its sources as they
  are after the erase, under a note saying so. The model's text cannot be kept (it may
  quote or paraphrase the erased text) and the model is not asked inside an erase; the
  summary is marked as a fallback, so ``lossless compact --redo-fallbacks`` has the model
  write it again from the erased sources. Its earlier texts are dropped;
* each retrieval unit that quoted an erased message cut again from the erased text.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from lossless.compaction.engine import FALLBACK_EXTRACTIVE, Busy, _message_item, _summary_item
from lossless.core.erasure import (
    ERASED,
    erased_hash,
    erased_tool_calls,
    summary_note,
    tombstone_id,
    validate_erase,
)
from lossless.core.errors import CompactionBusyError, NotFoundError, ValidationError
from lossless.core.render import content_text
from lossless.core.types import Message, Summary
from lossless.longterm.records import OWNER_KEYS
from lossless.recall.units import message_units, window_units
from lossless.store.erase import (
    ErasedMessage,
    ErasePlan,
    StalePlan,
    SummaryRewrite,
    Tombstone,
    erase,
    tombstones,
    units_cut,
)
from lossless.store.runner import sql_runner
from lossless.store.scrub import scrub
from lossless.summarize.base import SummaryRequest

if TYPE_CHECKING:
    from lossless.compaction.base import EraseEngine
    from lossless.compaction.engine import Compactor

__all__ = ["check_targets", "erase_messages", "plan_erase"]

_PLAN_ATTEMPTS = 8  # a plan goes stale only if units are cut in the milliseconds before it is written


def plan_erase(compactor: Compactor, conversation_id: str, targets: Sequence[str | int] | None, *,
               reason: str, by: str) -> tuple[ErasePlan, list[Tombstone]]:
    """The plan erasing ``targets`` (message ids or seqs; None: every message) of a
    conversation, and the tombstones of those already erased (left as they are)."""
    store = compactor.store
    messages = store.get_messages(conversation_id)
    by_key: dict[str | int, Message] = {m.id: m for m in messages} | {m.seq: m for m in messages}
    if targets is None:
        chosen = messages
    else:
        missing = [t for t in targets if t not in by_key or isinstance(t, bool)]
        if missing:
            raise NotFoundError(f"no message {missing[0]!r} in conversation {conversation_id!r}")
        chosen = sorted({by_key[t].seq: by_key[t] for t in targets}.values(), key=lambda m: m.seq)
    done = {t.message_id: t for t in tombstones(store, conversation_id)}
    now = datetime.now(UTC).isoformat()
    erased: dict[int, Message] = {}
    plan = ErasePlan(conversation_id, [], metadata=_metadata_after(store, conversation_id) if targets is None else None)
    for m in chosen:
        if m.id in done:
            continue
        calls = erased_tool_calls(m.tool_calls)
        # the name and metadata go with the text: who said it, and what was attached to it
        new = dataclasses.replace(m, content=ERASED, tool_calls=tuple(calls), name=None, metadata={},
                                  token_count=compactor.counter.count(content_text(ERASED, calls)))
        erased[m.seq] = new
        tomb = Tombstone(tombstone_id(m.id, now), conversation_id, m.id, m.seq, reason, by, now)
        plan.messages.append(ErasedMessage(tomb, None, calls, new.token_count,
                                           erased_hash(m.role, None, calls, m.tool_call_id), ERASED))
    if erased:
        after = [erased.get(m.seq, m) for m in messages]
        plan.summaries = _summaries(compactor, conversation_id, after, set(erased))
        plan.units_cut = units_cut(sql_runner(store), conversation_id)  # before the units are read
        plan.drop_units, plan.add_units = _units(compactor, conversation_id, after, erased)
    return plan, [done[m.id] for m in chosen if m.id in done]


def _summaries(compactor: Compactor, cid: str, after: list[Message], seqs: set[int]) -> list[SummaryRewrite]:
    """The summaries over an erased seq, written again bottom up (a parent from its
    children's new texts)."""
    hit = [s for s in compactor.store.summaries(cid) if any(s.first_seq <= q <= s.last_seq for q in seqs)]
    hit.sort(key=lambda s: (s.depth, s.first_seq))
    new_text: dict[str, Summary] = {}
    out: list[SummaryRewrite] = []
    for node in hit:
        if node.depth == 0:
            items = tuple(_message_item(m) for m in after[node.first_seq - 1 : node.last_seq])
        else:
            kids = [new_text.get(src.id) or compactor.store.get_summary(src.id) for src in node.sources]
            items = tuple(_summary_item(k) for k in kids)
        target = max(1, node.token_count)
        text = compactor.fallback.summarize(SummaryRequest(items, node.depth, target, compactor.counter,
                                                           "normal", None, cid,
                                                           compactor.config.timezone)).text.strip()
        text = f"{summary_note(node.first_seq, node.last_seq)}\n{text}".strip()
        tokens = compactor.counter.count(text)
        meta: dict[str, Any] = {"trigger": "erase", "fallback_level": FALLBACK_EXTRACTIVE,
                                "fallback_reason": "rewritten without erased messages; redo with the model",
                                "erased_seqs": sorted(q for q in seqs if node.first_seq <= q <= node.last_seq),
                                "provider": compactor.fallback.name, "output_tokens": tokens}
        out.append(SummaryRewrite(node.id, text, tokens, f"{compactor.fallback.name}-fallback", FALLBACK_EXTRACTIVE,
                                  meta))
        new_text[node.id] = dataclasses.replace(node, content=text, token_count=tokens)
    return out


def _units(compactor: Compactor, cid: str, after: list[Message],
           erased: dict[int, Message]) -> tuple[list[int], list[Any]]:
    """The retrieval units quoting an erased message (rowids) and their replacements."""
    ids = {m.id for m in erased.values()}
    rows = sql_runner(compactor.store).query(
        "SELECT rowid, kind, first_seq, last_seq, message_ids FROM recall_units WHERE conversation_id = ? "
        "AND last_seq >= ? AND first_seq <= ?", (cid, min(erased), max(erased)))
    drop: list[int] = []
    add: list[Any] = []
    remade: set[tuple[str, int, int]] = set()
    for rowid, kind, first, last, message_ids in rows:
        if not ids.intersection(json.loads(message_ids)):
            continue
        drop.append(int(rowid))
        key = (kind, int(first), int(last))
        if key in remade:
            continue  # another part of the same message
        remade.add(key)
        if kind == "message":
            add += message_units([erased[int(first)]], compactor.counter)
        else:
            windows, _ = window_units(after[int(first) - 1 : int(last)], closed=True)
            add += [w for w in windows if (w.first_seq, w.last_seq) == (int(first), int(last))]
    return drop, add


def check_targets(targets: object) -> list[str | int] | None:
    """``messages=`` of an erase: None, or a non-empty list of message ids or seqs."""
    if targets is None:
        return None
    if isinstance(targets, str | int):
        targets = [targets]
    if not isinstance(targets, list | tuple) or not targets or not all(
            isinstance(t, str | int) and not isinstance(t, bool) for t in targets):
        raise ValidationError("messages= names what to erase: message ids or seqs (a non-empty list), or None "
                              "for the whole conversation")
    return list(targets)


def erase_messages(engine: EraseEngine, conversation_id: str, targets: object, *, reason: object, by: object,
                   wait: float = 30.0, vacuum: bool = False,
                   work_queued: Callable[[str], None] | None = None) -> list[Tombstone]:
    """Erase messages of a conversation (see :meth:`lossless.Conversation.erase`): the
    plan is made and written holding the compaction lease (``wait`` seconds for it), then
    the long-term memories distilled from an erased message are forgotten, the new
    retrieval units queued for embedding, and the files scrubbed of what the rows held
    (:mod:`lossless.store.scrub`; ``vacuum``: rewrite them as well). ``work_queued`` is
    told of the conversation queued for its new units (it wakes a worker). Returns the
    tombstones of the messages asked for, in seq order (an erased message is not erased
    again)."""
    why, who = validate_erase(reason, by)
    chosen = check_targets(targets)
    store = engine.store
    if store.get_conversation(conversation_id) is None:
        raise NotFoundError(f"no conversation {conversation_id!r}")
    with engine.compactor.holding(conversation_id, "erase", wait) as held:
        if isinstance(held, Busy):
            raise CompactionBusyError(f"cannot erase now: {held.why}")
        for attempt in range(_PLAN_ATTEMPTS):
            plan, already = plan_erase(engine.compactor, conversation_id, chosen, reason=why, by=who)
            if not plan.messages and plan.metadata is None:
                break
            try:
                erase(store, plan)
                break
            except StalePlan:  # a worker cut units meanwhile: plan again, with them
                if attempt == _PLAN_ATTEMPTS - 1:
                    raise CompactionBusyError("cannot erase now: the worker kept indexing the conversation while "
                                              "the erase was planned; nothing was erased, try again") from None
    if plan.messages:
        _forget_in_memory(engine, conversation_id, plan)
        scrub(store, full=vacuum)
        if plan.add_units:
            engine.backlog.queue(conversation_id)
            if work_queued is not None:
                work_queued(conversation_id)
    return sorted([*(m.tombstone for m in plan.messages), *already], key=lambda t: t.seq)


def _metadata_after(store: Any, conversation_id: str) -> dict[str, Any] | None:
    """A wholly erased conversation's metadata: the owners of its memories (who, not what),
    nothing else (a title says what was said); None when that is what it holds already."""
    info = store.get_conversation(conversation_id)
    if info is None:
        return None
    kept = {k: v for k, v in info.metadata.items() if k in OWNER_KEYS}
    return None if kept == info.metadata else kept


def _forget_in_memory(engine: EraseEngine, cid: str, plan: ErasePlan) -> None:
    """What this process holds of the erased text: long-term memories distilled from it
    (forgotten) and cached vector matrices (dropped)."""
    ids = {m.tombstone.message_id for m in plan.messages}
    seqs = {m.tombstone.seq for m in plan.messages}

    def derived(conversation: str | None, sources: list[str], metadata: dict[str, Any]) -> bool:
        # a record names the messages it came from; a task record is made from its whole
        # span (its patterns, errors and result may quote any message of it)
        first, last = metadata.get("first_seq"), metadata.get("last_seq")
        return bool(ids.intersection(sources)) or (
            conversation == cid and isinstance(first, int) and isinstance(last, int)
            and any(first <= q <= last for q in seqs))

    runner = sql_runner(engine.store)
    rows = runner.query("SELECT id, source_message_ids, metadata FROM memories WHERE conversation_id = ?", (cid,))
    sourced = [mid for mid, sources, meta in rows
               if derived(cid, json.loads(sources or "[]"), json.loads(meta or "{}"))]
    if sourced:
        engine.memories.forget(sourced)
    # the forgetting policy's log keeps whole records (to restore them): those derived
    # from an erased message go too
    logged = []
    for rowid, text in runner.query("SELECT rowid, record FROM forgotten_memories"):
        record = json.loads(text)
        if derived(record.get("conversation_id"), record.get("source_message_ids") or [], record.get("metadata") or {}):
            logged.append(rowid)
    if logged:
        where, args = runner.in_list("rowid", logged)
        with runner.transaction() as conn:
            conn.execute(f"DELETE FROM forgotten_memories WHERE {where}", args)
    forget = getattr(engine.recaller.index_store, "forget_conversation", None)
    if forget is not None:
        forget(cid)
