"""A script that ends while the default embedder is busy: the worker thread embeds the
messages just added while daemon threads embed queries (assembly with a question, hybrid
and semantic search), and the main thread either exits at once, without ``close()``, or
calls ``close()`` first, at a moment the seed picks. Before the exit gate
(``lossless.embed.native``) such a script died with SIGABRT ("terminate called without an
active exception") in 1 to 3 runs of 5.

    python tests/data/embed_exit.py --seed 7 [--close] [--db PATH]

Prints ``exit-ok`` as its last act; any exit status but 0 is the failure it exists to catch.
"""

from __future__ import annotations

import argparse
import random
import threading
import time

import lossless
from lossless.core.errors import LosslessError

TEXTS = [
    "I went to the park yesterday and saw a heron by the lake.",
    "The deploy of v1.{i} failed on a timeout in the billing job.",
    "My sister moved to Lisbon in March; she teaches piano there.",
    "我上周去了植物园，看到了很多樱花，还喝了一杯咖啡。",
    "Remind me to call the dentist about the crown on tooth {i}.",
    "We picked Postgres over Mongo because of the reporting queries.",
]
QUESTIONS = ["which bird did I see by the water?", "why did the deploy fail?", "where does my sister live?",
             "我在植物园看到了什么？", "what did we choose for the database?"]


def ask(mem: lossless.Memory, conv_id: str, seed: int, stop: threading.Event) -> None:
    rng = random.Random(seed)
    conv = mem.conversation(conv_id)
    while not stop.is_set():
        question = rng.choice(QUESTIONS) + f" ({rng.randrange(10_000)})"  # new text: the model runs
        try:
            if rng.random() < 0.5:
                conv.assemble(budget_tokens=1024, query=question)
            else:
                mem.search(question, mode=rng.choice(["hybrid", "semantic"]), conversations=[conv_id])
        except LosslessError:  # the store closed under this thread: the main thread is done
            return


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--close", action="store_true", help="call close() before the end")
    parser.add_argument("--db", default=":memory:")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    mem = lossless.open(args.db, context_window=2048)
    conv = mem.conversation(f"exit-{args.seed}")
    count = rng.choice([2, 20, 200])
    conv.add_many([{"role": "user" if i % 2 == 0 else "assistant",
                    "content": rng.choice(TEXTS).format(i=i) + f" #{i}"} for i in range(count)])
    stop = threading.Event()
    for k in range(2):  # daemon threads: still embedding queries when the interpreter exits
        threading.Thread(target=ask, args=(mem, conv.id, args.seed * 10 + k, stop), daemon=True).start()
    time.sleep(rng.uniform(0.0, 1.5))
    if args.close:
        mem.close()
    print("exit-ok", flush=True)


if __name__ == "__main__":
    main()
