"""``lossless memory add|search|ls|forget|forgotten|restore``: long-term memory records from the shell.

:func:`register` adds the ``memory`` command to the top-level subparsers; each
sub-command function takes the invocation's :class:`CommandContext` (its parsed
arguments are ``ctx.args``) and returns the exit status, like the other commands.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import timedelta

from rich.table import Table
from rich.text import Text

from lossless.cli import render
from lossless.cli.context import CommandContext, CommandError
from lossless.cli.options import Subparsers, command_parents
from lossless.cli.terminal import stdin_text
from lossless.core.errors import NotFoundError, ValidationError
from lossless.longterm.forgetting import ForgetPolicy, Forgotten
from lossless.longterm.memories import Memories
from lossless.longterm.records import KINDS, SCOPES, MemoryRecord
from lossless.longterm.validate import check_content, check_new_owner

__all__ = [
    "cmd_memory_add",
    "cmd_memory_forget",
    "cmd_memory_forgotten",
    "cmd_memory_ls",
    "cmd_memory_restore",
    "cmd_memory_search",
    "parse_duration",
    "register",
]

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$", re.IGNORECASE)
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_duration(text: str) -> timedelta:
    """``30d``, ``12h``, ``45m``, ``90s``, ``2w`` → a timedelta (an argparse type)."""
    match = _DURATION.match(text)
    if match is None:
        raise argparse.ArgumentTypeError(f"expected a duration like 30d, 12h, 45m, 90s or 2w; got {text!r}")
    return timedelta(**{_UNITS[match.group(2).lower()]: float(match.group(1))})


def _unit_interval(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number between 0 and 1, got {text!r}") from None
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"expected a number between 0 and 1, got {text!r}")
    return value


def _count(text: str, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {text!r}") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {text!r}")
    return value


def _new_owner(what: str) -> Callable[[str], str]:
    """An argparse type for the owner of a new record: refused as the API refuses it
    (``check_new_owner``), so the error names the flag (``argument --user: …``) and comes
    before the store is opened."""

    def parse(text: str) -> str:
        try:
            check_new_owner(text, what)
        except ValidationError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return text

    return parse


def _positive(text: str) -> int:
    return _count(text, 1)


def _non_negative(text: str) -> int:
    return _count(text, 0)


def register(subparsers: Subparsers, parents: Sequence[argparse.ArgumentParser] | None = None) -> None:
    """Add ``memory`` and its sub-commands. ``parents`` are the parsers of the options
    every command accepts (``--db``, ``--json`` …); by default the CLI's own."""
    common = command_parents(parents)
    top = subparsers.add_parser("memory", parents=common, help="long-term memories that outlive a conversation",
                                description="Add, search, list and forget long-term memory records: facts, "
                                            "preferences, errors, patterns and tasks, scoped to a user, an "
                                            "agent, or global.")
    sub = top.add_subparsers(dest="memory_command", metavar="SUBCOMMAND", required=True)

    def owners(p: argparse.ArgumentParser, verb: str, new: bool = False) -> None:
        # a filter takes any name, so a record stored before names were checked stays reachable
        p.add_argument("--user", metavar="ID", type=_new_owner("user") if new else str, help=f"{verb} user")
        p.add_argument("--agent", metavar="ID", type=_new_owner("agent") if new else str, help=f"{verb} agent")

    p = sub.add_parser("add", parents=common, help="store one memory (the same content twice is stored once)")
    p.set_defaults(run=cmd_memory_add)
    p.add_argument("content", metavar="TEXT", nargs="?", help="the memory (default: read stdin)")
    p.add_argument("--kind", choices=KINDS, default="fact")
    owners(p, "owned by this", new=True)
    p.add_argument("--importance", metavar="X", type=_unit_interval, help="0..1 (default: by kind)")
    p.add_argument("--conversation", metavar="ID", help="the conversation it came from")

    p = sub.add_parser("search", parents=common,
                       help="memories relevant to a query that this user/agent may see")
    p.set_defaults(run=cmd_memory_search)
    p.add_argument("query", metavar="QUERY")
    owners(p, "search as this")
    p.add_argument("--kind", choices=KINDS, action="append", help="only this kind (repeatable)")
    p.add_argument("--limit", metavar="N", type=_positive, default=10)
    p.add_argument("--min-score", metavar="X", type=_unit_interval)
    p.add_argument("--no-global", action="store_true", help="leave out memories without an owner")

    p = sub.add_parser("ls", parents=common, help="list memories (filters; none given: all)")
    p.set_defaults(run=cmd_memory_ls)
    owners(p, "only this")
    p.add_argument("--kind", choices=KINDS, action="append", help="only this kind (repeatable)")
    p.add_argument("--scope", choices=SCOPES)
    p.add_argument("--order", choices=("recent", "oldest", "used", "importance"), default="recent")
    p.add_argument("--limit", metavar="N", type=_positive, default=100)
    p.add_argument("--offset", metavar="N", type=_non_negative, default=0)

    p = sub.add_parser("forget", parents=common,
                       help="delete memories for good (every criterion given must hold)")
    p.set_defaults(run=cmd_memory_forget)
    p.add_argument("ids", metavar="ID", nargs="*", help="mem_… ids")
    owners(p, "only this")
    p.add_argument("--kind", choices=KINDS, action="append", help="only this kind (repeatable)")
    p.add_argument("--scope", choices=SCOPES)
    p.add_argument("--older-than", metavar="AGE", type=parse_duration,
                   help="not used for this long, e.g. 30d, 12h, 2w")
    p.add_argument("--importance-below", metavar="X", type=_unit_interval)
    p.add_argument("--keep", metavar="N", type=_non_negative,
                   help="keep at most N per owner, least recently used go first")
    p.add_argument("--dry-run", action="store_true", help="show what would be forgotten; delete nothing")
    p.add_argument("--all", action="store_true", help="allow forgetting with no other criterion: everything")
    p.add_argument("--vacuum", action="store_true",
                   help="also scrub freed pages from the file (VACUUM: rewrites the whole database)")
    p.add_argument("--policy", action="store_true",
                   help="apply the configured forgetting policy (memory_capacity, memory_max_unused_days, "
                        "memory_importance_floor) as the worker does: logged, restorable; with --dry-run a report")

    p = sub.add_parser("forgotten", parents=common, help="what the forgetting policy removed, newest first")
    p.set_defaults(run=cmd_memory_forgotten)
    p.add_argument("--limit", metavar="N", type=_positive, default=100)
    p.add_argument("--offset", metavar="N", type=_non_negative, default=0)

    p = sub.add_parser("restore", parents=common, help="put back a memory the forgetting policy removed")
    p.set_defaults(run=cmd_memory_restore)
    p.add_argument("id", metavar="ID", help="the mem_… id (from `lossless memory forgotten`)")


