"""The MCP server's resources and argument completions.

Resources, all ``application/json``:

- ``lossless://conversations``: every conversation with its counts and its URI, newest first;
- ``lossless://conversations/{conversation_id}``: one conversation's stats and summary DAG.
  The id is one path segment, percent-encoded (:func:`conversation_uri`: ``team/alpha`` is
  ``lossless://conversations/team%2Falpha``, ``会议/周一`` is ``…/%E4%BC%9A…``), as RFC 6570
  expands the template; the SDK decodes it when it matches the template, so an id without
  ``/``, ``?``, ``#`` or ``%`` reads the same written raw (``lossless://conversations/会议``);
- ``lossless://summaries/{summary_id}``: one summary as ``lcm_describe`` tells it (span,
  times, how it was made, parent, children, content);
- ``lossless://messages/{message_id}``: one message exactly as stored (content, tool
  calls, metadata).

``completion/complete`` offers the stored ids that start with what the user typed, for
the templates' ids and for the prompts' ``conversation`` argument: conversation ids
(most recently updated first), summary and message ids (in id order, inside the
conversation already chosen when the request's context names one). At most 100 values,
with the total and whether there are more.

Over HTTP with keys all of it is the key's tenant's (:mod:`lossless.server.mcp_scope`):
its conversations with the ids it knows them by, its summaries and messages; another
tenant's id is not there. A resource that is not there is resource-not-found (invalid
params, -32602, with the URI), as the SDK answers a URI no resource matches.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from mcp.server.mcpserver import ResourceSecurity
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError
from mcp.types import (
    Completion,
    CompletionArgument,
    CompletionContext,
    PromptReference,
    ResourceTemplateReference,
)

from lossless.core.errors import LosslessError, NotFoundError, ValidationError
from lossless.core.types import Message
from lossless.server.mcp_notify import in_thread
from lossless.server.mcp_scope import OPERATOR, public, request_tenant, tenant_conversation, toolbox
from lossless.server.tenancy import Tenant
from lossless.store.scoped import ids_under

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from lossless.engine import Memory

__all__ = ["COMPLETION_LIMIT", "TEMPLATES", "add_completions", "add_resources", "complete_ids", "conversation_uri",
           "message_dict"]

COMPLETION_LIMIT = 100  # the most values one completion may carry (MCP spec)
TEMPLATES = {
    "lossless://conversations/{conversation_id}": "conversation_id",
    "lossless://summaries/{summary_id}": "summary_id",
    "lossless://messages/{message_id}": "message_id",
}
# a conversation id is a database key, never a file path: the SDK's default checks refused
# ids such as "../旧" or "/根" (legal ids) as path traversal, as "Unknown resource"
_IDS_NOT_PATHS = ResourceSecurity(exempt_params=frozenset({"conversation_id"}))
# which argument names, in a template or a prompt, take which kind of id
_ID_KINDS = {"conversation_id": "conversation", "conversation": "conversation",
             "summary_id": "summary", "summary": "summary", "message_id": "message", "message": "message"}


async def _read(fn: Callable[[Tenant], Any]) -> Any:
    """``fn(tenant)`` in a worker thread, as the request's tenant; a lossless error as a
    resource error, with the ids it names as the tenant knows them: a node or
    conversation that is not there (or an id that cannot be one) as resource not found,
    which the SDK answers as it answers a URI it does not know (invalid params, -32602,
    with the URI: SEP-2164; -32002 before it)."""
    tenant = OPERATOR
    try:
        tenant = request_tenant()
        return await in_thread(lambda: fn(tenant))
    except (NotFoundError, ValidationError) as exc:
        raise ResourceNotFoundError(tenant.public_text(str(exc))) from exc
    except LosslessError as exc:
        raise ResourceError(tenant.public_text(str(exc))) from exc


def conversation_uri(conversation_id: str) -> str:
    """The conversation's resource URI: its id as one percent-encoded path segment (UTF-8),
    which reads back to the same conversation; a raw ``/`` would end the segment there."""
    return "lossless://conversations/" + quote(conversation_id, safe="")


def message_dict(msg: Message) -> dict[str, Any]:
    """One message as stored, for its resource."""
    out: dict[str, Any] = {"id": msg.id, "conversation_id": msg.conversation_id, "seq": msg.seq, "role": msg.role,
                           "name": msg.name, "created_at": msg.created_at.isoformat(), "tokens": msg.token_count,
                           "content": msg.content}
    if msg.tool_calls:
        out["tool_calls"] = list(msg.tool_calls)
    if msg.tool_call_id is not None:
        out["tool_call_id"] = msg.tool_call_id
    out.update({"metadata": msg.metadata, "external_id": msg.external_id})
    return out


def add_resources(server: MCPServer[Any], mem: Callable[[], Memory]) -> None:
    """The conversations (the list and one by one), summaries and messages."""

    @server.resource("lossless://conversations", name="conversations", mime_type="application/json",
                     description="Every conversation with its message and summary counts and its resource "
                                 "URI, newest first.")
    async def conversations() -> dict[str, Any]:
        def read(t: Tenant) -> dict[str, Any]:
            return {"conversations": [{"id": t.public_id(c.id), "uri": conversation_uri(t.public_id(c.id)),
                                       "messages": c.message_count,
                                       "summaries": c.summary_count, "updated_at": c.updated_at.isoformat(),
                                       "metadata": t.metadata_out(c.metadata)}
                                      for c in t.conversations(mem(), 10_000, 0)]}

        result: dict[str, Any] = await _read(read)
        return result

    @server.resource("lossless://conversations/{conversation_id}", name="conversation", mime_type="application/json",
                     description="One conversation: its stats and its summary DAG (frontier first). The id is "
                                 "percent-encoded (team/alpha: team%2Falpha), as the list's uri gives it.",
                     security=_IDS_NOT_PATHS)
    async def conversation(conversation_id: str) -> dict[str, Any]:
        def read(t: Tenant) -> dict[str, Any]:
            conv = tenant_conversation(mem(), t, conversation_id)
            frontier = [s.id for s in conv.frontier()]
            nodes = [{"id": s.id, "depth": s.depth, "first_seq": s.first_seq, "last_seq": s.last_seq,
                      "tokens": s.token_count, "sources": [r.id for r in s.sources]} for s in conv.summaries()]
            return {"stats": public(conv.stats().to_dict(), t), "frontier": frontier, "summaries": nodes}

        result: dict[str, Any] = await _read(read)
        return result

    @server.resource("lossless://summaries/{summary_id}", name="summary", mime_type="application/json",
                     description="One summary (sum_…): its span, times, how it was made, parent, children and "
                                 "content, as lcm_describe gives it.")
    async def summary(summary_id: str) -> dict[str, Any]:
        if not summary_id.startswith("sum_"):
            raise ResourceNotFoundError(f"{summary_id!r} is not a summary id (sum_…)")
        result: dict[str, Any] = await _read(lambda t: public(toolbox(mem(), t, None).lcm_describe(summary_id), t))
        return result

    @server.resource("lossless://messages/{message_id}", name="message", mime_type="application/json",
                     description="One message (msg_…) exactly as stored: role, time, content, tool calls, "
                                 "metadata.")
    async def message(message_id: str) -> dict[str, Any]:
        if not message_id.startswith("msg_"):
            raise ResourceNotFoundError(f"{message_id!r} is not a message id (msg_…)")
        def read(t: Tenant) -> dict[str, Any]:
            node = toolbox(mem(), t, None).node(message_id)
            if not isinstance(node, Message):
                raise NotFoundError(f"no message with id {message_id!r}")
            return dict(public(message_dict(node), t))

        result: dict[str, Any] = await _read(read)
        return result


def complete_ids(memory: Memory, kind: str, prefix: str, conversation_id: str | None = None,
                 tenant: Tenant = OPERATOR) -> Completion:
    """The ids of ``kind`` (conversation, summary, message) starting with ``prefix`` that
    ``tenant`` has (conversation ids as it knows them)."""
    if kind == "conversation":
        wanted = tenant.prefix + prefix
        infos = memory.store.list_conversations(limit=COMPLETION_LIMIT + 1, id_prefix=wanted or None)
        ids = [tenant.public_id(c.id) for c in infos]
    else:
        stored: str | None = None
        if conversation_id:
            try:
                stored = tenant.stored_id(conversation_id)
            except ValidationError:  # not an id: nothing is in it
                return Completion(values=[], total=0, has_more=False)
        # one more than is shown, to say whether there are more
        ids = ids_under(memory.store, "summary" if kind == "summary" else "message", id_prefix=prefix,
                        conversation_id=stored, conversations_prefix="" if tenant.implicit else tenant.prefix,
                        limit=COMPLETION_LIMIT + 1)
    more = len(ids) > COMPLETION_LIMIT
    return Completion(values=ids[:COMPLETION_LIMIT], total=None if more else len(ids), has_more=more)


def add_completions(server: MCPServer[Any], mem: Callable[[], Memory], prompt_ids: dict[str, dict[str, str]]) -> None:
    """``completion/complete`` for the id arguments of the templates and of the prompts
    (``prompt_ids``: prompt name -> argument name -> id kind)."""

    @server.completion()  # type: ignore[no-untyped-call, untyped-decorator]
    async def complete(ref: PromptReference | ResourceTemplateReference, argument: CompletionArgument,
                       context: CompletionContext | None) -> Completion | None:
        if isinstance(ref, ResourceTemplateReference):
            kind = _ID_KINDS.get(argument.name) if TEMPLATES.get(ref.uri) == argument.name else None
        else:
            kind = prompt_ids.get(ref.name, {}).get(argument.name)
        if kind is None:
            return None  # an argument without ids to offer: no values
        known = (context.arguments if context is not None else None) or {}
        scope = known.get("conversation") or known.get("conversation_id")
        tenant = request_tenant()
        return await in_thread(lambda: complete_ids(mem(), kind, argument.value, scope, tenant))
