"""`lossless mcp` over stdio, driven by the official MCP client: the tools are listed with
lossless's descriptions and schemas, each one is called, errors come back as tool errors,
and the conversations are readable as resources."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

import lossless
from lossless.agent.tools import openai_tools
from lossless.server.mcp_server import TOOL_NAMES
from tests.conftest import StoreTarget, chat
from tests.test_stats_types import CONVERSATION_KEYS


def _payload(result: Any) -> Any:
    assert not result.is_error, result.content
    return json.loads(result.content[0].text)


def test_mcp_over_stdio(store_target: StoreTarget, tmp_path: Path) -> None:
    db = store_target("mcp")
    with lossless.open(db, context_window=4096) as mem:
        conv = mem.conversation("c1", {"user": "ann"})
        conv.add_many(chat(120))
        assert mem.wait_idle(60)
        leaf = next(s for s in conv.summaries() if s.depth == 0)
    params = StdioServerParameters(command=sys.executable, args=["-m", "lossless", "mcp", "--db", str(db)],
                                   env={"LOSSLESS_EMBEDDER": "none", "LOSSLESS_HOME": str(tmp_path),
                                        # this tree's lossless, not an installed one
                                        "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")})

    async def session_run() -> None:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            with anyio.fail_after(60):
                await session.initialize()
                listed = {t.name: t for t in (await session.list_tools()).tools}
                assert sorted(listed) == sorted(TOOL_NAMES)
                specs = {t["function"]["name"]: t["function"] for t in openai_tools()}
                for name in ("lcm_grep", "lcm_describe", "lcm_expand"):
                    assert listed[name].description == specs[name]["description"]
                    props = listed[name].input_schema["properties"]
                    assert set(props) == set(specs[name]["parameters"]["properties"]) | {"conversation"}
                    assert listed[name].input_schema["required"] == specs[name]["parameters"]["required"]
                assert props["id"]["description"] == specs["lcm_expand"]["parameters"]["properties"]["id"]["description"]
                modes = specs["lcm_grep"]["parameters"]["properties"]["mode"]["enum"]
                assert listed["lcm_grep"].input_schema["properties"]["mode"]["enum"] == modes  # what the tool takes

                grep = _payload(await session.call_tool("lcm_grep", {"query": "service-4", "conversation": "c1"}))
                assert grep["count"] >= 1 and grep["hits"][0]["conversation_id"] == "c1"
                described = _payload(await session.call_tool("lcm_describe", {"id": leaf.id}))
                assert described["depth"] == 0 and described["first_seq"] == leaf.first_seq
                expanded = _payload(await session.call_tool("lcm_expand", {"id": leaf.id, "max_tokens": 100000}))
                assert [i["seq"] for i in expanded["items"]] == list(range(leaf.first_seq, leaf.last_seq + 1))
                added = _payload(await session.call_tool("memory_add", {"content": "Ann takes her tea with lemon",
                                                                        "kind": "preference", "user": "ann"}))
                found = _payload(await session.call_tool("memory_search", {"query": "tea lemon", "user": "ann"}))
                assert [m["id"] for m in found["memories"]] == [added["id"]]

                missing = await session.call_tool("lcm_expand", {"id": "sum_doesnotexist"})
                assert missing.is_error and "sum_doesnotexist" in missing.content[0].text
                for mode in ("telepathy", "raw"):  # raw FTS5 syntax is not a mode of the tool, here or anywhere
                    bad = await session.call_tool("lcm_grep", {"query": "x", "mode": mode})
                    assert bad.is_error and "'fts'" in bad.content[0].text
                other = await session.call_tool("lcm_describe", {"id": leaf.id, "conversation": "elsewhere"})
                assert other.is_error  # scoped to another conversation: not found there

                resources = await session.list_resources()
                assert [str(r.uri) for r in resources.resources] == ["lossless://conversations"]
                templates = await session.list_resource_templates()
                assert [t.uri_template for t in templates.resource_templates] == [
                    "lossless://conversations/{conversation_id}", "lossless://summaries/{summary_id}",
                    "lossless://messages/{message_id}"]
                everything = json.loads((await session.read_resource("lossless://conversations")).contents[0].text)
                assert everything["conversations"][0]["id"] == "c1"
                one = json.loads((await session.read_resource("lossless://conversations/c1")).contents[0].text)
                assert one["stats"]["messages"] == 120 and leaf.id in {s["id"] for s in one["summaries"]}
                assert list(one["stats"]) == CONVERSATION_KEYS  # ConversationStats.to_dict(): the shape it had

    anyio.run(session_run)
    with lossless.open(db) as mem:  # what the tools wrote is in the database
        assert "Ann takes her tea with lemon" in [r.content for r in mem.memories.ls(user="ann", kind="preference")]


def test_mcp_tool_integers_are_checked_as_tool_calling_checks_them(store_target: StoreTarget, tmp_path: Path) -> None:
    """lcm_expand's and lcm_grep's integer arguments: pydantic took "5" for 5 and true for 1
    (tool calling and the HTTP API refuse both), and refused 0 in its own words ("1
    validation error for lcm_expandArguments … errors.pydantic.dev"). The ToolBox checks
    them now, as it does for tool calling; the schema the client sees is unchanged."""
    db = store_target("mcpints")
    with lossless.open(db, embedder=None) as mem:
        conv = mem.conversation("c1")
        conv.add_many([{"role": "user", "content": "我们周六去公园散步，看到了很多鸽子。"},
                       {"role": "assistant", "content": "听起来很惬意！"}])
        first = conv.messages()[0].id
    params = StdioServerParameters(command=sys.executable, args=["-m", "lossless", "mcp", "--db", str(db)],
                                   env={"LOSSLESS_EMBEDDER": "none", "LOSSLESS_HOME": str(tmp_path),
                                        "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")})
    cases = [("lcm_expand", {"id": first, "max_tokens": 0}, "max_tokens must be a positive integer; got 0"),
             ("lcm_expand", {"id": first, "max_tokens": "5"}, "max_tokens must be a positive integer; got '5'"),
             ("lcm_expand", {"id": first, "offset": -1}, "offset must be an integer >= 0; got -1"),
             ("lcm_expand", {"id": first, "max_chars": True}, "max_chars must be a positive integer; got True"),
             ("lcm_grep", {"query": "公园", "limit": "5"}, "limit must be an integer from 1 to 100; got '5'"),
             ("lcm_grep", {"query": "公园", "limit": 101}, "limit must be an integer from 1 to 100; got 101")]

    async def session_run() -> None:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            with anyio.fail_after(60):
                await session.initialize()
                for tool, args, says in cases:
                    result = await session.call_tool(tool, args)
                    text = result.content[0].text
                    assert result.is_error and says in text and "pydantic" not in text, (tool, args, text)
                good = _payload(await session.call_tool("lcm_expand", {"id": first, "max_chars": 4, "offset": 2}))
                assert good["content"] == "周六去公"
                assert _payload(await session.call_tool("lcm_grep", {"query": "公园", "limit": 1}))["count"] == 1

    anyio.run(session_run)
