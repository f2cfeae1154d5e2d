"""What ``lossless mcp`` tells its client while it works: log messages at the level the
client set, and progress for the calls that ask for it.

- ``logging/setLevel``: each connection keeps its own level (``warning`` until the client
  sets one). A call sends ``notifications/message`` at that level and above: what it did
  at ``info`` (the tool, its arguments' gist, how long it took, how many results), each
  step of a compaction at ``info``, what it was given at ``debug``, and a failure at
  ``error``; records of the ``lossless`` loggers emitted while the call runs (a fallback,
  a retry) go to the client too, at their own level. On the 2026 protocol, where the
  client opts in per request (``_meta``), the SDK's rule applies instead.
- Progress: when a request carries ``_meta.progressToken``, a call sends
  ``notifications/progress`` at least every second while it runs (so a client that resets
  its timeout on progress does not give up on a long ``lcm_expand`` waiting for a
  compaction), with a total where the work has units (a compaction: messages summarized
  of those due), and a last one at 100 %.

The sync core runs in a worker thread (:func:`in_thread`); it reaches the client through
:func:`current_call`, which works from that thread too.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Coroutine
from contextvars import ContextVar
from typing import Any, TypeVar, get_args

import anyio
import anyio.from_thread
import anyio.to_thread
from mcp.server.connection import allowed_log_levels
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.types import (
    EmptyResult,
    LoggingLevel,
    LoggingMessageNotification,
    LoggingMessageNotificationParams,
    SetLevelRequestParams,
)

__all__ = ["DEFAULT_LEVEL", "LEVELS", "Call", "current_call", "current_request", "in_thread", "install"]

T = TypeVar("T")
LEVELS: tuple[LoggingLevel, ...] = get_args(LoggingLevel)  # least severe first (RFC 5424)
DEFAULT_LEVEL: LoggingLevel = "warning"
HEARTBEAT_SECONDS = 1.0
_LEVEL_KEY = "lossless.log_level"
_PY_LEVELS: tuple[tuple[int, LoggingLevel], ...] = (
    (logging.CRITICAL, "critical"), (logging.ERROR, "error"), (logging.WARNING, "warning"),
    (logging.INFO, "info"), (0, "debug"))

_request: ContextVar[ServerRequestContext[Any, Any] | None] = ContextVar("lossless_mcp_request", default=None)
_call: ContextVar[Call | None] = ContextVar("lossless_mcp_call", default=None)


def _connection_state(ctx: ServerRequestContext[Any, Any]) -> dict[str, Any]:
    """The connection's own scratch dict (``Connection.state``, kept across requests); the
    SDK has no public way to it from a request context, hence the private attribute."""
    connection = getattr(ctx.session, "_connection", None)
    state = getattr(connection, "state", None)
    return state if isinstance(state, dict) else {}


def connection_level(ctx: ServerRequestContext[Any, Any]) -> LoggingLevel:
    """The level this connection's client set with ``logging/setLevel`` (else the default)."""
    level = _connection_state(ctx).get(_LEVEL_KEY, DEFAULT_LEVEL)
    return level if level in LEVELS else DEFAULT_LEVEL


async def _set_level(ctx: ServerRequestContext[Any, Any], params: SetLevelRequestParams) -> EmptyResult:
    _connection_state(ctx)[_LEVEL_KEY] = params.level
    return EmptyResult()


