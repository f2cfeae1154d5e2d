"""`lossless mcp` answers a client's mistakes as the protocol says, driven by the official
MCP client over stdio against a real `lossless mcp` process: a prompt argument that is not
what it must be (a number in words, a missing or unknown argument) is invalid params
(-32602) naming it, a resource that is not there is resource-not-found (-32602 with its
URI, as the SDK answers a URI it does not know), a tool argument its schema does not name
is a tool error naming it, and none of it leaves a traceback on stderr."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import anyio
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS

import lossless
from tests.conftest import StoreTarget

ROOT = Path(__file__).resolve().parents[1]


async def _invalid(call: object, *words: str) -> MCPError:
    """The JSON-RPC error ``call`` (an awaitable) ends in: invalid params, saying ``words``."""
    with pytest.raises(MCPError) as caught:
        await call  # type: ignore[misc]
    error = caught.value
    assert error.code == INVALID_PARAMS, (error.code, error.message)
    assert all(w in error.message for w in words), error.message
    return error


def test_mcp_bad_arguments_and_missing_resources_are_protocol_errors(store_target: StoreTarget,
                                                                      tmp_path: Path) -> None:
    db = store_target("mcperr")
    with lossless.open(db, embedder=None) as mem:
        conv = mem.conversation("对话-小美")
        conv.add_many([{"role": "user", "content": "今天和小美去公园散步。"},
                       {"role": "assistant", "content": "公园里的花开了吗？"}])
    params = StdioServerParameters(command=sys.executable, args=["-m", "lossless", "mcp", "--db", str(db)],
                                   env={**os.environ, "LOSSLESS_EMBEDDER": "none", "LOSSLESS_HOME": str(tmp_path),
                                        "PYTHONPATH": str(ROOT / "src")})
    errlog = tmp_path / "stderr.txt"

    async def run() -> None:
        with errlog.open("w", encoding="utf-8") as err:
            async with stdio_client(params, errlog=err) as (read, write), ClientSession(read, write) as s:
                with anyio.fail_after(60):
                    await s.initialize()
                    # prompts: the argument named, and what it must be
                    await _invalid(s.get_prompt("resume", {"conversation": "对话-小美", "budget": "五百"}),
                                   "budget", "whole number", "五百")
                    await _invalid(s.get_prompt("recall", {"topic": "公园", "limit": "many"}),
                                   "limit", "from 1 to 50", "many")
                    await _invalid(s.get_prompt("recall", {"topic": "公园", "limit": "0"}), "limit")
                    await _invalid(s.get_prompt("recall", {}), "needs", "topic")
                    await _invalid(s.get_prompt("recall", {"topic": "公园", "limt": "3"}), "unknown", "limt")
                    await _invalid(s.get_prompt("resume", {"conversation": "不存在"}), "不存在")
                    good = await s.get_prompt("recall", {"topic": "公园", "limit": " 2 "})
                    assert "公园" in good.messages[0].content.text  # type: ignore[union-attr]
                    resumed = await s.get_prompt("resume", {"conversation": "对话-小美", "budget": "2000"})
                    assert resumed.messages[-1].role == "user"

                    # resources: not there is resource-not-found, with the URI
                    for uri in ("lossless://conversations/不存在", "lossless://summaries/sum_nope",
                                "lossless://messages/msg_nope", "lossless://summaries/nope"):
                        missing = await _invalid(s.read_resource(uri), "nope" if "nope" in uri else "不存在")
                        assert missing.data == {"uri": uri}

                    # tools: only the arguments the schema names, as tool calling has it
                    listed = (await s.list_tools()).tools
                    assert listed and all(t.input_schema["additionalProperties"] is False for t in listed)
                    typo = await s.call_tool("lcm_grep", {"query": "公园", "limt": 1})
                    assert typo.is_error and "unknown argument(s): limt" in typo.content[0].text  # type: ignore[union-attr]
                    hits = await s.call_tool("lcm_grep", {"query": "公园", "limit": 1})
                    assert not hits.is_error and json.loads(hits.content[0].text)["count"] == 1  # type: ignore[union-attr]

    anyio.run(run)
    assert "Traceback" not in errlog.read_text(encoding="utf-8")
