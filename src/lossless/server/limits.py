"""What one request, and one tenant at a time, may ask of the server, so that one tenant's
oversized or many requests cannot stall another's.

* ``max_request_messages``: the messages one request may carry (a chat sent to the proxy,
  a batch of ``POST …/messages``). More is 413 ``too_many_messages``, answered before
  anything is hashed or stored. The bytes are capped already (``max_body_bytes``); what
  costs is the work per message (validating, hashing, counting tokens, indexing it, and
  later compacting and embedding it), which the message count bounds.
* ``tenant_concurrency``: the requests of one tenant that read a body and store or
  assemble at once (the proxy, until it forwards to the provider; ``POST …/messages``).
  A further one waits up to ``tenant_wait_seconds`` for a slot, then gets 429
  ``too_many_requests`` with ``Retry-After``. Reads, and the provider's answer a proxied
  request waits for, take no slot: a tenant's slow provider or its readers never hold one.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import anyio

from lossless.server.errors import HTTPError
from lossless.server.tenancy import Tenant

__all__ = ["DEFAULT_MAX_REQUEST_MESSAGES", "DEFAULT_TENANT_CONCURRENCY", "Limits", "TenantSlots"]

DEFAULT_MAX_REQUEST_MESSAGES = 10_000
DEFAULT_TENANT_CONCURRENCY = 2


@dataclass(frozen=True)
class Limits:
    """``None`` (``0`` on the command line) turns a limit off."""

    max_request_messages: int | None = DEFAULT_MAX_REQUEST_MESSAGES
    tenant_concurrency: int | None = DEFAULT_TENANT_CONCURRENCY
    tenant_wait_seconds: float = 5.0

    def check_messages(self, count: int) -> None:
        """413 when a request carries more messages than the server takes."""
        cap = self.max_request_messages
        if cap is not None and count > cap:
            raise HTTPError(413, "too_many_messages",
                            f"the request carries {count:,} messages; this server takes at most {cap:,} per request "
                            "(lossless serve --max-request-messages). Send fewer: lossless keeps the history, so a "
                            "chat may send only the messages it has not sent yet")


@dataclass
class _Slots:
    semaphore: anyio.Semaphore
    users: int = 0  # holding or waiting: the entry goes when no one uses it


@dataclass
class TenantSlots:
    """Per-tenant slots of :attr:`Limits.tenant_concurrency` (on the server's event loop)."""

    limits: Limits
    _tenants: dict[str, _Slots] = field(default_factory=dict)

    @contextlib.asynccontextmanager
    async def hold(self, tenant: Tenant) -> AsyncIterator[None]:
        """One of the tenant's slots for the block; 429 when none frees up in time."""
        size = self.limits.tenant_concurrency
        if size is None:
            yield
            return
        key = tenant.name or ""  # the implicit tenant of a keyless server is one tenant too
        slots = self._tenants.get(key)
        if slots is None:
            slots = self._tenants[key] = _Slots(anyio.Semaphore(size))
        slots.users += 1
        try:
            wait = self.limits.tenant_wait_seconds
            with anyio.move_on_after(wait) as scope:
                await slots.semaphore.acquire()
            if scope.cancelled_caught:
                raise HTTPError(429, "too_many_requests",
                                f"{size} requests of this tenant are being stored or assembled already, and none "
                                f"finished within {wait:g} s; retry after it (the server takes {size} at once per "
                                "tenant: lossless serve --tenant-concurrency)",
                                {"retry-after": str(max(1, math.ceil(wait)))})
            try:
                yield
            finally:
                slots.semaphore.release()
        finally:
            slots.users -= 1
            if slots.users == 0 and self._tenants.get(key) is slots:
                del self._tenants[key]
