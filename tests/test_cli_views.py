"""`lossless show` (the DAG tree) and `lossless stats CONV` (compression, --plot)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import lossless
from lossless.cli import main
from lossless.cli.dag_view import duration
from tests.conftest import StoreTarget

T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)


@pytest.fixture
def db(store_target: StoreTarget, tmp_path: Path) -> str:
    path = str(store_target("views"))
    with lossless.open(path, embedder=None, context_window=2048) as mem:
        conv = mem.conversation("c1")
        conv.add_many([{"role": "user" if i % 2 == 0 else "assistant", "created_at": T0 + timedelta(hours=3 * i),
                        "content": f"Turn {i}: van {100 + i} leaves the Porto depot at dawn. " + "detail " * 30}
                       for i in range(80)])
        conv.compact(full=True)
        mem.conversation("empty-dag").add("user", "just one message")
    return path


def _run(db: str, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    status = main(["--db", db, *args])
    out, err = capsys.readouterr()
    return status, out, err


def test_show_tree_has_depths_tokens_and_time_spans(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = _run(db, capsys, "show", "c1")
    assert status == 0
    title = out.splitlines()[0]
    assert title.startswith("c1 · 80 messages, ") and "active context" in title and "× smaller" in title
    assert " d0 " in out and " d1 " in out  # depths
    assert "tok ← " in out and "×)" in out  # each summary's tokens and what it condenses
    assert "2024-03-01 → " in out and "d " in out  # time spans with durations
    assert "raw tail #" in out and " tok" in out.split("raw tail", 1)[1]
    assert out.splitlines()[1].split("whole-conversation root ", 1)[1].startswith("sum_")  # first, over #1…
    status, out, _ = _run(db, capsys, "show", "c1", "--json")
    assert status == 0 and json.loads(out)["root"]["first_seq"] == 1
    status, out, _ = _run(db, capsys, "show", "c1", "--levels", "0", "--tail", "1")
    assert status == 0 and re.search(r"… \d+ summaries", out) and "older raw-tail message" in out
    status, out, _ = _run(db, capsys, "show", "empty-dag")
    assert status == 0 and "raw tail #1–#1 · 1 message ·" in out and "#1 user just one message" in out


def test_duration() -> None:
    assert duration(T0, T0 + timedelta(days=3, hours=4)) == "3d 4h"
    assert duration(T0, T0 + timedelta(hours=2, minutes=5)) == "2h 5m"
    assert duration(T0, T0 + timedelta(seconds=40)) == "40s"


def test_stats_compression_and_plot(db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = _run(db, capsys, "--json", "stats", "c1")
    stats = json.loads(out)
    assert status == 0 and stats["raw_tokens"] == stats["message_tokens"]
    assert stats["active_context_tokens"] == stats["active_tokens"] < stats["raw_tokens"]
    assert stats["compression_ratio"] == round(stats["raw_tokens"] / stats["active_tokens"], 2)
    assert set(stats["summaries_per_depth"]) >= {"0", "1"}
    assert sum(stats["summaries_per_depth"].values()) == stats["summaries"]
    png = tmp_path / "c1.png"
    status, out, _ = _run(db, capsys, "stats", "c1", "--plot", str(png))
    assert status == 0 and "compression_ratio" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    status, _, err = _run(db, capsys, "stats", "c1", "--plot", str(tmp_path))
    assert status == 1 and "is a directory" in err
    status, _, err = _run(db, capsys, "stats", "--plot", str(png))
    assert status == 1 and "give CONV" in err



def test_plot_of_a_chinese_conversation_draws_or_names_what_it_cannot(store_target: StoreTarget,
                                                                      tmp_path: Path) -> None:
    """``stats 长对话 --plot`` drew the id in the title with DejaVu Sans alone: boxes, and
    matplotlib's "Glyph 38271 … missing from font(s)" warnings, with source lines, on
    stderr. Now the title falls back to an installed CJK font; where none is, one note
    names the characters it cannot draw and what to install, and no warning leaks."""
    from matplotlib import font_manager

    db = str(store_target("plot-zh"))
    with lossless.open(db) as mem:
        mem.conversation("长对话").add(role="user", content="我昨天去了公园，然后喝了一杯咖啡。")
    png = tmp_path / "长对话.png"
    done = subprocess.run([sys.executable, "-m", "lossless", "--db", db, "stats", "长对话", "--plot", str(png)],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "Warning" not in done.stderr and "missing from font" not in done.stderr, done.stderr
    err = " ".join(done.stderr.split())
    from lossless.cli.compression import _CJK_FONTS

    if {f.name for f in font_manager.fontManager.ttflist} & set(_CJK_FONTS):
        assert "note" not in err, err
    else:
        assert "no installed font draws '长对话' of the title" in err, err

def test_ls_shows_a_title_beside_each_id(store_target: StoreTarget, tmp_path: Path) -> None:
    """`lossless ls` named conversations by id only (issue 30): each gets a title, the one
    its metadata carries (an imported ChatGPT or Claude Code title), else the start of its
    first user message on one line."""
    import os
    import subprocess
    import sys

    path = str(store_target("titles"))
    with lossless.open(path, embedder=None) as mem:
        mem.conversation("imported", {"title": "Trip to Lisbon in May"}).add("user", "hello")
        plain = mem.conversation("plain")
        plain.add("system", "You are Atlas, a routing assistant.")
        plain.add("user", "Can the vans\n\nleave the Porto depot before six? " + "more words " * 40)
        mem.conversation("parts").add("user", [{"type": "text", "text": "What does this error mean?"},
                                               {"type": "image_url", "image_url": {"url": "data:,"}}])
        mem.conversation("assistant-only").add("assistant", "nobody asked")
    env = {**os.environ, "LOSSLESS_EMBEDDER": "none", "LOSSLESS_HOME": str(tmp_path)}
    env.pop("LOSSLESS_DB", None)

    def cli(*args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "lossless", "--db", path, *args], capture_output=True,
                              text=True, env=env, timeout=120, check=False)
        assert done.returncode == 0 and not done.stderr, done.stderr
        return done.stdout

    titles = {c["id"]: c["title"] for c in json.loads(cli("--json", "ls"))}
    assert titles["imported"] == "Trip to Lisbon in May"
    assert titles["plain"].startswith("Can the vans leave the Porto depot before six? more words")
    assert len(titles["plain"]) == 60 and titles["plain"].endswith("…")
    assert titles["parts"].startswith("What does this error mean?")
    assert titles["assistant-only"] is None
    table = cli("ls")
    row = next(line for line in table.splitlines() if "plain" in line)
    assert "Can the vans leave the Porto depot before six?" in row and "│" in row
    assert "Trip to Lisbon in May" in next(line for line in table.splitlines() if "imported" in line)
