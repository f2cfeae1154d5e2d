"""What every command module needs to declare its commands: the options accepted by
every command (``--db``, ``--window``, ``--json`` …), the argparse types they share, and
one way to add a command.

It imports no command module, so each of them can import it and ``cli/main.py`` can
import them all without a cycle.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import TypeAlias

from lossless.cli.context import DEFAULT_WINDOW, CommandContext

__all__ = [
    "Command",
    "Subparsers",
    "UsageCheck",
    "add_command",
    "command_parents",
    "common_options",
    "no_wait",
    "non_negative",
    "positive",
]

Command: TypeAlias = Callable[[CommandContext], int]
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
# Usage rules argparse cannot express, checked after parsing; a violation calls
# ``parser.error`` (the top-level parser), so it exits 2 like any usage error.
UsageCheck: TypeAlias = Callable[[argparse.ArgumentParser, argparse.Namespace], None]


def positive(text: str) -> int:
    """An argparse type: an integer of 1 or more."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def non_negative(text: str) -> int:
    """An argparse type: an integer of 0 or more."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}")
    return value


def common_options(suppress: bool) -> argparse.ArgumentParser:
    """Options accepted before or after the command name. On the subcommands their
    default is SUPPRESS, so leaving one out there keeps what was given before it."""

    def default(value: object) -> object:
        return argparse.SUPPRESS if suppress else value

    common = argparse.ArgumentParser(add_help=False)
    group = common.add_argument_group("global options")
    group.add_argument("--db", metavar="PATH", default=default(None),
                       help="SQLite database, or a postgresql:// URL (default: $LOSSLESS_DB, else "
                            "$LOSSLESS_HOME/lossless.db, else the user data directory)")
    group.add_argument("--window", metavar="N", type=positive, default=default(None),
                       help="the model's context window in tokens; remembered by the database for later "
                            "commands when given to one that may create it (add, import, serve, mcp …) "
                            f"(default: the remembered value, else {DEFAULT_WINDOW})")
    group.add_argument("--model", metavar="NAME", default=default(None),
                       help="the chat model (e.g. gpt-4o, claude-sonnet-4-5): its known window and "
                            "history limits apply unless --window is given")
    group.add_argument("--summarizer", metavar="KIND", default=default(None),
                       choices=("extractive", "openai", "anthropic", "llama"),
                       help="who writes summaries (default: $LOSSLESS_SUMMARIZER, else extractive, offline)")
    group.add_argument("--summarizer-model", metavar="NAME", default=default(None),
                       help="the summarizer's model (default: $LOSSLESS_SUMMARIZER_MODEL, else the provider's)")
    group.add_argument("--json", action="store_true", default=default(False),
                       help="machine-readable JSON on stdout")
    group.add_argument("--debug", action="store_true", default=default(False),
                       help="show a traceback for unexpected errors")
    return common


def command_parents(parents: Sequence[argparse.ArgumentParser] | None = None) -> list[argparse.ArgumentParser]:
    """The parent parsers of every command: ``parents`` when given, else the common
    options with their defaults suppressed (see :func:`common_options`)."""
    return list(parents) if parents is not None else [common_options(True)]


def add_command(subparsers: Subparsers, name: str, run: Command, help_text: str,
                parents: Sequence[argparse.ArgumentParser], *,
                check: UsageCheck | None = None) -> argparse.ArgumentParser:
    """Add the command ``name`` (its help line is also its description), run by ``run``;
    ``check``, if given, is called after parsing with the rules argparse cannot express."""
    p = subparsers.add_parser(name, parents=list(parents), help=help_text, description=help_text)
    p.set_defaults(run=run)
    if check is not None:
        p.set_defaults(check_usage=check)
    return p


def no_wait(p: argparse.ArgumentParser) -> None:
    """``--no-wait``, for the commands that store messages."""
    p.add_argument("--no-wait", action="store_true",
                   help="return once the messages are stored (searchable by keyword); leave compaction and "
                        "embedding to `lossless worker` (default: do them now, with a progress bar)")