def memories(ctx: CommandContext, *, create: bool = False) -> Memories:
    """The store's memories: ``Memory.memories`` when the engine has it, else one built
    the same way from its store, embedder and counter."""
    memory = ctx.memory(create=create)
    attached = getattr(memory, "memories", None)
    if isinstance(attached, Memories):
        return attached
    return Memories(memory.store, memory.embedder, memory.counter)


def _table(records: Sequence[MemoryRecord], *, scores: bool) -> Table:
    table = Table()
    table.add_column("id", style="bold cyan", no_wrap=True)
    table.add_column("kind")
    table.add_column("owner", style="magenta")
    table.add_column("imp.", justify="right")
    if scores:
        table.add_column("score", justify="right")
    table.add_column(f"last used ({render.zone_label()})", style="green")
    table.add_column("content", overflow="fold")
    for r in records:
        owner = f"user:{r.user}" if r.user else f"agent:{r.agent}" if r.agent else "global"
        if r.user and r.agent:
            owner += f" agent:{r.agent}"
        cells: list[Text | str] = [Text(r.id), Text(r.kind + (f" ({r.status})" if r.status else "")), Text(owner),
                 f"{r.importance:.2f}"]
        if scores:
            cells.append(f"{r.score or 0:.3f}")
        cells += [render.minute(r.last_used_at), Text(r.content)]
        table.add_row(*cells)
    return table


def _emit(ctx: CommandContext, records: Sequence[MemoryRecord], empty: str, *, scores: bool = False) -> None:
    if ctx.json:
        ctx.emit_json([r.to_dict() for r in records])
    elif not records:
        ctx.out.print(Text(empty, style="dim"))
    else:
        ctx.print_unwrapped(_table(records, scores=scores))


def cmd_memory_add(ctx: CommandContext) -> int:
    args = ctx.args
    content: str | None = args.content
    if content is None:
        if sys.stdin is None or sys.stdin.isatty():
            raise CommandError("no content: pass TEXT or pipe the memory on stdin")
        content = stdin_text()
    check_content(content)  # before the store is opened: a refused memory leaves no new database
    record = memories(ctx, create=True).add(content, kind=args.kind, user=args.user, agent=args.agent,
                                            importance=args.importance, conversation_id=args.conversation)
    if ctx.json:
        ctx.emit_json(record.to_dict())
    else:
        again = " (already known: use count bumped)" if record.use_count else ""
        ctx.out.print(Text(f"{record.id} {record.kind} {record.scope} importance {record.importance:.2f}{again}"))
    return 0


def cmd_memory_search(ctx: CommandContext) -> int:
    args = ctx.args
    found = memories(ctx).search(args.query, user=args.user, agent=args.agent, kind=args.kind, limit=args.limit,
                                 include_global=not args.no_global, min_score=args.min_score)
    _emit(ctx, found, "no matching memories", scores=True)
    return 0


