"""One chat in a lossless store, and the systems that build a context from it, for the
retention benchmark (``bench/retention.py`` documents the systems and the metrics).

A chat is fed turn by turn into a fresh database (``ingest``), or, for a set whose questions
share a history (MADial: a user's memories), the history is ingested once and each
question's chat continues a copy of it (``extend``): the same store state a fresh ingest of
the same messages gives, at a fraction of the time.
"""

from __future__ import annotations

import shutil
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import baselines
import beam
from retention_text import ContextView, has_cjk

import lossless
from lossless.context.pieces import MEMORY_HEADER, RECALL_HEADER
from lossless.context.recalled import day_line
from lossless.core.stats import ConversationStats
from lossless.core.tokens import MESSAGE_OVERHEAD, NAME_OVERHEAD, REPLY_PRIMING, count_chat_tokens

__all__ = ["BUILDERS", "SEARCH_LIMIT", "Built", "ChatRun", "build_evidence", "build_full", "extend", "ingest"]

SEARCH_LIMIT = 200


@dataclass
class ChatRun:
    chat: beam.BeamChat
    mem: lossless.Memory
    conv: lossless.Conversation
    by_seq: dict[int, lossless.Message]
    seq_of_id: dict[int, int]
    ingest_s: float
    stats: ConversationStats
    index: baselines.MessageIndex | None = None  # the bm25 / vector / hybrid baselines' own
    order: list[lossless.Message] = field(default_factory=list)  # the index's positions
    live_seqs: frozenset[int] = frozenset()  # the live dialogue: the query's own turns
    path: Path | None = None  # the store's file

    def attach_index(self, embedder: Any) -> float:
        """Build the baselines' index over the whole messages (not the live ones); the
        seconds it took."""
        t0 = time.perf_counter()
        self.order = [self.by_seq[s] for s in sorted(self.by_seq) if s not in self.live_seqs]
        texts = [baselines.indexed_text(m.text, m.name) for m in self.order]
        self.index = baselines.MessageIndex.build(texts, embedder)
        return time.perf_counter() - t0

    def cost(self, m: lossless.Message) -> int:
        """What one whole message adds to a context (count_chat_tokens' accounting)."""
        extra = NAME_OVERHEAD + self.mem.counter.count(m.name) if m.name else 0
        return MESSAGE_OVERHEAD + m.token_count + extra


def _open(path: Path, window: int, embedder: Any, number: int) -> tuple[lossless.Memory, lossless.Conversation]:
    # inline: the conversation grows turn by turn and compaction keeps up between turns (what
    # a worker thread does in an agent's loop), the same DAG on every run
    mem = lossless.open(path, context_window=window, embedder=embedder, compaction="inline")
    return mem, mem.conversation(f"beam-{number}")


def _feed(conv: lossless.Conversation, chat: beam.BeamChat, groups: Sequence[Sequence[int]]) -> None:
    by_id = chat.by_id()
    for ids in groups:
        conv.add_many([{"role": by_id[i].role, "content": by_id[i].content, "created_at": by_id[i].created_at,
                        "external_id": str(i), **({"name": by_id[i].name} if by_id[i].name else {})}
                       for i in ids])


def _finish(chat: beam.BeamChat, mem: lossless.Memory, conv: lossless.Conversation, embedder: Any,
            t0: float, path: Path) -> ChatRun:
    index = getattr(conv, "index", None)
    if embedder is not None and callable(index):
        index()  # embed what is still pending now, not lazily inside the first query
    ingest_s = time.perf_counter() - t0
    stored = conv.messages()
    by_seq = {m.seq: m for m in stored}
    seq_of_id = {int(m.external_id): m.seq for m in stored if m.external_id is not None}
    live = frozenset(seq_of_id[i] for i in chat.live if i in seq_of_id)
    return ChatRun(chat, mem, conv, by_seq, seq_of_id, ingest_s, conv.stats(), live_seqs=live, path=path)


