"""``lossless mcp --transport http``: the MCP server over streamable HTTP, with the keys of
``lossless serve`` and a bound on its sessions.

Keys (:class:`KeyCheck`, in front of everything the MCP app serves): the same rules as
``lossless serve`` (:class:`~lossless.server.auth.Authenticator`). A database with an
active key needs one on every request (``Authorization: Bearer <key>``, or
``x-api-key``): missing, unknown or revoked is 401, and each request is served as its
key's tenant (:mod:`lossless.server.mcp_scope`). The SDK binds a session to the key that
opened it: another key gets 404 for it. A database that never had a key is served
without keys, as the whole database, to loopback clients only; one whose keys are all
revoked refuses everyone until started with ``--keyless``.

Sessions (:class:`SessionBound`): a session no request has used for ``idle_seconds`` is
closed (the SDK's idle timeout), and at most ``max_sessions`` are open: a new one first
closes the oldest idle session of the tenant that holds the most (so one tenant's flood
of sessions closes its own, not another's). A closed session's id answers 404, the
protocol's word for "start a new session".
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio.to_thread
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from lossless.server.auth import Authenticator
from lossless.server.errors import exception_response
from lossless.server.headers import SecurityHeaders
from lossless.server.mcp_scope import OPERATOR, TENANT_SCOPE_KEY
from lossless.server.tenancy import Tenant

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

__all__ = ["DEFAULT_IDLE_SECONDS", "DEFAULT_MAX_SESSIONS", "KeyCheck", "SessionBound", "http_app"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

DEFAULT_IDLE_SECONDS = 1800.0
DEFAULT_MAX_SESSIONS = 256  # ~37 kB each (2,000 took 74 MB): ~10 MB at most
MCP_PATH = "/mcp"
_SESSION = b"mcp-session-id"
_VERSION = b"mcp-protocol-version"


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return bytes(value).decode("latin-1")
    return None


class KeyCheck:
    """ASGI: resolve every HTTP request's tenant from its key (see the module doc) before
    the MCP app sees it; refused requests get lossless's JSON error and never reach it."""

    def __init__(self, app: ASGIApp, auth: Authenticator) -> None:
        self.app = app
        self.auth = auth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        client = scope.get("client")
        host = client[0] if client else None
        try:  # reads the database (the key's row): off the event loop
            tenant = await anyio.to_thread.run_sync(
                self.auth.tenant, _header(scope, b"authorization"), _header(scope, b"x-api-key"), host)
        except Exception as exc:  # 401 / 403, or 503 for a store that cannot answer
            await exception_response(exc)(scope, receive, send)
            return
        scope[TENANT_SCOPE_KEY] = tenant
        if not tenant.implicit:  # the SDK lets a session be used only with the key that opened it
            token = AccessToken(token=str(tenant.key_id), client_id=str(tenant.name), scopes=[],
                                subject=tenant.key_id)
            scope["user"] = AuthenticatedUser(token)
        await self.app(scope, receive, send)


@dataclass
class _Session:
    tenant: Tenant
    user: Any  # what opened it (scope["user"]): a request for it must be the same
    host: str | None
    last: float  # when a request for it last ended (time.monotonic())
    active: int = 0  # requests for it in flight (an open GET stream counts)


