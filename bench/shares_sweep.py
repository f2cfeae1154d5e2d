"""Sweep the assembly's budget split (and recall options) on the BEAM dev set, lossless only.

The retention benchmark measures one configuration against baselines; this script holds
the ingested chats and re-assembles every question under each variant, so the defaults
in ``lossless.core.config.Config`` are chosen by measurement rather than by the seed's table.

    python bench/shares_sweep.py [--chats 1 2 ...] [--no-vectors] [--embed-cache FILE] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
import beam
import retention

from lossless.core.tokens import count_chat_tokens

R70 = dict(tail_share=0.15, summaries_share=0.10, root_share=0.05, recall_share=0.70)
R80 = dict(tail_share=0.10, summaries_share=0.07, root_share=0.03, recall_share=0.80)
R55 = dict(tail_share=0.20, summaries_share=0.15, root_share=0.10, recall_share=0.55)
VARIANTS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "selective": dict(strategy="selective"),
    "hierarchical": dict(strategy="hierarchical"),
    "vw.5": dict(vector_weight=0.5),
    "vw.6": dict(vector_weight=0.6),
    "vw.85": dict(vector_weight=0.85),
    "rrf": dict(fusion="rrf"),
    "whole.15": dict(recall_whole_share=0.15),
    "whole.3": dict(recall_whole_share=0.3),
    "whole.5": dict(recall_whole_share=0.5),
    "whole0 (excerpts only)": dict(recall_whole_share=0.0),
    "depth30": dict(recall_depth=30),
    "depth100": dict(recall_depth=100),
    "item/5": dict(recall_item_share=0.2),
    "max256": dict(recall_item_max_tokens=256),
    "nowin": dict(recall_windows=False),
    "recall 80": R80,
    "recall 55": R55,
    "recall 70": R70,
    "seed 30/35/15/20": dict(tail_share=0.30, summaries_share=0.35, root_share=0.15, recall_share=0.20),
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chats", type=int, nargs="+", default=None)
    ap.add_argument("--budgets", type=int, nargs="+", default=[1024, 2048, 4096])
    ap.add_argument("--window", type=int, default=8192)
    ap.add_argument("--no-vectors", action="store_true")
    ap.add_argument("--embed-cache", type=Path, default=None)
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS))
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--no-query", action="store_true",
                    help="assemble without the question (what the tail, summaries and root keep on their own)")
    args = ap.parse_args()
    embedder = None if args.no_vectors else retention.load_embedder(args.embed_cache)
    numbers = args.chats or beam.chat_numbers()
    scores: dict[str, dict[int, list[tuple[float, float]]]] = {v: {b: [] for b in args.budgets} for v in args.variants}
    with tempfile.TemporaryDirectory() as tmp:
        for number in numbers:
            chat = beam.load_chat(number)
            run = retention.ingest(chat, Path(tmp), args.window, embedder, "turn")
            base = run.mem.assembler.config
            for name in args.variants:
                run.mem.assembler.config = base.replace(**VARIANTS[name])
                run.mem.recaller.config = run.mem.assembler.config
                for q in chat.questions:
                    evidence = [retention.evidence_of(run.by_seq[run.seq_of_id[i]].text)
                                for i in q.evidence_ids if i in run.seq_of_id]
                    if not evidence:
                        continue
                    reference = retention.content_words(q.reference)
                    for budget in args.budgets:
                        ctx = run.conv.assemble(budget_tokens=budget, query=None if args.no_query else q.question)
                        assert count_chat_tokens(run.mem.counter, ctx.messages) <= budget
                        view = retention.ContextView.of(ctx.messages, ctx.tokens, 0.0)
                        s = retention.score(view, evidence, reference)
                        scores[name][budget].append((float(s["evidence_hit"] or 0), float(s["answer_recall"] or 0)))
            run.mem.close()
            print(f"chat {number} done", file=sys.stderr, flush=True)
    table: dict[str, Any] = {}
    print(f"{'variant':<18}" + "".join(f"{'ev@' + str(b):>10}{'ans@' + str(b):>10}" for b in args.budgets))
    for name in args.variants:
        row = {b: (statistics.mean(x[0] for x in scores[name][b]), statistics.mean(x[1] for x in scores[name][b]))
               for b in args.budgets}
        table[name] = {str(b): {"evidence_hit": round(e, 4), "answer_recall": round(a, 4)} for b, (e, a) in row.items()}
        print(f"{name:<18}" + "".join(f"{row[b][0]:>10.3f}{row[b][1]:>10.3f}" for b in args.budgets))
    if args.json:
        args.json.write_text(json.dumps(table, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
