"""Retention benchmark: how much of the evidence and of the answer a budgeted context keeps.

Four dev sets of different shapes and two languages, so no default is fitted to one:

  beam         BEAM-128k (the default set: ``shared/data/beam-128k`` beside the repository or
               ``$LOSSLESS_BEAM_DATA``, see ``bench/beam.py``): long user–assistant chats about
               code and plans, questions per BEAM ability with evidence ids
  chitchat     generated here (``--seed N``, see ``bench/chitchat.py``): two named people in
               short casual turns over months; single_hop, temporal, date, multi_hop,
               open_inference questions with evidence ids
  longmemeval  a 30-question sample of LongMemEval-S (``bench/longmemeval.py``): each question
               its own 6 sessions of real user–assistant chats, one day per session (the data
               has no dates); no evidence ids, so answer_recall only
  madial       MADial-Bench, Chinese (``bench/madial.py``): per user, the memory events told
               to the assistant on their dates; per dialogue, the dialogue so far as the
               query (``--madial-live``: also appended to the conversation, never counted
               as evidence) and the relevant memories recalled; window 2048, budgets 512
               and 1024
  all          the four in one run, then one table (rows: systems, columns: set@budget, each
               set's own metric named in its columns)

Each chat is fed, turn by turn, into a fresh lossless database with a small window (8192 by
default, 2048 for madial, so compaction really happens). Then, for every question that can be
scored, a context is built under each budget by each system, and we measure what it holds.

Run::

    python bench/retention.py --set all --no-vectors --json /tmp/all.json        # ~4 min
    python bench/retention.py --set all --embed-cache /tmp/retention-emb.sqlite \\
        --json /tmp/all-vec.json                    # ~36 min the first time, ~3.5 min after
    python bench/retention.py --no-vectors                     # BEAM, keyword only: ~3 min
    python bench/retention.py --chats 1 2 --no-vectors         # two chats: ~15 s
    python bench/retention.py --set madial --chats 1 2 --no-vectors   # two dialogues: ~2 s
    python bench/retention.py --set chitchat --embed-cache /tmp/chitchat-emb.sqlite \\
        --window-equals-budget --json /tmp/chitchat.json --plot /tmp/chitchat.png

With vectors, embedding the retrieval units at ingest dominates (BEAM: ~17.6K passages and QA
windows for the 20 chats, 16–21 min on 2 shared CPU cores). ``--embed-cache`` keeps the vectors in a
SQLite file (one file serves every set), so a re-run skips the model (its ingest times then
exclude it, which the per-chat ``embed_s`` / ``embed_cache_hits`` say).

Systems:
  lossless  ``conv.assemble(budget_tokens=B, query=question)``, the store opened with the
            embedder the run has (the local MiniLM; none with ``--no-vectors``)
  lossless-kw  the same chat in a store opened with ``embedder=None``: lossless keyword-only,
            its own row when the run has vectors (``--no-keyword-only`` leaves it out)
  lossless-wb  (with ``--window-equals-budget``) the same chat in a store opened with
            ``context_window=B``, assembled with ``budget_tokens=B``: the whole-window case
  recent    the newest whole messages that fit in B (what a sliding window keeps)
  bm25      plain Okapi BM25 (k1 1.2, b 0.75, lower-case ``\\w+`` words, a CJK run as its
            character bigrams, stopwords kept) over whole messages, written here
            (``bench/baselines.py``), not lossless's search; its ranking added greedily while
            it fits (one message that does not fit is skipped), shown in time order
  bm25-dated  (``--dated-baseline``) bm25's ranking shown as the design obliges lossless to show
            a recalled message: one system message under lossless's memory and recall
            headers, each message as ``#seq role: text`` under its date line, packed the same
            way. It separates ranking from the room those obligations take
  vector    the same embedder lossless is given (local MiniLM), cosine over whole
            messages, packed the same way
  hybrid    reciprocal-rank fusion (k = 60) of bm25 and vector, packed the same way
  fts       messages ranked by lossless's ``conv.search(question, mode="fts")`` (top 200),
            packed the same way
  semantic  the same by ``mode="semantic"``; vector, hybrid and semantic need the local
            embedder and are left out with ``--no-vectors``
  full      the whole chat, unbudgeted: the upper bound of what any context could hold
  evidence  a reference, not a baseline: the question's evidence messages themselves, whole,
            in time order, the last one cut (by words, by characters for CJK) to fit B —
            what a perfect retriever that shows nothing else would give.

With ``--madial-live`` the dialogue of a MADial question (the turns before the one being
answered) is in lossless's conversation, as a live agent's is; the baselines rank only the
history (the dialogue is their query). Every metric cuts the dialogue's text out of a
context first.

Every context is a list of OpenAI-style messages; budgets are counted the way the API
bills them (``lossless.core.tokens.count_chat_tokens``, cl100k_base). The baselines' messages
are shown verbatim without headers.

Metrics (per question, then averaged over questions; also per ability and per chat; the
text rules, CJK included, are in ``bench/retention_text.py``):
  evidence_hit   for each evidence message (``source_chat_ids``), split into sentences and
                 lines (whitespace normalised; also at 。！？；); the characters of its
                 sentences of >= 20 characters (>= 8 CJK characters) that occur verbatim in
                 the context text, over the characters of all such sentences; averaged over
                 the question's evidence messages. A summary that quotes a sentence
                 verbatim earns it; a paraphrase does not.
  evidence_full  the share of evidence messages whose whole normalised text is in the context
  answer_recall  the share of the reference's content words found as words of the context.
                 The reference is the question's ``answer`` (else ``ideal_answer`` /
                 ``ideal_response`` / ``ideal_summary``) plus its ``rubric`` items (their
                 "LLM response should state:" framing removed); LongMemEval's cleaned
                 ``expected_answer``; MADial's reference reply without the dialogue's words.
                 Words are lower-cased, punctuation stripped (apostrophes dropped; ``12.99``,
                 ``1,000``, ``10:30``, ``v1.0.0``, ``app.py`` kept whole), stopwords and words
                 under 3 characters (except numbers) dropped; a CJK run is its character
                 bigrams. No stemming. A date is one word whatever its spelling
                 (``2023-05-14``, ``14 May 2023``, ``May 14th, 2023``); a date without a year
                 matches on month and day only, so it earns half of a dated reference.
  memory_recall  (madial) per relevant memory, the share of its key phrases (distinctive
                 clauses) found verbatim, averaged; gold_recall: the first relevant memory's
  tokens         the context's size; ms: time to build one context (p50 and p99). The
                 baselines look messages up in an in-memory copy of the chat, so their time
                 is the store call (``messages()`` or ``search()``) plus packing. Each
                 build embeds its query afresh, unless ``--embed-cache`` already holds it.
  target         lossless answer_recall at 4096 (the largest budget) / full answer_recall
                 (goal >= 0.95), and whether lossless beats every baseline at every budget
                 on the set's metrics.
  versus         whether lossless beats ``hybrid`` at every budget on the set's compact
                 metrics, overall and per category (the compact table at the end).

Questions without evidence ids (all of BEAM's ``abstention``, a few others) are skipped
and counted, except in LongMemEval, which has none and is scored on answers alone; there a
question whose reference is only one- or two-digit numbers (a count computed over sessions,
"3") is skipped and counted. Evidence ids that name no message are dropped and reported. Nothing in the data is
special-cased. Output is deterministic except for the timings. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
import baselines
import beam
import chitchat
import longmemeval
import madial
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
    four_sets,
    plot,
    report,
    table,
    target_check,
)
from retention_systems import (
    BUILDERS,
    SEARCH_LIMIT,
    Built,
    ChatRun,
    build_evidence,
    build_full,
    db_path,
    extend,
    ingest,
)
from retention_text import (
    MIN_SENTENCE,
    MIN_SENTENCE_CJK,
    STOPWORDS,
    ContextView,
    Evidence,
    content_words,
    evidence_of,
    evidence_units,
    normalize,
    score,
    words,
)
from tier_yield import tier_scores, yield_rows

import lossless
from lossless.core.tokens import count_chat_tokens

__all__ = ["BASELINES", "BUILDERS", "EVIDENCE", "FULL", "METRICS", "MIN_SENTENCE", "STOPWORDS", "SYSTEMS",
           "UNBUDGETED", "Built", "ChatRun", "ContextView", "Evidence", "TimedEmbedder", "content_words",
           "evidence_of", "evidence_units", "ingest", "load_embedder", "normalize", "score", "words"]

SYSTEMS = ("lossless", "recent", "bm25", "vector", "hybrid", "fts", "semantic")
NEEDS_VECTORS = ("vector", "hybrid", "semantic")
WINDOW_EQUALS_BUDGET = "lossless-wb"  # lossless opened with context_window = the budget
KEYWORD_ONLY = "lossless-kw"  # lossless opened with embedder=None
DATED_BM25 = "bm25-dated"  # bm25's ranking under lossless's headers, dates and line heads
SETS = ("beam", "chitchat", "longmemeval", "madial")


@dataclass(frozen=True, slots=True)
class SetShape:
    """What differs between the sets: their defaults and the metrics they are judged on."""

    window: int
    budgets: tuple[int, ...]
    headline: str  # the one metric of the four-set table
    compact_metrics: tuple[str, ...]
    target_metrics: tuple[str, ...]


_ENGLISH = SetShape(8192, (1024, 2048, 4096), "answer_recall", ("answer_recall", "evidence_full"),
                    ("evidence_hit", "answer_recall"))
SHAPES = {
    "beam": _ENGLISH,
    "chitchat": _ENGLISH,
    "longmemeval": SetShape(8192, (1024, 2048, 4096), "answer_recall", ("answer_recall",), ("answer_recall",)),
    "madial": SetShape(2048, (512, 1024), "memory_recall", ("memory_recall", "gold_recall", "answer_recall"),
                       ("memory_recall", "answer_recall")),
}


# -- questions and their scores --------------------------------------------------------------

@dataclass
class Skips:
    no_evidence: Counter[str] = field(default_factory=Counter)
    unknown_ids: list[dict[str, Any]] = field(default_factory=list)
    no_reference: list[str] = field(default_factory=list)
    numbers_only: list[str] = field(default_factory=list)
    budget_violations: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Target:
    """What one question is scored against."""

    evidence: list[Evidence]
    reference: set[str]
    seqs: list[int]
    phrases: list[list[str]] | None = None  # MADial: key phrases per relevant memory
    exclude: tuple[str, ...] = ()  # MADial: the live dialogue, cut out of every context


def _is_small_number(word: str) -> bool:
    """One or two digits (a count such as "3"): almost any long context holds it as a word."""
    return word.isdigit() and len(word) <= 2


def _question_inputs(run: ChatRun, q: beam.BeamQuestion, skips: Skips | None) -> Target | None:
    """The question's evidence, reference words and evidence seqs; None (and counted in
    ``skips`` when given) for a question that cannot be scored."""
    answer_only = bool(q.raw.get("answer_only"))
    if not q.evidence_ids and not answer_only:
        if skips is not None:
            skips.no_evidence[q.ability] += 1
        return None
    missing = [i for i in q.evidence_ids if i not in run.seq_of_id]
    if missing and skips is not None:
        skips.unknown_ids.append({"question": q.key, "ids": missing})
    seqs = [run.seq_of_id[i] for i in q.evidence_ids if i in run.seq_of_id]
    if not seqs and not answer_only:
        if skips is not None:
            skips.no_evidence[q.ability] += 1
        return None
    given = q.raw.get("answer_words")
    reference = set(given) if given is not None else content_words(q.reference)
    if answer_only and reference and all(_is_small_number(w) for w in reference):
        if skips is not None:
            skips.numbers_only.append(q.key)
        return None
    if not reference and skips is not None:
        skips.no_reference.append(q.key)
    phrases = q.raw.get("phrases")
    return Target([evidence_of(run.by_seq[s].text) for s in seqs], reference, seqs,
                  [list(p) for p in phrases] if phrases is not None else None, tuple(q.raw.get("live", ())))


def _score(view: ContextView, t: Target) -> dict[str, float | None]:
    return score(view, t.evidence, t.reference, t.phrases)


def _headline(view: ContextView, t: Target) -> float | None:
    """The set's headline metric: memory_recall with key phrases (MADial), else answer_recall."""
    return _score(view, t)["memory_recall" if t.phrases is not None else "answer_recall"]


