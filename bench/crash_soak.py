"""Crash soak: SIGKILL a writer at random moments and check that nothing acknowledged is lost.

Writers ingest into their own SQLite file (``add`` and ``add_many``, tool calls, automatic
and forced compactions, sometimes a slow summarizer so kills land mid-summary) and print
every message id the API acknowledged, flushed, after the call returned. The parent kills
each writer with SIGKILL after a random delay, reopens the database and checks:

* every acknowledged message is stored byte for byte (content and its sha256 equal);
* every stored message is one the writer generated (no torn or foreign rows);
* ``PRAGMA integrity_check`` is ``ok`` and ``verify()`` finds nothing (every summary's
  sources exist, the frontier and the raw tail partition the history, hashes match);
* compaction resumes: a compaction run by the parent after the kill is not blocked by
  the dead writer's lease and leaves ``verify()`` clean.

Starting a Python interpreter and importing lossless takes half a second, far longer
than a useful kill delay, so each lane runs a *zygote*: one child process that imports
lossless once and forks a fresh writer per round (``--zygote``); the parent kills the
forked writer, not the zygote. Lanes run in parallel, one database each.

    python bench/crash_soak.py --kills 2000 --json
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

CONVERSATION = "crash"
WINDOW = 1024
_WORDS = ("port", "5433", "deploy", "decided", "because", "error:", "数据库", "迁移", "決定", "🚀",
          "src/app.py", "v2.3.1", "latency", "42ms", "the", "we", "and", "Maya", "rollback", "ok")
_MAX_MESSAGES_PER_ROUND = 400  # a writer nobody kills stops by itself
_MAX_SECONDS_PER_ROUND = 20.0


# -- what a writer writes (the parent regenerates it to compare) -----------------------

def content_for(key: str) -> str:
    """The content of the message with this key; the key leads it, so the parent can
    tell which message a stored row claims to be."""
    rng = random.Random(key)
    words = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(5, 160)))
    return f"[{key}] {words}"


def batch_for(key: str) -> list[dict[str, Any]]:
    """One logical write: a single message, or an assistant tool call with its results."""
    rng = random.Random(f"shape:{key}")
    if rng.random() < 0.2:
        calls = [{"id": f"c_{key}_{k}", "type": "function", "function": {"name": "run", "arguments": "{}"}}
                 for k in range(rng.randint(1, 2))]
        out: list[dict[str, Any]] = [{"role": "assistant", "content": content_for(f"{key}a"), "tool_calls": calls}]
        out += [{"role": "tool", "tool_call_id": c["id"], "content": content_for(f"{key}t{k}")}
                for k, c in enumerate(calls)]
        return out
    role = "user" if rng.random() < 0.5 else "assistant"
    return [{"role": role, "content": content_for(f"{key}m")}]


def key_of(content: Any) -> str | None:
    if not isinstance(content, str) or not content.startswith("["):
        return None
    end = content.find("]")
    return content[1:end] if end > 0 else None


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# -- the writer (a forked child of the zygote) -----------------------------------------

class _SlowSummarizer:
    """The extractive summarizer, slowed down, so kills land while a summary is written."""

    name = "slow-extractive"

    def __init__(self, rng: random.Random) -> None:
        from lossless.summarize.extractive import ExtractiveSummarizer

        self.inner = ExtractiveSummarizer()
        self.rng = rng

    def summarize(self, request: Any) -> Any:
        time.sleep(self.rng.uniform(0.002, 0.03))
        return self.inner.summarize(request)


def _write(line: str) -> None:
    os.write(1, (line + "\n").encode())  # one write(2) per line: lines never interleave


def _writer(db: str, seed: str, slow: bool, window: int) -> None:
    import lossless

    rng = random.Random(seed)
    summarizer = _SlowSummarizer(rng) if slow else None
    mem = lossless.open(db, embedder=None, summarizer=summarizer, context_window=window,
                        fresh_tail_count=6, compaction_cooldown_seconds=0)
    conv = mem.conversation(CONVERSATION, metadata={"user": "crash-test"})
    _write("open")
    deadline = time.monotonic() + _MAX_SECONDS_PER_ROUND
    for i in range(_MAX_MESSAGES_PER_ROUND):
        if time.monotonic() > deadline:
            break
        key = f"{seed}.{i}"
        batch = batch_for(key)
        roll = rng.random()
        if len(batch) == 1 and roll < 0.5:
            stored = [conv.add(**batch[0])]
        else:
            # several logical writes in one transaction now and then
            if roll > 0.85:
                batch += batch_for(f"{key}x")
            stored = conv.add_many(batch)
        for msg in stored:  # acknowledged: the call returned
            _write(f"ack {msg.seq} {msg.id} {sha(str(msg.content))}")
        roll = rng.random()
        if roll < 0.04:
            conv.compact(full=rng.random() < 0.5)
            _write("compacted")
        elif roll < 0.05:
            conv.compact(emergency=True)
            _write("compacted")


def _zygote() -> None:
    """Import lossless once, then fork one writer per ``run DB SEED SLOW WINDOW`` line on stdin;
    say ``pid N`` after each fork and ``exit STATUS`` when that writer is gone."""
    import lossless
    from lossless.core.tokens import get_counter

    get_counter("cl100k_base").count("warm the tokenizer up before forking")
    lossless.open(":memory:", embedder=None).close()
    for line in sys.stdin:
        parts = line.split()
        if not parts:
            continue
        if parts[0] != "run":
            break
        db, seed, slow, window = parts[1], parts[2], parts[3] == "1", int(parts[4])
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                _writer(db, seed, slow, window)
            except BaseException as exc:  # anything but SIGKILL is a failure to report
                _write(f"error {type(exc).__name__}: {exc}".replace("\n", " "))
                code = 1
            finally:
                os._exit(code)
        _write(f"pid {pid}")
        _, status = os.waitpid(pid, 0)
        _write(f"exit {status}")


# -- the parent --------------------------------------------------------------------------

@dataclass
class SoakResult:
    kills: int = 0  # writers killed by SIGKILL while running
    rounds: int = 0
    acked: int = 0  # acknowledged messages, every one found intact
    stored: int = 0  # messages in the databases at the end
    compactions_seen: int = 0  # acknowledged compactions by writers
    leases_left_by_kills: int = 0  # kills that landed while the writer held a compaction lease
    resumed_compactions: int = 0  # parent compactions after a kill (none was blocked)
    summaries: int = 0
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def merge(self, other: SoakResult) -> None:
        for name in ("kills", "rounds", "acked", "stored", "compactions_seen", "leases_left_by_kills",
                     "resumed_compactions", "summaries"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.problems.extend(other.problems)

    def to_json(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in ("kills", "rounds", "acked", "stored", "compactions_seen",
                                                "leases_left_by_kills", "resumed_compactions", "summaries",
                                                "problems", "seconds")}


_BATCH_KEY = re.compile(r"^(.*?\.\d+x?)(?:m|a|t\d+)$")


def torn_batches(messages: list[Any]) -> list[str]:
    """Each ``add_many`` is one transaction: the stored messages, in seq order, must be
    whole batches (a tool call with all its results; a batch and its ``x`` companion
    written with it)."""
    problems: list[str] = []
    i, previous = 0, ""
    while i < len(messages):
        match = _BATCH_KEY.match(key_of(messages[i].content) or "")
        if match is None:
            return [f"message #{messages[i].seq} has no batch key"]
        base = match.group(1)
        expected = [m["content"] for m in batch_for(base)]
        got = [m.content for m in messages[i : i + len(expected)]]
        if got != expected:
            return [f"a torn batch at #{messages[i].seq}: {len(got)} of its messages differ from what was written"]
        if base.endswith("x") and previous != base[:-1]:
            problems.append(f"batch {base} at #{messages[i].seq} was stored without the batch written with it")
        previous = base
        i += len(expected)
    return problems


def check_database(db: str, acked: dict[int, tuple[str, str]], *, resume: bool) -> tuple[list[str], dict[str, int]]:
    """Everything the soak promises about one database after a kill; returns the
    problems found (none: []) and a few counts."""
    import lossless
    from lossless.core.types import Message

    problems: list[str] = []
    counts = {"lease_pid": 0, "resumed": 0, "stored": 0, "summaries": 0}
    mem = lossless.open(db, embedder=None, auto_compact=False, context_window=WINDOW, fresh_tail_count=6)
    try:
        (integrity,) = mem.store._query("PRAGMA integrity_check")[0]
        if integrity != "ok":
            problems.append(f"integrity_check: {integrity}")
        problems += mem.verify()
        conv = mem.get_conversation(CONVERSATION)
        stored: dict[int, Message] = {m.seq: m for m in conv.messages()} if conv is not None else {}
        counts["stored"] = len(stored)
        for seq, (mid, digest) in acked.items():
            msg = stored.get(seq)
            if msg is None:
                problems.append(f"acknowledged message #{seq} {mid} is missing")
            elif msg.id != mid or sha(str(msg.content)) != digest:
                problems.append(f"acknowledged message #{seq} {mid} changed")
        for msg in stored.values():
            key = key_of(msg.content)
            if key is None or msg.content != content_for(key):
                problems.append(f"stored message #{msg.seq} is not one the writer wrote: {str(msg.content)[:60]!r}")
        problems += torn_batches([stored[s] for s in sorted(stored)])
        for (owner,) in mem.store._query("SELECT owner FROM compaction_leases"):
            counts["lease_pid"] = int(owner.split(":")[1])  # host:pid:thread:token
        if resume and conv is not None:
            report = conv.compact(full=True, reason="after a crash")
            if report.skipped:
                problems.append(f"compaction after the kill was skipped: {report.skipped}")
            else:
                counts["resumed"] = 1
            problems += [f"after compaction: {p}" for p in mem.verify()]
            frontier = conv.frontier()
            if len(frontier) > 1:
                problems.append(f"a full compaction left {len(frontier)} frontier nodes")
            if mem.store.lease(CONVERSATION) is not None:
                problems.append("the lease is still held after the parent's compaction")
        counts["summaries"] = len(conv.summaries()) if conv is not None else 0
    finally:
        mem.close()
    return problems, counts


def _read_until(stream: IO[str], word: str, acked: dict[int, tuple[str, str]], result: SoakResult) -> str:
    """Read the zygote's lines up to the next one starting with ``word``; record acks."""
    while True:
        line = stream.readline()
        if not line:
            raise RuntimeError(f"the zygote exited while we waited for {word!r}")
        kind, _, rest = line.strip().partition(" ")
        if kind == "ack":
            seq, mid, digest = rest.split()
            acked[int(seq)] = (mid, digest)
        elif kind == "compacted":
            result.compactions_seen += 1
        elif kind == "error":
            result.problems.append(f"writer failed: {rest}")
        if kind == word:
            return rest


