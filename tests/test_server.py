"""The HTTP API against a real server on 127.0.0.1: every endpoint once (requests and answers
checked against /openapi.json), errors and their statuses, body limits, API keys and
tenant isolation, and the `lossless keys` / `lossless serve` commands. The server's store is
SQLite or PostgreSQL (``backend``): every test on a ``memory`` runs on both."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import lossless
from lossless.agent.tools import TOOL_NAMES, openai_tools
from lossless.cli.main import main
from lossless.server.app import create_app
from lossless.server.auth import Authenticator, check_bind, is_loopback
from lossless.server.errors import HTTPError
from lossless.server.keys import APIKeys
from lossless.server.openapi import openapi_document
from lossless.server.run import free_port
from tests.conftest import StoreTarget, chat
from tests.server_support import OpenAPIChecker, json_ready, served

PROXY_OPS = {"chatCompletions", "anthropicMessages"}  # exercised in test_server_proxy.py


@pytest.fixture
def memory(backend_target: str) -> Iterator[lossless.Memory]:
    m = lossless.open(backend_target, context_window=4096, tool_wait_seconds=0.2)
    yield m
    m.close()


@pytest.fixture
def api(memory: lossless.Memory) -> Iterator[httpx.Client]:
    with served(memory) as server, httpx.Client(base_url=server.url, timeout=30) as client:
        yield client


def _error(response: httpx.Response, status: int, type_: str) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and body["error"]["type"] == type_, body
    message: str = body["error"]["message"]
    return message


# -- every endpoint ------------------------------------------------------------------------

def test_every_endpoint_matches_the_openapi_document(api: httpx.Client, memory: lossless.Memory) -> None:
    spec = OpenAPIChecker(api.get("/openapi.json").json())
    ok = spec.check

    def post(path: str, body: Any) -> httpx.Response:
        return ok(api.post(path, json=body), body)

    c = "/v1/lossless/conversations"
    assert post(c, {"id": "conv-1", "metadata": {"user": "ann"}}).status_code == 201
    assert post(c, {"id": "conv-1"}).status_code == 200  # get-or-create: it exists now
    one = {"role": "user", "content": "The deploy key rotates every 90 days.", "name": "Ann",
           "created_at": "2024-03-01T09:00:00+00:00"}
    added = post(f"{c}/conv-1/messages", one)
    assert added.status_code == 201 and added.json()["messages"][0]["seq"] == 1
    batch = {"messages": json_ready(chat(160, tools_every=5)[1:])}
    added = post(f"{c}/conv-1/messages", batch)
    assert added.status_code == 201 and added.json()["count"] == 159
    assert memory.wait_idle(60)  # the server's worker compacted them

    listed = ok(api.get(c, params={"limit": 1})).json()
    assert [x["id"] for x in listed["data"]] == ["conv-1"] and listed["next_offset"] is None
    info = ok(api.get(f"{c}/conv-1")).json()
    assert info["messages"] == 160 and info["summaries"] > 0 and info["metadata"] == {"user": "ann"}

    page = ok(api.get(f"{c}/conv-1/messages", params={"after": 0, "limit": 50})).json()
    assert [m["seq"] for m in page["data"]] == list(range(1, 51)) and page["next_after"] == 50
    last = ok(api.get(f"{c}/conv-1/messages", params={"after": 150, "limit": 50})).json()
    assert [m["seq"] for m in last["data"]] == list(range(151, 161)) and last["next_after"] is None
    assert page["data"][0]["content"] == one["content"] and page["data"][0]["name"] == "Ann"
    assert any("tool_calls" in m for m in page["data"])

    ctx = post(f"{c}/conv-1/assemble", {"budget_tokens": 1200, "query": "deploy key rotates"}).json()
    assert ctx["tokens"] <= 1200 and sum(ctx["tiers"].values()) > 0
    assert any("90 days" in str(m["content"]) for m in ctx["messages"])  # recalled from evicted history

    hits = post(f"{c}/conv-1/search", {"query": "deploy key", "mode": "fts", "limit": 5}).json()
    assert hits["count"] >= 1 and hits["hits"][0]["conversation_id"] == "conv-1"
    everywhere = post("/v1/lossless/search", {"query": "rotates", "conversations": ["conv-1"]}).json()
    assert everywhere["count"] >= 1

    dag = ok(api.get(f"{c}/conv-1/dag")).json()
    leaf = next(s for s in dag["summaries"] if s["depth"] == 0)
    assert dag["frontier"] and dag["tail"]["last_seq"] == 160
    # the whole-conversation root: beside the frontier, over all of it, no one's parent
    root = next(s for s in dag["summaries"] if s["id"] == dag["root"])
    assert root["type"] == "root" and root["first_seq"] == 1 and root["children"] == dag["frontier"]
    assert all(s["parent"] != root["id"] for s in dag["summaries"])
    grep = post(f"{c}/conv-1/tools/lcm_grep", {"query": "service-7", "scope": "messages"}).json()
    assert grep["count"] >= 1
    described = post(f"{c}/conv-1/tools/lcm_describe", {"id": leaf["id"]}).json()
    assert described["id"] == leaf["id"] and described["depth"] == 0
    expanded = post(f"{c}/conv-1/tools/lcm_expand", {"id": leaf["id"], "max_tokens": 100000}).json()
    assert [i["seq"] for i in expanded["items"]] == list(range(leaf["first_seq"], leaf["last_seq"] + 1))
    assert expanded["items"][0]["content"] == memory.get_conversation("conv-1").messages(  # type: ignore[union-attr]
        leaf["first_seq"], leaf["first_seq"])[0].content
    node = ok(api.get(f"{c}/conv-1/nodes/{leaf['id']}")).json()
    assert node["children"] and node["content"]

    report = post(f"{c}/conv-1/compact", {"full": True}).json()
    assert report["reason"] == "api" and report["conversation_id"] == "conv-1"
    stats = ok(api.get(f"{c}/conv-1/stats")).json()
    assert stats["messages"] == 160 and stats["max_depth"] >= 1
    assert ok(api.get(f"{c}/conv-1/verify")).json() == {"ok": True, "problems": []}
    assert ok(api.get("/v1/lossless/verify")).json()["ok"] is True
    totals = ok(api.get("/v1/lossless/stats")).json()
    assert totals["conversations"] == 1 and totals["messages"] == 160 and totals["tenant"] is None
    assert ok(api.get("/v1/lossless/whoami")).json() == {"tenant": None, "key_id": None, "implicit": True}
    health = ok(api.get("/v1/lossless/health")).json()
    assert health["compaction"] == "background" and health["backlog"]["conversations"] == 0
    assert health["worker"]["summaries_written"] > 0 and health["breaker"] is None

    m = "/v1/lossless/memories"
    record = post(m, {"content": "Ann prefers metric units", "kind": "preference", "user": "ann"}).json()
    assert record["user"] == "ann" and record["scope"] == "user"
    post(m, {"content": "The team ships on Thursdays"})
    found = post(f"{m}/search", {"query": "metric units", "user": "ann", "kind": "preference"}).json()
    assert [r["id"] for r in found["data"]] == [record["id"]] and found["data"][0]["score"] > 0
    ann = ok(api.get(m, params={"user": "ann", "kind": "preference"})).json()["data"]
    assert record["id"] in [r["id"] for r in ann]
    everything = ok(api.get(m, params={"order": "importance", "limit": 1000})).json()["data"]
    assert len(everything) >= 2  # with the records distilled from conv-1 (its user is ann) before compaction
    assert ok(api.get(f"{m}/{record['id']}")).json()["content"] == "Ann prefers metric units"
    dry = post(f"{m}/forget", {"user": "ann", "kind": "preference", "dry_run": True}).json()
    assert record["id"] in [r["id"] for r in dry["data"]] and dry["dry_run"] is True
    gone = ok(api.delete(f"{m}/{record['id']}")).json()
    assert gone["count"] == 1
    assert post(f"{m}/forget", {"all": True}).json()["count"] == len(everything) - 1
    assert ok(api.get(m)).json()["data"] == []

    assert api.get("/healthz").json() == {"ok": True}
    assert "text/html" in api.get("/").headers["content-type"]
    assert api.get("/web/app.js").status_code == 200
    documented = {op["operationId"] for ops in spec.doc["paths"].values() for op in ops.values()
                  if isinstance(op, dict) and "operationId" in op}
    missing = documented - spec.seen - PROXY_OPS - {"openapi", "health"}
    assert not missing, f"endpoints not exercised: {sorted(missing)}"


def test_openapi_lists_every_route_and_resolves() -> None:
    app = create_app(lossless.open(":memory:"))
    doc = openapi_document()
    for route in app.routes:
        path = re.sub(r"\{(\w+):\w+\}", r"{\1}", getattr(route, "path", ""))  # {id:path}: a converter, not in OpenAPI
        if path in ("/", "/web"):
            continue
        for method in sorted(getattr(route, "methods", None) or ()):
            if method == "HEAD":
                continue
            for concrete in [path.replace("{tool}", t) for t in TOOL_NAMES] if "{tool}" in path else [path]:
                assert method.lower() in doc["paths"].get(concrete, {}), f"{method} {concrete} is not documented"
    text = json.dumps(doc)
    for ref in set(re.findall(r'"#/components/schemas/([A-Za-z]+)"', text)):
        assert ref in doc["components"]["schemas"], ref
    # tool schemas are lossless.agent.tools' own
    assert doc["components"]["schemas"]["LcmGrep"] == openai_tools()[0]["function"]["parameters"]
    app.state.lossless.memory.close()


# -- errors --------------------------------------------------------------------------------

def test_malformed_requests_are_400_and_store_nothing(api: httpx.Client, memory: lossless.Memory) -> None:
    url = "/v1/lossless/conversations/c/messages"
    as_json = {"content-type": "application/json"}  # (without it the guard answers 415 first)
    assert "not valid JSON" in _error(api.post(url, content=b'{"role": "user", "content": ', headers=as_json), 400,
                                      "invalid_request")
    assert "UTF-8" in _error(api.post(url, content=b"\xff\xfe{}", headers=as_json), 400, "invalid_request")
    _error(api.post(url, json=[1, 2]), 400, "invalid_request")
    assert "messages" in _error(api.post(url, json={"messages": "hi"}), 400, "invalid_request")
    assert "unknown field" in _error(api.post(url, json={"messages": [], "extra": 1}), 400, "invalid_request")
    _error(api.post("/v1/lossless/conversations/c/assemble", json={"budget_tokens": "many"}), 400, "invalid_request")
    _error(api.get("/v1/lossless/conversations", params={"limit": "ten"}), 400, "invalid_request")
    _error(api.get("/v1/lossless/conversations", params={"limit": 0}), 400, "invalid_request")
    _error(api.get("/v1/lossless/conversations", params={"bogus": 1}), 400, "invalid_request")
    # well-formed, but lossless refuses the message: 422, and no empty conversation is left behind
    bad = {"messages": [{"role": "user", "content": "fine"}, {"role": "wizard", "content": "no"}]}
    assert "message 1" in _error(api.post(url, json=bad), 422, "validation_error")
    _error(api.post(url, json={"role": "tool", "content": "result without its call id"}), 422, "validation_error")
    # a role forgotten: the error names the role, not "unknown field: content"
    assert "needs a 'role'" in _error(api.post(url, json={"content": "你好"}), 422, "validation_error")
    assert memory.get_conversation("c") is None
    assert api.get("/v1/lossless/conversations").json()["data"] == []
    _error(api.get("/v1/nothing-here"), 404, "not_found")
    _error(api.put("/v1/lossless/conversations"), 405, "method_not_allowed")


def test_oversized_bodies_are_413_and_store_nothing(memory: lossless.Memory) -> None:
    with served(memory, max_body_bytes=64 * 1024) as server, httpx.Client(base_url=server.url) as api:
        url = "/v1/lossless/conversations/big/messages"
        huge = {"role": "user", "content": "x" * 100_000}
        assert "65,536" in _error(api.post(url, json=huge), 413, "payload_too_large")

        def chunks() -> Iterator[bytes]:  # no Content-Length: cut off while reading
            yield b'{"role": "user", "content": "'
            for _ in range(50):
                yield b"y" * 4096
            yield b'"}'

        _error(api.post(url, content=chunks(), headers={"content-type": "application/json"}), 413,
               "payload_too_large")
        way_too_big = b"z" * (64 * 1024 * 5)  # beyond what is drained: refused from its Content-Length
        response = api.post(url, content=way_too_big, headers={"content-type": "application/json"})
        _error(response, 413, "payload_too_large")
        assert memory.get_conversation("big") is None
        ok = api.post(url, json={"role": "user", "content": "small enough"})
        assert ok.status_code == 201


def test_not_found_and_scoping(api: httpx.Client, memory: lossless.Memory) -> None:
    c = "/v1/lossless/conversations"
    for cid in ("a", "b"):
        api.post(f"{c}/{cid}/messages", json={"messages": json_ready(chat(80))})
    assert memory.wait_idle(60)
    leaf_a = memory.get_conversation("a").frontier()[0].id  # type: ignore[union-attr]
    assert "no conversation 'zzz'" in _error(api.get(f"{c}/zzz"), 404, "not_found")
    _error(api.get(f"{c}/zzz/messages"), 404, "not_found")
    _error(api.post(f"{c}/zzz/assemble", json={}), 404, "not_found")
    _error(api.get(f"{c}/b/nodes/{leaf_a}"), 404, "not_found")  # a's node, asked through b
    _error(api.post(f"{c}/b/tools/lcm_expand", json={"id": leaf_a}), 404, "not_found")
    _error(api.post(f"{c}/a/tools/lcm_nothing", json={}), 404, "not_found")
    _error(api.post(f"{c}/a/tools/lcm_grep", json={"query": "x", "bogus": 1}), 422, "validation_error")
    # the tool's published enum (/openapi.json's LcmGrep) is what it takes: raw FTS5 syntax is the search's
    assert "fts, regex, semantic, hybrid; got 'raw'" in _error(
        api.post(f"{c}/a/tools/lcm_grep", json={"query": "x", "mode": "raw"}), 422, "validation_error")
    assert api.post(f"{c}/a/search", json={"query": "service", "mode": "raw"}).status_code == 200
    _error(api.get("/v1/lossless/memories/mem_nothing"), 404, "not_found")
    _error(api.post("/v1/lossless/search", json={"query": "x", "conversations": ["zzz"]}), 404, "not_found")
    _error(api.post(f"{c}/a/assemble", json={"budget_tokens": 0}), 400, "invalid_request")
    _error(api.post(f"{c}/a/search", json={"query": "(", "mode": "raw"}), 422, "validation_error")


def test_compaction_busy_is_409(api: httpx.Client, memory: lossless.Memory) -> None:
    api.post("/v1/lossless/conversations/busy/messages", json={"messages": json_ready(chat(60))})
    assert memory.wait_idle(60)
    owner = "another-host:4242:1:holder"  # a holder on another machine: alive until its lease goes stale
    assert memory.store.acquire_lease("busy", owner, "test", 60.0)  # type: ignore[attr-defined]
    try:
        message = _error(api.post("/v1/lossless/conversations/busy/compact", json={}), 409, "compaction_busy")
        assert "another compaction" in message
    finally:
        memory.store.release_lease("busy", owner)  # type: ignore[attr-defined]
    assert api.post("/v1/lossless/conversations/busy/compact", json={}).status_code == 200


# -- keys and tenants ------------------------------------------------------------------------

def test_keys_are_stored_hashed(memory: lossless.Memory) -> None:
    keys = APIKeys(memory.store)
    row, key = keys.create("acme", "ci")
    assert key.startswith("lsk_") and row.prefix == key[:12] and row.tenant == "acme"
    dump = "\n".join(str(r) for r in memory.store._query("SELECT * FROM api_keys"))  # type: ignore[attr-defined]
    secret = key[len("lsk_") + 13:]  # the secret may itself contain "_"
    assert len(secret) == 43 and key not in dump and secret not in dump
    assert keys.verify(key) is not None and keys.verify(key + "x") is None and keys.verify("lsk_nope") is None
    assert keys.get(row.id).last_used_at is not None
    other_row, other = keys.create("acme")
    assert other != key and keys.verify(other).id == other_row.id  # type: ignore[union-attr]
    keys.revoke(row.id)
    assert keys.verify(key) is None and keys.ls(include_revoked=False) == [keys.get(other_row.id)]
    with pytest.raises(lossless.ValidationError):
        keys.create("no/slashes")
    applied = {r[0] for r in memory.store._query("SELECT name FROM schema_migrations")}
    assert "api_keys" in applied


def test_tenants_are_isolated(memory: lossless.Memory) -> None:
    keys = APIKeys(memory.store)
    a_row, a_key = keys.create("acme")
    _, b_key = keys.create("bravo")
    memory.conversation("operator-only").add("user", "made outside the server")
    with served(memory, allow_implicit_tenant=False) as server, httpx.Client(base_url=server.url) as anon, \
            httpx.Client(base_url=server.url, headers={"authorization": f"Bearer {a_key}"}) as a, \
            httpx.Client(base_url=server.url, headers={"x-api-key": b_key}) as b:  # b: the Anthropic SDK's header
        c = "/v1/lossless/conversations"
        _error(anon.get(c), 401, "unauthorized")
        _error(anon.get(c, headers={"authorization": "Bearer lsk_000000000000_" + "a" * 43}), 401, "unauthorized")
        assert a.get("/v1/lossless/whoami").json() == {"tenant": "acme", "key_id": a_row.id, "implicit": False}

        a.post(c, json={"id": "shared", "metadata": {"user": "ann"}})
        a.post(f"{c}/shared/messages", json={"messages": json_ready(chat(60))})
        assert memory.wait_idle(60)
        a.post(f"{c}/a-only/messages", json={"role": "user", "content": "acme's secret plan: launch on May 5"})
        assert b.post(f"{c}/shared/messages", json={"role": "user", "content": "bravo's own"}).status_code == 201

        _error(b.get(f"{c}/a-only"), 404, "not_found")
        _error(b.post(f"{c}/a-only/assemble", json={}), 404, "not_found")
        assert sorted(x["id"] for x in a.get(c).json()["data"]) == ["a-only", "shared"]
        assert [x["id"] for x in b.get(c).json()["data"]] == ["shared"]
        assert a.get(f"{c}/shared").json()["messages"] == 60 and b.get(f"{c}/shared").json()["messages"] == 1
        assert a.get(f"{c}/shared").json()["metadata"] == {"user": "ann"}
        assert b.post("/v1/lossless/search", json={"query": "secret plan"}).json()["count"] == 0
        assert a.post("/v1/lossless/search", json={"query": "secret plan"}).json()["count"] == 1
        leaf = a.get(f"{c}/shared/dag").json()["summaries"][-1]["id"]
        _error(b.get(f"{c}/shared/nodes/{leaf}"), 404, "not_found")
        assert b.get("/v1/lossless/stats").json()["conversations"] == 1
        assert a.get("/v1/lossless/stats").json()["messages"] == 61

        mine = a.post("/v1/lossless/memories", json={"content": "Ann likes green tea", "user": "ann"}).json()
        wide = a.post("/v1/lossless/memories", json={"content": "acme deploys on Fridays"}).json()
        assert mine["user"] == "ann" and wide["scope"] == "tenant" and wide["agent"] is None
        b.post("/v1/lossless/memories", json={"content": "Ann likes black coffee", "user": "ann"})
        memory.memories.add("operator note about tea", user=None, agent=None)  # global, outside the server
        found = a.post("/v1/lossless/memories/search", json={"query": "tea", "user": "ann"}).json()["data"]
        assert [r["id"] for r in found] == [mine["id"]]
        assert b.post("/v1/lossless/memories/search", json={"query": "tea", "user": "ann"}).json()["data"] == []
        fridays = a.post("/v1/lossless/memories/search", json={"query": "deploys Fridays", "agent": "bot"}).json()
        assert [r["id"] for r in fridays["data"]] == [wide["id"]]  # tenant-wide records reach every agent
        assert {r["content"] for r in b.get("/v1/lossless/memories").json()["data"]} == {"Ann likes black coffee"}
        _error(b.get(f"/v1/lossless/memories/{mine['id']}"), 404, "not_found")
        _error(b.delete(f"/v1/lossless/memories/{mine['id']}"), 404, "not_found")
        assert b.post("/v1/lossless/memories/forget", json={"all": True}).json()["count"] == 1
        kept = a.get("/v1/lossless/memories").json()["data"]
        assert {mine["id"], wide["id"]} <= {r["id"] for r in kept}
        # the rest were distilled from acme's "shared" (its user is ann) before it was compacted
        assert all(r["conversation_id"] in (None, "shared") and r["user"] in (None, "ann") for r in kept)

        keys.revoke(a_row.id)  # from another "process": the next request is refused
        assert "revoked" in _error(a.get(c), 401, "unauthorized")
        assert b.get(c).status_code == 200
    stored = {c.id for c in memory.conversations()}
    assert stored == {"@acme/shared", "@acme/a-only", "@bravo/shared", "operator-only"}


def test_a_tenants_bad_owner_is_named_as_the_tenant_wrote_it(memory: lossless.Memory) -> None:
    """An owner refused for a keyed tenant was named with its namespace ('@acme/…', the
    position shifted by it): the error names what the tenant sent, and nothing is stored."""
    _, key = APIKeys(memory.store).create("acme")
    with served(memory, allow_implicit_tenant=False) as server, \
            httpx.Client(base_url=server.url, headers={"authorization": f"Bearer {key}"}) as a:
        for body, field, name in (({"content": "小美喜欢绿茶", "user": "小\n美"}, "user", "小\n美"),
                                  ({"content": "x", "agent": "b\x1b[31mot"}, "agent", "b\x1b[31mot")):
            message = _error(a.post("/v1/lossless/memories", json=body), 422, "validation_error")
            assert f"{field} {name!r}" in message and "at position 1;" in message and "@acme" not in message
        owner = "小\r美"
        sent = {"id": "对话", "metadata": {"user": owner}}
        message = _error(a.post("/v1/lossless/conversations", json=sent), 422, "validation_error")
        assert f'metadata["user"] {owner!r}' in message and "at position 1;" in message and "@acme" not in message
        assert a.get("/v1/lossless/memories").json()["data"] == []
        assert a.get("/v1/lossless/conversations").json()["data"] == []


def test_keyless_serving_is_loopback_only(memory: lossless.Memory) -> None:
    keys = APIKeys(memory.store)
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.5") and not is_loopback(None)
    assert "loopback only" in (check_bind("127.0.0.1", keys) or "")
    with pytest.raises(HTTPError, match=r"refusing to serve on 0\.0\.0\.0 without API keys"):
        check_bind("0.0.0.0", keys)
    auth = Authenticator(keys)
    assert auth.tenant(None, None, "127.0.0.1").implicit
    with pytest.raises(HTTPError) as err:
        auth.tenant(None, None, "10.0.0.7")
    assert err.value.status == 403
    keys.create("acme")
    assert check_bind("0.0.0.0", keys) is None
    with pytest.raises(HTTPError) as err:
        auth.tenant(None, None, "127.0.0.1")  # keys exist now: every request needs one
    assert err.value.status == 401


def test_keys_and_serve_commands(store_target: StoreTarget, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(store_target("cli"))
    if not store_target.on_postgres:  # a PostgreSQL test database exists already
        assert main(["--db", db, "keys", "ls"]) == 1  # no database yet: nothing to list
        capsys.readouterr()
    assert main(["--db", db, "--json", "keys", "create", "--tenant", "acme", "--name", "laptop"]) == 0
    created = json.loads(capsys.readouterr().out)
    assert created["key"].startswith("lsk_") and created["tenant"] == "acme" and created["name"] == "laptop"
    assert main(["--db", db, "--json", "keys", "ls"]) == 0
    listed = capsys.readouterr().out
    assert created["key"] not in listed and json.loads(listed)[0]["prefix"] == created["key"][:12]
    assert main(["--db", db, "keys", "revoke", created["id"]]) == 0
    assert "revoked" in capsys.readouterr().out
    assert main(["--db", db, "keys", "revoke", "key_nothing"]) == 1
    assert "no API key" in capsys.readouterr().err
    assert main(["--db", db, "keys", "create", "--tenant", "bad tenant"]) == 1
    capsys.readouterr()

    fresh = str(store_target("keyless"))  # refused before anything is bound
    assert main(["--db", fresh, "serve", "--host", "0.0.0.0", "--port", "1"]) == 1
    assert "without API keys" in capsys.readouterr().err


def _serve(db: str) -> tuple[subprocess.Popen[str], str]:
    """``lossless --db DB serve`` on a free loopback port, once it answers /healthz."""
    port = free_port()
    env = {**os.environ, "LOSSLESS_EMBEDDER": "none"}
    proc = subprocess.Popen([sys.executable, "-m", "lossless", "--db", db, "serve", "--port", str(port),
                             "--log-level", "warning"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        if proc.poll() is not None:
            raise AssertionError(proc.communicate()[1])
        try:
            if httpx.get(f"{url}/healthz").status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError("lossless serve did not come up")
        time.sleep(0.1)


def test_lossless_serve_runs_uvicorn(store_target: StoreTarget, tmp_path: Path) -> None:
    """The real command: a keyless server on loopback warns, serves, and stops on SIGTERM."""
    proc, url = _serve(str(store_target("s")))
    try:
        assert httpx.get(f"{url}/v1/lossless/whoami").json()["implicit"] is True
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=15)
    assert "no API keys" in err and "loopback only" in err


@pytest.mark.postgres
def test_keys_and_serve_on_postgresql(pg_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    """`lossless keys` and `lossless serve --db postgresql://…`: keys the CLI makes in
    PostgreSQL guard a real server process, and each tenant's conversations land there
    under its namespace."""
    assert main(["--db", pg_url, "--json", "keys", "create", "--tenant", "acme", "--name", "ci"]) == 0
    acme = json.loads(capsys.readouterr().out)
    assert main(["--db", pg_url, "--json", "keys", "create", "--tenant", "bravo"]) == 0
    bravo = json.loads(capsys.readouterr().out)
    assert main(["--db", pg_url, "keys", "revoke", bravo["id"]]) == 0
    assert main(["--db", pg_url, "keys", "revoke", "key_nothing"]) == 1
    assert "no API key" in capsys.readouterr().err
    assert main(["--db", pg_url, "--json", "keys", "ls"]) == 0
    listed = {k["id"]: (k["tenant"], k["name"], k["active"]) for k in json.loads(capsys.readouterr().out)}
    assert listed == {acme["id"]: ("acme", "ci", True), bravo["id"]: ("bravo", None, False)}
    proc, url = _serve(pg_url)
    try:
        c = f"{url}/v1/lossless/conversations"
        assert httpx.get(c).status_code == 401  # keys exist: every request needs one
        assert httpx.get(c, headers={"authorization": f"Bearer {bravo['key']}"}).status_code == 401  # revoked
        good = {"authorization": f"Bearer {acme['key']}"}
        assert httpx.get(f"{url}/v1/lossless/whoami", headers=good).json()["tenant"] == "acme"
        added = httpx.post(f"{c}/support-1/messages", headers=good, json={"role": "user", "content": "hello"})
        assert added.status_code == 201
        assert [x["id"] for x in httpx.get(c, headers=good).json()["data"]] == ["support-1"]
        assert httpx.get(f"{url}/v1/lossless/stats", headers=good).json()["messages"] == 1
    finally:
        proc.terminate()
        proc.communicate(timeout=15)
    with lossless.open(pg_url) as mem:
        assert [c.id for c in mem.conversations()] == ["@acme/support-1"]
        assert APIKeys(mem.store).get(acme["id"]).last_used_at is not None
