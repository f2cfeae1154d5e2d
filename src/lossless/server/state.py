"""What every route shares, and :func:`endpoint`, which turns a plain sync function into a
Starlette route handler: authenticate, read and check the body, run the function in a
worker thread (SQLite never blocks the event loop), answer JSON or the mapped error."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, unquote_to_bytes

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from lossless.server.auth import Authenticator
from lossless.server.errors import exception_response
from lossless.server.keys import APIKeys
from lossless.server.limits import Limits, TenantSlots
from lossless.server.params import Fields, bad, read_json
from lossless.server.tenancy import Tenant

if TYPE_CHECKING:
    from lossless.engine import Memory

__all__ = ["JSON", "Call", "EncodedSlashes", "Reply", "ServerState", "Upstream", "endpoint", "state_of"]

DEFAULT_MAX_BODY = 8 * 1024 * 1024


class JSON(JSONResponse):
    """JSON without escaping non-ASCII text; dates and other stragglers as strings."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=False, default=str, separators=(",", ":")).encode("utf-8")


@dataclass(frozen=True)
class Upstream:
    """The model provider the proxy forwards to: a base URL like ``https://api.openai.com/v1``
    (``/chat/completions`` and ``/messages`` are appended) and its key."""

    base_url: str
    api_key: str | None = None
    timeout: float = 600.0
    max_compactions: int = 3
    window: int | None = None
    """The window the operator gave (``lossless serve --window``): every request's context is
    assembled for it, whatever window the request's model is known to have (a local server
    that serves ``qwen2.5`` with an 8k context, and cuts what does not fit without a word)."""


@dataclass
class ServerState:
    memory: Memory
    keys: APIKeys
    auth: Authenticator
    max_body_bytes: int = DEFAULT_MAX_BODY
    upstream: Upstream | None = None
    limits: Limits = field(default_factory=Limits)
    extra: dict[str, Any] = field(default_factory=dict)
    slots: TenantSlots = field(init=False)

    def __post_init__(self) -> None:
        self.slots = TenantSlots(self.limits)

    def tenant(self, request: Request) -> Tenant:
        """The request's tenant (blocking; run it in a worker thread)."""
        client = request.client.host if request.client else None
        return self.auth.tenant(request.headers.get("authorization"), request.headers.get("x-api-key"), client)


def state_of(request: Request) -> ServerState:
    state: ServerState = request.app.state.lossless
    return state


@dataclass
class Reply:
    """A body with a status other than 200."""

    status: int
    body: Any


@dataclass
class Call:
    """One request as a route function sees it."""

    memory: Memory
    tenant: Tenant
    path: dict[str, Any]
    query: dict[str, str]
    body: Any
    limits: Limits = field(default_factory=Limits)

    def fields(self, allowed: tuple[str, ...]) -> Fields:
        return Fields(self.body if self.body is not None else {}, allowed=allowed)

    def params(self, allowed: tuple[str, ...]) -> Fields:
        return Fields(self.query, allowed=allowed, query=True, where="query string")


Handler = Callable[[Request], Awaitable[Response]]


def check_url(request: Request) -> None:
    """A 400 for a URL path or query string whose ``%XX`` escapes are not UTF-8: the server
    would decode each bad byte as U+FFFD, so ``%E9`` (Latin-1 é) would name a conversation
    nobody sent."""
    for part, raw in (("path", request.scope.get("raw_path")), ("query string", request.scope.get("query_string"))):
        if not raw or b"%" not in raw:
            continue
        try:
            unquote_to_bytes(raw).decode("utf-8")
        except UnicodeDecodeError:
            raise bad(f"the URL's {part} is not UTF-8 once its %XX escapes are decoded: percent-encode ids "
                      "and values as UTF-8 (对话 is %E5%AF%B9%E8%AF%9D)") from None


class EncodedSlashes:
    """ASGI middleware: a ``%2F`` in a path segment of the REST API stays inside that segment.
    The server decodes it before routing, so ``GET …/conversations/项目%2Fstats`` was the
    stats of ``项目``, not the conversation ``项目/stats`` (nor could ``x/dag`` or
    ``x/messages`` be read). Such a path is routed with each segment's ``/`` and ``%`` kept
    escaped, and :func:`endpoint` decodes the path parameters."""

    def __init__(self, app: Any, prefix: str = "/v1/lossless/") -> None:
        self.app = app
        self.prefix = prefix

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        raw = scope.get("raw_path") if scope["type"] == "http" else None
        if raw and b"%2f" in raw.lower() and scope["path"].startswith(self.prefix):
            segments = raw.decode("ascii", "replace").split("/")
            path = "/".join(unquote(s).replace("%", "%25").replace("/", "%2F") for s in segments)
            scope = {**scope, "path": path, _ESCAPED: True}
        await self.app(scope, receive, send)


_ESCAPED = "lossless.escaped_path"


def endpoint(fn: Callable[[Call], Any], *, body: bool = False, stores: bool = False) -> Handler:
    """A route handler around ``fn(call)``; ``body``: the request has a JSON body (an
    empty one reads as ``{}``); ``stores``: reading the body and ``fn`` take one of the
    tenant's slots (:mod:`lossless.server.limits`). ``fn`` returns a JSON-ready value or
    a :class:`Reply`."""

    async def run(request: Request, state: ServerState, tenant: Tenant) -> Any:
        check_url(request)
        data = await read_json(request, state.max_body_bytes, empty={}) if body else None
        path = dict(request.path_params)
        if request.scope.get(_ESCAPED):  # routed with %2F kept (EncodedSlashes)
            path = {k: unquote(v) if isinstance(v, str) else v for k, v in path.items()}
        call = Call(state.memory, tenant, path, dict(request.query_params), data, state.limits)
        return await run_in_threadpool(fn, call)

    async def handle(request: Request) -> Response:
        try:
            state = state_of(request)
            tenant = await run_in_threadpool(state.tenant, request)
            if stores:
                async with state.slots.hold(tenant):
                    result = await run(request, state, tenant)
            else:
                result = await run(request, state, tenant)
        except Exception as exc:
            return exception_response(exc)
        if isinstance(result, Reply):
            return JSON(result.body, status_code=result.status)
        return JSON(result)

    handle.__name__ = handle.__qualname__ = fn.__name__
    return handle
