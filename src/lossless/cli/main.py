"""The ``lossless`` command: the top-level parser, the command modules that register
their commands on it, and the one error boundary.

Each command module has ``register(subparsers, parents)``; the options every command
accepts live in :mod:`lossless.cli.options`. This module imports them; none imports it.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from lossless.cli import (
    add_cmd,
    commands,
    demo,
    doctor_cmd,
    erase_cmd,
    export_cmd,
    files_cmd,
    import_jsonl,
    memory_cmd,
    migrate_cmd,
    serve_cmd,
    worker_cmd,
)
from lossless.cli.context import CommandContext, CommandError
from lossless.cli.examples import add_examples, walk_commands
from lossless.cli.options import common_options
from lossless.cli.terminal import utf8_pipe
from lossless.core.errors import LosslessError

__all__ = ["build_parser", "main"]

_DESCRIPTION = """\
A long-context memory engine for LLM agents: every message kept verbatim, older
history condensed into a DAG of summaries that expand back to the originals.
Start with `lossless demo`."""

# In the order ``lossless --help`` lists their commands.
_COMMAND_MODULES = (add_cmd, import_jsonl, export_cmd, commands, erase_cmd, demo, doctor_cmd, worker_cmd,
                    memory_cmd, migrate_cmd, files_cmd, serve_cmd)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("lossless")
    except PackageNotFoundError:
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    """The whole ``lossless`` parser: global options, then every module's commands."""
    parser = argparse.ArgumentParser(prog="lossless", description=_DESCRIPTION, parents=[common_options(False)],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"lossless {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    parents = [common_options(True)]
    for module in _COMMAND_MODULES:
        module.register(sub, parents)
    add_examples(parser)  # every command's --help ends with examples (cli/examples.py)
    # an option is matched whole, never by its start: `grep --mode x` (grep has no
    # --mode) was taken for `--model x` and failed as an unknown chat model
    for p in (parser, *(sub for _, sub in walk_commands(parser))):
        p.allow_abbrev = False
    return parser


def _check(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Usage rules argparse cannot express (each command declares its own, as
    ``check_usage``); violations exit 2 like any usage error."""
    check = getattr(args, "check_usage", None)
    if check is not None:
        check(parser, args)


def _command_parser(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The parser of the command given (``lossless import --foo`` shows import's usage,
    not the list of every command); the top-level one if there is none."""
    for action in parser._subparsers._group_actions if parser._subparsers else ():
        found = getattr(action, "choices", None) or {}
        if getattr(args, "command", None) in found:
            sub: argparse.ArgumentParser = found[args.command]
            return sub
    return parser


def _late_positional(args: argparse.Namespace, unknown: list[str]) -> list[str]:
    """argparse fills a command's optional last positional (``add CONV [TEXT]``) only from
    the arguments before the first option: ``add c1 --role user "hi"`` leaves "hi" over.
    A command that names such a positional (``set_defaults(late_positional=...)``) gets
    one such leftover, when it is not an option (or follows ``--``) and the positional is
    still empty. A command whose optional positional comes first (``grep [CONV] QUERY``)
    names the pair (``late_positional=("conversation", "query")``): ``grep c1 --regex "x"``
    took "c1" for the query, so with the first still empty the two move up by one."""
    name = getattr(args, "late_positional", None)
    first, name = name if isinstance(name, tuple) else (None, name)
    if not name or (first is None and getattr(args, name, None) is not None) \
            or (first is not None and getattr(args, first, None) is not None):
        return unknown
    if len(unknown) == 2 and unknown[0] == "--":  # after "--" even "-5 °C" is the text
        late = unknown[1]
    elif len(unknown) == 1 and not unknown[0].startswith("-"):
        late = unknown[0]
    else:
        return unknown
    if first is not None:
        setattr(args, first, getattr(args, name))
    setattr(args, name, late)
    return []


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 1


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit status (0 ok, 1 error, 2 usage)."""
    utf8_pipe()  # before anything is written or a console made (they read its encoding)
    parser = build_parser()
    try:
        args, unknown = parser.parse_known_args(argv)
        unknown = _late_positional(args, unknown)
        if unknown:  # said by the command's parser, so its usage is the one shown
            _command_parser(parser, args).error(f"unrecognized arguments: {' '.join(unknown)}")
        _check(parser, args)
    except SystemExit as exc:  # --help, --version and usage errors
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    ctx = CommandContext.create(args)
    try:
        status: int = args.run(ctx)
        return status
    except (LosslessError, CommandError) as exc:
        return _fail(str(exc))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`lossless show x | head`): stop quietly, and point stdout
        # at devnull so the interpreter's final flush does not complain.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except OSError as exc:
        return _fail(f"{exc.strerror or exc}: {exc.filename}" if exc.filename else str(exc))
    except Exception as exc:
        if args.debug:
            raise
        return _fail(f"unexpected {type(exc).__name__}: {exc} (run with --debug for the traceback)")
    finally:
        ctx.close()
