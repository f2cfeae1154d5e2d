"""A LangChain loop with lossless as its chat history, with and without the default embedder.

The whole script, as a user runs it: a fresh process imports LangChain and lossless, opens a
new SQLite store, and runs ``--turns`` turns of ``RunnableWithMessageHistory`` (the
history is :class:`lossless.integrations.langchain.LosslessChatMessageHistory`, budget 2,000
tokens; the model is a LangChain fake that answers after ``--model-seconds``, a fast model's
latency, during which the worker may embed; with 0 the writes never pause and the worker
only loads the model), then closes the store. Two set-ups alternate, ``--rounds`` times:
``default`` (the local embedder, the background worker) and ``none``
(``LOSSLESS_EMBEDDER=none``). Reported: each run's wall time, the best of each and their
ratio (issue 29's bar: at most 1.5x).

    python3 bench/bench_langchain_loop.py [--turns 120] [--rounds 3] [--model-seconds 0.05] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

CHILD = r"""
import json, sys, time, warnings
from pathlib import Path
warnings.simplefilter("ignore")
from langchain_core.messages import AIMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import RunnableLambda
from langchain_core.runnables.history import RunnableWithMessageHistory
import lossless
from lossless.integrations.langchain import LosslessChatMessageHistory

turns, folder, latency = int(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3])
TOPICS = ("the garden", "my sister's new job in Porto", "the volleyball match", "a recipe for dal",
          "the broken bike", "our trip to Kyoto", "the quarterly report", "the dog's vet visit")
with lossless.open(str(folder / "loop.db")) as mem:
    histories = {}

    def history(session_id):
        return histories.setdefault(session_id, LosslessChatMessageHistory(mem, session_id, budget_tokens=2000))

    prompt = ChatPromptTemplate.from_messages([("system", "You are helpful."), MessagesPlaceholder("history"),
                                               ("human", "{question}")])
    def answer(value):
        time.sleep(latency)
        return AIMessage(content="Sure: " + value.to_messages()[-1].content[:120])

    model = RunnableLambda(answer)
    chain = RunnableWithMessageHistory(prompt | model, history, input_messages_key="question",
                                       history_messages_key="history")
    config = {"configurable": {"session_id": "loop"}}
    for i in range(turns):
        topic = TOPICS[i % len(TOPICS)]
        chain.invoke({"question": f"Turn {i}: tell me more about {topic}, and what we said about it before."},
                     config=config)
    assert mem.conversation("loop").info.message_count == 2 * turns
    worker = mem.stats().worker
    embedder = mem.recaller.embedder
    print(json.dumps({"embedder": embedder.model if embedder is not None else None,
                      "units_embedded": worker["units_embedded"], "summaries": worker["summaries_written"]}))
"""


def run_once(turns: int, embedder: str, latency: float) -> tuple[float, dict[str, Any]]:
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    if embedder == "none":
        env["LOSSLESS_EMBEDDER"] = "none"
    else:
        env.pop("LOSSLESS_EMBEDDER", None)
    with tempfile.TemporaryDirectory(prefix="bench-langchain-") as tmp:
        t0 = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", CHILD, str(turns), tmp, str(latency)], env=env, check=True,
                              capture_output=True, text=True)
        seconds = time.perf_counter() - t0
    return seconds, json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--turns", type=int, default=120)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--model-seconds", type=float, default=0.05, help="the fake model's latency per turn")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    runs: dict[str, list[float]] = {"default": [], "none": []}
    seen: dict[str, dict[str, Any]] = {}
    for r in range(args.rounds):
        for name in ("default", "none") if r % 2 == 0 else ("none", "default"):
            seconds, seen[name] = run_once(args.turns, name, args.model_seconds)
            runs[name].append(round(seconds, 2))
        if not args.json:
            print(f"round {r + 1}: default {runs['default'][-1]} s, none {runs['none'][-1]} s", flush=True)
    best = {k: min(v) for k, v in runs.items()}
    out: dict[str, Any] = {"turns": args.turns, "model_seconds": args.model_seconds, "rounds": args.rounds, "cores": os.cpu_count(),
                           "load_average": os.getloadavg()[0], "seconds": runs, "best": best, "last_run": seen,
                           "ratio": round(best["default"] / best["none"], 2)}
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print(f"best: default {best['default']} s, none {best['none']} s: {out['ratio']}x; "
              f"the default's last run: {seen['default']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