def db_path(folder: Path, number: int, window: int, tag: str = "") -> Path:
    return folder / f"chat-{number}-w{window}{'-' + tag if tag else ''}.db"


def ingest(chat: beam.BeamChat, folder: Path, window: int, embedder: Any, unit: str, *, tag: str = "") -> ChatRun:
    """The whole chat into a fresh store (``tag`` tells stores of the same chat and window
    apart, e.g. the keyword-only one)."""
    path = db_path(folder, chat.number, window, tag)
    mem, conv = _open(path, window, embedder, chat.number)
    t0 = time.perf_counter()
    _feed(conv, chat, chat.turns if unit == "turn" else _batches(chat))
    return _finish(chat, mem, conv, embedder, t0, path)


def extend(chat: beam.BeamChat, base: Path, base_number: int, folder: Path, window: int, embedder: Any, *,
           tag: str = "") -> ChatRun:
    """``chat`` in a copy of ``base`` (a closed store that ``ingest`` filled with the chat's
    first messages as chat ``base_number``): the messages it lacks are added turn by turn."""
    path = db_path(folder, chat.number, window, tag)
    for suffix in ("", "-wal"):
        if Path(f"{base}{suffix}").exists():
            shutil.copyfile(f"{base}{suffix}", f"{path}{suffix}")
    t0 = time.perf_counter()
    mem, conv = _open(path, window, embedder, base_number)
    have = {int(m.external_id) for m in conv.messages() if m.external_id is not None}
    _feed(conv, chat, [ids for ids in chat.turns if not set(ids) <= have])
    return _finish(chat, mem, conv, embedder, t0, path)


def _batches(chat: beam.BeamChat) -> list[tuple[int, ...]]:
    out: dict[int, list[int]] = defaultdict(list)
    for m in chat.messages:
        out[m.batch].append(m.id)
    return [tuple(v) for _, v in sorted(out.items())]


# -- the systems ---------------------------------------------------------------------------

class Built(NamedTuple):
    """A context as a system returned it: messages, their size, and (lossless only)
    the tokens each tier took (``ctx.tier_tokens()``) and where each part came from
    (``ctx.items``, for ``bench/tier_yield.py``)."""

    messages: list[Any]
    tokens: int
    tiers: dict[str, int] | None = None
    items: tuple[Any, ...] | None = None


Builder = Callable[["ChatRun", str, int], Built]


def build_lossless(run: ChatRun, question: str, budget: int) -> Built:
    ctx = run.conv.assemble(budget_tokens=budget, query=question)
    return Built(list(ctx.messages), ctx.tokens, ctx.tier_tokens(), ctx.items)


def build_recent(run: ChatRun, question: str, budget: int) -> Built:
    del question  # a sliding window ignores the question
    picked: list[lossless.Message] = []
    total = REPLY_PRIMING
    for m in reversed(run.conv.messages()):
        if m.seq in run.live_seqs:
            continue
        cost = run.cost(m)
        if total + cost > budget:
            break
        picked.append(m)
        total += cost
    return Built([m.to_chat() for m in reversed(picked)], total if picked else 0)


def ranked_builder(mode: str) -> Builder:
    def build(run: ChatRun, question: str, budget: int) -> Built:
        hits = run.conv.search(question, mode=mode, kinds=("message",), limit=SEARCH_LIMIT)  # type: ignore[arg-type]
        picked: dict[int, lossless.Message] = {}
        total = REPLY_PRIMING
        for hit in hits:
            m = run.by_seq.get(hit.first_seq)
            if m is None or m.seq in picked or m.seq in run.live_seqs:
                continue
            cost = run.cost(m)
            if total + cost <= budget:
                picked[m.seq] = m
                total += cost
        return Built([picked[s].to_chat() for s in sorted(picked)], total if picked else 0)

    return build


def index_builder(rank: Callable[[baselines.MessageIndex, str], list[int]]) -> Builder:
    """A baseline of ``bench/baselines.py``: its whole ranking packed greedily."""
    def build(run: ChatRun, question: str, budget: int) -> Built:
        assert run.index is not None, "attach_index() first"
        positions, total = baselines.pack(rank(run.index, question), lambda i: run.cost(run.order[i]), budget,
                                          REPLY_PRIMING)
        return Built([run.order[i].to_chat() for i in positions], total if positions else 0)

    return build


