"""Progress for long CLI work: a rich bar with the count, the total, the time spent and the
time left on a terminal; one plain line to stderr every few seconds otherwise (a log or a
CI job sees that it is alive and how far it got), and a last line when it ends.

The time left is this module's own estimate, not rich's: rich derives a speed from the
updates of the last 30 seconds and shows ``-:--:--`` until it has two, which a step that
reports every few hundred items (embedding batches, import buffers) may not give it for
a long while. Here the rate is measured from the first update that made progress (so a
model loading before the first batch does not count as slow work) and, until a second
one comes, from the start."""

from __future__ import annotations

import threading
import time
from types import TracebackType

from rich.console import Console
from rich.filesize import decimal
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

__all__ = ["WorkProgress"]


class WorkProgress:
    """``with WorkProgress(console, "embedding") as bar: bar.update(done, total)``.

    ``quiet_seconds``: nothing is shown unless the work is still going after this long
    (a short step stays silent). ``disable``: never show anything (``--json``). A ticker
    thread keeps it alive between updates: the bar appears once ``quiet_seconds`` have
    passed even if the first batch is still running, its time left counts down, and off a
    terminal a line comes every ``every`` seconds whether or not an update came.

    ``rate``: show the rate (``96 units/s``) as well, and on a terminal a last line with
    the count, time and mean rate when the bar goes. ``intro``: a line printed once,
    above the bar or before the first line, when the work is still going after
    ``quiet_seconds`` (what is being done, and how not to wait for it)."""

    def __init__(self, console: Console, label: str, *, unit: str = "", every: float = 3.0,
                 quiet_seconds: float = 0.5, disable: bool = False, sizes: bool = False, rate: bool = False,
                 intro: str | None = None) -> None:
        self.console = console
        self.label = label
        self.unit = unit
        self.sizes = sizes  # the counts are bytes: shown as "1.2/3.4 MB"
        self.every = every
        self.quiet_seconds = quiet_seconds
        self.disable = disable
        self.rate = rate
        self.intro = intro
        self.done = 0
        self.total: int | None = None
        self._started = time.monotonic()
        self._last_line = 0.0
        self._lines = 0
        self._last_shown: tuple[int, int | None] | None = None  # (done, total) of the last line
        self._bar: Progress | None = None
        self._task: TaskID | None = None
        self._first: tuple[float, int] | None = None  # (when, done) of the first update that made progress
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    def __enter__(self) -> WorkProgress:
        self._started = time.monotonic()
        if not self.disable:
            self._ticker = threading.Thread(target=self._tick, name="lossless-progress", daemon=True)
            self._ticker.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
        with self._lock:
            if self._bar is not None:
                self._bar.stop()
                if self.rate and exc_type is None:
                    self._line(final=True)
            elif self._lines and not self.disable and self._last_shown != (self.done, self.total):
                self._line(final=True)

    def update(self, done: int, total: int | None = None) -> None:
        with self._lock:
            self.done = done
            if total is not None:
                self.total = total
            if self._first is None and done > 0:
                self._first = (time.monotonic(), done)
            self._show()

    def _tick(self) -> None:
        while not self._stop.wait(min(0.5, self.every) if self.every > 0 else 0.5):
            with self._lock:
                # off a terminal with every=0 a line comes at each update: the ticker only
                # says what no line said yet, never the same line again
                if self.console.is_terminal or self.every > 0 or self._last_shown != (self.done, self.total):
                    self._show()

    def _show(self) -> None:
        """Draw the bar or (when due) a line; the caller holds the lock."""
        now = time.monotonic()
        if self.disable or now - self._started < self.quiet_seconds:
            return
        if self.intro is not None:
            self.console.print(self.intro, soft_wrap=True, highlight=False)
            self.intro = None
        if self.console.is_terminal:
            if self._bar is None:
                self._bar = Progress(TextColumn(self.label), BarColumn(), TextColumn("{task.fields[count]}"),
                                     TextColumn("{task.fields[rate]}"), TimeElapsedColumn(),
                                     TextColumn("{task.fields[left]}"), console=self.console, transient=True)
                self._bar.start()
                self._task = self._bar.add_task(self.label, total=self.total, count="", rate="", left="")
            assert self._task is not None
            left = self.seconds_left()
            per_second = self.per_second() if self.rate else None
            self._bar.update(self._task, completed=self.done, total=self.total, count=self._count(),
                             rate=self._rate_text(per_second) if per_second is not None else "",
                             left=f"eta {_clock(left)}" if left is not None else "eta …")
        elif now - self._last_line >= self.every:
            self._line()

    def seconds_left(self) -> float | None:
        """The time left at the rate measured so far; None before any progress or
        without a total."""
        if not self.total or self.done <= 0:
            return None
        if self.done >= self.total:
            return 0.0
        rate = self.per_second()
        return None if not rate else (self.total - self.done) / rate

    def per_second(self) -> float | None:
        """The rate so far, counted from the first update that made progress (from the
        start while that is the only one); None before any progress."""
        if self.done <= 0:
            return None
        now = time.monotonic()
        since, base = self._first if self._first is not None else (self._started, 0)
        if self.done <= base or now - since < 1e-3:  # one update so far: the rate since the start
            since, base = self._started, 0
        return (self.done - base) / max(now - since, 1e-3)

    def _rate_text(self, per_second: float) -> str:
        unit = self.unit or "items"
        return f"{per_second:,.1f} {unit}/s" if per_second < 10 else f"{per_second:,.0f} {unit}/s"

    def _count(self) -> str:
        unit = f" {self.unit}" if self.unit else ""
        if self.sizes:
            return f"{decimal(self.done)}/{decimal(self.total)}" if self.total else decimal(self.done)
        return f"{self.done:,}/{self.total:,}{unit}" if self.total else f"{self.done:,}{unit}"

    def _line(self, *, final: bool = False) -> None:
        self._last_line = time.monotonic()
        self._lines += 1
        self._last_shown = (self.done, self.total)
        elapsed = time.monotonic() - self._started
        text = f"{self.label}: {self._count()}"
        if self.total:
            text += f" ({min(1.0, self.done / self.total):.0%})"
        if self.rate and self.done > 0:
            # the last line gives the mean over the whole run, model loading included
            per_second = self.done / max(elapsed, 1e-3) if final else self.per_second()
            if per_second is not None:
                text += f", {self._rate_text(per_second)}"
        text += f", {_clock(elapsed)} elapsed"
        left = None if final else self.seconds_left()
        if left is not None and self.total and 0 < self.done < self.total:
            text += f", about {_clock(left)} left"
        self.console.print(text, soft_wrap=True, highlight=False)


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"
