"""What every command gets: the parsed arguments, the two consoles, and the store."""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console, RenderableType
from rich.measure import Measurement
from rich.text import Text

import lossless
from lossless.cli import render
from lossless.cli.terminal import TerminalConsole, json_escaped
from lossless.conversation import Conversation
from lossless.core import environ
from lossless.core.errors import ValidationError
from lossless.engine import Memory, embedder_log
from lossless.store.urls import is_postgres_url, redact_url

__all__ = ["DEFAULT_WINDOW", "CommandContext", "CommandError", "NoStoreError"]

DEFAULT_WINDOW = 128_000
_CATCH_UP_CHUNK = 64  # conversations caught up per wait_idle call (each counted as it ends)


# the commands (and subcommands) that recall by meaning: where keyword-only recall is worth a line
_RECALL_COMMANDS = {("search", None), ("assemble", None), ("serve", None), ("mcp", None), ("worker", None),
                    ("index", None), ("memory", "search"), ("files", "search")}


class CommandError(Exception):
    """A problem with what the command was asked to do; printed as ``error: …``."""


class NoStoreError(CommandError):
    """A read command's ``--db`` holds no lossless store yet (no SQLite file, no PostgreSQL
    schema): nothing was created to look at it."""


class _Collect(logging.Handler):
    """Keeps the messages logged to it."""

    def __init__(self, into: list[str]) -> None:
        super().__init__(logging.WARNING)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        self.into.append(record.getMessage())