def evaluate_chat(run: ChatRun, systems: Sequence[str], budgets: Sequence[int], skips: Skips, *,
                  label: dict[str, str] | None = None, references: bool = True) -> list[dict[str, Any]]:
    """One record per (question, system, budget), plus (with ``references``) one per
    question for ``full`` and one per budget for ``evidence`` (where there is evidence).
    ``label`` renames systems in the records (the window = budget and keyword-only runs);
    without ``references`` skipped questions are not counted again."""
    records: list[dict[str, Any]] = []
    questions = list(run.chat.questions)
    for n, q in enumerate(questions, 1):
        t = _question_inputs(run, q, skips if references else None)
        if t is None:
            continue
        base = {"chat": q.chat, "ability": q.ability, "question": q.key, "evidence": len(t.evidence),
                "reference_words": len(t.reference)}
        if references:
            full = build_full(run, t.exclude)
            records.append({**base, "system": FULL, "budget": UNBUDGETED, "tokens": full.tokens,
                            "ms": round(full.ms, 3), **_score(full, t)})
        extra = (EVIDENCE,) if references and t.seqs else ()
        for budget in budgets:
            for system in (*systems, *extra):
                t0 = time.perf_counter()
                msgs, tokens, tiers, items = (build_evidence(run, t.seqs, budget) if system == EVIDENCE
                                              else BUILDERS[system](run, q.question, budget))
                ms = (time.perf_counter() - t0) * 1000
                name = (label or {}).get(system, system)
                billed = count_chat_tokens(run.mem.counter, msgs)
                if billed > budget or tokens != billed:
                    skips.budget_violations.append({"question": q.key, "system": name, "budget": budget,
                                                    "reported": tokens, "counted": billed})
                view = ContextView.of(msgs, billed, ms, t.exclude)
                extra_fields: dict[str, Any] = {"tiers": tiers} if tiers is not None else {}
                if items is not None:
                    extra_fields["tier_scores"] = tier_scores(msgs, items, billed, run.mem.counter, t.exclude,
                                                              partial(_headline, t=t))
                records.append({**base, "system": name, "budget": budget, "tokens": billed, "ms": round(ms, 3),
                                **_score(view, t), **extra_fields})
        if references and len(questions) > 1 and (n % 5 == 0 or n == len(questions)):
            print(f"  chat {run.chat.number}: {n}/{len(questions)} questions", file=sys.stderr, flush=True)
    return records


