"""lossless as an MCP server (``lossless mcp``), with the official ``mcp`` SDK.

Tools: ``lcm_grep``, ``lcm_describe``, ``lcm_expand`` (the agent tools of
:mod:`lossless.agent.tools`, same descriptions and arguments, plus an optional
``conversation`` to stay inside one conversation), ``lcm_compact`` (compact a
conversation now, with progress), ``memory_search`` and ``memory_add`` (long-term
memory). Resources and completions of ids: :mod:`lossless.server.mcp_resources`; prompts
(``recall``, ``resume``): :mod:`lossless.server.mcp_prompts`; ``logging/setLevel``, log
messages and progress: :mod:`lossless.server.mcp_notify`. A lossless error comes back as a
tool error the model can read, and so does an argument a tool's schema does not name.

Over stdio it serves the local user (the whole database). Over HTTP (streamable HTTP at
``/mcp``, :mod:`lossless.server.mcp_http`) it takes the keys of ``lossless serve``: every
tool, resource, prompt and completion answers inside the key's tenant
(:mod:`lossless.server.mcp_scope`); a database without keys is served on loopback only.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated, Any, Literal, Protocol, TypeAlias, TypeVar

from pydantic import Field, WithJsonSchema

from lossless.agent.tools import GREP_LIMIT_MAX, openai_tools
from lossless.core.errors import LosslessError, MissingDependencyError

try:
    from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.types import CallToolResult, TextContent

    from lossless.server.mcp_compact import add_compact_tool
    from lossless.server.mcp_notify import in_thread, install
    from lossless.server.mcp_prompts import PROMPT_IDS, add_prompts
    from lossless.server.mcp_resources import add_completions, add_resources
    from lossless.server.mcp_scope import public, request_tenant, toolbox
except ImportError as exc:  # pragma: no cover - the extra is missing
    raise MissingDependencyError("the MCP server needs the mcp extra: pip install 'lossless[mcp]'") from exc

if TYPE_CHECKING:
    from lossless.engine import Memory
    from lossless.server.tenancy import Tenant

__all__ = ["TOOL_NAMES", "build_server"]

TOOL_NAMES = ("lcm_grep", "lcm_describe", "lcm_expand", "lcm_compact", "memory_search", "memory_add")
T = TypeVar("T")

_SPECS = {t["function"]["name"]: t["function"] for t in openai_tools()}
_SCOPE = "Only inside this conversation (default: every conversation)."


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("lossless")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "0+unknown"


def _doc(tool: str, param: str) -> str:
    """A parameter's description in :mod:`lossless.agent.tools`, so MCP and tool calling agree."""
    prop = _SPECS[tool]["parameters"]["properties"].get(param, {})
    return str(prop.get("description", ""))


Kind = Literal["task", "fact", "preference", "error", "pattern"]


def _integer(minimum: int, maximum: int | None = None, *, optional: bool = False) -> WithJsonSchema:
    """The schema of an integer argument as the client sees it (type, range), on an argument
    typed ``Any``: the SDK passes it on as sent, for the agent tools to check. ``"5"`` and
    ``true`` are refused as tool calling and the HTTP API refuse them (pydantic took them for
    5 and 1), and a value out of range is named in their words ("max_tokens must be a
    positive integer; got 0"), not pydantic's."""
    number: dict[str, Any] = {"type": "integer", "minimum": minimum}
    if maximum is not None:
        number["maximum"] = maximum
    return WithJsonSchema({"anyOf": [number, {"type": "null"}]} if optional else number)


_POSITIVE: TypeAlias = Annotated[Any, _integer(1)]
_POSITIVE_OR_NONE: TypeAlias = Annotated[Any, _integer(1, optional=True)]
_OFFSET: TypeAlias = Annotated[Any, _integer(0, optional=True)]
_GREP_LIMIT: TypeAlias = Annotated[Any, _integer(1, GREP_LIMIT_MAX)]


class _Run(Protocol):
    """Runs ``fn(tenant)`` (the sync core, as the request's tenant) in a worker thread,
    lossless errors turned into tool errors."""

    def __call__(self, fn: Callable[[Tenant], T], /) -> Awaitable[T]: ...


