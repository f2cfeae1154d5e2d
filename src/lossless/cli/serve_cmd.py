"""``lossless serve``, ``lossless mcp`` and ``lossless keys create|ls|revoke``: lossless over
the network, and the API keys that guard it.

:func:`register` adds the three commands to the top-level subparsers; each command
function takes the invocation's :class:`CommandContext` and returns the exit status.
The server and MCP extras are imported only when their command runs.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from rich.table import Table
from rich.text import Text

from lossless.cli import render
from lossless.cli.context import CommandContext, CommandError
from lossless.cli.options import Subparsers, command_parents, non_negative, positive
from lossless.core import environ
from lossless.core.errors import MissingDependencyError
from lossless.server.keys import APIKeys, check_tenant

__all__ = ["cmd_keys_adopt", "cmd_keys_create", "cmd_keys_ls", "cmd_keys_revoke", "cmd_mcp", "cmd_serve", "register"]

UPSTREAM_KEY_ENV = "LOSSLESS_UPSTREAM_KEY"


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 0 < value < 65536:
        raise argparse.ArgumentTypeError(f"expected a port number from 1 to 65535, got {text!r}")
    return value


def _bytes(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of bytes, got {text!r}") from None
    if value < 1024:
        raise argparse.ArgumentTypeError(f"expected at least 1024 bytes, got {text!r}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def register(subparsers: Subparsers, parents: Sequence[argparse.ArgumentParser] | None = None) -> None:
    """Add ``serve``, ``mcp`` and ``keys``. ``parents`` are the parsers of the options every
    command accepts (``--db``, ``--model`` …); by default the CLI's own."""
    common = command_parents(parents)

    p = subparsers.add_parser(
        "serve", parents=common, help="serve the HTTP API, the context proxy and the web page (uvicorn)",
        description="Serve the REST API (/v1/lossless/...), the OpenAI/Anthropic-compatible context proxy "
                    "(/v1/chat/completions, /v1/messages, with --upstream), /openapi.json and a web page at /. "
                    "Requests need an API key (lossless keys create) once one exists; without any key only "
                    "loopback is served.")
    p.set_defaults(run=cmd_serve)
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    p.add_argument("--port", type=_port, default=8765, help="port (default: 8765)")
    p.add_argument("--upstream", metavar="BASE_URL",
                   help="the model provider the proxy forwards to, e.g. https://api.openai.com/v1")
    p.add_argument("--upstream-key", metavar="KEY",
                   help=f"the provider's API key (default: ${UPSTREAM_KEY_ENV}; prefer it: a key on the command "
                        "line shows in the process list)")
    p.add_argument("--max-body-bytes", metavar="N", type=_bytes, default=8 * 1024 * 1024,
                   help="refuse larger request bodies with 413 (default: 8 MiB)")
    p.add_argument("--max-request-messages", metavar="N", type=non_negative, default=10_000,
                   help="refuse a request carrying more messages (a proxied chat, a batch of POST .../messages) "
                        "with 413 before storing any (default: 10000; 0: no limit)")
    p.add_argument("--tenant-concurrency", metavar="N", type=non_negative, default=2,
                   help="requests of one tenant that store or assemble at once; another waits up to 5 s, then "
                        "gets 429 with Retry-After (default: 2; 0: no limit)")
    p.add_argument("--header-timeout", metavar="SECONDS", type=_seconds, default=10.0,
                   help="close a connection that has not sent a whole request line and headers within this many "
                        "seconds of opening or of its previous answer (default: 10)")
    p.add_argument("--allowed-host", metavar="NAME", action="append", default=[],
                   help="also answer requests for this host name (a reverse proxy's public name); repeatable. "
                        "A loopback server otherwise answers only loopback names (DNS-rebinding pages are refused)")
    p.add_argument("--allowed-origin", metavar="ORIGIN", action="append", default=[],
                   help="let web pages from this origin (https://app.example) write through the API; repeatable "
                        "(default: only the server's own page)")
    p.add_argument("--keyless", action="store_true",
                   help="serve without keys a database whose API keys were all revoked (loopback only): once a "
                        "key was created the server otherwise stays locked")
    p.add_argument("--log-level", choices=("critical", "error", "warning", "info", "debug"), default="info")

    p = subparsers.add_parser(
        "mcp", parents=common, help="serve the memory tools over MCP (stdio by default)",
        description="An MCP server with lcm_grep, lcm_describe, lcm_expand, lcm_compact, memory_search and "
                    "memory_add; conversations, summaries and messages as resources; the recall and resume "
                    "prompts; id completion, log levels and progress. stdio for a local agent (the whole "
                    "database); --transport http serves streamable HTTP at /mcp with the keys of `lossless serve`: "
                    "once a key exists every request needs one and sees its tenant's data only; without any key "
                    "only loopback is served.")
    p.set_defaults(run=cmd_mcp)
    p.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    p.add_argument("--host", default="127.0.0.1",
                   help="http: address to bind (default: 127.0.0.1; another address only once API keys exist)")
    p.add_argument("--port", type=_port, default=8766, help="http: port (default: 8766)")
    p.add_argument("--keyless", action="store_true",
                   help="http: serve without keys a database whose API keys were all revoked (loopback only), "
                        "as `lossless serve --keyless`")
    p.add_argument("--session-idle-seconds", metavar="S", type=_seconds, default=1800.0,
                   help="http: close a session no request used for this long (default: 1800); its client "
                        "gets 404 and starts a new one")
    p.add_argument("--max-sessions", metavar="N", type=positive, default=256,
                   help="http: at most this many open sessions; a new one closes the oldest idle one first "
                        "(default: 256)")

    top = subparsers.add_parser("keys", help="API keys of `lossless serve`: create, list, revoke",
                                description="API keys for the HTTP server. Each belongs to a tenant: the "
                                            "conversations and memories it can reach. Only a salted hash is "
                                            "stored; the key is shown once, when created.")
    sub = top.add_subparsers(dest="keys_command", metavar="SUBCOMMAND", required=True)
    p = sub.add_parser("create", parents=common, help="create a key for a tenant (printed once)")
    p.set_defaults(run=cmd_keys_create)
    p.add_argument("--tenant", required=True, help="letters, digits, '_', '.', '-'")
    p.add_argument("--name", help="what the key is for")
    p = sub.add_parser("ls", parents=common, help="list keys (never the keys themselves)")
    p.set_defaults(run=cmd_keys_ls)
    p.add_argument("--tenant", help="only this tenant's")
    p = sub.add_parser("revoke", parents=common, help="revoke a key: refused from the next request on")
    p.set_defaults(run=cmd_keys_revoke)
    p.add_argument("id", metavar="ID", help="the key's id (key_…)")
    p = sub.add_parser("adopt", parents=common, help="give existing conversations to a tenant (copied into its "
                                                     "namespace, verbatim)",
                       description="Conversations stored before the first key was created (or through the CLI) "
                                   "belong to no tenant, so no key reaches them. adopt copies each one, every "
                                   "message verbatim with its time and metadata, into the tenant's namespace "
                                   "under the same id; the worker summarizes the copy. The original stays for "
                                   "the operator. Running it again copies nothing twice.")
    p.set_defaults(run=cmd_keys_adopt)
    p.add_argument("--tenant", required=True, help="the tenant that gets them")
    p.add_argument("conversations", metavar="CONV", nargs="*", help="the conversations (or --all-unowned)")
    p.add_argument("--all-unowned", action="store_true", help="every conversation no tenant owns")