# -- the run -------------------------------------------------------------------------------

def _code_version() -> str:
    """The commit the library is at, ``-dirty`` if its package folder has uncommitted
    edits (the benchmark's own files do not count), for the record; outside a git checkout
    (an exported tree), the package's folder."""
    where = Path(lossless.__file__).parent
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=where, capture_output=True, text=True,
                              timeout=10, check=False).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "."], cwd=where, capture_output=True,
                               text=True, timeout=10, check=False).stdout.strip()
    except OSError:
        return f"unknown ({where})"
    return (head + ("-dirty" if dirty else "")) if head else f"unknown ({where})"


def _embed_counts(embedder: TimedEmbedder | None) -> tuple[float, int, int]:
    if embedder is None:
        return 0.0, 0, 0
    return embedder.seconds, embedder.texts, embedder.cache_hits


def _args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--set", choices=(*SETS, "all"), default="beam",
                    help="the dev set (default beam), or all four and one table")
    ap.add_argument("--seed", type=int, default=chitchat.DEFAULT_SEED, help="the chit-chat set's seed")
    ap.add_argument("--conversations", type=int, default=chitchat.DEFAULT_CONVERSATIONS,
                    help="how many chit-chat conversations to generate")
    ap.add_argument("--data", type=Path, help="the set's data (default: under shared/data; not with --set all)")
    ap.add_argument("--chats", type=int, nargs="+",
                    help="chat numbers (LongMemEval: questions 1-30, MADial: dialogues 1-160; default: all)")
    ap.add_argument("--limit", type=int, metavar="N", help="only the first N chats of each set (a quick look)")
    ap.add_argument("--budgets", type=int, nargs="+", help="default: 1024 2048 4096 (madial: 512 1024)")
    ap.add_argument("--window", type=int, help="context_window of each store (default 8192, madial 2048)")
    ap.add_argument("--madial-query", choices=madial.QUERY_MODES, default="dialogue",
                    help="MADial's query: the dialogue so far (default) or its last user turn")
    ap.add_argument("--madial-live", action="store_true",
                    help="MADial: append the dialogue so far to the conversation (a copy of the user's "
                         "history per dialogue), not only use it as the query")
    ap.add_argument("--window-equals-budget", action="store_true",
                    help=f"also run {WINDOW_EQUALS_BUDGET!r}: for each budget B a store opened with "
                         "context_window=B, assembled with budget_tokens=B")
    ap.add_argument("--dated-baseline", action="store_true",
                    help=f"also run {DATED_BM25!r}: bm25's ranking shown as lossless must show recalled "
                         "messages (its headers, a date line, '#seq role:' per message)")
    ap.add_argument("--no-keyword-only", action="store_true",
                    help=f"with vectors, leave out {KEYWORD_ONLY!r} (lossless with embedder=None)")
    ap.add_argument("--ingest-unit", choices=("turn", "batch"), default="turn",
                    help="add_many per turn (default) or per BEAM batch (per session in chit-chat)")
    ap.add_argument("--no-vectors", action="store_true",
                    help="no embedder: no vector, hybrid or semantic baseline")
    ap.add_argument("--model", choices=("fp32", "int8", "static"), default="fp32",
                    help="the embedder for lossless and the baselines: the local model (int8: "
                         "LocalEmbedder(quantize='int8')), or the static one distilled from it (static_embedder.py)")
    ap.add_argument("--embed-cache", type=Path, metavar="FILE",
                    help="keep embeddings in this SQLite file across runs (re-runs skip the model; "
                         "ingest times then no longer include embedding)")
    ap.add_argument("--json", type=Path, help="write every number here")
    ap.add_argument("--plot", type=Path, help="write a PNG of answer_recall/evidence_hit vs budget (one set)")
    args = ap.parse_args(argv)
    if args.set == "all" and (args.data or args.chats or args.plot):
        ap.error("--data, --chats and --plot take one set, not --set all")
    return args


