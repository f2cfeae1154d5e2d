"""Refusals made before any route runs, on the Anthropic proxy route: Anthropic's error
envelope there (``{"type": "error", "error": {"type", "message"}}``), lossless's own shape
everywhere else. A real server on 127.0.0.1 over the fake provider."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

import lossless
from lossless.server.state import Upstream
from tests.fake_openai import FakeOpenAIServer, fake_openai
from tests.server_support import OpenAPIChecker, served

__all__ = ["fake_openai"]  # the fixture, imported for pytest to find

_CONVERSATION = {"X-Lossless-Conversation": "%E5%9B%A2%E9%98%9F%2F%E7%94%B2"}  # 团队/甲
_ASK: dict[str, Any] = {"model": "claude-proxy-test", "max_tokens": 50,
                        "messages": [{"role": "user", "content": "机房在哪里？" * 400}]}


@pytest.fixture
def url(tmp_path: Any, fake_openai: FakeOpenAIServer) -> Iterator[str]:
    memory = lossless.open(tmp_path / "m.db", context_window=4096)
    try:
        with served(memory, upstream=Upstream(fake_openai.base_url, "sk-upstream"), max_body_bytes=2000) as server:
            yield server.url
    finally:
        memory.close()


# (the refusal, how to provoke it at a path): the guards of lossless.server.guard, the
# router's 405, and the body limit (which the route itself enforces, after routing)
_REFUSALS: dict[str, tuple[int, str, Callable[[str], httpx.Response]]] = {
    "misdirected host": (421, "misdirected_request",
                         lambda u: httpx.post(u, json=_ASK, headers={**_CONVERSATION, "host": "attacker.example"})),
    "cross-origin write": (403, "forbidden",
                           lambda u: httpx.post(u, json=_ASK, headers={**_CONVERSATION,
                                                                       "origin": "https://attacker.example"})),
    "not JSON": (415, "unsupported_media_type",
                 lambda u: httpx.post(u, content=b'{"model": "c"}', headers={**_CONVERSATION,
                                                                            "content-type": "text/plain"})),
    "method": (405, "method_not_allowed", lambda u: httpx.put(u, json=_ASK, headers=_CONVERSATION)),
    "too large": (413, "payload_too_large", lambda u: httpx.post(u, json=_ASK, headers=_CONVERSATION)),
}


@pytest.mark.parametrize("refusal", list(_REFUSALS))
def test_refusals_on_the_anthropic_route_use_anthropics_envelope(url: str, fake_openai: FakeOpenAIServer,
                                                                 refusal: str) -> None:
    """A 421, 403, 415 or 405 on ``/v1/messages`` was ``{"error": {...}}``, lossless's shape,
    while the route's own errors are Anthropic's: a client of the Anthropic API reads the
    envelope it knows (``type: "error"``) on every answer lossless writes there."""
    status, type_, provoke = _REFUSALS[refusal]
    response = provoke(url + "/v1/messages")
    assert response.status_code == status
    body = response.json()
    assert body["type"] == "error" and body["error"]["type"] == type_ and body["error"]["message"]
    assert set(body) == {"type", "error"}
    if status != 405:
        OpenAPIChecker().check(response)  # the documented AnthropicError
    assert fake_openai.messages_requests() == []


@pytest.mark.parametrize("refusal", list(_REFUSALS))
@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/lossless/conversations/x/messages"])
def test_refusals_elsewhere_keep_losslesss_shape(url: str, refusal: str, path: str) -> None:
    status, type_, provoke = _REFUSALS[refusal]
    response = provoke(url + path)
    assert response.status_code == status
    assert response.json() == {"error": {"type": type_, "message": response.json()["error"]["message"]}}


def test_an_anthropic_endpoint_lossless_does_not_serve_is_an_anthropic_404(url: str) -> None:
    """``/v1/messages/count_tokens`` (the Anthropic SDK's ``messages.count_tokens``) is not
    proxied: the 404 says so in the envelope the SDK reads."""
    response = httpx.post(url + "/v1/messages/count_tokens", json=_ASK, headers=_CONVERSATION)
    assert response.status_code == 404
    assert response.json()["type"] == "error" and response.json()["error"]["type"] == "not_found"
    assert httpx.get(url + "/v1/messagesx").json()["error"]["type"] == "not_found"  # not under the route
    assert "type" not in httpx.get(url + "/v1/messagesx").json()
