"""Shared by the server tests: a real server on a free 127.0.0.1 port, the proxy over a
fake provider (fixtures ``memory`` and ``proxy``, for a test module to import), and checks of
requests and answers against the OpenAPI document the server publishes."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from jsonschema import Draft202012Validator

import lossless
from lossless.server.app import create_app
from lossless.server.openapi import openapi_document
from lossless.server.run import BackgroundServer
from lossless.server.state import Upstream
from tests.conftest import StoreTarget
from tests.fake_openai import FakeOpenAIServer

__all__ = ["OpenAPIChecker", "json_ready", "served"]


@pytest.fixture(name="memory")
def proxied_memory(store_target: StoreTarget) -> Iterator[lossless.Memory]:
    """The store behind :func:`proxy_url`."""
    m = lossless.open(store_target("proxied"), context_window=4096)
    yield m
    m.close()


@pytest.fixture(name="proxy")
def proxy_url(memory: lossless.Memory, fake_openai: FakeOpenAIServer) -> Iterator[str]:
    """The URL of a real server proxying to the fake provider, over ``memory``."""
    with served(memory, upstream=Upstream(fake_openai.base_url, "sk-upstream")) as server:
        yield server.url


@contextmanager
def served(memory: lossless.Memory, **options: Any) -> Iterator[BackgroundServer]:
    """``create_app(memory, **options)`` served by uvicorn in a thread (a bounded start wait)."""
    with BackgroundServer(create_app(memory, **options), start_timeout=15) as server:
        yield server


def json_ready(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages with their datetimes as ISO strings, for a JSON body."""
    return [{k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in m.items()} for m in messages]


class OpenAPIChecker:
    """Validates each request body and answer against ``/openapi.json`` and remembers
    which operations were exercised."""

    def __init__(self, document: dict[str, Any] | None = None) -> None:
        self.doc = document or openapi_document()
        self.seen: set[str] = set()
        self._routes = [(re.compile("^" + re.sub(r"\{[^}]+\}", "[^/]+", path) + "$"), path)
                        for path in self.doc["paths"]]

    def schema(self, ref: dict[str, Any]) -> Draft202012Validator:
        return Draft202012Validator({**ref, "components": self.doc["components"]})

    def operation(self, method: str, url_path: str) -> dict[str, Any]:
        for rx, template in self._routes:
            if rx.match(url_path):
                op = self.doc["paths"][template].get(method.lower())
                if op is not None:
                    return dict(op)
        raise AssertionError(f"{method} {url_path} is not in the OpenAPI document")

    def check(self, response: httpx.Response, body: Any = None) -> httpx.Response:
        """Assert the request body and the answer match the documented schemas."""
        request = response.request
        op = self.operation(request.method, request.url.path)
        self.seen.add(op["operationId"])
        if body is not None and "requestBody" in op:
            schema = op["requestBody"]["content"]["application/json"]["schema"]
            errors = [e.message for e in self.schema(schema).iter_errors(body)]
            assert not errors, f"request to {request.url.path} does not match its schema: {errors}"
        documented = op["responses"].get(str(response.status_code)) or op["responses"]["default"]
        content = documented.get("content", {}).get("application/json")
        if content is not None:
            errors = [e.message for e in self.schema(content["schema"]).iter_errors(response.json())]
            assert not errors, f"{response.status_code} from {request.url.path} does not match its schema: {errors}"
        return response
