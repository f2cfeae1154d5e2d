"""Bad input gets a clear error naming what was wrong, and nothing stored is lost."""

from __future__ import annotations

import pytest

import lossless
from lossless.core.errors import BudgetError, NotFoundError, QueryError, ValidationError


@pytest.fixture
def conv(mem: lossless.Memory) -> lossless.Conversation:
    c = mem.conversation("bad")
    c.add(role="user", content="first, good message")
    return c


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"role": "wizard", "content": "x"}, "unknown role 'wizard'"),
        ({"role": "user"}, "needs content or tool_calls"),
        ({"role": "user", "content": ""}, "needs content or tool_calls"),
        ({"role": "user", "content": 42}, "content must be str"),
        ({"role": "user", "content": b"bytes"}, "got bytes"),
        ({"role": "user", "content": "bad \udcff surrogate"}, "not valid UTF-8"),
        ({"role": "user", "content": "nul \x00 byte"}, "NUL byte at position 4"),
        ({"role": "user", "content": "x" * 40_000_000}, "40,000,000 bytes"),
        ({"role": "tool", "content": "result"}, "tool_call_id"),
        ({"role": "user", "content": [{"text": "no type"}]}, "no 'type'"),
        ({"role": "user", "content": "x", "created_at": "yesterday"}, "not an ISO 8601"),
        ({"role": "user", "content": "x", "name": 5}, "name must be a string"),
        ({"role": "user", "content": "x", "tool_calls": [{"id": "c", "function": {"name": "f"}}]}, "only assistant"),
        ({"role": "assistant", "content": "", "tool_calls": [{"id": "c"}]}, "'function'"),
    ],
)
def test_bad_message_is_refused_by_name(conv: lossless.Conversation, kwargs: dict[str, object], needle: str) -> None:
    role = kwargs.pop("role")
    with pytest.raises(ValidationError) as info:
        conv.add(role, **kwargs)  # type: ignore[arg-type]
    assert needle in str(info.value)
    assert [m.content for m in conv.messages()] == ["first, good message"]


def test_one_bad_message_in_a_batch_writes_none(conv: lossless.Conversation) -> None:
    with pytest.raises(ValidationError, match="message 2"):
        conv.add_many([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
                       {"role": "nobody", "content": "c"}])
    assert len(conv.messages()) == 1
    conv.add(role="assistant", content="still fine")
    assert [m.seq for m in conv.messages()] == [1, 2]


def test_external_id_makes_ingest_idempotent(conv: lossless.Conversation) -> None:
    a = conv.add(role="user", content="hello", external_id="ext-1")
    b = conv.add(role="user", content="hello", external_id="ext-1")
    assert a.id == b.id and a.seq == b.seq
    assert len(conv.messages()) == 2


def test_fts_query_full_of_operators_is_quoted(conv: lossless.Conversation) -> None:
    conv.add(role="user", content='He said "NEAR(x y)" AND OR NOT * ^ -- weird')
    for q in ['"', '""', 'AND OR NOT', 'NEAR(x y)', '*', '^-:', "col:value", "'); DROP TABLE messages; --"]:
        conv.search(q)  # never raises for fts mode
    assert conv.search('"NEAR(x y)" AND')[0].snippet
    assert len(conv.messages()) == 2


def test_raw_fts_syntax_errors_are_clear(conv: lossless.Conversation) -> None:
    with pytest.raises(QueryError, match="invalid full-text query"):
        conv.search("port & (5001", mode="raw")  # an unclosed group: bad FTS5 and tsquery syntax alike
    with pytest.raises(QueryError, match="invalid regular expression"):
        conv.search("([a-", mode="regex")
    with pytest.raises(QueryError, match="empty"):
        conv.search("   ")


def test_unknown_ids_and_budgets(conv: lossless.Conversation) -> None:
    with pytest.raises(NotFoundError, match="sum_doesnotexist"):
        conv.describe("sum_doesnotexist")
    with pytest.raises(NotFoundError):
        conv.expand("sum_nope")
    with pytest.raises(BudgetError):
        conv.assemble(budget_tokens=0)
    with pytest.raises(BudgetError):
        conv.assemble(budget_tokens="100")  # type: ignore[arg-type]


def test_bad_conversation_ids(mem: lossless.Memory) -> None:
    for bad in ["", "   ", None, 5, "a\x00b"]:
        with pytest.raises(ValidationError):
            mem.conversation(bad)  # type: ignore[arg-type]


def test_not_a_database(tmp_path: object) -> None:
    from pathlib import Path

    path = Path(str(tmp_path)) / "notes.txt"
    path.write_text("this is not sqlite " * 100)
    with pytest.raises(lossless.StoreError, match="not a SQLite database"):
        lossless.open(path)
