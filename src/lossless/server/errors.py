"""The HTTP boundary's error mapping: every error is ``{"error": {"type", "message"}}``.

Mapped once, here (STYLE.md: map errors once at each boundary):

=========================  ======  =======================
exception                  status  ``error.type``
=========================  ======  =======================
malformed request          400     ``invalid_request``
missing / bad key          401     ``unauthorized``
keyless non-loopback       403     ``forbidden``
NotFoundError              404     ``not_found``
CompactionBusyError        409     ``compaction_busy``
history rewritten (proxy)  409     ``conversation_diverged``
body too large             413     ``payload_too_large``
too many messages          413     ``too_many_messages`` (lossless.server.limits)
a tenant's slots all busy  429     ``too_many_requests`` (+ Retry-After; lossless.server.limits)
ValidationError            422     ``validation_error``
ContextOverflowError       422     ``context_overflow``
upstream failed (proxy)    502     ``upstream_error``
MissingDependencyError     501     ``not_available``
StoreError                 503     ``store_unavailable`` (+ Retry-After when transient; no path)
wrong Host name            421     ``misdirected_request`` (lossless.server.guard)
cross-origin write         403     ``forbidden``
body not JSON-typed        415     ``unsupported_media_type``
nested too deeply          400     ``invalid_request``
a number out of range      422     ``validation_error``
a request out of memory    413     ``payload_too_large``
client hung up mid-body    400     ``client_disconnected`` (never sent; one info line in the log)
anything else              500     ``internal_error``
=========================  ======  =======================

The shape is also OpenAI's (``error.type`` / ``error.message``), so an OpenAI SDK talking
to the proxy reads lossless's errors like the provider's own.
"""

from __future__ import annotations

import logging
from typing import Any

from starlette.requests import ClientDisconnect
from starlette.responses import JSONResponse

from lossless.core.errors import (
    CompactionBusyError,
    ContextOverflowError,
    LosslessError,
    MigrationError,
    MissingDependencyError,
    NotFoundError,
    StoreError,
    ValidationError,
)
from lossless.server.chat_match import Diverged

__all__ = ["HTTPError", "error_body", "error_response", "exception_response"]

log = logging.getLogger("lossless.server")


class HTTPError(Exception):
    """An error with its HTTP status and ``error.type``, raised by the server's own code."""

    def __init__(self, status: int, type_: str, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.type = type_
        self.message = message
        self.headers = headers or {}


def error_body(type_: str, message: str) -> dict[str, Any]:
    return {"error": {"type": type_, "message": message}}


def error_response(status: int, type_: str, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(error_body(type_, message), status_code=status, headers=headers)


_MAPPED: tuple[tuple[type[LosslessError], int, str], ...] = (
    (NotFoundError, 404, "not_found"),
    (Diverged, 409, "conversation_diverged"),
    (CompactionBusyError, 409, "compaction_busy"),
    (ContextOverflowError, 422, "context_overflow"),
    (ValidationError, 422, "validation_error"),
    (MissingDependencyError, 501, "not_available"),
)


def exception_response(exc: BaseException) -> JSONResponse:
    """The JSON error response for any exception a route raised: never a traceback, never
    the database's path."""
    if isinstance(exc, HTTPError):
        return error_response(exc.status, exc.type, exc.message, exc.headers)
    for kind, status, type_ in _MAPPED:
        if isinstance(exc, kind):
            return error_response(status, type_, str(exc))
    if isinstance(exc, StoreError) and not isinstance(exc, MigrationError):
        log.warning("lossless server: %s", exc)  # the operator's log has the path; the client does not
        headers = {"retry-after": "1"} if exc.transient else {}
        return error_response(503, "store_unavailable", f"the store could not serve the request: {exc.reason}"
                                                        + ("; retry shortly" if exc.transient else ""), headers)
    if isinstance(exc, RecursionError):
        return error_response(400, "invalid_request", "the request is nested too deeply")
    if isinstance(exc, OverflowError):
        return error_response(422, "validation_error", f"a number in the request is out of range: {exc}")
    if isinstance(exc, MemoryError):
        return error_response(413, "payload_too_large", "the request needs more memory than the server gives one "
                                                        "request (simplify the pattern, or narrow the search)")
    if isinstance(exc, ClientDisconnect):  # read_body says so with the request's path; this is a fallback
        log.info("lossless server: the client closed the connection before its request was read")
        return error_response(400, "client_disconnected", "the connection closed before the request was read")
    if isinstance(exc, LosslessError):
        log.warning("lossless server: %s: %s", type(exc).__name__, exc)
        return error_response(500, "internal_error", f"{type(exc).__name__}: {exc}")
    log.exception("lossless server: unexpected error", exc_info=exc)
    return error_response(500, "internal_error", f"unexpected {type(exc).__name__} (see the server log)")