def cmd_memory_ls(ctx: CommandContext) -> int:
    args = ctx.args
    found = memories(ctx).ls(user=args.user, agent=args.agent, kind=args.kind, limit=args.limit,
                             offset=args.offset, order=args.order, scope=args.scope)
    _emit(ctx, found, f"no memories in {ctx.db_path()}")
    return 0


def _policy_report(ctx: CommandContext, gone: Sequence[Forgotten], dry_run: bool) -> int:
    if ctx.json:
        ctx.emit_json({"dry_run": dry_run, "count": len(gone), "forgotten": [f.to_dict() for f in gone]})
        return 0
    verb = "would forget" if dry_run else "forgot"
    reasons = Counter(f.reason for f in gone)
    why = ", ".join(f"{n} {r}" for r, n in sorted(reasons.items()))
    ctx.out.print(Text(f"{verb} {len(gone)} memor{'y' if len(gone) == 1 else 'ies'}" + (f" ({why})" if why else "")))
    if gone:
        ctx.print_unwrapped(_reason_table(gone))
    return 0


def _reason_table(gone: Sequence[Forgotten]) -> Table:
    table = Table()
    for name in ("id", "kind", "owner", "imp.", f"last used ({render.zone_label()})", "reason", "content"):
        table.add_column(name, overflow="fold" if name == "content" else "ellipsis")
    for f in gone:
        r = f.record
        owner = f"user:{r.user}" if r.user else f"agent:{r.agent}" if r.agent else "global"
        table.add_row(Text(r.id), r.kind, Text(owner), f"{r.importance:.2f}",
                      render.minute(r.last_used_at), f.reason, Text(r.content))
    return table


def cmd_memory_forgotten(ctx: CommandContext) -> int:
    args = ctx.args
    gone = memories(ctx).forgotten(limit=args.limit, offset=args.offset)
    if ctx.json:
        ctx.emit_json([f.to_dict() for f in gone])
    elif not gone:
        ctx.out.print(Text("the forgetting policy has removed nothing", style="dim"))
    else:
        ctx.print_unwrapped(_reason_table(gone))
    return 0


def cmd_memory_restore(ctx: CommandContext) -> int:
    record = memories(ctx).restore(ctx.args.id)
    if ctx.json:
        ctx.emit_json(record.to_dict())
    else:
        ctx.out.print(Text(f"restored {record.id} {record.kind} {record.scope}"))
    return 0


def _exists(store: Memories, memory_id: str) -> bool:
    try:
        store.get(memory_id)
    except NotFoundError:
        return False
    return True


def cmd_memory_forget(ctx: CommandContext) -> int:
    args = ctx.args
    if args.policy:
        if args.ids or args.user or args.agent or args.kind or args.scope or args.older_than is not None \
                or args.importance_below is not None or args.keep is not None or args.all or args.vacuum:
            raise CommandError("--policy applies the configured policy: give no other criterion with it "
                               "(only --dry-run)")
        memory = ctx.memory()
        policy = ForgetPolicy.from_config(memory.config)
        if not policy.active:
            raise CommandError("no forgetting policy is configured (memory_capacity, memory_max_unused_days "
                               "and memory_importance_floor are all off)")
        return _policy_report(ctx, memories(ctx).apply_policy(policy, dry_run=args.dry_run), args.dry_run)
    if not (args.ids or args.user or args.agent or args.kind or args.scope or args.older_than is not None
            or args.importance_below is not None or args.keep is not None or args.all):
        # said here in the CLI's own words (the API's error names its parameters: all=True)
        raise CommandError("memory forget needs a criterion (IDs, --user, --agent, --kind, --scope, --older-than, "
                           "--importance-below or --keep), or --all to forget every memory")
    store = memories(ctx)
    if args.ids:  # a mistyped id is named, as restore names it, and nothing is forgotten
        unknown = [i for i in dict.fromkeys(args.ids) if not _exists(store, i)]
        if unknown:
            raise CommandError(f"no memory with id {', '.join(map(repr, unknown))} (nothing forgotten; "
                               "`lossless memory ls` lists them)")
    gone = store.forget(
        args.ids or None, user=args.user, agent=args.agent, kind=args.kind, scope=args.scope,
        older_than=args.older_than, importance_below=args.importance_below, keep=args.keep,
        dry_run=args.dry_run, all=args.all, vacuum=args.vacuum,
    )
    if ctx.json:
        ctx.emit_json({"dry_run": args.dry_run, "count": len(gone), "memories": [r.to_dict() for r in gone]})
        return 0
    verb = "would forget" if args.dry_run else "forgot"
    ctx.out.print(Text(f"{verb} {len(gone)} memor{'y' if len(gone) == 1 else 'ies'}"))
    if gone:
        ctx.print_unwrapped(_table(gone, scores=False))
    return 0
