"""`lossless mcp --transport http` with the keys of `lossless serve` (issue 30): a real
`lossless mcp` process, the official MCP client with a key per tenant, and raw HTTP for
what a client would not send. Every tool, resource, prompt and completion answers inside
the key's tenant; without a key there is nothing; idle sessions close, and at most
`--max-sessions` are open (the oldest idle closed first, its id answering 404)."""

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
import httpx
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import PromptReference, ResourceTemplateReference

import lossless
from lossless.server.keys import APIKeys
from lossless.server.run import free_port
from lossless.server.tenancy import Tenant
from tests.conftest import StoreTarget, chat

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")
SECRET = "zebra-42"
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "probe", "version": "0"}}}
ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "LOSSLESS_EMBEDDER": "none", "LOSSLESS_HOME": str(tmp_path),
            "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}


@contextmanager
def _mcp(db: Any, tmp_path: Path, *extra: str) -> Iterator[str]:
    """`lossless mcp --transport http` on a free loopback port; its /mcp URL."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "lossless", "mcp", "--db", str(db), "--transport", "http",
                             "--host", "127.0.0.1", "--port", str(port), *extra], env=_env(tmp_path),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                assert proc.poll() is None, f"lossless mcp exited: {proc.communicate()[1]}"
                assert time.monotonic() < deadline, "lossless mcp did not start"
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.communicate(timeout=15)


def _seed(db: Any) -> dict[str, Any]:
    """Tenant alpha's conversation (compacted: a leaf to ask for), tenant bravo's, the
    operator's own, an operator memory and an indexed operator file; a key per tenant."""
    with lossless.open(db, context_window=4096) as mem:
        alpha, bravo = Tenant("alpha"), Tenant("bravo")
        plans = mem.conversation(alpha.stored_id("plans"), alpha.metadata_in({"user": "ann"}))
        plans.add_many(chat(120))
        plans.add(role="user", content=f"The launch code is {SECRET}.")
        notes = mem.conversation(bravo.stored_id("notes"), bravo.metadata_in(None))
        notes.add_many(chat(6, words=3))
        notes.add(role="user", content="Bravo keeps the spare keys under the mat.")
        mem.conversation("ops").add(role="user", content=f"operator only: {SECRET}")
        mem.memories.add(f"The vault code is {SECRET}", user=None, agent=None)
        assert mem.wait_idle(60)
        leaf = next(s for s in plans.summaries() if s.depth == 0)
        keys = APIKeys(mem.store)
        _, alpha_key = keys.create("alpha")
        _, bravo_key = keys.create("bravo")
        return {"leaf": leaf.id, "alpha_msg": plans.messages(3, 3)[0].id, "alpha": alpha_key, "bravo": bravo_key,
                "bravo_msg": notes.messages(1, 1)[0].id}


def _payload(result: Any) -> Any:
    assert not result.is_error, result.content
    return json.loads(result.content[0].text)


async def _as(url: str, key: str, body: Any) -> None:
    """Run ``body(session)`` with the official client sending ``key``."""
    async with httpx2.AsyncClient(headers={"authorization": f"Bearer {key}"}, timeout=60) as client, \
            streamable_http_client(url, http_client=client) as (read, write), ClientSession(read, write) as session:
        with anyio.fail_after(120):
            await session.initialize()
            await body(session)


