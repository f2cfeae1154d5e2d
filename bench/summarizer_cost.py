"""What LLM summarization costs: provider calls per 1,000 ingested messages and the cost
ratio (tokens sent to the summarizer ÷ tokens ingested), on the BEAM dev chats.

Each chat is fed turn by turn into a fresh database (window 8192 by default, so compaction
really runs) with ``OpenAISummarizer`` pointed at the fake OpenAI-compatible server from
the test suite (``tests/fake_openai.py``: a real HTTP server on 127.0.0.1 that answers
with a deterministic digest), then compacted fully. Beside it, in the same run, the same
chats with the offline extractive summarizer (no provider calls) as the reference for
wall time and summary counts.

    python bench/summarizer_cost.py [--chats 1 2 ...] [--window 8192] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent))
import beam

import lossless
from lossless.summarize.openai_chat import OpenAISummarizer
from tests.fake_openai import FakeOpenAIServer


def run_chat(chat: beam.BeamChat, folder: Path, window: int, summarizer: Any) -> dict[str, Any]:
    mem = lossless.open(folder / f"{summarizer.name}-{chat.number}.db", context_window=window, embedder=None,
                        summarizer=summarizer)
    conv = mem.conversation(f"beam-{chat.number}")
    by_id = chat.by_id()
    t0 = time.perf_counter()
    for ids in chat.turns:
        conv.add_many([{"role": by_id[i].role, "content": by_id[i].content, "created_at": by_id[i].created_at}
                       for i in ids])
    ingest_s = time.perf_counter() - t0
    stats = conv.stats()
    problems = mem.verify()
    mem.close()
    messages, tokens = stats.messages, stats.message_tokens
    return {
        "chat": chat.number, "messages": messages, "tokens": tokens, "summaries": stats.summaries,
        "calls": stats.usage.summarizer_calls, "summarizer_input_tokens": stats.usage.summarizer_input_tokens,
        "summarizer_output_tokens": stats.usage.summarizer_output_tokens,
        "calls_per_1000_messages": round(1000 * stats.usage.summarizer_calls / messages, 1),
        "cost_ratio": stats.usage.summarizer_cost_ratio, "fallbacks": stats.usage.summaries_by_fallback,
        "ingest_s": round(ingest_s, 2), "verify_problems": len(problems),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chats", type=int, nargs="+", default=None)
    ap.add_argument("--window", type=int, default=8192)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    numbers = args.chats or beam.chat_numbers()
    rows: dict[str, list[dict[str, Any]]] = {"openai (fake server)": [], "extractive (reference)": []}
    with tempfile.TemporaryDirectory() as tmp, FakeOpenAIServer() as fake:
        for number in numbers:
            chat = beam.load_chat(number)
            llm = OpenAISummarizer("fake-summarizer", base_url=fake.base_url, api_key="x", max_retries=0)
            rows["openai (fake server)"].append(run_chat(chat, Path(tmp), args.window, llm))
            rows["extractive (reference)"].append(run_chat(chat, Path(tmp), args.window,
                                                           lossless.summarize.extractive.ExtractiveSummarizer()))
            print(f"chat {number} done", file=sys.stderr, flush=True)
    summary: dict[str, Any] = {}
    print(f"{'summarizer':<24}{'msgs':>7}{'summaries':>10}{'calls':>7}{'calls/1k msg':>13}"
          f"{'cost ratio':>11}{'ingest s':>10}")
    for name, per_chat in rows.items():
        msgs = sum(r["messages"] for r in per_chat)
        calls = sum(r["calls"] for r in per_chat)
        sent = sum(r["summarizer_input_tokens"] for r in per_chat)
        tokens = sum(r["tokens"] for r in per_chat)
        summary[name] = {
            "chats": len(per_chat), "messages": msgs, "tokens": tokens,
            "summaries": sum(r["summaries"] for r in per_chat), "calls": calls,
            "calls_per_1000_messages": round(1000 * calls / msgs, 1) if msgs else 0.0,
            "cost_ratio": round(sent / tokens, 4) if tokens else 0.0,
            "cost_ratio_median_chat": statistics.median(r["cost_ratio"] for r in per_chat),
            "ingest_s": round(sum(r["ingest_s"] for r in per_chat), 2),
            "verify_problems": sum(r["verify_problems"] for r in per_chat),
        }
        s = summary[name]
        print(f"{name:<24}{msgs:>7}{s['summaries']:>10}{calls:>7}{s['calls_per_1000_messages']:>13}"
              f"{s['cost_ratio']:>11}{s['ingest_s']:>10}")
    if args.json:
        args.json.write_text(json.dumps({"window": args.window, "summary": summary, "chats": rows}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
