"""What a conversation's language costs with the default local model (all-MiniLM-L6-v2,
which reads English): the time to embed a Chinese chat, and the assembly latency of a
Chinese conversation against an English one of the same token length, in one run.

    python bench/language_cost.py [--budget 1024] [--queries 60] [--json OUT]

* Chinese: MADial-zh's user histories (``bench/madial.py``: each memory event told on its
  date, a short reply after it); queries: the last user turn before each dialogue's test
  turn (what the proxy and the agent loop pass as the query).
* English: the chit-chat set (``bench/chitchat.py``), each history cut to the Chinese one's
  token count (``message_tokens``); queries: its questions.

Each conversation goes into a fresh SQLite store (``compaction="deferred"``); the units
are cut and embedded by ``Conversation.index()`` (timed: the embedding cost; no cache, the
model runs), then the worker compacts. Then each query is assembled once (every query is
new to the store, so an embedder that embeds it runs the model), Chinese and English
interleaved, after a few warm-up calls. Reports the texts the model embedded, the
seconds, and assembly p50 / p90 per language.
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
import chitchat
import madial

import lossless
from lossless.embed.local import LocalEmbedder


class CountingEmbedder:
    """The local model, counting what it is given (same provider, model and languages)."""

    def __init__(self, inner: LocalEmbedder) -> None:
        self.inner = inner
        self.provider, self.model = inner.provider, inner.model
        self.languages = getattr(inner, "languages", "any")  # absent before language-aware vectors
        self.texts = 0
        self.seconds = 0.0

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: Any) -> Any:
        t0 = time.perf_counter()
        out = self.inner.embed(texts)
        self.seconds += time.perf_counter() - t0
        self.texts += len(texts)
        return out


def _store(folder: Path, name: str, messages: list[dict[str, Any]], emb: CountingEmbedder) -> tuple[Any, Any, dict]:
    mem = lossless.open(folder / f"{name}.db", embedder=emb, compaction="deferred", context_window=8192)
    conv = mem.conversation(name)
    conv.add_many(messages)
    texts, seconds, t0 = emb.texts, emb.seconds, time.perf_counter()
    units = conv.index()
    info = {"messages": len(messages), "tokens": conv.stats().message_tokens, "units": units,
            "embedded_texts": emb.texts - texts, "embed_s": round(emb.seconds - seconds, 2),
            "index_s": round(time.perf_counter() - t0, 2)}
    mem.wait_idle(timeout=600)
    return mem, conv, info


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--budget", type=int, default=1024)
    p.add_argument("--queries", type=int, default=60, help="queries per language")
    p.add_argument("--json", metavar="OUT")
    a = p.parse_args()
    emb = CountingEmbedder(LocalEmbedder())
    emb.inner.warm()
    events, dialogues = madial.load(madial.DEFAULT_DATA)
    zh_msgs = [{"role": m.role, "content": m.content, "created_at": m.created_at}
               for u in sorted({e.user for e in events.values()}) for m in madial.history_chat(events, u).messages]
    zh_queries = [madial.query_of(d, "last") for d in dialogues][: a.queries]
    chats = chitchat.generate(chitchat.DEFAULT_SEED, chitchat.DEFAULT_CONVERSATIONS)
    en_queries = [q.question for c in chats for q in c.questions][: a.queries]
    with tempfile.TemporaryDirectory() as tmp:
        zh_mem, zh_conv, zh = _store(Path(tmp), "zh", zh_msgs, emb)
        en_msgs: list[dict[str, Any]] = []
        counter = zh_mem.counter
        target, tokens = sum(counter.count(m["content"]) for m in zh_msgs), 0
        for m in (m for c in chats for m in c.messages):
            if tokens + counter.count(m.content) > target:
                break
            en_msgs.append({"role": m.role, "content": m.content, "created_at": m.created_at, "name": m.name})
            tokens += counter.count(m.content)
        en_mem, en_conv, en = _store(Path(tmp), "en", en_msgs, emb)
        for q in zh_queries[-3:] + en_queries[-3:]:  # warm-up: caches, the query thread
            zh_conv.assemble(budget_tokens=a.budget, query=q + " (warm-up)")
            en_conv.assemble(budget_tokens=a.budget, query=q + " (warm-up)")
        times: dict[str, list[float]] = {"zh": [], "en": []}
        query_texts = {"zh": 0, "en": 0}
        for zq, eq in zip(zh_queries, en_queries, strict=False):
            for lang, conv, q in (("zh", zh_conv, zq), ("en", en_conv, eq)):
                before = emb.texts
                t0 = time.perf_counter()
                conv.assemble(budget_tokens=a.budget, query=q)
                times[lang].append((time.perf_counter() - t0) * 1000)
                query_texts[lang] += emb.texts - before
        zh_mem.close()
        en_mem.close()
    out: dict[str, Any] = {"budget": a.budget, "languages": sorted(emb.languages) if emb.languages != "any" else "any"}
    for lang, info, qs in (("zh", zh, zh_queries), ("en", en, en_queries)):
        ms = sorted(times[lang])
        out[lang] = {**info, "queries": len(ms), "query_tokens_p50": statistics.median(counter.count(q) for q in qs),
                     "queries_embedded": query_texts[lang], "assemble_p50_ms": round(statistics.median(ms), 2),
                     "assemble_p90_ms": round(ms[int(len(ms) * 0.9) - 1], 2)}
        r = out[lang]
        print(f"{lang}: {r['messages']} messages, {r['tokens']} tokens, {r['units']} units, {r['embedded_texts']} "
              f"embedded in {r['embed_s']} s (index {r['index_s']} s); {r['queries']} queries "
              f"(p50 {r['query_tokens_p50']} tokens, {r['queries_embedded']} embedded): assemble p50 "
              f"{r['assemble_p50_ms']} ms, p90 {r['assemble_p90_ms']} ms")
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
