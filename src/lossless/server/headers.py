"""Headers on every answer that tell a browser what it may do with it, as plain ASGI
middleware (streamed answers pass through untouched; a header a route set itself wins).

* ``X-Content-Type-Options: nosniff``: an answer is what its type says. A conversation's
  JSON opened in a tab is shown as JSON, never guessed to be HTML and run.
* ``Content-Security-Policy``: the web page runs only its own script and style from this
  server, talks only to this server, and loads nothing else; no script may write HTML
  (Trusted Types: the page builds its DOM from text). Everything else gets
  ``default-src 'none'``. Both forbid framing (``frame-ancestors 'none'``, and
  ``X-Frame-Options: DENY`` for older browsers), so no other site can overlay the page to
  steer clicks.
* ``Cache-Control``: API answers are a tenant's conversations; ``no-store`` keeps them out
  of the browser's disk cache and any shared cache. The page and its files are
  ``no-cache``: revalidated (by ETag) every time, so an upgraded server never runs an old
  script against its new API.
* ``Referrer-Policy: no-referrer``: the page's address names a conversation.
"""

from __future__ import annotations

from lossless.server.guard import ASGIApp, Message, Receive, Scope, Send

__all__ = ["API_POLICY", "PAGE_POLICY", "SecurityHeaders"]

PAGE_POLICY = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
               "base-uri 'none'; form-action 'self'; frame-ancestors 'none'; require-trusted-types-for 'script'")
API_POLICY = "default-src 'none'; frame-ancestors 'none'"

_COMMON = ((b"x-content-type-options", b"nosniff"), (b"x-frame-options", b"DENY"),
           (b"referrer-policy", b"no-referrer"))
_PAGE = (*_COMMON, (b"content-security-policy", PAGE_POLICY.encode()), (b"cache-control", b"no-cache"))
_API = (*_COMMON, (b"content-security-policy", API_POLICY.encode()), (b"cache-control", b"no-store"))


def _is_page(path: str) -> bool:
    return path == "/" or path.startswith("/web/")


class SecurityHeaders:
    """ASGI middleware adding the headers above to every HTTP answer (also the refusals of
    :class:`lossless.server.guard.GuardMiddleware`, when it is added inside this one).
    ``pages=False`` for an app that serves no web page (``lossless mcp --transport http``):
    every answer gets the API's headers."""

    def __init__(self, app: ASGIApp, *, pages: bool = True) -> None:
        self.app = app
        self.pages = pages

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        extra = _PAGE if self.pages and _is_page(str(scope.get("path", ""))) else _API

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", ()))
                present = {bytes(name).lower() for name, _ in headers}
                headers += [(name, value) for name, value in extra if name not in present]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)
