"""Limits on what an LLM summarizer may do: a :class:`SpendGuard` caps calls and tokens
in a sliding window, a :class:`CircuitBreaker` stops calling a provider that keeps
rejecting the credentials or keeps failing. Both refuse by raising
:class:`~lossless.core.errors.SummarizerError` before any request is sent."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from lossless.core.errors import SummarizerError, ValidationError

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


@dataclass
class _Circuit:
    """One breaker's state: consecutive failures of one kind, when it opened and why,
    and whether its one probe call is out."""

    failures: int = 0
    kind: str = ""  # "auth" or "unavailable": what the failures were
    opened_at: float | None = None
    cooldown: float = 0.0
    reason: str = ""
    probing: bool = False
    opened_times: int = 0


class CircuitBreaker:
    """Stops calling a provider that keeps failing, so its trouble costs little.

    Two kinds of failure open it: ``threshold`` consecutive authentication failures
    (401/403: the provider as a whole, for ``cooldown`` seconds: keys do not fix
    themselves), and ``failure_threshold`` consecutive failures that say the provider
    is unavailable (5xx, 429, timeouts, connection errors), per model, for
    ``failure_cooldown`` seconds. While open, :meth:`check` refuses at once, without a
    request: the compaction engine then uses its deterministic fallback and says why.
    After the cool-down one probe call is let through (half-open; other callers are
    still refused while it is out): a success closes the breaker, a failure opens it
    again for another cool-down. Answers that show the provider is up (a reply of the
    wrong shape, an input too long) count as successes here. Thread-safe.
    """

    PROVIDER = ""  # the key of the provider-wide circuit (credentials)

    def __init__(self, threshold: int = 3, cooldown: float = 300.0, *, failure_threshold: int = 3,
                 failure_cooldown: float = 30.0, clock: Callable[[], float] = time.monotonic) -> None:
        for label, value in (("threshold", threshold), ("failure_threshold", failure_threshold)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValidationError(f"CircuitBreaker: {label} must be a positive integer, got {value!r}")
        for label, number in (("cooldown", cooldown), ("failure_cooldown", failure_cooldown)):
            if isinstance(number, bool) or not isinstance(number, int | float) or not number >= 0:
                raise ValidationError(f"CircuitBreaker: {label} must be >= 0, got {number!r}")
        self.threshold = threshold
        self.cooldown = float(cooldown)
        self.failure_threshold = failure_threshold
        self.failure_cooldown = float(failure_cooldown)
        self._clock = clock
        self._circuits: dict[str, _Circuit] = {}
        self._lock = threading.Lock()

    def _state(self, circuit: _Circuit) -> Literal["closed", "open", "half-open"]:
        if circuit.opened_at is None:
            return "closed"
        return "open" if self._clock() - circuit.opened_at < circuit.cooldown else "half-open"

    @property
    def state(self) -> Literal["closed", "open", "half-open"]:
        """The worst state of any circuit: ``open`` if one is, else ``half-open`` if one
        is, else ``closed``."""
        with self._lock:
            states = {self._state(c) for c in self._circuits.values()}
        return "open" if "open" in states else "half-open" if "half-open" in states else "closed"

    def snapshot(self) -> dict[str, dict[str, object]]:
        """Every circuit that is not plainly closed, for ``stats`` and health checks:
        its state, failures in a row, why it opened and seconds until the next probe."""
        out: dict[str, dict[str, object]] = {}
        with self._lock:
            now = self._clock()
            for key, c in self._circuits.items():
                if c.opened_at is None and not c.failures:
                    continue
                state = self._state(c)
                entry: dict[str, object] = {"state": state, "failures": c.failures, "kind": c.kind,
                                            "times_opened": c.opened_times}
                if c.opened_at is not None:
                    entry["reason"] = c.reason
                    entry["probe_in_seconds"] = round(max(0.0, c.cooldown - (now - c.opened_at)), 1)
                out[key or "(provider)"] = entry
        return out

    def failing(self, key: str = "") -> bool:
        """Whether the last call for ``key`` failed as unavailable (the circuit is not
        closed yet): the SDK's own retries are then skipped, so an outage costs one
        request per call until the breaker opens, not three with backoff."""
        with self._lock:
            c = self._circuits.get(key)
            return c is not None and c.kind == "unavailable" and c.failures > 0

    def blocked(self, key: str = "") -> str | None:
        """Why a call for ``key`` would be refused now, or None; takes no probe slot."""
        with self._lock:
            return self._blocked(key, take_probe=False)

    def _blocked(self, key: str, *, take_probe: bool) -> str | None:
        for name in dict.fromkeys((self.PROVIDER, key)):
            c = self._circuits.get(name)
            if c is None or c.opened_at is None:
                continue
            left = c.cooldown - (self._clock() - c.opened_at)
            what = (f"{c.failures} consecutive authentication failures (check the API key)" if c.kind == "auth"
                    else f"{c.failures} consecutive failures ({c.reason})")
            if left > 0:
                return f"circuit breaker open after {what}; no request for another {left:.0f}s"
            if c.probing:
                return f"circuit breaker half-open after {what}; a probe call is deciding"
            if take_probe:
                c.probing = True
        return None

    def check(self, what: str = "summarizer", key: str = "") -> None:
        """Raise SummarizerError if a call for ``key`` (a model) may not be made now. In
        half-open state the first caller becomes the probe."""
        with self._lock:
            why = self._blocked(key, take_probe=True)
        if why is not None:
            raise SummarizerError(f"{what}: {why}")

    def _circuit(self, key: str) -> _Circuit:
        return self._circuits.setdefault(key, _Circuit())

    def _fail(self, key: str, kind: str, limit: int, cooldown: float, reason: str) -> None:
        c = self._circuit(key)
        if c.kind != kind:
            c.failures = 0
        c.kind = kind
        c.failures += 1
        c.reason = reason[:200]
        if c.failures >= limit or c.probing:  # (re-)open, also after a failed probe
            c.opened_at = self._clock()
            c.cooldown = cooldown
            c.opened_times += 1
        c.probing = False

    def record_auth_failure(self, key: str = "") -> None:
        """Credentials were refused: counts toward opening the provider-wide circuit."""
        with self._lock:
            probe = self._circuits.get(key)
            if key != self.PROVIDER and probe is not None:
                probe.probing = False
            self._fail(self.PROVIDER, "auth", self.threshold, self.cooldown, "authentication failed")

    def record_failure(self, key: str = "", reason: str = "unavailable") -> None:
        """The provider looked unavailable (5xx, 429, a timeout, no connection)."""
        with self._lock:
            self._fail(key, "unavailable", self.failure_threshold, self.failure_cooldown, reason)

    def record_success(self, key: str = "") -> None:
        """The provider answered: the circuits of ``key`` and of the provider close."""
        with self._lock:
            for name in dict.fromkeys((self.PROVIDER, key)):
                self._circuits.pop(name, None)

    def __repr__(self) -> str:
        return (f"CircuitBreaker(threshold={self.threshold}, cooldown={self.cooldown:g}, "
                f"failure_threshold={self.failure_threshold}, failure_cooldown={self.failure_cooldown:g})")