def build_server(memory: Memory | Callable[[], Memory], *, name: str = "lossless") -> MCPServer[Any]:
    """The MCP server over ``memory`` (or the Memory ``memory()`` opens on first use)."""
    opened: list[Memory] = []

    def mem() -> Memory:
        if not opened:
            opened.append(memory() if callable(memory) else memory)
        return opened[0]

    async def run(fn: Callable[[Tenant], T]) -> T:
        """``fn(tenant)`` in a worker thread; lossless errors as tool errors, with the ids
        they name as the tenant knows them."""
        try:
            tenant = request_tenant()
        except LosslessError as exc:
            raise ToolError(str(exc)) from exc
        try:
            return await in_thread(lambda: fn(tenant))
        except LosslessError as exc:
            raise ToolError(tenant.public_text(str(exc))) from exc

    # the package's version in serverInfo (the SDK's default is ""), and only warnings on
    # stderr: an MCP client shows a stdio server's stderr as its log, not INFO per request
    server: MCPServer[Any] = MCPServer(
        name, version=_version(), log_level="WARNING", instructions="Long-term memory of past conversations: every message kept verbatim, older history "
                           "as a DAG of summaries. lcm_grep to find, lcm_describe to inspect a node, lcm_expand to "
                           "read the originals; memory_search / memory_add for durable facts and preferences.")
    _add_dag_tools(server, mem, run)
    _add_memory_tools(server, mem, run)
    add_compact_tool(server, mem, run)
    install(server)
    server.middleware.append(_closed_arguments(server))
    add_resources(server, mem)
    add_prompts(server, mem)
    add_completions(server, mem, PROMPT_IDS)
    return server


def _closed_arguments(server: MCPServer[Any]) -> ServerMiddleware[Any]:
    """Middleware: a tool takes only the arguments its schema names, as tool calling does
    (:meth:`lossless.agent.tools.ToolBox.call`). ``tools/list`` says so
    (``additionalProperties: false``) and ``tools/call`` with another argument (a typo:
    ``limt``) is a tool error naming it; the SDK would drop it without a word."""
    known: dict[str, list[str]] = {}

    async def check(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method == "tools/call":
            params = ctx.params or {}
            name, args = params.get("name"), params.get("arguments")
            if not known:
                known.update({t.name: list(t.input_schema.get("properties", {})) for t in await server.list_tools()})
            if isinstance(args, dict) and isinstance(name, str) and name in known:
                unknown = sorted(set(args) - set(known[name]))
                if unknown:
                    text = (f"{name} got unknown argument(s): {', '.join(unknown)} "
                            f"(it takes {', '.join(known[name])})")
                    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)
        result = await call_next(ctx)
        if ctx.method == "tools/list" and isinstance(result, dict):  # (the result as it goes on the wire)
            for tool in result.get("tools", ()):
                schema = tool.get("inputSchema") if isinstance(tool, dict) else None
                if isinstance(schema, dict):
                    schema.setdefault("additionalProperties", False)
        return result

    return check


