"""``lossless index PATH…`` and ``lossless files search|ls|rm|stats``: workspace file
memory from the shell.

:func:`register` adds both commands to the top-level subparsers; each command function
takes the invocation's :class:`CommandContext` and returns the exit status.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime

from rich.table import Table
from rich.text import Text

from lossless.cli import render
from lossless.cli.context import CommandContext
from lossless.cli.options import Subparsers, command_parents, positive
from lossless.cli.progress import WorkProgress
from lossless.cli.render import counted
from lossless.files import FILE_KINDS, MAX_FILE_BYTES, FileHit, Files, IndexReport
from lossless.files.index import Progress as ProgressCallback

__all__ = ["cmd_files_ls", "cmd_files_rm", "cmd_files_search", "cmd_files_stats", "cmd_index", "files", "register"]

_SHOWN_LINES = 12  # of each hit's text in the terminal (--json has it all)
_SHOWN_SKIPS = 20


def register(subparsers: Subparsers, parents: Sequence[argparse.ArgumentParser] | None = None) -> None:
    """Add ``index`` and ``files``. ``parents`` are the parsers of the options every
    command accepts (``--db``, ``--json`` …); by default the CLI's own."""
    common = command_parents(parents)
    p = subparsers.add_parser(
        "index", parents=common, help="index files and directories for retrieval (only what changed)",
        description="Chunk files and code under the given paths into the database for keyword (and, with "
                    "an embedder, vector) search. Unchanged files are not read again; files gone from an "
                    "indexed directory leave the index. Exits 1 if a path is refused.")
    p.set_defaults(run=cmd_index)
    p.add_argument("paths", metavar="PATH", nargs="+", help="files or directories (walked recursively)")
    p.add_argument("--include", metavar="GLOB", action="append",
                   help="only files matching (repeatable), e.g. '*.py' or 'src/**'")
    p.add_argument("--exclude", metavar="GLOB", action="append",
                   help="also skip these (repeatable); .git, node_modules, build output … are always skipped "
                        "unless --no-default-excludes")
    p.add_argument("--no-default-excludes", action="store_true", help="do not skip the usual directories")
    p.add_argument("--max-file-bytes", metavar="N", type=positive, default=MAX_FILE_BYTES,
                   help=f"skip bigger files (default: {MAX_FILE_BYTES})")
    p.add_argument("--root", metavar="DIR", action="append",
                   help="allowed root (repeatable): paths resolving outside every root are refused "
                        "(default: each PATH is its own)")
    p.add_argument("--force", action="store_true", help="re-chunk files even if their content did not change")

    top = subparsers.add_parser("files", parents=common, help="search and list indexed workspace files",
                                description="Search, list and remove the files `lossless index` indexed.")
    sub = top.add_subparsers(dest="files_command", metavar="SUBCOMMAND", required=True)
    p = sub.add_parser("search", parents=common, help="the chunks of indexed files that best match a query")
    p.set_defaults(run=cmd_files_search)
    p.add_argument("query", metavar="QUERY")
    p.add_argument("--limit", metavar="N", type=positive, default=10)
    p.add_argument("--path", metavar="GLOB", action="append", help="only files matching (repeatable)")
    p.add_argument("--kind", choices=FILE_KINDS, action="append", help="only this kind (repeatable)")
    p.add_argument("--max-distance", metavar="D", type=float, default=None,
                   help="only chunks within this cosine distance of the query (or passing --min-relevance)")
    p.add_argument("--min-relevance", metavar="R", type=float, default=None,
                   help="only chunks with at least this keyword relevance, 0..1 (or passing --max-distance)")
    p = sub.add_parser("ls", parents=common, help="list indexed files")
    p.set_defaults(run=cmd_files_ls)
    p.add_argument("--path", metavar="GLOB", action="append", help="only files matching (repeatable)")
    p = sub.add_parser("rm", parents=common, help="take files or directories out of the index")
    p.set_defaults(run=cmd_files_rm)
    p.add_argument("paths", metavar="PATH", nargs="+")
    p = sub.add_parser("stats", parents=common, help="totals of the file index")
    p.set_defaults(run=cmd_files_stats)


def files(ctx: CommandContext, *, create: bool = False) -> Files:
    """The store's files: ``Memory.files`` when the engine has it, else one built the
    same way from its store, embedder and counter."""
    memory = ctx.memory(create=create)
    attached = getattr(memory, "files", None)
    if isinstance(attached, Files):
        return attached
    return Files(memory.store, memory.embedder, memory.counter)


@contextmanager
def _progress(ctx: CommandContext) -> Iterator[ProgressCallback | None]:
    """Progress on stderr: a bar with the total and the time left on a terminal, a line
    every few seconds otherwise (none with --json)."""
    if ctx.json:
        yield None
        return
    with WorkProgress(ctx.err, "indexing", unit="files", quiet_seconds=0) as bar:

        def update(done: int, total: int, path: str) -> None:
            bar.update(done, total)

        yield update


