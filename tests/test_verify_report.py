"""`lossless verify` on a damaged store: a summary first (how many problems, in the file or
in the stored messages, and what to do), then at most ten of the raw lines unless
``--all`` (issue 30: a damaged page printed 62-100+ raw integrity lines and nothing else).
Run as the real command on a SQLite file damaged on disk."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import apsw
import pytest

import lossless
from tests.conftest import chat

pytestmark = pytest.mark.sqlite_only(reason="damages a SQLite file on disk")

ROOT = Path(__file__).resolve().parent.parent


def _cli(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOSSLESS_")}
    env.update(PYTHONPATH=str(ROOT / "src"), LOSSLESS_EMBEDDER="none", LOSSLESS_HOME=str(db.parent))
    return subprocess.run([sys.executable, "-m", "lossless", "--db", str(db), *args], capture_output=True,
                          text=True, env=env, timeout=120, stdin=subprocess.DEVNULL)


def _store(db: Path) -> None:
    with lossless.open(db, embedder=None, context_window=4096) as mem:
        mem.conversation("c").add_many(chat(400))
    conn = apsw.Connection(str(db))
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # everything in the main file, to damage there
    conn.close()


def _damage_index_page(db: Path) -> None:
    """Flip bits in the cells of one leaf page of the messages' time index (verify reads by seq): the file still
    opens and reads, SQLite's integrity check lists a line for each row it lost."""
    conn = apsw.Connection(str(db))
    page_size = next(conn.execute("PRAGMA page_size"))[0]
    page = next(conn.execute("SELECT pageno FROM dbstat WHERE name = 'messages_time' "
                             "AND pagetype = 'leaf' ORDER BY pageno LIMIT 1"))[0]
    conn.close()
    with db.open("r+b") as f:
        f.seek((page - 1) * page_size + page_size // 2)
        cells = bytearray(f.read(page_size // 2))
        for i in range(0, len(cells), 7):
            cells[i] ^= 0x01
        f.seek((page - 1) * page_size + page_size // 2)
        f.write(cells)


def test_verify_on_a_damaged_page_summarizes_before_the_raw_lines(tmp_path: Path) -> None:
    db = tmp_path / "damaged.db"
    _store(db)
    assert _cli(db, "verify").returncode == 0
    _damage_index_page(db)

    done = _cli(db, "--json", "verify")
    report = json.loads(done.stdout)
    problems = report["problems"]
    assert done.returncode == 1 and not report["ok"] and len(problems) > 10, problems
    assert "export --all" in report["fix"] and "backup" in report["fix"]

    done = _cli(db, "verify")
    lines = done.stdout.splitlines()
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert lines[0] == f"damaged: {len(problems)} problems found"
    assert "the database file" in lines[1] and "integrity check" in lines[1]
    assert any(line.startswith("what to do: ") and "export --all" in line for line in lines[:4])
    raw = [line for line in lines if line.startswith("  integrity_check: ")]
    assert len(raw) == 10 and f"(all {len(problems)}: --all)" in done.stdout
    assert len(lines) <= 15

    every = _cli(db, "verify", "--all")
    assert every.returncode == 1
    assert len([line for line in every.stdout.splitlines() if line.startswith("  integrity_check: ")]) == len(problems)


def test_verify_on_a_file_it_cannot_read_still_gives_a_verdict(tmp_path: Path) -> None:
    db = tmp_path / "unreadable.db"
    _store(db)
    conn = apsw.Connection(str(db))
    page_size = next(conn.execute("PRAGMA page_size"))[0]
    root = next(conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'messages'"))[0]
    conn.close()
    with db.open("r+b") as f:  # the messages table's root page: nothing of the table reads
        f.seek((root - 1) * page_size)
        f.write(os.urandom(page_size))
    done = _cli(db, "verify")
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stdout.startswith("damaged: 1 problem found") and "what to do: " in done.stdout
    assert "cannot be read" in done.stdout


def test_verify_names_the_conversations_whose_stored_text_changed(tmp_path: Path) -> None:
    db = tmp_path / "edited.db"
    _store(db)
    conn = apsw.Connection(str(db))
    for (name,) in list(conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'messages'")):
        conn.execute(f'DROP TRIGGER "{name}"')  # as someone editing the file behind lossless's back would
    conn.execute("UPDATE messages SET content = content || ' (edited)' WHERE seq IN (3, 5)")
    conn.close()
    done = _cli(db, "verify")
    lines = done.stdout.splitlines()
    assert done.returncode == 1 and lines[0] == "damaged: 2 problems found", done.stdout
    assert lines[1].startswith("  stored messages and summaries: 2 in 1 conversation (c)")
    assert lines[2].startswith("what to do: ") and lines[3] == "every problem:"
    assert all(line.startswith("  c: ") for line in lines[4:]) and len(lines) == 6
