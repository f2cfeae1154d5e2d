"""A deterministic generator of long, varied agent conversations for benchmarks:
English and Chinese prose, code blocks, tool calls with results, short and long turns."""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

_SUBJECTS = ["the ingest worker", "the billing API", "our Postgres replica", "the routing service",
             "the nightly export", "the auth middleware", "the cache layer", "the mobile client"]
_VERBS = ["times out after", "uses", "was moved to", "needs", "failed with", "now handles", "peaks at"]
_OBJECTS = ["port {n}", "{n} requests per second", "version 2.{n}.1", "{n} ms p99 latency",
            "a {n} MB heap", "`ERR_{n}` on retry", "{n}% of traffic", "the `src/app/mod_{n}.py` module"]
_ZH = ["我们决定把{s}迁移到新集群，端口改为{n}。", "这个问题的根本原因是连接池太小，只有{n}个连接。",
       "下周三之前需要完成第{n}版的上线。", "测试覆盖率现在是{n}%，还需要提高。"]
_CODE = ["```python\ndef handler_{n}(event):\n    retries = {n}\n    return process(event, retries=retries)\n```",
         "```sql\nSELECT id, status FROM orders WHERE shard = {n} ORDER BY created_at DESC LIMIT 50;\n```"]
_FILLER = ["ok", "thanks!", "sounds good", "got it, continuing", "好的", "👍"]


def _sentence(rng: random.Random) -> str:
    n = rng.randint(1, 9999)
    return f"{rng.choice(_SUBJECTS).capitalize()} {rng.choice(_VERBS)} {rng.choice(_OBJECTS).format(n=n)}."


def _prose(rng: random.Random, sentences: int) -> str:
    parts: list[str] = []
    for _ in range(sentences):
        r = rng.random()
        if r < 0.12:
            parts.append(rng.choice(_ZH).format(s=rng.choice(_SUBJECTS), n=rng.randint(1, 999)))
        elif r < 0.18:
            parts.append("\n" + rng.choice(_CODE).format(n=rng.randint(1, 99)) + "\n")
        else:
            parts.append(_sentence(rng))
    return " ".join(parts)


def messages(n: int, seed: int = 0, start: datetime | None = None) -> Iterator[dict[str, Any]]:
    """``n`` messages (tool results count), deterministic for a seed."""
    rng = random.Random(seed)
    t = start or datetime(2025, 1, 6, 9, 0, tzinfo=UTC)
    made = 0
    turn = 0
    while made < n:
        t += timedelta(seconds=rng.randint(5, 600))
        if turn % 2 == 0:
            content = rng.choice(_FILLER) if rng.random() < 0.1 else _prose(rng, rng.randint(1, 6))
            yield {"role": "user", "content": content, "created_at": t}
            made += 1
        elif rng.random() < 0.2 and made + 2 <= n:
            cid = f"call_{seed}_{made}"
            yield {"role": "assistant", "content": "", "created_at": t,
                   "tool_calls": [{"id": cid, "type": "function",
                                   "function": {"name": "run_query", "arguments": f'{{"shard": {rng.randint(1, 64)}}}'}}]}
            yield {"role": "tool", "tool_call_id": cid, "created_at": t,
                   "content": f'{{"rows": {rng.randint(0, 5000)}, "elapsed_ms": {rng.randint(1, 900)}}}'}
            made += 2
        else:
            length = rng.choice([2, 4, 8, 8, 12, 30])
            yield {"role": "assistant", "content": _prose(rng, length), "created_at": t}
            made += 1
        turn += 1
