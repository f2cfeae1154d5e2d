"""Hybrid recall: FTS5 bm25 over messages and summaries, k-NN over message passages (and
QA-pair windows with ``Config.recall_windows``), fused by reciprocal rank (or a weighted
sum), with optional recency decay and MMR. Nothing crosses a conversation boundary unless
the caller lists conversations.

Windows are cut and embedded only when a search reads them (``recall_windows``): they
were most of the text the model read (58 % of a 419-turn chat's characters) for vectors
no default search used. Window vectors a store already holds are kept; a store switched
to windows has the windows of its earlier conversations cut and embedded by the worker
(:mod:`lossless.store.unembedded`).

Only text the embedder reads is embedded and fused (:mod:`lossless.embed.languages`): a
unit in another language gets no vector (it is passed over, not owed), and a query in
another language is searched by keywords alone, as without an embedder, without calling
the model."""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

import numpy as np

from lossless.core.errors import EmbedderError
from lossless.core.graphemes import cluster_start
from lossless.core.tokens import TokenCounter
from lossless.core.types import GrepHit
from lossless.core.validate import timestamp
from lossless.embed.base import Warmable, embed_checked, warm_is_due
from lossless.embed.languages import ScriptReader, declared_languages
from lossless.recall.owed import Debt, ModelDebt
from lossless.recall.queries import QueryVectors
from lossless.recall.rerank import RerankerCache
from lossless.recall.units import message_units, window_units
from lossless.store import unembedded
from lossless.store.base import RecallIndex, SearchSpec, Store, UnitRow
from lossless.store.fts import cjk_query_terms, fts_terms
from lossless.store.runner import sql_runner

if TYPE_CHECKING:
    from lossless.core.config import Config
    from lossless.embed.base import Embedder

__all__ = ["Embedded", "RecallHit", "Recaller"]

log = logging.getLogger("lossless")
# each list is cut at this many times the limit before fusion: lists as long as the limit
# cost 0.006-0.011 answer recall on the chit-chat dev set and were level on BEAM
_WIDE = 2
_RRF_K = 60  # the constant from Cormack et al.; ranks past ~60 barely matter
_CUT_ATTEMPTS = 3  # an erase between reading messages and writing their units: read them again
# Before a semantic or hybrid search, what the searched conversations owe is cut and embedded
# on the caller's thread, for up to this long or this many units (a message just added takes
# milliseconds; ~0.3 s embeds 256 short units with the local model on 2 cores); what is left
# to the worker is searched by keywords instead (RecallHit.keyword_rank, GrepHit.matched)
CATCH_UP_SECONDS = 1.0
CATCH_UP_UNITS = 512
_CATCH_UP_CUT = 2000  # messages cut into units per step of a search's catch-up
_CATCH_UP_GROUP = 16  # conversations cut per step of it (their units share a call of the model)
_KEYWORD_SPANS = 16  # conversations partly embedded searched one by one from their first seq not embedded
_READABLE_KEPT = 100_000  # unit texts whose language was looked at, remembered by hash (~15 MB)
_EMBED_BATCH = 64  # units per embedding call of a search's catch-up: its time bound is checked between calls
# units read and handed to the embedder at a time by embed_units (``lossless embed``,
# ``conv.index()``): the more at once, the better the model groups them by length (1,740
# short units: 4.32-4.33 s at 256 against 4.82-4.85 s at 64); ~0.7 s a step on 2 cores,
# so a progress bar still moves about once a second
_STEP = 256


@dataclass(frozen=True, slots=True)
class RecallHit:
    """One fused result: a message, a summary, or a window of messages."""

    kind: Literal["message", "summary", "window"]
    id: str  # msg_… / sum_… ; a window's first message id
    conversation_id: str
    first_seq: int
    last_seq: int
    message_ids: tuple[str, ...]
    score: float
    keyword_rank: int | None = None
    vector_rank: int | None = None
    snippet: str = ""
    end_ts: float = 0.0


@dataclass(frozen=True, slots=True)
class Embedded:
    """What one pass over a conversation's units not embedded yet did: ``units`` passed
    (their vector index now counts them as done), of which ``vectors`` were embedded and
    the rest left keyword-only (text in a language the embedder does not read)."""

    units: int = 0
    vectors: int = 0

    @property
    def keyword_only(self) -> int:
        return self.units - self.vectors


