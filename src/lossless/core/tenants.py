"""Which stored conversations belong to a tenant of the HTTP server.

``lossless serve`` with API keys stores tenant ``acme``'s conversation ``support-1`` as
``@acme/support-1`` (:mod:`lossless.server.tenancy`). The layers below the server know
nothing of keys, but some of what they bring into a context belongs to the operator only
(the workspace file index, ownerless memories): they ask :func:`tenant_of` whose a
conversation is, so that nothing of the operator's reaches a tenant's context on any
path (the API, the proxy, MCP, a worker).
"""

from __future__ import annotations

import re

__all__ = ["TENANT_NAME", "tenant_of"]

TENANT_NAME = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}"  # a tenant name (it becomes part of stored ids)
_NAMESPACED = re.compile(rf"@({TENANT_NAME})/")


def tenant_of(conversation_id: str) -> str | None:
    """The tenant whose namespace a stored conversation id is in (``"@acme/x"`` →
    ``"acme"``), or None: the operator's (the CLI, the Python API, a keyless server)."""
    match = _NAMESPACED.match(conversation_id) if isinstance(conversation_id, str) else None
    return match.group(1) if match else None
