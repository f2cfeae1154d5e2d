"""`lossless mcp --transport http` sends the browser headers `lossless serve` sends
(lossless/server/headers.py), over real HTTP to a real process on 127.0.0.1: on every
answer (a session's JSON-RPC answers and event stream, a notification's 202, the key
check's 401, an unknown session's 404, a path it does not serve), while the protocol's own
headers stay: the content types, the SSE stream's Cache-Control and Mcp-Session-Id."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

import lossless
from lossless.server.headers import API_POLICY
from lossless.server.keys import APIKeys
from lossless.server.tenancy import Tenant
from tests.test_server_mcp_keys import ACCEPT, INIT, _mcp

VERSION = "2025-06-18"


def _assert_browser_headers(answer: httpx.Response) -> None:
    where = f"{answer.request.method} {answer.request.url.path} ({answer.status_code})"
    assert answer.headers.get("x-content-type-options") == "nosniff", where
    assert answer.headers.get("x-frame-options") == "DENY", where
    assert answer.headers.get("referrer-policy") == "no-referrer", where
    # the MCP server serves no page: every answer gets the API's policy
    assert answer.headers.get("content-security-policy") == API_POLICY, where
    assert answer.headers.get("cache-control"), where


def _result(answer: httpx.Response) -> Any:
    """The JSON-RPC result of an answer sent as JSON or as an event stream."""
    kind = answer.headers["content-type"]
    if kind.startswith("text/event-stream"):
        assert answer.headers["cache-control"] == "no-cache, no-transform"  # the SDK's own, kept
        data = [line[len("data:"):].strip() for line in answer.text.splitlines() if line.startswith("data:")]
        return json.loads(data[-1])["result"]
    assert kind.startswith("application/json") and answer.headers["cache-control"] == "no-store"
    return answer.json()["result"]


def test_mcp_over_http_sends_the_browser_headers_of_serve(tmp_path: Path) -> None:
    db = tmp_path / "headers.db"
    with lossless.open(db, embedder=None) as mem:
        alpha = Tenant("alpha")
        mem.conversation(alpha.stored_id("对话"), alpha.metadata_in(None)).add_many([
            {"role": "user", "content": "今天和小美去公园散步。"},
            {"role": "assistant", "content": "The roses in the park are out."}])
        _, key = APIKeys(mem.store).create("alpha")
    auth = {"authorization": f"Bearer {key}"}
    with _mcp(db, tmp_path) as url, httpx.Client(timeout=60) as http:
        answers: list[httpx.Response] = []
        opened = http.post(url, json=INIT, headers={**ACCEPT, **auth})
        answers.append(opened)
        assert opened.status_code == 200, opened.text
        sid = opened.headers["mcp-session-id"]  # the protocol's session header stays
        assert _result(opened)["protocolVersion"] == VERSION
        session = {**ACCEPT, **auth, "mcp-session-id": sid, "mcp-protocol-version": VERSION}
        note = http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
        answers.append(note)
        assert note.status_code == 202, note.text

        for n, (query, said) in enumerate((("公园", "公园散步"), ("roses", "roses in the park")), start=2):
            called = http.post(url, headers=session, json={
                "jsonrpc": "2.0", "id": n, "method": "tools/call",
                "params": {"name": "lcm_grep", "arguments": {"query": query}}})
            answers.append(called)
            assert called.status_code == 200, called.text
            result = _result(called)
            assert not result.get("isError"), result
            assert said in result["content"][0]["text"]

        with http.stream("GET", url, headers={**session, "accept": "text/event-stream"}) as stream:
            answers.append(stream)  # the session's event stream: headers checked, body left open
            assert stream.status_code == 200
            assert stream.headers["content-type"].startswith("text/event-stream")
            assert stream.headers["cache-control"] == "no-cache, no-transform"

        refused = http.post(url, json=INIT, headers=ACCEPT)  # no key: the key check's 401
        unknown = http.post(url, json={"jsonrpc": "2.0", "id": 9, "method": "ping"},
                            headers={**session, "mcp-session-id": "no-such-session"})
        elsewhere = http.get(url.removesuffix("/mcp") + "/", headers=auth)
        closed = http.delete(url, headers=session)
        assert [r.status_code for r in (refused, unknown, elsewhere, closed)] == [401, 404, 404, 200]
        answers += [refused, unknown, elsewhere, closed]
        for answer in answers:
            _assert_browser_headers(answer)
