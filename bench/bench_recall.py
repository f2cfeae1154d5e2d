"""Recall latency at scale: ``assemble(query=…)`` p50/p99 with 10k and 100k stored messages
in one conversation, for each vector backend (auto, sqlite-vec, numpy), with the query embedded
by the real local model on every call. ``turn_p50_ms`` is an agent's loop: a user message
and a reply are stored, then the next context is assembled with a query (the new units are
indexed as part of it).

Embedding 100k messages with the real model would take hours on 2 cores, so documents
are embedded by a fast deterministic 384-d hashing embedder; each query is embedded by
all-MiniLM-L6-v2 for its time (what an agent pays per turn) and then by the hashing
embedder for its vector (so it lives in the same space as the documents). Search latency
does not depend on what the vectors mean, only on their number and size.

The reference beside it, in the same run and on the same file, is a bare hybrid retriever
of the kind a fifty-line script would be: FTS5 bm25 over the messages and one product over
the unit vectors in a numpy matrix (60 from each), reciprocal-rank fusion, then whole
messages in rank order while they fit the budget. It builds no context around them (no
recent messages, summaries, memories or excerpts), so it is the floor lossless is measured
against, not an equal.

``--store DIR`` keeps the built store there (``recall-SIZE.db``) and reuses it on the next
run, so two versions of the code can be timed on one file, one after the other.

    python bench/bench_recall.py [--sizes 10000 100000] [--repeats 50] [--store DIR] [--json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import synth

import lossless
from lossless.embed.base import Vectors, normalize

QUERIES = ["which port did the billing API move to", "ERR_4242 retry", "连接池 太小", "p99 latency of the cache layer",
           "version 2.17.1 rollout", "nightly export failed", "测试覆盖率", "mobile client heap size"]


class TwinEmbedder:
    """Hash vectors for everything; single texts (queries) also go through the real model."""

    provider = "bench"
    model = "hash-384"
    dim = 384

    def __init__(self, real: Any | None) -> None:
        self.real = real

    def embed(self, texts: Sequence[str]) -> Vectors:
        if self.real is not None and len(texts) == 1:
            self.real.embed(list(texts))  # pay the real query-embedding time
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                out[i, int(hashlib.blake2b(word.encode(), digest_size=4).hexdigest(), 16) % self.dim] += 1.0
            out[i, 0] += 1e-3
        return normalize(out)


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def _timed(path: Path, backend: str, label: str, real: Any, budget: int, repeats: int, *,
           turns: bool) -> dict[str, float]:
    """p50/p99 of ``repeats`` assemblies with a new query each, on a memory of its own
    (warmed up once); with ``turns``, a user message and a reply are stored before each."""
    m = lossless.open(path, context_window=32768, embedder=TwinEmbedder(real), vector_backend=backend)
    c = m.conversation("bench")
    c.assemble(budget_tokens=budget, query="warm-up question")
    times: list[float] = []
    for k in range(repeats):
        if turns:
            q = f"{QUERIES[k % len(QUERIES)]} turn {k}"
            c.add("user", f"About {q}: what did we decide?")
            c.add("assistant", f"We decided to revisit {q} after the next release.")
        else:
            q = f"{QUERIES[k % len(QUERIES)]} #{k} {backend}"  # never cached: the model runs every time
        t = time.perf_counter()
        ctx = c.assemble(budget_tokens=budget, query=q)
        times.append((time.perf_counter() - t) * 1000)
        assert ctx.tokens <= budget
    m.close()
    return {f"{label}_p50_ms": round(pct(times, 50), 1), f"{label}_p99_ms": round(pct(times, 99), 1)}


def _reference(path: Path, real: Any, budget: int, repeats: int) -> dict[str, float]:
    """p50/p99 of the bare hybrid retriever (see the module docstring) over ``path``."""
    import apsw

    from lossless.core.tokens import default_counter

    db = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    rows = list(db.execute("SELECT u.message_ids, c.vector FROM recall_units u JOIN embedding_cache c "
                           "ON c.text_sha256 = u.text_sha256 AND c.model = ?", (TwinEmbedder.model,)))
    owner = [json.loads(ids)[0] for ids, _ in rows]
    matrix = np.vstack([np.frombuffer(v, dtype="<f4") for _, v in rows])
    embed, counter = TwinEmbedder(real), default_counter()
    times: list[float] = []
    for k in range(repeats + 1):
        q = f"{QUERIES[k % len(QUERIES)]} #{k} reference"
        t = time.perf_counter()
        words = " OR ".join(f'"{w}"' for w in re.findall(r"\w+", q.lower()))
        keyword = [mid for (mid,) in db.execute(
            "SELECT m.id FROM messages_fts f JOIN messages m ON m.rowid = f.rowid WHERE messages_fts MATCH ? "
            "ORDER BY bm25(messages_fts) LIMIT 60", (words,))]
        sims = matrix @ embed.embed([q])[0]
        nearest = [owner[i] for i in np.argsort(-sims)[:60]]
        fused: dict[str, float] = {}
        for ranked in (keyword, nearest):
            for rank, mid in enumerate(dict.fromkeys(ranked)):
                fused[mid] = fused.get(mid, 0.0) + 1 / (60 + rank)
        best = sorted(fused, key=lambda mid: -fused[mid])
        text = dict(db.execute(f"SELECT id, content FROM messages WHERE id IN ({','.join('?' * len(best))})", best))
        used = 0
        for mid in best:  # whole messages while they fit
            cost = counter.count(text[mid])
            if used + cost <= budget:
                used += cost
        if k:  # the first is the warm-up
            times.append((time.perf_counter() - t) * 1000)
    db.close()
    return {"reference_p50_ms": round(pct(times, 50), 1), "reference_p99_ms": round(pct(times, 99), 1)}


def _build(path: Path, size: int) -> float:
    """Store ``size`` synthetic messages at ``path``, indexed and compacted; seconds taken."""
    rows = list(synth.messages(size, seed=size))
    mem = lossless.open(path, context_window=32768, embedder=TwinEmbedder(None), vector_backend="sqlite-vec")
    conv = mem.conversation("bench")
    t0 = time.perf_counter()
    for i in range(0, size, 500):
        conv.add_many(rows[i : i + 500])
    conv.index()
    mem.wait_idle()  # compacted too: no worker is busy while the queries are timed
    mem.close()
    return round(time.perf_counter() - t0, 1)


def run(size: int, repeats: int, budget: int, real: Any, keep: Path | None) -> dict[str, Any]:
    out: dict[str, Any] = {"messages": size, "budget": budget}
    with tempfile.TemporaryDirectory() as tmp:
        path = (keep or Path(tmp)) / f"recall-{size}.db"
        if keep is not None and path.exists():
            out["ingest_s"] = None  # reused
        else:
            out["ingest_s"] = _build(path, size)
        mem = lossless.open(path, context_window=32768, embedder=TwinEmbedder(None), vector_backend="sqlite-vec")
        out["units"] = mem.store._query("SELECT count(*) FROM recall_units")[0][0]
        mem.close()
        real.embed(["warm"])
        out.update(_reference(path, real, budget, repeats))
        # one memory open at a time, as an agent has: each backend gets its own warm-up
        # (numpy: loading the matrix once) and then all its queries
        for b in ("auto", "sqlite-vec", "numpy"):
            out.update(_timed(path, b, b, real, budget, repeats, turns=False))
        # an agent's turn: a user message and a reply are stored, then the next context
        # is assembled — the new units are indexed and join the search (auto backend).
        # On a copy when the store is kept: the turns would change it for the next run.
        turns = path
        if keep is not None:
            turns = Path(tmp) / "turns.db"
            for suffix in ("", "-wal"):  # a file without the log it was written with reads as corrupt
                if Path(f"{path}{suffix}").exists():
                    shutil.copyfile(f"{path}{suffix}", f"{turns}{suffix}")
        out.update(_timed(turns, "auto", "turn", real, budget, repeats, turns=True))
        qt = []
        for k in range(repeats):
            t = time.perf_counter()
            real.embed([f"{QUERIES[k % len(QUERIES)]} ?{k}"])
            qt.append((time.perf_counter() - t) * 1000)
        out["query_embed_p50_ms"] = round(pct(qt, 50), 1)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--repeats", type=int, default=50)
    ap.add_argument("--budget", type=int, default=4096)
    ap.add_argument("--store", type=Path, help="keep the built stores in this folder and reuse them")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.store is not None:
        args.store.mkdir(parents=True, exist_ok=True)
    from lossless.embed.local import LocalEmbedder

    real = LocalEmbedder()
    results = [run(n, args.repeats, args.budget, real, args.store) for n in args.sizes]
    if args.json:
        print(json.dumps(results, indent=2))
        return
    cols = ["messages", "units", "ingest_s", "query_embed_p50_ms", "reference_p50_ms", "auto_p50_ms", "auto_p99_ms",
            "turn_p50_ms",
            "sqlite-vec_p50_ms", "sqlite-vec_p99_ms", "numpy_p50_ms", "numpy_p99_ms"]
    print(" | ".join(cols))
    for r in results:
        print(" | ".join(str(r[c]) for c in cols))


if __name__ == "__main__":
    main()
