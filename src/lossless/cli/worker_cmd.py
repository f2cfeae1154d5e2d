"""``lossless worker``: serve the backlog (compaction, retrieval units, embeddings) in a
process of its own. Any number of them may share one store: on PostgreSQL across hosts,
on a SQLite file across the processes of one host; each conversation is worked on by one
worker at a time (a claim in the backlog, and the compaction lease)."""

from __future__ import annotations

import argparse
import signal
import threading
import time
from collections.abc import Sequence
from types import FrameType
from typing import Any

from rich.text import Text

from lossless.cli.context import CommandContext
from lossless.cli.options import Subparsers, command_parents
from lossless.core.stats import BacklogSummary

__all__ = ["cmd_worker", "register"]


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not 0 < value <= 3600:
        raise argparse.ArgumentTypeError(f"expected seconds above 0 and at most 3600, got {text!r}")
    return value


def register(subparsers: Subparsers, parents: Sequence[argparse.ArgumentParser] | None = None) -> None:
    """Add the ``worker`` command. ``parents`` are the parsers of the options every
    command accepts (``--db``, ``--json`` …); by default the CLI's own."""
    p = subparsers.add_parser(
        "worker", parents=command_parents(parents), help="compact and embed in the background, as a process of its own",
        description="Serve the store's backlog: cut retrieval units and embed them, and compact conversations "
                    "whose triggers fire, for every conversation written to by any process (lossless serve, "
                    "your app with compaction='deferred', imports with --no-wait), and embed the conversations "
                    "stored without vectors for this embedder (before the embeddings extra was installed, or by "
                    "a process without it). Runs until stopped (Ctrl-C or "
                    "SIGTERM stop it after the step in hand; nothing is lost either way); --once stops when "
                    "nothing is left. Several workers share one store safely.")
    p.set_defaults(run=cmd_worker)
    p.add_argument("--once", action="store_true", help="work until nothing is due, then exit")
    p.add_argument("--poll", metavar="SECONDS", type=_seconds, default=1.0,
                   help="how often an idle worker looks for work written by other processes (default: 1)")
    p.add_argument("--slice", metavar="SECONDS", type=_seconds, default=2.0,
                   help="one turn on one conversation before the next gets its turn (default: 2)")
    p.add_argument("--status-every", metavar="SECONDS", type=_seconds, default=30.0,
                   help="print a status line at most this often while working (default: 30)")


def cmd_worker(ctx: CommandContext) -> int:
    from lossless.compaction.worker import Worker

    args = ctx.args
    memory = ctx.memory(create=False)
    worker = Worker(memory, slice_seconds=args.slice, poll_seconds=args.poll)
    stop = threading.Event()
    found = worker.look_for_unembedded(now=True)  # stored without vectors (before the embeddings extra, …)
    if found:
        ctx.err.print(Text(f"lossless worker: {len(found):,} conversation(s) stored without vectors for this "
                           "embedder, queued", style="dim"), soft_wrap=True)
    owed = memory.backlog.summary()
    ctx.err.print(Text(f"lossless worker: serving {ctx.db_path()} ({owed.conversations:,} conversation(s) owed "
                       f"work{_oldest(owed)}); Ctrl-C stops after the step in hand", style="dim"), soft_wrap=True)
    last = [time.monotonic()]

    def status(final: bool = False) -> None:
        if ctx.json or (not final and time.monotonic() - last[0] < args.status_every):
            return
        last[0] = time.monotonic()
        s = worker.stats.as_dict()
        left = memory.backlog.summary()
        ctx.err.print(Text(f"{'done' if final else 'working'}: {s['turns']:,} turns, {s['summaries_written']:,} "
                           f"summaries, {s['units_embedded']:,} units embedded ({s['units_per_busy_second']:,} "
                           f"per busy second), {s['errors']:,} errors; {left.conversations:,} conversation(s) "
                           f"still owed work{_oldest(left)}"), soft_wrap=True)

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if stop.is_set():
            raise KeyboardInterrupt  # a second Ctrl-C: stop now (each step is a transaction)
        stop.set()

    previous: list[Any] = []
    if threading.current_thread() is threading.main_thread():
        previous = [(sig, signal.signal(sig, on_signal)) for sig in (signal.SIGINT, signal.SIGTERM)]
    try:
        worker.run(stop=stop, until_idle=args.once, on_turn=status, kind="process")
    finally:
        for sig, handler in previous:
            signal.signal(sig, handler)
    status(final=True)
    if ctx.json:
        ctx.emit_json({"worker": worker.status(), "backlog": memory.backlog.summary().to_dict()})
    return 0


def _oldest(summary: BacklogSummary) -> str:
    return f", the oldest for {summary.oldest_seconds:,.0f} s" if summary.conversations else ""
