"""Large content kept out of the window: a big tool output is described with an
exploration and read back exactly, page by page, through the tools and the CLI."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lossless
from lossless.cli import main
from lossless.context.paging import page_chars, page_count, text_sha256, token_slice
from lossless.core.tokens import get_counter

from .conftest import StoreTarget, chat

COUNTER = get_counter("cl100k_base")
BIG_BYTES = 16 * 1024 * 1024  # max_message_bytes that lets a 10 MB tool output in
LINES = 200_000


def _big_log() -> str:
    """About 10 MB of log output with emoji and CJK, so characters and bytes differ."""
    lines = []
    for i in range(LINES):
        level = "ERROR" if i % 997 == 0 else "INFO"
        lines.append(f"2024-03-01T10:{i // 3600 % 60:02d}:{i % 60:02d}Z {level} worker-{i % 7} job {i} ok 😀 数据\r\n"
                     if i % 5 == 0 else
                     f"2024-03-01T10:{i // 3600 % 60:02d}:{i % 60:02d}Z {level} worker-{i % 7} job {i} done\n")
    return "".join(lines)


@pytest.fixture(scope="module")
def big() -> str:
    text = _big_log()
    assert len(text.encode("utf-8")) >= 10_000_000
    return text


@pytest.fixture(scope="module")
def stored(lasting_store_target: StoreTarget, big: str) -> tuple[str, str]:
    """A database with a conversation whose tool call returned the big log."""
    path = lasting_store_target("large")
    mem = lossless.open(path, embedder=None, max_message_bytes=BIG_BYTES)
    try:
        conv = mem.conversation("agent")
        conv.add_many(chat(6))
        conv.add("assistant", "", tool_calls=[{"id": "call_big", "type": "function", "function": {
            "name": "read_file", "arguments": json.dumps({"path": "/var/log/worker.log"})}}])
        msg = conv.add("tool", big, tool_call_id="call_big")
        conv.add("assistant", "The log has a few errors.")
        return path, msg.id
    finally:
        mem.close()


@pytest.fixture
def conv(stored: tuple[str, str]) -> Iterator[lossless.Conversation]:
    mem = lossless.open(stored[0], embedder=None)
    found = mem.get_conversation("agent")
    assert found is not None
    yield found
    mem.close()


def _openai(box: Any, name: str, **args: Any) -> dict[str, Any]:
    reply = box.dispatch({"id": "call_x", "type": "function",
                          "function": {"name": name, "arguments": json.dumps(args)}})
    assert reply["role"] == "tool" and reply["tool_call_id"] == "call_x"
    body: dict[str, Any] = json.loads(reply["content"])
    assert "error" not in body, body
    return body


def _anthropic(box: Any, name: str, **args: Any) -> dict[str, Any]:
    block = box.dispatch({"type": "tool_use", "id": "tu_x", "name": name, "input": args})
    assert block["type"] == "tool_result" and "is_error" not in block, block
    body: dict[str, Any] = json.loads(block["content"])
    return body


# -- the tools ----------------------------------------------------------------------------

def test_describe_a_large_tool_output(conv: lossless.Conversation, stored: tuple[str, str], big: str) -> None:
    info = _openai(conv.tools, "lcm_describe", id=stored[1])
    assert info["large"] is True and info["role"] == "tool"
    assert info["total_chars"] == len(big) and info["sha256"] == hashlib.sha256(big.encode()).hexdigest()
    exploration = info["exploration"]
    assert exploration["kind"] == "log"
    assert COUNTER.count(exploration["summary"]) <= 600
    assert "error lines" in exploration["summary"] and exploration["stats"]["error_lines"] == len(range(0, LINES, 997))
    assert info["pages"] == page_count(len(big), info["page_chars"]) > 100
    assert "page=1" in info["read"]


def test_small_messages_are_not_large(conv: lossless.Conversation) -> None:
    first = conv.messages()[0]
    info = conv.describe(first.id)
    assert info["large"] is False and "exploration" not in info
    whole = conv.expand(first.id)
    assert whole["content"] == first.content and whole["next_offset"] is None and whole["offset"] == 0


def test_expand_a_10mb_tool_output_exactly_openai(conv: lossless.Conversation, stored: tuple[str, str],
                                                  big: str) -> None:
    parts: list[str] = []
    offset: int | None = 0
    while offset is not None:
        page = _openai(conv.tools, "lcm_expand", id=stored[1], offset=offset, max_chars=1_500_000)
        assert page["offset"] == offset and page["total_chars"] == len(big)
        parts.append(page["content"])
        offset = page["next_offset"]
    joined = "".join(parts)
    assert joined == big
    assert joined.encode("utf-8") == big.encode("utf-8")
    assert page["sha256"] == hashlib.sha256(joined.encode("utf-8")).hexdigest()


def test_expand_a_10mb_tool_output_by_pages_anthropic(conv: lossless.Conversation, stored: tuple[str, str],
                                                      big: str) -> None:
    first = _anthropic(conv.tools, "lcm_expand", id=stored[1], page=1, max_chars=2_000_000)
    pages = first["pages"]
    assert pages == -(-len(big) // 2_000_000)
    parts = [first["content"]]
    for n in range(2, pages + 1):
        page = _anthropic(conv.tools, "lcm_expand", id=stored[1], page=n, max_chars=2_000_000)
        assert page["offset"] == (n - 1) * 2_000_000
        parts.append(page["content"])
    assert page["next_offset"] is None
    assert "".join(parts) == big


def test_token_capped_slices_continue_exactly(conv: lossless.Conversation, stored: tuple[str, str],
                                              big: str) -> None:
    offset = len(big) - 60_000  # the last few slices, then the end
    parts = [big[:offset]]
    next_offset: int | None = offset
    while next_offset is not None:
        page = _openai(conv.tools, "lcm_expand", id=stored[1], offset=next_offset, max_tokens=3000)
        assert page["tokens"] <= 3000 and COUNTER.count(page["content"]) == page["tokens"]
        assert page["content"] == big[page["offset"]:page["offset"] + page["chars"]]
        assert "[#" not in page["content"][:3]  # no header inside the slice
        parts.append(page["content"])
        next_offset = page["next_offset"]
    assert "".join(parts) == big
    first = _openai(conv.tools, "lcm_expand", id=stored[1])  # defaults: offset 0, 4000 tokens
    assert first["tokens"] <= 4000 and first["content"].endswith("\n") and big.startswith(first["content"])


def test_bad_paging_arguments_are_tool_errors(conv: lossless.Conversation, stored: tuple[str, str]) -> None:
    msg_id = stored[1]
    for args, words in (({"id": msg_id, "offset": 10**9}, "past the end"),
                        ({"id": msg_id, "page": 10**6}, "past the last page"),
                        ({"id": msg_id, "page": 2, "offset": 5}, "page or offset"),
                        ({"id": msg_id, "to": "sources"}, "is a message"),
                        ({"id": msg_id, "from_seq": 2}, "is a message"),
                        ({"id": msg_id, "offset": -1}, "offset must be"),
                        ({"id": msg_id, "max_chars": 0}, "max_chars must be")):
        block = conv.tools.dispatch({"type": "tool_use", "id": "t", "name": "lcm_expand", "input": args})
        assert block.get("is_error") is True, args
        assert words in json.loads(block["content"])["error"], args


def test_summaries_page_their_own_text_and_expand_as_before(store_target: StoreTarget) -> None:
    mem = lossless.open(store_target("s"), embedder=None, context_window=4096)
    try:
        conv = mem.conversation("s")
        conv.add_many(chat(60, tools_every=5))
        conv.compact(full=True)
        summary = conv.frontier()[0]
        for args in ({"offset": 5}, {"page": 1}, {"max_chars": 10}):  # the summary's own text, a slice
            block = conv.tools.dispatch({"type": "tool_use", "id": "t", "name": "lcm_expand",
                                         "input": {"id": summary.id, **args}})
            piece = json.loads(block["content"])
            assert "is_error" not in block and piece["kind"] == "summary", args
            assert piece["content"] == summary.content[piece["offset"]:piece["offset"] + piece["chars"]]
        for args in ({"offset": 5, "to": "sources"}, {"page": 1, "from_seq": summary.first_seq}):
            block = conv.tools.dispatch({"type": "tool_use", "id": "t", "name": "lcm_expand",
                                         "input": {"id": summary.id, **args}})
            assert block.get("is_error") is True and "own text" in block["content"], args
        expanded = conv.expand(summary.id, max_tokens=10**9)
        assert [i["seq"] for i in expanded["items"]] == list(range(summary.first_seq, summary.last_seq + 1))
        assert conv.describe(summary.id)["depth"] == summary.depth
    finally:
        mem.close()


def test_schemas_document_the_paging_arguments() -> None:
    from lossless.agent.tools import anthropic_tools, openai_tools

    expand = next(t for t in openai_tools() if t["function"]["name"] == "lcm_expand")["function"]
    props = expand["parameters"]["properties"]
    assert {"offset", "max_chars", "page"} <= set(props)
    assert props["offset"]["minimum"] == 0 and props["page"]["minimum"] == 1
    assert all(props[k].get("description") for k in ("offset", "max_chars", "page"))
    assert "msg_" in props["id"]["description"]
    anthropic = next(t for t in anthropic_tools() if t["name"] == "lcm_expand")
    assert set(anthropic["input_schema"]["properties"]) == set(props)


# -- the CLI ------------------------------------------------------------------------------

def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    status = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return status, out, err


def test_cli_expand_and_describe(capsys: pytest.CaptureFixture[str], stored: tuple[str, str], big: str) -> None:
    db, msg_id = stored
    parts: list[str] = []
    offset = 0
    while True:
        status, out, err = _cli(capsys, "--db", str(db), "expand", msg_id, "--offset", str(offset),
                                "--max-chars", "3000000")
        assert status == 0, err
        parts.append(out)
        if "continue with --offset" not in err:
            break
        offset = int(err.rsplit("--offset", 1)[1].split()[0])
    assert "".join(parts) == big

    status, out, _ = _cli(capsys, "--db", str(db), "--json", "expand", msg_id, "--page", "2", "--max-chars", "1000")
    body = json.loads(out)
    assert status == 0 and body["content"] == big[1000:2000] and body["page"] == 2

    status, out, _ = _cli(capsys, "--db", str(db), "describe", msg_id)
    assert status == 0 and "large content: log" in out and "error lines" in out and "--page 1" in out
    status, out, err = _cli(capsys, "--db", str(db), "expand", msg_id, "--offset", str(len(big) + 1))
    assert status == 1 and err.startswith("error: ") and "past the end" in err


# -- the paging property ------------------------------------------------------------------

_TEXT = st.text(
    alphabet=st.one_of(st.characters(codec="utf-8"), st.sampled_from(list("😀👍🏽👨‍👩‍👧数据中文\r\n é̀"))),
    max_size=1500,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_TEXT, size=st.integers(1, 400), max_tokens=st.integers(1, 120), start=st.integers(0, 50))
def test_pages_concatenate_to_the_original(text: str, size: int, max_tokens: int, start: int) -> None:
    # character pages
    pages = page_count(len(text), size)
    assert "".join(text[(n - 1) * size:n * size] for n in range(1, pages + 1)) == text
    # token-capped slices from any offset
    offset = min(start, len(text))
    parts = [text[:offset]]
    while offset < len(text):
        end, tokens = token_slice(text, offset, max_tokens, COUNTER)
        assert end > offset
        assert tokens == COUNTER.count(text[offset:end])
        assert tokens <= max_tokens or end == offset + 1
        parts.append(text[offset:end])
        offset = end
    assert "".join(parts) == text
    assert text_sha256("".join(parts)) == hashlib.sha256(text.encode("utf-8")).hexdigest()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_TEXT.filter(lambda t: t.strip() != "" and "\x00" not in t), max_chars=st.integers(1, 700),
       max_tokens=st.integers(1, 200))
def test_tool_pages_concatenate_to_the_original(scratch_store: Callable[[], str], text: str,
                                                max_chars: int, max_tokens: int) -> None:
    mem = lossless.open(scratch_store(), embedder=None)
    try:
        conv = mem.conversation("p")
        msg = conv.add("user", text)
        for args in ({"max_chars": max_chars}, {"max_tokens": max_tokens}):
            parts: list[str] = []
            offset: int | None = 0
            while offset is not None:
                page = conv.expand(msg.id, offset=offset, **args)
                parts.append(page["content"])
                offset = page["next_offset"]
            assert "".join(parts) == msg.content == text
        paged = [conv.expand(msg.id, page=n, max_chars=max_chars)["content"]
                 for n in range(1, page_count(len(text), max_chars) + 1)]
        assert "".join(paged) == text
    finally:
        mem.close()


def test_page_size_follows_density() -> None:
    assert page_chars(1_000_000, 250_000) == 16_000  # ~4 characters a token
    assert page_chars(1_000_000, 1_000_000) == 4_000  # dense text, shorter pages
    assert page_chars(10, 0) == 1_000 and page_count(0, 1_000) == 1
