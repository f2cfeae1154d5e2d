"""CJK keyword indexing (issue 27): character bigrams against a segmenter (jieba), against
the trigram index it replaced — write cost, index size and keyword-only recall.

Three variants of the library, each in processes of its own, alternated round by round:

  today    the library before the change (CJK runs in an FTS5 trigram index): a ``git
           archive`` export of that commit, given as ``--before DIR`` (its ``src`` folder is
           put first on ``PYTHONPATH``)
  bigrams  this tree: each CJK run's overlapping bigrams and its last character on a line
           of the unicode61 row (``lossless.store.fts.cjk_index_terms``)
  jieba    this tree with the CJK terms made by jieba (``pip install jieba``) instead: at
           index time ``jieba.cut_for_search`` of each run (its words and their sub-words),
           at query time the same, each term matched whole; swapped in by this script, not
           a part of the library

Texts: MADial-Bench-zh (``shared/data/madial-zh``): the memory events and every dialogue turn,
Chinese chat messages of 10-60 characters, cycled to ``--messages``.

Run::

    git archive <commit before> src | tar -x -C /tmp/before
    python bench/cjk_keywords.py --before /tmp/before --rounds 3 --json /tmp/cjk.json
    python bench/cjk_keywords.py --before /tmp/before --recall      # + retention --set madial, each variant

Write cost: ``add_many`` in batches of 1,000 into a fresh file store (``embedder=None``,
``compaction="deferred"``, so only storing and indexing are timed) and single ``add`` calls;
msgs/s, the median over rounds. Index size: the pages of the messages' keyword tables
(``dbstat``), bytes per 1,000 messages. Search: ``conv.search(question, limit=20)`` in the
bulk store for 60 MADial dialogues as questions (long: ~100 distinct bigrams), p50 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

VARIANTS = ("today", "bigrams", "jieba")


def texts() -> list[str]:
    import madial

    events, dialogues = madial.load(madial.default_data())
    out = [e.text for e in events.values()]
    out += [content for d in dialogues for _role, content in d.turns]
    return out


def questions() -> list[str]:
    """MADial's dialogues before their test turn, one a line: long Chinese questions."""
    import madial

    _events, dialogues = madial.load(madial.default_data())
    return [madial.query_of(d, "dialogue") for d in dialogues]


def use_jieba() -> None:
    """Swap the library's CJK terms for jieba's (this process only)."""
    import logging

    import jieba

    import lossless.store.fts as fts
    import lossless.store.sqlite.grep as grep

    jieba.setLogLevel(logging.WARNING)
    jieba.initialize()

    def index_terms(text: str) -> Any:
        for run in fts._cjk_words(text):
            yield " ".join(jieba.cut_for_search(run))

    def query_terms(text: str) -> list[str]:
        terms: dict[str, None] = {}
        for run in fts._cjk_words(text):
            terms.update(dict.fromkeys(jieba.cut_for_search(run)))
        return list(terms)[: fts.MAX_CJK_TERMS]

    def fts_query(text: str) -> str | None:
        terms = query_terms(text)
        return " OR ".join(fts.quote_fts(t) for t in terms) if terms else None

    fts.cjk_index_terms = index_terms
    fts.cjk_query_terms = query_terms
    fts.cjk_fts_query = fts_query
    grep.cjk_query_terms = query_terms
    grep.cjk_fts_query = fts_query


def child(variant: str, n: int, singles: int) -> dict[str, Any]:
    """One measurement in this process: add_many and single adds, then the index size."""
    if variant == "jieba":
        use_jieba()
    import lossless

    base = texts()
    rows = [{"role": "user" if i % 2 == 0 else "assistant", "content": base[i % len(base)]} for i in range(n)]
    out: dict[str, Any] = {"variant": variant, "messages": n}
    with tempfile.TemporaryDirectory() as folder:
        mem = lossless.open(Path(folder) / "bulk.db", embedder=None, compaction="deferred")
        conv = mem.conversation("c")
        t0 = time.perf_counter()
        for i in range(0, n, 1000):
            conv.add_many(rows[i : i + 1000])
        out["add_many_msgs_per_s"] = round(n / (time.perf_counter() - t0))
        pages = mem.store.query(  # type: ignore[attr-defined]
            "SELECT coalesce(sum(pgsize), 0) FROM dbstat WHERE name LIKE 'messages_fts%' OR name LIKE 'messages_tri%'")
        out["index_bytes_per_1k"] = round(int(pages[0][0]) / (n / 1000))
        times = []
        for q in questions()[:60]:
            t0 = time.perf_counter()
            conv.search(q, limit=20)
            times.append(1000 * (time.perf_counter() - t0))
        out["search_ms_p50"] = round(statistics.median(times), 2)
        out["search_ms_max"] = round(max(times), 2)
        mem.close()
        mem = lossless.open(Path(folder) / "single.db", embedder=None, compaction="deferred")
        conv = mem.conversation("c")
        t0 = time.perf_counter()
        for row in rows[:singles]:
            conv.add(**row)
        out["add_msgs_per_s"] = round(singles / (time.perf_counter() - t0))
        mem.close()
    return out


