"""Progress for long CLI work: a rich bar with the count, the total, the rate and the time
left on a terminal; one plain line to stderr every few seconds otherwise (a log or a CI
job sees that it is alive and how far it got), and a last line when it ends."""

from __future__ import annotations

import time
from types import TracebackType

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

__all__ = ["WorkProgress"]


class WorkProgress:
    """``with WorkProgress(console, "embedding") as bar: bar.update(done, total)``.

    ``quiet_seconds``: nothing is shown unless the work is still going after this long
    (a short step stays silent). ``disable``: never show anything (``--json``)."""

    def __init__(self, console: Console, label: str, *, unit: str = "", every: float = 3.0,
                 quiet_seconds: float = 0.5, disable: bool = False) -> None:
        self.console = console
        self.label = label
        self.unit = unit
        self.every = every
        self.quiet_seconds = quiet_seconds
        self.disable = disable
        self.done = 0
        self.total: int | None = None
        self._started = time.monotonic()
        self._last_line = 0.0
        self._lines = 0
        self._bar: Progress | None = None
        self._task: TaskID | None = None

    def __enter__(self) -> WorkProgress:
        self._started = time.monotonic()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._bar is not None:
            self._bar.stop()
        elif self._lines and not self.disable:
            self._line(final=True)

    def update(self, done: int, total: int | None = None) -> None:
        self.done = done
        if total is not None:
            self.total = total
        if self.disable or time.monotonic() - self._started < self.quiet_seconds:
            return
        if self.console.is_terminal:
            if self._bar is None:
                self._bar = Progress(TextColumn(self.label), BarColumn(), MofNCompleteColumn(),
                                     TextColumn(self.unit), TimeElapsedColumn(), TextColumn("eta"),
                                     TimeRemainingColumn(), console=self.console, transient=True)
                self._bar.start()
                self._task = self._bar.add_task(self.label, total=self.total)
            assert self._task is not None
            self._bar.update(self._task, completed=done, total=self.total)
        elif time.monotonic() - self._last_line >= self.every:
            self._line()

    def _line(self, *, final: bool = False) -> None:
        self._last_line = time.monotonic()
        self._lines += 1
        elapsed = time.monotonic() - self._started
        unit = f" {self.unit}" if self.unit else ""
        if self.total:
            share = min(1.0, self.done / self.total)
            text = f"{self.label}: {self.done:,}/{self.total:,}{unit} ({share:.0%}), {_clock(elapsed)} elapsed"
            if 0 < share < 1 and not final:
                text += f", about {_clock(elapsed * (1 - share) / share)} left"
        else:
            text = f"{self.label}: {self.done:,}{unit}, {_clock(elapsed)} elapsed"
        self.console.print(text, soft_wrap=True, highlight=False)


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"