class SessionBound:
    """ASGI, in front of the MCP app (after :class:`KeyCheck`): at most ``max_sessions``
    sessions, the oldest idle one closed (by the protocol's DELETE) to make room."""

    def __init__(self, app: ASGIApp, *, max_sessions: int = DEFAULT_MAX_SESSIONS,
                 idle_seconds: float = DEFAULT_IDLE_SECONDS, path: str = MCP_PATH) -> None:
        if max_sessions < 1:
            raise ValueError("max_sessions must be at least 1")
        self.app = app
        self.max_sessions = max_sessions
        self.idle_seconds = idle_seconds
        self.path = path
        self.sessions: dict[str, _Session] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") != self.path:
            await self.app(scope, receive, send)
            return
        sid = _header(scope, _SESSION)
        if sid is None:
            if scope.get("method") == "POST" and self._opens_session(scope):
                await self._make_room()
            await self.app(scope, receive, self._watch_new(scope, send))
            return
        session = self.sessions.get(sid)
        if session is None:  # unknown here: the SDK answers (404 for an unknown session)
            await self.app(scope, receive, send)
            return
        session.active += 1
        status: list[int] = []

        async def watched(message: Message) -> None:
            if message["type"] == "http.response.start":
                status.append(int(message["status"]))
            await send(message)

        try:
            await self.app(scope, receive, watched)
        finally:
            session.active -= 1
            session.last = time.monotonic()
            gone = status and (status[0] == 404 or (scope.get("method") == "DELETE" and status[0] < 300))
            if gone and self.sessions.get(sid) is session:
                del self.sessions[sid]

    @staticmethod
    def _opens_session(scope: Scope) -> bool:
        """A request without a session id that the SDK serves by opening one (the
        stateless 2026 protocol opens none)."""
        version = _header(scope, _VERSION)
        return version is None or version in HANDSHAKE_PROTOCOL_VERSIONS

    def _watch_new(self, scope: Scope, send: Send) -> Send:
        """``send``, noting the session a response opens."""

        async def watched(message: Message) -> None:
            if message["type"] == "http.response.start" and int(message["status"]) < 400:
                for key, value in message.get("headers", ()):
                    if bytes(key).lower() == _SESSION:
                        self.sessions[bytes(value).decode("latin-1")] = _Session(
                            scope.get(TENANT_SCOPE_KEY, OPERATOR), scope.get("user"), _header(scope, b"host"),
                            time.monotonic())
            await send(message)

        return watched

    async def _make_room(self) -> None:
        """Forget sessions the SDK closed as idle, then close the oldest idle session of
        the tenant holding the most until a new one fits."""
        now = time.monotonic()
        for sid, s in list(self.sessions.items()):
            if not s.active and now - s.last > self.idle_seconds:
                await self._close(sid)
        while len(self.sessions) >= self.max_sessions:
            idle = [(sid, s) for sid, s in self.sessions.items() if not s.active]
            if not idle:
                return  # every one is in use: the SDK's own limit answers 503
            held = Counter(s.tenant.name for s in self.sessions.values())
            sid, _ = min(idle, key=lambda item: (-held[item[1].tenant.name], item[1].last))
            await self._close(sid)

    async def _close(self, sid: str) -> None:
        """Close a session as its client would: DELETE with its id (and the key that
        opened it, which the SDK checks)."""
        session = self.sessions.pop(sid, None)
        if session is None:
            return
        headers = [(_SESSION, sid.encode("latin-1"))]
        if session.host is not None:
            headers.append((b"host", session.host.encode("latin-1")))
        scope: Scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "DELETE",
                        "scheme": "http", "path": self.path, "raw_path": self.path.encode(), "root_path": "",
                        "query_string": b"", "headers": headers, "client": ("127.0.0.1", 0),
                        "server": ("127.0.0.1", 0), TENANT_SCOPE_KEY: session.tenant}
        if session.user is not None:
            scope["user"] = session.user

        async def receive() -> Message:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def discard(message: Message) -> None:
            return None

        with contextlib.suppress(Exception):  # a session the SDK closed already: 404, nothing to do
            await self.app(scope, receive, discard)


def http_app(server: MCPServer[Any], auth: Authenticator, *, host: str = "127.0.0.1",
             max_sessions: int = DEFAULT_MAX_SESSIONS, idle_seconds: float = DEFAULT_IDLE_SECONDS) -> ASGIApp:
    """The MCP server's streamable-HTTP app at ``/mcp``, behind the key check and the
    session bound (the SDK keeps its DNS-rebinding check on a loopback ``host``), every
    answer with the browser headers of ``lossless serve`` (:mod:`lossless.server.headers`)."""
    app = server.streamable_http_app(streamable_http_path=MCP_PATH, host=host, session_idle_timeout=idle_seconds,
                                     max_sessions=max_sessions)
    bounded = SessionBound(app, max_sessions=max_sessions, idle_seconds=idle_seconds)
    # outermost, as in lossless serve: the key check's refusals get the browser headers too
    return SecurityHeaders(KeyCheck(bounded, auth), pages=False)
