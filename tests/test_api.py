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
