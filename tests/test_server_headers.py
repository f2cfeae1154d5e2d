"""The headers every answer of `lossless serve` carries for browsers (lossless/server/headers.py),
over real HTTP on 127.0.0.1: the web page may run only its own script and is never framed,
no answer is sniffed into HTML, and a tenant's conversations never land in a cache."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

import lossless
from lossless.server.state import Upstream
from tests.conftest import StoreTarget
from tests.fake_openai import FakeOpenAIServer, fake_openai
from tests.server_support import served

__all__ = ["fake_openai"]  # the fixture, imported for pytest to find

C = "/v1/lossless/conversations"


@pytest.fixture
def server(store_target: StoreTarget, fake_openai: FakeOpenAIServer) -> Iterator[str]:
    mem = lossless.open(store_target("headers"), context_window=4096, embedder=None)
    mem.conversation("对话").add(role="user", content="<img src=x onerror=alert(1)>")
    with served(mem, upstream=Upstream(fake_openai.base_url, "sk-upstream")) as srv:
        yield srv.url
    mem.close()


def test_every_answer_carries_the_browser_headers(server: str, fake_openai: FakeOpenAIServer) -> None:
    fake_openai.enqueue_chat("你好")
    with httpx.Client(base_url=server) as http:
        page = [http.get("/"), http.get("/web/app.js"), http.get("/web/style.css")]
        api = [http.get(f"{C}?limit=5"), http.get(f"{C}/%E5%AF%B9%E8%AF%9D/dag"), http.get(f"{C}/nope"),
               http.get("/no/such/route"), http.get("/openapi.json"),
               http.post(f"{C}/x/search", content=b"{}", headers={"content-type": "text/plain"}),
               http.get("/healthz", headers={"host": "attacker.example"}),
               http.post("/v1/chat/completions", headers={"x-lossless-conversation": "%E5%AF%B9%E8%AF%9D"},
                         json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]})]
    assert [r.status_code for r in page] == [200, 200, 200]
    assert [r.status_code for r in api] == [200, 200, 404, 404, 200, 415, 421, 200]
    for answer in page + api:
        where = f"{answer.request.method} {answer.request.url.path} ({answer.status_code})"
        assert answer.headers.get("x-content-type-options") == "nosniff", where
        assert answer.headers.get("x-frame-options") == "DENY", where
        assert "frame-ancestors 'none'" in answer.headers.get("content-security-policy", ""), where
        assert answer.headers.get("referrer-policy") == "no-referrer", where
    for answer in page:
        policy = answer.headers["content-security-policy"]
        assert "default-src 'none'" in policy and "script-src 'self'" in policy and "unsafe-inline" not in policy
        assert "require-trusted-types-for 'script'" in policy  # no script may write HTML
        assert answer.headers["cache-control"] == "no-cache"  # revalidated: never an old script on a new server
    for answer in api:
        assert answer.headers["content-security-policy"] == "default-src 'none'; frame-ancestors 'none'"
        assert answer.headers["cache-control"] == "no-store"  # a tenant's conversations stay off the disk cache


def test_a_header_a_route_sets_is_kept(server: str, fake_openai: FakeOpenAIServer) -> None:
    fake_openai.enqueue_chat("流式回答")
    with httpx.stream("POST", f"{server}/v1/chat/completions", headers={"x-lossless-conversation": "stream-1"},
                      json={"model": "gpt-4o-mini", "stream": True,
                            "messages": [{"role": "user", "content": "hi"}]}) as stream:
        assert stream.headers["cache-control"] == "no-cache"  # the proxy's own, for the event stream
        assert stream.headers["x-content-type-options"] == "nosniff"
        assert [line for line in stream.iter_lines() if line.startswith("data: ")][-1] == "data: [DONE]"