def load_set(args: argparse.Namespace, name: str | None = None) -> list[beam.BeamChat]:
    """The set's chats (MADial: one per dialogue, its user's history and the live dialogue)."""
    name = name or args.set
    chats, data = getattr(args, "chats", None), getattr(args, "data", None)
    if name == "chitchat":
        generated = chitchat.generate(args.seed, args.conversations)
        return [c for c in generated if not chats or c.number in chats]
    if name == "longmemeval":
        return longmemeval.load(data or longmemeval.DEFAULT_DATA, chats)
    if name == "madial":
        events, dialogues = madial.load(data or madial.DEFAULT_DATA)
        picked = [d for d in dialogues if not chats or d.id + 1 in chats]
        histories = {u: madial.history_chat(events, u) for u in sorted({d.user for d in picked})}
        mode = getattr(args, "madial_query", "dialogue")
        if getattr(args, "madial_live", False):
            return [madial.dialogue_chat(histories[d.user], events, d, mode) for d in picked]
        return [madial.user_chat(h, events, picked, mode) for h in histories.values()]
    root = data or beam.DEFAULT_DATA
    return [beam.load_chat(n, root) for n in (chats or beam.chat_numbers(root))]


@dataclass
class Stores:
    """Where each chat goes: a fresh store, or (MADial) a copy of its user's history, which
    is ingested once per window and embedder (and timed as its own ingest line)."""

    folder: Path
    unit: str
    histories: dict[int, beam.BeamChat] = field(default_factory=dict)
    bases: dict[tuple[int, int, str], Path] = field(default_factory=dict)
    base_info: list[dict[str, Any]] = field(default_factory=list)

    def run(self, chat: beam.BeamChat, window: int, embedder: Any, tag: str = "") -> ChatRun:
        if not chat.live:
            return ingest(chat, self.folder, window, embedder, self.unit, tag=tag)
        user = self.prepare(chat, window, embedder, tag)
        return extend(chat, self.bases[(user, window, tag)], user, self.folder, window, embedder, tag=tag)

    def prepare(self, chat: beam.BeamChat, window: int, embedder: Any, tag: str = "") -> int:
        """Ingest the history ``chat`` continues, once per window and embedder: its user."""
        if not chat.live:
            return 0
        user = int(chat.questions[0].raw["user"])
        key = (user, window, tag)
        if key not in self.bases:
            history = self.histories[user]
            before = _embed_counts(embedder)
            run = ingest(history, self.folder, window, embedder, "turn", tag=f"history{tag}")
            after = _embed_counts(embedder)
            self.base_info.append({"chat": f"user {user} history (window {window}{', ' + tag if tag else ''})",
                                   "messages": len(history.messages), "tokens": run.stats.message_tokens,
                                   "ingest_s": round(run.ingest_s, 2), "embed_s": round(after[0] - before[0], 2),
                                   "summaries": run.stats.summaries, "evaluate_s": 0.0})
            run.mem.close()
            self.bases[key] = db_path(self.folder, user, window, f"history{tag}")
        return user

    def close(self, run: ChatRun) -> None:
        """Close the store; a copy made for one question (MADial) is deleted with it."""
        run.mem.close()
        if run.chat.live and run.path is not None:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{run.path}{suffix}").unlink(missing_ok=True)


