"""The agent tools' results are typed (``lossless.agent.results``) while they stay the JSON
they always were: every result has the keys its TypedDict requires and none it does not
name, whatever the tool and the case (a large message, a partial item, tool calls)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import lossless
from lossless.agent import results
from tests.conftest import StoreTarget, chat


def _conforms(value: dict[str, Any], shape: Any) -> None:
    """``value`` holds every key ``shape`` requires and only keys it names."""
    keys = set(value)
    assert shape.__required_keys__ <= keys, (shape.__name__, shape.__required_keys__ - keys)
    assert keys <= shape.__required_keys__ | shape.__optional_keys__, (shape.__name__, keys - set(shape.__annotations__))


@pytest.fixture
def conv(store_target: StoreTarget) -> Any:
    mem = lossless.open(store_target("tools"), context_window=2048, embedder=None, compaction="inline",
                        large_content_tokens=300)
    c = mem.conversation("c")
    t0 = datetime(2024, 3, 1, tzinfo=UTC)
    c.add_many([*chat(100, words=30),
                {"role": "assistant", "content": None, "created_at": t0 + timedelta(days=9),
                 "tool_calls": [{"id": "call_1", "type": "function",
                                 "function": {"name": "read_file", "arguments": '{"path": "a.csv"}'}}]},
                {"role": "tool", "tool_call_id": "call_1", "created_at": t0 + timedelta(days=9, minutes=1),
                 "content": "a,b\n" + "\n".join(f"{i},{i * 2}" for i in range(400))},
                *chat(40, words=30, start=t0 + timedelta(days=10))])
    c.compact(full=True)
    yield c
    mem.close()


def test_every_tool_result_is_its_typed_shape(conv: Any) -> None:
    tools = conv.tools
    found = tools.lcm_grep("service", limit=5)
    _conforms(found, results.GrepResult)
    assert found["hits"]
    for hit in found["hits"]:
        _conforms(hit, results.HitDict)

    summaries = conv.summaries()
    top = max(summaries, key=lambda s: s.depth)
    described = tools.lcm_describe(top.id)
    _conforms(described, results.SummaryDescription)
    for child in described["children"]:
        _conforms(child, results.SummaryBrief if child["kind"] == "summary" else results.MessageBrief)
    messages = conv.messages()
    big = next(m for m in messages if m.role == "tool")
    for message in (messages[0], big):
        about = tools.lcm_describe(message.id)
        _conforms(about, results.MessageDescription)
        assert ("exploration" in about) is about["large"]
    assert tools.lcm_describe(big.id)["large"]

    kinds = {"message": results.ExpandedMessage, "summary": results.ExpandedSummary}
    partial = {"message": results.PartialMessage, "summary": results.PartialSummary}
    seen = set()
    for summary in summaries:
        for to in ("messages", "sources"):
            for budget in (30, 100_000):
                expanded = tools.lcm_expand(summary.id, to=to, max_tokens=budget)
                _conforms(expanded, results.ExpandResult)
                for item in expanded["items"]:
                    shape = (partial if "partial" in item else kinds)[item["kind"]]
                    _conforms(item, shape)
                    seen.add((shape.__name__, "tool_calls" in item or "tool_call_id" in item))
    assert {"ExpandedMessage", "ExpandedSummary", "PartialMessage"} <= {name for name, _ in seen}
    assert ("ExpandedMessage", True) in seen  # the tool call and its result, with their ids
    for piece in (tools.lcm_expand(big.id, max_tokens=50), tools.lcm_expand(big.id, page=1, max_chars=500),
                  tools.lcm_expand(messages[0].id, offset=3, max_chars=10)):
        _conforms(piece, results.MessageSlice)
        assert list(piece)[-1] == "content"  # the text last, after where it is
    for piece in (tools.lcm_expand(top.id, offset=0, max_tokens=5), tools.lcm_expand(top.id, page=1, max_chars=50),
                  tools.lcm_expand(top.id, offset=3, max_chars=10)):
        _conforms(piece, results.SummarySlice)
        assert list(piece)[-1] == "content"
