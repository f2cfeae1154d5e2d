"""How often the prompt prefix survives from one turn to the next (provider prompt caches
hit only on an identical prefix), and how often compaction runs, on BEAM dev chats
replayed turn by turn through ``conv.turn``.

Each chat's user messages go through the turn loop with a "model" that answers with the
chat's recorded assistant reply, so the stored history is the real one. For every turn we
keep its *cacheable prefix*: the messages sent before the question-dependent block (or
before the newest user message). Turn t+1 *hits* when its messages start with turn t's
prefix. Side by side in the same run: the cache-stable layout (the default) and the
budgeted layout (``layout="budgeted"``), which fits each context to the budget afresh.

    python bench/prefix_stability.py [--chats 1 2 3] [--window 32768] [--json OUT]
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

import lossless
from lossless.context import DYNAMIC_HEADER
from lossless.core.tokens import count_chat_tokens


def _prefix(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for i, m in enumerate(messages):
        if m.get("role") == "system" and str(m.get("content", "")).startswith(DYNAMIC_HEADER):
            return messages[:i]
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=len(messages))
    return messages[:last_user]


def replay(chat: beam.BeamChat, folder: Path, window: int, layout: str) -> dict[str, Any]:
    # inline: compaction between turns, deterministic (a worker thread keeps up the same way)
    mem = lossless.open(folder / f"{layout}-{chat.number}.db", context_window=window, embedder=None,
                        compaction="inline")
    conv = mem.conversation(f"beam-{chat.number}")
    by_id = chat.by_id()
    turns = 0
    hits = 0
    reused: list[float] = []
    previous: list[dict[str, Any]] | None = None
    for ids in chat.turns:
        msgs = [by_id[i] for i in ids]
        users = [m for m in msgs if m.role == "user"]
        replies = [m.content for m in msgs if m.role == "assistant"]
        if not users or not replies:
            conv.add_many([{"role": m.role, "content": m.content, "created_at": m.created_at} for m in msgs])
            continue
        sent: list[list[dict[str, Any]]] = []

        def model(messages: list[dict[str, Any]], _r: list[str] = replies, _s: list[Any] = sent) -> str:
            _s.append(messages)
            return _r[0]

        conv.turn({"role": "user", "content": users[0].content, "created_at": users[0].created_at},
                  call=model, memory_tools=False, layout=layout)
        messages = sent[-1]
        if previous is not None:
            turns += 1
            prefix = _prefix(previous)
            if messages[: len(prefix)] == prefix:
                hits += 1
                total = count_chat_tokens(mem.counter, messages)  # type: ignore[arg-type]
                reused.append(count_chat_tokens(mem.counter, prefix) / total if total else 0.0)  # type: ignore[arg-type]
            else:
                reused.append(0.0)
        previous = messages
    compactions = len(conv.compaction_log(limit=10**6))
    mem.close()
    return {"chat": chat.number, "turns": turns, "prefix_hits": hits,
            "hit_share": round(hits / turns, 4) if turns else 0.0,
            "reused_token_share": round(statistics.mean(reused), 4) if reused else 0.0,
            "compactions": compactions,
            "compactions_per_1000_turns": round(1000 * compactions / max(1, turns), 1)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chats", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    ap.add_argument("--window", type=int, default=32768)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    results: dict[str, list[dict[str, Any]]] = {"stable (default)": [], "budgeted (reference)": []}
    with tempfile.TemporaryDirectory() as tmp:
        for number in args.chats:
            chat = beam.load_chat(number)
            results["stable (default)"].append(replay(chat, Path(tmp), args.window, "stable"))
            results["budgeted (reference)"].append(replay(chat, Path(tmp), args.window, "budgeted"))
            print(f"chat {number} done", file=sys.stderr, flush=True)
    summary = {}
    print(f"{'layout':<22}{'turns':>7}{'prefix hits':>13}{'reused tokens':>15}{'compactions/1k turns':>22}")
    for name, rows in results.items():
        turns = sum(r["turns"] for r in rows)
        hits = sum(r["prefix_hits"] for r in rows)
        comp = sum(r["compactions"] for r in rows)
        reused = statistics.mean(r["reused_token_share"] for r in rows)
        summary[name] = {"turns": turns, "hit_share": round(hits / turns, 4), "reused_token_share": round(reused, 4),
                         "compactions_per_1000_turns": round(1000 * comp / turns, 1)}
        print(f"{name:<22}{turns:>7}{summary[name]['hit_share']:>13.1%}{reused:>15.1%}"
              f"{summary[name]['compactions_per_1000_turns']:>22}")
    if args.json:
        args.json.write_text(json.dumps({"window": args.window, "summary": summary, "chats": results}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
