"""``lossless migrate --from sqlite:///path.db --to postgresql://…``: copy a SQLite store
into an empty PostgreSQL database (or schema) and verify the copy.

The copy is one transaction; before it commits every table is compared row for row (counts
and content digests), every message is re-hashed and the DAG re-checked on PostgreSQL. Any
difference is printed, the copy is rolled back (the target keeps none of it, so the same
command can run again) and the command exits 1. A non-empty target is refused, so a run
never mixes two stores (see :mod:`lossless.store.transfer`).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rich.table import Table
from rich.text import Text

from lossless.cli.context import CommandContext, CommandError
from lossless.cli.options import Subparsers, add_command, command_parents
from lossless.store.urls import is_postgres_url, redact_url, sqlite_path

if TYPE_CHECKING:
    from lossless.store.plugins import TableOwner

__all__ = ["cmd_migrate", "register"]


def register(subparsers: Subparsers, parents: Sequence[argparse.ArgumentParser] | None = None) -> None:
    """Add the ``migrate`` command. ``parents`` are the parsers of the options every
    command accepts (``--db``, ``--json`` …); by default the CLI's own."""
    p = add_command(subparsers, "migrate", cmd_migrate,
                    "copy a SQLite store into an empty PostgreSQL database and verify the copy",
                    command_parents(parents))
    p.add_argument("--from", dest="source", metavar="SQLITE", required=True,
                   help="the SQLite store: sqlite:///path/to/file.db or a path")
    p.add_argument("--to", dest="target", metavar="URL", required=True,
                   help="the PostgreSQL store: postgresql://user:pass@host/db (?schema=NAME for a schema)")


def cmd_migrate(ctx: CommandContext) -> int:
    source: str = ctx.args.source
    target: str = ctx.args.target
    if is_postgres_url(source):
        raise CommandError("--from must be a SQLite store (sqlite:///path.db or a path); "
                           "copying out of PostgreSQL is not supported")
    if not is_postgres_url(target):
        raise CommandError(f"--to must be a postgresql:// URL, got {redact_url(target)!r}")
    path = Path(sqlite_path(source)).expanduser()
    if not path.is_file():
        raise CommandError(f"no SQLite database at {path}")
    from lossless.cli.progress import WorkProgress
    from lossless.store.transfer import check_source, copy_sqlite_to_postgres

    check_source(str(path))  # before anything reads it: a file that is not a lossless store is refused untouched
    owners = _table_owners()

    total = _source_rows(path, owners)
    copied = 0

    def progress(table: str, rows: int) -> None:
        nonlocal copied
        copied += rows
        bar.update(copied, max(total, copied))
        if not ctx.json:
            ctx.err.print(Text(f"  {table}: {rows:,}", style="dim"))

    if not ctx.json:
        ctx.err.print(Text(f"copying {path} -> {redact_url(target)}", style="dim"))
    with WorkProgress(ctx.err, "copying", unit="rows", disable=ctx.json) as bar:
        bar.update(0, total)
        report = copy_sqlite_to_postgres(str(path), target, owners=owners, progress=progress)
    if ctx.json:
        ctx.emit_json(report.to_dict())
    else:
        table = Table(title="lossless migrate", show_header=True)
        table.add_column("table")
        table.add_column("rows", justify="right")
        for name, n in report.counts.items():
            table.add_row(name, f"{n:,}")
        table.add_row("pgvector rows", f"{report.vectors:,}")
        ctx.print_unwrapped(table)
        if report.ok:
            ctx.out.print(Text(f"verified: every table identical, hashes and DAG hold ({report.seconds:.1f} s)",
                               style="green"))
        for problem in report.problems:
            ctx.err.print(Text(f"mismatch: {problem}", style="red"))
        if report.rolled_back:
            ctx.err.print(Text(f"the copy did not verify, so it was rolled back: {redact_url(target)} holds none of "
                               "it (nothing that was there before was touched). `lossless verify --db "
                               f"{path}` checks the source; then run this command again", style="red"),
                          soft_wrap=True)
    return 0 if report.ok else 1


def _table_owners() -> tuple[TableOwner, ...]:
    """The plug-ins whose tables the copy carries: the long-term memory's, the file index's."""
    from lossless.files.tables import FILE_TABLES
    from lossless.longterm.tables import MEMORY_TABLES

    return (MEMORY_TABLES, FILE_TABLES)


def _source_rows(path: Path, owners: tuple[TableOwner, ...]) -> int:
    """The rows the copy will move (for the progress bar's total), read-only."""
    import apsw

    from lossless.store.transfer import copied_tables

    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        tables = [t for t in copied_tables(owners) if t in names]
        return sum(int(next(iter(conn.execute(f"SELECT count(*) FROM {t}")))[0]) for t in tables)
    finally:
        conn.close()
