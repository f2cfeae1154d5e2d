"""Running the app with uvicorn: in the foreground (``lossless serve``) or in a background
thread (tests, benchmarks, notebooks)::

    with BackgroundServer(create_app(mem)) as server:
        httpx.get(server.url + "/healthz")
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time
from types import TracebackType
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from lossless.core.errors import LosslessError

__all__ = ["HEADER_TIMEOUT", "BackgroundServer", "free_port", "header_deadline", "serve"]

log = logging.getLogger("lossless.server")

HEADER_TIMEOUT = 10.0  # seconds a connection has to send a request's line and headers


def header_deadline(seconds: float) -> type[H11Protocol]:
    """uvicorn's h11 protocol, closing a connection that has not sent a whole request line
    and headers within ``seconds`` of opening (or of the answer to its previous request).
    uvicorn has no such timeout: its keep-alive timer stops at the first byte, so a client
    that trickles a header a byte at a time (slowloris) held its connection forever."""

    class HeaderDeadline(H11Protocol):
        _deadline: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(transport)  # type: ignore[arg-type]
            self._arm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm()  # the next request's headers are due in time too

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._disarm()
            if not self.transport.is_closing():
                self._deadline = self.loop.call_later(seconds, self._expired)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _expired(self) -> None:
            self._deadline = None
            # IDLE: no request is complete (a request being read or answered is left alone)
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                log.debug("lossless server: closed a connection from %s that sent no whole request headers "
                          "within %g s", self.client, seconds)
                self.transport.close()

    return HeaderDeadline


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on right now."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def serve(app: Any, host: str = "127.0.0.1", port: int = 8765, *, log_level: str = "info",
          header_timeout: float = HEADER_TIMEOUT) -> None:
    """Serve until interrupted (Ctrl-C)."""
    uvicorn.run(app, host=host, port=port, log_level=log_level, proxy_headers=False, server_header=False,
                http=header_deadline(header_timeout))


class BackgroundServer:
    """uvicorn in a daemon thread on ``host:port`` (a free port by default); entering waits
    until it accepts connections (at most ``start_timeout`` seconds), leaving stops it."""

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int | None = None, *,
                 start_timeout: float = 10.0, log_level: str = "warning",
                 header_timeout: float = HEADER_TIMEOUT) -> None:
        self.host = host
        self.port = port or free_port(host)
        self.start_timeout = start_timeout
        config = uvicorn.Config(app, host=host, port=self.port, log_level=log_level, lifespan="on",
                                server_header=False, proxy_headers=False, http=header_deadline(header_timeout))
        self.server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> BackgroundServer:
        self._thread = threading.Thread(target=self.server.run, daemon=True, name=f"lossless-server-{self.port}")
        self._thread.start()
        deadline = time.monotonic() + self.start_timeout
        while not self.server.started:
            if not self._thread.is_alive():
                raise LosslessError(f"the server on {self.url} exited while starting")
            if time.monotonic() > deadline:
                self.stop()
                raise LosslessError(f"the server on {self.url} did not start within {self.start_timeout} s")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
