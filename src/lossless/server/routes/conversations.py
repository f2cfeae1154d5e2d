"""``/v1/lossless/conversations/...``: conversations, messages, assembly, search, the agent
tools, the DAG, compaction, stats and verification, all inside the caller's tenant."""

from __future__ import annotations

import dataclasses
from typing import Any, Literal, cast

from starlette.routing import Route

from lossless.agent.tools import TOOL_NAMES, hit_dict
from lossless.conversation import Conversation
from lossless.core.errors import CompactionBusyError, NotFoundError
from lossless.core.types import ConversationInfo, Message, Summary
from lossless.core.validate import parse_datetime, parse_until, validate_message
from lossless.recall.dispatch import SearchMode
from lossless.server.params import MAX_INT, bad
from lossless.server.state import Call, Reply, endpoint
from lossless.server.tenancy import Tenant

__all__ = ["SEARCH_FIELDS", "conversation_json", "message_json", "public_ids", "routes", "search_hits"]

PREFIX = "/v1/lossless"
SEARCH_FIELDS = ("query", "mode", "scope", "role", "since", "until", "sort", "limit")
_SCOPES: dict[str, tuple[Literal["message", "summary"], ...]] = {
    "all": ("message", "summary"), "messages": ("message",), "summaries": ("summary",)}
_MODES = ("fts", "raw", "regex", "semantic", "hybrid")
_ROLES = ("system", "user", "assistant", "tool")


# -- shapes ----------------------------------------------------------------------------

def conversation_json(info: ConversationInfo, tenant: Tenant) -> dict[str, Any]:
    return {"id": tenant.public_id(info.id), "created_at": info.created_at.isoformat(),
            "updated_at": info.updated_at.isoformat(), "messages": info.message_count,
            "summaries": info.summary_count, "metadata": tenant.metadata_out(info.metadata)}


def message_json(msg: Message) -> dict[str, Any]:
    out: dict[str, Any] = {"id": msg.id, "seq": msg.seq, "role": msg.role, "content": msg.content,
                           "created_at": msg.created_at.isoformat(), "tokens": msg.token_count}
    if msg.name is not None:
        out["name"] = msg.name
    if msg.tool_calls:
        out["tool_calls"] = list(msg.tool_calls)
    if msg.tool_call_id is not None:
        out["tool_call_id"] = msg.tool_call_id
    if msg.metadata:
        out["metadata"] = msg.metadata
    if msg.external_id is not None:
        out["external_id"] = msg.external_id
    return out


def _summary_json(node: Summary, parent: str | None) -> dict[str, Any]:
    return {"id": node.id, "type": node.kind, "depth": node.depth, "first_seq": node.first_seq, "last_seq": node.last_seq,
            "earliest_at": node.earliest_at.isoformat(), "latest_at": node.latest_at.isoformat(),
            "tokens": node.token_count, "source_tokens": node.source_token_count,
            "message_count": node.message_count, "parent": parent,
            "children": [ref.id for ref in node.sources], "child_kind": node.sources[0].kind if node.sources else None,
            "preview": node.content[:240]}


def public_ids(value: Any, tenant: Tenant) -> Any:
    """``value`` with every ``conversation_id`` / ``conversation`` field shown as the tenant's id."""
    if tenant.implicit:
        return value
    if isinstance(value, dict):
        return {k: (tenant.public_id(v) if k in ("conversation_id", "conversation") and isinstance(v, str)
                    else public_ids(v, tenant)) for k, v in value.items()}
    if isinstance(value, list):
        return [public_ids(v, tenant) for v in value]
    return value


# -- lookups ---------------------------------------------------------------------------

def _conversation(call: Call) -> Conversation:
    public = call.path["conversation_id"]
    conv = call.memory.get_conversation(call.tenant.stored_id(public))
    if conv is None:
        raise NotFoundError(f"no conversation {public!r}")
    return conv


