"""A full disk and a read-only store fail with a clear StoreError (never a raw apsw
exception), lose nothing already committed, and work again once space is freed.

Two ways in: a real small tmpfs (``mount -t tmpfs``, when this process may mount: root
on Linux; skipped otherwise), and always an apsw VFS shim that makes every write fail
with SQLITE_FULL or SQLITE_READONLY on cue."""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest

import lossless
from lossless.summarize.base import SummaryRequest, SummaryResult
from tests.conftest import chat

pytestmark = pytest.mark.sqlite_only(reason="a full disk and a read-only file under SQLite (an apsw VFS, a tmpfs)")

# -- a VFS that fails writes on cue ---------------------------------------------------------


class FaultyVFS(apsw.VFS):
    """The platform VFS, except that while ``fault`` is set every write raises it."""

    def __init__(self) -> None:
        self.fault: type[apsw.Error] | None = None
        self.base = apsw.vfs_names()[0]
        self.name = f"faulty-{uuid.uuid4().hex[:8]}"
        super().__init__(self.name, base=self.base, makedefault=True)

    def xOpen(self, name: Any, flags: Any) -> apsw.VFSFile:
        return FaultyFile(self, name, flags)


class FaultyFile(apsw.VFSFile):
    def __init__(self, vfs: FaultyVFS, name: Any, flags: Any) -> None:
        self.vfs = vfs
        super().__init__(vfs.base, name, flags)

    def xWrite(self, data: bytes, offset: int) -> None:
        if self.vfs.fault is not None:
            raise self.vfs.fault("injected by the test")
        super().xWrite(data, offset)


@pytest.fixture
def faulty() -> Iterator[FaultyVFS]:
    vfs = FaultyVFS()
    try:
        yield vfs
    finally:
        vfs.fault = None
        vfs.unregister()


def _snapshot(mem: lossless.Memory) -> tuple[Any, ...]:
    q = mem.store._query
    return (q("SELECT conversation_id, seq, content, content_hash FROM messages ORDER BY conversation_id, seq"),
            q("SELECT id, content, parent_id FROM summaries ORDER BY id"),
            q("SELECT id, content FROM memories ORDER BY id"))


def _filled(path: Path, **config: Any) -> lossless.Memory:
    mem = lossless.open(path, embedder=None, context_window=2048, fresh_tail_count=4, **config)
    conv = mem.conversation("c", metadata={"user": "ann"})
    conv.add_many(chat(40, words=30, tools_every=6))
    conv.compact(force=True)
    mem.memories.add("Prefers metric units", kind="preference", user="ann")
    return mem


@pytest.mark.parametrize(("fault", "phrase"), [(apsw.FullError, "disk is full"),
                                              (apsw.ReadOnlyError, "read-only"),
                                              (apsw.IOError, "I/O error")])
def test_failing_writes_are_store_errors_and_lose_nothing(
    tmp_path: Path, faulty: FaultyVFS, fault: type[apsw.Error], phrase: str
) -> None:
    mem = _filled(tmp_path / "f.db")
    conv = mem.conversation("c")
    before = _snapshot(mem)
    faulty.fault = fault
    attempts: list[Callable[[], object]] = [
        lambda: conv.add("user", "this one cannot be written"),
        lambda: conv.add_many([{"role": "user", "content": "nor"}, {"role": "assistant", "content": "these"}]),
        lambda: mem.memories.add("Nor this memory", user="ann"),
        lambda: mem.conversation("brand-new"),
        lambda: conv.compact(full=True),
        lambda: mem.save_settings(context_window=4096),
    ]
    for attempt in attempts:
        with pytest.raises(lossless.StoreError, match=phrase) as info:
            attempt()
        assert not isinstance(info.value, apsw.Error)
        # reads go on working while writes fail
        assert conv.assemble(budget_tokens=1000, query="service port").tokens <= 1000
        assert conv.search("service")
    faulty.fault = None
    assert _snapshot(mem) == before  # nothing half-written
    assert mem.verify() == []
    # the store works again, and compaction is not blocked by the failed run's lease
    conv.add("user", "written after the disk recovered")
    assert conv.messages()[-1].content == "written after the disk recovered"
    report = conv.compact(full=True)
    assert report.skipped is None and len(conv.frontier()) == 1
    assert mem.verify() == []
    mem.close()


class _FillsTheDisk:
    """A summarizer that makes the disk fail just when compaction is about to write."""

    name = "fills-the-disk"

    def __init__(self, vfs: FaultyVFS) -> None:
        self.vfs = vfs
        self.armed = True
        self.called = threading.Event()

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        self.called.set()
        if self.armed:
            self.vfs.fault = apsw.FullError
        return SummaryResult(f"Span #{request.items[0].first_seq}-#{request.items[-1].last_seq}: checks.")