def _summary(report: IndexReport) -> str:
    return (f"{counted(report.files_seen, 'file')}: {report.files_indexed} indexed ({report.files_changed} changed), "
            f"{report.files_unchanged} unchanged, {report.files_removed} removed, {report.files_skipped} skipped; "
            f"{counted(report.chunks_written, 'chunk')} written, {report.chunks_removed} removed, "
            f"{report.chunks_embedded} embedded; {report.seconds:.2f} s")


def cmd_index(ctx: CommandContext) -> int:
    args = ctx.args
    index = files(ctx, create=True)
    with _progress(ctx) as progress:
        report = index.index(args.paths, roots=args.root, include=args.include, exclude=args.exclude,
                             default_exclude=not args.no_default_excludes, max_file_bytes=args.max_file_bytes,
                             force=args.force, progress=progress)
    refused = report.refused
    if ctx.json:
        ctx.emit_json(report.to_dict())
    else:
        ctx.out.print(Text(_summary(report)), soft_wrap=True)
        for skip in report.skipped[:_SHOWN_SKIPS]:
            ctx.out.print(Text(f"  skipped {skip.path} ({skip.reason})", style="dim"))
        if len(report.skipped) > _SHOWN_SKIPS:
            ctx.out.print(Text(f"  … and {len(report.skipped) - _SHOWN_SKIPS} more skipped", style="dim"))
        for warning in report.warnings:
            ctx.err.print(Text(f"warning: {warning}"))
    for skip in refused:
        ctx.err.print(Text(f"error: refused {skip.path}: it leads outside the allowed roots"))
    return 1 if refused else 0


def _location(hit: FileHit) -> str:
    lines = f"{hit.start_line}" if hit.start_line == hit.end_line else f"{hit.start_line}-{hit.end_line}"
    return f"{hit.path}:{lines}"


def cmd_files_search(ctx: CommandContext) -> int:
    args = ctx.args
    hits = files(ctx).search(args.query, limit=args.limit, paths=args.path, kinds=args.kind,
                             max_distance=args.max_distance, min_relevance=args.min_relevance)
    if ctx.json:
        ctx.emit_json([h.to_dict() for h in hits])
        return 0
    if not hits:
        ctx.out.print(Text("no matching files", style="dim"))
        return 0
    for hit in hits:
        distance = "" if hit.distance is None else f"  distance {hit.distance:.3f}"
        ctx.out.print(Text.assemble((_location(hit), "bold cyan"),
                                    (f"  {hit.kind}  score {hit.score:.3f}{distance}  keyword {hit.keyword:.2f}", "dim")))
        lines = hit.text.split("\n")
        shown = "\n".join(f"  {line}" for line in lines[:_SHOWN_LINES])
        more = f"\n  … {len(lines) - _SHOWN_LINES} more lines" if len(lines) > _SHOWN_LINES else ""
        ctx.out.print(Text(shown + more), soft_wrap=True)
    return 0


def cmd_files_ls(ctx: CommandContext) -> int:
    listed = files(ctx).ls(ctx.args.path)
    if ctx.json:
        ctx.emit_json([f.to_dict() for f in listed])
        return 0
    if not listed:
        ctx.out.print(Text(f"no indexed files in {ctx.db_path()} (run `lossless index PATH`)", style="dim"))
        return 0
    table = Table()
    table.add_column("path", style="bold cyan", overflow="fold")
    table.add_column("root", style="dim", overflow="fold")
    table.add_column("kind")
    table.add_column("bytes", justify="right")
    table.add_column("chunks", justify="right")
    table.add_column(f"indexed ({render.zone_label()})", style="green")
    for f in listed:
        table.add_row(Text(f.path), Text(f.root), f.kind, str(f.size), str(f.chunk_count),
                      render.minute(datetime.fromisoformat(f.indexed_at)))
    ctx.print_unwrapped(table)
    return 0


def cmd_files_rm(ctx: CommandContext) -> int:
    report = files(ctx).remove(ctx.args.paths)
    if ctx.json:
        ctx.emit_json(report.to_dict())
    else:
        ctx.out.print(Text(f"removed {counted(report.files_removed, 'file')} ({counted(report.chunks_removed, 'chunk')})"))
    return 0


def cmd_files_stats(ctx: CommandContext) -> int:
    stats = files(ctx).stats()
    if ctx.json:
        ctx.emit_json(stats.to_dict())
        return 0
    kinds = ", ".join(f"{n} {k}" for k, n in stats.by_kind.items()) or "none"
    ctx.out.print(Text(f"{counted(stats.files, 'file')} ({kinds}), {counted(stats.chunks, 'chunk')}, "
                       f"{counted(stats.tokens, 'token')}, {counted(stats.bytes, 'byte')}, "
                       f"{counted(stats.vectors, 'vector')}"))
    for root in stats.roots:
        ctx.out.print(Text(f"  root {root}", style="dim"))
    return 0
