"""Assembly with a big backlog (the worker far behind) reads a bounded number of raw
messages, whatever the backlog: twice the compaction trigger's message count (or two
windows' worth of tokens), a page at a time, and still shows the newest messages."""

from __future__ import annotations

from typing import Any

import pytest

import lossless
from lossless.context.assemble import _RAW_PAGE

from .backends import StoreTarget


@pytest.mark.parametrize("backlog", [1500, 6000])
def test_a_far_behind_worker_does_not_make_assembly_read_the_backlog(store_target: StoreTarget, backlog: int,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    with lossless.open(store_target("behind"), embedder=None, auto_compact=False, compact_after_messages=100,
                       context_window=128_000) as mem:
        conv = mem.conversation("c")
        for start in range(0, backlog, 500):
            conv.add_many([{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}: short casual text"}
                           for i in range(start, min(backlog, start + 500))])
        read: list[int] = []
        real = mem.store.get_messages

        def counting(*args: Any, **kwargs: Any) -> Any:
            rows = real(*args, **kwargs)
            read.append(len(rows))
            return rows

        monkeypatch.setattr(mem.store, "get_messages", counting)
        ctx = conv.assemble(2000, query="what was said in turn 17?")
        text = " ".join(str(m["content"]) for m in ctx.messages)
        assert f"turn {backlog - 1}:" in text  # the newest is shown
        assert ctx.tokens <= 2000
        # 2 x 100 messages, read in pages of _RAW_PAGE: one page, not the backlog (2 x 128k
        # tokens of these turns was every one of them); the rest are recall's few neighbours
        assert [n for n in read if n > 16] == [_RAW_PAGE], read
