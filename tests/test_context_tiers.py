"""The assembler's tiers (lossless.context): the trim ladder's order, a context that
still fits when the stored counts run low (the ladder trims for real), and the old
import paths."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import lossless
from lossless.context.tiers import (
    FilesTier,
    MemoriesTier,
    NewestUnitTier,
    PinnedTier,
    PointersTier,
    RecallTier,
    RootTier,
    SummariesTier,
    TailTier,
)

from .conftest import chat, fill


def test_the_trim_ladder_drops_pointers_first_and_the_newest_tail_unit_last() -> None:
    tiers = [TailTier, PinnedTier, RecallTier, NewestUnitTier, MemoriesTier, RootTier, PointersTier, SummariesTier,
             FilesTier]
    ladder = [t.__name__ for t in sorted(tiers, key=lambda t: t.priority)]
    assert ladder == ["PointersTier", "FilesTier", "MemoriesTier", "RecallTier", "SummariesTier", "RootTier",
                      "TailTier", "PinnedTier", "NewestUnitTier"]


def test_a_context_fits_its_budget_when_stored_counts_run_low(tmp_path: Path) -> None:
    """Counts from another tokenizer make every tier think it fits; counting the composed
    context for real, the ladder trims (tail units included) until it does."""
    path = tmp_path / "low.db"
    mem = lossless.open(path, embedder=None, context_window=4096, compaction="inline")
    conv = mem.conversation("c")
    fill(conv, [{"role": "system", "content": "You are a careful assistant. " * 10}, *chat(40, tools_every=4)])
    conv.add("user", "Which port did service-7 move to? " * 4)
    honest = {b: conv.assemble(budget_tokens=b, query="service-7 port") for b in (200, 400, 800)}
    mem.close()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE messages SET token_count = token_count / 3")
    db.close()
    mem = lossless.open(path, embedder=None, context_window=4096, compaction="inline")
    conv = mem.conversation("c")
    for budget, before in honest.items():
        ctx = conv.assemble(budget_tokens=budget, query="service-7 port")
        assert 0 < ctx.tokens <= budget
        assert ctx.messages[-1]["role"] == "user"  # the newest turn is the last thing dropped
        assert before.tokens <= budget
    mem.close()


