"""A huge tool output is kept out of the window: the context shows an exploration of it
with its id, the store keeps every byte, and lcm_expand pages back the exact text."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import lossless
from tests.conftest import StoreTarget


def test_a_large_tool_output_is_explored_not_pasted(store_target: StoreTarget, tmp_path: Path) -> None:
    mem = lossless.open(store_target("l"), embedder=None, context_window=32_000, large_content_tokens=5_000)
    conv = mem.conversation("c")
    conv.add("user", "dump the orders table")
    conv.add("assistant", "", tool_calls=[{"id": "call_1", "type": "function",
                                           "function": {"name": "query_db", "arguments": '{"table": "orders"}'}}])
    rows = [{"order_id": i, "customer": f"cust-{i % 97}", "total_usd": round(i * 1.37, 2), "status": "shipped"}
            for i in range(60_000)]
    big = json.dumps(rows)
    tool = conv.add("tool", big, tool_call_id="call_1")
    conv.add("user", "how many orders are there?")
    assert tool.token_count > 5_000
    for budget in (None, 8_000, 2_000):
        ctx = conv.assemble(budget_tokens=budget, query="orders total")
        shown = next(m for m in ctx.messages if m.get("role") == "tool")
        text = str(shown["content"])
        assert tool.id in text and "lcm_expand" in text and "json" in text
        assert "order_id" in text and len(text) < 20_000
        assert ctx.tokens <= (budget or 32_000)
    # every byte is still there, and pages back exactly
    assert conv.messages()[2].content == big
    pieces, offset = [], 0
    while offset is not None:
        page = conv.expand(tool.id, offset=offset, max_chars=300_000)
        pieces.append(page["content"])
        offset = page["next_offset"]
    assert "".join(pieces) == big
    assert hashlib.sha256(big.encode()).hexdigest() == page["sha256"]


def test_small_messages_are_untouched(store_target: StoreTarget, tmp_path: Path) -> None:
    mem = lossless.open(store_target("s"), embedder=None)
    conv = mem.conversation("c")
    conv.add("user", "hello there")
    ctx = conv.assemble()
    assert ctx.messages[-1] == {"role": "user", "content": "hello there"}