def _keys(ctx: CommandContext, *, create: bool) -> APIKeys:
    return APIKeys(ctx.memory(create=create).store)


def cmd_keys_create(ctx: CommandContext) -> int:
    key, secret = _keys(ctx, create=True).create(ctx.args.tenant, ctx.args.name)
    if ctx.json:
        ctx.emit_json({**key.to_dict(), "key": secret})
        return 0
    ctx.out.print(Text(secret), soft_wrap=True)
    ctx.err.print(Text(f"{key.id} for tenant {key.tenant!r}: this is the only time the key is shown; "
                       "send it as Authorization: Bearer <key>", style="dim"))
    return 0


def cmd_keys_ls(ctx: CommandContext) -> int:
    keys = _keys(ctx, create=False).ls(ctx.args.tenant)
    if ctx.json:
        ctx.emit_json([k.to_dict() for k in keys])
        return 0
    if not keys:
        ctx.out.print(Text("no API keys (the server answers loopback only, without keys)", style="dim"))
        return 0
    table = Table()
    for column in ("id", "tenant", "name", "prefix", f"created ({render.zone_label()})",
                   f"last used ({render.zone_label()})", "status"):
        table.add_column(column)
    for k in keys:
        used = render.minute(k.last_used_at) if k.last_used_at else "never"
        table.add_row(Text(k.id), Text(k.tenant), Text(k.name or ""), Text(k.prefix + "…"),
                      render.minute(k.created_at), used,
                      Text("active", style="green") if k.active else Text("revoked", style="red"))
    ctx.print_unwrapped(table)
    return 0