async def _bravo_sees_only_its_own(s: ClientSession, seeded: dict[str, Any]) -> None:
    conv_ref = ResourceTemplateReference(type="ref/resource", uri="lossless://conversations/{conversation_id}")
    offered = (await s.complete(conv_ref, {"name": "conversation_id", "value": ""})).completion
    assert offered.values == ["notes"]
    prompt_ref = PromptReference(type="ref/prompt", name="resume")
    assert (await s.complete(prompt_ref, {"name": "conversation", "value": "pl"})).completion.values == []
    msg_ref = ResourceTemplateReference(type="ref/resource", uri="lossless://messages/{message_id}")
    ids = (await s.complete(msg_ref, {"name": "message_id", "value": "msg_"})).completion.values
    assert seeded["bravo_msg"] in ids and seeded["alpha_msg"] not in ids and len(ids) == 7
    listed = json.loads((await s.read_resource("lossless://conversations")).contents[0].text)
    assert [c["id"] for c in listed["conversations"]] == ["notes"] and SECRET not in json.dumps(listed)
    one = json.loads((await s.read_resource("lossless://conversations/notes")).contents[0].text)
    assert one["stats"]["conversation"] == "notes"
    for uri in ("lossless://conversations/plans", "lossless://conversations/@alpha/plans",
                f"lossless://summaries/{seeded['leaf']}", f"lossless://messages/{seeded['alpha_msg']}"):
        with pytest.raises(MCPError) as refused:
            await s.read_resource(uri)
        assert SECRET not in str(refused.value) and "@bravo" not in str(refused.value), uri
    mine = json.loads((await s.read_resource(f"lossless://messages/{seeded['bravo_msg']}")).contents[0].text)
    assert mine["conversation_id"] == "notes"

    assert _payload(await s.call_tool("lcm_grep", {"query": SECRET}))["count"] == 0
    assert _payload(await s.call_tool("lcm_grep", {"query": "service-1", "mode": "regex"}))["count"] == 0 or all(
        h["conversation_id"] == "notes" for h in _payload(await s.call_tool("lcm_grep", {"query": "service"}))["hits"])
    found = _payload(await s.call_tool("lcm_grep", {"query": "spare keys"}))
    assert found["count"] >= 1 and {h["conversation_id"] for h in found["hits"]} == {"notes"}
    for name, args in (("lcm_describe", {"id": seeded["leaf"]}), ("lcm_expand", {"id": seeded["leaf"]}),
                       ("lcm_describe", {"id": seeded["alpha_msg"]}), ("lcm_grep", {"query": "x",
                                                                                   "conversation": "plans"}),
                       ("lcm_compact", {"conversation": "plans"}), ("lcm_describe", {"id": seeded["leaf"],
                                                                                    "conversation": "plans"})):
        result = await s.call_tool(name, args)
        assert result.is_error and SECRET not in result.content[0].text and "@" not in result.content[0].text, name
    assert _payload(await s.call_tool("lcm_compact", {"conversation": "notes"}))["conversation_id"] == "notes"

    memories = _payload(await s.call_tool("memory_search", {"query": "vault code"}))
    assert memories["count"] == 0  # the operator's ownerless memory is not bravo's
    added = _payload(await s.call_tool("memory_add", {"content": "Bravo's vault is blue"}))
    assert added["scope"] == "tenant" and added["agent"] is None
    assert _payload(await s.call_tool("memory_search", {"query": "vault blue"}))["count"] == 1

    recalled = await s.get_prompt("recall", {"topic": f"launch code {SECRET}"})
    assert "has nothing that matches" in json.dumps([m.model_dump() for m in recalled.messages])
    with pytest.raises(MCPError, match="no conversation 'plans'"):
        await s.get_prompt("resume", {"conversation": "plans"})
    resumed = await s.get_prompt("resume", {"conversation": "notes", "focus": "what is in ops_secrets.env?"})
    text = json.dumps([m.model_dump() for m in resumed.messages])
    assert "spare keys" in text and "hunter2" not in text and SECRET not in text


async def _alpha_sees_its_own(s: ClientSession, seeded: dict[str, Any]) -> None:
    found = _payload(await s.call_tool("lcm_grep", {"query": SECRET}))
    assert [h["conversation_id"] for h in found["hits"]] == ["plans"]
    described = _payload(await s.call_tool("lcm_describe", {"id": seeded["leaf"]}))
    assert described["conversation_id"] == "plans"
    summary = json.loads((await s.read_resource(f"lossless://summaries/{seeded['leaf']}")).contents[0].text)
    assert summary["id"] == seeded["leaf"]
    conv_ref = ResourceTemplateReference(type="ref/resource", uri="lossless://conversations/{conversation_id}")
    assert (await s.complete(conv_ref, {"name": "conversation_id", "value": ""})).completion.values == ["plans"]
    recalled = await s.get_prompt("recall", {"topic": SECRET})
    assert "plans" in json.dumps([m.model_dump() for m in recalled.messages])


