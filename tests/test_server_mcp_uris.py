"""Conversation resource URIs of `lossless mcp`, driven by the official MCP client over stdio:
ids holding ``/``, ``?``, ``#``, ``%``, spaces, ``..`` and Chinese are listed with a URI
that reads back to the same conversation, and a URI written the old way (the id raw, for
an id without reserved characters) still reads."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.uri_template import UriTemplate
from mcp.types import ResourceTemplateReference

import lossless
from tests.conftest import StoreTarget

IDS = ["team/alpha", "会议/周一", "问题?#3", "50% 完成", "../旧", "/根", "c%2Fd", "会议", "plain"]
TEMPLATE = "lossless://conversations/{conversation_id}"


def _read(result: Any) -> Any:
    return json.loads(result.contents[0].text)


def test_conversation_uris_read_back_to_their_conversation(store_target: StoreTarget, tmp_path: Path) -> None:
    """The list gave ids only, and a client writing ``lossless://conversations/team/alpha``
    got "Unknown resource" (the segment ends at ``/``); ``../旧`` and ``/根`` were refused as
    path traversal even percent-encoded. Each listed ``uri`` is the id percent-encoded, as
    RFC 6570 expands the template, and reads back to that conversation."""
    db = store_target("mcpuris")
    with lossless.open(db, embedder=None) as mem:
        for i, cid in enumerate(IDS):
            mem.conversation(cid).add_many([{"role": "user", "content": f"第{i}个对话：{cid}"}] * (i + 1))
    params = StdioServerParameters(command=sys.executable, args=["-m", "lossless", "mcp", "--db", str(db)],
                                   env={"LOSSLESS_EMBEDDER": "none", "LOSSLESS_HOME": str(tmp_path),
                                        "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")})
    template = UriTemplate.parse(TEMPLATE)

    async def session_run() -> None:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            with anyio.fail_after(60):
                await session.initialize()
                listed = _read(await session.read_resource("lossless://conversations"))["conversations"]
                assert sorted(c["id"] for c in listed) == sorted(IDS)
                for entry in listed:
                    cid, uri = entry["id"], entry["uri"]
                    assert uri == template.expand({"conversation_id": cid})  # what a client builds from the template
                    assert "/" not in uri.removeprefix("lossless://conversations/")
                    one = _read(await session.read_resource(uri))
                    assert one["stats"]["conversation"] == cid and one["stats"]["messages"] == IDS.index(cid) + 1
                    # a completion offers the id itself, which expands to the same URI
                    done = await session.complete(ResourceTemplateReference(type="ref/resource", uri=TEMPLATE),
                                                  {"name": "conversation_id", "value": cid})
                    assert cid in done.completion.values
                assert {c["id"]: c["uri"] for c in listed}["会议/周一"] == \
                    "lossless://conversations/%E4%BC%9A%E8%AE%AE%2F%E5%91%A8%E4%B8%80"
                # the old way, the id raw, still reads when it holds nothing reserved
                for cid in ("会议", "plain", "50% 完成"):
                    raw = _read(await session.read_resource(f"lossless://conversations/{cid}"))
                    assert raw["stats"]["conversation"] == cid

    anyio.run(session_run)
