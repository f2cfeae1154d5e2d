"""``lossless import``: stream a JSONL file of chat messages into the store.

One OpenAI-style message object per line. Lines are read one at a time and checked on
their own, so a bad line is reported (with its number) and skipped while the good ones
around it are stored; good lines go to the store in batches through ``add_many`` (one
transaction each). Re-importing lines that carry ``external_id`` adds nothing.
"""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import IO, Any

from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn
from rich.text import Text

from lossless.cli.context import CommandContext, CommandError
from lossless.engine import Memory
from lossless.errors import LosslessError
from lossless.validate import check_conversation_id, validate_message

__all__ = ["BATCH_SIZE", "ImportSummary", "cmd_import"]

BATCH_SIZE = 500


@dataclass
class ImportSummary:
    added: Counter[str] = field(default_factory=Counter)  # conversation → messages newly stored
    already_stored: int = 0
    lines: int = 0
    skipped: list[tuple[int, str]] = field(default_factory=list)  # (line number, reason)
    stopped_at: int | None = None  # --strict: the line that stopped the import

    def to_json(self) -> dict[str, Any]:
        return {
            "conversations": dict(self.added),
            "added": sum(self.added.values()),
            "already_stored": self.already_stored,
            "lines": self.lines,
            "skipped": [{"line": n, "reason": r} for n, r in self.skipped],
            "stopped_at": self.stopped_at,
        }

    def line(self) -> str:
        added = sum(self.added.values())
        convs = sum(1 for n in self.added.values() if n)
        text = (f"imported {added:,} message{'s' if added != 1 else ''} into {convs} "
                f"conversation{'s' if convs != 1 else ''} from {self.lines:,} line{'s' if self.lines != 1 else ''}")
        if self.already_stored:
            text += f"; {self.already_stored:,} already stored"
        if self.skipped:
            kinds = Counter(reason.split(":", 1)[0] for _, reason in self.skipped)
            detail = ", ".join(f"{n} {kind}" for kind, n in kinds.most_common())
            text += f"; skipped {len(self.skipped)} line{'s' if len(self.skipped) != 1 else ''} ({detail})"
        if self.stopped_at is not None:
            text += f"; stopped at line {self.stopped_at} (--strict)"
        return text


class _BadLine(Exception):
    pass


def _parse_line(raw: bytes, lineno: int, default_conversation: str | None,
                max_bytes: int) -> tuple[str, dict[str, Any]] | None:
    """The (conversation, message) on one line, None for a blank line; raises _BadLine."""
    try:
        text = raw.decode("utf-8-sig" if lineno == 1 else "utf-8")
    except UnicodeDecodeError as exc:
        raise _BadLine(f"not UTF-8: undecodable byte at column {exc.start + 1}") from None
    if not text.strip():
        return None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _BadLine(f"invalid JSON: {exc.msg} (column {exc.colno})") from None
    if not isinstance(data, dict):
        raise _BadLine(f"invalid message: expected a JSON object, got {type(data).__name__}")
    given = data.pop("conversation", None)
    conversation = default_conversation if default_conversation is not None else given
    if conversation is None:
        raise _BadLine("no conversation: give --conversation or a 'conversation' field on the line")
    try:
        check_conversation_id(conversation)
        validate_message(data, max_bytes=max_bytes)
    except LosslessError as exc:
        raise _BadLine(f"invalid message: {exc}") from None
    return conversation, data


class _Importer:
    def __init__(self, memory: Memory, summary: ImportSummary) -> None:
        self.memory = memory
        self.summary = summary
        self.pending: dict[str, list[dict[str, Any]]] = {}

    def add(self, conversation: str, message: dict[str, Any]) -> None:
        batch = self.pending.setdefault(conversation, [])
        batch.append(message)
        if len(batch) >= BATCH_SIZE:
            self.flush(conversation)

    def flush(self, conversation: str) -> None:
        batch = self.pending.pop(conversation, [])
        if not batch:
            return
        conv = self.memory.conversation(conversation)
        before = self.memory.store.last_seq(conversation)
        stored = conv.add_many(batch)
        new = sum(1 for m in stored if m.seq > before)
        self.summary.added[conversation] += new
        self.summary.already_stored += len(stored) - new

    def flush_all(self) -> None:
        for conversation in list(self.pending):
            self.flush(conversation)

    def discard(self) -> None:
        self.pending.clear()


def cmd_import(ctx: CommandContext) -> int:
    args = ctx.args
    memory = ctx.memory()
    summary = ImportSummary()
    stop_reason = ""
    importer = _Importer(memory, summary)
    max_bytes = memory.config.max_message_bytes
    with ExitStack() as stack:
        if args.file == "-":
            stream: IO[bytes] = sys.stdin.buffer
            size: int | None = None
        else:
            stream = stack.enter_context(open(args.file, "rb"))
            size = _size_of(stream)
        progress = stack.enter_context(Progress(
            TextColumn("importing"), BarColumn(), DownloadColumn(), TimeRemainingColumn(),
            console=ctx.err, transient=True, disable=not ctx.err.is_terminal,
        ))
        task = progress.add_task("import", total=size)
        for lineno, raw in enumerate(stream, 1):
            progress.update(task, advance=len(raw))
            try:
                parsed = _parse_line(raw, lineno, args.conversation, max_bytes)
            except _BadLine as bad:
                summary.lines = lineno
                if args.strict:
                    summary.stopped_at, stop_reason = lineno, str(bad)
                    importer.discard()
                    break
                ctx.err.print(Text(f"line {lineno}: {bad}"), soft_wrap=True)
                summary.skipped.append((lineno, str(bad)))
                continue
            summary.lines = lineno
            if parsed is not None:
                importer.add(*parsed)
        else:
            importer.flush_all()
    if ctx.json:
        ctx.emit_json(summary.to_json())
    else:
        ctx.out.print(Text(summary.line()), soft_wrap=True)
    if summary.stopped_at is not None:
        raise CommandError(f"line {summary.stopped_at}: {stop_reason} (--strict: stopped, nothing from its batch written)")
    return 1 if summary.skipped else 0


def _size_of(stream: IO[bytes]) -> int | None:
    try:
        return os.fstat(stream.fileno()).st_size or None
    except (OSError, ValueError):
        return None