def run_chat(chat: beam.BeamChat, args: argparse.Namespace, stores: Stores, embedder: TimedEmbedder | None,
             systems: Sequence[str], budgets: Sequence[int], window: int, skips: Skips
             ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Ingest one chat, build every context, score it: its records and its ingest line."""
    stores.prepare(chat, window, embedder)  # a shared history has its own ingest line
    before = _embed_counts(embedder)
    run = stores.run(chat, window, embedder)
    after = _embed_counts(embedder)
    info: dict[str, Any] = {
        "chat": chat.number, "topic": chat.topic, "messages": len(chat.messages),
        "tokens": run.stats.message_tokens, "ingest_s": round(run.ingest_s, 2),
        "summaries": run.stats.summaries, "max_depth": run.stats.max_depth,
        "raw_tail_messages": run.stats.raw_tail_messages, "embed_s": round(after[0] - before[0], 2),
        "embedded_texts": after[1] - before[1], "embed_cache_hits": after[2] - before[2]}
    info["baseline_index_s"] = round(run.attach_index(embedder), 2)
    if not chat.live or chat.number % 20 == 0:
        print(f"chat {chat.number}: {info['messages']} messages, {info['tokens']} tokens ingested in "
              f"{info['ingest_s']}s ({info['embed_s']}s embedding {info['embedded_texts']} texts, "
              f"{info['embed_cache_hits']} from the cache), {info['summaries']} summaries "
              f"(depth {info['max_depth']}); baseline index {info['baseline_index_s']}s", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    records = evaluate_chat(run, systems, budgets, skips)
    stores.close(run)
    variants: list[tuple[str, int, Any, str, int]] = []  # (label, window, embedder, tag, budget or 0)
    if embedder is not None and not args.no_keyword_only:
        variants.append((KEYWORD_ONLY, window, None, "kw", 0))
    if args.window_equals_budget:
        variants += [(WINDOW_EQUALS_BUDGET, b, embedder, "", b) for b in budgets]
    for name, w, emb, tag, only in variants:
        extra = stores.run(chat, w, emb, tag)
        records.extend(evaluate_chat(extra, ["lossless"], [only] if only else budgets, skips,
                                     label={"lossless": name}, references=False))
        stores.close(extra)
    info["evaluate_s"] = round(time.perf_counter() - t0, 2)
    return records, info


def run_set(name: str, args: argparse.Namespace, embedder: TimedEmbedder | None, folder: Path,
            version: str) -> tuple[dict[str, Any], Skips]:
    shape = SHAPES[name]
    budgets = sorted(set(args.budgets or shape.budgets))
    window = args.window or shape.window
    systems = [s for s in SYSTEMS if not (args.no_vectors and s in NEEDS_VECTORS)]
    if args.dated_baseline:
        systems.insert(systems.index("bm25") + 1, DATED_BM25)
    t_start = time.perf_counter()
    chats = load_set(args, name)[: args.limit]
    stores = Stores(folder / name, args.ingest_unit)
    stores.folder.mkdir(parents=True, exist_ok=True)
    if name == "madial":
        events, _ = madial.load(args.data or madial.DEFAULT_DATA)
        stores.histories = {u: madial.history_chat(events, u) for u in {int(c.questions[0].raw["user"]) for c in chats}}
    records: list[dict[str, Any]] = []
    ingests: list[dict[str, Any]] = []
    skips = Skips()
    print(f"== {name}: {len(chats)} chats, window {window}, budgets {budgets}", file=sys.stderr, flush=True)
    for chat in chats:
        chat_records, info = run_chat(chat, args, stores, embedder, systems, budgets, window, skips)
        records.extend(chat_records)
        ingests.append(info)
    if embedder is not None and not args.no_keyword_only:
        systems.insert(1, KEYWORD_ONLY)
    if args.window_equals_budget:
        systems.append(WINDOW_EQUALS_BUDGET)
    result = _result(args, name, shape, [c.number for c in chats], budgets, window, systems, version, records,
                     [*stores.base_info, *ingests], skips)
    result["total_s"] = round(time.perf_counter() - t_start, 2)
    return result, skips


def main(argv: Sequence[str] | None = None) -> int:
    args = _args(argv)
    t_start = time.perf_counter()
    version = _code_version()  # now, not at the end: the library may be edited meanwhile
    embedder: TimedEmbedder | None = None
    if not args.no_vectors:
        t0 = time.perf_counter()
        embedder = load_embedder(args.embed_cache, model=args.model)
        print(f"embedder loaded in {time.perf_counter() - t0:.1f}s", file=sys.stderr, flush=True)
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="lossless-retention-") as tmp:
        for name in (SETS if args.set == "all" else (args.set,)):
            result, skips = run_set(name, args, embedder, Path(tmp), version)
            results[name] = result
            _print(result, skips)
    if embedder is not None:
        embedder.close()
    out: dict[str, Any] = results[args.set] if args.set != "all" else {
        "sets": results, "table": four_sets(results, markdown=True),
        "total_s": round(time.perf_counter() - t_start, 2)}
    if args.set == "all":
        _print_all(results, out["total_s"])
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    if args.plot:
        args.plot.parent.mkdir(parents=True, exist_ok=True)
        plot(results[args.set], args.plot)
    return 0


def _result(args: argparse.Namespace, name: str, shape: SetShape, chats: list[int], budgets: list[int],
            window: int, systems: list[str], version: str, records: list[dict[str, Any]],
            ingests: list[dict[str, Any]], skips: Skips) -> dict[str, Any]:
    by_ability: dict[str, list[dict[str, Any]]] = defaultdict(list)
    by_chat: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        by_ability[r["ability"]].append(r)
        by_chat[r["chat"]].append(r)
    overall = aggregate(records)
    data = {"beam": beam.DEFAULT_DATA, "longmemeval": longmemeval.DEFAULT_DATA, "madial": madial.DEFAULT_DATA}
    result: dict[str, Any] = {
        "config": {"set": name, "seed": args.seed if name == "chitchat" else None,
                   "data": str(args.data or data[name]) if name in data else None, "chats": chats,
                   "budgets": budgets, "window": window, "window_equals_budget": args.window_equals_budget,
                   "systems": systems, "ingest_unit": args.ingest_unit, "vectors": not args.no_vectors,
                   "headline": shape.headline, "compact_metrics": list(shape.compact_metrics),
                   "madial_query": args.madial_query if name == "madial" else None,
                   "madial_live": args.madial_live if name == "madial" else None,
                   "search_limit": SEARCH_LIMIT, "min_sentence_chars": MIN_SENTENCE,
                   "min_sentence_cjk_chars": MIN_SENTENCE_CJK,
                   "questions": sum(1 for r in records if r["system"] == FULL),
                   "bm25": {"k1": baselines.K1, "b": baselines.B,
                            "tokenizer": r"lower-case \w+, a CJK run as its character bigrams", "stopwords": "kept"},
                   "rrf_k": baselines.RRF_K,
                   "embed_cache": str(args.embed_cache) if args.embed_cache else None,
                   "model": args.model,
                   "lossless_version": version},
        "ingest": ingests,
        "ingest_s_total": round(sum(i["ingest_s"] for i in ingests), 2),
        "embed_s_ingest_total": round(sum(i["embed_s"] for i in ingests), 2),
        "evaluate_s_total": round(sum(i["evaluate_s"] for i in ingests), 2),
        "overall": overall,
        "target": target_check(overall, systems, budgets, shape.target_metrics),
        "by_ability": {ab: aggregate(rs) for ab, rs in sorted(by_ability.items())},
        "by_chat": {str(c): aggregate(rs) for c, rs in sorted(by_chat.items())},
        "skipped": {"no_evidence_by_ability": dict(sorted(skips.no_evidence.items())),
                    "unknown_evidence_ids": skips.unknown_ids, "no_reference_words": skips.no_reference,
                    "numbers_only_reference": skips.numbers_only, "budget_violations": skips.budget_violations},
        "questions": records,
    }
    result["versus"] = beats(result)
    result["tier_yield"] = {s: yield_rows(records, s, budgets) for s in (s for s in systems if s.startswith("lossless"))}
    return result


def _print(result: dict[str, Any], skips: Skips) -> None:
    n = result["config"]["questions"]
    print(f"\n===== {result['config']['set']} =====\n")
    print(report(result))
    print("\n" + compact(result))
    metric = "memory_recall" if result["config"]["set"] == "madial" else "answer_recall"
    for system, rows in result.get("tier_yield", {}).items():
        if rows:
            heads = [f"{h}@{b}" for b in result["config"]["budgets"] for h in ("tokens", "alone", "only", "yield")]
            print(f"\n{system} tier yield ({metric}: alone = the tier's text alone, only = lost without it, "
                  "yield = alone per 100 tokens)\n" + table("tier", rows, heads))
    print(f"\n{n} questions from {len(result['config']['chats'])} chats ({result['config']['set']}); skipped "
          f"without evidence: {sum(skips.no_evidence.values())} {dict(sorted(skips.no_evidence.items()))}; unknown "
          f"evidence ids: {len(skips.unknown_ids)}; without reference words: {len(skips.no_reference)}; "
          f"reference only numbers: {len(skips.numbers_only)}; budget violations: {len(skips.budget_violations)}")
    print(f"ingest {result['ingest_s_total']}s (embedding {result['embed_s_ingest_total']}s), "
          f"contexts and metrics {result['evaluate_s_total']}s, total {result['total_s']}s")


def _print_all(results: dict[str, dict[str, Any]], total_s: float) -> None:
    heads = ", ".join(f"{name}: {r['config']['headline']} (window {r['config']['window']}, "
                      f"{r['config']['questions']} q)" for name, r in results.items())
    print(f"\n===== four sets =====\n{heads}\n")
    print(four_sets(results))
    print("\n" + four_sets(results, markdown=True))
    print("\n" + "; ".join(f"{name} {r['total_s']}s (ingest {r['ingest_s_total']}s, embedding "
                           f"{r['embed_s_ingest_total']}s)" for name, r in results.items()) + f"; total {total_s}s")


if __name__ == "__main__":
    raise SystemExit(main())
