"""What an attacker found against `lossless serve` with keys (issue 30), each over real HTTP on
127.0.0.1: the operator's indexed files stay out of every tenant's reach, the health page
shows a tenant only its own work, and a read is answered while another process holds the
write lock. Also: new store files are readable by their owner only."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

import lossless
from lossless.core.tenants import tenant_of
from lossless.server.keys import TENANT_PATTERN, APIKeys
from lossless.server.state import Upstream
from lossless.server.tenancy import Tenant
from tests.conftest import StoreTarget, chat
from tests.fake_openai import FakeOpenAIServer, fake_openai
from tests.server_support import OpenAPIChecker, json_ready, served

__all__ = ["fake_openai"]  # the fixture, imported for pytest to find

C = "/v1/lossless/conversations"
SECRET = "hunter2-swordfish"
TOKEN = "tok-7f3a9c"


def _ops(root: Path) -> Path:
    """The operator's workspace: a file of secrets and a harmless note."""
    ops = root / "ops"
    ops.mkdir()
    (ops / "ops_secrets.env").write_text(f"DB_PASSWORD={SECRET}\nAPI_TOKEN={TOKEN}\n# password and token of prod\n")
    (ops / "runbook.md").write_text("# Runbook\n\nRestart the api with `make restart`; the password is in the vault.\n")
    return ops


@pytest.fixture
def memory(store_target: StoreTarget, tmp_path: Path) -> Iterator[lossless.Memory]:
    m = lossless.open(store_target("atk"), context_window=4096, embedder=None)
    yield m
    m.close()


def _text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


# -- 1. files the operator indexed never reach a tenant ----------------------------------------


def test_operator_files_stay_out_of_a_tenants_reach(memory: lossless.Memory, tmp_path: Path,
                                                    fake_openai: FakeOpenAIServer) -> None:
    report = memory.files.index([_ops(tmp_path)])
    assert report.files_indexed == 2
    # the operator's own conversation does get them: the index works and would show them
    mine = memory.conversation("ops-chat")
    mine.add_many(chat(4))
    for query in ("what is in ops_secrets.env?", "/context password token"):
        ctx = mine.assemble(budget_tokens=3000, query=query)
        assert SECRET in _text(ctx.messages) and "file" in ctx.tier_tokens(), query

    _, key = APIKeys(memory.store).create("bravo")
    auth = {"authorization": f"Bearer {key}"}
    with served(memory, upstream=Upstream(fake_openai.base_url, "sk-upstream")) as srv:
        url = srv.url
        assert httpx.post(f"{url}{C}/c/messages", json={"messages": json_ready(chat(6))},
                          headers=auth).status_code == 201
        for query in ("what is in ops_secrets.env?", "/context password token", "open runbook.md",
                      "the doc you shared earlier about the password"):
            ctx = httpx.post(f"{url}{C}/c/assemble", json={"query": query, "budget_tokens": 3000}, headers=auth)
            assert ctx.status_code == 200, ctx.text
            body = ctx.json()
            assert SECRET not in ctx.text and TOKEN not in ctx.text and "make restart" not in ctx.text, query
            assert "file" not in body["tiers"] and all(i["tier"] != "file" for i in body["items"]), query
            # the whole-window (cache-stable) layout takes the same path
            whole = httpx.post(f"{url}{C}/c/assemble", json={"query": query}, headers=auth)
            assert whole.status_code == 200 and SECRET not in whole.text, query
        for path, payload in ((f"{C}/c/search", {"query": SECRET}), ("/v1/lossless/search", {"query": "password"}),
                              (f"{C}/c/tools/lcm_grep", {"query": "API_TOKEN"})):
            found = httpx.post(f"{url}{path}", json=payload, headers=auth)
            assert found.status_code == 200 and found.json()["count"] == 0, (path, found.text)
        for ident in ("ops_secrets.env:1", "ops_secrets.env"):
            assert httpx.get(f"{url}{C}/c/nodes/{ident}", headers=auth).status_code == 404
            described = httpx.post(f"{url}{C}/c/tools/lcm_describe", json={"id": ident}, headers=auth)
            assert described.status_code == 404 and SECRET not in described.text
        # the proxy assembles the same way: nothing of the file goes upstream
        fake_openai.enqueue_chat("I cannot see that file.")
        proxied = httpx.post(f"{url}/v1/chat/completions", headers={**auth, "x-lossless-conversation": "p"},
                             json={"model": "gpt-4o-mini",
                                   "messages": [{"role": "user", "content": "what is in ops_secrets.env?\n"
                                                                            "/context password token"}]})
        assert proxied.status_code == 200, proxied.text
        sent = _text(fake_openai.chat_requests()[-1].body)
        assert SECRET not in sent and TOKEN not in sent and "Workspace files" not in sent


@given(name=st.from_regex(TENANT_PATTERN, fullmatch=True),
       cid=st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=40))
def test_a_tenants_stored_ids_are_known_as_its_own(name: str, cid: str) -> None:
    """The invariant the file tier relies on: every id the server stores for a tenant is
    recognised as that tenant's by the layers below it, and no operator id is (the CLI
    refuses nothing here: an id the operator makes that starts "@name/" counts as a tenant's)."""
    if not cid.strip():
        return
    assert tenant_of(Tenant(name).stored_id(cid)) == name
    assert tenant_of(Tenant(None).stored_id(cid)) == (name_of(cid))


def name_of(cid: str) -> str | None:
    head, slash, _ = cid.partition("/")
    return head[1:] if slash and head.startswith("@") and TENANT_PATTERN.match(head[1:]) else None


