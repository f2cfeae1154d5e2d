"""Tenant-wide endpoints: search every conversation, totals, verification, who am I, and the
health of the background work."""

from __future__ import annotations

import time
from typing import Any

from starlette.routing import Route

from lossless.core.errors import NotFoundError
from lossless.server.params import Fields
from lossless.server.routes.conversations import search_hits
from lossless.server.state import Call, endpoint
from lossless.store.scoped import backlog_totals, totals

__all__ = ["routes"]

PREFIX = "/v1/lossless"


def search(call: Call) -> dict[str, Any]:
    """Search the tenant's conversations (all of them, or those listed)."""
    tenant = call.tenant
    body = call.body if isinstance(call.body, dict) else {}
    listed = body.get("conversations")
    if listed is None:
        ids: list[str] | None = None if tenant.implicit else tenant.conversation_ids(call.memory)
    else:
        wanted = [tenant.stored_id(c) for c in Fields(body).strings("conversations") or []]
        missing = sorted(set(wanted) - set(tenant.conversation_ids(call.memory)))
        if missing:
            raise NotFoundError(f"no conversation {tenant.public_id(missing[0])!r}")
        ids = wanted
    return search_hits(call, ids, ("conversations",))


def stats(call: Call) -> dict[str, Any]:
    """Totals over the tenant's conversations and memories."""
    tenant = call.tenant
    t = totals(call.memory.store, tenant.prefix)
    return {"tenant": tenant.name, "conversations": t.conversations, "messages": t.messages,
            "message_tokens": t.message_tokens, "summaries": t.summaries, "max_depth": t.max_depth,
            "memories": len(tenant.memory_ids(call.memory))}


VERIFY_SECONDS = 2.0  # one verify request's work; the rest is the next page's


def verify(call: Call) -> dict[str, Any]:
    """Re-check hashes and DAG invariants of the tenant's conversations, a page at a time:
    those after ``after`` (an id), for at most ``VERIFY_SECONDS`` or ``limit`` of them;
    ``next_after`` names where the next page starts (None: done). The database file's own
    check (SQLite's integrity_check, which reads the whole file) only for the whole
    database's tenant (a keyless server), on the first page."""
    tenant = call.tenant
    q = call.params(("after", "limit"))
    after = q.string("after")
    limit = q.integer("limit", default=1000, minimum=1, maximum=100_000)
    assert limit is not None
    ids = tenant.conversation_ids(call.memory)
    start = 0
    if after is not None:
        stored = tenant.stored_id(after)
        start = next((i for i, cid in enumerate(ids) if cid > stored), len(ids))
    deadline = time.monotonic() + VERIFY_SECONDS
    whole_file = tenant.implicit and after is None  # the store checks the file with the first conversation
    page = ids[start:start + limit]
    problems: list[str] = call.memory.verify(integrity=True) if whole_file and not page else []
    checked = 0
    for cid in page:
        problems += call.memory.verify(cid, integrity=whole_file and checked == 0)
        checked += 1
        if time.monotonic() >= deadline:
            break
    done = start + checked >= len(ids)
    return {"ok": not problems, "problems": [tenant.public_text(p) for p in problems], "checked": checked,
            "next_after": None if done else tenant.public_id(ids[start + checked - 1])}


def health(call: Call) -> dict[str, Any]:
    """The background work: how it runs in this server and what is owed to the tenant's
    conversations (and since when). The server's worker and its summarizer's circuit
    breaker serve every tenant: a keyed tenant sees only their states, never the worker's
    counters nor the conversation in its hands (another tenant's, as likely as not). The
    operator (the whole database as the tenant: a keyless server) sees all of it, and
    every worker that reported lately, from any process."""
    memory = call.memory
    tenant = call.tenant
    now = time.time()
    owed = backlog_totals(memory.store, tenant.prefix, now)
    stats = memory.stats()
    out: dict[str, Any] = {
        "ok": True,
        "compaction": stats.compaction,
        "backlog": {"conversations": owed.conversations,
                    "oldest_seconds": round(now - owed.oldest_ts, 1) if owed.oldest_ts else 0.0,
                    "in_progress": owed.in_progress, "failing": owed.failing},
        "worker": dict(stats.worker),
        "breaker": dict(stats.breaker) if stats.breaker is not None else None,
    }
    if tenant.implicit:
        out["workers"] = stats.workers
    else:
        breaker = stats.breaker
        out["worker"] = {"state": stats.worker["state"]}
        out["breaker"] = {"state": breaker["state"]} if breaker is not None else None
    return out


def whoami(call: Call) -> dict[str, Any]:
    return {"tenant": call.tenant.name, "key_id": call.tenant.key_id, "implicit": call.tenant.implicit}


def routes() -> list[Route]:
    return [
        Route(PREFIX + "/search", endpoint(search, body=True), methods=["POST"]),
        Route(PREFIX + "/stats", endpoint(stats), methods=["GET"]),
        Route(PREFIX + "/verify", endpoint(verify), methods=["GET"]),
        Route(PREFIX + "/whoami", endpoint(whoami), methods=["GET"]),
        Route(PREFIX + "/health", endpoint(health), methods=["GET"]),
    ]
