"""Running the app with uvicorn: in the foreground (``lossless serve``) or in a background
thread (tests, benchmarks, notebooks)::

    with BackgroundServer(create_app(mem)) as server:
        httpx.get(server.url + "/healthz")
"""

from __future__ import annotations

import socket
import threading
import time
from types import TracebackType
from typing import Any

import uvicorn

from lossless.core.errors import LosslessError

__all__ = ["BackgroundServer", "free_port", "serve"]


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on right now."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def serve(app: Any, host: str = "127.0.0.1", port: int = 8765, *, log_level: str = "info") -> None:
    """Serve until interrupted (Ctrl-C)."""
    uvicorn.run(app, host=host, port=port, log_level=log_level, proxy_headers=False, server_header=False)


class BackgroundServer:
    """uvicorn in a daemon thread on ``host:port`` (a free port by default); entering waits
    until it accepts connections (at most ``start_timeout`` seconds), leaving stops it."""

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int | None = None, *,
                 start_timeout: float = 10.0, log_level: str = "warning") -> None:
        self.host = host
        self.port = port or free_port(host)
        self.start_timeout = start_timeout
        config = uvicorn.Config(app, host=host, port=self.port, log_level=log_level, lifespan="on",
                                server_header=False, proxy_headers=False)
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
