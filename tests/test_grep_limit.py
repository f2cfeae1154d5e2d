"""lcm_grep's ``limit`` has one range, GREP_LIMIT_MAX: what its schema declares (tool
calling, OpenAPI, MCP's tools/list) is what every path accepts, and one over is refused on
each path with the same words, naming the field and the range: tool calling
(ToolBox.call / dispatch), the server's tools endpoint over real HTTP, and a real
`lossless mcp` process driven by the official client."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

import lossless
from lossless.agent.tools import GREP_LIMIT_MAX, anthropic_tools, openai_tools
from lossless.core.errors import ValidationError
from lossless.server.openapi import openapi_document
from tests.conftest import StoreTarget
from tests.server_support import served

ROOT = Path(__file__).resolve().parents[1]
C = "/v1/lossless/conversations"
REFUSED = f"limit must be an integer from 1 to {GREP_LIMIT_MAX}; got {GREP_LIMIT_MAX + 1}"
MATCHES = GREP_LIMIT_MAX + 20  # more hits than the most one call returns


def _seed(mem: lossless.Memory) -> None:
    """Two conversations, Chinese and English, each with more matching messages than the limit."""
    mem.conversation("公园").add_many(
        [{"role": "user", "content": f"第{i}次去公园散步，看到了很多花。"} for i in range(MATCHES)])
    mem.conversation("park").add_many(
        [{"role": "user", "content": f"Walk {i} in the park: the roses are out."} for i in range(MATCHES)])


def _schema_maximum(parameters: dict[str, Any]) -> int:
    limit = parameters["properties"]["limit"]
    assert limit["minimum"] == 1
    return int(limit["maximum"])


def test_the_published_schemas_declare_the_range_every_path_accepts() -> None:
    grep_openai = next(t["function"] for t in openai_tools() if t["function"]["name"] == "lcm_grep")
    grep_anthropic = next(t for t in anthropic_tools() if t["name"] == "lcm_grep")
    assert _schema_maximum(grep_openai["parameters"]) == GREP_LIMIT_MAX
    assert _schema_maximum(grep_anthropic["input_schema"]) == GREP_LIMIT_MAX
    assert _schema_maximum(openapi_document()["components"]["schemas"]["LcmGrep"]) == GREP_LIMIT_MAX


def test_tool_calling_accepts_the_schema_maximum_and_refuses_one_over(store_target: StoreTarget) -> None:
    with lossless.open(store_target("grep-limit-tools"), embedder=None) as mem:
        _seed(mem)
        for conv, query in (("公园", "公园"), ("park", "roses")):
            tools = mem.conversation(conv).tools
            found = tools.call("lcm_grep", {"query": query, "scope": "messages", "limit": GREP_LIMIT_MAX})
            assert found["count"] == GREP_LIMIT_MAX  # type: ignore[typeddict-item]
            with pytest.raises(ValidationError) as refused:
                tools.call("lcm_grep", {"query": query, "limit": GREP_LIMIT_MAX + 1})
            assert str(refused.value) == REFUSED
            with pytest.raises(ValidationError, match="limit must be an integer from 1 to"):
                tools.lcm_grep(query, limit=0)
            # a model's tool call: an error result it can read, the same words
            answer = tools.dispatch({"id": "call_1", "type": "function", "function": {
                "name": "lcm_grep", "arguments": json.dumps({"query": query, "limit": GREP_LIMIT_MAX + 1})}})
            assert REFUSED in answer["content"]


def test_the_servers_tools_endpoint_accepts_the_schema_maximum_and_refuses_one_over(
        store_target: StoreTarget) -> None:
    with lossless.open(store_target("grep-limit-http"), embedder=None) as mem:
        _seed(mem)
        with served(mem) as server, httpx.Client(base_url=server.url, timeout=60) as http:
            for conv, query in (("%E5%85%AC%E5%9B%AD", "公园"), ("park", "roses")):  # 公园, in its URL
                url = f"{C}/{conv}/tools/lcm_grep"
                found = http.post(url, json={"query": query, "scope": "messages", "limit": GREP_LIMIT_MAX})
                assert found.status_code == 200, found.text
                assert found.json()["count"] == GREP_LIMIT_MAX
                for limit in (GREP_LIMIT_MAX + 1, 1000):  # 1000 was accepted here, against the schema
                    refused = http.post(url, json={"query": query, "limit": limit})
                    assert refused.status_code == 422, refused.text[:300]
                    assert f"limit must be an integer from 1 to {GREP_LIMIT_MAX}; got {limit}" in refused.text


def test_mcp_lists_the_range_accepts_its_maximum_and_refuses_one_over(store_target: StoreTarget,
                                                                       tmp_path: Path) -> None:
    db = store_target("grep-limit-mcp")
    with lossless.open(db, embedder=None) as mem:
        _seed(mem)
    params = StdioServerParameters(command=sys.executable, args=["-m", "lossless", "mcp", "--db", str(db)],
                                   env={**os.environ, "LOSSLESS_EMBEDDER": "none", "LOSSLESS_HOME": str(tmp_path),
                                        "PYTHONPATH": str(ROOT / "src")})

    async def run() -> None:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
            with anyio.fail_after(60):
                await s.initialize()
                listed = {t.name: t for t in (await s.list_tools()).tools}
                assert _schema_maximum(listed["lcm_grep"].input_schema) == GREP_LIMIT_MAX
                for conv, query in (("公园", "公园"), ("park", "roses")):
                    found = await s.call_tool("lcm_grep", {"query": query, "conversation": conv,
                                                           "scope": "messages", "limit": GREP_LIMIT_MAX})
                    assert not found.is_error, found.content
                    assert json.loads(found.content[0].text)["count"] == GREP_LIMIT_MAX  # type: ignore[union-attr]
                    refused = await s.call_tool("lcm_grep", {"query": query, "conversation": conv,
                                                             "limit": GREP_LIMIT_MAX + 1})
                    assert refused.is_error and REFUSED in refused.content[0].text  # type: ignore[union-attr]

    anyio.run(run)


def test_the_operators_paths_are_not_capped_at_the_models_maximum(tmp_path: Path) -> None:
    """`lossless grep --limit` (a real CLI process) and search(limit=) are a person's or a
    program's, not a model's: more than GREP_LIMIT_MAX hits when asked, in every grep mode."""
    db = tmp_path / "operator.db"
    with lossless.open(db, embedder=None) as mem:
        _seed(mem)
        assert len(mem.search("公园", conversations=["公园"], kinds=("message",), limit=MATCHES)) == MATCHES
    env = {**os.environ, "LOSSLESS_EMBEDDER": "none", "LOSSLESS_HOME": str(tmp_path),
           "PYTHONPATH": str(ROOT / "src")}
    for conv, query, how in (("公园", "公园", ()), ("park", "roses", ()), ("公园", "公园.*花", ("--regex",)),
                             ("park", "roses", ("--raw",))):
        done = subprocess.run([sys.executable, "-m", "lossless", "--db", str(db), "--json", "grep", conv, query,
                               *how, "--scope", "messages", "--limit", str(GREP_LIMIT_MAX + 1)],
                              env=env, capture_output=True, text=True, encoding="utf-8", timeout=120)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["count"] == GREP_LIMIT_MAX + 1, (conv, how)
