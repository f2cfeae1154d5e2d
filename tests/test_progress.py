"""Long CLI steps show a total and the time left: a rich bar on a terminal, a line every
few seconds otherwise, both kept alive between updates (a first batch that takes a minute
is not a minute of silence), with a time left from the first update on."""

from __future__ import annotations

import io
import re
import time

from rich.console import Console

from lossless.cli.progress import WorkProgress


def _console(terminal: bool) -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=terminal, width=160, color_system=None), out


def test_lines_off_a_terminal_keep_coming_with_the_total_and_the_time_left() -> None:
    console, out = _console(False)
    with WorkProgress(console, "embedding", unit="units", every=0.2, quiet_seconds=0) as bar:
        bar.update(0, 100)
        time.sleep(0.5)  # no update: the first batch is still running, and a line says so
        assert "embedding: 0/100 units (0%)" in out.getvalue()
        bar.update(25, 100)
        time.sleep(0.5)
        bar.update(100, 100)
    lines = out.getvalue().splitlines()
    assert any(re.search(r"25/100 units \(25%\), 0:0\d elapsed, about 0:0\d left", ln) for ln in lines), lines
    assert lines[-1].startswith("embedding: 100/100 units (100%)")
    assert sum(ln.startswith("embedding: 100/100") for ln in lines) == 1  # the end said once


def test_the_bar_shows_a_time_left_after_a_single_update() -> None:
    # an embedding batch reports 256 of 533 units once, then works on: rich's own
    # estimate needs two updates and showed -:--:--
    console, out = _console(True)
    with WorkProgress(console, "embedding", unit="units", quiet_seconds=0) as bar:
        bar.update(0, 533)
        time.sleep(0.3)
        bar.update(256, 533)
        time.sleep(0.8)
    text = out.getvalue()
    assert "256/533 units" in text
    assert re.search(r"eta 0:0\d", text) and "-:--:--" not in text


def test_seconds_left_uses_the_rate_since_the_first_progress() -> None:
    console, _ = _console(False)
    bar = WorkProgress(console, "x", disable=True)
    with bar:
        bar.update(0, 1000)
        assert bar.seconds_left() is None  # nothing done: no estimate yet
        time.sleep(0.4)  # (a model loading: not counted once progress is measured)
        bar.update(100, 1000)
        time.sleep(0.1)
        bar.update(200, 1000)
        left = bar.seconds_left()
        assert left is not None and 0.3 < left < 2.5
        bar.update(1000, 1000)
        assert bar.seconds_left() == 0.0
