"""The worker's backlog: which conversations owe background work, and who is on them.

``append_messages`` queues its conversation in the same transaction as the messages
(one upsert), so work owed survives any crash. A worker *claims* rows (the oldest due
first) for a while, refreshes its claim as it goes, and then either *finishes* a row
(deleted, unless messages arrived after the seq it was claimed at: then it is released
for another turn), *releases* it unfinished (its slice of time ran out: back of the
queue), or *fails* it (an error: retried after a delay, the error kept for ``stats``).

A claim whose time ran out, or whose holder is a dead process on this host, is taken
over. On PostgreSQL the claim reads its rows ``FOR UPDATE SKIP LOCKED``, so workers on
several hosts never take the same row; on SQLite ``BEGIN IMMEDIATE`` does the same.
What is claimed is only who works on a conversation: the compaction lease and the
store's frontier check still make sure no summary is ever written twice.

The SQL is written once for both stores (:mod:`lossless.store.runner`); times are the
worker's clock (Unix seconds).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lossless.core.owners import HOST, holder_is_dead
from lossless.core.stats import BacklogError, BacklogSummary
from lossless.store.runner import SQLRunner, sql_runner

__all__ = ["QUEUE_SQL", "WORKER_HEARTBEAT_SECONDS", "Backlog", "BacklogRow", "Claim"]

# A worker writes its row in ``workers`` when what it reports changes (at most every few
# seconds), else once this often; readers count a row as a running worker for two of these
WORKER_HEARTBEAT_SECONDS = 300.0

# Run by append_messages inside its transaction: queue the conversation unless it is
# queued already (then nothing is written: a conversation written to message after message
# costs its writers no page of this table). What the work must reach is the conversation's
# last seq when a worker claims it, and a worker finishes a row only if no message came
# after that (see Backlog.finish).
QUEUE_SQL = (
    "INSERT INTO backlog (conversation_id, queued_seq, queued_ts, due_ts) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (conversation_id) DO NOTHING"
)


@dataclass(frozen=True, slots=True)
class Claim:
    """A backlog row this worker holds: the conversation, the seq its work must reach,
    since when work has been owed, how many attempts failed before, and the reason of a
    compaction asked for by a ``/compact`` message, if one was."""

    conversation_id: str
    queued_seq: int  # the conversation's last seq when claimed: the work must reach it
    queued_ts: float
    attempts: int
    force_reason: str | None = None


@dataclass(frozen=True, slots=True)
class BacklogRow:
    """One conversation's backlog row as :meth:`Backlog.row` reads it: the seq its work
    must reach, since when it has been owed, whether a worker holds it now, its failed
    attempts and the last error."""

    queued_seq: int
    queued_seconds: float
    in_progress: bool
    attempts: int
    last_error: str | None


class Backlog:
    def __init__(self, store: Any) -> None:
        self.runner: SQLRunner = sql_runner(store)

    def queue(self, conversation_id: str, seq: int | None = None) -> None:
        """Queue a conversation by hand (e.g. after ``compact --redo-fallbacks`` was asked
        to run in the background); ``seq`` defaults to its last seq."""
        now = time.time()
        with self.runner.transaction() as conn:
            if seq is None:
                row = conn.execute("SELECT last_seq FROM conversations WHERE id = ?", (conversation_id,)).fetchone()
                seq = int(row[0]) if row else 0
            conn.execute(QUEUE_SQL, (conversation_id, seq, now, now))

    def claim(self, owner: str, *, limit: int = 4, lease_seconds: float = 300.0,
              conversation_ids: Sequence[str] | None = None) -> list[Claim]:
        """Claim up to ``limit`` due rows, oldest due first (optionally only of these
        conversations). Rows held by a live worker are left alone."""
        now = time.time()
        where = "b.due_ts <= ? AND (b.claimed_until < ? OR substr(coalesce(b.owner, ''), 1, ?) = ?)"
        args: list[Any] = [now, now, len(HOST) + 1, f"{HOST}:"]
        if conversation_ids is not None:
            if not conversation_ids:
                return []
            # one bound value for the whole list (its length is the caller's: 33,000
            # placeholders failed with "too many SQL variables")
            among, values = self.runner.in_list("b.conversation_id", list(conversation_ids))
            where += f" AND {among}"
            args += values
        # PostgreSQL: lock the backlog rows read (not the conversations), skipping those
        # another worker's claim transaction holds
        lock = " FOR UPDATE OF b SKIP LOCKED" if self.runner.dialect == "postgresql" else ""
        claims: list[Claim] = []
        with self.runner.transaction() as conn:
            _fire_timers(conn, now)
            rows = conn.execute(
                f"SELECT b.conversation_id, c.last_seq, b.queued_ts, b.attempts, b.owner, b.claimed_until, "
                f"b.force_reason FROM backlog b JOIN conversations c ON c.id = b.conversation_id "
                f"WHERE {where} ORDER BY b.due_ts LIMIT ?{lock}", [*args, limit * 4],
            ).fetchall()
            for cid, seq, queued, attempts, holder, until, forced in rows:
                if len(claims) >= limit:
                    break
                if until >= now and not (holder and holder_is_dead(holder)):
                    continue  # a live worker of this host has it
                conn.execute("UPDATE backlog SET owner = ?, claimed_until = ? WHERE conversation_id = ?",
                             (owner, now + lease_seconds, cid))
                claims.append(Claim(cid, int(seq), float(queued), int(attempts), forced))
        return claims

    def arm_timer(self, conversation_id: str, due_ts: float) -> None:
        """Queue the conversation again at ``due_ts`` (its interval trigger is then due),
        without a new message: a worker's claim moves due timers into the backlog."""
        self.runner.query("INSERT INTO compaction_timers (conversation_id, due_ts) VALUES (?, ?) "
                          "ON CONFLICT (conversation_id) DO UPDATE SET due_ts = excluded.due_ts",
                          (conversation_id, due_ts))

    def timers(self) -> dict[str, float]:
        """The armed interval timers: conversation id -> when it is due (Unix seconds)."""
        return {c: float(t) for c, t in self.runner.query("SELECT conversation_id, due_ts FROM compaction_timers")}

    def force(self, conversation_id: str, reason: str) -> None:
        """Ask the worker for a compaction of everything outside the fresh tail, trigger
        or not (a ``/compact`` message); the conversation is queued if it was not."""
        now = time.time()
        with self.runner.transaction() as conn:
            row = conn.execute("SELECT last_seq FROM conversations WHERE id = ?", (conversation_id,)).fetchone()
            conn.execute(QUEUE_SQL, (conversation_id, int(row[0]) if row else 0, now, now))
            conn.execute("UPDATE backlog SET force_reason = ? WHERE conversation_id = ?", (reason, conversation_id))

    def forced_done(self, conversation_id: str, owner: str) -> None:
        self.runner.query("UPDATE backlog SET force_reason = NULL WHERE conversation_id = ? AND owner = ?",
                          (conversation_id, owner))

    def heartbeat(self, conversation_id: str, owner: str, lease_seconds: float = 300.0) -> None:
        self.runner.query("UPDATE backlog SET claimed_until = ? WHERE conversation_id = ? AND owner = ?",
                          (time.time() + lease_seconds, conversation_id, owner))

    def finish(self, claim: Claim, owner: str) -> bool:
        """The work the claim asked for is done: delete the row, unless messages arrived
        since it was claimed (then it goes back in line). True when it was deleted."""
        now = time.time()
        # PostgreSQL: take the conversation's row lock, as appends do before they queue, so
        # an append in flight is either seen here (its last_seq) or queues after the delete;
        # without it a READ COMMITTED delete could drop the row an uncommitted append found
        with self.runner.transaction() as conn:
            if self._last_seq_locked(conn, claim.conversation_id) <= claim.queued_seq:
                conn.execute("DELETE FROM backlog WHERE conversation_id = ? AND owner = ?",
                             (claim.conversation_id, owner))
            left = conn.execute("SELECT 1 FROM backlog WHERE conversation_id = ?",
                                (claim.conversation_id,)).fetchone()
            if left is not None:
                # the work still owed dates from the first message after the claimed seq
                conn.execute("UPDATE backlog SET owner = NULL, claimed_until = 0, attempts = 0, last_error = NULL, "
                             "due_ts = ?, queued_ts = ? WHERE conversation_id = ? AND owner = ?",
                             (now, now, claim.conversation_id, owner))
        return left is None

    def _last_seq_locked(self, conn: Any, conversation_id: str) -> int:
        """The conversation's last seq, read under its row lock on PostgreSQL (the lock
        appends take before they queue; see finish); 0 for an unknown conversation."""
        lock = " FOR UPDATE" if self.runner.dialect == "postgresql" else ""
        row = conn.execute(f"SELECT last_seq FROM conversations WHERE id = ?{lock}", (conversation_id,)).fetchone()
        return int(row[0]) if row else 0

    def clear(self, conversation_id: str, upto_seq: int) -> None:
        """The work owed up to ``upto_seq`` was done by the caller (``compaction="inline"``
        without an embedder): drop the row unless a worker holds it or more was queued."""
        with self.runner.transaction() as conn:
            if self._last_seq_locked(conn, conversation_id) <= upto_seq:
                conn.execute("DELETE FROM backlog WHERE conversation_id = ? AND claimed_until < ?",
                             (conversation_id, time.time()))

    def release(self, conversation_id: str, owner: str, *, delay: float = 0.0) -> None:
        """Give a row back unfinished: it waits behind every row due now (fair turns)."""
        self.runner.query("UPDATE backlog SET owner = NULL, claimed_until = 0, due_ts = ? "
                          "WHERE conversation_id = ? AND owner = ?", (time.time() + delay, conversation_id, owner))

    def fail(self, conversation_id: str, owner: str, error: str, *, retry_in: float) -> None:
        """The work failed: keep the row with the error, retry after ``retry_in`` seconds."""
        self.runner.query("UPDATE backlog SET owner = NULL, claimed_until = 0, due_ts = ?, attempts = attempts + 1, "
                          "last_error = ? WHERE conversation_id = ? AND owner = ?",
                          (time.time() + retry_in, error[:500], conversation_id, owner))

    def pending(self, conversation_ids: Sequence[str] | None = None) -> list[str]:
        """The queued conversations (of those given), oldest owed first."""
        if conversation_ids is not None:
            out: list[str] = []
            ids = list(conversation_ids)
            for i in range(0, len(ids), 500):
                chunk = ids[i : i + 500]
                out += [r[0] for r in self.runner.query(
                    f"SELECT conversation_id FROM backlog WHERE conversation_id IN ({','.join('?' * len(chunk))})",
                    chunk)]
            return out
        return [r[0] for r in self.runner.query("SELECT conversation_id FROM backlog ORDER BY queued_ts")]

    def failing(self, conversation_ids: Sequence[str] | None = None) -> dict[str, int]:
        """The rows (of these conversations) waiting out a delay after a failure, with
        their failed attempts."""
        sql = "SELECT conversation_id, attempts FROM backlog WHERE attempts > 0 AND claimed_until < ?"
        now = time.time()
        if conversation_ids is None:
            return {c: int(a) for c, a in self.runner.query(sql, (now,))}
        out: dict[str, int] = {}
        ids = list(conversation_ids)
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            out.update({c: int(a) for c, a in self.runner.query(
                f"{sql} AND conversation_id IN ({','.join('?' * len(chunk))})", [now, *chunk])})
        return out

    def retry_now(self, conversation_ids: Sequence[str]) -> None:
        """Make the failing rows of these conversations due now, without their delay."""
        now = time.time()
        ids = list(conversation_ids)
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            self.runner.query(f"UPDATE backlog SET due_ts = ? WHERE attempts > 0 AND claimed_until < ? "
                              f"AND conversation_id IN ({','.join('?' * len(chunk))})", [now, now, *chunk])

    def pending_any(self) -> bool:
        """Whether any work is owed at all (one indexed lookup)."""
        return bool(self.runner.query("SELECT 1 FROM backlog LIMIT 1"))

    def due(self, conversation_ids: Sequence[str]) -> list[str]:
        """Those of ``conversation_ids`` whose row is due now or being worked on (not
        waiting out a retry delay after a failure)."""
        now = time.time()
        out: list[str] = []
        ids = list(conversation_ids)
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            out += [r[0] for r in self.runner.query(
                f"SELECT conversation_id FROM backlog WHERE (due_ts <= ? OR claimed_until >= ?) "
                f"AND conversation_id IN ({','.join('?' * len(chunk))})", [now, now, *chunk])]
        return out

    def summary(self) -> BacklogSummary:
        """How far behind the workers are: conversations queued, since when the oldest
        work has been owed, how many are being worked on now, and the failing ones."""
        now = time.time()
        (count, oldest, claimed, failing) = self.runner.query(
            "SELECT count(*), min(queued_ts), coalesce(sum(CASE WHEN claimed_until >= ? THEN 1 ELSE 0 END), 0), "
            "coalesce(sum(CASE WHEN attempts > 0 THEN 1 ELSE 0 END), 0) FROM backlog", (now,))[0]
        errors = self.runner.query("SELECT conversation_id, attempts, last_error FROM backlog WHERE attempts > 0 "
                                   "ORDER BY due_ts LIMIT 5")
        return BacklogSummary(
            conversations=int(count),
            oldest_seconds=round(now - float(oldest), 1) if oldest is not None else 0.0,
            in_progress=int(claimed),
            failing=int(failing),
            errors=[BacklogError(conversation=c, attempts=int(a), error=e) for c, a, e in errors],
        )

    # -- the workers' reports -----------------------------------------------------------

    def report_worker(self, owner: str, kind: str, started: float, state: str, stats: dict[str, Any]) -> None:
        """Upsert a worker's row (its state and counters as JSON); rows older than a day
        (workers that died without saying goodbye) are deleted on the way."""
        now = time.time()
        with self.runner.transaction() as conn:
            conn.execute("DELETE FROM workers WHERE heartbeat_ts < ?", (now - 86400,))
            conn.execute(
                "INSERT INTO workers (owner, kind, started_ts, heartbeat_ts, state, stats) VALUES (?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (owner) DO UPDATE SET heartbeat_ts = excluded.heartbeat_ts, state = excluded.state, "
                "stats = excluded.stats",
                (owner, kind, started, now, state, json.dumps(stats, default=str, sort_keys=True)))

    def forget_worker(self, owner: str) -> None:
        self.runner.query("DELETE FROM workers WHERE owner = ?", (owner,))

    def workers(self, *, stale_after: float = 2 * WORKER_HEARTBEAT_SECONDS) -> list[dict[str, Any]]:
        """The workers running now: those that wrote their row in the last ``stale_after``
        seconds (an idle worker writes it once a heartbeat), less those of processes on
        this host that are gone (SIGKILL: their row stays until the next reads skip it).
        A read only: it writes nothing."""
        now = time.time()
        rows = self.runner.query("SELECT owner, kind, started_ts, heartbeat_ts, state, stats FROM workers "
                                 "WHERE heartbeat_ts >= ? ORDER BY started_ts", (now - stale_after,))
        return [{**json.loads(js), "owner": o, "kind": k, "uptime_seconds": round(now - float(s), 1),
                 "seconds_since_report": round(now - float(h), 1), "state": st}
                for o, k, s, h, st, js in rows if not holder_is_dead(o)]

    def row(self, conversation_id: str) -> BacklogRow | None:
        """The conversation's backlog row (None: nothing is owed)."""
        rows = self.runner.query("SELECT queued_seq, queued_ts, owner, claimed_until, attempts, last_error "
                                 "FROM backlog WHERE conversation_id = ?", (conversation_id,))
        if not rows:
            return None
        seq, queued, owner, until, attempts, error = rows[0]
        return BacklogRow(queued_seq=int(seq), queued_seconds=round(time.time() - float(queued), 1),
                          in_progress=bool(owner) and float(until) >= time.time(), attempts=int(attempts),
                          last_error=error)


def _fire_timers(conn: Any, now: float, limit: int = 100) -> None:
    """Move the interval timers that are due into the backlog (inside a claim's
    transaction): one index range on ``compaction_timers_due``, empty on most polls."""
    due = conn.execute("SELECT t.conversation_id, c.last_seq FROM compaction_timers t JOIN conversations c "
                       "ON c.id = t.conversation_id WHERE t.due_ts <= ? ORDER BY t.due_ts LIMIT ?",
                       (now, limit)).fetchall()
    for cid, seq in due:
        conn.execute(QUEUE_SQL, (cid, int(seq), now, now))
        conn.execute("DELETE FROM compaction_timers WHERE conversation_id = ? AND due_ts <= ?", (cid, now))
