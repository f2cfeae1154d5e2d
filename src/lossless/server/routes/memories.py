"""``/v1/lossless/memories``: long-term memory records of the caller's tenant: add, search,
list, get, forget. Users and agents are the tenant's own names (see
:mod:`lossless.server.tenancy`); a record naming neither is tenant-wide."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from starlette.routing import Route

from lossless.core.errors import ValidationError
from lossless.longterm.records import KINDS
from lossless.server.params import MAX_INT
from lossless.server.state import Call, Reply, endpoint

__all__ = ["routes"]

PREFIX = "/v1/lossless/memories"
_ORDERS = ("recent", "oldest", "used", "importance")  # Memories.ls's orders


def _kinds(values: list[str] | None) -> list[str] | None:
    for kind in values or ():
        if kind not in KINDS:
            raise ValidationError(f"kind must be one of {', '.join(KINDS)}; got {kind!r}")
    return values


def add(call: Call) -> Reply:
    f = call.fields(("content", "kind", "user", "agent", "importance", "metadata", "conversation_id", "task",
                     "source_message_ids"))
    tenant = call.tenant
    user, agent = tenant.record_owners(f.data.get("user"), f.data.get("agent"))
    conversation = f.string("conversation_id")
    record = call.memory.memories.add(
        f.text("content"), kind=f.string("kind", default="fact") or "fact", user=user, agent=agent,
        importance=f.number("importance", minimum=0, maximum=1), metadata=f.mapping("metadata"),
        source_message_ids=f.strings("source_message_ids"),
        conversation_id=tenant.stored_id(conversation) if conversation else None, task=f.mapping("task"))
    return Reply(201, tenant.record_out(record))


def search(call: Call) -> dict[str, Any]:
    f = call.fields(("query", "user", "agent", "kind", "limit", "min_score"))
    tenant = call.tenant
    query = f.text("query")
    limit = f.integer("limit", default=10, minimum=1, maximum=1000)
    assert limit is not None
    min_score = f.number("min_score", minimum=0, maximum=1)
    kinds = _kinds(f.strings("kind") if isinstance(f.data.get("kind"), list) else
                   ([k] if (k := f.string("kind")) else None))
    ranked = tenant.search_memories(call.memory, query, user=f.data.get("user"), agent=f.data.get("agent"),
                                    kind=kinds, limit=limit, min_score=min_score)
    return {"query": query, "count": len(ranked), "data": [tenant.record_out(r) for r in ranked]}


def ls(call: Call) -> dict[str, Any]:
    q = call.params(("user", "agent", "kind", "limit", "offset", "order"))
    tenant = call.tenant
    limit = q.integer("limit", default=100, minimum=1, maximum=1000)
    offset = q.integer("offset", default=0, minimum=0, maximum=MAX_INT)
    order = q.string("order", default="recent", choices=_ORDERS)
    assert limit is not None and offset is not None and order is not None
    kinds = _kinds(q.strings("kind"))
    user, agent = tenant.owner(q.string("user"), "user"), tenant.owner(q.string("agent"), "agent")
    memories = call.memory.memories
    if tenant.implicit or user is not None or agent is not None:  # a named owner is inside the tenant already
        records = memories.ls(user=user, agent=agent, kind=kinds, limit=limit + 1, offset=offset, order=order)
    else:  # the whole tenant's
        records = memories.ls(kind=kinds, limit=limit + 1, offset=offset, order=order, namespace=tenant.wide_owner)
    more = len(records) > limit
    return {"data": [tenant.record_out(r) for r in records[:limit]], "limit": limit, "offset": offset,
            "next_offset": offset + limit if more else None}


def get(call: Call) -> dict[str, Any]:
    record = call.tenant.check_record(call.memory.memories.get(call.path["memory_id"]))
    return call.tenant.record_out(record)


def delete(call: Call) -> dict[str, Any]:
    record = call.tenant.check_record(call.memory.memories.get(call.path["memory_id"]))
    gone = call.memory.memories.forget([record.id])
    return {"count": len(gone), "data": [call.tenant.record_out(r) for r in gone]}


def forget(call: Call) -> dict[str, Any]:
    f = call.fields(("ids", "user", "agent", "kind", "older_than_days", "importance_below", "keep", "dry_run", "all"))
    tenant = call.tenant
    ids = f.strings("ids")
    user, agent = tenant.owner(f.data.get("user"), "user"), tenant.owner(f.data.get("agent"), "agent")
    kinds = _kinds(f.strings("kind") if isinstance(f.data.get("kind"), list) else
                   ([k] if (k := f.string("kind")) else None))
    days = f.number("older_than_days", minimum=0, maximum=1_000_000)  # ~2,700 years: timedelta's range
    below = f.number("importance_below", minimum=0, maximum=1)
    keep = f.integer("keep", minimum=0, maximum=MAX_INT)
    everything = f.boolean("all")
    if (ids is None and user is None and agent is None and kinds is None and days is None and below is None
            and keep is None and not everything):
        raise ValidationError("forget needs a criterion (ids, user, agent, kind, older_than_days, importance_below "
                              "or keep), or all: true to forget every memory of this tenant")
    if not tenant.implicit:  # only this tenant's records, whatever else was asked
        mine = tenant.memory_ids(call.memory)
        owned = set(mine)
        ids = mine if ids is None else [i for i in ids if i in owned]
    gone = call.memory.memories.forget(
        ids, user=user, agent=agent, kind=kinds, older_than=timedelta(days=days) if days is not None else None,
        importance_below=below, keep=keep, dry_run=f.boolean("dry_run"), all=everything or ids is not None)
    return {"dry_run": f.boolean("dry_run"), "count": len(gone), "data": [tenant.record_out(r) for r in gone]}


def routes() -> list[Route]:
    return [
        Route(PREFIX, endpoint(ls), methods=["GET"]),
        Route(PREFIX, endpoint(add, body=True), methods=["POST"]),
        Route(PREFIX + "/search", endpoint(search, body=True), methods=["POST"]),
        Route(PREFIX + "/forget", endpoint(forget, body=True), methods=["POST"]),
        Route(PREFIX + "/{memory_id}", endpoint(get), methods=["GET"]),
        Route(PREFIX + "/{memory_id}", endpoint(delete), methods=["DELETE"]),
    ]