def _add_dag_tools(server: MCPServer[Any], mem: Callable[[], Memory], run: _Run) -> None:
    """lcm_grep, lcm_describe and lcm_expand: the agent tools of :mod:`lossless.agent.tools`."""

    @server.tool(name="lcm_grep", description=_SPECS["lcm_grep"]["description"])
    async def lcm_grep(
        query: Annotated[str, Field(description=_doc("lcm_grep", "query"))],
        conversation: Annotated[str | None, Field(description=_SCOPE)] = None,
        mode: Annotated[Literal["fts", "regex", "semantic", "hybrid"], Field(description=_doc("lcm_grep", "mode"))] = "fts",
        scope: Literal["all", "messages", "summaries"] = "all",
        role: Literal["system", "user", "assistant", "tool"] | None = None,
        since: Annotated[str | None, Field(description=_doc("lcm_grep", "since"))] = None,
        until: Annotated[str | None, Field(description=_doc("lcm_grep", "until"))] = None,
        sort: Literal["relevance", "recency"] = "relevance",
        # the range in the schema the client sees, and checked by ToolBox.lcm_grep (not pydantic), so
        # MCP refuses a limit out of range, or not an integer, in the words tool calling and HTTP use
        limit: Annotated[_GREP_LIMIT, Field(title="Limit")] = 10,
    ) -> dict[str, Any]:
        return await run(lambda t: public(toolbox(mem(), t, conversation).lcm_grep(
            query, mode=mode, scope=scope, role=role, since=since, until=until, sort=sort, limit=limit), t))

    @server.tool(name="lcm_describe", description=_SPECS["lcm_describe"]["description"])
    async def lcm_describe(
        id: Annotated[str, Field(description=_doc("lcm_describe", "id"))],
        conversation: Annotated[str | None, Field(description=_SCOPE)] = None,
    ) -> dict[str, Any]:
        return await run(lambda t: public(toolbox(mem(), t, conversation).lcm_describe(id), t))

    @server.tool(name="lcm_expand", description=_SPECS["lcm_expand"]["description"])
    async def lcm_expand(
        id: Annotated[str, Field(description=_doc("lcm_expand", "id"))],
        conversation: Annotated[str | None, Field(description=_SCOPE)] = None,
        to: Annotated[Literal["messages", "sources"], Field(description=_doc("lcm_expand", "to"))] = "messages",
        # (checked by the ToolBox, not pydantic: _integer)
        max_tokens: Annotated[_POSITIVE, Field(title="Max Tokens", description=_doc("lcm_expand", "max_tokens"))] = 4000,
        from_seq: Annotated[_POSITIVE_OR_NONE, Field(title="From Seq", description=_doc("lcm_expand", "from_seq"))] = None,
        offset: Annotated[_OFFSET, Field(title="Offset", description=_doc("lcm_expand", "offset"))] = None,
        max_chars: Annotated[_POSITIVE_OR_NONE, Field(title="Max Chars", description=_doc("lcm_expand", "max_chars"))] = None,
        page: Annotated[_POSITIVE_OR_NONE, Field(title="Page", description=_doc("lcm_expand", "page"))] = None,
    ) -> dict[str, Any]:
        args: dict[str, Any] = {"id": id, "to": to, "max_tokens": max_tokens}
        extra = {"from_seq": from_seq, "offset": offset, "max_chars": max_chars, "page": page}
        args.update({k: v for k, v in extra.items() if v is not None})
        return await run(lambda t: public(toolbox(mem(), t, conversation).call("lcm_expand", args), t))


def _add_memory_tools(server: MCPServer[Any], mem: Callable[[], Memory], run: _Run) -> None:
    """memory_search and memory_add: long-term memory."""

    @server.tool(name="memory_search", description=(
        "Search long-term memories (facts, preferences, decisions, errors, tasks kept across conversations). "
        "Returns the records this user/agent may see that match, best first, each with its id, kind, date and "
        "score."))
    async def memory_search(
        query: Annotated[str, Field(description="What to look for, in plain words.")],
        user: Annotated[str | None, Field(description="Search as this user: their records and global ones.")] = None,
        agent: Annotated[str | None, Field(description="Search as this agent.")] = None,
        kind: Annotated[list[Kind] | None, Field(description="Only these kinds.")] = None,
        limit: Annotated[int, Field(ge=1, le=100)] = 10,
    ) -> dict[str, Any]:
        def search(t: Tenant) -> dict[str, Any]:
            records = t.search_memories(mem(), query, user=user, agent=agent, kind=list(kind) if kind else None,
                                        limit=limit)
            return {"query": query, "count": len(records), "memories": [t.record_out(r) for r in records]}

        return await run(search)

    @server.tool(name="memory_add", description=(
        "Store a durable memory: a fact, preference, decision, error with its fix, or task. The same content "
        "for the same owner is stored once (its use count goes up)."))
    async def memory_add(
        content: Annotated[str, Field(description="The memory, one self-contained statement.")],
        kind: Annotated[Kind, Field(description="What sort of memory it is.")] = "fact",
        user: Annotated[str | None, Field(description="The user it belongs to (none: global).")] = None,
        agent: Annotated[str | None, Field(description="The agent it belongs to.")] = None,
        importance: Annotated[float | None, Field(ge=0, le=1, description="0..1 (default: by kind).")] = None,
    ) -> dict[str, Any]:
        def add(t: Tenant) -> dict[str, Any]:
            owner, by = t.record_owners(user, agent)
            return t.record_out(mem().memories.add(content, kind=kind, user=owner, agent=by, importance=importance))

        return await run(add)
