"""The ``lossless`` command: argument parsing and the one error boundary."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from lossless.cli import (
    commands,
    demo,
    export_cmd,
    files_cmd,
    import_jsonl,
    memory_cmd,
    migrate_cmd,
    serve_cmd,
    worker_cmd,
)
from lossless.cli.context import DEFAULT_WINDOW, CommandContext, CommandError
from lossless.cli.examples import add_examples
from lossless.errors import LosslessError
from lossless.export import EXPORT_FORMATS
from lossless.importers import FORMATS
from lossless.types import ROLES

__all__ = ["build_parser", "main"]

Command = Callable[[CommandContext], int]

_DESCRIPTION = """\
A long-context memory engine for LLM agents: every message kept verbatim, older
history condensed into a DAG of summaries that expand back to the originals.
Start with `lossless demo`."""


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("lossless")
    except PackageNotFoundError:
        return "unknown"


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}")
    return value


def _common_options(suppress: bool) -> argparse.ArgumentParser:
    """Options accepted before or after the command name. On the subcommands their
    default is SUPPRESS, so leaving one out there keeps what was given before it."""

    def default(value: object) -> object:
        return argparse.SUPPRESS if suppress else value

    common = argparse.ArgumentParser(add_help=False)
    group = common.add_argument_group("global options")
    group.add_argument("--db", metavar="PATH", default=default(None),
                       help="SQLite database, or a postgresql:// URL (default: $LOSSLESS_DB, else "
                            "$LOSSLESS_HOME/lossless.db, else the user data directory)")
    group.add_argument("--window", metavar="N", type=_positive, default=default(None),
                       help="the model's context window in tokens; remembered by the database for later "
                            f"commands (default: the remembered value, else {DEFAULT_WINDOW})")
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lossless", description=_DESCRIPTION, parents=[_common_options(False)],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"lossless {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    common = [_common_options(True)]

    def command(name: str, run: Command, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, parents=common, help=help_text, description=help_text)
        p.set_defaults(run=run)
        return p

    p = command("add", commands.cmd_add, "add one message to a conversation (created if new)")
    p.add_argument("conversation", metavar="CONV")
    p.add_argument("--role", required=True, choices=ROLES)
    p.add_argument("--name", help="who spoke (for multi-party chats)")
    p.add_argument("--created-at", metavar="ISO", help="when it was said (default: now)")
    p.add_argument("--external-id", metavar="ID", help="your id for it; adding it again adds nothing")
    p.add_argument("--content", metavar="TEXT", help="the message text (default: read stdin, stored verbatim)")
    _no_wait(p)

    p = command("import", import_jsonl.cmd_import,
                "import a chat log: OpenAI messages (JSONL/JSON), Anthropic messages, Claude Code, Codex CLI, "
                "ChatGPT export, OpenClaw, or a User:/Assistant: transcript")
    p.add_argument("file", metavar="PATH", help="the file, or - for stdin")
    p.add_argument("--format", choices=tuple(FORMATS), metavar="FORMAT",
                   help=f"the file's format (default: detected): {', '.join(FORMATS)}")
    p.add_argument("--conversation", metavar="ID",
                   help="put every message here (default: each source conversation keeps its own id, "
                        "e.g. claude-code:<sessionId>; OpenAI lines name theirs in a 'conversation' field)")
    p.add_argument("--strict", action="store_true",
                   help="stop at the first bad line, writing nothing from its batch")
    _no_wait(p)

    p = command("export", export_cmd.cmd_export,
                "write a conversation out: OpenAI JSONL messages, or JSON with the whole summary DAG")
    p.add_argument("conversation", metavar="CONV", nargs="?", help="the conversation (or --all)")
    p.add_argument("--all", action="store_true", help="every conversation, one file each, into the directory -o")
    p.add_argument("--format", choices=EXPORT_FORMATS, default="openai-jsonl",
                   help="openai-jsonl (default; `lossless import` reads it back) or json (messages, "
                        "summaries with their sources, metadata)")
    p.add_argument("-o", "--output", metavar="FILE", default="-",
                   help="where to write (default: - for stdout); with --all, a directory")
    p.add_argument("--force", action="store_true", help="replace FILE if it exists")

    command("ls", commands.cmd_ls, "list conversations with message and summary counts")

    p = command("show", commands.cmd_show, "show a conversation's summary DAG and its raw tail")
    p.add_argument("conversation", metavar="CONV")
    p.add_argument("--messages", action="store_true", help="list the original messages under each leaf")
    p.add_argument("--levels", metavar="N", type=int, help="show only N levels below each frontier root")
    p.add_argument("--tail", metavar="N", type=int, help="show only the newest N raw-tail messages")

    p = command("assemble", commands.cmd_assemble, "print the context assembled for one model call")
    p.add_argument("conversation", metavar="CONV")
    p.add_argument("--budget", metavar="N", type=_positive, help="token budget (default: --window)")
    p.add_argument("--query", metavar="Q", help="recall older messages that match this question")

    p = command("grep", commands.cmd_grep, "search messages and summaries (lcm_grep)")
    p.add_argument("conversation", metavar="CONV", nargs="?", help="the conversation (or --all)")
    p.add_argument("query", metavar="QUERY")
    p.add_argument("--all", action="store_true", help="search every conversation")
    how = p.add_mutually_exclusive_group()
    how.add_argument("--regex", action="store_true", help="QUERY is a regular expression")
    how.add_argument("--raw", action="store_true", help="pass QUERY to SQLite FTS5 unquoted (its own syntax)")
    p.add_argument("--scope", choices=("all", "messages", "summaries"), default="all")
    p.add_argument("--role", choices=ROLES)
    p.add_argument("--since", metavar="ISO")
    p.add_argument("--until", metavar="ISO")
    p.add_argument("--sort", choices=("relevance", "recency"), default="relevance")
    p.add_argument("--limit", metavar="N", type=_positive, default=10)

    p = command("search", commands.cmd_search,
                "search by meaning and keywords (hybrid recall; --mode semantic or fts for one side)")
    p.add_argument("conversation", metavar="CONV", nargs="?", help="the conversation (or --all / --where)")
    p.add_argument("query", metavar="QUERY")
    p.add_argument("--all", action="store_true", help="search every conversation")
    p.add_argument("--where", metavar="KEY=VALUE", action="append", default=[],
                   help="only conversations whose metadata has KEY=VALUE (repeatable; implies --all)")
    p.add_argument("--mode", choices=("hybrid", "semantic", "fts"), default="hybrid")
    p.add_argument("--scope", choices=("all", "messages", "summaries"), default="messages")
    p.add_argument("--role", choices=ROLES)
    p.add_argument("--since", metavar="ISO")
    p.add_argument("--until", metavar="ISO")
    p.add_argument("--limit", metavar="N", type=_positive, default=10)

    p = command("embed", commands.cmd_embed,
                "embed a conversation's messages now for vector recall (otherwise done by the first query)")
    p.add_argument("conversation", metavar="CONV", nargs="?")
    p.add_argument("--all", action="store_true", help="every conversation")

    p = command("describe", commands.cmd_describe,
                "describe a summary or message by id (lcm_describe); a large message with an outline "
                "of its content and its page count")
    p.add_argument("id", metavar="ID", help="sum_… or msg_…")

    p = command("expand", commands.cmd_expand,
                "expand a summary back to what it covers, or print a message's exact text, a slice at a "
                "time (lcm_expand)")
    p.add_argument("id", metavar="ID", help="a summary id (sum_…) or a message id (msg_…)")
    p.add_argument("--to", choices=("messages", "sources"), default="messages",
                   help="summaries: the original messages (default) or the direct sources")
    p.add_argument("--max-tokens", metavar="N", type=_positive, default=4000,
                   help="summaries: token budget of the items; messages: most tokens in the slice (default 4000)")
    p.add_argument("--from-seq", metavar="N", type=_positive, help="summaries: start at this message number")
    p.add_argument("--offset", metavar="N", type=_non_negative, default=0,
                   help="messages: start at this character (continue with the next offset shown on stderr)")
    p.add_argument("--max-chars", metavar="N", type=_positive,
                   help="messages: exactly N characters (fewer at the end) instead of --max-tokens")
    p.add_argument("--page", metavar="N", type=_positive,
                   help="messages: page N (from 1) of the pages `describe` reports, or of --max-chars pages")

    p = command("compact", commands.cmd_compact, "compact a conversation now")
    p.add_argument("conversation", metavar="CONV", nargs="?", help="the conversation (or --all)")
    p.add_argument("--all", action="store_true", help="every conversation (with --redo-fallbacks)")
    p.add_argument("--full", action="store_true", help="condense all the way to one root summary")
    p.add_argument("--emergency", action="store_true", help="keep only the newest turn raw")
    p.add_argument("--redo-fallbacks", action="store_true",
                   help="write again, with the summarizer model, the summaries made by the deterministic "
                        "fallback while the provider was down (their earlier text is kept)")

    p = command("stats", commands.cmd_stats, "statistics for one conversation (with its compression), "
                "or totals for the database")
    p.add_argument("conversation", metavar="CONV", nargs="?")
    p.add_argument("--plot", metavar="FILE.png",
                   help="draw the conversation's compression: raw vs active tokens, summaries per depth "
                        "(needs matplotlib)")

    p = command("verify", commands.cmd_verify, "re-check stored hashes and DAG invariants")
    p.add_argument("conversation", metavar="CONV", nargs="?")

    p = command("demo", demo.cmd_demo, "ingest a built-in multi-week conversation and show what lossless does")
    p.description = ("Feed a built-in three-week team conversation through a small context window "
                     f"({demo.DEMO_WINDOW} tokens unless --window is given) into a fresh temporary "
                     "database (unless --db is given), then show the summary DAG, an assembled "
                     "context, a search and an expansion. Offline; takes a few seconds.")
    p.add_argument("--budget", metavar="N", type=_positive, default=3000,
                   help="token budget of the assembled context (default: 3000)")
    p.add_argument("--seed", metavar="N", type=int, default=7, help="which generated conversation (default: 7)")
    p.add_argument("--vectors", action="store_true",
                   help="hybrid keyword + vector recall with the local embedding model (slower: it embeds "
                        "every message; needs the embeddings extra)")
    worker_cmd.register(sub, common)
    memory_cmd.register(sub, common)
    migrate_cmd.register(sub, common)
    files_cmd.register(sub, common)
    serve_cmd.register(sub, common)
    add_examples(parser)  # every command's --help ends with examples (cli/examples.py)
    return parser


def _no_wait(p: argparse.ArgumentParser) -> None:
    p.add_argument("--no-wait", action="store_true",
                   help="return once the messages are stored (searchable by keyword); leave compaction and "
                        "embedding to `lossless worker` (default: do them now, with a progress bar)")


def _check(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Usage rules argparse cannot express; violations exit 2 like any usage error."""
    if args.command == "compact":
        if args.all and args.conversation is not None:
            parser.error("compact: give a conversation or --all, not both")
        if args.all and not args.redo_fallbacks:
            parser.error("compact: --all goes with --redo-fallbacks")
        if not args.all and args.conversation is None:
            parser.error("compact: give a conversation (or --all --redo-fallbacks)")
        if args.redo_fallbacks and (args.full or args.emergency):
            parser.error("compact: --redo-fallbacks rewrites existing summaries; it does not go with --full "
                         "or --emergency")
    if args.command == "embed" and args.all == (args.conversation is not None):
        parser.error("embed: give a conversation or --all")
    if args.command in ("grep", "search"):
        everywhere = args.all or bool(getattr(args, "where", None))
        if everywhere and args.conversation is not None:
            parser.error(f"{args.command}: give a conversation or --all, not both")
        if not everywhere and args.conversation is None:
            parser.error(f"{args.command}: give a conversation ({args.command} CONV QUERY) "
                         f"or --all ({args.command} --all QUERY)")
        for item in getattr(args, "where", None) or []:
            if "=" not in item:
                parser.error(f"search: --where takes KEY=VALUE, got {item!r}")
    if args.command == "show":
        for option in ("levels", "tail"):
            if getattr(args, option) is not None and getattr(args, option) < 0:
                parser.error(f"show: --{option} must be 0 or more")


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 1


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit status (0 ok, 1 error, 2 usage)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
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
