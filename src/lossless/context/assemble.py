"""Assembly: the context handed to the model for one call, built to fit a token budget.

Tiers, in priority order (DESIGN.md, seed 000's budget table):
  pinned  the conversation's opening system prompt, verbatim
  P0      the fresh tail: the newest raw messages, verbatim, never splitting a tool call
          from its results, always including the newest user turn (abridged if it alone
          is larger than the budget)
  P1      recent frontier summaries, newest first
  P2      the root: the whole-conversation root compaction writes (seeds 000 and 001:
          placed first and never dropped; abridged only past ``root_share`` of the budget;
          with a question, one that does not fit that share gives way to recall, named by
          a pointer, unless it holds more of the question than what it would push out), or
          without one, the oldest frontier summary, covering the start of the history
  P3      recall: older messages matching the query, under a line per date, each headed by
          its id and speaker
Each tier first takes up to its share of the budget; what a tier leaves unused goes to the
others in the same order. The result is checked against the budget with the configured
tokenizer and trimmed from the lowest priority if joining pieces cost a token more
(:mod:`lossless.context.budgeted`, the tiers in :mod:`lossless.context.tiers`). A call
with the whole window tries the cache-stable layout first (:mod:`lossless.context.stable`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Literal

from lossless.context.budgeted import budgeted_layout
from lossless.context.inputs import History, Sources
from lossless.context.lookups import file_hits, memory_records
from lossless.context.recalled import RecalledMessages
from lossless.context.shown import AssemblyCaches, MessageView
from lossless.context.stable import prefix_cap, stable_layout
from lossless.context.summaries import SummaryPieces
from lossless.core.config import Config
from lossless.core.errors import BudgetError, EmbedderError
from lossless.core.priority import query_running
from lossless.core.tenants import tenant_of
from lossless.core.tokens import TokenCounter
from lossless.core.types import AssembledContext, Lag, Message
from lossless.store.backlog import Backlog
from lossless.store.base import Store

if TYPE_CHECKING:
    from lossless.files import FileHit, Files
    from lossless.longterm import Memories
    from lossless.recall.hybrid import Recaller

__all__ = ["Assembler"]

log = logging.getLogger("lossless")

_MAX_BUDGET = 2**31 - 1
_RAW_PAGE = 512  # raw messages read per query when the worker is behind (see Assembler._raw)
_FIRST_RAW_PAGE = 64  # … the first of them, when only the newest budget's worth can be shown
# a question is read this far: keyword recall keeps its first 64 terms and an embedding
# model its first few hundred tokens anyway, while reading a pasted 8 MB message as the
# question took a minute (the proxy asks with the last user message, whatever its size)
MAX_QUERY_CHARS = 8_000

Layout = Literal["auto", "stable", "budgeted"]


class Assembler:
    """Builds a conversation's context for a token budget from its store, recaller,
    long-term memories and file index."""

    def __init__(self, store: Store, config: Config, counter: TokenCounter, recaller: Recaller | None = None, *,
                 memories: Memories | None = None, files: Callable[[], Files | None] | None = None,
                 backlog: Backlog | None = None) -> None:
        """``files``: the file index once something is indexed, else None; asked on each
        assembly that may show files while there is none (``lossless index`` may run in
        another process beside a running server)."""
        self.store = store
        self.config = config
        self.counter = counter
        self.recaller = recaller
        self.caches = AssemblyCaches()
        self.backlog = backlog if backlog is not None else Backlog(store)
        self.memories = memories
        self.files = files

    def assemble(self, conversation_id: str, budget_tokens: int | None = None, query: str | None = None,
                 *, layout: Layout = "auto") -> AssembledContext:
        """``layout``: ``stable`` tries the cache-stable layout first (see
        :mod:`lossless.context.stable`), ``budgeted`` never does, ``auto`` tries it when
        the budget is the whole window. Never waits for the worker: with a backlog it
        fits the budget from what exists, and ``lag`` on the result says how far behind
        the worker is. ``query`` is read up to its first ``MAX_QUERY_CHARS`` characters."""
        budget = self.config.context_window if budget_tokens is None else budget_tokens
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
            raise BudgetError(f"budget_tokens must be a positive integer, got {budget_tokens!r}")
        if isinstance(query, str) and len(query) > MAX_QUERY_CHARS:
            query = query[:MAX_QUERY_CHARS]
        # a budget beyond any model's window means "no limit": it is worked with as the
        # largest one (arithmetic on 10**30 tokens would overflow SQLite's integers)
        with query_running():  # the worker thread steps aside meanwhile (the GIL is the caller's)
            last = self.store.last_seq(conversation_id)  # read once per call (it was read three times)
            ctx = self._assemble(conversation_id, min(budget, _MAX_BUDGET), query, layout=layout, last=last)
            lag = self._lag(conversation_id, last)
        return replace(ctx, lag=lag, budget_tokens=budget)

    def _lag(self, cid: str, last: int) -> Lag | None:
        row = self.backlog.row(cid)
        if row is None:
            return None
        recaller = self.recaller
        embedding = recaller is not None and recaller.embedder is not None
        unembedded = 0
        if recaller is not None and embedding:
            try:
                unembedded = recaller.unembedded(cid)
            except EmbedderError as exc:  # the model does not load: the recall above said so already
                log.debug("lossless: units not embedded are not counted: %s", exc)
        return Lag(seconds=row.queued_seconds,
                   raw_messages=last - self.store.covered_seq(cid),
                   messages_not_indexed=recaller.uncut(cid) if recaller is not None and embedding else 0,
                   units_not_embedded=unembedded)

    def _sources(self, cid: str) -> Sources:
        """This call's view of messages under the current config (a benchmark may swap
        it between calls), with the caches kept across calls."""
        view = MessageView(self.config, self.counter, self.caches)
        task_start = self.memories.task_start if self.memories is not None else None
        # the file index is the operator's (no tenant can index files): a tenant's
        # conversation gets none of it, on every path that assembles (API, proxy, MCP)
        operator = tenant_of(cid) is None

        def hits_for(query: str) -> list[FileHit]:
            files = self.files() if self.files is not None and operator else None
            return file_hits(files, query, config=self.config)

        return Sources(view=view, summaries=SummaryPieces(view, self.store, task_start),
                       recalled=RecalledMessages(view, self.store, self.recaller),
                       records_for=partial(memory_records, self.store, self.memories, self.config, cid),
                       hits_for=hits_for)

    def _cache_pays(self, budget: int, query: str | None) -> bool:
        """Whether this call gets the cache-stable layout: it has the whole window, and (with
        a question) the prefix may grow to ``cache_min_prefix`` tokens. Providers cache no
        shorter prompt prefix (OpenAI and Anthropic: 1,024 tokens), and at a small window
        a prefix that cannot be cached only takes room from what the question brings."""
        cfg = self.config
        if not cfg.cache_stable or budget < cfg.context_window:
            return False
        return not (query and query.strip()) or prefix_cap(cfg) >= cfg.cache_min_prefix

    def _raw(self, cid: str, covered: int, budget: int, view: MessageView, last: int) -> tuple[list[Message], bool]:
        """The raw messages after the frontier that assembly may show, and whether that is
        all of them. All, unless the worker is far behind (more than two windows' worth, or
        twice ``compact_after_messages``, not yet summarized): then the newest of them, read
        newest first page by page, so assembly costs the same with a backlog of fifty
        thousand messages as without one.
        The rest is reachable by recall and says so in a pointer.
        Behind like that, the raw messages read are never all of them, so the layout is the
        budgeted one, whose tail shows at most the budget: unless the strategy is
        ``selective`` (which picks among them), just the newest budget's worth is read, in
        pages that start small. Reading a thousand messages per call was most of what a
        query paid while the worker caught up."""
        cfg = self.config
        cap = 2 * max(budget, cfg.context_window)
        # and twice the messages that trigger a compaction: a caught-up worker leaves fewer
        # unsummarized, while 2 x 128k tokens of short turns were ~15k messages read per call
        # (a 50k backlog: 78 ms an assembly against 20 ms once caught up)
        most = 2 * cfg.compact_after_messages if cfg.compact_after_messages else None
        size = _RAW_PAGE
        if most is not None and last - covered > most and cfg.strategy != "selective":
            cap, size = budget, _FIRST_RAW_PAGE  # incomplete whatever is read: the tail shows at most this
        pages: list[list[Message]] = []
        spent = read = 0
        hi = last
        while hi > covered and spent <= cap and (most is None or read < most):
            lo = max(covered + 1, hi - size + 1)
            page = self.store.get_messages(cid, lo, hi)
            pages.append(page)
            spent += sum(view.shown_size(m) for m in page)
            read += len(page)
            hi = lo - 1
            size = min(2 * size, _RAW_PAGE)
        raw = [m for page in reversed(pages) for m in page]
        complete = hi <= covered
        drop = 0
        while spent > cap and drop < len(raw) - 1:  # the oldest beyond the cap stay unread by this call
            spent -= view.shown_size(raw[drop])
            drop += 1
        if drop:
            complete = False
            raw = raw[drop:]
        if not complete:
            while raw and raw[0].role == "tool":  # never a tool result without its call
                raw.pop(0)
        return raw, complete

    def _pinned(self, cid: str) -> list[Message]:
        """The opening run of system messages: the agent's instructions stay in view."""
        head = self.store.get_messages(cid, 1, 4)
        out: list[Message] = []
        for msg in head:
            if msg.role != "system":
                break
            out.append(msg)
        return out

    def _assemble(self, conversation_id: str, budget: int, query: str | None, *, layout: Layout,
                  last: int) -> AssembledContext:
        if query is not None and not isinstance(query, str):
            raise BudgetError(f"query must be a string, got {type(query).__name__}")
        if query and query.strip() and self.recaller is not None and last > 0:
            self.recaller.prefetch(query)  # the model embeds the query while the store is read
        sources = self._sources(conversation_id)
        frontier = self.store.frontier(conversation_id)
        covered = frontier[-1].last_seq if frontier else 0
        raw, complete = self._raw(conversation_id, covered, budget, sources.view, last)
        backlog = (covered + 1, raw[0].seq - 1) if not complete and raw else None
        pinned = self._pinned(conversation_id)
        pinned_ids = {p.id for p in pinned}
        root = self.store.root(conversation_id) if frontier else None
        history = History(conversation_id, frontier, [m for m in raw if m.id not in pinned_ids], complete, backlog,
                          pinned, root)
        if complete and (layout == "stable" or (layout == "auto" and self._cache_pays(budget, query))):
            stable = stable_layout(history, budget, query, sources)
            if stable is not None:
                return stable
        return budgeted_layout(history, budget, query, sources)
