"""``lossless export``: a conversation (or all of them) as OpenAI JSONL or DAG JSON."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.text import Text

from lossless.cli.context import CommandContext, CommandError
from lossless.cli.options import Subparsers, add_command, command_parents
from lossless.cli.progress import WorkProgress
from lossless.cli.render import counted
from lossless.conversation import Conversation
from lossless.export import EXPORT_FORMATS, export_conversation, export_to_path, file_name_for

__all__ = ["cmd_export", "register"]


def register(subparsers: Subparsers, parents: Sequence[argparse.ArgumentParser] | None = None) -> None:
    """Add the ``export`` command. ``parents`` are the parsers of the options every
    command accepts (``--db``, ``--json`` …); by default the CLI's own."""
    p = add_command(subparsers, "export", cmd_export,
                    "write a conversation out: OpenAI JSONL messages, or JSON with the whole summary DAG",
                    command_parents(parents))
    p.add_argument("conversation", metavar="CONV", nargs="?", help="the conversation (or --all)")
    p.add_argument("--all", action="store_true", help="every conversation, one file each, into the directory -o")
    p.add_argument("--format", choices=EXPORT_FORMATS, default="openai-jsonl",
                   help="openai-jsonl (default; `lossless import` reads it back) or json (messages, "
                        "summaries with their sources, metadata)")
    p.add_argument("-o", "--output", metavar="FILE", default="-",
                   help="where to write (default: - for stdout); with --all, a directory")
    p.add_argument("--force", action="store_true", help="replace FILE if it exists")


def cmd_export(ctx: CommandContext) -> int:
    args = ctx.args
    if args.all and args.conversation is not None:
        raise CommandError(f"export: give a conversation or --all, not both ({args.conversation!r} and --all)")
    if not args.all and args.conversation is None:
        raise CommandError("export: give a conversation or --all")
    if args.all:
        return _export_all(ctx)
    conv = ctx.existing_conversation(args.conversation)
    if args.output == "-":
        export_conversation(conv, sys.stdout, args.format)
        sys.stdout.flush()
        return 0
    path, messages, summaries = export_to_path(conv, args.output, args.format, force=args.force)
    _report(ctx, [{"conversation": conv.id, "path": str(path), "messages": messages, "summaries": summaries}])
    return 0


def _export_all(ctx: CommandContext) -> int:
    args = ctx.args
    if args.output == "-":
        raise CommandError("export --all writes one file per conversation: give -o DIRECTORY")
    memory = ctx.memory(create=False)
    folder = Path(args.output)
    if folder.exists() and not folder.is_dir():
        raise CommandError(f"{folder} is not a directory (export --all writes one file per conversation into it)")
    folder.mkdir(parents=True, exist_ok=True)
    written: list[dict[str, Any]] = []
    infos = []
    offset = 0
    while batch := memory.conversations(limit=1000, offset=offset):
        offset += len(batch)
        infos += batch
        if len(batch) < 1000:
            break
    total = sum(info.message_count for info in infos)
    with WorkProgress(ctx.err, "exporting", unit="messages", disable=ctx.json) as bar:
        bar.update(0, total)
        done = 0
        for info in infos:
            conv = Conversation(memory, info.id)
            # the name comes from the conversation id: made safe, and checked to stay inside the folder
            target = folder / file_name_for(info.id, args.format)
            path, messages, summaries = export_to_path(conv, target, args.format, force=args.force, inside=folder)
            written.append({"conversation": info.id, "path": str(path), "messages": messages,
                            "summaries": summaries})
            done += messages
            bar.update(done, max(total, done))
    _report(ctx, written)
    return 0


def _report(ctx: CommandContext, written: list[dict[str, Any]]) -> None:
    if ctx.json:
        ctx.emit_json({"written": written})
        return
    for item in written:
        extra = f", {counted(item['summaries'], 'summary', 'summaries')}" if item["summaries"] else ""
        ctx.out.print(Text(f"{item['conversation']}: {counted(item['messages'], 'message')}{extra} → {item['path']}"),
                      soft_wrap=True)