def run_lane(directory: Path, lane: int, kills: int, seed: int, *, max_delay: float = 0.12,
             rounds_per_db: int = 40, resume_every: int = 5, deadline: float | None = None) -> SoakResult:
    """One zygote and its writers, ``kills`` rounds, a fresh database every
    ``rounds_per_db`` rounds (so checks stay quick)."""
    result = SoakResult()
    rng = random.Random(f"{seed}:{lane}")
    proc = subprocess.Popen([sys.executable, __file__, "--zygote"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, bufsize=1)
    assert proc.stdin is not None and proc.stdout is not None
    acked: dict[int, tuple[str, str]] = {}
    db = ""
    try:
        for r in range(kills):
            if deadline is not None and time.monotonic() > deadline:
                break
            if r % rounds_per_db == 0:
                result.acked += len(acked)
                db = str(directory / f"lane{lane}-{r // rounds_per_db}.db")
                acked = {}
            # a small window compacts on almost every add, a larger one now and then
            slow, window = rng.random() < 0.4, rng.choice((1024, 1024, 2048, 4096))
            proc.stdin.write(f"run {db} {seed}-{lane}-{r} {int(slow)} {window}\n")
            proc.stdin.flush()
            pid = int(_read_until(proc.stdout, "pid", acked, result))
            # most kills land after the writer opened the store; a few while it opens
            time.sleep(rng.uniform(0, max_delay) if rng.random() < 0.9 else rng.uniform(0, 0.01))
            with contextlib.suppress(ProcessLookupError):  # it stopped by itself
                os.kill(pid, signal.SIGKILL)
            status = int(_read_until(proc.stdout, "exit", acked, result))
            result.rounds += 1
            if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL:
                result.kills += 1
            problems, counts = check_database(db, acked, resume=(r + 1) % resume_every == 0)
            result.leases_left_by_kills += counts["lease_pid"] == pid
            result.resumed_compactions += counts["resumed"]
            result.problems += [f"{Path(db).name} round {r}: {p}" for p in problems]
            if (r + 1) % rounds_per_db == 0 or r + 1 == kills:
                result.summaries += counts["summaries"]
                result.stored += counts["stored"]
            if problems:
                break
        result.acked += len(acked)
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stdout.close()
    return result


def soak(directory: Path, kills: int, *, lanes: int = 2, seed: int = 0, max_delay: float = 0.12,
         max_seconds: float | None = None) -> SoakResult:
    """``kills`` rounds spread over ``lanes`` parallel zygotes; stops early (with fewer
    kills) when ``max_seconds`` run out."""
    t0 = time.monotonic()
    deadline = t0 + max_seconds if max_seconds else None
    results = [SoakResult() for _ in range(lanes)]
    share = [kills // lanes + (1 if i < kills % lanes else 0) for i in range(lanes)]

    def lane(i: int) -> None:
        try:
            results[i] = run_lane(directory, i, share[i], seed, max_delay=max_delay, deadline=deadline)
        except Exception as exc:  # reported, not swallowed
            results[i].problems.append(f"lane {i}: {type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=lane, args=(i,)) for i in range(lanes)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    total = SoakResult()
    for r in results:
        total.merge(r)
    total.seconds = round(time.monotonic() - t0, 2)
    return total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--zygote", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--kills", type=int, default=200, help="rounds (each ends in a SIGKILL)")
    parser.add_argument("--lanes", type=int, default=os.cpu_count() or 2, help="parallel writers")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-delay", type=float, default=0.12, help="seconds before the kill, at most")
    parser.add_argument("--dir", type=Path, help="where the databases go (default: a temporary directory)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    if args.zygote:
        _zygote()
        return 0
    with tempfile.TemporaryDirectory(prefix="lossless-crash-") as tmp:
        result = soak(args.dir or Path(tmp), args.kills, lanes=args.lanes, seed=args.seed, max_delay=args.max_delay)
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
    else:
        print(f"{result.kills} kills in {result.rounds} rounds, {result.acked} acknowledged messages intact, "
              f"{result.leases_left_by_kills} kills mid-compaction, {result.resumed_compactions} compactions resumed, "
              f"{len(result.problems)} problems ({result.seconds} s)")
        for p in result.problems[:20]:
            print("  " + p)
    return 1 if result.problems else 0


if __name__ == "__main__":
    sys.exit(main())
