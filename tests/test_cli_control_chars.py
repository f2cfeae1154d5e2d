"""Stored text can hold terminal escape sequences (an imported chat log, a tenant's
request): ``ESC[2J`` clears the screen, ``ESC]0;…`` retitles the window, ``ESC]52;…``
writes the clipboard. The CLI's views showed them raw, so reading a conversation ran them.
Now every view shows a control character as a visible sign (␛ for ESC), in a pipe too
(``| head`` still ends at a terminal); what is for programs stays exact: ``--json`` and
``expand`` into a pipe. On a terminal ``expand`` shows the signs too."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import lossless
from lossless.cli.terminal import visible

from .backends import StoreTarget
from .test_cli import Run
from .test_cli_expand_tty import _env, _on_a_terminal

HOSTILE = "看这里 \x1b[2J\x1b]0;pwned\x07 \x1b]52;c;cm0gLXJmIH4=\x07 \x9b31m 结束 end \x7f"
RAW = ("\x1b", "\x9b", "\x07", "\x7f")


@pytest.fixture
def run(store_target: StoreTarget, capsys: pytest.CaptureFixture[str]) -> Run:
    return Run(store_target("cli"), capsys, on_postgres=store_target.on_postgres)


@pytest.fixture
def hostile(run: Run) -> str:
    with lossless.open(run.db, embedder=None) as mem:
        return mem.conversation("对话").add(role="user", content=HOSTILE).id


def test_visible_signs() -> None:
    assert visible("a\x1b[31mb\tc\nd\x00\x7f\x85") == "a␛[31mb\tc\nd␀␡\\x85"
    assert visible("中文 plain") == "中文 plain"


@pytest.mark.parametrize("argv", [["show", "对话"], ["grep", "对话", "结束"], ["ls"], ["describe", "{id}"],
                                  ["assemble", "对话", "--budget", "500"], ["search", "--all", "结束"]])
def test_views_show_control_characters_as_signs(run: Run, hostile: str, argv: list[str]) -> None:
    status, out, err = run(*(a.replace("{id}", hostile) for a in argv))
    assert status == 0, err
    if argv[0] != "ls":  # (ls shows the conversation, not its text)
        assert "␛[2J" in out and "结束" in out, out
    assert not any(c in out + err for c in RAW), repr(out)


def test_json_keeps_the_exact_text(run: Run, hostile: str) -> None:
    status, out, err = run("--json", "show", "对话")
    assert status == 0, err
    assert json.loads(out)["tail"][0]["preview"] == HOSTILE  # the same text …
    assert not any(c in out for c in RAW), repr(out)  # … with every control character escaped


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal (POSIX)")
def test_expand_into_a_pipe_is_exact_and_on_a_terminal_shows_signs(run: Run, hostile: str, tmp_path: Path) -> None:
    env = _env(tmp_path)
    done = subprocess.run([sys.executable, "-m", "lossless", "--db", str(run.db), "expand", hostile],
                          env=env, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == HOSTILE.encode("utf-8")
    shown = _on_a_terminal([sys.executable, "-m", "lossless", "--db", str(run.db), "expand", hostile],
                           _env(tmp_path, COLUMNS="200"))
    assert shown.startswith(visible(HOSTILE)), repr(shown)
    assert not any(c in shown for c in RAW), repr(shown)
