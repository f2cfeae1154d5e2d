"""Seed 003's forgetting policy ("防止无限增长"): capacity per owner pool, age since last
use, importance floor; applied by the worker, reported by a dry run, each record gone
logged with its text and restorable."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta

import pytest

import lossless
from lossless.cli import main
from lossless.core.errors import ValidationError
from lossless.longterm import ForgetPolicy
from tests.conftest import StoreTarget

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)


def _contents(mem: lossless.Memory) -> set[str]:
    return {r.content for r in mem.memories.ls(limit=1000)}


def test_capacity_removes_the_least_valuable_first_and_dry_run_changes_nothing(store_target: StoreTarget) -> None:
    mem = lossless.open(store_target("cap"), embedder=None, memory_capacity=None)
    try:
        mem.memories.clock = lambda: NOW
        add = mem.memories.add
        add("ann keeps her notes in Obsidian", user="ann", importance=0.9, created_at=NOW - timedelta(days=5))
        add("ann likes green tea", user="ann", importance=0.3, created_at=NOW - timedelta(days=4))
        add("ann once visited Oslo", user="ann", importance=0.3, created_at=NOW - timedelta(days=1))
        add("ann's laptop is a ThinkPad", user="ann", importance=0.6, created_at=NOW - timedelta(days=3))
        add("bob uses vim", user="bob", importance=0.1, created_at=NOW - timedelta(days=9))
        add("Deploys freeze on Fridays", importance=0.2, created_at=NOW - timedelta(days=9))  # global
        before = _contents(mem)
        policy = ForgetPolicy(capacity=2)
        report = mem.memories.apply_policy(policy, dry_run=True)
        # same importance: the less recently used (older) goes first
        assert [(f.record.content, f.reason) for f in report] == [
            ("ann likes green tea", "capacity"), ("ann once visited Oslo", "capacity")]
        assert _contents(mem) == before and mem.memories.forgotten() == []
        gone = mem.memories.apply_policy(policy)
        assert {f.record.content for f in gone} == {"ann likes green tea", "ann once visited Oslo"}
        assert _contents(mem) == before - {"ann likes green tea", "ann once visited Oslo"}
        assert mem.memories.search("green tea", user="ann") == []
        log = mem.memories.forgotten()
        assert {(f.record.content, f.reason) for f in log} == {("ann likes green tea", "capacity"),
                                                               ("ann once visited Oslo", "capacity")}
        assert all(f.forgotten_at == NOW for f in log)
        # restorable: same id, fields; out of the log
        tea = next(f.record for f in log if "tea" in f.record.content)
        back = mem.memories.restore(tea.id)
        assert (back.id, back.user, back.importance, back.created_at) == (tea.id, "ann", 0.3, tea.created_at)
        assert [f.record.id for f in mem.memories.forgotten()] != [] and tea.id not in {
            f.record.id for f in mem.memories.forgotten()}
        with pytest.raises(lossless.NotFoundError):
            mem.memories.restore(tea.id)
    finally:
        mem.close()


def test_age_since_last_use_and_the_importance_floor(store_target: StoreTarget) -> None:
    mem = lossless.open(store_target("age"), embedder=None, memory_capacity=None)
    try:
        clock = [NOW - timedelta(days=100)]
        mem.memories.clock = lambda: clock[0]
        add = mem.memories.add
        add("the staging host is stg-4", user="ann", importance=0.7, created_at=clock[0])
        add("the build cache lives in /var/cache/b", user="ann", importance=0.7, created_at=clock[0])
        add("ann said hello on Monday", user="ann", importance=0.1, created_at=NOW)
        clock[0] = NOW - timedelta(days=2)
        assert mem.memories.search("staging host", user="ann")  # a use: no longer old
        clock[0] = NOW
        gone = mem.memories.apply_policy(ForgetPolicy(max_unused_days=30, importance_floor=0.2))
        assert sorted((f.record.content, f.reason) for f in gone) == [
            ("ann said hello on Monday", "importance"), ("the build cache lives in /var/cache/b", "unused")]
        assert _contents(mem) == {"the staging host is stg-4"}
        assert ForgetPolicy().active is False and mem.memories.apply_policy(ForgetPolicy()) == []
    finally:
        mem.close()


def test_the_policy_checks_its_values() -> None:
    with pytest.raises(ValidationError, match="memory_capacity"):
        lossless.Config(memory_capacity=0)
    with pytest.raises(ValidationError, match="memory_importance_floor"):
        lossless.Config(memory_importance_floor=1.5)
    with pytest.raises(ValidationError, match="memory_max_unused_days"):
        ForgetPolicy(max_unused_days=-1)
    assert lossless.Config().memory_capacity == 10_000


def test_the_worker_applies_the_policy(store_target: StoreTarget) -> None:
    mem = lossless.open(store_target("worker"), embedder=None, memory_capacity=2,
                        memory_policy_interval_seconds=0.2)
    try:
        for i in range(5):
            mem.memories.add(f"fact number {i} about the deploy", user="ann", importance=0.1 * (i + 1))
        mem.conversation("c").add("user", "wake the worker")
        deadline = time.monotonic() + 20
        while mem.memories.count() > 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _contents(mem) == {"fact number 3 about the deploy", "fact number 4 about the deploy"}
        assert len(mem.memories.forgotten()) == 3
    finally:
        mem.close()


def test_cli_forget_policy_dry_run_then_for_real(store_target: StoreTarget, capsys: pytest.CaptureFixture[str]) -> None:
    target = store_target("cli")
    mem = lossless.open(target, embedder=None, compaction="deferred")
    for i in range(4):
        mem.memories.add(f"note {i} on the release", user="ann", importance=0.2 + 0.1 * i)
    mem.save_settings(memory_capacity=3)  # the database's policy: the CLI and workers use it
    mem.close()
    assert main(["--db", str(target), "--json", "memory", "forget", "--policy", "--dry-run"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["dry_run"] is True and report["count"] == 1
    assert report["forgotten"][0]["reason"] == "capacity"
    assert report["forgotten"][0]["memory"]["content"] == "note 0 on the release"
    assert main(["--db", str(target), "--json", "memory", "forgotten"]) == 0
    assert json.loads(capsys.readouterr().out) == []
    assert main(["--db", str(target), "memory", "forget", "--policy"]) == 0
    assert "forgot 1 memory (1 capacity)" in capsys.readouterr().out
    assert main(["--db", str(target), "--json", "memory", "forgotten"]) == 0
    (entry,) = json.loads(capsys.readouterr().out)
    assert entry["memory"]["content"] == "note 0 on the release"
    assert main(["--db", str(target), "memory", "restore", entry["memory"]["id"]]) == 0
    capsys.readouterr()
    assert main(["--db", str(target), "memory", "forget", "--policy", "--user", "ann"]) == 1  # refused: one or the other
