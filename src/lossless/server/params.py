"""Reading a request: the JSON body (size-capped) and typed fields from it or the query.

Malformed input (not JSON, not an object, a field of the wrong type, an unknown field) is
a 400 ``invalid_request`` naming the field; what lossless itself refuses (a bad message,
a budget it cannot honour) is its ``ValidationError``, a 422.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Mapping
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request

from lossless.core.errors import ValidationError
from lossless.server.errors import HTTPError

__all__ = ["MAX_INT", "Fields", "bad", "parse_json", "read_body", "read_json"]

log = logging.getLogger("lossless.server")

MAX_INT = 2**63 - 1  # the stores' integers (SQLite's, PostgreSQL's bigint): a count or offset past it reaches no SQL
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")  # where a lone surrogate can come from in UTF-8 JSON
_PARSE_ON_LOOP = 256 * 1024  # larger bodies are parsed in a worker thread
_DRAIN_FACTOR = 4  # an oversized body up to this many times the cap is read and dropped, so the
# client gets the 413 instead of a reset connection; anything larger is cut off at once


def bad(message: str) -> HTTPError:
    return HTTPError(400, "invalid_request", message)


async def read_body(request: Request, max_bytes: int) -> bytes:
    """The raw body, or 413 when it is larger than ``max_bytes`` (checked against
    Content-Length first, then while reading, so a chunked upload is cut off too)."""
    declared = request.headers.get("content-length")
    too_large = HTTPError(413, "payload_too_large", f"request body is larger than the {max_bytes:,}-byte limit")
    if declared is not None:
        try:
            size = int(declared)
        except ValueError:
            raise bad(f"Content-Length is not a number: {declared!r}") from None
        if size > max_bytes * _DRAIN_FACTOR:
            raise too_large
    chunks: list[bytes] = []
    total = 0
    try:
        async for chunk in request.stream():
            total += len(chunk)
            if total > max_bytes:
                chunks.clear()  # keep reading (and dropping) so the client can read the answer
                if total > max_bytes * _DRAIN_FACTOR:
                    break
            else:
                chunks.append(chunk)
    except ClientDisconnect:  # the client's business, not a server error: one line, no traceback
        log.info("lossless server: %s %s: the client closed the connection after %d of %s body bytes; nothing "
                 "was done", request.method, request.url.path, total, declared or "its")
        raise HTTPError(400, "client_disconnected", "the connection closed before the request body was complete") \
            from None
    if total > max_bytes:
        raise too_large
    return b"".join(chunks)


async def read_json(request: Request, max_bytes: int, *, empty: Any = None) -> Any:
    """The parsed JSON body; an empty body gives ``empty`` (None: an error)."""
    raw = await read_body(request, max_bytes)
    if not raw.strip():
        if empty is None:
            raise bad("the request needs a JSON body")
        return empty
    if len(raw) > _PARSE_ON_LOOP:  # megabytes take a tenth of a second: not on the loop every request shares
        return await run_in_threadpool(parse_json, raw)
    return parse_json(raw)


def parse_json(raw: bytes) -> Any:
    """A JSON body (UTF-8), each way it can be wrong a 400."""
    try:
        text = raw.decode("utf-8")  # RFC 8259: JSON between systems is UTF-8
    except UnicodeDecodeError:
        raise bad("request body is not UTF-8") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise bad(f"request body is not valid JSON: {exc}") from None
    except RecursionError:
        raise bad("request body is nested too deeply") from None
    if _SURROGATE_ESCAPE.search(text):  # a pair is one character; a lone half is no text anywhere
        _refuse_lone_surrogates(data)
    return data


def _refuse_lone_surrogates(data: Any) -> None:
    """A ValidationError naming the first string (or key) in ``data`` that holds a lone
    UTF-16 surrogate (``"\\ud800"`` in the JSON): it cannot be stored, searched nor sent
    back as UTF-8, and was a 500 wherever it reached the store or the answer unchecked."""
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, dict):
            for key, item in reversed(value.items()):
                stack.append((f"{where}.{key}" if where else str(key), key))
                stack.append((f"{where}.{key}" if where else str(key), item))
        elif isinstance(value, list):
            stack.extend((f"{where}[{i}]", item) for i, item in reversed(list(enumerate(value))))
        elif isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as exc:
                field = where.encode("utf-8", "backslashreplace").decode("utf-8")
                raise ValidationError(f"{field or 'the body'!r} is not valid UTF-8 text: a lone surrogate "
                                      f"{value[exc.start]!r} at position {exc.start} (send the character itself, "
                                      "or both halves of its pair)") from None


class Fields:
    """Typed access to a JSON object's fields (or query parameters, ``query=True``: the
    values are strings and are converted), each error a 400 naming the field."""

    def __init__(self, data: Any, *, allowed: Iterable[str] | None = None, query: bool = False,
                 where: str = "body") -> None:
        if not isinstance(data, Mapping):
            raise bad(f"the request {where} must be a JSON object, got {type(data).__name__}")
        self.data: Mapping[str, Any] = data
        self.query = query
        self.where = where
        if allowed is not None:
            unknown = sorted(set(data) - set(allowed))
            if unknown:
                raise bad(f"unknown {'parameter' if query else 'field'}(s) in the {where}: {', '.join(unknown)}")

    def _raw(self, name: str, required: bool) -> Any:
        value = self.data.get(name)
        if value is None and required:
            raise bad(f"{name!r} is required")
        return value

    def string(self, name: str, *, required: bool = False, default: str | None = None,
            choices: Iterable[str] | None = None) -> str | None:
        value = self._raw(name, required)
        if value is None:
            return default
        if not isinstance(value, str):
            raise bad(f"{name!r} must be a string, got {type(value).__name__}")
        options = tuple(choices) if choices is not None else None
        if options is not None and value not in options:
            raise bad(f"{name!r} must be one of {', '.join(options)}; got {value!r}")
        return value

    def text(self, name: str, *, choices: Iterable[str] | None = None) -> str:
        value = self.string(name, required=True, choices=choices)
        assert value is not None
        return value

    def integer(self, name: str, *, default: int | None = None, minimum: int | None = None,
            maximum: int | None = None) -> int | None:
        value = self._raw(name, False)
        if value is None:
            return default
        if self.query and isinstance(value, str):
            try:
                value = int(value)
            except ValueError:
                raise bad(f"{name!r} must be an integer, got {value!r}") from None
        if not isinstance(value, int) or isinstance(value, bool):
            raise bad(f"{name!r} must be an integer, got {type(value).__name__}")
        if minimum is not None and value < minimum:
            raise bad(f"{name!r} must be at least {minimum}, got {value}")
        if maximum is not None and value > maximum:
            raise bad(f"{name!r} must be at most {maximum}, got {value}")
        return value

    def number(self, name: str, *, minimum: float | None = None, maximum: float | None = None) -> float | None:
        value = self._raw(name, False)
        if value is None:
            return None
        if self.query and isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                raise bad(f"{name!r} must be a number, got {value!r}") from None
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise bad(f"{name!r} must be a number, got {type(value).__name__}")
        if value != value or value in (float("inf"), float("-inf")):
            raise bad(f"{name!r} must be a finite number, got {value}")
        if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
            raise bad(f"{name!r} must be between {minimum} and {maximum}, got {value}")
        return float(value)

    def boolean(self, name: str, *, default: bool = False) -> bool:
        value = self._raw(name, False)
        if value is None:
            return default
        if self.query and isinstance(value, str) and value.lower() in ("true", "1", "false", "0"):
            return value.lower() in ("true", "1")
        if not isinstance(value, bool):
            raise bad(f"{name!r} must be true or false, got {value!r}")
        return value

    def strings(self, name: str) -> list[str] | None:
        value = self._raw(name, False)
        if value is None:
            return None
        if self.query and isinstance(value, str):
            value = [v for v in value.split(",") if v]
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise bad(f"{name!r} must be a list of non-empty strings")
        return list(value)

    def mapping(self, name: str) -> dict[str, Any] | None:
        value = self._raw(name, False)
        if value is None:
            return None
        if not isinstance(value, dict):
            raise bad(f"{name!r} must be a JSON object, got {type(value).__name__}")
        return value
