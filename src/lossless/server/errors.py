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
ValidationError            422     ``validation_error``
ContextOverflowError       422     ``context_overflow``
upstream failed (proxy)    502     ``upstream_error``
MissingDependencyError     501     ``not_available``
anything else              500     ``internal_error``
=========================  ======  =======================

The shape is also OpenAI's (``error.type`` / ``error.message``), so an OpenAI SDK talking
to the proxy reads lossless's errors like the provider's own.
"""

from __future__ import annotations

import logging
from typing import Any

from starlette.responses import JSONResponse

from lossless.errors import (
    CompactionBusyError,
    ContextOverflowError,
    LosslessError,
    MissingDependencyError,
    NotFoundError,
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
    """The JSON error response for any exception a route raised."""
    if isinstance(exc, HTTPError):
        return error_response(exc.status, exc.type, exc.message, exc.headers)
    for kind, status, type_ in _MAPPED:
        if isinstance(exc, kind):
            return error_response(status, type_, str(exc))
    if isinstance(exc, LosslessError):
        log.warning("lossless server: %s: %s", type(exc).__name__, exc)
        return error_response(500, "internal_error", f"{type(exc).__name__}: {exc}")
    log.exception("lossless server: unexpected error", exc_info=exc)
    return error_response(500, "internal_error", f"unexpected {type(exc).__name__} (see the server log)")