def _env(variant: str, before: Path | None) -> dict[str, str]:
    env = dict(os.environ)
    if variant == "today":
        if before is None:
            raise SystemExit("--before DIR (a git archive of the commit to compare with) is needed for 'today'")
        env["PYTHONPATH"] = f"{before / 'src'}{os.pathsep}{env.get('PYTHONPATH', '')}"
    return env


def write_cost(args: argparse.Namespace) -> dict[str, Any]:
    runs: dict[str, list[dict[str, Any]]] = {v: [] for v in args.variants}
    for r in range(args.rounds):
        for variant in args.variants:
            cmd = [sys.executable, __file__, "--child", variant, "--messages", str(args.messages),
                   "--singles", str(args.singles)]
            got = json.loads(subprocess.run(cmd, env=_env(variant, args.before), check=True, capture_output=True,
                                            text=True).stdout)
            runs[variant].append(got)
            print(f"round {r + 1} {variant}: {got}", file=sys.stderr)
    summary: dict[str, Any] = {}
    for variant, got in runs.items():
        summary[variant] = {k: statistics.median(g[k] for g in got)
                            for k in ("add_many_msgs_per_s", "add_msgs_per_s", "index_bytes_per_1k", "search_ms_p50")}
    if "today" in summary:
        for s in summary.values():
            s["add_many_cost_vs_today"] = round(summary["today"]["add_many_msgs_per_s"] / s["add_many_msgs_per_s"], 2)
            s["add_cost_vs_today"] = round(summary["today"]["add_msgs_per_s"] / s["add_msgs_per_s"], 2)
    return {"rounds": runs, "median": summary}


def recall(args: argparse.Namespace) -> dict[str, Any]:
    """bench/retention.py --set madial --no-vectors per variant: the keyword-only rows."""
    out: dict[str, Any] = {}
    for variant in args.variants:
        with tempfile.NamedTemporaryFile(suffix=".json") as f:
            cmd = [sys.executable, __file__, "--retention", variant, "--json-out", f.name]
            subprocess.run(cmd, env=_env(variant, args.before), check=True, capture_output=True, text=True)
            result = _keyword_rows(json.loads(Path(f.name).read_text()))
        out[variant] = result
        print(f"{variant}: {json.dumps(result)}", file=sys.stderr)
    return out


def _retention(variant: str, json_out: str) -> None:
    if variant == "jieba":
        use_jieba()
    import runpy

    sys.argv = ["retention.py", "--set", "madial", "--no-vectors", "--json", json_out]
    runpy.run_path(str(HERE / "retention.py"), run_name="__main__")


def _keyword_rows(full: dict[str, Any]) -> dict[str, Any]:
    """memory_recall and gold_recall of lossless (keyword-only here), fts and bm25 per budget,
    and the p50 milliseconds of a context."""
    overall = full["overall"]
    return {f"{system} {metric}@{budget}": overall[system][budget][metric]
            for system in ("lossless", "fts", "bm25") for metric in ("memory_recall", "gold_recall", "ms_p50")
            for budget in overall[system]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", type=Path, help="a git archive export of the commit to compare with ('today')")
    ap.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--messages", type=int, default=5000, help="messages written by add_many per round")
    ap.add_argument("--singles", type=int, default=1000, help="messages written by single adds per round")
    ap.add_argument("--recall", action="store_true", help="measure keyword-only recall on MADial instead")
    ap.add_argument("--json", type=Path, help="write every number here")
    ap.add_argument("--child", choices=VARIANTS, help=argparse.SUPPRESS)
    ap.add_argument("--retention", choices=VARIANTS, help=argparse.SUPPRESS)
    ap.add_argument("--json-out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.messages, args.singles)))
        return
    if args.retention:
        _retention(args.retention, args.json_out)
        return
    result = recall(args) if args.recall else write_cost(args)
    print(json.dumps(result.get("median", result), indent=1))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