async def _remember_request(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """Middleware: the request being served, for :class:`Call` (tools keep their signatures)."""
    token = _request.set(ctx)
    try:
        return await call_next(ctx)
    finally:
        _request.reset(token)


def install(server: Any) -> None:
    """Serve ``logging/setLevel`` (which also declares the logging capability) and let
    calls find their request. ``server`` is an ``MCPServer``."""
    lowlevel = server._lowlevel_server  # registering a handler directly: the SDK's
    lowlevel.add_request_handler("logging/setLevel", SetLevelRequestParams, _set_level)  # constructor flag warns
    server.middleware.append(_remember_request)
    lossless_log = logging.getLogger("lossless")
    if not any(isinstance(h, _ToClient) for h in lossless_log.handlers):
        lossless_log.addHandler(_ToClient())


class _ToClient(logging.Handler):
    """Sends the ``lossless`` loggers' records to the client of the call that caused them."""

    def emit(self, record: logging.LogRecord) -> None:
        call = _call.get()
        if call is not None and not record.name.startswith("lossless.server"):
            level = next(name for floor, name in _PY_LEVELS if record.levelno >= floor)
            with contextlib.suppress(Exception):  # a client that went away must not break the call
                call.log(level, record.getMessage(), logger=record.name)
        last = logging.lastResort
        if last is not None and record.levelno >= last.level and not self._others(record):
            last.handle(record)  # as if this handler were not here: no other handler, stderr

    def _others(self, record: logging.LogRecord) -> bool:
        """Whether any other handler sees the record (else Python's last resort would)."""
        logger: logging.Logger | None = logging.getLogger(record.name)
        while logger is not None:
            if any(h is not self for h in logger.handlers):
                return True
            logger = logger.parent if logger.propagate else None
        return False


class Call:
    """One request being served: its log messages and progress go to the client, from the
    event loop (the ``a…`` methods) or from the worker thread running the core."""

    def __init__(self, ctx: ServerRequestContext[Any, Any], label: str) -> None:
        self.ctx = ctx
        self.label = label
        meta = ctx.meta or {}
        self.progress_token = meta.get("progress_token", meta.get("progressToken"))
        self.done: float | None = None  # the last progress sent
        self.total: float | None = None
        self._allowed = self._levels()

    def _levels(self) -> frozenset[LoggingLevel]:
        sdk = allowed_log_levels(self.ctx.protocol_version, self.ctx.meta)
        if len(sdk) < len(LEVELS):  # the 2026 protocol: the request's own opt-in decides
            return sdk
        floor = LEVELS.index(connection_level(self.ctx))
        return frozenset(LEVELS[floor:])

    def wants(self, level: LoggingLevel) -> bool:
        return level in self._allowed

    async def alog(self, level: LoggingLevel, data: Any, logger: str = "lossless") -> None:
        if level not in self._allowed:
            return
        note = LoggingMessageNotification(params=LoggingMessageNotificationParams(level=level, data=data,
                                                                                  logger=logger))
        await self.ctx.session.send_notification(note, related_request_id=self.ctx.request_id)

    async def aprogress(self, done: float, total: float | None = None, message: str | None = None) -> None:
        if self.progress_token is None:
            return
        # progress must increase with every notification (spec): a heartbeat adds a hair;
        # once at the total there is nothing more to say
        new = done if self.done is None or done > self.done else self.done + 1e-3
        total = total if total is not None else self.total
        if total is not None and new > total:
            return
        self.done, self.total = new, total
        await self.ctx.session.report_progress(self.done, self.total, message)

    def _from_thread(self, fn: Callable[..., Coroutine[Any, Any, None]], *args: Any) -> None:
        with contextlib.suppress(RuntimeError):  # not in a worker thread of the loop (on the loop itself)
            anyio.from_thread.run(fn, *args)

    def log(self, level: LoggingLevel, data: Any, logger: str = "lossless") -> None:
        """Send a log message, from the worker thread."""
        if level in self._allowed:
            self._from_thread(self.alog, level, data, logger)

    def progress(self, done: float, total: float | None = None, message: str | None = None) -> None:
        """Report progress, from the worker thread (``done`` of ``total`` units)."""
        if self.progress_token is not None:
            self._from_thread(self.aprogress, done, total, message)


def current_request() -> ServerRequestContext[Any, Any] | None:
    """The MCP request being served (on the loop), if any."""
    return _request.get()


def current_call() -> Call | None:
    """The call this code runs for (on the loop or in its worker thread), if any."""
    return _call.get()


async def in_thread(fn: Callable[[], T], label: str | None = None) -> T:
    """``fn()`` in a worker thread, telling the client how it goes (see the module doc).
    Outside an MCP request (a direct call in a test) it only runs ``fn``."""
    ctx = _request.get()
    if ctx is None:
        return await anyio.to_thread.run_sync(fn)
    name = label or _request_label(ctx)
    call = Call(ctx, name)
    token = _call.set(call)  # copied into the worker thread with the rest of the context
    t0 = time.perf_counter()
    failure: Exception | None = None
    try:
        await call.alog("debug", {"call": name, "arguments": _arguments(ctx)})
        async with anyio.create_task_group() as tg:
            if call.progress_token is not None:
                await call.aprogress(0, None, f"{name}: started")
                tg.start_soon(_heartbeat, call, t0)
            try:
                result = await anyio.to_thread.run_sync(fn)
            except Exception as exc:  # raised below, outside the task group (no exception group)
                failure = exc
            finally:
                tg.cancel_scope.cancel()
        if failure is not None:
            await call.alog("error", f"{name} failed after {time.perf_counter() - t0:.2f} s: {failure}")
            raise failure
    finally:
        _call.reset(token)
    seconds = time.perf_counter() - t0
    await call.aprogress(call.total if call.total is not None else (call.done or 0) + 1, None, f"{name}: done")
    await call.alog("info", f"{name} done in {seconds:.2f} s{_outcome(result)}")
    return result


async def _heartbeat(call: Call, t0: float) -> None:
    """A progress notification every second while the core runs (its own reports count)."""
    while True:
        await anyio.sleep(HEARTBEAT_SECONDS)
        await call.aprogress(call.done or 0, call.total, f"{call.label}: running, {time.perf_counter() - t0:.0f} s")


def _request_label(ctx: ServerRequestContext[Any, Any]) -> str:
    params = ctx.params or {}
    if ctx.method == "tools/call":
        return str(params.get("name", "tool"))
    if ctx.method == "resources/read":
        return f"read {params.get('uri', '')}"
    if ctx.method == "prompts/get":
        return f"prompt {params.get('name', '')}"
    return ctx.method


def _arguments(ctx: ServerRequestContext[Any, Any]) -> Any:
    params = ctx.params or {}
    return params.get("arguments", params.get("uri"))


def _outcome(result: Any) -> str:
    """A word on what a call returned (a count), for its ``info`` line."""
    if isinstance(result, dict):
        for key in ("count", "summaries_written"):
            if isinstance(result.get(key), int):
                return f": {key.replace('_', ' ')} {result[key]}"
        if isinstance(result.get("items"), list):
            return f": {len(result['items'])} items"
    return ""
