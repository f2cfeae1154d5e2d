"""Whose data an MCP request may reach.

Over stdio, ``lossless mcp`` serves the local user who started it: the whole database,
ids as stored, like the CLI. Over HTTP it answers with the keys of ``lossless serve``
(:mod:`lossless.server.mcp_http` checks them in front of the MCP app and puts the key's
:class:`~lossless.server.tenancy.Tenant` in the request): a keyed tenant's tools,
resources, prompts and completions see its own conversations and memories only, with
their ids as it knows them (``support-1``, not ``@acme/support-1``); another tenant's
conversation, summary or message is simply not there. A keyless HTTP server (a
database that never had a key, loopback only) serves the implicit tenant: everything.

A request over HTTP that carries no tenant (the app served without the key check) is
refused rather than given the whole database.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lossless.agent.tools import ToolBox
from lossless.core.errors import LosslessError, NotFoundError
from lossless.server.mcp_notify import current_request
from lossless.server.routes.conversations import public_ids
from lossless.server.tenancy import Tenant

if TYPE_CHECKING:
    from lossless.conversation import Conversation
    from lossless.engine import Memory

__all__ = ["OPERATOR", "TENANT_SCOPE_KEY", "ScopeError", "public",
           "request_tenant", "tenant_conversation", "toolbox"]

TENANT_SCOPE_KEY = "lossless.tenant"  # the ASGI scope key the HTTP key check fills
OPERATOR = Tenant(None)  # the whole database: stdio, or a keyless loopback server


class ScopeError(LosslessError):
    """An MCP request over HTTP that went round the key check."""


def request_tenant() -> Tenant:
    """The tenant of the MCP request being served (on the event loop)."""
    ctx = current_request()
    request = ctx.request if ctx is not None else None
    if request is None:  # stdio (or a direct call): the local user
        return OPERATOR
    scope = getattr(request, "scope", None)
    tenant = scope.get(TENANT_SCOPE_KEY) if isinstance(scope, dict) else None
    if not isinstance(tenant, Tenant):
        raise ScopeError("this MCP request did not pass the API key check; serve it with `lossless mcp`")
    return tenant


def tenant_conversation(memory: Memory, tenant: Tenant, public_id: str) -> Conversation:
    """The tenant's conversation ``public_id`` (NotFoundError when it has none)."""
    conv = memory.get_conversation(tenant.stored_id(public_id))
    if conv is None:
        raise NotFoundError(f"no conversation {public_id!r}")
    return conv


def toolbox(memory: Memory, tenant: Tenant, public_id: str | None) -> ToolBox:
    """The agent tools for one of the tenant's conversations, or (None) for all of them."""
    if public_id is not None:
        return ToolBox(memory, tenant_conversation(memory, tenant, public_id).id)
    if tenant.implicit:
        return ToolBox(memory, None)
    return ToolBox(memory, None, within=tenant.conversation_ids(memory))


def public(value: Any, tenant: Tenant) -> Any:
    """``value`` with conversation ids as the tenant knows them."""
    return public_ids(value, tenant)
