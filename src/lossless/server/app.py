"""The HTTP API as a Starlette app: :func:`create_app`.

    from lossless.server.app import create_app
    app = create_app(lossless.open("memory.db"))            # you own (and close) the Memory
    app = create_app(lambda: lossless.open("memory.db"))    # opened at startup, closed at shutdown

Routes: the REST API under ``/v1/lossless/`` (:mod:`lossless.server.routes`), the context
proxy (``/v1/chat/completions``, ``/v1/messages``), ``/openapi.json``, ``/healthz`` and
the web page at ``/``. Run it with ``lossless serve`` (uvicorn) or any ASGI server.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Iterable
from importlib import resources
from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from lossless.server import proxy
from lossless.server.auth import Authenticator, is_loopback
from lossless.server.errors import error_response, error_shape_for
from lossless.server.guard import Guard, GuardMiddleware, allowed_names
from lossless.server.headers import SecurityHeaders
from lossless.server.keys import APIKeys
from lossless.server.limits import Limits
from lossless.server.openapi import openapi_document
from lossless.server.routes import conversations, memories, tenant
from lossless.server.state import DEFAULT_MAX_BODY, JSON, EncodedSlashes, ServerState, Upstream

if TYPE_CHECKING:
    from lossless.engine import Memory

__all__ = ["create_app"]

log = logging.getLogger("lossless.server")

_STATUS_TYPES = {404: "not_found", 405: "method_not_allowed"}


def _web_dir() -> str:
    return str(resources.files("lossless.server") / "web")


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    message = {404: f"no route {request.method} {request.url.path}",
               405: f"{request.method} is not allowed on {request.url.path}"}.get(exc.status_code, str(exc.detail))
    return error_response(exc.status_code, _STATUS_TYPES.get(exc.status_code, "http_error"), message,
                          dict(exc.headers or {}), shape=error_shape_for(request.scope["path"]))


async def _openapi(request: Request) -> Response:
    return JSON(openapi_document(str(request.base_url).rstrip("/")))


async def _health(request: Request) -> Response:
    return JSONResponse({"ok": True})


async def _index(request: Request) -> Response:
    return FileResponse(f"{_web_dir()}/index.html", media_type="text/html; charset=utf-8")


def create_app(
    memory: Memory | Callable[[], Memory],
    *,
    upstream: Upstream | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY,
    allow_implicit_tenant: bool = True,
    host: str | None = "127.0.0.1",
    allowed_hosts: Iterable[str] = (),
    allowed_origins: Iterable[str] = (),
    keyless: bool = False,
    limits: Limits | None = None,
) -> Starlette:
    """The API over ``memory`` (or over the Memory that ``memory()`` opens at startup).

    ``upstream``: the model provider the proxy forwards to (None: the proxy answers 501).
    ``allow_implicit_tenant``: serve keyless requests as the whole database while no API
    key was ever created (only ever from loopback clients); False: always require a key.
    ``host`` (the address the server is bound to), ``allowed_hosts`` and
    ``allowed_origins`` set the browser checks of :mod:`lossless.server.guard`: the Host
    names answered (checked always without keys, and with keys when names are given) and
    the origins, besides the server's own, whose pages may write. ``keyless``: serve a
    database whose keys are all revoked without keys (``lossless serve --keyless``).
    ``limits``: messages per request and requests per tenant at once
    (:mod:`lossless.server.limits`; the defaults when None).
    """
    # Host is checked when names were given, and on a loopback server (keyless or not: a
    # public name reaches it only through a reverse proxy, which --allowed-host names); a
    # server bound to a public address has keys (check_bind) and cannot know its names
    explicit = any(n.strip() for n in allowed_hosts)
    guard = Guard(allowed_names(host, allowed_hosts), allowed_origins,
                  check_host=explicit or host is None or is_loopback(host))
    holder: dict[str, ServerState] = {}

    def state_for(mem: Memory) -> ServerState:
        keys = APIKeys(mem.store)
        return ServerState(memory=mem, keys=keys,
                           auth=Authenticator(keys, allow_implicit=allow_implicit_tenant, keyless=keyless),
                           max_body_bytes=max_body_bytes, upstream=upstream, limits=limits or Limits())

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        opened = memory() if callable(memory) else None
        if opened is not None:
            app.state.lossless = holder["state"] = state_for(opened)
        try:
            yield
        finally:
            state: ServerState = app.state.lossless
            client = state.extra.pop("http", None)
            if client is not None:
                await client.aclose()
            if opened is not None:
                opened.close()

    routes: list[BaseRoute] = [
        Route("/", _index, methods=["GET"]),
        Route("/healthz", _health, methods=["GET"]),
        Route("/openapi.json", _openapi, methods=["GET"]),
        *conversations.routes(),
        *memories.routes(),
        *tenant.routes(),
        *proxy.routes(),
        Mount("/web", app=StaticFiles(directory=_web_dir()), name="web"),
    ]
    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers={HTTPException: _http_error})
    if not callable(memory):
        app.state.lossless = state_for(memory)
    app.add_middleware(EncodedSlashes)
    app.add_middleware(GuardMiddleware, guard=guard)
    app.add_middleware(SecurityHeaders)  # outermost: the guard's refusals get the headers too
    return app
