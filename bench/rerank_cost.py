"""What the optional LLM rerank (``rerank="llm"``, issue 20 item 10) costs per query on the
BEAM dev chats: extra assemble latency, requests, and tokens sent to the model.

Each chat is ingested as ``bench/retention.py`` does (turn by turn, window 8192, inline
compaction, keyword recall unless ``--embed-cache`` gives vectors), then every question
with evidence is assembled at each budget twice: rerank off, and rerank on against a
scripted model on 127.0.0.1 (``tests/fake_openai.py``, the OpenAI wire format) that
answers in no time with recall's own order, so both contexts must be equal and the
difference is lossless's cost alone (prompt, HTTP, parsing). A real model adds its own
generation time per request; its effect on retention cannot be measured without one.

    python bench/rerank_cost.py [--chats 1 2 3] [--budgets 1024 2048 4096] [--top-n 20] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent))
import beam
import retention

from lossless.core.tokens import get_counter
from tests.fake_openai import FakeOpenAIServer


def _identity(body: dict[str, Any]) -> str:
    prompt = body["messages"][-1]["content"]
    return json.dumps([int(n) for n in re.findall(r"^\[(\d+)\] ", prompt, re.MULTILINE)])


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def measure(chats: list[beam.BeamChat], budgets: list[int], top_n: int, embedder: Any,
            server: FakeOpenAIServer) -> dict[str, Any]:
    counter = get_counter()
    off_ms: list[float] = []
    on_ms: list[float] = []
    sent: list[int] = []
    candidates: list[int] = []
    assembles = mismatches = 0
    with tempfile.TemporaryDirectory(prefix="lossless-rerank-") as tmp:
        for chat in chats:
            run = retention.ingest(chat, Path(tmp), 8192, embedder, "turn")
            plain = run.mem.assembler.config
            ranked = plain.replace(rerank="llm", rerank_model="scripted", rerank_base_url=server.base_url,
                                   rerank_top_n=top_n)
            for q in chat.questions:
                if not q.evidence_ids:
                    continue
                for budget in budgets:
                    run.mem.assembler.config = plain
                    t0 = time.perf_counter()
                    base = run.conv.assemble(budget_tokens=budget, query=q.question)
                    off_ms.append((time.perf_counter() - t0) * 1000)
                    before = len(server.chat_requests())
                    run.mem.assembler.config = ranked
                    t0 = time.perf_counter()
                    ctx = run.conv.assemble(budget_tokens=budget, query=q.question)
                    on_ms.append((time.perf_counter() - t0) * 1000)
                    assembles += 1
                    mismatches += ctx.messages != base.messages
                    for request in server.chat_requests()[before:]:
                        msgs = request.body["messages"]
                        sent.append(sum(counter.count(m["content"]) for m in msgs))
                        candidates.append(len(re.findall(r"^\[\d+\] ", msgs[-1]["content"], re.MULTILINE)))
            run.mem.close()
            print(f"chat {chat.number}: {assembles} assembles so far", file=sys.stderr, flush=True)
    return {
        "assembles": assembles, "requests": len(sent), "contexts_changed": mismatches,
        "assemble_ms_off": {"p50": round(statistics.median(off_ms), 2), "p95": round(_pct(off_ms, 0.95), 2)},
        "assemble_ms_on": {"p50": round(statistics.median(on_ms), 2), "p95": round(_pct(on_ms, 0.95), 2)},
        "extra_ms_p50": round(statistics.median(on_ms) - statistics.median(off_ms), 2),
        "extra_ms_mean": round(statistics.fmean(on_ms) - statistics.fmean(off_ms), 2),
        "tokens_sent_per_request": {"mean": round(statistics.fmean(sent), 1) if sent else 0,
                                    "max": max(sent, default=0)},
        "tokens_sent_per_assemble": round(sum(sent) / max(1, assembles), 1),
        "candidates_per_request": {"mean": round(statistics.fmean(candidates), 1) if candidates else 0,
                                   "max": max(candidates, default=0)},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chats", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--budgets", type=int, nargs="+", default=[1024, 2048, 4096])
    ap.add_argument("--top-n", type=int, default=20, help="rerank_top_n")
    ap.add_argument("--data", type=Path, default=beam.DEFAULT_DATA)
    ap.add_argument("--embed-cache", type=Path, help="recall with vectors (the local model, through this cache)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    chats = [beam.load_chat(n, args.data) for n in args.chats]
    embedder = retention.load_embedder(args.embed_cache) if args.embed_cache else None
    with FakeOpenAIServer() as server:
        server.responder = _identity
        result = {"chats": args.chats, "budgets": args.budgets, "top_n": args.top_n,
                  "vectors": embedder is not None, **measure(chats, args.budgets, args.top_n, embedder, server)}
    print(json.dumps(result, indent=1))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
