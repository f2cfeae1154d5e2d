"""Assembly strategies: selective eviction and hierarchical compression change only what
the assembled context shows; every raw message stays stored and expandable."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pytest

import lossless
from lossless.core.tokens import count_chat_tokens
from tests.conftest import StoreTarget, chat

T0 = datetime(2025, 3, 1, 9, 0)


def _context_text(ctx: lossless.AssembledContext) -> str:
    return "\n".join(str(m.get("content") or "") for m in ctx.messages)


def _conversation(store_target: StoreTarget, strategy: str) -> tuple[lossless.Memory, lossless.Conversation, str]:
    mem = lossless.open(store_target(strategy), embedder=None, strategy=strategy, auto_compact=False)
    conv = mem.conversation("c")
    messages = []
    for i in range(40):
        t = T0 + timedelta(minutes=i)
        messages.append({"role": "user", "content": f"ok thanks, sounds good {i}", "created_at": t})
        messages.append({"role": "assistant", "content": f"great, glad it helps {i}", "created_at": t})
        if i == 5:
            messages.append({"role": "user", "created_at": t, "content": "Decision: we must never deploy on "
                             "Fridays; the error ERR_DEPLOY_42 took prod down last time."})
    conv.add_many(messages)
    return mem, conv, "ERR_DEPLOY_42"


def test_selective_keeps_the_important_old_message_in_view(store_target: StoreTarget) -> None:
    budget = 600
    _mem, conv, needle = _conversation(store_target, "summary")
    plain = conv.assemble(budget_tokens=budget)
    assert needle not in _context_text(plain)  # newest-first: it fell out of the window
    mem2, conv2, _ = _conversation(store_target, "selective")
    chosen = conv2.assemble(budget_tokens=budget)
    text = _context_text(chosen)
    assert needle in text
    assert chosen.tokens <= budget and count_chat_tokens(mem2.counter, chosen.messages) == chosen.tokens
    # the newest turn is always there, and the gap is pointed at
    assert "sounds good 39" in text and "great, glad it helps 39" in text
    assert "Not shown for space" in text
    # shown in conversation order
    seqs = [i.first_seq for i in chosen.items if i.tier == "fresh_tail"]
    assert seqs == sorted(seqs)
    # nothing left the store
    assert len(conv2.messages()) == 81
    assert all(m.content for m in conv2.messages())


def test_selective_never_splits_a_tool_call_from_its_result(store_target: StoreTarget, tmp_path: Path) -> None:
    mem = lossless.open(store_target("tools"), embedder=None, strategy="selective", auto_compact=False)
    conv = mem.conversation("c")
    conv.add_many(chat(60, tools_every=3, words=10))
    for budget in (300, 500, 900, 1500):
        ctx = conv.assemble(budget_tokens=budget)
        assert ctx.tokens <= budget
        calls = {c["id"] for m in ctx.messages for c in (m.get("tool_calls") or [])}
        for m in ctx.messages:
            if m.get("role") == "tool":
                assert m.get("tool_call_id") in calls


def test_hierarchical_shows_old_history_as_statistics(store_target: StoreTarget, tmp_path: Path) -> None:
    mem = lossless.open(store_target("h"), embedder=None, strategy="hierarchical", context_window=4096)
    conv = mem.conversation("c")
    conv.add_many(chat(300, words=30, tools_every=5))
    conv.compact()
    assert len(conv.frontier()) >= 2
    ctx = conv.assemble(budget_tokens=2000)
    text = _context_text(ctx)
    root = conv.root() or conv.frontier()[0]  # the whole-conversation root, once compaction wrote one
    assert f"history #{root.first_seq}-#{root.last_seq}" in text and "messages (" in text
    assert "user" in text and "tokens, condensed" in text
    assert ctx.tokens <= 2000
    # every summary shown is still expandable to the exact originals
    for item in ctx.items:
        if item.tier in ("summary", "root"):
            expanded = conv.expand(item.ref, max_tokens=10**9)
            assert expanded["items"]


@pytest.mark.parametrize("strategy", ["summary", "selective", "hierarchical"])
def test_every_strategy_fits_the_budget_with_a_query(store_target: StoreTarget, tmp_path: Path, strategy: str) -> None:
    mem = lossless.open(store_target(f"q{strategy}"), embedder=None, strategy=strategy, context_window=4096)
    conv = mem.conversation("c")
    conv.add_many(chat(200, words=25, tools_every=4))
    for budget in (256, 700, 1500, 3000):
        ctx = conv.assemble(budget_tokens=budget, query="which port did service-17 use?")
        assert ctx.tokens <= budget
        assert count_chat_tokens(mem.counter, ctx.messages) == ctx.tokens


def test_unknown_strategy_is_refused() -> None:
    with pytest.raises(lossless.ValidationError, match="strategy must be"):
        lossless.open(":memory:", embedder=None, strategy="random")


def test_describe_explains_a_messages_importance(store_target: StoreTarget, tmp_path: Path) -> None:
    mem = lossless.open(store_target("d"), embedder=None)
    conv = mem.conversation("c")
    msg = conv.add("user", "We decided to use Postgres; it must stay under 200 ms p99.")
    chit = conv.add("user", "thanks!")
    described = conv.describe(msg.id)["importance"]
    labels = {r["label"] for r in described["reasons"]}
    assert {"decision", "constraint"} <= labels
    assert "decided" in described["explanation"]
    assert conv.describe(chit.id)["importance"]["value"] < described["value"]
