"""What a browser may do to the server: checks in front of every route (REST API, proxy,
web page), as plain ASGI middleware so streamed answers pass through untouched.

* **Host**: a page on ``attacker.example`` whose name is re-pointed at 127.0.0.1 (DNS
  rebinding) reaches the server with ``Host: attacker.example``. Answered 421 unless the
  name is allowed: the loopback names (``localhost``, ``127.0.0.1``, ``[::1]``), the name
  the server is bound to, and any given with ``--allowed-host`` (a reverse proxy's public
  name). A server bound to a public address (it has keys: it refuses to start without
  them) checks Host only when names are given: it cannot know its own.
* **Content-Type**: a page may send a cross-site ``POST`` without a CORS preflight only
  with a "simple" content type (``text/plain``, a form). Bodies must say
  ``application/json`` (or ``…+json``): anything else is 415, so such a request never
  reaches a route.
* **Origin**: a state-changing request (POST, PUT, PATCH, DELETE) that a browser marks as
  coming from another origin (its ``Origin`` is not this server's own, nor one allowed
  with ``--allowed-origin``; or ``Sec-Fetch-Site: cross-site``) is 403. Clients that are
  not browsers (SDKs, curl) send no Origin and are not affected.

A refusal is ``{"error": {"type", "message"}}``, and Anthropic's envelope on the Anthropic
proxy route (:func:`lossless.server.errors.error_shape_for`).

SECURITY.md says what each check protects against and how to run behind a reverse proxy.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any
from urllib.parse import urlsplit

from lossless.server.errors import error_shape_for

__all__ = ["Guard", "GuardMiddleware", "allowed_names"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})
_WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def _host_name(value: str) -> str:
    """The name of a Host header value or an origin's netloc, without the port."""
    value = value.strip().lower()
    if value.startswith("["):  # [::1]:8765
        return value[: value.find("]") + 1] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def allowed_names(bound: str | None, extra: Iterable[str] = ()) -> frozenset[str]:
    """The Host names a server bound to ``bound`` answers: loopback names, the bound name
    (unless it is a wildcard address) and ``extra``."""
    names = set(LOOPBACK_NAMES)
    if bound and bound not in ("0.0.0.0", "::", ""):
        names.add(_host_name(bound))
        if ":" in bound and not bound.startswith("["):
            names.add(f"[{bound.lower()}]")
    names.update(_host_name(n) for n in extra if n.strip())
    return frozenset(names)


class Guard:
    """The policy: which Host names, which extra origins, and whether Host is checked at
    all (``check_host``: a keyless server always checks; a keyed one when names were
    configured, else a public name would be refused)."""

    def __init__(self, names: Iterable[str], origins: Iterable[str] = (), *, check_host: bool = True) -> None:
        self.names = frozenset(_host_name(n) for n in names)
        self.origins = frozenset(o.strip().rstrip("/").lower() for o in origins if o.strip())
        self.check_host = check_host

    def refuse(self, method: str, headers: dict[str, str]) -> tuple[int, str, str] | None:
        """(status, error type, message) for a request to refuse, or None."""
        host = headers.get("host", "")
        if self.check_host and _host_name(host) not in self.names:
            return (421, "misdirected_request",
                    f"this server does not answer to the host name {_host_name(host)!r} (a DNS-rebinding page "
                    "would); allow it with --allowed-host if it is yours")
        if method in _WRITES:
            origin = headers.get("origin")
            if origin is not None and not self._same_origin(origin, host):
                return (403, "forbidden", f"cross-origin {method} from {origin!r} refused (allow it with "
                                          "--allowed-origin if it is yours)")
            if headers.get("sec-fetch-site") == "cross-site" and origin is None:
                return 403, "forbidden", f"cross-site {method} refused"
            if _has_body(headers) and not _is_json(headers.get("content-type", "")):
                kind = headers.get("content-type") or "none"
                return 415, "unsupported_media_type", f"request bodies must be application/json, not {kind}"
        return None

    def _same_origin(self, origin: str, host: str) -> bool:
        origin = origin.strip().rstrip("/").lower()
        if origin in self.origins:
            return True
        parts = urlsplit(origin)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            return False  # "null" (a sandboxed frame, a file), or not a URL at all
        # the page this server itself served; a page of another port of this host is another
        # origin, refused too
        return parts.netloc == host.strip().lower()


def _has_body(headers: dict[str, str]) -> bool:
    length = headers.get("content-length")
    if length is not None:
        return length.strip() not in ("", "0")
    return "chunked" in headers.get("transfer-encoding", "").lower()


def _is_json(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


class GuardMiddleware:
    """ASGI middleware applying a :class:`Guard` to HTTP requests."""

    def __init__(self, app: ASGIApp, guard: Guard) -> None:
        self.app = app
        self.guard = guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        refused = self.guard.refuse(str(scope.get("method", "GET")).upper(), headers)
        if refused is None:
            await self.app(scope, receive, send)
            return
        status, type_, message = refused
        body = json.dumps(error_shape_for(str(scope.get("path", "")))(type_, message)).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})
