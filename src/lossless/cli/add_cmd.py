"""``lossless add``: one message into a conversation (created if new)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from rich.text import Text

from lossless.cli.context import CommandContext, CommandError
from lossless.cli.options import Subparsers, add_command, command_parents, no_wait
from lossless.cli.terminal import stdin_text
from lossless.core.types import ROLES
from lossless.core.validate import check_conversation_id, validate_message

__all__ = ["cmd_add", "register"]


def register(subparsers: Subparsers, parents: Sequence[argparse.ArgumentParser] | None = None) -> None:
    """Add the ``add`` command. ``parents`` are the parsers of the options every command
    accepts (``--db``, ``--json`` …); by default the CLI's own."""
    p = add_command(subparsers, "add", cmd_add, "add one message to a conversation (created if new)",
                    command_parents(parents), check=_check_add)
    p.add_argument("conversation", metavar="CONV")
    p.add_argument("text", metavar="TEXT", nargs="?",
                   help="the message text (or --content TEXT; neither: read stdin, stored verbatim)")
    p.set_defaults(late_positional="text")  # also after the options: add c1 --role user "hi"
    p.add_argument("--role", required=True, choices=ROLES)
    p.add_argument("--name", help="who spoke (for multi-party chats)")
    p.add_argument("--created-at", metavar="ISO", help="when it was said (default: now)")
    p.add_argument("--external-id", metavar="ID", help="your id for it; adding it again adds nothing")
    p.add_argument("--content", metavar="TEXT", help="the message text, as TEXT (for text that starts with '-')")
    no_wait(p)


def _check_add(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.text is not None and args.content is not None:
        parser.error("add: the text is given twice, as TEXT and as --content; give one")


def cmd_add(ctx: CommandContext) -> int:
    args = ctx.args
    content: str | None = args.content if args.content is not None else args.text
    if content is None:
        if sys.stdin is None or sys.stdin.isatty():
            raise CommandError("no content: pass the text (TEXT or --content TEXT) or pipe it on stdin")
        content = stdin_text()
    fields = {"role": args.role, "content": content, "name": args.name, "created_at": args.created_at,
              "external_id": args.external_id}
    fields = {k: v for k, v in fields.items() if v is not None}
    # Check the message before the store is opened and before get-or-create, so a refused
    # message leaves no new database and no empty conversation (its size once the store's
    # limit is known).
    check_conversation_id(args.conversation)
    validate_message(fields, max_bytes=sys.maxsize)
    memory = ctx.memory()
    new = validate_message(fields, max_bytes=memory.config.max_message_bytes)
    conv = memory.conversation(args.conversation)
    before = memory.store.last_seq(conv.id)
    msg = conv.add_many([fields])[0]
    if msg.seq <= before:  # the --external-id was stored already: add_many handed back that message
        if (msg.role, msg.content, msg.name) != (new.role, new.content, new.name):
            raise CommandError(f"external id {args.external_id!r} is already stored in {conv.id!r} as #{msg.seq} "
                               f"({msg.id}) with other content: this message was not added (give another id)")
        ctx.err.print(Text(f"already stored (external id {args.external_id!r}): nothing added"), soft_wrap=True)
    if ctx.json:
        ctx.emit_json({"conversation": conv.id, "seq": msg.seq, "id": msg.id, "tokens": msg.token_count})
    else:
        ctx.out.print(Text(f"#{msg.seq} {msg.id}"))
    ctx.catch_up([conv.id])
    return 0
