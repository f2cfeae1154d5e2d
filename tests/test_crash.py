"""Crash safety: writers killed with SIGKILL at random moments lose nothing they
acknowledged, leave no half-written summary, and compaction resumes after them.

The harness is ``bench/crash_soak.py`` (``python bench/crash_soak.py --kills 2000 --json``
for a longer soak); here it runs at least 200 kills in parallel lanes. The seed is
random per run and printed on failure (``LOSSLESS_CRASH_SEED`` pins it)."""

from __future__ import annotations

import importlib.util
import os
import random
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import lossless

from .backends import tamper

pytestmark = pytest.mark.sqlite_only(reason="the crash harness kills writers of one SQLite file and checks that file")

ROOT = Path(__file__).resolve().parent.parent
KILLS = int(os.environ.get("LOSSLESS_CRASH_KILLS", "200"))


def _harness() -> ModuleType:
    spec = importlib.util.spec_from_file_location("crash_soak", ROOT / "bench" / "crash_soak.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("crash_soak", module)
    spec.loader.exec_module(module)
    return module


soak_harness = _harness()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="the soak forks its writers")
@pytest.mark.slow
def test_sigkill_at_random_moments_loses_nothing_acknowledged(tmp_path: Path) -> None:
    seed = int(os.environ.get("LOSSLESS_CRASH_SEED", random.randrange(1 << 30)))
    result = soak_harness.soak(tmp_path, KILLS, lanes=3, seed=seed, max_delay=0.25, max_seconds=100)
    summary = f"seed {seed}: {result.to_json()}"
    assert result.problems == [], summary
    assert result.kills >= KILLS, summary  # every round ended in a SIGKILL mid-run
    assert result.acked > KILLS, summary  # and writers got work acknowledged before it
    assert result.leases_left_by_kills > 0, summary  # some kills landed mid-compaction
    assert result.resumed_compactions >= KILLS // 5 - 3, summary  # never blocked by a dead writer
    assert result.summaries > 0, summary


# -- the checker itself catches what it is there to catch ---------------------------------


def _write_like_a_writer(db: Path, batches: list[list[dict[str, Any]]]) -> list[Any]:
    mem = lossless.open(db, embedder=None, auto_compact=False)
    conv = mem.conversation(soak_harness.CONVERSATION)
    stored = [m for batch in batches for m in conv.add_many(batch)]
    mem.close()
    return stored


def _acks(stored: list[Any]) -> dict[int, tuple[str, str]]:
    return {m.seq: (m.id, soak_harness.sha(m.content)) for m in stored}


def test_checker_passes_an_intact_database(tmp_path: Path) -> None:
    db = tmp_path / "ok.db"
    stored = _write_like_a_writer(db, [soak_harness.batch_for(f"s.{i}") for i in range(12)])
    problems, counts = soak_harness.check_database(str(db), _acks(stored), resume=True)
    assert problems == [] and counts["stored"] == len(stored)


def test_checker_sees_a_lost_acknowledged_message(tmp_path: Path) -> None:
    db = tmp_path / "lost.db"
    stored = _write_like_a_writer(db, [soak_harness.batch_for(f"s.{i}") for i in range(3)])
    acks = _acks(stored)
    acks[len(stored) + 1] = ("msg_never_written", "0" * 64)
    problems, _ = soak_harness.check_database(str(db), acks, resume=False)
    assert any("is missing" in p for p in problems)


def test_checker_sees_a_torn_batch(tmp_path: Path) -> None:
    key = next(f"s.{i}" for i in range(100) if len(soak_harness.batch_for(f"s.{i}")) > 1)
    db = tmp_path / "torn.db"
    torn = soak_harness.batch_for(key)[:-1]  # the tool call without its last result
    _write_like_a_writer(db, [torn])
    problems, _ = soak_harness.check_database(str(db), {}, resume=False)
    assert any("torn batch" in p for p in problems)


def test_checker_sees_changed_content(tmp_path: Path) -> None:
    db = tmp_path / "changed.db"
    stored = _write_like_a_writer(db, [soak_harness.batch_for("s.0")])
    lossless.open(db, embedder=None).close()
    # simulate a torn write of the content column (the immutability triggers dropped first)
    tamper(str(db), "UPDATE messages SET content = substr(content, 1, 10) WHERE seq = 1")
    problems, _ = soak_harness.check_database(str(db), _acks(stored), resume=False)
    assert any("changed" in p for p in problems) and any("content hash" in p for p in problems)