@dataclass(slots=True)
class _Candidate:
    kind: str
    id: str
    conversation_id: str
    first_seq: int
    last_seq: int
    message_ids: tuple[str, ...]
    snippet: str
    ts: float
    keyword_rank: int | None = None
    vector_rank: int | None = None
    similarity: float = 0.0
    keyword_score: float = 0.0


def _words(text: str) -> frozenset[str]:
    """The words :meth:`Recaller._mmr` compares snippets by, as keyword search reads them:
    words, and a CJK run's character bigrams (Chinese has no spaces to split at)."""
    return frozenset(fts_terms(text)) | frozenset(cjk_query_terms(text))


def _head(text: str, width: int = 160) -> str:
    """A passage's first ``width`` characters as a snippet, marked with … when cut."""
    cut = cluster_start(text, width) if len(text) > width else len(text)
    return text[:cut].replace("\n", " ") + ("…" if cut < len(text) else "")


class Recaller:
    def __init__(self, store: Store, embedder: Embedder | None, counter: TokenCounter, config: Config) -> None:
        self.store = store
        self.embedder = embedder
        self.counter = counter
        self.config = config
        # which texts the embedder reads (an attribute that is not a language list fails here, at open)
        self.reader = ScriptReader(declared_languages(embedder))
        self._readable: dict[str, bool] = {}  # unit text hash -> whether the embedder reads it
        self._debt = ModelDebt(sql_runner(store), self.reader)  # what the model itself is owed
        # SQLiteRecall (sqlite-vec / numpy) or PostgresRecall (pgvector): whichever the store keeps
        self.index_store: RecallIndex = store.recall_index(config.vector_backend)
        self._index_name: str | None = None
        self._upgraded = False  # upgrade_index was called for this index (embed_units)
        self._sync_lock = threading.Lock()
        self._synced: dict[str, int] = {}  # conversation -> last seq known to be indexed
        # query vectors, each computed once: shared with long-term memories and file chunks
        # (Memory hands them this one), so one assembly embeds its question once
        self.queries = QueryVectors()
        # the optional rerank of assembly's recall candidates (Config.rerank), built on first use
        self.rerankers = RerankerCache()
        self.rerankers.get(config)  # a rerank setting that names no usable model fails here, at open

    def warming(self) -> bool:
        """Whether the embedder is being loaded by another thread (the worker, as it
        starts): assembly then recalls by keywords instead of waiting for it."""
        e = self.embedder
        if isinstance(e, Warmable) and (e.warming() or warm_is_due(e)):
            log.debug("lossless: the embedding model is still loading; this recall uses keywords")
            return True
        return False

    def reads(self, text: str) -> bool:
        """Whether the embedder reads ``text`` (a query): a query it does not read is
        searched by keywords alone and never embedded. False without an embedder."""
        return self.embedder is not None and self.reader.reads(text)

    def prefetch(self, query: str) -> None:
        """Start embedding ``query`` on a worker thread, so the model runs while the
        caller reads the store (the model and SQLite both release the GIL). The search
        that needs the vector then waits for it (a cached vector is handed over as is,
        so the search does not look it up again). A no-op without an embedder or for an
        empty query or one in a language the embedder does not read."""
        if self.embedder is None or not query.strip() or not self.reads(query) or self.warming():
            return
        self.queries.start(self.embedder, self.index_store, query)

    def close(self) -> None:
        self.queries.close()
        self.rerankers.close()

    # -- indexing -------------------------------------------------------------------------

    @property
    def windows(self) -> bool:
        """Whether QA-pair windows are cut, embedded and searched (``Config.recall_windows``)."""
        return bool(self.config.recall_windows)

    def cut_units(self, conversation_id: str, limit: int | None = None) -> int:
        """Make units for messages not yet cut (at most ``limit`` messages' worth, so a
        worker's step stays short), and windows when searches read them (all those
        owed: a store switched to windows catches up at once); returns how many were
        written. Units cut from text an erase replaced meanwhile are not written: the
        messages are read again."""
        for _ in range(_CUT_ATTEMPTS):
            erasures = self.index_store.erasures(conversation_id)  # before the messages are read
            message_seq, window_seq = self.index_store.progress(conversation_id)
            last = self.store.last_seq(conversation_id)
            if limit is not None:
                last = min(last, message_seq + limit)
            if last <= message_seq and (not self.windows or last <= window_seq):
                return 0
            new_msgs = self.store.get_messages(conversation_id, message_seq + 1, last) if last > message_seq else []
            units = message_units(new_msgs, self.counter)
            next_start: int | None = None
            if self.windows:
                window_msgs = (self.store.get_messages(conversation_id, window_seq + 1, last)
                               if window_seq < message_seq else new_msgs)
                windows, next_start = window_units(window_msgs, closed=False)
                units += windows
            if self.index_store.add_units(conversation_id, units, last,
                                          next_start if next_start is not None else window_seq, erasures):
                return len(units)
        return 0  # erased under it every time: the next step cuts them

    def index_name(self) -> str | None:
        if self.embedder is None:
            return None
        if self._index_name is None:
            e = self.embedder
            try:
                dim = e.dim  # may load the model
            except EmbedderError:
                raise
            except Exception as exc:  # an embedder's own error: recall falls back to keywords on ours
                raise EmbedderError(f"embedder {e.provider}/{e.model} failed: {type(exc).__name__}: {exc}") from exc
            self._index_name = self.index_store.ensure_index(e.provider, e.model, dim)
        return self._index_name

    def embed_pending(self, conversation_id: str, limit: int | None = None,
                      progress: Callable[[int, int], None] | None = None) -> int:
        """Embed units not yet in the vector index (through the cache), in batches;
        ``progress(done, total)`` is called after each batch. Returns how many units were
        passed: embedded, or left keyword-only when the embedder does not read their
        language (:meth:`embed_units` tells the two apart)."""
        return self.embed_units(conversation_id, limit, progress).units

    def embed_units(self, conversation_id: str, limit: int | None = None,
                    progress: Callable[[int, int], None] | None = None, batch_size: int = _STEP) -> Embedded:
        """:meth:`embed_pending`, counting the units embedded and those left keyword-only;
        ``batch_size`` units are read and handed to the embedder at a time (never past
        ``limit``): the more at once, the better it groups them by length."""
        index = self.index_name()
        if index is None or self.embedder is None:
            return Embedded()
        done = vectors = 0
        total = self.index_store.pending_count(index, conversation_id) if progress else 0
        while limit is None or done < limit:
            batch = self.index_store.pending(index, conversation_id,
                                             batch_size if limit is None else max(1, min(batch_size, limit - done)))
            if not batch:
                break
            passed = self._embed_batches(index, [(conversation_id, batch)])[conversation_id]
            done += passed.units
            vectors += passed.vectors
            if progress is not None:
                progress(done, max(total, done))
        return Embedded(done, vectors)

    def embed_across(self, conversation_ids: Sequence[str], limit: int = _STEP) -> dict[str, Embedded]:
        """The units not embedded yet of several conversations, up to ``limit`` in all
        (taken from the conversations in the order given), handed to the embedder in one
        call: a short conversation's few units alone make small batches of mixed length,
        and the model reads many short conversations' units ~25 % faster together. Each
        conversation's vectors and progress are written as :meth:`embed_units` writes them."""
        index = self.index_name()
        if index is None or self.embedder is None or limit <= 0:
            return {}
        parts: list[tuple[str, list[UnitRow]]] = []
        left = limit
        for cid in dict.fromkeys(conversation_ids):
            if left <= 0:
                break
            batch = self.index_store.pending(index, cid, left)
            if batch:
                parts.append((cid, batch))
                left -= len(batch)
        return self._embed_batches(index, parts) if parts else {}

    def _embed_batches(self, index: str, parts: Sequence[tuple[str, Sequence[UnitRow]]]) -> dict[str, Embedded]:
        """Embed the units of ``parts`` (conversation, units read by ``pending``) in one
        embedder call (through the cache: a text already embedded is not again), then write
        each conversation's vectors and progress."""
        e = self.embedder
        assert e is not None
        if not self._upgraded:  # an index in an older layout is rebuilt by its next writer, not a query
            self.index_store.upgrade_index(index, e.dim)
            self._upgraded = True
        # units in a language the model does not read get no vector: the index passes
        # them (``through``), so nothing counts them as owed and no search waits for them
        reads = [[u for u in batch if self.reader.reads(u.text, labels=True)] for _, batch in parts]
        everyone = [u for read in reads for u in read]
        shas = [u.text_sha256 for u in everyone]
        cached = self.index_store.cached(e.provider, e.model, shas) if everyone else {}
        missing = [(u, s) for u, s in zip(everyone, shas, strict=True) if s not in cached]
        fresh: set[str] = set()
        if missing:
            texts = list(dict.fromkeys(u.text for u, _ in missing))
            embedded = embed_checked(e, texts)  # outside any transaction: an erase may land meanwhile
            by_text = dict(zip(texts, embedded, strict=True))
            cached.update((s, by_text[u.text]) for u, s in missing)
            fresh = {s for _, s in missing}
        out: dict[str, Embedded] = {}
        for (cid, batch), read in zip(parts, reads, strict=True):
            # the vectors and the new cache rows, for the units an erase did not replace meanwhile
            mine = {u.text_sha256 for u in read}
            self.index_store.add_vectors(index, cid, [(u, cached[u.text_sha256]) for u in read], fresh & mine,
                                         through=max(u.rowid for u in batch))
            fresh -= mine  # a text two conversations share goes into the cache once
            out[cid] = Embedded(len(batch), len(read))
        return out

    def not_embedded(self, conversation_ids: Sequence[str] | None) -> dict[str, int]:
        """Of these conversations (None: all), those whose messages are not all embedded,
        each with its first seq not embedded ({} without an embedder); one query."""
        index = self.index_name()
        return {} if index is None else unembedded.first_unembedded(sql_runner(self.store), index, conversation_ids)

    def catch_up(self, conversation_ids: Sequence[str] | None, *, seconds: float = CATCH_UP_SECONDS,
                 units: int = CATCH_UP_UNITS) -> dict[str, int]:
        """Before a search over ``conversation_ids`` (None: all): cut and embed what they
        owe, for up to ``seconds`` or ``units`` units (no bound with
        ``compaction="inline"``), the conversations nearest to caught up first. Returns
        those still owed, each with its first seq not embedded (one query when none is
        owed; {} without an embedder)."""
        owed = self.not_embedded(conversation_ids)
        if not owed:
            return {}
        if self.config.compaction == "inline":  # queries bring the vectors up to date themselves
            seconds, units = math.inf, 2**62
        deadline = time.monotonic() + seconds
        done = 0
        # the conversations in that order, each call of the model taking from the first
        # ones (several short conversations' units together, as the worker does)
        left = sorted(owed, key=lambda c: (-owed[c], c))
        while left and done < units and time.monotonic() < deadline:
            step = min(_EMBED_BATCH, units - done)
            cut = {cid: self.cut_units(cid, limit=_CATCH_UP_CUT) for cid in left[:_CATCH_UP_GROUP]}
            passed = self.embed_across(left, limit=step)
            done += sum(p.vectors for p in passed.values())  # the model's work is what the bound is for
            if sum(p.units for p in passed.values()) < step:  # every cut unit of them is passed now:
                left = [c for c in left if cut.get(c, 1)]  # those with nothing more to cut are done
        return self.not_embedded(list(owed))

    def uncut(self, conversation_id: str) -> int:
        """Messages of the conversation not cut into units yet."""
        return max(0, self.store.last_seq(conversation_id) - self.index_store.progress(conversation_id)[0])

    def unembedded(self, conversation_id: str) -> int:
        """Units of the conversation not in the vector index yet (0 without an embedder)."""
        index = self.index_name()
        return self.index_store.pending_count(index, conversation_id) if index is not None else 0

    def owed_units(self, conversation_id: str) -> int:
        """The units the model itself still owes the conversation, for what a user is told
        (progress lines, ``stats``): messages not cut yet (one each) and units not
        embedded, of text the model reads; text in a language it does not read is passed
        without it and owed nothing (:mod:`lossless.recall.owed`). 0 without an embedder.
        The worker's own bookkeeping is :meth:`uncut` and :meth:`unembedded`."""
        return self._owed(conversation_id).total if self.embedder is not None else 0

    def _owed(self, conversation_id: str, *, first_parts: bool = False) -> Debt:
        """:meth:`owed_units` in its parts; ``first_parts``: also how many of the units
        the model reads open a message (for ``stats``' messages owed)."""
        index = self.index_name()
        assert index is not None
        last = self.store.last_seq(conversation_id)
        cut = self.index_store.progress(conversation_id)[0]
        indexed = self.index_store.indexed_upto(index, conversation_id)
        uncut = max(0, last - cut)
        pending = self.index_store.pending_count(index, conversation_id, upto=indexed)
        if self.reader.reads_everything or uncut + pending == 0:
            return Debt(uncut=uncut, units=pending)
        debt = self._debt.of(conversation_id, last_seq=last, cut_through=cut, uncut=uncut,
                             indexed_through=indexed, pending=pending)
        if not first_parts:
            return debt
        return replace(debt, first_parts=self.index_store.pending_count(index, conversation_id, upto=indexed,
                                                                        first_parts=True) - debt.unread_first_parts)

    def unembedded_unchecked(self) -> bool:
        """Whether messages were stored since this embedder last looked for conversations
        it owes vectors (two index reads; False without an embedder)."""
        e = self.embedder
        return e is not None and unembedded.unchecked(sql_runner(self.store), e.provider, e.model,
                                                      windows=self.windows)

    def queue_unembedded(self) -> list[str]:
        """Queue for the worker the conversations stored since this embedder last looked
        whose messages are not all cut and embedded (:mod:`lossless.store.unembedded`)."""
        index = self.index_name()
        if index is None or self.embedder is None:
            return []
        return unembedded.queue_unembedded(sql_runner(self.store), index, self.embedder.provider,
                                           self.embedder.model, windows=self.windows)

    def count_unembedded(self) -> dict[str, int] | None:
        """What this embedder is owed, store-wide (None without one); reads only."""
        e = self.embedder
        if e is None:
            return None
        counts = unembedded.count_unembedded(sql_runner(self.store), unembedded.index_name(e.provider, e.model, e.dim),
                                             windows=self.windows)
        if self.reader.reads_everything or self.windows or not counts["conversations"]:
            return counts  # (with windows on, a conversation may owe only a window not cut yet: counted as is)
        # text the model does not read is owed nothing (owed_units): count what it reads
        out = {"conversations": 0, "messages": 0, "units": 0}
        for cid in self.not_embedded(None):
            debt = self._owed(cid, first_parts=True)
            if debt.total:
                out["conversations"] += 1
                out["messages"] += debt.uncut + debt.first_parts
                out["units"] += debt.units
        return out

    def refresh(self, conversation_id: str) -> None:
        """Before a query: with ``compaction="inline"`` the query itself brings units and
        vectors up to date (:meth:`sync`); otherwise the worker does, and the query uses
        the vectors that exist (keyword search covers every stored message)."""
        if self.config.compaction == "inline":
            self.sync(conversation_id)

    def sync(self, conversation_id: str) -> None:
        """Bring units and vectors up to date with the stored messages (a no-op, one
        query, when nothing was added since the last sync)."""
        last = self.store.last_seq(conversation_id)
        if self._synced.get(conversation_id) == last:
            return
        with self._sync_lock:
            self.cut_units(conversation_id)
            self.embed_pending(conversation_id)
            self._synced[conversation_id] = last

    # -- searching ------------------------------------------------------------------------

    def search(self, spec: SearchSpec, *, windows: bool | None = None,
               not_embedded: Mapping[str, int] | None = None) -> list[RecallHit]:
        """Fused results for ``spec`` (mode ``semantic``: vectors only; ``hybrid``: both;
        anything else: keyword only). ``windows``: whether window vectors are searched
        with the messages' (default: :attr:`windows`; with none stored, the messages'
        alone). ``not_embedded``: conversations whose messages from a
        seq on are not embedded (:meth:`catch_up`): a semantic search finds those by
        keywords instead, so it covers every stored message. A query in a language the
        embedder does not read gets the keyword search's hits, as without an embedder."""
        limit = spec.limit
        wide = max(limit * _WIDE, 30)
        if spec.mode in ("semantic", "hybrid") and self.embedder is not None and not self.reads(spec.query):
            mmr = self.config.mmr_lambda is not None  # MMR picks from a wider pool, by the snippets' words
            found = self.store.search(replace(spec, mode="fts", limit=wide, snippets=True) if mmr
                                      else replace(spec, mode="fts"))
            hits = [RecallHit(kind=h.kind, id=h.id, conversation_id=h.conversation_id, first_seq=h.first_seq,
                              last_seq=h.last_seq, message_ids=(h.id,) if h.kind == "message" else (),
                              score=h.score, keyword_rank=rank, snippet=h.snippet, end_ts=h.created_at.timestamp())
                    for rank, h in enumerate(found)]
            return self._mmr(hits, limit)[:limit] if mmr else hits
        keyword: list[GrepHit] = []
        # MMR compares snippets; plain fusion needs only ids and scores
        words = replace(spec, mode="fts", limit=wide, sort="relevance",
                        snippets=spec.snippets or self.config.mmr_lambda is not None)
        if spec.mode != "semantic":
            keyword = self.store.search(words)
        elif not_embedded and "message" in spec.kinds:
            keyword = self._beyond_vectors(replace(words, kinds=("message",)), not_embedded)
        vector: list[tuple[UnitRow, float]] = []
        if spec.mode in ("semantic", "hybrid") and self.embedder is not None and "message" in spec.kinds:
            vector = self._vector(spec, wide, self.windows if windows is None else windows)
        items: dict[tuple[str, str], _Candidate] = {}
        for rank, hit in enumerate(keyword):
            key = (hit.kind, hit.id)
            if key not in items:
                mids = (hit.id,) if hit.kind == "message" else ()
                items[key] = _Candidate(hit.kind, hit.id, hit.conversation_id, hit.first_seq, hit.last_seq, mids,
                                        hit.snippet, hit.created_at.timestamp())
            items[key].keyword_rank = rank
            items[key].keyword_score = max(items[key].keyword_score, hit.score)
        rank = 0
        for unit, sim in vector:
            key = ("message", unit.message_ids[0]) if unit.kind == "message" else ("window", str(unit.rowid))
            cand = items.get(key)
            if cand is None:
                cand = items[key] = _Candidate(unit.kind, unit.message_ids[0], unit.conversation_id, unit.first_seq,
                                               unit.last_seq, unit.message_ids, _head(unit.text),
                                               unit.end_ts)
            if cand.vector_rank is None:  # a message's best passage stands for it
                cand.vector_rank, cand.similarity = rank, sim
                rank += 1
        newest = max((c.ts for c in items.values()), default=0.0)
        top_kw = max((c.keyword_score for c in items.values()), default=0.0) or 1.0
        sims = [c.similarity for c in items.values() if c.vector_rank is not None]
        lo, hi = (min(sims), max(sims)) if sims else (0.0, 1.0)
        scored = [(self._fused(c, newest, top_kw, lo, hi), c) for c in items.values()]
        scored.sort(key=lambda p: (-p[0], -p[1].last_seq, p[1].id))
        if self.config.mmr_lambda is None:  # (hits are built for the ones returned only)
            return [self._hit(c, score) for score, c in scored[:limit]]
        return self._mmr([self._hit(c, score) for score, c in scored], limit)[:limit]

    def _beyond_vectors(self, words: SearchSpec, owed: Mapping[str, int]) -> list[GrepHit]:
        """The keyword hits among messages not embedded yet: conversations not embedded at
        all in one search, those partly embedded one search each from their first seq
        not embedded (more than ``_KEYWORD_SPANS`` of them: together, from the first)."""
        whole = tuple(sorted(c for c, first in owed.items() if first <= 1))
        partly = sorted((first, c) for c, first in owed.items() if first > 1)
        specs = [replace(words, conversation_ids=whole)] if whole else []
        if len(partly) > _KEYWORD_SPANS:
            specs.append(replace(words, conversation_ids=tuple(c for _, c in partly),
                                 min_seq=max(partly[0][0], words.min_seq or 0)))
        else:
            specs += [replace(words, conversation_ids=(c,), min_seq=max(first, words.min_seq or 0))
                      for first, c in partly]
        hits = [h for s in specs for h in self.store.search(s)]
        hits.sort(key=lambda h: (-h.score, h.id))
        return hits[: words.limit]

    def _fused(self, c: _Candidate, newest: float, top_kw: float, lo: float, hi: float) -> float:
        """RRF adds 1/(60+rank) per list; weighted adds each list's score scaled to [0, 1]
        (bm25 over the best bm25, cosine min-max over the candidates), so a strong keyword
        match is not outranked by many weak double matches."""
        w = self.config.vector_weight
        kw, vec = c.keyword_rank, c.vector_rank
        if self.config.fusion == "weighted":
            score = (1 - w) * (c.keyword_score / top_kw if kw is not None else 0.0)
            if vec is not None:
                score += w * ((c.similarity - lo) / (hi - lo) if hi > lo else 1.0)
        else:
            score = (1 - w) * (2 / (_RRF_K + kw) if kw is not None else 0.0)
            score += w * (2 / (_RRF_K + vec) if vec is not None else 0.0)
        half_life = self.config.recency_half_life_days
        if half_life:
            score *= math.pow(0.5, max(0.0, newest - c.ts) / 86400 / half_life)
        return round(score, 8)

    @staticmethod
    def _hit(c: _Candidate, score: float) -> RecallHit:
        return RecallHit(kind=c.kind, id=c.id, conversation_id=c.conversation_id, first_seq=c.first_seq,  # type: ignore[arg-type]
                         last_seq=c.last_seq, message_ids=c.message_ids, score=score, keyword_rank=c.keyword_rank,
                         vector_rank=c.vector_rank, snippet=c.snippet, end_ts=c.ts)

    def _vector(self, spec: SearchSpec, k: int, windows: bool) -> list[tuple[UnitRow, float]]:
        assert self.embedder is not None
        index = self.index_name()
        assert index is not None
        if spec.conversation_ids is not None:
            cids: Sequence[str] = spec.conversation_ids
        else:
            cids = [c.id for c in self.store.list_conversations(limit=10**9)]
        if len(cids) <= 200:  # (inline mode: a query refreshes what it searches; not thousands of them)
            for cid in cids:
                self.refresh(cid)
        qvec = self._query_vector(spec.query)
        kinds = None if windows else ["message"]  # None: one k-NN over both kinds
        pairs = self.index_store.knn(index, self.embedder.provider, self.embedder.model, cids, qvec, k * 2, kinds)
        text = spec.snippets or self.config.mmr_lambda is not None
        out: list[tuple[UnitRow, float]] = []
        since = timestamp(spec.since) if spec.since else None  # a naive bound is UTC, as the keyword filters read it
        until = timestamp(spec.until) if spec.until else None
        for start in range(0, len(pairs), k):  # read the units a batch at a time: most pass the filters
            batch = pairs[start : start + k]
            units = self.index_store.units([r for r, _ in batch], text=text)
            unread = self._unread(units, text)
            for rowid, sim in batch:
                u = units.get(rowid)
                if u is None or u.text_sha256 in unread:
                    continue
                if spec.max_seq is not None and u.last_seq > spec.max_seq:
                    continue
                if spec.roles and (u.kind != "message" or u.role not in spec.roles):
                    continue
                if (since is not None and u.end_ts < since) or (until is not None and u.start_ts > until):
                    continue
                out.append((u, sim))
            if len(out) >= k:
                break
        return out[:k]

    def _unread(self, units: Mapping[int, UnitRow], have_text: bool) -> set[str]:
        """The text hashes among ``units`` the embedder does not read. A store embedded
        before languages were told apart may hold vectors of such text: they rank at
        random, so the search leaves them out. Whether a text is read is remembered by its
        hash, so the texts are read once per process, not on every search."""
        if self.reader.reads_everything:
            return set()
        known = self._readable
        todo = [r for r, u in units.items() if u.text_sha256 not in known]
        if todo:
            texts = units if have_text else self.index_store.units(todo, text=True)
            if len(known) > _READABLE_KEPT:
                known.clear()
            for rowid in todo:
                if rowid in texts:
                    u = texts[rowid]
                    known[u.text_sha256] = self.reader.reads(u.text, labels=True)
        return {u.text_sha256 for u in units.values() if not known.get(u.text_sha256, True)}

    def _query_vector(self, query: str) -> np.ndarray:
        """The query's vector: computed once (:mod:`lossless.recall.queries`), through the
        cache (agents repeat questions)."""
        assert self.embedder is not None
        return self.queries.vector(self.embedder, self.index_store, query)

    def _mmr(self, hits: list[RecallHit], limit: int) -> list[RecallHit]:
        """Maximal marginal relevance over the candidates' text overlap: skip results that
        mostly repeat one already chosen (cheap, needs no vectors)."""
        lam = float(self.config.mmr_lambda or 0.0)
        chosen: list[RecallHit] = []
        seen: list[frozenset[str]] = []
        pool = [(h, _words(h.snippet)) for h in hits]  # each snippet's words read once
        top = max((h.score for h in hits), default=1.0) or 1.0
        while pool and len(chosen) < limit:
            best_i, best_v = 0, -1e9
            for i, (h, words) in enumerate(pool):
                overlap = max((len(words & s) / max(1, len(words | s)) for s in seen), default=0.0)
                value = lam * (h.score / top) - (1 - lam) * overlap
                if value > best_v:
                    best_i, best_v = i, value
            pick, words = pool.pop(best_i)
            chosen.append(pick)
            seen.append(words)
        return chosen + [h for h, _ in pool]