def cmd_keys_revoke(ctx: CommandContext) -> int:
    key = _keys(ctx, create=False).revoke(ctx.args.id)
    if ctx.json:
        ctx.emit_json(key.to_dict())
    else:
        ctx.out.print(Text(f"revoked {key.id} (tenant {key.tenant!r})"))
    return 0


def cmd_keys_adopt(ctx: CommandContext) -> int:
    from lossless.server.tenancy import Tenant

    args = ctx.args
    if bool(args.conversations) == bool(args.all_unowned):
        raise CommandError("keys adopt: name the conversations, or --all-unowned")
    check_tenant(args.tenant)  # a name `keys create` refuses would get copies no key can ever reach
    memory = ctx.memory(create=False)
    tenant = Tenant(args.tenant)
    tenant.stored_id("x")  # the tenant name makes valid ids
    if args.all_unowned:
        ids = [c.id for c in memory.conversations(limit=10**9) if not c.id.startswith("@")]
    else:
        ids = list(args.conversations)
        for cid in ids:
            ctx.existing_conversation(cid)
            if cid.startswith("@"):
                raise CommandError(f"{cid!r} is in a tenant's namespace already")
    copied: dict[str, int] = {}
    for cid in ids:
        source = memory.conversation(cid)
        target = memory.conversation(tenant.stored_id(cid), tenant.metadata_in(source.info.metadata))
        added = 0
        for first in range(1, source.info.message_count + 1, 500):
            batch = [{"role": m.role, "content": m.content, "name": m.name, "created_at": m.created_at,
                      "tool_calls": list(m.tool_calls) or None, "tool_call_id": m.tool_call_id,
                      "metadata": m.metadata or None, "external_id": f"adopted:{m.id}"}
                     for m in source.messages(first, first + 499)]
            before = target.info.message_count
            target.add_many([{k: v for k, v in msg.items() if v is not None} for msg in batch])
            added += target.info.message_count - before
        copied[cid] = added
    ctx.catch_up([tenant.stored_id(cid) for cid in ids])
    if ctx.json:
        ctx.emit_json({"tenant": args.tenant, "copied": copied})
    else:
        for cid, n in copied.items():
            ctx.out.print(Text(f"{cid} → tenant {args.tenant!r}: {n:,} messages copied"
                               + (" (copied before)" if n == 0 else "")))
    return 0


