"""Honest progress for big imports (issue 29 item 5), through the real ``lossless`` command:
the catch-up after ``import`` says what it does (units to embed for vector search), its
rate and time left, and that ``--no-wait`` leaves it to the worker; its count covers every
conversation imported (wait_idle's own count covered the slice in hand: over 128
conversations its total was short and went back and forth); ``stats`` and ``doctor`` give
the units owed, in text and JSON, with the core install too."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rich.console import Console

from lossless.cli.progress import WorkProgress
from tests.test_core_install import _HIDE, EXTRA_MODULES

ROOT = Path(__file__).resolve().parent.parent


def _chat(path: Path, conversations: int, turns: int) -> Path:
    lines = [json.dumps({"conversation": f"chat{c}", "role": "user" if i % 2 == 0 else "assistant",
                         "content": f"Chat {c} turn {i}: the depot in Porto needs van {c * 100 + i} checked.",
                         "external_id": f"c{c}-{i}"})
             for c in range(conversations) for i in range(turns)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _env(tmp_path: Path, embedder: str = "local") -> dict[str, str]:
    return {**os.environ, "LOSSLESS_HOME": str(tmp_path / "home"), "LOSSLESS_EMBEDDER": embedder}


def _lossless(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "lossless", *args], capture_output=True, text=True, env=env,
                          timeout=600, stdin=subprocess.DEVNULL)
    assert "Traceback" not in done.stdout + done.stderr, done.stderr
    return done


@pytest.mark.slow
def test_the_catch_up_after_import_says_what_it_does_its_rate_and_the_no_wait_way(tmp_path: Path) -> None:
    # 150 conversations (more than the 128 wait_idle counted at a time) of 4 messages
    db = str(tmp_path / "x.db")
    done = _lossless(_env(tmp_path), "--db", db, "import", str(_chat(tmp_path / "big.jsonl", 150, 4)))
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert lines[0] == ("catching up 150 conversation(s): embedding 600 units for vector search (keyword search "
                        "finds every message already). --no-wait returns at once and leaves this to `lossless "
                        "worker`; Ctrl-C stops here and leaves the rest to it"), lines
    counts = [(int(m[1].replace(",", "")), int(m[2].replace(",", "")))
              for m in (re.match(r"embedding: ([\d,]+)/([\d,]+) units", ln) for ln in lines[1:]) if m]
    assert counts and {total for _, total in counts} == {600}, lines  # every conversation counted, from the start
    assert [d for d, _ in counts] == sorted(d for d, _ in counts), lines  # never back
    assert re.fullmatch(r"embedding: 600/600 units \(100%\), [\d,.]+ units/s, \d+:\d\d elapsed", lines[-1]), lines
    stats = json.loads(_lossless(_env(tmp_path), "--db", db, "--json", "stats").stdout)
    assert stats["owed"] == {"conversations": 0, "units_to_embed": 0, "messages_to_compact": 0}


def test_no_wait_says_what_it_left_and_stats_and_doctor_count_it(tmp_path: Path) -> None:
    db = str(tmp_path / "x.db")
    env = _env(tmp_path)
    done = _lossless(env, "--db", db, "import", str(_chat(tmp_path / "c.jsonl", 3, 7)), "--no-wait")
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip() == ("--no-wait: embedding 21 units for vector search in 3 conversation(s) left to "
                                   "`lossless worker` (or an app that opens this store); keyword search finds every "
                                   "message now; `lossless stats` shows what is owed")
    figures = {"conversations": 3, "units_to_embed": 21, "messages_to_compact": 0}
    assert json.loads(_lossless(env, "--db", db, "--json", "stats").stdout)["owed"] == figures
    text = " ".join(_lossless(env, "--db", db, "stats").stdout.split())  # (wrapped at 80 columns in a pipe)
    assert "owed 21 units to embed (vectors not made yet), 0 messages to compact, in 3 conversations" in text, text
    doctor = _lossless(env, "--db", db, "doctor", "--quick")
    assert doctor.returncode == 0
    assert "21 units owed: vectors not made yet for 21 message(s) in 3 conversation(s)" in doctor.stdout
    assert "keep a process with the worker running (`lossless worker`" in doctor.stdout
    report = json.loads(_lossless(env, "--db", db, "--json", "doctor", "--quick").stdout)
    assert report["owed"] == figures
    vectors = {c["name"]: c for c in report["checks"]}["vectors"]
    assert vectors["status"] == "warn" and vectors["detail"].startswith("21 units owed")
    # the worker does them; then nothing is owed, and doctor says no more about vectors
    assert _lossless(env, "--db", db, "worker", "--once").returncode == 0
    assert json.loads(_lossless(env, "--db", db, "--json", "stats").stdout)["owed"]["units_to_embed"] == 0
    report = json.loads(_lossless(env, "--db", db, "--json", "doctor", "--quick").stdout)
    assert report["owed"]["units_to_embed"] == 0 and "vectors" not in {c["name"] for c in report["checks"]}


def test_no_wait_and_stats_count_no_model_work_for_text_the_model_does_not_read(tmp_path: Path) -> None:
    """The default model reads English: a Chinese conversation is passed without it, so
    neither ``--no-wait``'s note nor ``stats`` nor ``doctor`` promise embedding for it."""
    db = str(tmp_path / "x.db")
    env = _env(tmp_path)
    lines = [json.dumps({"conversation": "zh", "role": "user" if i % 2 == 0 else "assistant",
                         "content": f"第{i}次：我上次跟你说我去了哪个公园？在那里看到了一只白鹭。"}, ensure_ascii=False)
             for i in range(5)]
    (tmp_path / "zh.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    done = _lossless(env, "--db", db, "import", str(tmp_path / "zh.jsonl"), "--no-wait")
    assert done.returncode == 0 and done.stderr.strip() == "", done.stderr  # nothing left for the model
    figures = {"conversations": 0, "units_to_embed": 0, "messages_to_compact": 0}
    assert json.loads(_lossless(env, "--db", db, "--json", "stats").stdout)["owed"] == figures
    assert json.loads(_lossless(env, "--db", db, "--json", "stats").stdout)["not_embedded"] == {
        "conversations": 0, "messages": 0, "units": 0}
    # English beside it: only its messages are owed
    done = _lossless(env, "--db", db, "import", str(_chat(tmp_path / "c.jsonl", 1, 4)), "--no-wait")
    assert done.stderr.strip().startswith("--no-wait: embedding 4 units for vector search in 1 conversation(s)")
    assert json.loads(_lossless(env, "--db", db, "--json", "stats").stdout)["owed"] == {
        "conversations": 1, "units_to_embed": 4, "messages_to_compact": 0}
    report = json.loads(_lossless(env, "--db", db, "--json", "doctor", "--quick").stdout)
    assert {c["name"]: c for c in report["checks"]}["vectors"]["detail"].startswith("4 units owed")


def test_stats_and_doctor_give_the_owed_figures_with_the_core_install(tmp_path: Path) -> None:
    site = tmp_path / "hiding"
    site.mkdir()
    (site / "sitecustomize.py").write_text(_HIDE, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOSSLESS_")}
    env.update(PYTHONPATH=os.pathsep.join([str(site), str(ROOT / "src")]), LOSSLESS_HOME=str(tmp_path),
               HIDDEN_MODULES=",".join(EXTRA_MODULES))
    db = str(tmp_path / "core.db")
    done = _lossless(env, "--db", db, "import", str(_chat(tmp_path / "c.jsonl", 2, 6)), "--no-wait")
    assert done.returncode == 0 and "units" not in done.stderr  # no embedder: no vectors owed, nothing said
    figures = {"conversations": 0, "units_to_embed": None, "messages_to_compact": 0}
    assert json.loads(_lossless(env, "--db", db, "--json", "stats").stdout)["owed"] == figures
    text = " ".join(_lossless(env, "--db", db, "stats").stdout.split())
    assert "owed no embedder (keyword recall only), 0 messages to compact, in 0 conversations" in text, text
    report = json.loads(_lossless(env, "--db", db, "--json", "doctor", "--quick").stdout)
    assert report["ok"] and report["owed"] == figures


def test_a_file_that_is_not_there_is_one_line_and_no_store(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    done = _lossless(_env(tmp_path, "none"), "--db", str(db), "import", str(tmp_path / "missing.jsonl"))
    assert done.returncode != 0 and len(done.stderr.strip().splitlines()) == 1 and "missing.jsonl" in done.stderr
    assert not db.exists()
    done = _lossless(_env(tmp_path, "none"), "--db", str(db), "stats")
    assert done.returncode != 0 and done.stderr.strip().startswith("error: no database at")


def test_the_rate_and_the_time_left_in_the_lines_and_the_intro_once() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=200, color_system=None)
    with WorkProgress(console, "embedding", unit="units", every=0.2, quiet_seconds=0, rate=True,
                      intro="catching up: embedding 100 units") as bar:
        bar.update(0, 100)
        time.sleep(0.3)
        bar.update(20, 100)
        time.sleep(0.5)
        bar.update(100, 100)
    lines = out.getvalue().splitlines()
    assert lines[0] == "catching up: embedding 100 units" and lines.count(lines[0]) == 1
    assert any(re.fullmatch(r"embedding: 20/100 units \(20%\), [\d,.]+ units/s, 0:0\d elapsed, about 0:0\d left", ln)
               for ln in lines), lines
    assert re.fullmatch(r"embedding: 100/100 units \(100%\), [\d,.]+ units/s, 0:0\d elapsed", lines[-1]), lines


def test_the_bar_on_a_terminal_shows_the_rate_and_ends_with_a_line() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=160, color_system=None)
    with WorkProgress(console, "embedding", unit="units", quiet_seconds=0, rate=True, intro="catching up") as bar:
        bar.update(0, 500)
        time.sleep(0.3)
        bar.update(250, 500)
        time.sleep(0.8)
        bar.update(500, 500)
    text = out.getvalue()
    assert text.count("catching up") == 1 and re.search(r"250/500 units [\d,.]+ units/s", text)
    assert re.search(r"eta 0:0\d", text)
    assert re.search(r"embedding: 500/500 units \(100%\), [\d,.]+ units/s, 0:0\d elapsed", text), text
