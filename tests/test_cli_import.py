"""``lossless import`` run as a real process: Ctrl-C in the middle, and usage errors."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.backends import raw_query
from tests.conftest import StoreTarget


def _env(tmp_path: Path) -> dict[str, str]:
    env = {**os.environ, "LOSSLESS_HOME": str(tmp_path / "home"), "LOSSLESS_EMBEDDER": "none"}
    env.pop("LOSSLESS_DB", None)
    return env


def _stored(db: str) -> int:
    """Messages in the store so far (0 while it is still being created)."""
    if not db.startswith(("postgresql://", "postgres://")) and not Path(db).exists():
        return 0
    try:
        return int(raw_query(db, "SELECT count(*) FROM messages")[0][0])
    except Exception:  # no messages table yet: the importer is still creating the store
        return 0


def test_ctrl_c_mid_import_says_what_was_kept_and_the_same_command_resumes(store_target: StoreTarget,
                                                                           tmp_path: Path) -> None:
    db = str(store_target("sigint"))
    lines = [json.dumps({"conversation": "big", "role": "user" if i % 2 == 0 else "assistant",
                         "content": f"message {i} about the Porto depot", "external_id": f"e{i}"}) + "\n"
             for i in range(3000)]
    command = [sys.executable, "-m", "lossless", "--db", db, "import", "-", "--format", "openai"]
    with subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          env=_env(tmp_path), text=True) as proc:
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        try:
            proc.stdin.write("".join(lines[:1200]))  # two batches of 500 and some: then it waits for more
            proc.stdin.flush()
            deadline = time.monotonic() + 120
            while _stored(db) < 500:  # the first batch is written
                assert proc.poll() is None and time.monotonic() < deadline, "the import never wrote its first batch"
                time.sleep(0.05)
            proc.send_signal(signal.SIGINT)  # Ctrl-C while it reads the rest (stdin stays open)
            status = proc.wait(timeout=120)
            out, err = proc.stdout.read(), proc.stderr.read()
        finally:
            if proc.poll() is None:
                proc.kill()
    assert status == 130 and "Traceback" not in out + err
    kept = re.search(r"imported ([\d,]+) messages into 1 conversation", out)
    assert kept is not None, out
    assert "interrupted: run the same command again to import the rest" in out
    n = int(kept.group(1).replace(",", ""))
    assert n in (500, 1000) and _stored(db) == n  # whole batches: the one being read was not written

    again = subprocess.run(command, input="".join(lines), capture_output=True, text=True, env=_env(tmp_path),
                           timeout=300, check=False)
    assert again.returncode == 0, again.stderr
    assert f"imported {3000 - n:,} messages into 1 conversation" in again.stdout
    assert f"{n:,} already stored" in again.stdout
    assert _stored(db) == 3000
    assert raw_query(db, "SELECT count(DISTINCT external_id) FROM messages")[0][0] == 3000


def test_an_unknown_option_shows_the_commands_usage(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "lossless", "--db", str(tmp_path / "x.db"), "import", "--foo",
                             str(tmp_path / "chat.jsonl")], capture_output=True, text=True, env=_env(tmp_path),
                            timeout=120, check=False)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("usage: lossless import ")
    assert result.stderr.rstrip().endswith("lossless import: error: unrecognized arguments: --foo")
    assert not (tmp_path / "x.db").exists()


def test_a_file_refused_before_reading_leaves_no_new_database(tmp_path: Path) -> None:
    """``import notes.dat`` (a format that cannot be told), an empty ``.json`` or a bad
    ``--conversation`` were refused only after the new database had been created: a fresh
    ``--db`` was left behind, empty. Now they are refused first, as a missing file is."""
    unknown = tmp_path / "笔记.dat"
    unknown.write_text("随便写的一些文字\n没有说话人\n", encoding="utf-8")
    empty = tmp_path / "空.json"
    empty.write_bytes(b"")
    chat = tmp_path / "chat.txt"
    chat.write_text("用户：你好\n助手：你好！\n", encoding="utf-8")
    db = tmp_path / "new.db"
    for args, said in (([str(unknown)], "cannot tell the format of"), ([str(empty)], "is empty: nothing to import"),
                       ([str(chat), "--conversation", ""], "conversation id must be a non-empty string")):
        result = subprocess.run([sys.executable, "-m", "lossless", "--db", str(db), "import", *args],
                                capture_output=True, text=True, env=_env(tmp_path), timeout=120, check=False)
        assert result.returncode == 1 and said in result.stderr and "Traceback" not in result.stderr, result.stderr
        assert not db.exists(), args
