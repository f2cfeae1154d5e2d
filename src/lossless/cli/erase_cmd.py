"""``lossless erase CONV``: erase a conversation, or some of its messages, for privacy.

The one deliberate way stored history changes (see :meth:`lossless.Conversation.erase`):
each message keeps its place and reads ``[erased]`` (its name and metadata cleared), a
tombstone records who, when and why, every derived text (summaries, keyword rows,
retrieval units, vectors, long-term memories distilled from it) loses it, and the
database files are scrubbed of it (``--vacuum``: rewritten). ``--list`` shows the
tombstones.
"""

from __future__ import annotations

import argparse
import getpass
from collections.abc import Sequence
from datetime import datetime

from rich.table import Table
from rich.text import Text

from lossless.cli.context import CommandContext, CommandError
from lossless.cli.options import Subparsers, add_command, command_parents
from lossless.cli.render import minute, zone_label

__all__ = ["cmd_erase", "register"]


def register(subparsers: Subparsers, parents: Sequence[argparse.ArgumentParser] | None = None) -> None:
    """Add ``erase``."""
    p = add_command(subparsers, "erase", cmd_erase, "erase a conversation or some of its messages for privacy "
                    "(audited: a tombstone records who, when and why)", command_parents(parents), check=_check)
    p.add_argument("conversation", metavar="CONV")
    p.add_argument("--message", metavar="ID|SEQ", action="append", default=[],
                   help="erase this message (an id or a seq; repeat for more); default: the whole conversation")
    p.add_argument("--reason", help="why (required; recorded in each tombstone)")
    p.add_argument("--by", help="who erases (recorded; default: the login name)")
    p.add_argument("--yes", action="store_true", help="erase the whole conversation without asking")
    p.add_argument("--list", action="store_true", help="list the conversation's tombstones and erase nothing")
    p.add_argument("--vacuum", action="store_true",
                   help="also rewrite the database files (SQLite VACUUM, PostgreSQL VACUUM FULL of the erased "
                        "tables): for a SQLite file written by a lossless that did not yet clear freed space; "
                        "slow on a large store, and PostgreSQL locks those tables meanwhile")


def _check(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.list:
        if args.message or args.reason or args.vacuum:
            parser.error("erase: --list erases nothing; it does not go with --message, --reason or --vacuum")
        return
    if not args.reason or not args.reason.strip():
        parser.error("erase: --reason is required (it is recorded in the tombstone)")
    if not args.message and not args.yes:
        parser.error("erase: this erases every message of the conversation; add --yes, or name --message")


def cmd_erase(ctx: CommandContext) -> int:
    args = ctx.args
    conv = ctx.existing_conversation(args.conversation)
    if args.list:
        stones = conv.tombstones()
    else:
        targets: list[str | int] | None = [int(m) if m.isdigit() else m for m in args.message] or None
        by = args.by or _login()
        if not by:
            raise CommandError("erase: say who erases with --by (no login name to record)")
        stones = conv.erase(targets, reason=args.reason, by=by, vacuum=args.vacuum)
    if ctx.json:
        ctx.emit_json([t.to_dict() for t in stones])
        return 0
    if not stones:
        ctx.out.print(Text("no erased messages"))
        return 0
    table = Table()
    # the ids are what one copies (describe, an audit): whole, never cut to "msg_3ce6991e92…"
    # (into a pipe, where rich assumed 80 columns, too), as `memory ls` shows its ids; the
    # exact time is in --json
    erased = f"erased at ({zone_label()})"
    for name in ("seq", "message", erased, "by", "reason", "tombstone"):
        table.add_column(name, no_wrap=name in ("seq", "message", erased, "tombstone"),
                         overflow="fold")
    for t in stones:
        table.add_row(str(t.seq), t.message_id, minute(datetime.fromisoformat(t.erased_at)),
                      Text(t.erased_by), Text(t.reason), t.id)
    ctx.print_unwrapped(table)
    return 0


def _login() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no login name in this environment (a container without USER)
        return ""
