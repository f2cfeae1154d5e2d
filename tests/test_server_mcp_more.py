"""`lossless mcp` beyond tools, driven by the official MCP client over stdio and over
streamable HTTP against a real `lossless mcp` process: logging/setLevel and log messages
at the level set, progress notifications (lcm_compact with a total, a heartbeat on the
other tools), resource templates for conversations, summaries and messages, the recall
and resume prompts built from a real search and a real assembly, and completion of
conversation, summary and message ids."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import LoggingMessageNotificationParams, PromptReference, ResourceTemplateReference

import lossless
from lossless.server.run import free_port
from tests.conftest import StoreTarget, chat

ROOT = Path(__file__).resolve().parents[1]
# logging/setLevel is deprecated by the 2026-07-28 protocol (the SDK's client warns on use);
# clients on the handshake protocols (2025-*) still send it, and the suite tests it
pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")


def _seed(db: Any) -> dict[str, Any]:
    """c1: compacted (a leaf to read); c2: short messages, none summarized yet."""
    with lossless.open(db, context_window=4096) as mem:
        c1 = mem.conversation("c1", {"user": "ann"})
        c1.add_many(chat(120))
        c1.add(role="user", content="The lighthouse keeper's cat is called Biscuit.")
        assert mem.wait_idle(60)
        leaf = next(s for s in c1.summaries() if s.depth == 0)
        msg = c1.messages(5, 5)[0]
        c2 = mem.conversation("c2")
        c2.add_many(chat(70, words=2))
        assert mem.wait_idle(60)
        assert not c2.summaries()  # under every trigger: lcm_compact has work to do
        return {"leaf": leaf.id, "leaf_span": (leaf.first_seq, leaf.last_seq), "msg": msg.id, "msg_content": msg.content}


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "LOSSLESS_EMBEDDER": "none", "LOSSLESS_HOME": str(tmp_path),
            "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}


def _payload(result: Any) -> Any:
    assert not result.is_error, result.content
    return json.loads(result.content[0].text)


async def _exercise(session: ClientSession, logs: list[LoggingMessageNotificationParams], seeded: dict[str, Any]) -> None:
    caps = (await session.initialize()).capabilities
    assert caps.logging is not None and caps.completions is not None and caps.prompts is not None

    # logging: nothing below warning until the client asks; then at the level set
    await session.call_tool("lcm_grep", {"query": "Biscuit"})
    assert [entry for entry in logs if entry.level in ("info", "debug")] == []
    assert (await session.set_logging_level("debug")).model_dump(exclude_none=True) == {}
    grep = _payload(await session.call_tool("lcm_grep", {"query": "Biscuit", "conversation": "c1"}))
    assert grep["count"] == 1
    await anyio.sleep(0.2)
    levels = {entry.level for entry in logs}
    assert {"debug", "info"} <= levels
    assert any("lcm_grep done" in str(entry.data) and "count 1" in str(entry.data) for entry in logs)
    assert any(entry.level == "debug" and "Biscuit" in json.dumps(entry.data) for entry in logs)
    await session.set_logging_level("error")
    logs.clear()
    await session.call_tool("lcm_describe", {"id": seeded["leaf"]})
    failed = await session.call_tool("lcm_expand", {"id": "sum_nosuchthing"})
    assert failed.is_error
    await anyio.sleep(0.2)
    assert [entry.level for entry in logs] == ["error"] and "sum_nosuchthing" in str(logs[0].data)

    # progress: lcm_compact reports messages summarized of those due, increasing, to 100 %
    await session.set_logging_level("info")
    logs.clear()
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    done = _payload(await session.call_tool("lcm_compact", {"conversation": "c2"}, progress_callback=on_progress))
    assert done["summaries_written"] >= 1 and done["tokens_after"] < done["tokens_before"]
    assert len(seen) >= 3
    values = [p for p, _, _ in seen]
    assert values == sorted(values) and len(set(values)) == len(values)  # strictly increasing
    assert seen[-1][1] == 70 - 32 and seen[-1][0] == seen[-1][1]  # 38 messages due outside the fresh tail
    assert any("summaries written" in (m or "") for _, _, m in seen)
    assert any("compaction of 'c2': summary 1" in str(entry.data) for entry in logs)
    quick: list[tuple[float, float | None, str | None]] = []

    async def on_quick(progress: float, total: float | None, message: str | None) -> None:
        quick.append((progress, total, message))

    await session.call_tool("lcm_expand", {"id": seeded["leaf"]}, progress_callback=on_quick)
    assert quick[0][0] == 0 and quick[-1][2] == "lcm_expand: done" and quick[-1][0] > quick[0][0]

    # resource templates: conversations, summaries and messages by URI
    templates = [t.uri_template for t in (await session.list_resource_templates()).resource_templates]
    assert templates == ["lossless://conversations/{conversation_id}", "lossless://summaries/{summary_id}",
                         "lossless://messages/{message_id}"]
    summary = json.loads((await session.read_resource(f"lossless://summaries/{seeded['leaf']}")).contents[0].text)
    assert (summary["first_seq"], summary["last_seq"]) == seeded["leaf_span"] and summary["content"]
    message = json.loads((await session.read_resource(f"lossless://messages/{seeded['msg']}")).contents[0].text)
    assert message["content"] == seeded["msg_content"] and message["seq"] == 5
    with pytest.raises(Exception, match="msg_missing"):
        await session.read_resource("lossless://messages/msg_missing")

    # prompts built from a real search and a real assembly
    prompts = {p.name: p for p in (await session.list_prompts()).prompts}
    assert {"recall", "resume"} <= set(prompts)
    assert [(a.name, a.required) for a in prompts["recall"].arguments or []] == [
        ("topic", True), ("conversation", False), ("limit", False)]
    recalled = await session.get_prompt("recall", {"topic": "lighthouse cat", "conversation": "c1"})
    text = recalled.messages[0].content.text  # type: ignore[union-attr]
    assert "Biscuit" in text and "[msg_" in text and "lcm_expand" in text
    nothing = await session.get_prompt("recall", {"topic": "zeppelin"})
    assert "nothing that matches" in nothing.messages[0].content.text  # type: ignore[union-attr]
    resumed = await session.get_prompt("resume", {"conversation": "c1", "budget": "1500"})
    roles = [m.role for m in resumed.messages]
    assert "assistant" in roles and roles[-1] == "user"
    assert "Biscuit" in json.dumps([m.content.model_dump() for m in resumed.messages])  # the newest turn, verbatim
    with pytest.raises(Exception, match="nope"):
        await session.get_prompt("resume", {"conversation": "nope"})

    # completion of ids
    conv_ref = ResourceTemplateReference(type="ref/resource", uri="lossless://conversations/{conversation_id}")
    assert (await session.complete(conv_ref, {"name": "conversation_id", "value": "c"})).completion.values == ["c2", "c1"]
    assert (await session.complete(conv_ref, {"name": "conversation_id", "value": "c1"})).completion.values == ["c1"]
    prompt_ref = PromptReference(type="ref/prompt", name="recall")
    assert (await session.complete(prompt_ref, {"name": "conversation", "value": "c2"})).completion.values == ["c2"]
    assert (await session.complete(prompt_ref, {"name": "topic", "value": "c"})).completion.values == []
    sum_ref = ResourceTemplateReference(type="ref/resource", uri="lossless://summaries/{summary_id}")
    found = (await session.complete(sum_ref, {"name": "summary_id", "value": seeded["leaf"][:8]})).completion
    assert seeded["leaf"] in found.values and all(v.startswith(seeded["leaf"][:8]) for v in found.values)
    msg_ref = ResourceTemplateReference(type="ref/resource", uri="lossless://messages/{message_id}")
    many = (await session.complete(msg_ref, {"name": "message_id", "value": "msg_"})).completion
    assert len(many.values) == 100 and many.has_more  # 191 messages: the first 100, and "more"
    scoped = (await session.complete(msg_ref, {"name": "message_id", "value": "msg_"}, {"conversation_id": "c2"}))
    assert scoped.completion.total == 70


def test_mcp_more_over_stdio(store_target: StoreTarget, tmp_path: Path) -> None:
    db = store_target("mcpmore")
    seeded = _seed(db)
    params = StdioServerParameters(command=sys.executable, args=["-m", "lossless", "mcp", "--db", str(db)],
                                   env=_env(tmp_path))
    logs: list[LoggingMessageNotificationParams] = []

    async def on_log(params: LoggingMessageNotificationParams) -> None:
        logs.append(params)

    async def run() -> None:
        async with stdio_client(params) as (read, write), ClientSession(read, write, logging_callback=on_log) as s:
            with anyio.fail_after(120):
                await _exercise(s, logs, seeded)

    anyio.run(run)


@contextmanager
def _http_server(db: Any, tmp_path: Path) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "lossless", "mcp", "--db", str(db), "--transport", "http",
                             "--host", "127.0.0.1", "--port", str(port)], env=_env(tmp_path),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "lossless mcp did not start"
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(10)


def test_mcp_more_over_streamable_http(store_target: StoreTarget, tmp_path: Path) -> None:
    db = store_target("mcpmorehttp")
    seeded = _seed(db)
    logs: list[LoggingMessageNotificationParams] = []

    async def on_log(params: LoggingMessageNotificationParams) -> None:
        logs.append(params)

    with _http_server(db, tmp_path) as url:
        async def run() -> None:
            async with streamable_http_client(url) as (read, write), \
                    ClientSession(read, write, logging_callback=on_log) as s:
                with anyio.fail_after(120):
                    await _exercise(s, logs, seeded)

        anyio.run(run)