def test_a_full_disk_during_background_compaction_loses_nothing(
    tmp_path: Path, faulty: FaultyVFS, caplog: pytest.LogCaptureFixture
) -> None:
    summarizer = _FillsTheDisk(faulty)
    mem = lossless.open(tmp_path / "bg.db", embedder=None, summarizer=summarizer, context_window=2048,
                        fresh_tail_count=4, memory_flush=False)
    conv = mem.conversation("c")
    with caplog.at_level(logging.WARNING, logger="lossless"):
        stored = conv.add_many(chat(80, words=30))  # returns at once; the worker's compaction will fail
        assert summarizer.called.wait(10)
        deadline = time.monotonic() + 10
        while "disk is full" not in caplog.text and time.monotonic() < deadline:
            time.sleep(0.02)
    assert "worker" in caplog.text and "disk is full" in caplog.text
    faulty.fault = None
    summarizer.armed = False
    assert len(stored) == 80 and [m.seq for m in conv.messages()] == list(range(1, 81))
    assert mem.verify() == []  # no half-written summary
    # the work stayed owed, and is done once the disk has room again
    assert mem.wait_idle(30, retry_failed=True)
    assert conv.summaries() and mem.verify() == []
    mem.close()


def test_a_stored_message_is_acknowledged_even_if_its_compaction_hits_a_full_disk(
    tmp_path: Path, faulty: FaultyVFS, caplog: pytest.LogCaptureFixture
) -> None:
    summarizer = _FillsTheDisk(faulty)
    mem = lossless.open(tmp_path / "late.db", embedder=None, summarizer=summarizer, context_window=2048,
                        fresh_tail_count=4, memory_flush=False, compaction="inline")
    conv = mem.conversation("c")
    with caplog.at_level(logging.WARNING, logger="lossless"):
        stored = conv.add_many(chat(80, words=30))  # over the trigger: compaction runs, and fails
    faulty.fault = None
    assert len(stored) == 80 and [m.seq for m in conv.messages()] == list(range(1, 81))
    assert "compaction failed" in caplog.text and "disk is full" in caplog.text
    assert conv.summaries() == [] and mem.verify() == []
    summarizer.armed = False
    assert conv.compact().created  # the failed run's lease did not outlive it
    assert mem.verify() == []
    mem.close()


def test_cli_reports_a_full_disk_as_an_error_line(
    tmp_path: Path, faulty: FaultyVFS, capsys: pytest.CaptureFixture[str]
) -> None:
    from lossless.cli.main import main

    db = tmp_path / "cli.db"
    _filled(db).close()
    faulty.fault = apsw.FullError
    assert main(["--db", str(db), "add", "c", "--role", "user", "--content", "no room"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "disk is full" in err and "Traceback" not in err
    faulty.fault = None
    assert main(["--db", str(db), "add", "c", "--role", "user", "--content", "room again"]) == 0


# -- a real small tmpfs -------------------------------------------------------------------


@contextlib.contextmanager
def _tmpfs(where: Path, size: str) -> Iterator[Path]:
    where.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                              capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        pytest.skip("cannot run mount here")
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace').strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True, timeout=10)


needs_linux_root = pytest.mark.skipif(sys.platform != "linux" or os.geteuid() != 0,
                                      reason="mounting a tmpfs needs root on Linux")


@needs_linux_root
def test_a_really_full_disk(tmp_path: Path) -> None:
    with _tmpfs(tmp_path / "small", "2m") as disk:
        mem = lossless.open(disk / "x.db", embedder=None, context_window=2048, fresh_tail_count=4)
        # fill the disk but for ~150 KB, whatever room the schema's log took: room for a few adds
        free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
        filler = disk / "filler"
        filler.write_bytes(b"\0" * max(0, free - 150_000))
        conv = mem.conversation("c")
        acknowledged: list[str] = []
        with pytest.raises(lossless.StoreError, match="disk is full"):
            for i in range(10_000):
                text = f"message {i}: " + "payload " * 120
                conv.add("user" if i % 2 else "assistant", text)
                acknowledged.append(text)
        assert acknowledged  # (the worker's own rows, its claims and reports, share the little room)
        try:  # (it may fit after all: a checkpoint can let SQLite reuse the start of its log)
            conv.add("user", "still no room")
            acknowledged.append("still no room")
        except lossless.StoreError as exc:
            assert "disk is full" in str(exc)
        assert [m.content for m in conv.messages()] == acknowledged
        filler.unlink()  # free some space
        conv.add("user", "room again")
        assert [m.content for m in conv.messages()] == [*acknowledged, "room again"]
        conv.compact(force=True)
        assert mem.verify() == []
        mem.close()
        reopened = lossless.open(disk / "x.db", embedder=None)
        assert len(reopened.conversation("c").messages()) == len(acknowledged) + 1
        assert reopened.verify() == []
        reopened.close()


@needs_linux_root
def test_a_read_only_file_system(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from lossless.cli.main import main

    with _tmpfs(tmp_path / "ro", "4m") as disk:
        db = disk / "x.db"
        mem = _filled(db)
        before = _snapshot(mem)
        mem.close()
        subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True, timeout=10)
        with pytest.raises(lossless.StoreError, match="read-only") as info:
            lossless.open(db, embedder=None)
        assert not isinstance(info.value, apsw.Error)
        with pytest.raises(lossless.StoreError):
            lossless.open(disk / "new.db", embedder=None)
        assert main(["--db", str(db), "add", "c", "--role", "user", "--content", "x"]) == 1
        err = capsys.readouterr().err
        assert err.startswith("error: ") and "Traceback" not in err
        subprocess.run(["mount", "-o", "remount,rw", str(disk)], check=True, timeout=10)
        mem = lossless.open(db, embedder=None, context_window=2048)
        assert _snapshot(mem) == before and mem.verify() == []
        mem.conversation("c").add("user", "writable again")
        mem.close()
