"""Assembly with a big backlog (the worker far behind) reads a bounded number of raw
messages, whatever the backlog: twice the compaction trigger's message count (or two
windows' worth of tokens), a page at a time, and still shows the newest messages. A call
that can only lay out a budget below the window reads just the newest budget's worth."""

from __future__ import annotations

from typing import Any

import pytest

import lossless
from lossless.context.assemble import _FIRST_RAW_PAGE, _RAW_PAGE

from .backends import StoreTarget


def _behind(mem: lossless.Memory, backlog: int) -> lossless.Conversation:
    conv = mem.conversation("c")
    for start in range(0, backlog, 500):
        conv.add_many([{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}: short casual text"}
                       for i in range(start, min(backlog, start + 500))])
    return conv


def _count_reads(mem: lossless.Memory, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    read: list[int] = []
    real = mem.store.get_messages

    def counting(*args: Any, **kwargs: Any) -> Any:
        rows = real(*args, **kwargs)
        read.append(len(rows))
        return rows

    monkeypatch.setattr(mem.store, "get_messages", counting)
    return read


@pytest.mark.parametrize("backlog", [1500, 6000])
def test_a_far_behind_worker_does_not_make_assembly_read_the_backlog(store_target: StoreTarget, backlog: int,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    with lossless.open(store_target("behind"), embedder=None, auto_compact=False, compact_after_messages=100,
                       context_window=128_000) as mem:
        conv = _behind(mem, backlog)
        read = _count_reads(mem, monkeypatch)
        ctx = conv.assemble(2000, query="what was said in turn 17?")
        text = " ".join(str(m["content"]) for m in ctx.messages)
        assert f"turn {backlog - 1}:" in text  # the newest is shown
        assert ctx.tokens <= 2000
        # a budget of 2,000 tokens below a window of 128k: the newest budget's worth (~170 of
        # these turns), in pages that start at 64, not 2 x 100 (nor 2 x 128k tokens, every
        # one of them); the rest are recall's few neighbours
        assert [n for n in read if n > 16] == [_FIRST_RAW_PAGE, 2 * _FIRST_RAW_PAGE], read


def test_a_far_behind_worker_shows_the_same_newest_turns_read_either_way(store_target: StoreTarget,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading the newest budget's worth shows the turns that reading every raw message
    does (the same store opened without a message trigger: nothing counts as far behind)."""
    target = store_target("behind")
    with lossless.open(target, embedder=None, auto_compact=False, compact_after_messages=100,
                       context_window=128_000) as mem:
        conv = _behind(mem, 1500)
        read = _count_reads(mem, monkeypatch)
        shown = conv.assemble(1000, query="turn 17").messages
        assert sum(n for n in read if n > 16) < 300, read
    with lossless.open(target, embedder=None, auto_compact=False, compact_after_messages=None,
                       context_window=128_000) as mem:
        read = _count_reads(mem, monkeypatch)
        whole = mem.conversation("c").assemble(1000, query="turn 17").messages
        assert sum(n for n in read if n > 16) == 1500, read

    def turns(messages: list[dict[str, Any]]) -> list[str]:
        return [str(m["content"]) for m in messages if m["role"] != "system"]

    tail = turns(shown)
    assert tail and tail[-1].startswith("turn 1499:")
    assert [int(t.split(":")[0].split()[1]) for t in tail] == list(range(1500 - len(tail), 1500))
    assert len(tail) >= 5  # the question leaves the tail part of the budget: still a run of turns
    assert turns(whole) == tail


def test_the_whole_window_reads_its_budget_not_a_page(store_target: StoreTarget,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A budget of the whole window (what the proxy and the agent loop ask for) with the
    worker far behind: the layout cannot be the cache-stable one (not every raw message is
    read), so the newest window's worth is read, not a page of 512."""
    with lossless.open(store_target("behind"), embedder=None, auto_compact=False, compact_after_messages=300,
                       context_window=2048) as mem:
        conv = _behind(mem, 1500)
        read = _count_reads(mem, monkeypatch)
        ctx = conv.assemble(2048)
        assert ctx.tokens <= 2048
        assert "turn 1499:" in str(ctx.messages[-1]["content"])
        assert [n for n in read if n > 16] == [_FIRST_RAW_PAGE, 2 * _FIRST_RAW_PAGE], read


def test_the_selective_strategy_still_reads_a_page(store_target: StoreTarget, monkeypatch: pytest.MonkeyPatch) -> None:
    """``strategy="selective"`` picks among the raw messages by the question: it reads the
    newest page as before."""
    with lossless.open(store_target("behind"), embedder=None, auto_compact=False, compact_after_messages=100,
                       context_window=128_000, strategy="selective") as mem:
        conv = _behind(mem, 1500)
        read = _count_reads(mem, monkeypatch)
        ctx = conv.assemble(2000, query="turn 17")
        assert ctx.tokens <= 2000
        assert [n for n in read if n > 16] == [_RAW_PAGE], read
