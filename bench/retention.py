"""Retention benchmark: how much of the evidence and of the answer a budgeted context keeps.

Two dev sets of different shapes, so no default is fitted to one: BEAM-128k (``--set beam``,
the default: ``shared/data/beam-128k`` beside the repository or ``$LOSSLESS_BEAM_DATA``, see ``bench/beam.py``; long user–assistant
chats about code and plans, questions per BEAM ability) and a generated chit-chat set
(``--set chitchat --seed N``, see ``bench/chitchat.py``; two named people in short casual
turns over months, questions per category: single_hop, temporal, date, multi_hop,
open_inference). Each chat is fed, turn by turn, into a fresh lossless database with a
small window (8192 by default, so compaction really happens). Then, for every question
that names evidence messages, a context is built under each budget by each system, and we
measure what it holds.

Run::

    python bench/retention.py --no-vectors                     # keyword only: ~1 min
    python bench/retention.py --chats 1 2 --no-vectors         # two chats: ~8 s
    python bench/retention.py --embed-cache /tmp/retention-emb.sqlite \\
        --json /tmp/retention.json --plot /tmp/retention.png   # with vectors
    python bench/retention.py --budgets 1024 2048 4096 --window 8192 --ingest-unit turn
    python bench/retention.py --set chitchat --embed-cache /tmp/chitchat-emb.sqlite \\
        --window-equals-budget --json /tmp/chitchat.json      # ~15 min first, then ~5

With vectors, embedding the retrieval units at ingest (~17.6K passages and QA windows for
the 20 chats) dominates: ~16 min on 2 CPU cores; the evaluation itself takes ~1-2 min.
``--embed-cache`` keeps the vectors in a SQLite file, so a re-run takes ~2 min (its ingest
times then exclude the model, which the per-chat ``embed_s`` / ``embed_cache_hits`` say).

Systems:
  lossless  ``conv.assemble(budget_tokens=B, query=question)``
  lossless-wb  (with ``--window-equals-budget``) the same chat in a store opened with
            ``context_window=B``, assembled with ``budget_tokens=B``: the whole-window case
  recent    the newest whole messages that fit in B (what a sliding window keeps)
  bm25      plain Okapi BM25 (k1 1.2, b 0.75, lower-case ``\\w+`` words, stopwords kept)
            over whole messages, written here (``bench/baselines.py``), not lossless's
            search; its ranking added greedily while it fits (one message that does not
            fit is skipped), shown in time order
  vector    the same embedder lossless is given (local MiniLM), cosine over whole
            messages, packed the same way
  hybrid    reciprocal-rank fusion (k = 60) of bm25 and vector, packed the same way
  fts       messages ranked by lossless's ``conv.search(question, mode="fts")`` (top 200),
            packed the same way (this was ``bm25`` before the baselines above existed)
  semantic  the same by ``mode="semantic"`` (was ``vector``); vector, hybrid and semantic
            need the local embedder and are left out with ``--no-vectors``
  full      the whole chat, unbudgeted: the upper bound of what any context could hold
  evidence  a reference, not a baseline: the question's evidence messages themselves, whole,
            in time order, the last one cut (by words) to fit B — what a perfect retriever
            that shows nothing else would give. Its answer_recall says how much of the
            reference's vocabulary the evidence holds at all; the rest comes from elsewhere
            in the chat.

Every context is a list of OpenAI-style messages; budgets are counted the way the API
bills them (``lossless.core.tokens.count_chat_tokens``, cl100k_base). The baselines' messages
are shown verbatim without headers.

Metrics (per question, then averaged over questions; also per ability and per chat):
  evidence_hit   for each evidence message (``source_chat_ids``), split into sentences and
                 lines (whitespace normalised); the characters of its sentences of >= 20
                 characters that occur verbatim in the context text, over the characters of
                 all such sentences; averaged over the question's evidence messages. A
                 summary that quotes a sentence verbatim earns it; a paraphrase does not.
  evidence_full  the share of evidence messages whose whole normalised text is in the context
  answer_recall  the share of the reference's content words found as words of the context.
                 The reference is the question's ``answer`` (else ``ideal_answer`` /
                 ``ideal_response`` / ``ideal_summary``) plus its ``rubric`` items (their
                 "LLM response should state:" framing removed); words are lower-cased,
                 punctuation stripped (apostrophes dropped; ``12.99``, ``1,000``, ``10:30``,
                 ``v1.0.0``, ``app.py`` kept whole),
                 stopwords and words under 3 characters (except numbers) dropped. No stemming.
                 A date is one word whatever its spelling (``2023-05-14``, ``14 May 2023``,
                 ``May 14th, 2023``); a date without a year matches on month and day only, so
                 it earns half of a dated reference.
  tokens         the context's size; ms: time to build one context (p50 and p99). The
                 baselines look messages up in an in-memory copy of the chat, so their time
                 is the store call (``messages()`` or ``search()``) plus packing. Each
                 build embeds its query afresh, unless ``--embed-cache`` already holds it.
  target         lossless answer_recall at 4096 / full answer_recall (goal >= 0.95), and
                 whether lossless beats every baseline at every budget on evidence_hit
                 and answer_recall.
  versus         whether lossless beats ``hybrid`` at every budget on answer_recall and
                 evidence_full, overall and per category (the compact table at the end).

Questions without evidence ids (all of ``abstention``, a few others) are skipped and
counted; evidence ids that name no message are dropped and reported. Nothing in the data
is special-cased. Output is deterministic except for the timings. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any, NamedTuple

sys.path.insert(0, str(Path(__file__).parent))
import baselines
import beam
import chitchat
from embed_cache import TimedEmbedder, load_embedder
from retention_report import (
    BASELINES,
    EVIDENCE,
    FULL,
    METRICS,
    UNBUDGETED,
    aggregate,
    beats,
    compact,
    plot,
    report,
    target_check,
)

import lossless
from lossless.core.render import chat_message_text
from lossless.core.tokens import MESSAGE_OVERHEAD, NAME_OVERHEAD, REPLY_PRIMING, count_chat_tokens

__all__ = ["BASELINES", "EVIDENCE", "FULL", "METRICS", "SYSTEMS", "UNBUDGETED", "TimedEmbedder", "load_embedder"]

SYSTEMS = ("lossless", "recent", "bm25", "vector", "hybrid", "fts", "semantic")
NEEDS_VECTORS = ("vector", "hybrid", "semantic")
WINDOW_EQUALS_BUDGET = "lossless-wb"  # lossless opened with context_window = the budget
SEARCH_LIMIT = 200
MIN_SENTENCE = 20

_STOPWORD_TEXT = """
a about above after again against all also am an and any are aren as at be because been before being below
between both but by can cannot could couldn did didn do does doesn doing don down during each either else
ever every few for from further had hadn has hasn have haven having he her here hers herself him himself his
how however i if in into is isn it its itself just let lets may me might more most must mustn my myself no
nor not now of off on once only or other ought our ours ourselves out over own per same shall shan she
should shouldn so some such than that the their theirs them themselves then there these they this those
through to too under until up upon us very via was wasn we were weren what when where which while who whom
whose why will with won would wouldn yet you your yours yourself yourselves
dont doesnt didnt isnt arent wasnt werent hasnt havent hadnt wont wouldnt shouldnt couldnt cant mustnt
im ive id ill youre youve youd youll hes shes its weve were wed well theyre theyve theyd theyll thats
theres whats wheres whos hows lets heres e.g i.e etc
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())

