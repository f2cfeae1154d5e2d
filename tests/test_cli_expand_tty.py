"""`lossless expand ID` reading a node's own text, as a real process: into a pipe stdout is
the stored text byte for byte, nothing added (even with FORCE_COLOR / TTY_COMPATIBLE, which
make rich treat a pipe as a terminal); on a terminal (a pseudo-terminal) text that does not
end a line is ended with one, so the footer on stderr starts on a line of its own."""

from __future__ import annotations

import os
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

import lossless

ROOT = Path(__file__).resolve().parents[1]
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
TEXTS = {
    "no-newline-zh": "第一行：今天和小美去公园散步。\n第二行没有换行",
    "no-newline-en": "The launch code is zebra-42.\nIt has no newline at the end",
    "newline-zh": "已经以换行结尾的文字。\n",
    "newline-en": "Text that already ends a line.\n",
}

pytestmark = pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal (POSIX)")


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE", "NO_COLOR")}
    return {**env, "LOSSLESS_EMBEDDER": "none", "LOSSLESS_HOME": str(tmp_path), "PYTHONPATH": str(ROOT / "src"),
            "PYTHONIOENCODING": "utf-8", **extra}


def _store(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A store with one message per text; each text's message id."""
    db = tmp_path / "expand.db"
    with lossless.open(db, embedder=None) as mem:
        conv = mem.conversation("对话")
        ids = {name: conv.add(role="user", content=text).id for name, text in TEXTS.items()}
    return db, ids


def _on_a_terminal(argv: list[str], env: dict[str, str]) -> str:
    """Run ``argv`` with stdout and stderr on one pseudo-terminal; all it showed there
    (the terminal's CR LF as LF, colours stripped)."""
    main, child = os.openpty()
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=child, stderr=child, env=env)
    finally:
        os.close(child)
    shown = bytearray()
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([main], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(main, 65536)
                except OSError:  # EIO: the process ended and the terminal's other side closed
                    break
                if not chunk:
                    break
                shown += chunk
            elif proc.poll() is not None:
                break
        assert proc.wait(timeout=30) == 0, shown.decode("utf-8", "replace")
    finally:
        os.close(main)
        if proc.poll() is None:
            proc.kill()
    return ANSI.sub("", shown.decode("utf-8").replace("\r\n", "\n"))


def test_expand_on_a_terminal_ends_the_text_before_the_footer(tmp_path: Path) -> None:
    db, ids = _store(tmp_path)
    for name, text in TEXTS.items():
        shown = _on_a_terminal([sys.executable, "-m", "lossless", "--db", str(db), "expand", ids[name]],
                               _env(tmp_path, COLUMNS="200"))
        assert shown.startswith(text), (name, shown)
        after = shown[len(text):]
        # text without a line end gets one; text with one gets no second (no blank line)
        if not text.endswith("\n"):
            assert after.startswith("\n"), (name, shown)
            after = after[1:]
        assert after.startswith(f"{ids[name]}: characters 0–{len(text):,} of {len(text):,}"), (name, shown)
        assert after.endswith("\n")


def test_expand_a_page_on_a_terminal_ends_its_line_too(tmp_path: Path) -> None:
    db, ids = _store(tmp_path)
    text = TEXTS["no-newline-zh"]
    shown = _on_a_terminal([sys.executable, "-m", "lossless", "--db", str(db), "expand", ids["no-newline-zh"],
                            "--max-chars", "5", "--page", "2"], _env(tmp_path, COLUMNS="200"))
    assert shown.startswith(text[5:10] + "\n" + f"{ids['no-newline-zh']}: characters 5–10"), shown


@pytest.mark.parametrize("forced", [{}, {"FORCE_COLOR": "1", "TTY_COMPATIBLE": "1"}], ids=["plain", "forced"])
def test_expand_into_a_pipe_is_the_exact_text(tmp_path: Path, forced: dict[str, str]) -> None:
    db, ids = _store(tmp_path)
    env = _env(tmp_path, **forced)
    for name, text in TEXTS.items():
        done = subprocess.run([sys.executable, "-m", "lossless", "--db", str(db), "expand", ids[name]],
                              env=env, capture_output=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert done.stdout == text.encode("utf-8"), name
        assert f"{ids[name]}: characters 0–".encode() in done.stderr
    for name in ("no-newline-zh", "no-newline-en"):  # page by page: the pages joined are the original
        text, pages = TEXTS[name], []
        for page in range(1, -(-len(text) // 12) + 1):
            piece = subprocess.run([sys.executable, "-m", "lossless", "--db", str(db), "expand", ids[name],
                                    "--max-chars", "12", "--page", str(page)], env=env, capture_output=True,
                                   timeout=120)
            assert piece.returncode == 0, piece.stderr
            pages.append(piece.stdout)
        assert len(pages) > 1 and b"".join(pages) == text.encode("utf-8"), name
