"""REGEXP for SQLite: Python's ``regex`` module behind the SQL function, with a deadline
per search (``regex_deadline``), so an agent's pattern that backtracks exponentially ends
with an error instead of holding the process."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import regex  # type: ignore[import-untyped]

__all__ = ["REGEX_MAX_CHARS", "RegexTimeout", "regex_deadline", "regexp"]


class RegexTimeout(Exception):
    """A regular expression search ran past its deadline (see ``regex_deadline``)."""


_DEADLINE = threading.local()


@contextmanager
def regex_deadline(seconds: float) -> Iterator[None]:
    """Bound every REGEXP evaluation inside the block to ``seconds`` in total: a pattern
    that backtracks exponentially raises RegexTimeout instead of hanging the process."""
    _DEADLINE.at = time.monotonic() + seconds
    try:
        yield
    finally:
        _DEADLINE.at = None


REGEX_MAX_CHARS = 1 << 20  # a regex search reads the first MiB of each message: bounded memory per row


def regexp(*args: Any) -> int:
    pattern, value = args
    if not isinstance(value, str):
        return 0
    value = value[:REGEX_MAX_CHARS]
    at = getattr(_DEADLINE, "at", None)
    if at is None:
        return int(_compiled(str(pattern)).search(value) is not None)
    left = at - time.monotonic()
    if left <= 0:
        raise RegexTimeout(str(pattern))
    try:  # the regex module's search takes a timeout (re's cannot be interrupted) and lets
        # other threads run while it matches (concurrent)
        return int(_compiled(str(pattern)).search(value, timeout=left, concurrent=True) is not None)
    except TimeoutError:
        raise RegexTimeout(str(pattern)) from None


_REGEX_CACHE: dict[str, Any] = {}


def _compiled(pattern: str) -> Any:
    rx = _REGEX_CACHE.get(pattern)
    if rx is None:
        rx = regex.compile(pattern)
        if len(_REGEX_CACHE) > 64:
            _REGEX_CACHE.clear()
        _REGEX_CACHE[pattern] = rx
    return rx
