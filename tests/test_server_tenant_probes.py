"""A tenant with one key probing `lossless serve` over real HTTP on 127.0.0.1 (a second
attacker's pass): what another tenant stored must not be told apart from what nobody
stored, a time that cannot be read back in UTC is refused before it is stored, and the
operator's upstream URL stays out of a tenant's error."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

import lossless
from lossless.core._canonical import message_id
from lossless.server.keys import APIKeys
from lossless.server.run import free_port
from lossless.server.state import Upstream
from lossless.server.tenancy import Tenant
from tests.conftest import StoreTarget, chat
from tests.fake_openai import FakeOpenAIServer, fake_openai
from tests.server_support import OpenAPIChecker, json_ready, served

__all__ = ["fake_openai"]  # the fixture, imported for pytest to find

C = "/v1/lossless/conversations"


@pytest.fixture
def memory(store_target: StoreTarget) -> Iterator[lossless.Memory]:
    m = lossless.open(store_target("probe"), context_window=4096, embedder=None)
    yield m
    m.close()


def _keys(memory: lossless.Memory) -> tuple[dict[str, str], dict[str, str]]:
    keys = APIKeys(memory.store)
    _, alpha = keys.create("alpha")
    _, bravo = keys.create("bravo")
    return {"authorization": f"Bearer {alpha}"}, {"authorization": f"Bearer {bravo}"}


def test_another_tenants_node_ids_read_as_ids_nobody_has(memory: lossless.Memory) -> None:
    """Message ids are sha256(conversation, seq): anyone can compute the id of message 1 of
    "@bravo/notes". Asked for it in its own conversation, alpha was told "no node … in this
    conversation" when bravo had it and "no message with id …" when nobody did, so it could
    learn which conversation ids bravo has, and (message by message) how long each is."""
    bravo_conv = memory.conversation(Tenant("bravo").stored_id("notes"), Tenant("bravo").metadata_in(None))
    bravo_conv.add_many(chat(60))
    bravo_conv.compact(force=True, full=True)
    bravo_summary = bravo_conv.summaries()[0].id
    alpha, _ = _keys(memory)
    spec = OpenAPIChecker()
    with served(memory) as srv:
        url = srv.url
        assert httpx.post(f"{url}{C}/mine/messages", json={"messages": json_ready(chat(4))},
                          headers=alpha).status_code == 201
        pairs = ((message_id("@bravo/notes", 1), message_id("@bravo/no-such-thing", 1)),
                 (message_id("@bravo/notes", 60), message_id("@bravo/notes", 61)),
                 (bravo_summary, "sum_" + "0" * 20))
        for theirs, nobodys in pairs:
            seen = []
            for ident in (theirs, nobodys):
                answers = [httpx.get(f"{url}{C}/mine/nodes/{ident}", headers=alpha),
                           httpx.post(f"{url}{C}/mine/tools/lcm_describe", json={"id": ident}, headers=alpha),
                           httpx.post(f"{url}{C}/mine/tools/lcm_expand", json={"id": ident}, headers=alpha)]
                for r in answers:
                    spec.check(r)
                seen.append([(r.status_code, r.text.replace(ident, "ID")) for r in answers])
            assert seen[0] == seen[1], (theirs, seen)
            assert all(status == 404 for status, _ in seen[0])
            assert "in this conversation" in seen[0][0][1]


def test_a_time_outside_the_years_of_utc_is_refused_and_stores_nothing(memory: lossless.Memory) -> None:
    """9999-12-31T23:59:59-23:59 is valid ISO 8601 and was stored, but its UTC time is in the
    year 10000: every assembly of the conversation failed after it ("date value out of
    range"), for good, since a stored message never changes. The end of 9999-12-31 as a
    search bound and forgetting what is older than a million days were 422s too."""
    alpha, _ = _keys(memory)
    with served(memory) as srv:
        url = srv.url
        for when in ("9999-12-31T23:59:59-23:59", "0001-01-01T00:00:00+23:59"):
            r = httpx.post(f"{url}{C}/dates/messages", headers=alpha,
                           json={"role": "user", "content": "hello", "created_at": when})
            assert r.status_code == 422, r.text
            assert "created_at" in r.json()["error"]["message"] and "UTC" in r.json()["error"]["message"]
            batch = httpx.post(f"{url}{C}/dates/messages", headers=alpha, json={"messages": [
                {"role": "user", "content": "fine"}, {"role": "user", "content": "late", "created_at": when}]})
            assert batch.status_code == 422 and "message 1" in batch.json()["error"]["message"], batch.text
        assert httpx.get(f"{url}{C}/dates", headers=alpha).status_code == 404  # nothing stored
        r = httpx.post(f"{url}{C}/dates/messages", headers=alpha,
                       json={"role": "user", "content": "hello there", "created_at": "9999-12-31T23:59:59+00:00"})
        assert r.status_code == 201, r.text
        assert httpx.post(f"{url}{C}/dates/assemble", json={"query": "hello"}, headers=alpha).status_code == 200
        found = httpx.post(f"{url}{C}/dates/search", json={"query": "hello", "until": "9999-12-31"}, headers=alpha)
        assert found.status_code == 200 and found.json()["count"] == 1, found.text
        since = httpx.post(f"{url}{C}/dates/search", json={"query": "hello", "since": "0001-01-01T00:00:00+23:59"},
                           headers=alpha)
        assert since.status_code == 422 and "since" in since.json()["error"]["message"], since.text
        assert httpx.post(f"{url}/v1/lossless/memories", json={"content": "old news"}, headers=alpha).status_code == 201
        forgot = httpx.post(f"{url}/v1/lossless/memories/forget", headers=alpha,
                            json={"older_than_days": 1_000_000, "dry_run": True})
        assert forgot.status_code == 200 and forgot.json()["count"] == 0, forgot.text


def test_an_unreachable_upstream_is_502_without_the_operators_url(memory: lossless.Memory) -> None:
    """The 502 named the upstream URL: a tenant learnt where the operator's gateway lives,
    and the user, password or key an operator's URL may carry."""
    alpha, _ = _keys(memory)
    port = free_port()
    dead = f"http://gwuser:s3cret-pw@127.0.0.1:{port}/v1?api-key=k3y-zz"
    with served(memory, upstream=Upstream(dead, "sk-upstream")) as srv:
        for path, body in (("/v1/chat/completions", {"model": "gpt-4o-mini", "messages": [
                               {"role": "user", "content": "hi"}]}),
                           ("/v1/messages", {"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": [
                               {"role": "user", "content": "hi"}]})):
            r = httpx.post(srv.url + path, json=body, headers={**alpha, "x-lossless-conversation": "up"})
            assert r.status_code == 502 and r.json()["error"]["type"] == "upstream_error", r.text
            message: Any = r.json()["error"]["message"]
            assert "did not answer" in message
            for secret in ("gwuser", "s3cret-pw", "k3y-zz", "127.0.0.1", str(port)):
                assert secret not in r.text, (secret, r.text)


@pytest.mark.parametrize("system", [5, {"text": "be brief"}, ["be brief"], [{"type": "text"}],
                                    [{"type": "text", "text": "ok"}, {"type": "image", "source": {}}]])
def test_an_anthropic_system_that_is_not_text_is_422_and_nothing_is_stored_or_sent(
        memory: lossless.Memory, fake_openai: FakeOpenAIServer, system: Any) -> None:
    """A ``system`` that is neither a string nor a list of text blocks was dropped without a
    word: the user's turn was stored and sent without the system prompt the client meant."""
    alpha, _ = _keys(memory)
    with served(memory, upstream=Upstream(fake_openai.base_url, "sk-up")) as srv:
        r = httpx.post(srv.url + "/v1/messages", headers={**alpha, "x-lossless-conversation": "sys"},
                       json={"model": "claude-sonnet-4-5", "max_tokens": 100, "system": system,
                             "messages": [{"role": "user", "content": "hi"}]})
        assert r.status_code == 422 and "system" in r.json()["error"]["message"], r.text
        assert memory.get_conversation(Tenant("alpha").stored_id("sys")) is None
        assert not fake_openai.messages_requests()
        fake_openai.enqueue_chat("fine")
        ok = httpx.post(srv.url + "/v1/messages", headers={**alpha, "x-lossless-conversation": "sys"},
                        json={"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": [
                            {"role": "user", "content": "hi"}],
                              "system": [{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}]})
        assert ok.status_code == 200, ok.text
        # sent as the client wrote it, cache_control and all (its text is the context's system prompt)
        assert fake_openai.messages_requests()[-1].body["system"] == [
            {"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}]
        stored = memory.get_conversation(Tenant("alpha").stored_id("sys"))
        assert stored is not None and [(m.role, m.content) for m in stored.messages()][:2] == [
            ("system", "be brief"), ("user", "hi")]
