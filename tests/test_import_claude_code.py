"""Claude Code transcripts: one API message (``message.id``) is one assistant message.

``data/import/claude_code_blocks.jsonl`` is a session written the way Claude Code 2.x
writes one: a line per content block (thinking, text, each ``tool_use``), every line of a
reply carrying its ``message.id``, ``requestId`` and ``usage``, ``stop_reason: null``;
tool results as ``user`` lines with ``toolUseResult`` and ``sourceToolAssistantUUID``; a
reply whose second tool call was written after the first call's result; a
``file-history-snapshot``, a ``system`` line and a ``summary`` naming the last reply.

``claude_code_blocks.old-import.jsonl`` and ``…old-import-6-lines.jsonl`` are what lossless
stored from that file (and from its first 6 lines) before it merged replies, one message
per line: made with the importer of commit 4d72e4d (``lossless import`` then ``lossless
export``), so these tests import them to get that store back.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lossless
from lossless.core.types import Message
from lossless.importers import import_file, import_stream
from tests.conftest import StoreTarget

DATA = Path(__file__).parent / "data" / "import"
SESSION = DATA / "claude_code_blocks.jsonl"
CONV = "claude-code:5b1c9e0d-2f4a-4c6b-9d8e-7a6b5c4d3e2f"
LINES = SESSION.read_bytes().splitlines(keepends=True)


def _uuid(n: int) -> str:
    return f"7c3e2a10-0000-4000-8000-{n:012d}"


def _import_bytes(mem: lossless.Memory, data: bytes) -> Any:
    return import_stream(mem, io.BytesIO(data), name=str(SESSION), format="claude-code")


def test_the_lines_of_one_reply_are_one_message(store_target: StoreTarget) -> None:
    with lossless.open(store_target("cc"), embedder=None) as mem:
        report = import_file(mem, SESSION)
        assert not report.skipped and dict(report.added) == {CONV: 10}
        msgs = mem.conversation(CONV).messages()
        assert [m.role for m in msgs] == ["user", "assistant", "tool", "tool", "assistant", "tool", "assistant",
                                          "tool", "tool", "assistant"]
        first = msgs[1]  # thinking, text, Read and Grep: four lines, one message
        assert first.content == "I'll look at how the total is computed and where it is formatted."
        assert [c["function"]["name"] for c in first.tool_calls] == ["Read", "Grep"]
        assert first.metadata["thinking"][0]["thinking"].startswith("Float arithmetic")
        assert first.metadata["message_id"] == "msg_01Ha7v" and first.metadata["parent_uuid"] == _uuid(1)
        assert first.metadata["uuids"] == [_uuid(2), _uuid(3), _uuid(4), _uuid(5)]
        assert first.external_id == _uuid(3)  # its first line with content: the id it had alone
        assert str(first.created_at) == "2025-10-14 09:00:02.274000+00:00"  # when its first line was written
        assert [m.tool_call_id for m in msgs[2:4]] == ["toolu_01Rd4q", "toolu_01Gp8m"]
        assert msgs[4].content == "The total sums floats. I'll sum Decimals instead."
        assert msgs[4].tool_calls[0]["function"]["name"] == "Edit"
        # a result written between two lines of its reply is stored after the whole reply
        assert msgs[6].content is None and [c["id"] for c in msgs[6].tool_calls] == ["toolu_01Bs1a", "toolu_01Bs2b"]
        assert [m.tool_call_id for m in msgs[7:9]] == ["toolu_01Bs1a", "toolu_01Bs2b"]
        assert msgs[9].external_id == _uuid(15) and "uuids" not in msgs[9].metadata  # a reply of one line
        assert mem.conversation(CONV).info.metadata["title"] == "Invoice total rounding fixed with Decimal"
        again = import_file(mem, SESSION)
        assert sum(again.added.values()) == 0 and again.already_stored == 10


def _blocks(msgs: list[Message]) -> tuple[list[str], list[str], list[str]]:
    """Every assistant text, tool call id and tool result id stored, in store order."""
    texts = [m.content for m in msgs if m.role == "assistant" and isinstance(m.content, str)]
    calls = [c["id"] for m in msgs for c in m.tool_calls]
    results = [m.tool_call_id for m in msgs if m.role == "tool" and m.tool_call_id]
    return texts, calls, results


def _well_formed(msgs: list[Message]) -> None:
    called: set[str] = set()
    for m in msgs:
        called.update(c["id"] for c in m.tool_calls)
        if m.role == "tool":
            assert m.tool_call_id in called, f"a result before its call: {m.tool_call_id}"


def _splits_a_reply(cut: int) -> bool:
    """Whether the first ``cut`` lines end inside a reply: some of its content was written
    before the cut, some after."""
    lines = [json.loads(line) for line in LINES]

    def reply(x: dict[str, Any]) -> str | None:
        return x["message"]["id"] if x.get("type") == "assistant" else None

    def content(x: dict[str, Any]) -> bool:
        return any(b.get("type") in ("text", "tool_use") for b in x["message"]["content"])

    started = {reply(x) for x in lines[:cut] if reply(x) and content(x)}
    return any(reply(x) in started and content(x) for x in lines[cut:])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cuts=st.lists(st.integers(min_value=1, max_value=len(LINES) - 1), max_size=3, unique=True))
def test_a_session_imported_while_it_was_written_keeps_every_block_once(scratch_store: Callable[[], str],
                                                                        cuts: list[int]) -> None:
    """Import the file as it stood at each cut (Claude Code still writing it), then whole:
    every text, tool call and tool result is stored exactly once, each result after its
    call, and importing again adds nothing. A reply no cut split is one message, so with
    no such cut the store is the same as one import of the whole file."""
    with lossless.open(scratch_store(), embedder=None) as fresh:
        _import_bytes(fresh, b"".join(LINES))
        whole = fresh.conversation(CONV).messages()
    with lossless.open(scratch_store(), embedder=None) as mem:
        for cut in sorted(cuts):
            _import_bytes(mem, b"".join(LINES[:cut]))
        _import_bytes(mem, b"".join(LINES))
        msgs = mem.conversation(CONV).messages()
        assert _blocks(msgs) == _blocks(whole)
        _well_formed(msgs)
        assert sum(_import_bytes(mem, b"".join(LINES)).added.values()) == 0
        if not any(_splits_a_reply(c) for c in cuts):
            assert [(m.role, m.content, m.tool_calls, m.external_id) for m in msgs] == [
                (m.role, m.content, m.tool_calls, m.external_id) for m in whole]
        else:  # the split reply is two messages: what was stored, then the lines written since
            assert len(msgs) > len(whole)


def test_a_reply_cut_after_its_text_gets_its_tool_calls_next_time(store_target: StoreTarget) -> None:
    with lossless.open(store_target("cut"), embedder=None) as mem:
        _import_bytes(mem, b"".join(LINES[:5]))  # summary, snapshot, prompt, thinking, text
        assert [m.content for m in mem.conversation(CONV).messages()][1].startswith("I'll look")
        report = _import_bytes(mem, b"".join(LINES))
        msgs = mem.conversation(CONV).messages()
        assert msgs[1].tool_calls == () and msgs[1].external_id == _uuid(3)
        assert msgs[2].content is None and [c["function"]["name"] for c in msgs[2].tool_calls] == ["Read", "Grep"]
        assert msgs[2].external_id == _uuid(4) and msgs[2].metadata["uuids"] == [_uuid(4), _uuid(5)]
        assert report.added[CONV] == 9 and len(msgs) == 11  # the rest of the reply, then the 8 after it
        _well_formed(msgs)


@pytest.mark.parametrize(("old", "new_messages"), [
    ("claude_code_blocks.old-import.jsonl", 0),  # the whole session, imported by the old code
    ("claude_code_blocks.old-import-6-lines.jsonl", 9),  # its first 6 lines, cut inside the first reply: its Grep call and the rest
])
def test_a_session_imported_by_the_old_code_is_completed_not_duplicated(store_target: StoreTarget, old: str,
                                                                        new_messages: int) -> None:
    with lossless.open(store_target("old"), embedder=None) as mem:
        assert not import_file(mem, DATA / old).skipped  # the store as the old importer left it
        before = mem.conversation(CONV).messages()
        report = import_file(mem, SESSION)
        msgs = mem.conversation(CONV).messages()
        assert report.added[CONV] == new_messages and msgs[: len(before)] == before
        with lossless.open(store_target("fresh"), embedder=None) as fresh:
            import_file(fresh, SESSION)
            assert _blocks(msgs) == _blocks(fresh.conversation(CONV).messages())
        _well_formed(msgs)
        assert sum(import_file(mem, SESSION).added.values()) == 0
