"""Retention benchmark: how much of the evidence and of the answer a budgeted context keeps.

Each BEAM dev chat (``/work/shared/data/beam-128k``, see ``bench/beam.py``) is fed, turn by
turn, into a fresh lossless database with a small window (8192 by default, so compaction
really happens). Then, for every probing question that names evidence messages, a context
is built under each budget by each system, and we measure what it holds.

Run::

    python bench/retention.py --no-vectors                     # keyword only: ~1 min
    python bench/retention.py --chats 1 2 --no-vectors         # two chats: ~8 s
    python bench/retention.py --embed-cache /tmp/retention-emb.sqlite \\
        --json /tmp/retention.json --plot /tmp/retention.png   # with vectors
    python bench/retention.py --budgets 1024 2048 4096 --window 8192 --ingest-unit turn

With vectors, embedding the retrieval units at ingest (~17.6K passages and QA windows for
the 20 chats) dominates: ~16 min on 2 CPU cores; the evaluation itself takes ~1-2 min.
``--embed-cache`` keeps the vectors in a SQLite file, so a re-run takes ~2 min (its ingest
times then exclude the model, which the per-chat ``embed_s`` / ``embed_cache_hits`` say).

Systems:
  lossless  ``conv.assemble(budget_tokens=B, query=question)``
  recent    the newest whole messages that fit in B (what a sliding window keeps)
  bm25      messages ranked by ``conv.search(question, mode="fts")`` (top 200), added
            greedily while they fit (one that does not fit is skipped), shown in time order
  vector    the same ranking by ``mode="semantic"`` (needs the local embedder;
            left out with ``--no-vectors``)
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
  tokens         the context's size; ms: time to build one context (p50 and p99). The
                 baselines look messages up in an in-memory copy of the chat, so their time
                 is the store call (``messages()`` or ``search()``) plus packing. Each
                 build embeds its query afresh, unless ``--embed-cache`` already holds it.
  target         lossless answer_recall at 4096 / full answer_recall (goal >= 0.95), and
                 whether lossless beats every baseline at every budget on evidence_hit
                 and answer_recall.

Questions without evidence ids (all of ``abstention``, a few others) are skipped and
counted; evidence ids that name no message are dropped and reported. Nothing in the data
is special-cased. Output is deterministic except for the timings. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import beam

import lossless
from lossless.core.render import chat_message_text
from lossless.core.tokens import MESSAGE_OVERHEAD, NAME_OVERHEAD, REPLY_PRIMING, count_chat_tokens

SYSTEMS = ("lossless", "recent", "bm25", "vector")
BASELINES = ("recent", "bm25", "vector")
FULL = "full"
EVIDENCE = "evidence"  # the reference context of the evidence messages alone
UNBUDGETED = "unbudgeted"
METRICS = ("evidence_hit", "evidence_full", "answer_recall")
TARGET_BUDGET = 4096
TARGET_RATIO = 0.95
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


def words(text: str) -> list[str]:
    return _TOKEN.findall(_APOSTROPHE.sub("", text.lower()))


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


# -- the embedder, timed and optionally cached on disk ----------------------------------------

class TimedEmbedder:
    """Wraps an Embedder (same provider/model, same vectors) to time its work, and with
    ``cache`` set, keeps vectors in a SQLite file keyed by (provider, model, sha256(text))
    so a re-run of the benchmark does not embed the same texts again."""

    def __init__(self, inner: Any, cache: Path | None = None) -> None:
        self.inner = inner
        self.provider: str = inner.provider
        self.model: str = inner.model
        self.seconds = 0.0
        self.texts = 0
        self.cache_hits = 0
        self._db: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        if cache is not None:
            cache.parent.mkdir(parents=True, exist_ok=True)
            # the library embeds queries on a worker thread (Recaller.prefetch): one
            # connection shared across threads, its use serialised by the lock
            self._db = sqlite3.connect(cache, check_same_thread=False)
            self._db.execute("CREATE TABLE IF NOT EXISTS vectors (provider TEXT, model TEXT, sha TEXT, vec BLOB, "
                             "PRIMARY KEY (provider, model, sha))")

    @property
    def dim(self) -> int:
        return int(self.inner.dim)

    def embed(self, texts: Sequence[str]) -> Any:
        with self._lock:
            return self._embed(texts)

    def _embed(self, texts: Sequence[str]) -> Any:
        t0 = time.perf_counter()
        shas = [hashlib.sha256(t.encode("utf-8")).hexdigest() for t in texts]
        found: dict[str, Any] = {}
        if self._db is not None and texts:
            for i in range(0, len(shas), 500):
                chunk = shas[i : i + 500]
                rows = self._db.execute(
                    f"SELECT sha, vec FROM vectors WHERE provider = ? AND model = ? AND sha IN ({','.join('?' * len(chunk))})",
                    [self.provider, self.model, *chunk]).fetchall()
                found.update((sha, np.frombuffer(vec, dtype=np.float32)) for sha, vec in rows)
        todo = [i for i, sha in enumerate(shas) if sha not in found]
        if todo:
            fresh = self.inner.embed([texts[i] for i in todo])
            for row, i in zip(fresh, todo, strict=True):
                found[shas[i]] = np.asarray(row, dtype=np.float32)
            if self._db is not None:
                self._db.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?, ?, ?)",
                                     [(self.provider, self.model, shas[i], found[shas[i]].tobytes()) for i in todo])
                self._db.commit()
        self.texts += len(todo)
        self.cache_hits += len(texts) - len(todo)
        self.seconds += time.perf_counter() - t0
        if not texts:
            return self.inner.embed(texts)
        return np.stack([found[sha] for sha in shas]).astype(np.float32)

    def close(self) -> None:
        if self._db is not None:
            self._db.close()


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

    def cost(self, m: lossless.Message) -> int:
        """What one whole message adds to a context (count_chat_tokens' accounting)."""
        extra = NAME_OVERHEAD + self.mem.counter.count(m.name) if m.name else 0
        return MESSAGE_OVERHEAD + m.token_count + extra


def ingest(chat: beam.BeamChat, folder: Path, window: int, embedder: Any, unit: str) -> ChatRun:
    # inline: the conversation grows turn by turn and compaction keeps up between turns (what
    # a worker thread does in an agent's loop), the same DAG on every run
    mem = lossless.open(folder / f"beam-{chat.number}.db", context_window=window, embedder=embedder,
                        compaction="inline")
    conv = mem.conversation(f"beam-{chat.number}")
    by_id = chat.by_id()
    groups = chat.turns if unit == "turn" else _batches(chat)
    t0 = time.perf_counter()
    for ids in groups:
        conv.add_many([{"role": by_id[i].role, "content": by_id[i].content, "created_at": by_id[i].created_at,
                        "external_id": str(i)} for i in ids])
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


BUILDERS: dict[str, Builder] = {
    "lossless": build_lossless,
    "recent": build_recent,
    "bm25": ranked_builder("fts"),
    "vector": ranked_builder("semantic"),
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


def evaluate_chat(run: ChatRun, systems: Sequence[str], budgets: Sequence[int], skips: Skips) -> list[dict[str, Any]]:
    """One record per (question, system, budget), plus one per question for ``full``."""
    full = build_full(run)
    records: list[dict[str, Any]] = []
    questions = list(run.chat.questions)
    for n, q in enumerate(questions, 1):
        if not q.evidence_ids:
            skips.no_evidence[q.ability] += 1
            continue
        missing = [i for i in q.evidence_ids if i not in run.seq_of_id]
        if missing:
            skips.unknown_ids.append({"question": q.key, "ids": missing})
        evidence = [evidence_of(run.by_seq[run.seq_of_id[i]].text) for i in q.evidence_ids if i in run.seq_of_id]
        if not evidence:
            skips.no_evidence[q.ability] += 1
            continue
        reference = content_words(q.reference)
        if not reference:
            skips.no_reference.append(q.key)
        base = {"chat": q.chat, "ability": q.ability, "question": q.key, "evidence": len(evidence),
                "reference_words": len(reference)}
        records.append({**base, "system": FULL, "budget": UNBUDGETED, "tokens": full.tokens, "ms": round(full.ms, 3),
                        **score(full, evidence, reference)})
        seqs = [run.seq_of_id[i] for i in q.evidence_ids if i in run.seq_of_id]
        for budget in budgets:
            for system in (*systems, EVIDENCE):
                t0 = time.perf_counter()
                msgs, tokens, tiers = (build_evidence(run, seqs, budget) if system == EVIDENCE
                                       else BUILDERS[system](run, q.question, budget))
                ms = (time.perf_counter() - t0) * 1000
                billed = count_chat_tokens(run.mem.counter, msgs)
                if billed > budget or tokens != billed:
                    skips.budget_violations.append({"question": q.key, "system": system, "budget": budget,
                                                    "reported": tokens, "counted": billed})
                view = ContextView.of(msgs, billed, ms)
                records.append({**base, "system": system, "budget": budget, "tokens": billed, "ms": round(ms, 3),
                                **score(view, evidence, reference), **({"tiers": tiers} if tiers is not None else {})})
        if n % 5 == 0 or n == len(questions):
            print(f"  chat {run.chat.number}: {n}/{len(questions)} questions", file=sys.stderr, flush=True)
    return records


# -- aggregation and output ----------------------------------------------------------------

def percentile(values: Sequence[float], p: float) -> float:
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return ordered[k]


def aggregate(records: Sequence[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """{system: {budget: {metric: mean, ms_p50, ms_p99, tokens, questions, tier_tokens}}}."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        groups[(r["system"], str(r["budget"]))].append(r)
    out: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for (system, budget), rows in groups.items():
        cell: dict[str, Any] = {"questions": len(rows)}
        for metric in METRICS:
            vals = [r[metric] for r in rows if r[metric] is not None]
            cell[metric] = round(statistics.fmean(vals), 4) if vals else None
        ms = [r["ms"] for r in rows]
        cell["ms_p50"] = round(percentile(ms, 50), 2)
        cell["ms_p99"] = round(percentile(ms, 99), 2)
        cell["tokens"] = round(statistics.fmean(r["tokens"] for r in rows), 1)
        tiered = [r["tiers"] for r in rows if "tiers" in r]
        if tiered:
            names = sorted({k for t in tiered for k in t})
            cell["tier_tokens"] = {k: round(statistics.fmean(t.get(k, 0) for t in tiered), 1) for k in names}
        out[system][budget] = cell
    return {s: dict(sorted(v.items(), key=lambda kv: _budget_key(kv[0]))) for s, v in out.items()}


def _budget_key(budget: str) -> float:
    return float("inf") if budget == UNBUDGETED else float(budget)


def target_check(overall: dict[str, dict[str, dict[str, Any]]], systems: Sequence[str],
                 budgets: Sequence[int]) -> dict[str, Any]:
    at = TARGET_BUDGET if TARGET_BUDGET in budgets else max(budgets)
    ours = overall["lossless"][str(at)]["answer_recall"]
    full = overall[FULL][UNBUDGETED]["answer_recall"]
    ratio = round(ours / full, 4) if ours is not None and full else None
    losses = []
    for budget in budgets:
        for base in (s for s in systems if s in BASELINES):
            for metric in ("evidence_hit", "answer_recall"):
                a = overall["lossless"][str(budget)][metric]
                b = overall[base][str(budget)][metric]
                if a is None or b is None or not a > b:
                    losses.append({"budget": budget, "baseline": base, "metric": metric, "lossless": a, base: b})
    evidence = overall.get(EVIDENCE, {}).get(str(at), {}).get("answer_recall")
    return {"budget": at, "lossless_answer_recall": ours, "full_answer_recall": full, "ratio": ratio,
            "evidence_answer_recall": evidence,
            "evidence_ratio": round(evidence / full, 4) if evidence is not None and full else None,
            "ratio_goal": TARGET_RATIO, "ratio_met": ratio is not None and ratio >= TARGET_RATIO,
            "beats_every_baseline": not losses, "losses": losses}


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 10 else f"{value:.1f}"
    return str(value)


def table(title: str, rows: dict[str, list[Any]], columns: Sequence[str]) -> str:
    """A plain-text table: one row per name, one column per budget (or system)."""
    first = max(len(title), *(len(name) for name in rows))
    width = max(9, *(len(c) for c in columns))
    head = f"{title:<{first}}" + "".join(f"{c:>{width + 1}}" for c in columns)
    lines = [head, "-" * len(head)]
    for name, cells in rows.items():
        lines.append(f"{name:<{first}}" + "".join(f"{_fmt(c):>{width + 1}}" for c in cells))
    return "\n".join(lines)


def report(result: dict[str, Any]) -> str:
    overall = result["overall"]
    systems = [*result["config"]["systems"], EVIDENCE, FULL]
    budgets = [str(b) for b in result["config"]["budgets"]]
    columns = [*budgets, UNBUDGETED]
    parts = []
    for metric in (*METRICS, "tokens", "ms_p50", "ms_p99"):
        rows = {s: [overall.get(s, {}).get(b, {}).get(metric) for b in columns] for s in systems}
        parts.append(table(metric, rows, columns))
    tiers = sorted({k for b in budgets for k in overall.get("lossless", {}).get(b, {}).get("tier_tokens", {})})
    if tiers:
        rows = {t: [overall["lossless"][b].get("tier_tokens", {}).get(t, 0.0) for b in budgets] for t in tiers}
        parts.append(table("lossless tier tokens", rows, budgets))
    target = result["target"]
    at = str(target["budget"])
    for metric in ("evidence_hit", "answer_recall"):
        rows = {ab: [cells.get(s, {}).get(at if s != FULL else UNBUDGETED, {}).get(metric) for s in systems]
                for ab, cells in result["by_ability"].items()}
        parts.append(table(f"{metric}@{at}", rows, systems))
    lines = [
        f"target: lossless answer_recall@{at} / full = {_fmt(target['lossless_answer_recall'])} / "
        f"{_fmt(target['full_answer_recall'])} = {_fmt(target['ratio'])} "
        f"(goal >= {TARGET_RATIO}: {'met' if target['ratio_met'] else 'NOT met'})",
        f"reference: the evidence messages alone, answer_recall@{at} / full = "
        f"{_fmt(target['evidence_answer_recall'])} / {_fmt(target['full_answer_recall'])} = "
        f"{_fmt(target['evidence_ratio'])}",
        "lossless beats every baseline at every budget on evidence_hit and answer_recall: "
        + ("yes" if target["beats_every_baseline"] else "no"),
    ]
    lines += [f"  not better: {x['metric']}@{x['budget']} vs {x['baseline']}: lossless {_fmt(x['lossless'])} "
              f"<= {_fmt(x[x['baseline']])}" for x in target["losses"]]
    parts.append("\n".join(lines))
    return "\n\n".join(parts)


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    overall = result["overall"]
    budgets = result["config"]["budgets"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    styles = {"lossless": ("C0", "o"), "recent": ("C1", "s"), "bm25": ("C2", "^"), "vector": ("C3", "D"),
              EVIDENCE: ("C7", "x")}
    for ax, metric in zip(axes, ("answer_recall", "evidence_hit"), strict=True):
        for system in [*result["config"]["systems"], *([EVIDENCE] if metric == "answer_recall" else [])]:
            ys = [overall[system][str(b)][metric] for b in budgets]
            color, marker = styles.get(system, ("C4", "x"))
            ax.plot(budgets, ys, marker=marker, color=color, label=system,
                    linestyle=":" if system == EVIDENCE else "-")
        full = overall[FULL][UNBUDGETED][metric]
        if full is not None:
            ax.axhline(full, linestyle="--", color="grey", label="full (unbudgeted)")
        ax.set_xscale("log", base=2)
        ax.set_xticks(budgets, [str(b) for b in budgets])
        ax.set_xlabel("budget (tokens)")
        ax.set_ylabel(metric)
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
        ax.set_title(metric)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=9, frameon=False)
    n = result["config"]["questions"]
    fig.suptitle(f"BEAM dev retention: {len(result['config']['chats'])} chats, {n} questions, "
                 f"window {result['config']['window']}" + ("" if "vector" in result["config"]["systems"] else
                                                           " (no vectors)"))
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)


def load_embedder(cache: Path | None) -> TimedEmbedder:
    try:
        from lossless.embed.local import LocalEmbedder  # type: ignore[import-not-found,unused-ignore]
    except ImportError as exc:
        raise SystemExit(f"the local embedder is not available ({exc}); run with --no-vectors") from None
    local = LocalEmbedder()
    local.embed(["warm-up"])  # load the model now, so ingest times do not include it
    return TimedEmbedder(local, cache)


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


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=beam.DEFAULT_DATA, help="the BEAM dev set folder")
    ap.add_argument("--chats", type=int, nargs="+", help="chat numbers (default: all)")
    ap.add_argument("--budgets", type=int, nargs="+", default=[1024, 2048, 4096])
    ap.add_argument("--window", type=int, default=8192, help="context_window of each store")
    ap.add_argument("--ingest-unit", choices=("turn", "batch"), default="turn",
                    help="add_many per turn (default) or per BEAM batch")
    ap.add_argument("--no-vectors", action="store_true", help="no embedder, no vector baseline")
    ap.add_argument("--embed-cache", type=Path, metavar="FILE",
                    help="keep embeddings in this SQLite file across runs (re-runs skip the model; "
                         "ingest times then no longer include embedding)")
    ap.add_argument("--json", type=Path, help="write every number here")
    ap.add_argument("--plot", type=Path, help="write a PNG of answer_recall/evidence_hit vs budget")
    args = ap.parse_args(argv)

    budgets = sorted(set(args.budgets))
    chats = args.chats or beam.chat_numbers(args.data)
    systems = [s for s in SYSTEMS if not (args.no_vectors and s == "vector")]
    t_start = time.perf_counter()
    version = _code_version()  # now, not at the end: the library may be edited meanwhile
    embedder: TimedEmbedder | None = None
    if not args.no_vectors:
        t0 = time.perf_counter()
        embedder = load_embedder(args.embed_cache)
        print(f"embedder loaded in {time.perf_counter() - t0:.1f}s", file=sys.stderr, flush=True)

    records: list[dict[str, Any]] = []
    ingests: list[dict[str, Any]] = []
    skips = Skips()
    with tempfile.TemporaryDirectory(prefix="lossless-retention-") as tmp:
        for number in chats:
            chat = beam.load_chat(number, args.data)
            before = _embed_counts(embedder)
            run = ingest(chat, Path(tmp), args.window, embedder, args.ingest_unit)
            after = _embed_counts(embedder)
            info = {"chat": number, "topic": chat.topic, "messages": len(chat.messages),
                    "tokens": run.stats["message_tokens"], "ingest_s": round(run.ingest_s, 2),
                    "summaries": run.stats["summaries"], "max_depth": run.stats["max_depth"],
                    "raw_tail_messages": run.stats["raw_tail_messages"],
                    "embed_s": round(after[0] - before[0], 2), "embedded_texts": after[1] - before[1],
                    "embed_cache_hits": after[2] - before[2]}
            ingests.append(info)
            print(f"chat {number}: {info['messages']} messages, {info['tokens']} tokens ingested in "
                  f"{info['ingest_s']}s ({info['embed_s']}s embedding {info['embedded_texts']} texts, "
                  f"{info['embed_cache_hits']} from the cache), {info['summaries']} summaries "
                  f"(depth {info['max_depth']})", file=sys.stderr, flush=True)
            t0 = time.perf_counter()
            records.extend(evaluate_chat(run, systems, budgets, skips))
            info["evaluate_s"] = round(time.perf_counter() - t0, 2)
            run.mem.close()
    if embedder is not None:
        embedder.close()

    by_ability: dict[str, list[dict[str, Any]]] = defaultdict(list)
    by_chat: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        by_ability[r["ability"]].append(r)
        by_chat[r["chat"]].append(r)
    overall = aggregate(records)
    n_questions = sum(1 for r in records if r["system"] == FULL)
    result: dict[str, Any] = {
        "config": {"data": str(args.data), "chats": chats, "budgets": budgets, "window": args.window,
                   "systems": systems, "ingest_unit": args.ingest_unit, "vectors": not args.no_vectors,
                   "search_limit": SEARCH_LIMIT, "min_sentence_chars": MIN_SENTENCE, "questions": n_questions,
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
    result["total_s"] = round(time.perf_counter() - t_start, 2)

    print(report(result))
    print(f"\n{n_questions} questions from {len(chats)} chats; skipped without evidence: "
          f"{sum(skips.no_evidence.values())} {dict(sorted(skips.no_evidence.items()))}; unknown evidence ids: "
          f"{len(skips.unknown_ids)}; without reference words: {len(skips.no_reference)}; budget violations: "
          f"{len(skips.budget_violations)}")
    print(f"ingest {result['ingest_s_total']}s (embedding {result['embed_s_ingest_total']}s), "
          f"contexts and metrics {result['evaluate_s_total']}s, total {result['total_s']}s")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    if args.plot:
        args.plot.parent.mkdir(parents=True, exist_ok=True)
        plot(result, args.plot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