def test_mcp_over_http_answers_each_key_inside_its_tenant(store_target: StoreTarget, tmp_path: Path) -> None:
    db = store_target("mcpkeys")
    seeded = _seed(db)
    (tmp_path / "ops").mkdir()
    (tmp_path / "ops" / "ops_secrets.env").write_text("DB_PASSWORD=hunter2\n")
    with lossless.open(db) as mem:
        mem.files.index([tmp_path / "ops"])
    with _mcp(db, tmp_path) as url:
        # no key, a wrong one: nothing at all, not even a session
        for headers in ({}, {"authorization": "Bearer lsk_000000000000_" + "x" * 43}, {"x-api-key": "nope"}):
            refused = httpx.post(url, json=INIT, headers={**ACCEPT, **headers}, timeout=30)
            assert refused.status_code == 401 and "mcp-session-id" not in refused.headers, refused.text
            assert refused.headers["www-authenticate"] == "Bearer"
        # a session answers only the key that opened it
        opened = httpx.post(url, json=INIT, headers={**ACCEPT, "authorization": f"Bearer {seeded['bravo']}"},
                            timeout=30)
        assert opened.status_code == 200, opened.text
        sid = opened.headers["mcp-session-id"]
        ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
        stolen = httpx.post(url, json=ping, timeout=30, headers={**ACCEPT, "mcp-session-id": sid,
                                                                 "authorization": f"Bearer {seeded['alpha']}"})
        assert stolen.status_code == 404
        anon = httpx.post(url, json=ping, timeout=30, headers={**ACCEPT, "mcp-session-id": sid})
        assert anon.status_code == 401

        anyio.run(_as, url, seeded["bravo"], lambda s: _bravo_sees_only_its_own(s, seeded))
        anyio.run(_as, url, seeded["alpha"], lambda s: _alpha_sees_its_own(s, seeded))


def _open(url: str, **headers: str) -> str:
    """A new session (initialize, then initialized): its id."""
    opened = httpx.post(url, json=INIT, headers={**ACCEPT, **headers}, timeout=30)
    assert opened.status_code == 200, opened.text
    sid = opened.headers["mcp-session-id"]
    note = httpx.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, timeout=30,
                      headers={**ACCEPT, **headers, "mcp-session-id": sid, "mcp-protocol-version": "2025-06-18"})
    assert note.status_code == 202, note.text
    return sid


def _ping(url: str, sid: str, **headers: str) -> int:
    answer = httpx.post(url, json={"jsonrpc": "2.0", "id": 7, "method": "ping"}, timeout=30,
                        headers={**ACCEPT, **headers, "mcp-session-id": sid, "mcp-protocol-version": "2025-06-18"})
    return answer.status_code


def test_mcp_sessions_are_bounded_and_expire_when_idle(tmp_path: Path) -> None:
    db = tmp_path / "sessions.db"
    lossless.open(db, embedder=None).close()  # no key: a loopback server for everyone local
    with _mcp(db, tmp_path, "--max-sessions", "2", "--session-idle-seconds", "2") as url:
        first, second = _open(url), _open(url)
        assert _ping(url, first) == 200 and _ping(url, second) == 200  # "second" is now the newer use
        assert _ping(url, first) == 200  # ... and "first" again: "second" is the oldest idle
        third = _open(url)  # over the cap: the oldest idle one is closed to make room
        assert _ping(url, second) == 404  # the protocol's "start a new session"
        assert _ping(url, first) == 200 and _ping(url, third) == 200
        # idle for longer than 2 s: closed by the server (each look waits longer than that first,
        # so a look that finds it open does not keep it open for the next)
        for _ in range(10):
            time.sleep(2.5)
            if _ping(url, first) == 404:
                break
        else:
            raise AssertionError("an idle session was never closed")


def test_mcp_over_http_keeps_the_rules_of_serve(tmp_path: Path) -> None:
    """The CLI: keys decide, as for `lossless serve`."""
    db = tmp_path / "rules.db"
    lossless.open(db, embedder=None).close()
    env = _env(tmp_path)

    def mcp(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "lossless", "mcp", "--db", str(db), *args], env=env,
                              capture_output=True, text=True, timeout=60)

    wide = mcp("--transport", "http", "--host", "0.0.0.0", "--port", str(free_port()))
    assert wide.returncode == 1 and "without API keys" in wide.stderr and "Traceback" not in wide.stderr
    with lossless.open(db, embedder=None) as mem:
        row, key = APIKeys(mem.store).create("acme")
    both = mcp("--transport", "http", "--keyless", "--port", str(free_port()))
    assert both.returncode == 1 and "API keys are active" in both.stderr and "Traceback" not in both.stderr
    stdio = mcp("--keyless")
    assert stdio.returncode != 0 and "--keyless" in stdio.stderr and "Traceback" not in stdio.stderr
    with lossless.open(db, embedder=None) as mem:
        APIKeys(mem.store).revoke(row.id)
    with _mcp(db, tmp_path) as url:  # every key revoked: the server stays locked
        assert httpx.post(url, json=INIT, headers=ACCEPT, timeout=30).status_code == 401
        assert httpx.post(url, json=INIT, headers={**ACCEPT, "authorization": f"Bearer {key}"},
                          timeout=30).status_code == 401
    with _mcp(db, tmp_path, "--keyless") as url:  # ... until told to serve it without keys
        assert _ping(url, _open(url)) == 200