def build_bm25_dated(run: ChatRun, question: str, budget: int) -> Built:
    """bm25's ranking shown as the design obliges lossless to show a recalled message: in
    one system message under lossless's memory and recall headers, each message as its line
    ``#seq role: text`` under the line of its date (``[2024-01-18]``, written where the date
    changes), packed greedily in rank order (one that does not fit is skipped) and shown in
    time order. What bm25 would score if it owed what lossless owes the model."""
    assert run.index is not None, "attach_index() first"
    counter = run.mem.counter
    chosen: list[lossless.Message] = []

    def line(m: lossless.Message) -> str:
        return f"#{m.seq} {m.role if not m.name else f'{m.role} {m.name}'}: {m.text}"

    def render(msgs: list[lossless.Message]) -> list[dict[str, Any]]:
        lines = [MEMORY_HEADER, "", RECALL_HEADER]
        day = None
        for m in sorted(msgs, key=lambda m: m.seq):
            if day_line(m) != day:
                day = day_line(m)
                lines.append(day)
            lines.append(line(m))
        return [{"role": "system", "content": "\n".join(lines)}]

    days: set[str] = set()
    total = count_chat_tokens(counter, render([])) + 1  # (the newline before the first line)
    for i in run.index.rank_bm25(question):
        m = run.order[i]
        day = day_line(m)
        cost = counter.count(line(m) + "\n") + (0 if day in days else counter.count(day + "\n"))
        if total + cost <= budget:
            chosen.append(m)
            days.add(day)
            total += cost
        if budget - total < 8:
            break
    while chosen:  # exact, as the estimate's last line is not
        shown = render(chosen)
        total = count_chat_tokens(counter, shown)
        if total <= budget:
            return Built(shown, total)
        chosen.pop()
    return Built([], 0)


BUILDERS: dict[str, Builder] = {
    "lossless": build_lossless,
    "recent": build_recent,
    "bm25": index_builder(baselines.MessageIndex.rank_bm25),
    "vector": index_builder(baselines.MessageIndex.rank_vector),
    "hybrid": index_builder(baselines.MessageIndex.rank_hybrid),
    "bm25-dated": build_bm25_dated,
    "fts": ranked_builder("fts"),
    "semantic": ranked_builder("semantic"),
}


def build_evidence(run: ChatRun, seqs: Sequence[int], budget: int) -> Built:
    """The evidence messages, whole and in time order, the first that does not fit cut to
    what does (by words; by characters for CJK text, which has no spaces), nothing after it."""
    picked: list[dict[str, Any]] = []
    for seq in sorted(set(seqs)):
        m = run.by_seq[seq]
        chat = m.to_chat()
        if count_chat_tokens(run.mem.counter, [*picked, chat]) <= budget:
            picked.append(chat)
            continue
        pieces, sep = (list(m.text), "") if has_cjk(m.text) else (m.text.split(), " ")
        lo, hi = 0, len(pieces)
        while lo < hi:  # the most pieces that fit
            mid = (lo + hi + 1) // 2
            cut = {"role": m.role, "content": sep.join(pieces[:mid])}
            if count_chat_tokens(run.mem.counter, [*picked, cut]) <= budget:
                lo = mid
            else:
                hi = mid - 1
        if lo:
            picked.append({"role": m.role, "content": sep.join(pieces[:lo])})
        break
    return Built(picked, count_chat_tokens(run.mem.counter, picked))


def build_full(run: ChatRun, exclude: Sequence[str] = ()) -> ContextView:
    t0 = time.perf_counter()
    msgs = [m.to_chat() for m in run.conv.messages()]
    ms = (time.perf_counter() - t0) * 1000
    return ContextView.of(msgs, count_chat_tokens(run.mem.counter, msgs), ms, exclude)
