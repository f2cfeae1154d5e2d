"""``lossless import``: stream a chat log (any format :mod:`lossless.importers` reads)
into the store.

Records are checked on their own as they stream in, so a bad line is reported (with the
file and line) and skipped while the good ones around it are stored; good records go to
the store in per-conversation batches through ``add_many`` (one transaction each).
Re-importing adds nothing: OpenAI lines that carry ``external_id`` and every message of
the other formats (ids from the source, or a hash of conversation, position and content).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from rich.text import Text

from lossless.cli.context import CommandContext, CommandError
from lossless.cli.options import Subparsers, add_command, command_parents, no_wait
from lossless.cli.progress import WorkProgress
from lossless.core.validate import check_conversation_id
from lossless.importers import (
    BATCH_SIZE,
    FORMATS,
    ImportInterrupted,
    ImportReport,
    Problem,
    check_source,
    detect,
    file_size,
    import_file,
)

__all__ = ["BATCH_SIZE", "ImportReport", "cmd_import", "register"]


def register(subparsers: Subparsers, parents: Sequence[argparse.ArgumentParser] | None = None) -> None:
    """Add the ``import`` command. ``parents`` are the parsers of the options every
    command accepts (``--db``, ``--json`` …); by default the CLI's own."""
    p = add_command(subparsers, "import", cmd_import,
                    "import a chat log: OpenAI messages (JSONL/JSON), Anthropic messages, Claude Code, Codex CLI, "
                    "ChatGPT export, OpenClaw, or a User:/Assistant: transcript", command_parents(parents))
    p.add_argument("file", metavar="PATH", help="the file, or - for stdin")
    p.add_argument("--format", choices=tuple(FORMATS), metavar="FORMAT",
                   help=f"the file's format (default: detected): {', '.join(FORMATS)}")
    p.add_argument("--conversation", metavar="ID",
                   help="put every message here (default: each source conversation keeps its own id, "
                        "e.g. claude-code:<sessionId>; OpenAI lines name theirs in a 'conversation' field, "
                        "else they go to openai:<file name without its extension>)")
    p.add_argument("--encoding", metavar="NAME",
                   help="the file's text encoding when it is not UTF-8, e.g. gb18030 (what Chinese Windows saves "
                        "'ANSI' text in), big5, shift_jis, cp1252 (default: UTF-8; UTF-16 with a byte-order mark is "
                        "read as such; a file that is not UTF-8 is refused, naming the encoding it reads as)")
    p.add_argument("--strict", action="store_true",
                   help="stop at the first bad line, writing nothing from its batch")
    no_wait(p)


def cmd_import(ctx: CommandContext) -> int:
    args = ctx.args
    # before the store is opened: a bad path (or a file that is not UTF-8) leaves no new database,
    check_source(args.file, encoding=args.encoding)
    if args.format is None and args.file != "-":
        detect(args.file, encoding=args.encoding)  # nor does a file whose format cannot be told, or an empty one
    if args.conversation is not None:
        check_conversation_id(args.conversation)  # nor a bad --conversation
    memory = ctx.memory()
    name = "<stdin>" if args.file == "-" else str(args.file)

    def problem(p: Problem) -> None:
        where = f"{name} line {p.line}" if p.line else name
        ctx.err.print(Text(f"{where}: {p.reason}"), soft_wrap=True)

    try:
        with WorkProgress(ctx.err, "importing", sizes=True, disable=ctx.json) as bar:
            size = file_size(args.file)
            bar.update(0, size)
            report = import_file(memory, args.file, format=args.format, conversation=args.conversation,
                                 strict=args.strict, on_problem=problem, progress=lambda done: bar.update(done, size),
                                 encoding=args.encoding)
    except ImportInterrupted as stop:  # Ctrl-C: say what was kept, and that the same command resumes
        _print_report(ctx, stop.report)
        return 130
    _print_report(ctx, report)
    # the messages are stored and searchable; now the summaries and vectors they are owed
    try:
        ctx.catch_up([c for c, n in report.added.items() if n], tell_no_wait=True)
    except KeyboardInterrupt:
        ctx.err.print(Text("interrupted while compacting and indexing: every message above is stored (searchable by "
                           "keyword); the work left stays queued for `lossless worker` or the next write"),
                      soft_wrap=True)
        return 130
    if report.stopped_at is not None:
        reason = report.skipped[-1].reason if report.skipped else "a bad record"
        raise CommandError(f"line {report.stopped_at}: {reason} (--strict: stopped, nothing from its batch written)")
    return 1 if report.skipped else 0


def _print_report(ctx: CommandContext, report: ImportReport) -> None:
    if ctx.json:
        ctx.emit_json(report.to_json())
    else:
        ctx.out.print(Text(report.line()), soft_wrap=True)
