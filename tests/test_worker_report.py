"""A worker's row in the store's ``workers`` table (issue 30: an idle server wrote it every
5 s): written when what it says changes, else once a heartbeat of minutes; the readers
(`lossless stats`, doctor, the health page) still see a live worker as running and no
longer see one whose process is gone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import apsw

import lossless
from lossless.compaction.worker import REPORT_SECONDS
from lossless.store.backlog import WORKER_HEARTBEAT_SECONDS


def _rows(conn: apsw.Connection) -> list[tuple[str, str, float]]:
    return [(o, s, float(h)) for o, s, h in conn.execute("SELECT owner, state, heartbeat_ts FROM workers")]


def _data_version(conn: apsw.Connection) -> int:
    (version,) = next(conn.execute("PRAGMA data_version"))  # changes when another connection commits a change
    return int(version)


def test_an_idle_worker_writes_nothing_and_is_still_seen_running(tmp_path: Path) -> None:
    path = tmp_path / "idle.db"
    memory = lossless.open(path, embedder=None)
    try:
        memory.worker.start()
        watcher = apsw.Connection(str(path))
        rows: list[tuple[str, str, float]] = []
        for _ in range(200):  # its first report (bounded: 20 s)
            rows = _rows(watcher)
            if rows:
                break
            time.sleep(0.1)
        assert [state for _, state, _ in rows] == ["idle"]
        before = _data_version(watcher)
        time.sleep(REPORT_SECONDS + 2)  # the old worker rewrote its row every REPORT_SECONDS
        assert _data_version(watcher) == before, "the idle worker wrote to the store"
        assert _rows(watcher) == rows
        seen = memory.backlog.workers()
        assert [(w["owner"], w["state"]) for w in seen] == [(rows[0][0], "idle")]
        assert seen[0]["uptime_seconds"] >= REPORT_SECONDS  # counted from started_ts, not the row's age
        assert WORKER_HEARTBEAT_SECONDS >= 60  # a heartbeat of minutes
    finally:
        memory.close()


def test_a_worker_process_killed_on_this_host_is_not_counted_as_running(tmp_path: Path) -> None:
    """Rows of idle workers are written rarely, so how long a row counts grew to two
    heartbeats; a worker on this host whose process is gone is left out at once."""
    path = tmp_path / "killed.db"
    lossless.open(path, embedder=None).close()
    env = {**os.environ, "LOSSLESS_EMBEDDER": "none"}
    log = tmp_path / "worker.log"
    with log.open("w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "lossless", "--db", str(path), "worker"], env=env,
                                stdout=subprocess.DEVNULL, stderr=err)
    try:
        watcher = apsw.Connection(str(path))
        for _ in range(600):  # its first report (bounded: 60 s)
            if _rows(watcher) or proc.poll() is not None:
                break
            time.sleep(0.1)
        assert _rows(watcher), f"the worker never reported (exit {proc.poll()}): {log.read_text()}"
        memory = lossless.open(path, embedder=None, compaction="deferred")
        try:
            assert [w["kind"] for w in memory.backlog.workers()] == ["process"]
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
            assert len(_rows(watcher)) == 1  # its row stays behind ...
            assert memory.backlog.workers() == []  # ... and is not counted
        finally:
            memory.close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
