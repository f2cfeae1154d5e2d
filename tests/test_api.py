"""The public API exactly as DESIGN.md states it: checks outside this repo call these lines."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

import lossless
from lossless.core.tokens import count_chat_tokens, get_counter
from tests.conftest import StoreTarget


def test_design_contract(store_target: StoreTarget) -> None:
    mem = lossless.open(store_target("design"), context_window=8192)
    conv = mem.conversation("conv-26")
    conv.add(role="user", content="I went to the LGBTQ support group yesterday.", name="Caroline",
             created_at=datetime(2023, 5, 8, 13, 56))
    conv.add(role="assistant", content="That sounds meaningful. How did it go?")
    ctx = conv.assemble(budget_tokens=4096, query="When did Caroline go to the support group?")
    assert isinstance(ctx.messages, list)
    assert all("role" in m and "content" in m for m in ctx.messages)
    assert isinstance(ctx.tokens, int) and 0 < ctx.tokens <= 4096
    msgs = conv.messages()
    assert [m.seq for m in msgs] == [1, 2]
    assert msgs[0].role == "user" and msgs[0].content.startswith("I went")
    assert msgs[0].created_at == datetime(2023, 5, 8, 13, 56)  # naive stays naive, exactly
    assert msgs[0].name == "Caroline"
    mem.close()
    # and it is all still there after reopening
    again = lossless.open(store_target("design"), context_window=8192)
    assert [m.content for m in again.conversation("conv-26").messages()] == [m.content for m in msgs]


@pytest.mark.sqlite_only(reason="about the in-memory SQLite store, :memory:")
def test_memory_db_and_get_or_create() -> None:
    mem = lossless.open(":memory:", context_window=8192)
    a = mem.conversation("a")
    a.add(role="user", content="hello")
    assert mem.conversation("a").messages()[0].content == "hello"
    assert [c.id for c in mem.conversations()] == ["a"]
    assert mem.get_conversation("missing") is None


def test_tokens_counted_by_configured_tokenizer(mem: lossless.Memory) -> None:
    conv = mem.conversation("t")
    conv.add(role="user", content="hello world")
    ctx = conv.assemble(budget_tokens=100)
    assert ctx.tokens == count_chat_tokens(get_counter("cl100k_base"), ctx.messages)
    assert ctx.messages == [{"role": "user", "content": "hello world"}]


def test_open_rejects_unknown_config() -> None:
    try:
        lossless.open(":memory:", context_windw=8192)
    except lossless.ValidationError as exc:
        assert "context_windw" in str(exc)
    else:
        raise AssertionError("unknown option accepted")


def test_default_db_under_lossless_home(tmp_path: Path, monkeypatch: object) -> None:
    path = lossless.default_db_path()
    assert "lossless-home" in str(path)


def test_a_text_counted_again_and_again_stays_counted_through_a_flood() -> None:
    """One counter serves the caller and the worker thread, whose catch-up counts every
    message it compacts. A text the caller counts at each assembly keeps its count through
    floods of others (the memo emptied when full, so it was encoded again), and every
    count is the encoder's."""
    from lossless.core import tokens

    counter = tokens.TiktokenCounter("cl100k_base")
    real = counter._enc
    encoded: list[str] = []

    class Spy:
        def encode_ordinary(self, text: str) -> list[int]:
            encoded.append(text)
            return list(real.encode_ordinary(text))

    counter._enc = Spy()
    mine = "#149 user Ann: the depot in Porto checks every van before the morning run."
    expected = len(real.encode_ordinary(mine))
    for flood in range(6):
        assert counter.count(mine) == expected
        for i in range(10_000):  # the worker's texts between two assemblies: 60,000 in all
            text = f"worker text {flood}-{i}: the summary of messages {i} to {i + 20} "
            assert counter.count(text) == len(real.encode_ordinary(text))
    assert encoded.count(mine) == 1
    assert counter.count("x" * 30) == len(real.encode_ordinary("x" * 30))