_WS = re.compile(r"\s+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_APOSTROPHE = re.compile(r"['’`]")
_TOKEN = re.compile(r"\d+(?:[.,:]\d+)+|[^\W_]+(?:\.[^\W_]+)*")
_NUMBER = re.compile(r"\d+(?:[.,:]\d+)*")

# dates in any of the usual spellings become one word, so "2023-05-14", "14 May 2023" and
# "May 14th, 2023" match each other; a date without a year matches on month and day only
_MONTH_NAMES = ("january", "february", "march", "april", "may", "june", "july", "august", "september",
                "october", "november", "december")
_MONTH = {**{m: i for i, m in enumerate(_MONTH_NAMES, 1)}, **{m[:3]: i for i, m in enumerate(_MONTH_NAMES, 1)},
          "sept": 9}
_MONTH_RE = "(" + "|".join(sorted(_MONTH, key=len, reverse=True)) + r")\.?"
_DAY_RE = r"(\d{1,2})(?:st|nd|rd|th)?"
_DATES = (
    ("ymd", re.compile(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b")),
    ("dmy", re.compile(rf"\b{_DAY_RE}\s+(?:of\s+)?{_MONTH_RE}(?:,?\s+(\d{{4}}))?\b", re.I)),
    ("mdy", re.compile(rf"\b{_MONTH_RE}\s+{_DAY_RE}(?:,?\s+(\d{{4}}))?\b", re.I)),
)


# -- text measures -------------------------------------------------------------------------

def normalize(text: str) -> str:
    return _WS.sub(" ", text).strip()


def evidence_units(content: str) -> list[str]:
    """The sentences/lines of a message (normalised) that are long enough to count; the
    whole message when it has none."""
    units = [s for line in content.splitlines() for s in (normalize(p) for p in _SENTENCE_END.split(line))
             if len(s) >= MIN_SENTENCE]
    if not units:
        whole = normalize(content)
        units = [whole] if whole else []
    return units


def _date_word(year: str | None, month: int, day: int, original: str) -> str:
    try:
        date(int(year) if year else 2000, month, day)  # 2000: a leap year, so 29 February passes
    except ValueError:
        return original
    both = f" md{month:02d}{day:02d} "
    return f" d{year}{month:02d}{day:02d}{both}" if year else both


def normalize_dates(text: str) -> str:
    """Each date as ``d20230514 md0514`` (with a year) or ``md0514`` (without)."""
    for form, pattern in _DATES:
        def sub(m: re.Match[str], form: str = form) -> str:
            g = m.groups()
            if form == "ymd":
                return _date_word(g[0], int(g[1]), int(g[2]), m.group(0))
            if form == "dmy":
                return _date_word(g[2], _MONTH[g[1].lower()], int(g[0]), m.group(0))
            return _date_word(g[2], _MONTH[g[0].lower()], int(g[1]), m.group(0))
        text = pattern.sub(sub, text)
    return text


def words(text: str) -> list[str]:
    return _TOKEN.findall(normalize_dates(_APOSTROPHE.sub("", text.lower())))


def content_words(texts: Iterable[str]) -> set[str]:
    out: set[str] = set()
    for text in texts:
        for w in words(text):
            if w in STOPWORDS or (len(w) < 3 and not _NUMBER.fullmatch(w)):
                continue
            out.add(w)
    return out


@dataclass(frozen=True, slots=True)
class Evidence:
    units: tuple[str, ...]
    total: int
    whole: str


def evidence_of(content: str) -> Evidence:
    units = tuple(evidence_units(content))
    return Evidence(units, sum(len(u) for u in units), normalize(content))


@dataclass(slots=True)
class ContextView:
    """A built context as the metrics see it."""

    text: str  # normalised
    words: set[str]
    tokens: int
    ms: float

    @classmethod
    def of(cls, messages: Sequence[Any], tokens: int, ms: float) -> ContextView:
        raw = "\n".join(chat_message_text(m) for m in messages)
        return cls(normalize(raw), set(words(raw)), tokens, ms)


def score(view: ContextView, evidence: Sequence[Evidence], reference: set[str]) -> dict[str, float | None]:
    hits = [sum(len(u) for u in ev.units if u in view.text) / ev.total if ev.total else 0.0 for ev in evidence]
    full = [1.0 if ev.whole and ev.whole in view.text else 0.0 for ev in evidence]
    return {
        "evidence_hit": sum(hits) / len(hits),
        "evidence_full": sum(full) / len(full),
        "answer_recall": len(reference & view.words) / len(reference) if reference else None,
    }


# -- one chat in a lossless store -----------------------------------------------------------

@dataclass
class ChatRun:
    chat: beam.BeamChat
    mem: lossless.Memory
    conv: lossless.Conversation
    by_seq: dict[int, lossless.Message]
    seq_of_id: dict[int, int]
    ingest_s: float
    stats: dict[str, Any]
    index: baselines.MessageIndex | None = None  # the bm25 / vector / hybrid baselines' own
    order: list[lossless.Message] = field(default_factory=list)  # the index's positions

    def attach_index(self, embedder: Any) -> float:
        """Build the baselines' index over the whole messages; the seconds it took."""
        t0 = time.perf_counter()
        self.order = [self.by_seq[s] for s in sorted(self.by_seq)]
        texts = [baselines.indexed_text(m.text, m.name) for m in self.order]
        self.index = baselines.MessageIndex.build(texts, embedder)
        return time.perf_counter() - t0

    def cost(self, m: lossless.Message) -> int:
        """What one whole message adds to a context (count_chat_tokens' accounting)."""
        extra = NAME_OVERHEAD + self.mem.counter.count(m.name) if m.name else 0
        return MESSAGE_OVERHEAD + m.token_count + extra


def ingest(chat: beam.BeamChat, folder: Path, window: int, embedder: Any, unit: str) -> ChatRun:
    # inline: the conversation grows turn by turn and compaction keeps up between turns (what
    # a worker thread does in an agent's loop), the same DAG on every run
    mem = lossless.open(folder / f"chat-{chat.number}-w{window}.db", context_window=window, embedder=embedder,
                        compaction="inline")
    conv = mem.conversation(f"beam-{chat.number}")
    by_id = chat.by_id()
    groups = chat.turns if unit == "turn" else _batches(chat)
    t0 = time.perf_counter()
    for ids in groups:
        conv.add_many([{"role": by_id[i].role, "content": by_id[i].content, "created_at": by_id[i].created_at,
                        "external_id": str(i), **({"name": by_id[i].name} if by_id[i].name else {})}
                       for i in ids])
    index = getattr(conv, "index", None)
    if embedder is not None and callable(index):
        index()  # embed what is still pending now, not lazily inside the first query
    ingest_s = time.perf_counter() - t0
    stored = conv.messages()
    by_seq = {m.seq: m for m in stored}
    seq_of_id = {int(m.external_id): m.seq for m in stored if m.external_id is not None}
    return ChatRun(chat, mem, conv, by_seq, seq_of_id, ingest_s, conv.stats())


def _batches(chat: beam.BeamChat) -> list[tuple[int, ...]]:
    out: dict[int, list[int]] = defaultdict(list)
    for m in chat.messages:
        out[m.batch].append(m.id)
    return [tuple(v) for _, v in sorted(out.items())]


# -- the systems ---------------------------------------------------------------------------

class Built(NamedTuple):
    """A context as a system returned it: messages, their size, and (lossless only)
    the tokens each tier took (``ctx.tier_tokens()``)."""

    messages: list[Any]
    tokens: int
    tiers: dict[str, int] | None = None


Builder = Callable[["ChatRun", str, int], Built]


def build_lossless(run: ChatRun, question: str, budget: int) -> Built:
    ctx = run.conv.assemble(budget_tokens=budget, query=question)
    return Built(list(ctx.messages), ctx.tokens, ctx.tier_tokens())


def build_recent(run: ChatRun, question: str, budget: int) -> Built:
    del question  # a sliding window ignores the question
    picked: list[lossless.Message] = []
    total = REPLY_PRIMING
    for m in reversed(run.conv.messages()):
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
            if m is None or m.seq in picked:
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


BUILDERS: dict[str, Builder] = {
    "lossless": build_lossless,
    "recent": build_recent,
    "bm25": index_builder(baselines.MessageIndex.rank_bm25),
    "vector": index_builder(baselines.MessageIndex.rank_vector),
    "hybrid": index_builder(baselines.MessageIndex.rank_hybrid),
    "fts": ranked_builder("fts"),
    "semantic": ranked_builder("semantic"),
}


def build_evidence(run: ChatRun, seqs: Sequence[int], budget: int) -> Built:
    """The evidence messages, whole and in time order, the first that does not fit cut by
    words to what does (nothing after it)."""
    picked: list[dict[str, Any]] = []
    for seq in sorted(set(seqs)):
        m = run.by_seq[seq]
        chat = m.to_chat()
        if count_chat_tokens(run.mem.counter, [*picked, chat]) <= budget:
            picked.append(chat)
            continue
        words = m.text.split()
        lo, hi = 0, len(words)
        while lo < hi:  # the most words that fit
            mid = (lo + hi + 1) // 2
            cut = {"role": m.role, "content": " ".join(words[:mid])}
            if count_chat_tokens(run.mem.counter, [*picked, cut]) <= budget:
                lo = mid
            else:
                hi = mid - 1
        if lo:
            picked.append({"role": m.role, "content": " ".join(words[:lo])})
        break
    return Built(picked, count_chat_tokens(run.mem.counter, picked))


def build_full(run: ChatRun) -> ContextView:
    t0 = time.perf_counter()
    msgs = [m.to_chat() for m in run.conv.messages()]
    ms = (time.perf_counter() - t0) * 1000
    return ContextView.of(msgs, count_chat_tokens(run.mem.counter, msgs), ms)


# -- the run -------------------------------------------------------------------------------

@dataclass
class Skips:
    no_evidence: Counter[str] = field(default_factory=Counter)
    unknown_ids: list[dict[str, Any]] = field(default_factory=list)
    no_reference: list[str] = field(default_factory=list)
    budget_violations: list[dict[str, Any]] = field(default_factory=list)


def _question_inputs(run: ChatRun, q: beam.BeamQuestion, skips: Skips | None
                     ) -> tuple[list[Evidence], set[str], list[int]] | None:
    """The question's evidence, reference words and evidence seqs; None (and counted in
    ``skips`` when given) for a question that cannot be scored."""
    if not q.evidence_ids:
        if skips is not None:
            skips.no_evidence[q.ability] += 1
        return None
    missing = [i for i in q.evidence_ids if i not in run.seq_of_id]
    if missing and skips is not None:
        skips.unknown_ids.append({"question": q.key, "ids": missing})
    seqs = [run.seq_of_id[i] for i in q.evidence_ids if i in run.seq_of_id]
    if not seqs:
        if skips is not None:
            skips.no_evidence[q.ability] += 1
        return None
    reference = content_words(q.reference)
    if not reference and skips is not None:
        skips.no_reference.append(q.key)
    return [evidence_of(run.by_seq[s].text) for s in seqs], reference, seqs


def evaluate_chat(run: ChatRun, systems: Sequence[str], budgets: Sequence[int], skips: Skips, *,
                  label: dict[str, str] | None = None, references: bool = True) -> list[dict[str, Any]]:
    """One record per (question, system, budget), plus (with ``references``) one per
    question for ``full`` and one per budget for ``evidence``. ``label`` renames systems in
    the records (the window = budget runs); without ``references`` skipped questions are
    not counted again."""
    full = build_full(run) if references else None
    records: list[dict[str, Any]] = []
    questions = list(run.chat.questions)
    extra = (EVIDENCE,) if references else ()
    for n, q in enumerate(questions, 1):
        inputs = _question_inputs(run, q, skips if references else None)
        if inputs is None:
            continue
        evidence, reference, seqs = inputs
        base = {"chat": q.chat, "ability": q.ability, "question": q.key, "evidence": len(evidence),
                "reference_words": len(reference)}
        if full is not None:
            records.append({**base, "system": FULL, "budget": UNBUDGETED, "tokens": full.tokens,
                            "ms": round(full.ms, 3), **score(full, evidence, reference)})
        for budget in budgets:
            for system in (*systems, *extra):
                t0 = time.perf_counter()
                msgs, tokens, tiers = (build_evidence(run, seqs, budget) if system == EVIDENCE
                                       else BUILDERS[system](run, q.question, budget))
                ms = (time.perf_counter() - t0) * 1000
                name = (label or {}).get(system, system)
                billed = count_chat_tokens(run.mem.counter, msgs)
                if billed > budget or tokens != billed:
                    skips.budget_violations.append({"question": q.key, "system": name, "budget": budget,
                                                    "reported": tokens, "counted": billed})
                view = ContextView.of(msgs, billed, ms)
                records.append({**base, "system": name, "budget": budget, "tokens": billed, "ms": round(ms, 3),
                                **score(view, evidence, reference), **({"tiers": tiers} if tiers is not None else {})})
        if references and (n % 5 == 0 or n == len(questions)):
            print(f"  chat {run.chat.number}: {n}/{len(questions)} questions", file=sys.stderr, flush=True)
    return records


# -- aggregation and output ----------------------------------------------------------------

def _code_version() -> str:
    """The commit the library is at, ``-dirty`` if its package folder has uncommitted
    edits (the benchmark's own files do not count), for the record."""
    where = Path(lossless.__file__).parent
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=where, capture_output=True, text=True,
                              timeout=10, check=False).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "."], cwd=where, capture_output=True,
                               text=True, timeout=10, check=False).stdout.strip()
    except OSError:
        return "unknown"
    return (head or "unknown") + ("-dirty" if dirty else "")


def _embed_counts(embedder: TimedEmbedder | None) -> tuple[float, int, int]:
    if embedder is None:
        return 0.0, 0, 0
    return embedder.seconds, embedder.texts, embedder.cache_hits


def _args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--set", choices=("beam", "chitchat"), default="beam",
                    help="the dev set: BEAM-128k (default) or the generated chit-chat set")
    ap.add_argument("--seed", type=int, default=chitchat.DEFAULT_SEED, help="the chit-chat set's seed")
    ap.add_argument("--conversations", type=int, default=chitchat.DEFAULT_CONVERSATIONS,
                    help="how many chit-chat conversations to generate")
    ap.add_argument("--data", type=Path, default=beam.DEFAULT_DATA, help="the BEAM dev set folder")
    ap.add_argument("--chats", type=int, nargs="+", help="chat numbers (default: all)")
    ap.add_argument("--budgets", type=int, nargs="+", default=[1024, 2048, 4096])
    ap.add_argument("--window", type=int, default=8192, help="context_window of each store")
    ap.add_argument("--window-equals-budget", action="store_true",
                    help=f"also run {WINDOW_EQUALS_BUDGET!r}: for each budget B a store opened with "
                         "context_window=B, assembled with budget_tokens=B")
    ap.add_argument("--ingest-unit", choices=("turn", "batch"), default="turn",
                    help="add_many per turn (default) or per BEAM batch (per session in chit-chat)")
    ap.add_argument("--no-vectors", action="store_true",
                    help="no embedder: no vector, hybrid or semantic baseline")
    ap.add_argument("--embed-cache", type=Path, metavar="FILE",
                    help="keep embeddings in this SQLite file across runs (re-runs skip the model; "
                         "ingest times then no longer include embedding)")
    ap.add_argument("--json", type=Path, help="write every number here")
    ap.add_argument("--plot", type=Path, help="write a PNG of answer_recall/evidence_hit vs budget")
    return ap.parse_args(argv)


