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
to the proxy reads lossless's errors like the provider's own. The Anthropic proxy route
(``/v1/messages``) writes the same ``error`` in Anthropic's envelope, ``{"type": "error",
"error": {"type", "message"}}`` (:func:`anthropic_error_body`), as the Anthropic API does; so
do the refusals made before any route runs (421, 403, 415 of :mod:`lossless.server.guard`;
404 and 405), for that path and the paths under it (:func:`error_shape_for`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
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

__all__ = ["ANTHROPIC_PATH", "ErrorShape", "HTTPError", "anthropic_error_body", "error_body", "error_response",
           "error_shape_for", "exception_response"]

log = logging.getLogger("lossless.server")


class HTTPError(Exception):
    """An error with its HTTP status and ``error.type``, raised by the server's own code."""

    def __init__(self, status: int, type_: str, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.type = type_
        self.message = message
        self.headers = headers or {}


ErrorShape = Callable[[str, str], dict[str, Any]]  # (error.type, message) -> the body


def error_body(type_: str, message: str) -> dict[str, Any]:
    """lossless's (and OpenAI's) error body: ``{"error": {"type", "message"}}``."""
    return {"error": {"type": type_, "message": message}}


def anthropic_error_body(type_: str, message: str) -> dict[str, Any]:
    """Anthropic's error body, which the Anthropic proxy route (``/v1/messages``) answers
    with: ``{"type": "error", "error": {"type", "message"}}``."""
    return {"type": "error", "error": {"type": type_, "message": message}}


ANTHROPIC_PATH = "/v1/messages"


def error_shape_for(path: str) -> ErrorShape:
    """The error shape for a request to ``path`` that no route answers (refused before
    routing, or routed nowhere): Anthropic's on the Anthropic proxy route and under it
    (``/v1/messages/count_tokens``, which an Anthropic SDK may call and lossless does not
    serve), lossless's everywhere else. An Anthropic SDK reads ``error.message`` from its
    own envelope only: a 415 or a 421 in lossless's shape reached its user without a word."""
    under = path == ANTHROPIC_PATH or path.startswith(ANTHROPIC_PATH + "/")
    return anthropic_error_body if under else error_body


def error_response(status: int, type_: str, message: str, headers: dict[str, str] | None = None, *,
                   shape: ErrorShape = error_body) -> JSONResponse:
    return JSONResponse(shape(type_, message), status_code=status, headers=headers)


_MAPPED: tuple[tuple[type[LosslessError], int, str], ...] = (
    (NotFoundError, 404, "not_found"),
    (Diverged, 409, "conversation_diverged"),
    (CompactionBusyError, 409, "compaction_busy"),
    (ContextOverflowError, 422, "context_overflow"),
    (ValidationError, 422, "validation_error"),
    (MissingDependencyError, 501, "not_available"),
)


def exception_response(exc: BaseException, *, shape: ErrorShape = error_body) -> JSONResponse:
    """The JSON error response for any exception a route raised: never a traceback, never
    the database's path. ``shape`` writes the body (the Anthropic proxy route's:
    :func:`anthropic_error_body`)."""
    status, type_, message, headers = _mapped(exc)
    return error_response(status, type_, message, headers, shape=shape)


def _mapped(exc: BaseException) -> tuple[int, str, str, dict[str, str] | None]:
    """(status, ``error.type``, message, headers) for an exception, per the table above."""
    if isinstance(exc, HTTPError):
        return exc.status, exc.type, exc.message, exc.headers
    for kind, status, type_ in _MAPPED:
        if isinstance(exc, kind):
            return status, type_, str(exc), None
    if isinstance(exc, StoreError) and not isinstance(exc, MigrationError):
        log.warning("lossless server: %s", exc)  # the operator's log has the path; the client does not
        headers = {"retry-after": "1"} if exc.transient else None
        return 503, "store_unavailable", (f"the store could not serve the request: {exc.reason}"
                                          + ("; retry shortly" if exc.transient else "")), headers
    if isinstance(exc, RecursionError):
        return 400, "invalid_request", "the request is nested too deeply", None
    if isinstance(exc, OverflowError):
        return 422, "validation_error", f"a number in the request is out of range: {exc}", None
    if isinstance(exc, MemoryError):
        return 413, "payload_too_large", ("the request needs more memory than the server gives one request "
                                          "(simplify the pattern, or narrow the search)"), None
    if isinstance(exc, ClientDisconnect):  # read_body says so with the request's path; this is a fallback
        log.info("lossless server: the client closed the connection before its request was read")
        return 400, "client_disconnected", "the connection closed before the request was read", None
    if isinstance(exc, LosslessError):
        log.warning("lossless server: %s: %s", type(exc).__name__, exc)
        return 500, "internal_error", f"{type(exc).__name__}: {exc}", None
    log.exception("lossless server: unexpected error", exc_info=exc)
    return 500, "internal_error", f"unexpected {type(exc).__name__} (see the server log)", None