def cmd_serve(ctx: CommandContext) -> int:
    try:
        from lossless.server.app import create_app
        from lossless.server.auth import check_bind
        from lossless.server.errors import HTTPError
        from lossless.server.limits import Limits
        from lossless.server.run import serve
        from lossless.server.state import Upstream
    except ImportError as exc:
        raise MissingDependencyError(f"lossless serve needs the server extra: pip install 'lossless[server]' "
                                     f"({exc})") from exc
    args = ctx.args
    # a worker thread compacts and embeds what requests store: no request waits for it
    memory = ctx.memory(create=True, compaction="background")
    memory.worker.start()  # now: it loads the embedding model before the first request needs it
    try:
        warning = check_bind(args.host, APIKeys(memory.store), keyless=args.keyless)
    except HTTPError as exc:
        raise CommandError(exc.message) from None
    if warning:
        ctx.err.print(Text(f"warning: {warning}", style="yellow"), soft_wrap=True)
    key = args.upstream_key or environ.read(UPSTREAM_KEY_ENV)
    # --window, when given, is the model's window for the proxy too (not the table's for the request's model)
    upstream = Upstream(args.upstream, key, window=getattr(args, "window", None)) if args.upstream else None
    app = create_app(memory, upstream=upstream, max_body_bytes=args.max_body_bytes,
                     allow_implicit_tenant=warning is not None, host=args.host,
                     allowed_hosts=args.allowed_host, allowed_origins=args.allowed_origin, keyless=args.keyless,
                     limits=Limits(max_request_messages=args.max_request_messages or None,
                                   tenant_concurrency=args.tenant_concurrency or None))
    ctx.err.print(Text(f"lossless: serving {ctx.db_path()} on http://{args.host}:{args.port} "
                       f"(web page at /, API docs at /openapi.json"
                       f"{', proxy to ' + args.upstream if args.upstream else ''})", style="dim"), soft_wrap=True)
    serve(app, args.host, args.port, log_level=args.log_level, header_timeout=args.header_timeout)
    return 0


def cmd_mcp(ctx: CommandContext) -> int:
    try:
        from lossless.server.mcp_server import build_server
    except ImportError as exc:  # the mcp SDK, or starlette it serves HTTP with, is missing
        raise MissingDependencyError(f"lossless mcp needs the mcp extra: pip install 'lossless[mcp]' "
                                     f"({exc})") from exc

    args = ctx.args
    if args.transport == "stdio":  # the local user who started it: the whole database, like the CLI
        if args.keyless:
            raise CommandError("--keyless is for --transport http (stdio has no keys: it serves the local user)")
        build_server(lambda: ctx.memory(create=True, compaction="background")).run("stdio")
        return 0
    return _mcp_http(ctx)


def _mcp_http(ctx: CommandContext) -> int:
    """``lossless mcp --transport http``: the keys and bind rules of ``lossless serve``."""
    from lossless.server.auth import Authenticator, check_bind
    from lossless.server.errors import HTTPError
    from lossless.server.mcp_http import http_app
    from lossless.server.mcp_server import build_server
    from lossless.server.run import serve

    args = ctx.args
    memory = ctx.memory(create=True, compaction="background")
    memory.worker.start()
    keys = APIKeys(memory.store)
    try:
        warning = check_bind(args.host, keys, keyless=args.keyless)
    except HTTPError as exc:
        raise CommandError(exc.message) from None
    if warning:
        ctx.err.print(Text(f"warning: {warning}", style="yellow"), soft_wrap=True)
    auth = Authenticator(keys, allow_implicit=warning is not None, keyless=args.keyless)
    app = http_app(build_server(memory), auth, host=args.host, max_sessions=args.max_sessions,
                   idle_seconds=args.session_idle_seconds)
    ctx.err.print(Text(f"lossless: MCP for {ctx.db_path()} on http://{args.host}:{args.port}/mcp"
                       f"{' (API keys required)' if warning is None else ''}", style="dim"), soft_wrap=True)
    serve(app, args.host, args.port, log_level="warning")
    return 0