# -- 3. the health page shows a tenant its own work only -----------------------------------------


def test_health_shows_a_tenant_only_its_own(memory: lossless.Memory) -> None:
    keys = APIKeys(memory.store)
    _, alpha = keys.create("alpha")
    _, bravo = keys.create("bravo")
    checker = OpenAPIChecker()
    with served(memory) as srv:
        a = {"authorization": f"Bearer {alpha}"}
        b = {"authorization": f"Bearer {bravo}"}
        assert httpx.post(f"{srv.url}{C}/alpha-secret-plan/messages", json={"messages": json_ready(chat(40))},
                          headers=a).status_code == 201
        assert memory.wait_idle(60)
        health = checker.check(httpx.get(f"{srv.url}/v1/lossless/health", headers=b))
        assert health.status_code == 200, health.text
        body = health.json()
        assert body["worker"] == {"state": body["worker"]["state"]}  # no counters, no conversation in hand
        assert "workers" not in body and body["backlog"]["conversations"] == 0
        assert body["breaker"] is None or set(body["breaker"]) == {"state"}
        assert "alpha" not in health.text
        # the operator's full view: the whole database's tenant (a keyless server, or the CLI)
        full = memory.stats()
        assert {"current", "turns", "summaries_written"} <= set(full.worker) and isinstance(full.workers, list)


# -- 4. a read never waits for the write lock ---------------------------------------------------


@pytest.mark.sqlite_only(reason="another process holds the SQLite file's write lock")
def test_a_read_is_answered_while_another_process_holds_the_write_lock(tmp_path: Path) -> None:
    db = tmp_path / "busy.db"
    mem = lossless.open(db, embedder=None, compaction="deferred")  # no worker: only the request touches the store
    mem.store._conn.setbusytimeout(500)  # a wait, if any, fails fast (it was 10 s: a 503 after 10 s)
    mem.conversation("c").add("user", "hello")
    keys = APIKeys(mem.store)
    row, key = keys.create("acme")
    assert row.last_used_at is None
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import apsw, sys
        c = apsw.Connection({str(db)!r})
        c.execute("BEGIN IMMEDIATE")  # the write lock (WAL: readers go on)
        c.execute("INSERT INTO settings (key, value) VALUES ('held', '1')")
        print("locked", flush=True)
        sys.stdin.readline()  # until the test is done
        c.execute("ROLLBACK")
    """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    auth = {"authorization": f"Bearer {key}"}
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with served(mem) as srv:
            for path in ("/v1/lossless/whoami", C, "/v1/lossless/stats"):
                r = httpx.get(f"{srv.url}{path}", headers=auth, timeout=60)
                assert r.status_code == 200, (path, r.text)
            assert keys.get(row.id).last_used_at is None  # the use could not be recorded, and was not waited for
            assert holder.stdin is not None
            holder.stdin.write("\n")
            holder.stdin.flush()
            assert holder.wait(30) == 0
            assert httpx.get(f"{srv.url}/v1/lossless/whoami", headers=auth, timeout=60).status_code == 200
            assert keys.get(row.id).last_used_at is not None  # recorded by the first request after
    finally:
        holder.kill()
        holder.wait()
        for pipe in (holder.stdin, holder.stdout):
            if pipe is not None:
                pipe.close()
    mem.close()


@pytest.mark.postgres
def test_a_keys_use_is_recorded_without_waiting_for_a_row_lock_on_postgresql(pg_url: str) -> None:
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as admin:  # a wait, if any, fails (it would never end)
        name = admin.execute("SELECT current_database()").fetchone()
        assert name is not None
        admin.execute(f'ALTER DATABASE "{name[0]}" SET lock_timeout = 2000')
    with lossless.open(pg_url, embedder=None, compaction="deferred") as mem:
        keys = APIKeys(mem.store)
        row, key = keys.create("acme")
        with psycopg.connect(pg_url) as holder:
            holder.execute("SELECT 1 FROM api_keys WHERE id = %s FOR UPDATE", (row.id,))  # held until commit
            assert keys.verify(key) is not None  # answered, not blocked behind the lock
            assert keys.get(row.id).last_used_at is None
            holder.commit()
        assert keys.verify(key) is not None
        assert keys.get(row.id).last_used_at is not None


# -- new store files are the owner's only ---------------------------------------------------------


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.sqlite_only(reason="file modes of a SQLite database")
def test_new_store_files_are_readable_by_their_owner_only(tmp_path: Path) -> None:
    old = os.umask(0o022)  # the usual umask, under which SQLite made them 0644
    try:
        db = tmp_path / "api.db"
        with lossless.open(db, embedder=None, compaction="deferred") as mem:
            mem.conversation("c").add("user", "a secret worth keeping")
            files = [db, Path(f"{db}-wal"), Path(f"{db}-shm")]
            assert all(p.exists() for p in files)
            assert {p.name: oct(_mode(p)) for p in files} == {p.name: "0o600" for p in files}
        cli = tmp_path / "cli.db"
        env = {**os.environ, "LOSSLESS_EMBEDDER": "none"}
        done = subprocess.run([sys.executable, "-m", "lossless", "--db", str(cli), "add", "c", "--role", "user",
                               "--content", "hello", "--no-wait"], env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert oct(_mode(cli)) == "0o600"
        # an existing file keeps the mode its owner gave it
        shared = tmp_path / "shared.db"
        lossless.open(shared, embedder=None).close()
        shared.chmod(0o640)
        lossless.open(shared, embedder=None).close()
        assert oct(_mode(shared)) == "0o640"
    finally:
        os.umask(old)