def load_set(args: argparse.Namespace) -> list[beam.BeamChat]:
    if args.set == "chitchat":
        chats = chitchat.generate(args.seed, args.conversations)
        return [c for c in chats if not args.chats or c.number in args.chats]
    return [beam.load_chat(n, args.data) for n in (args.chats or beam.chat_numbers(args.data))]


def run_chat(chat: beam.BeamChat, args: argparse.Namespace, folder: Path, embedder: TimedEmbedder | None,
             systems: Sequence[str], budgets: Sequence[int], skips: Skips) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Ingest one chat, build every context, score it: its records and its ingest line."""
    before = _embed_counts(embedder)
    run = ingest(chat, folder, args.window, embedder, args.ingest_unit)
    after = _embed_counts(embedder)
    info: dict[str, Any] = {
        "chat": chat.number, "topic": chat.topic, "messages": len(chat.messages),
        "tokens": run.stats["message_tokens"], "ingest_s": round(run.ingest_s, 2),
        "summaries": run.stats["summaries"], "max_depth": run.stats["max_depth"],
        "raw_tail_messages": run.stats["raw_tail_messages"], "embed_s": round(after[0] - before[0], 2),
        "embedded_texts": after[1] - before[1], "embed_cache_hits": after[2] - before[2]}
    info["baseline_index_s"] = round(run.attach_index(embedder), 2)
    print(f"chat {chat.number}: {info['messages']} messages, {info['tokens']} tokens ingested in "
          f"{info['ingest_s']}s ({info['embed_s']}s embedding {info['embedded_texts']} texts, "
          f"{info['embed_cache_hits']} from the cache), {info['summaries']} summaries "
          f"(depth {info['max_depth']}); baseline index {info['baseline_index_s']}s", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    records = evaluate_chat(run, systems, budgets, skips)
    run.mem.close()
    if args.window_equals_budget:
        for budget in budgets:
            wb = ingest(chat, folder, budget, embedder, args.ingest_unit)
            records.extend(evaluate_chat(wb, ["lossless"], [budget], skips,
                                         label={"lossless": WINDOW_EQUALS_BUDGET}, references=False))
            wb.mem.close()
    info["evaluate_s"] = round(time.perf_counter() - t0, 2)
    return records, info


def main(argv: Sequence[str] | None = None) -> int:
    args = _args(argv)
    budgets = sorted(set(args.budgets))
    systems = [s for s in SYSTEMS if not (args.no_vectors and s in NEEDS_VECTORS)]
    t_start = time.perf_counter()
    version = _code_version()  # now, not at the end: the library may be edited meanwhile
    embedder: TimedEmbedder | None = None
    if not args.no_vectors:
        t0 = time.perf_counter()
        embedder = load_embedder(args.embed_cache)
        print(f"embedder loaded in {time.perf_counter() - t0:.1f}s", file=sys.stderr, flush=True)

    chats = load_set(args)
    records: list[dict[str, Any]] = []
    ingests: list[dict[str, Any]] = []
    skips = Skips()
    with tempfile.TemporaryDirectory(prefix="lossless-retention-") as tmp:
        for chat in chats:
            chat_records, info = run_chat(chat, args, Path(tmp), embedder, systems, budgets, skips)
            records.extend(chat_records)
            ingests.append(info)
    if embedder is not None:
        embedder.close()
    if args.window_equals_budget:
        systems.append(WINDOW_EQUALS_BUDGET)
    result = _result(args, [c.number for c in chats], budgets, systems, version, records, ingests, skips)
    result["total_s"] = round(time.perf_counter() - t_start, 2)
    _print(result, skips)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    if args.plot:
        args.plot.parent.mkdir(parents=True, exist_ok=True)
        plot(result, args.plot)
    return 0


def _result(args: argparse.Namespace, chats: list[int], budgets: list[int], systems: list[str], version: str,
            records: list[dict[str, Any]], ingests: list[dict[str, Any]], skips: Skips) -> dict[str, Any]:
    by_ability: dict[str, list[dict[str, Any]]] = defaultdict(list)
    by_chat: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        by_ability[r["ability"]].append(r)
        by_chat[r["chat"]].append(r)
    overall = aggregate(records)
    result: dict[str, Any] = {
        "config": {"set": args.set, "seed": args.seed if args.set == "chitchat" else None,
                   "data": str(args.data) if args.set == "beam" else None, "chats": chats, "budgets": budgets,
                   "window": args.window, "window_equals_budget": args.window_equals_budget,
                   "systems": systems, "ingest_unit": args.ingest_unit, "vectors": not args.no_vectors,
                   "search_limit": SEARCH_LIMIT, "min_sentence_chars": MIN_SENTENCE,
                   "questions": sum(1 for r in records if r["system"] == FULL),
                   "bm25": {"k1": baselines.K1, "b": baselines.B, "tokenizer": r"lower-case \w+",
                            "stopwords": "kept"},
                   "rrf_k": baselines.RRF_K,
                   "embed_cache": str(args.embed_cache) if args.embed_cache else None,
                   "lossless_version": version},
        "ingest": ingests,
        "ingest_s_total": round(sum(i["ingest_s"] for i in ingests), 2),
        "embed_s_ingest_total": round(sum(i["embed_s"] for i in ingests), 2),
        "evaluate_s_total": round(sum(i["evaluate_s"] for i in ingests), 2),
        "overall": overall,
        "target": target_check(overall, systems, budgets),
        "by_ability": {ab: aggregate(rs) for ab, rs in sorted(by_ability.items())},
        "by_chat": {str(c): aggregate(rs) for c, rs in sorted(by_chat.items())},
        "skipped": {"no_evidence_by_ability": dict(sorted(skips.no_evidence.items())),
                    "unknown_evidence_ids": skips.unknown_ids, "no_reference_words": skips.no_reference,
                    "budget_violations": skips.budget_violations},
        "questions": records,
    }
    result["versus"] = beats(result)
    return result


def _print(result: dict[str, Any], skips: Skips) -> None:
    n = result["config"]["questions"]
    print(report(result))
    print("\n" + compact(result))
    print(f"\n{n} questions from {len(result['config']['chats'])} chats ({result['config']['set']}); skipped "
          f"without evidence: {sum(skips.no_evidence.values())} {dict(sorted(skips.no_evidence.items()))}; unknown "
          f"evidence ids: {len(skips.unknown_ids)}; without reference words: {len(skips.no_reference)}; budget "
          f"violations: {len(skips.budget_violations)}")
    print(f"ingest {result['ingest_s_total']}s (embedding {result['embed_s_ingest_total']}s), "
          f"contexts and metrics {result['evaluate_s_total']}s, total {result['total_s']}s")


if __name__ == "__main__":
    raise SystemExit(main())
