"""Tenant-wide endpoints: search every conversation, totals, verification, who am I, and the
health of the background work."""

from __future__ import annotations

import time
from typing import Any

from starlette.routing import Route

from lossless.errors import NotFoundError
from lossless.server.params import Fields
from lossless.server.routes.conversations import search_hits
from lossless.server.state import Call, endpoint
from lossless.store.runner import SQLRunner, sql_runner

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


def _range(db: SQLRunner, column: str, tenant_prefix: str) -> tuple[str, tuple[Any, ...]]:
    if not tenant_prefix:
        return db.true, ()
    return db.text_range(column), (tenant_prefix, tenant_prefix[:-1] + "0")


def stats(call: Call) -> dict[str, Any]:
    """Totals over the tenant's conversations and memories."""
    tenant = call.tenant
    db = sql_runner(call.memory.store)
    where, args = _range(db, "conversation_id", tenant.prefix)
    conv_where, _ = _range(db, "id", tenant.prefix)
    convs, messages = db.query(f"SELECT count(*), coalesce(sum(last_seq), 0) FROM conversations WHERE {conv_where}",
                               args)[0]
    tokens = db.query(f"SELECT coalesce(sum(token_count), 0) FROM messages WHERE {where}", args)[0][0]
    summaries, depth = db.query(f"SELECT count(*), coalesce(max(depth), -1) FROM summaries WHERE {where}", args)[0]
    # int(): PostgreSQL's sum of integers is a numeric (a Decimal)
    return {"tenant": tenant.name, "conversations": int(convs), "messages": int(messages),
            "message_tokens": int(tokens), "summaries": int(summaries), "max_depth": int(depth),
            "memories": len(tenant.memory_ids(call.memory))}


def verify(call: Call) -> dict[str, Any]:
    """Re-check hashes and DAG invariants of every conversation of the tenant."""
    tenant = call.tenant
    if tenant.implicit:
        problems = call.memory.verify()
    else:
        problems = [p for cid in tenant.conversation_ids(call.memory) for p in call.memory.verify(cid)]
    return {"ok": not problems, "problems": problems}


def health(call: Call) -> dict[str, Any]:
    """The background work: how it runs in this server, what is owed to the tenant's
    conversations (and since when), this server's worker and its summarizer's circuit
    breaker; with the whole database as the tenant (keyless), every worker that reported
    lately, from any process."""
    memory = call.memory
    tenant = call.tenant
    db = sql_runner(memory.store)
    where, args = _range(db, "conversation_id", tenant.prefix)
    now = time.time()
    count, oldest, working, failing = db.query(
        "SELECT count(*), min(queued_ts), coalesce(sum(CASE WHEN claimed_until >= ? THEN 1 ELSE 0 END), 0), "
        f"coalesce(sum(CASE WHEN attempts > 0 THEN 1 ELSE 0 END), 0) FROM backlog WHERE {where}", (now, *args))[0]
    stats = memory.stats()
    out: dict[str, Any] = {
        "ok": True,
        "compaction": stats["compaction"],
        "backlog": {"conversations": int(count), "oldest_seconds": round(now - float(oldest), 1) if oldest else 0.0,
                    "in_progress": int(working), "failing": int(failing)},
        "worker": stats["worker"],
        "breaker": stats["breaker"],
    }
    if tenant.implicit:
        out["workers"] = stats["workers"]
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
