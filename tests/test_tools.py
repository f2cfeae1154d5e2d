"""Agent tools: schemas, dispatch in both wire formats, scoping."""

from __future__ import annotations

import json

import jsonschema

import lossless
from lossless.agent.tools import TOOL_NAMES, anthropic_tools, openai_tools

from .conftest import chat


def _compacted(mem: lossless.Memory, cid: str = "t") -> lossless.Conversation:
    conv = mem.conversation(cid)
    conv.add_many(chat(80, tools_every=5))
    conv.compact(full=True)
    return conv


def test_schemas_are_valid_json_schema() -> None:
    for tool in openai_tools():
        jsonschema.Draft202012Validator.check_schema(tool["function"]["parameters"])
        assert tool["type"] == "function" and tool["function"]["name"] in TOOL_NAMES
    for tool in anthropic_tools():
        jsonschema.Draft202012Validator.check_schema(tool["input_schema"])


def test_dispatch_openai_and_anthropic(mem: lossless.Memory) -> None:
    conv = _compacted(mem)
    box = conv.tools
    leaf = next(s for s in conv.summaries() if s.depth == 0)
    reply = box.dispatch({"id": "call_1", "type": "function",
                          "function": {"name": "lcm_expand", "arguments": json.dumps({"id": leaf.id})}})
    assert reply["role"] == "tool" and reply["tool_call_id"] == "call_1"
    body = json.loads(reply["content"])
    assert [i["seq"] for i in body["items"]] == list(range(leaf.first_seq, leaf.last_seq + 1))
    block = box.dispatch({"type": "tool_use", "id": "tu_1", "name": "lcm_grep", "input": {"query": "service-3"}})
    assert block["type"] == "tool_result" and block["tool_use_id"] == "tu_1" and "is_error" not in block
    assert json.loads(block["content"])["count"] >= 1
    bad = box.dispatch({"type": "tool_use", "id": "tu_2", "name": "lcm_describe", "input": {"id": "sum_nope"}})
    assert bad["is_error"] is True and "sum_nope" in bad["content"]
    bad_args = box.dispatch({"id": "c", "function": {"name": "lcm_grep", "arguments": "{not json"}})
    assert "not valid JSON" in bad_args["content"]
    unknown = box.dispatch({"id": "c", "function": {"name": "rm_rf", "arguments": "{}"}})
    assert "unknown tool" in unknown["content"]


def test_describe_shows_sources_and_parent(mem: lossless.Memory) -> None:
    conv = _compacted(mem)
    top = conv.frontier()[0]
    info = conv.describe(top.id)
    assert info["depth"] == top.depth and info["parent"] is None
    assert info["children"][0]["first_seq"] == top.first_seq
    child = conv.describe(info["children"][0]["id"])
    assert child["parent"] == top.id
    msg = conv.describe(conv.messages()[0].id)
    assert msg["summarized_in"] is not None


def test_expand_pages_under_a_token_cap(mem: lossless.Memory) -> None:
    conv = _compacted(mem)
    top = conv.frontier()[0]
    seen: list[int] = []
    page = conv.expand(top.id, max_tokens=200)
    while True:
        assert page["tokens"] <= 200 or len(page["items"]) == 1
        seen += [i["seq"] for i in page["items"]]
        if not page["truncated"]:
            break
        page = conv.expand(top.id, max_tokens=200, from_seq=page["next_from_seq"])
    assert seen == list(range(top.first_seq, top.last_seq + 1))
    sources = conv.expand(top.id, to="sources", max_tokens=10**6)
    assert all(i["kind"] == "summary" for i in sources["items"])


def test_tools_are_scoped_to_their_conversation(mem: lossless.Memory) -> None:
    a = _compacted(mem, "a")
    b = _compacted(mem, "b")
    other = b.summaries()[0].id
    reply = a.tools.dispatch({"id": "x", "function": {"name": "lcm_expand", "arguments": json.dumps({"id": other})}})
    assert "error" in json.loads(reply["content"])
    hits = a.grep("service")["hits"]
    assert hits and {h["conversation_id"] for h in hits} == {"a"}