@dataclass
class CommandContext:
    """Shared state of one CLI invocation. Opens the store lazily, once."""

    args: argparse.Namespace
    out: Console
    err: Console
    _memory: Memory | None = field(default=None, repr=False)

    @classmethod
    def create(cls, args: argparse.Namespace) -> CommandContext:
        # Consoles made per call (not at import) so they write to the current
        # sys.stdout/sys.stderr; no highlighting: stored text is shown as it is (on a
        # terminal, its control characters as visible signs: cli/terminal.py)
        return cls(args=args, out=TerminalConsole(), err=TerminalConsole(stderr=True))

    # -- options ------------------------------------------------------------------------

    @property
    def json(self) -> bool:
        return bool(getattr(self.args, "json", False))

    def window(self, default: int = DEFAULT_WINDOW) -> int:
        value: int | None = getattr(self.args, "window", None)
        return default if value is None else value

    def db_path(self) -> Path | str:
        """``--db``, else ``$LOSSLESS_DB``, else :func:`lossless.default_db_path`. A
        PostgreSQL URL is not a file: it comes back as a string without its password,
        for messages (the store is opened from :meth:`db_url`)."""
        url = self.db_url()
        if url is not None:
            return redact_url(url)
        given: str | None = getattr(self.args, "db", None)
        return Path(given).expanduser() if given else lossless.default_db_path()

    def db_url(self) -> str | None:
        """The PostgreSQL URL given by ``--db`` or ``$LOSSLESS_DB``, if that is what it is."""
        given: str | None = getattr(self.args, "db", None) or environ.read("LOSSLESS_DB")
        return given if is_postgres_url(given) else None

    # -- the store ----------------------------------------------------------------------

    def memory(self, *, create: bool = True, **config: Any) -> Memory:
        """Open the store. Read commands pass ``create=False``: looking at a database
        that does not exist should say so, not leave an empty file behind.

        A command runs no worker thread (``compaction="deferred"``) unless it asks for
        one (``serve``, ``mcp``): write commands finish the work they caused with
        :meth:`catch_up`, in the foreground, with a progress bar."""
        config.setdefault("compaction", "deferred")
        if self._memory is None:
            url = self.db_url()
            path = self.db_path()
            if isinstance(path, Path) and not create and not path.exists():
                raise NoStoreError(f"no database at {path} (add or import messages first, or pass --db)")
            if url is not None and not create and not postgres_store_exists(url):
                # as for a SQLite file: looking does not create the schema and its tables
                raise NoStoreError(f"no lossless store at {redact_url(url)} (add or import messages first, or "
                                   "check --db / $LOSSLESS_DB and its ?schema=)")
            if isinstance(path, Path) and path.is_dir():
                raise CommandError(f"--db {path} is a directory, not a database file")
            explicit = getattr(self.args, "db", None) or environ.read("LOSSLESS_DB")
            if (isinstance(path, Path) and create and explicit and str(path) != ":memory:"
                    and not path.parent.exists()):
                # as read commands refuse a missing database, a write does not invent the
                # folder a mistyped path names (only the default location is created)
                raise CommandError(f"no directory {path.parent} for the database {path.name} (create it first, or "
                                   "check --db / $LOSSLESS_DB)")
            given: int | None = getattr(self.args, "window", None)
            if given is not None:
                config.setdefault("context_window", given)
            model: str | None = getattr(self.args, "model", None)
            if model is not None:
                config.setdefault("model", model)
            kind: str | None = getattr(self.args, "summarizer", None)
            summarizer_model: str | None = getattr(self.args, "summarizer_model", None)
            summarizer = None
            if kind is not None or summarizer_model is not None:
                from lossless.summarize.factory import make_summarizer

                summarizer = make_summarizer(kind, model=summarizer_model)
            # no --db nor $LOSSLESS_DB: None, so lossless.open creates the default location
            try:
                with self._embedder_notice():
                    self._memory = lossless.open(url or (path if explicit else None), summarizer=summarizer,
                                                 **config)
            except ValidationError as exc:
                if model is not None and given is None and str(exc).startswith("unknown model"):
                    # its remedies are the API's (context_window=): the CLI's is --window
                    raise CommandError(f"{exc} On the command line: --window N gives its window.") from None
                raise
            render.show_in(self._memory.config.zone)  # the views' times in the store's zone
            if given is not None and create and path != Path(":memory:"):
                # remembered, so later commands on this database need not repeat --window
                self._memory.save_settings(context_window=given)
        return self._memory

    @contextmanager
    def _embedder_notice(self) -> Iterator[None]:
        """What lossless.open says about the embedder it fell back from (keyword-only
        recall): one line on stderr for the commands whose answers it changes, nothing for
        the others (ls, export, stats … are the same either way; doctor has its own check),
        and never as the multi-line block a logging handler someone else installed (the MCP
        SDK's) would make of it."""
        said: list[str] = []
        catch = _Collect(said)
        propagate = embedder_log.propagate
        embedder_log.addHandler(catch)
        embedder_log.propagate = False
        try:
            yield
        finally:
            embedder_log.removeHandler(catch)
            embedder_log.propagate = propagate
        command = (self.args.command, getattr(self.args, f"{self.args.command}_command", None))
        if command in _RECALL_COMMANDS or (command[0], None) in _RECALL_COMMANDS:
            for line in said:
                self.err.print(Text(line, style="yellow"), soft_wrap=True)

    def catch_up(self, conversations: list[str], *, label: str | None = None, tell_no_wait: bool = False) -> None:
        """Do the compaction and embedding the command's writes queued, with a progress
        bar that says what it does, its rate and time left (``--no-wait``: leave it
        queued for ``lossless worker``; ``tell_no_wait``: then say what was left).
        Ctrl-C stops it between steps; nothing stored is lost and the rest stays queued."""
        if not conversations:
            return
        from lossless.cli.owed import owed_by
        from lossless.cli.progress import WorkProgress

        memory = self.memory()
        ids = list(dict.fromkeys(conversations))
        owed = owed_by(memory, ids)
        if getattr(self.args, "no_wait", False):
            if tell_no_wait and owed.total and not self.json:
                self.err.print(Text(f"--no-wait: {owed.what()} in {owed.conversations:,} conversation(s) left to "
                                    "`lossless worker` (or an app that opens this store); keyword search finds every "
                                    "message now; `lossless stats` shows what is owed"), soft_wrap=True)
            return
        intro = (f"catching up {owed.conversations:,} conversation(s): {owed.what()} (keyword search finds every "
                 "message already). --no-wait returns at once and leaves this to `lossless worker`; Ctrl-C stops "
                 "here and leaves the rest to it")
        done = True
        with WorkProgress(self.err, label or owed.label(), unit="units", rate=True, intro=intro,
                          disable=self.json) as bar:
            bar.update(0, owed.total)
            finished = 0  # the units owed to the chunks done
            # a chunk at a time: wait_idle's own count covers the slice in hand only, so
            # over hundreds of conversations its total fell and rose again
            for i in range(0, len(ids), _CATCH_UP_CHUNK):
                chunk = ids[i : i + _CATCH_UP_CHUNK]
                start = sum(owed.each.get(cid, 0) for cid in chunk)

                def step(did: int, total: int, base: int = finished, start: int = start) -> None:
                    bar.update(base + max(0, start - (total - did)), owed.total)

                done = memory.wait_idle(conversations=chunk, progress=step) and done
                finished += start
                bar.update(finished, owed.total)
        if not done:
            left = memory.backlog.summary()
            errors = "; ".join(f"{e['conversation']}: {e['error']}" for e in left.errors[:2])
            self.err.print(Text(f"note: work is still owed to {left.conversations:,} conversation(s)"
                                f"{f' ({errors})' if errors else ''}; `lossless worker` carries on"),
                           soft_wrap=True)

    def existing_conversation(self, conversation_id: str) -> Conversation:
        """A conversation that must already exist (read commands never create one)."""
        conv = self.memory(create=False).get_conversation(conversation_id)
        if conv is None:
            raise CommandError(f"no conversation {conversation_id!r} in {self.db_path()}")
        return conv

    def close(self) -> None:
        if self._memory is not None:
            self._memory.close()
            self._memory = None

    # -- output -------------------------------------------------------------------------

    def print_unwrapped(self, renderable: RenderableType) -> None:
        """Print at the terminal's width, or, into a pipe or file (where rich would assume
        80 columns), as wide as the content needs: one line per tree node."""
        if self.out.is_terminal:
            self.out.print(renderable)
            return
        wide = self.out.options.update(max_width=10_000)
        needed = Measurement.get(self.out, wide, renderable).maximum
        saved = self.out.width
        self.out.width = max(saved, needed)
        try:
            self.out.print(renderable)
        finally:
            self.out.width = saved

    def emit_json(self, payload: Any) -> None:
        """Machine-readable output: one JSON document on stdout and nothing else. Every
        control character is escaped: JSON escapes C0 itself, and DEL and C1 (0x9b is a
        CSI on some terminals) are escaped here, the same text to a JSON reader."""
        print(json_escaped(json.dumps(payload, ensure_ascii=False, indent=2, default=str)))


def postgres_store_exists(url: str) -> bool:
    """Whether the PostgreSQL ``url`` (and its ``?schema=``) holds a lossless store yet."""
    from lossless.store.postgres.store import store_exists  # psycopg is the postgres extra

    return store_exists(url)
