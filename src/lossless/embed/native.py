"""Keep threads out of a model's native code while the interpreter exits.

The worker embeds on a daemon thread. When a script ends without ``close()``, CPython
finalises while that thread may be inside ONNX Runtime, ``tokenizers`` or torch with the
GIL released. When the call returns, the thread finds the interpreter finalising and is
ended by ``pthread_exit``, whose forced unwind through C++ (or Rust) frames that may not
unwind calls ``std::terminate``: "terminate called without an active exception", SIGABRT,
the host process dies. A thread still running a kernel while C++ static destructors run
after finalisation fails the same way (ONNX Runtime: "GetElementType is not implemented").

So every call into a model's native code goes through :func:`native_call`. At exit (an
``atexit`` hook, which runs after non-daemon threads are joined and before finalisation)
the gate closes: it waits for the calls in flight to return (up to
:data:`EXIT_WAIT_SECONDS`), and a daemon thread that arrives later parks on an event that
is never set, holding no native frame, until the process ends. The main thread, which may
itself be running atexit hooks, gets an :class:`~lossless.core.errors.EmbedderError`
instead of parking.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import threading
import time
from collections.abc import Iterator

from lossless.core.errors import EmbedderError

__all__ = ["EXIT_WAIT_SECONDS", "NativeGate", "native_call"]

log = logging.getLogger("lossless")

# how long the exit waits for calls in flight: one batch of a local model takes well under a
# second on a quiet machine, a few seconds on a loaded one
EXIT_WAIT_SECONDS = 30.0


class NativeGate:
    """Counts the threads inside native model code; :meth:`close` waits for them to leave
    and keeps every later caller out."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._inside = 0
        self._closed = False
        self._parked = threading.Event()  # never set: where late daemon threads wait for the end

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def inside(self) -> int:
        return self._inside

    @contextlib.contextmanager
    def call(self) -> Iterator[None]:
        with self._cond:
            if self._closed:
                self._refuse()
            self._inside += 1
        try:
            yield
        finally:
            with self._cond:
                self._inside -= 1
                self._cond.notify_all()

    def _refuse(self) -> None:
        if threading.current_thread() is threading.main_thread():
            raise EmbedderError("the interpreter is exiting: the embedding model is no longer run")
        self._cond.release()
        try:  # a daemon thread: wait here, outside native code, for the process to end
            self._parked.wait()
        finally:
            self._cond.acquire()
        raise EmbedderError("the interpreter is exiting")  # reached only if the event is ever set

    def close(self, timeout: float = EXIT_WAIT_SECONDS) -> bool:
        """Refuse new calls and wait up to ``timeout`` seconds for those in flight; True
        when none is left."""
        started = time.monotonic()
        with self._cond:
            self._closed = True
            done = self._cond.wait_for(lambda: self._inside == 0, timeout)
        if not done:
            log.warning("lossless: %d embedding call(s) still running after %.0f s at exit",
                        self._inside, time.monotonic() - started)
        return done


_GATE = NativeGate()
_registered = threading.Lock()
_hooked = False


def _hook() -> None:
    global _hooked
    with _registered:
        if not _hooked:
            atexit.register(_GATE.close)
            _hooked = True


def native_call() -> contextlib.AbstractContextManager[None]:
    """A context for one call into a model's native code (a load, a batch). The first use
    registers the exit hook, so importing this module has no side effect."""
    if not _hooked:
        _hook()
    return _GATE.call()
