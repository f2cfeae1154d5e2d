"""Limits on what an LLM summarizer may do: a :class:`SpendGuard` caps calls and tokens
in a sliding window, a :class:`CircuitBreaker` stops calling a provider that keeps
rejecting the credentials. Both refuse by raising
:class:`~lossless.errors.SummarizerError` before any request is sent."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from lossless.errors import SummarizerError, ValidationError

__all__ = ["CircuitBreaker", "SpendGuard"]


@dataclass
class _Spend:
    at: float
    tokens: int


class SpendGuard:
    """At most ``max_calls`` provider calls and ``max_tokens`` tokens (input + output)
    in any ``window_seconds``; None means no limit. Thread-safe; share one instance
    between summarizers to cap them together.

    A call reserves its estimate (prompt + ``max_tokens``) before it is sent and is
    settled to the provider's reported usage afterwards. A call that would go over a
    limit is refused: the summarizer raises ``SummarizerError("spend guard: …")``
    without contacting the provider.
    """

    def __init__(
        self,
        max_calls: int | None = None,
        max_tokens: int | None = None,
        window_seconds: float = 3600.0,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        for name, value in (("max_calls", max_calls), ("max_tokens", max_tokens)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise ValidationError(f"SpendGuard: {name} must be a non-negative integer or None, got {value!r}")
        if not window_seconds > 0:
            raise ValidationError(f"SpendGuard: window_seconds must be positive, got {window_seconds!r}")
        self.max_calls = max_calls
        self.max_tokens = max_tokens
        self.window_seconds = float(window_seconds)
        self._clock = clock
        self._events: deque[_Spend] = deque()
        self._lock = threading.Lock()

    def _prune(self, now: float) -> None:
        while self._events and self._events[0].at <= now - self.window_seconds:
            self._events.popleft()

    def usage(self) -> tuple[int, int]:
        """(calls, tokens) spent in the current window."""
        with self._lock:
            self._prune(self._clock())
            return len(self._events), sum(e.tokens for e in self._events)

    def reserve(self, tokens: int) -> _Spend:
        """Record one call of about ``tokens`` tokens, or raise SummarizerError if it
        would go over a limit (recording nothing)."""
        with self._lock:
            now = self._clock()
            self._prune(now)
            calls = len(self._events)
            spent = sum(e.tokens for e in self._events)
            window = f"{self.window_seconds:g}s"
            if self.max_calls is not None and calls + 1 > self.max_calls:
                raise SummarizerError(
                    f"spend guard: {calls} of at most {self.max_calls} calls in {window} already made"
                )
            if self.max_tokens is not None and spent + tokens > self.max_tokens:
                raise SummarizerError(
                    f"spend guard: a call of ~{tokens} tokens would bring the last {window} to "
                    f"{spent + tokens}, over the limit of {self.max_tokens}"
                )
            spend = _Spend(now, max(0, tokens))
            self._events.append(spend)
            return spend

    def settle(self, spend: _Spend, tokens: int) -> None:
        """Replace a reservation's estimate by what the call really cost."""
        with self._lock:
            spend.tokens = max(0, tokens)

    def __repr__(self) -> str:
        return (
            f"SpendGuard(max_calls={self.max_calls!r}, max_tokens={self.max_tokens!r}, "
            f"window_seconds={self.window_seconds:g})"
        )


class CircuitBreaker:
    """Opens after ``threshold`` consecutive authentication failures; while open, calls
    fail at once without a request. After ``cooldown`` seconds one trial call is let
    through (half-open): a success closes the breaker, another auth failure re-opens it.
    Other failures neither count nor reset. Thread-safe."""

    def __init__(self, threshold: int = 3, cooldown: float = 300.0, *, clock: Callable[[], float] = time.monotonic) -> None:
        if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 1:
            raise ValidationError(f"CircuitBreaker: threshold must be a positive integer, got {threshold!r}")
        if not cooldown >= 0:
            raise ValidationError(f"CircuitBreaker: cooldown must be >= 0, got {cooldown!r}")
        self.threshold = threshold
        self.cooldown = float(cooldown)
        self._clock = clock
        self._failures = 0
        self._opened_at: float | None = None
        self._lock = threading.Lock()

    @property
    def state(self) -> Literal["closed", "open", "half-open"]:
        with self._lock:
            if self._opened_at is None:
                return "closed"
            return "open" if self._clock() - self._opened_at < self.cooldown else "half-open"

    def check(self, what: str = "summarizer") -> None:
        """Raise SummarizerError if the breaker is open."""
        with self._lock:
            if self._opened_at is None:
                return
            left = self.cooldown - (self._clock() - self._opened_at)
            if left > 0:
                raise SummarizerError(
                    f"{what}: circuit breaker open after {self._failures} consecutive "
                    f"authentication failures; no request for another {left:.0f}s "
                    "(check the API key)"
                )

    def record_auth_failure(self) -> None:
        with self._lock:
            self._failures += 1
            if self._failures >= self.threshold:
                self._opened_at = self._clock()  # (re-)open, also after a failed trial

    def record_success(self) -> None:
        with self._lock:
            self._failures = 0
            self._opened_at = None