def search_hits(call: Call, conversations: list[str] | None, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    """The shared body of both search endpoints: ``conversations`` are stored ids (None: all)."""
    f = call.fields((*SEARCH_FIELDS, *extra))
    query = f.text("query")
    mode = f.string("mode", default="fts", choices=_MODES)
    scope = f.string("scope", default="all", choices=_SCOPES)
    role = f.string("role", choices=_ROLES)
    since, until = f.string("since"), f.string("until")
    sort = f.string("sort", default="relevance", choices=("relevance", "recency"))
    limit = f.integer("limit", default=20, minimum=1, maximum=1000)
    assert mode is not None and scope is not None and sort is not None and limit is not None
    if conversations is not None and not conversations:
        hits = []
    else:
        hits = call.memory.search(
            query, conversations=conversations, limit=limit, kinds=_SCOPES[scope], roles=(role,) if role else None,
            since=parse_datetime(since, "since") if since else None,
            until=parse_until(until, "until") if until else None,
            mode=cast("SearchMode", mode), sort=cast("Literal['relevance', 'recency']", sort))
    return {"query": query, "mode": mode, "count": len(hits),
            "hits": public_ids([hit_dict(h) for h in hits], call.tenant)}


# -- handlers ----------------------------------------------------------------------------

def list_conversations(call: Call) -> dict[str, Any]:
    q = call.params(("limit", "offset"))
    limit = q.integer("limit", default=50, minimum=1, maximum=1000)
    offset = q.integer("offset", default=0, minimum=0, maximum=MAX_INT)
    assert limit is not None and offset is not None
    rows = call.tenant.conversations(call.memory, limit + 1, offset)
    more = len(rows) > limit
    return {"data": [conversation_json(c, call.tenant) for c in rows[:limit]], "limit": limit, "offset": offset,
            "next_offset": offset + limit if more else None}


def create_conversation(call: Call) -> Reply:
    f = call.fields(("id", "metadata"))
    public = f.text("id")
    stored = call.tenant.stored_id(public)
    metadata = f.mapping("metadata")
    existed = call.memory.get_conversation(stored) is not None
    conv = call.memory.conversation(stored, call.tenant.metadata_in(metadata) if (metadata or not existed) else None)
    return Reply(200 if existed else 201, conversation_json(conv.info, call.tenant))


def get_conversation(call: Call) -> dict[str, Any]:
    return conversation_json(_conversation(call).info, call.tenant)


def add_messages(call: Call) -> Reply:
    """One message (the body is the message) or many (``{"messages": [...]}``), stored in
    one transaction; the conversation is created if it does not exist."""
    body = call.body
    # one message as the body: it has a role, or (a role forgotten) a message's fields and no list
    if isinstance(body, dict) and ("role" in body or ("messages" not in body and "content" in body)):
        items: Any = [body]
        metadata, compact = None, True
    else:
        f = call.fields(("messages", "metadata", "compact"))
        items = f.data.get("messages")
        if not isinstance(items, list) or not items:
            raise bad("'messages' must be a non-empty list of message objects (or send one message as the body)")
        metadata, compact = f.mapping("metadata"), f.boolean("compact", default=True)
    call.limits.check_messages(len(items))
    public = call.path["conversation_id"]
    stored = call.tenant.stored_id(public)
    limit = call.memory.config.max_message_bytes
    for i, item in enumerate(items):  # refuse before creating anything: a bad batch leaves no empty conversation
        try:
            validate_message(item, max_bytes=limit)
        except Exception as exc:
            raise type(exc)(f"message {i}: {exc}" if len(items) > 1 else str(exc)) from None
    existed = call.memory.get_conversation(stored) is not None
    conv = call.memory.conversation(stored, None if existed else call.tenant.metadata_in(metadata))
    added = conv.add_many(items, compact=compact)
    return Reply(201, {"conversation": public, "count": len(added),
                       "messages": [{"id": m.id, "seq": m.seq, "role": m.role, "tokens": m.token_count,
                                     "created_at": m.created_at.isoformat()} for m in added]})


def list_messages(call: Call) -> dict[str, Any]:
    q = call.params(("after", "limit"))
    after = q.integer("after", default=0, minimum=0, maximum=MAX_INT)
    limit = q.integer("limit", default=100, minimum=1, maximum=1000)
    assert after is not None and limit is not None
    conv = _conversation(call)
    last = call.memory.store.last_seq(conv.id)
    # nothing after the last (after + 1 may be past the store's integers)
    msgs = conv.messages(after + 1, min(after + limit, last)) if after < last else []
    nxt = msgs[-1].seq if msgs and msgs[-1].seq < last else None
    return {"data": [message_json(m) for m in msgs], "after": after, "limit": limit, "next_after": nxt}


def assemble(call: Call) -> dict[str, Any]:
    f = call.fields(("budget_tokens", "query"))
    budget = f.integer("budget_tokens", minimum=1)
    query = f.string("query")
    ctx = _conversation(call).assemble(budget_tokens=budget, query=query or None)
    return {"tokens": ctx.tokens, "budget_tokens": ctx.budget_tokens, "messages": ctx.messages,
            "tiers": ctx.tier_tokens(), "items": [dataclasses.asdict(i) for i in ctx.items]}


def search_conversation(call: Call) -> dict[str, Any]:
    return search_hits(call, [_conversation(call).id])


def run_tool(call: Call) -> dict[str, Any]:
    conv = _conversation(call)
    name = call.path["tool"]
    if name not in TOOL_NAMES:
        raise NotFoundError(f"no tool {name!r} (tools: {', '.join(TOOL_NAMES)})")
    args = call.body if call.body is not None else {}
    if not isinstance(args, dict):
        raise bad("the tool arguments must be a JSON object")
    result = conv.tools.call(name, args)
    return cast("dict[str, Any]", public_ids(result, call.tenant))


def describe_node(call: Call) -> dict[str, Any]:
    conv = _conversation(call)
    return cast("dict[str, Any]", public_ids(conv.tools.lcm_describe(call.path["node_id"]), call.tenant))


def dag(call: Call) -> dict[str, Any]:
    """Every summary with its span, parent and children, the frontier, and the raw tail."""
    conv = _conversation(call)
    nodes = conv.summaries()
    # a whole-conversation root is nobody's parent: the nodes it was made from stay on the frontier
    parents = {ref.id: s.id for s in nodes if not s.root for ref in s.sources if ref.kind == "summary"}
    root = call.memory.store.root(conv.id)
    frontier = conv.frontier()
    covered = frontier[-1].last_seq if frontier else 0
    total = call.memory.store.last_seq(conv.id)
    return {"conversation": call.tenant.public_id(conv.id), "messages": total,
            "max_depth": max((s.depth for s in nodes), default=-1),
            "frontier": [s.id for s in frontier], "root": root.id if root is not None else None,
            "summaries": [_summary_json(s, parents.get(s.id)) for s in sorted(nodes, key=lambda s: (-s.depth, s.first_seq))],
            "tail": {"first_seq": covered + 1, "last_seq": total, "count": total - covered}}


def compact(call: Call) -> dict[str, Any]:
    f = call.fields(("full", "emergency", "force"))
    report = _conversation(call).compact(force=f.boolean("force", default=True), full=f.boolean("full"),
                                         emergency=f.boolean("emergency"), reason="api")
    if report.busy:
        raise CompactionBusyError(f"{report.skipped}; try again shortly")
    out = dataclasses.asdict(report)
    out["conversation_id"] = call.tenant.public_id(report.conversation_id)
    out["created"] = report.created
    return out


def stats(call: Call) -> dict[str, Any]:
    out = _conversation(call).stats().to_dict()
    out["conversation"] = call.tenant.public_id(out["conversation"])
    return out


def verify(call: Call) -> dict[str, Any]:
    conv = _conversation(call)
    problems = call.memory.verify(conv.id)
    return {"ok": not problems, "problems": problems}


# ``:path``: a conversation id may hold "/" (sent as %2F, which stays inside the id through
# routing: lossless.server.state.EncodedSlashes, so ``a%2Fstats`` is the conversation
# ``a/stats``). Sent as a literal "/", the routes with a suffix come first, so
# ``a/b/messages`` is the messages of ``a/b``; the conversation itself is matched last.
C = PREFIX + "/conversations/{conversation_id:path}"


def routes() -> list[Route]:
    return [
        Route(PREFIX + "/conversations", endpoint(list_conversations), methods=["GET"]),
        Route(PREFIX + "/conversations", endpoint(create_conversation, body=True), methods=["POST"]),
        Route(C + "/messages", endpoint(list_messages), methods=["GET"]),
        Route(C + "/messages", endpoint(add_messages, body=True, stores=True), methods=["POST"]),
        Route(C + "/assemble", endpoint(assemble, body=True), methods=["POST"]),
        Route(C + "/search", endpoint(search_conversation, body=True), methods=["POST"]),
        Route(C + "/tools/{tool}", endpoint(run_tool, body=True), methods=["POST"]),
        Route(C + "/nodes/{node_id}", endpoint(describe_node), methods=["GET"]),
        Route(C + "/dag", endpoint(dag), methods=["GET"]),
        Route(C + "/compact", endpoint(compact, body=True), methods=["POST"]),
        Route(C + "/stats", endpoint(stats), methods=["GET"]),
        Route(C + "/verify", endpoint(verify), methods=["GET"]),
        Route(C, endpoint(get_conversation), methods=["GET"]),
    ]
