"""The OpenAPI 3.1 document served at ``/openapi.json``, written by hand next to the routes
(the tool argument schemas come from :func:`lossless.agent.tools.openai_tools`, so they cannot
drift). Request schemas are strict (``additionalProperties: false``, as the server refuses
unknown fields); response schemas list what is always there. ``tests/test_server.py``
validates the requests it sends and the answers it gets against this document."""

from __future__ import annotations

from typing import Any

from lossless.agent.tools import openai_tools
from lossless.core.types import ROLES
from lossless.longterm.records import KINDS
from lossless.server.params import MAX_INT

__all__ = ["openapi_document", "schema_ref"]


def schema_ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _obj(properties: dict[str, Any], required: tuple[str, ...] = (), *, strict: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        out["required"] = list(required)
    if strict:
        out["additionalProperties"] = False
    return out


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [schema, {"type": "null"}]}


_STR, _INT, _NUM, _BOOL = {"type": "string"}, {"type": "integer"}, {"type": "number"}, {"type": "boolean"}
_TIME = {"type": "string", "description": "ISO 8601"}
_FREE = {"type": "object"}
_ROLE = {"type": "string", "enum": list(ROLES)}
_SEARCH_MODES = ["fts", "raw", "regex", "semantic", "hybrid"]

_TOOL_CALL = _obj({"id": _STR, "type": {"type": "string", "enum": ["function"]},
                   "function": _obj({"name": _STR, "arguments": _STR}, ("name",))}, ("id", "function"))
_CONTENT = {"anyOf": [_STR, {"type": "array", "items": _obj({"type": _STR}, ("type",))}, {"type": "null"}]}
_MESSAGE_IN = _obj({
    "role": _ROLE, "content": _CONTENT, "name": _STR, "tool_calls": {"type": "array", "items": _TOOL_CALL},
    "tool_call_id": _STR, "created_at": {"anyOf": [_STR, _NUM], "description": "ISO 8601 or Unix seconds"},
    "metadata": _FREE, "external_id": {**_STR, "description": "your id: adding it again adds nothing"},
}, ("role",), strict=True)
_CHAT_MESSAGE = _obj({"role": _STR, "content": _CONTENT, "name": _STR,
                      "tool_calls": {"type": "array", "items": _TOOL_CALL}, "tool_call_id": _STR}, ("role",))
_SEARCH = {
    "query": _STR, "mode": {"type": "string", "enum": _SEARCH_MODES, "default": "fts"},
    "scope": {"type": "string", "enum": ["all", "messages", "summaries"], "default": "all"},
    "role": _ROLE, "since": _TIME, "until": _TIME,
    "sort": {"type": "string", "enum": ["relevance", "recency"], "default": "relevance"},
    "limit": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 20},
}
_MEMORY = _obj({
    "id": _STR, "kind": {"type": "string", "enum": list(KINDS)}, "content": _STR, "importance": _NUM,
    "user": _nullable(_STR), "agent": _nullable(_STR),
    "scope": {"type": "string", "enum": ["user", "agent", "global", "tenant"]},
    "metadata": _FREE, "source_message_ids": {"type": "array", "items": _STR},
    "conversation_id": _nullable(_STR), "created_at": _TIME, "last_used_at": _TIME, "use_count": _INT,
    "token_count": _INT, "task": _FREE, "score": _NUM,
}, ("id", "kind", "content", "importance", "user", "agent", "scope", "created_at", "last_used_at"))
_PAGE = {"limit": _INT, "offset": _INT, "next_offset": _nullable(_INT)}


def _schemas() -> dict[str, Any]:
    """Every component schema, in the order the document lists them."""
    tools = {t["function"]["name"]: t["function"]["parameters"] for t in openai_tools()}
    return {**_conversation_schemas(), **_context_schemas(tools), **_tenant_schemas(), **_memory_schemas(),
            **_proxy_schemas()}


def _conversation_schemas() -> dict[str, Any]:
    """The schemas of the conversations and their messages."""
    return {
        "Error": _obj({"error": _obj({"type": _STR, "message": _STR}, ("type", "message"))}, ("error",)),
        # the Anthropic proxy route's errors, in Anthropic's envelope
        "AnthropicError": _obj({"type": {"const": "error"},
                                "error": _obj({"type": _STR, "message": _STR}, ("type", "message"))},
                               ("type", "error")),
        "Conversation": _obj({"id": _STR, "created_at": _TIME, "updated_at": _TIME, "messages": _INT,
                              "summaries": _INT, "metadata": _FREE},
                             ("id", "created_at", "updated_at", "messages", "summaries", "metadata")),
        "ConversationList": _obj({"data": {"type": "array", "items": schema_ref("Conversation")}, **_PAGE},
                                 ("data", "limit", "offset", "next_offset")),
        "CreateConversation": _obj({"id": _STR, "metadata": {
            **_FREE, "description": "free; 'user'/'agent' scope the conversation's long-term memories"}},
            ("id",), strict=True),
        "MessageIn": _MESSAGE_IN,
        "AddMessages": {"anyOf": [
            schema_ref("MessageIn"),
            _obj({"messages": {"type": "array", "minItems": 1, "items": schema_ref("MessageIn")},
                  "metadata": {**_FREE, "description": "used when the conversation is created"},
                  "compact": {**_BOOL, "default": True}}, ("messages",), strict=True)]},
        "AddedMessages": _obj({"conversation": _STR, "count": _INT, "messages": {"type": "array", "items": _obj(
            {"id": _STR, "seq": _INT, "role": _STR, "tokens": _INT, "created_at": _TIME},
            ("id", "seq", "role", "tokens", "created_at"))}}, ("conversation", "count", "messages")),
        "Message": _obj({"id": _STR, "seq": _INT, "role": _STR, "content": _CONTENT, "created_at": _TIME,
                         "tokens": _INT, "name": _STR, "tool_calls": {"type": "array", "items": _TOOL_CALL},
                         "tool_call_id": _STR, "metadata": _FREE, "external_id": _STR},
                        ("id", "seq", "role", "content", "created_at", "tokens")),
        "MessageList": _obj({"data": {"type": "array", "items": schema_ref("Message")}, "after": _INT,
                             "limit": _INT, "next_after": _nullable(_INT)}, ("data", "after", "limit", "next_after")),
    }


def _context_schemas(tools: dict[str, Any]) -> dict[str, Any]:
    """The schemas of assembling, searching, the tools, the DAG, compaction and checks."""
    return {
        "AssembleRequest": _obj({"budget_tokens": {"type": "integer", "minimum": 1,
                                                   "description": "default: the context window"},
                                 "query": {**_STR, "description": "recall older messages that match it"}},
                                strict=True),
        "AssembledContext": _obj({
            "tokens": _INT, "budget_tokens": _INT, "messages": {"type": "array", "items": _CHAT_MESSAGE},
            "tiers": {"type": "object", "additionalProperties": _INT},
            "items": {"type": "array", "items": _obj({"tier": _STR, "ref": _STR, "tokens": _INT, "first_seq": _INT,
                                                      "last_seq": _INT},
                                                     ("tier", "ref", "tokens", "first_seq", "last_seq"))}},
            ("tokens", "budget_tokens", "messages", "tiers", "items")),
        "SearchRequest": _obj(_SEARCH, ("query",), strict=True),
        "TenantSearchRequest": _obj({**_SEARCH, "conversations": {
            "type": "array", "items": _STR, "description": "only these (default: every conversation)"}},
            ("query",), strict=True),
        "Hit": _obj({"id": _STR, "kind": _STR, "conversation_id": _STR, "first_seq": _INT, "last_seq": _INT,
                     "role": _nullable(_STR), "depth": _nullable(_INT), "created_at": _TIME, "score": _NUM,
                     "snippet": _STR, "matched": {"type": "string", "enum": ["vector", "keyword", "both"],
                                                   "description": "semantic and hybrid modes: how it was found "
                                                                  "(keyword: not embedded yet)"}},
                    ("id", "kind", "conversation_id", "first_seq", "last_seq", "snippet")),
        "SearchResult": _obj({"query": _STR, "mode": _STR, "count": _INT,
                              "hits": {"type": "array", "items": schema_ref("Hit")}},
                             ("query", "mode", "count", "hits")),
        "LcmGrep": tools["lcm_grep"], "LcmDescribe": tools["lcm_describe"], "LcmExpand": tools["lcm_expand"],
        "ToolResult": {**_FREE, "description": "what the tool returns (see lossless.agent.tools)"},
        "Dag": _obj({
            "conversation": _STR, "messages": _INT, "max_depth": _INT, "frontier": {"type": "array", "items": _STR},
            "root": _nullable(_STR),
            "summaries": {"type": "array", "items": _obj({
                "id": _STR, "type": {"type": "string", "enum": ["leaf", "condensed", "root"]}, "depth": _INT, "first_seq": _INT, "last_seq": _INT, "earliest_at": _TIME,
                "latest_at": _TIME, "tokens": _INT, "source_tokens": _INT, "message_count": _INT,
                "parent": _nullable(_STR), "children": {"type": "array", "items": _STR},
                "child_kind": _nullable({"type": "string", "enum": ["message", "summary"]}), "preview": _STR},
                ("id", "depth", "first_seq", "last_seq", "parent", "children", "preview"))},
            "tail": _obj({"first_seq": _INT, "last_seq": _INT, "count": _INT}, ("first_seq", "last_seq", "count"))},
            ("conversation", "messages", "frontier", "summaries", "tail")),
        "CompactRequest": _obj({"full": {**_BOOL, "default": False}, "emergency": {**_BOOL, "default": False},
                                "force": {**_BOOL, "default": True}}, strict=True),
        "CompactionReport": _obj({
            "conversation_id": _STR, "leaves": {"type": "array", "items": _STR},
            "condensed": {"type": "array", "items": _STR}, "created": {"type": "array", "items": _STR},
            "tokens_before": _INT, "tokens_after": _INT, "passes": _INT, "skipped": _nullable(_STR),
            "reason": _STR, "seconds": _NUM, "stopped": _BOOL, "busy": _BOOL},
            ("conversation_id", "leaves", "condensed", "created", "tokens_before", "tokens_after")),
        "ConversationStats": _obj({"conversation": _STR, "messages": _INT, "message_tokens": _INT, "summaries": _INT,
                                   "max_depth": _INT, "active_tokens": _INT, "context_window": _INT},
                                  ("conversation", "messages", "summaries", "active_tokens")),
        "Verification": _obj({"ok": _BOOL, "problems": {"type": "array", "items": _STR}}, ("ok", "problems")),
    }


def _tenant_schemas() -> dict[str, Any]:
    """The schemas of a tenant's totals and checks, who is asking, the server's health."""
    return {
        "TenantVerification": _obj({"ok": _BOOL, "problems": {"type": "array", "items": _STR}, "checked": _INT,
                                    "next_after": _nullable(_STR)}, ("ok", "problems", "checked", "next_after")),
        "TenantStats": _obj({"tenant": _nullable(_STR), "conversations": _INT, "messages": _INT,
                             "message_tokens": _INT, "summaries": _INT, "max_depth": _INT, "memories": _INT},
                            ("tenant", "conversations", "messages", "summaries", "memories")),
        "WhoAmI": _obj({"tenant": _nullable(_STR), "key_id": _nullable(_STR), "implicit": _BOOL},
                       ("tenant", "key_id", "implicit")),
        "Health": _obj({
            "ok": _BOOL,
            "compaction": {"type": "string", "enum": ["background", "inline", "deferred"]},
            "backlog": _obj({"conversations": _INT, "oldest_seconds": _NUM, "in_progress": _INT, "failing": _INT},
                            ("conversations", "oldest_seconds", "in_progress", "failing")),
            "worker": {**_obj({"state": _STR, "turns": _INT, "summaries_written": _INT, "units_embedded": _INT,
                               "errors": _INT, "last_error": _nullable(_STR), "units_per_busy_second": _NUM,
                               "current": _nullable(_STR)}, ("state",)),
                       "description": "a keyed tenant sees the state only; the counters and the conversation "
                                      "in hand: keyless server only"},
            "breaker": _nullable(_obj({"provider": _STR, "state": _STR, "circuits": _FREE}, ("state",))),
            "workers": {"type": "array", "items": _FREE,
                        "description": "every worker that reported lately (keyless server only)"},
        }, ("ok", "compaction", "backlog", "worker", "breaker")),
    }


def _memory_schemas() -> dict[str, Any]:
    """The schemas of long-term memories."""
    return {
        "MemoryIn": _obj({"content": _STR, "kind": {"type": "string", "enum": list(KINDS), "default": "fact"},
                          "user": _STR, "agent": _STR, "importance": {"type": "number", "minimum": 0, "maximum": 1},
                          "metadata": _FREE, "conversation_id": _STR, "task": _FREE,
                          "source_message_ids": {"type": "array", "items": _STR}}, ("content",), strict=True),
        "Memory": _MEMORY,
        "MemoryList": _obj({"data": {"type": "array", "items": schema_ref("Memory")}, **_PAGE},
                           ("data", "limit", "offset", "next_offset")),
        "MemorySearchRequest": _obj({
            "query": _STR, "user": _STR, "agent": _STR,
            "kind": {"anyOf": [{"type": "string", "enum": list(KINDS)},
                               {"type": "array", "items": {"type": "string", "enum": list(KINDS)}}]},
            "limit": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 10},
            "min_score": {"type": "number", "minimum": 0, "maximum": 1}}, ("query",), strict=True),
        "MemorySearchResult": _obj({"query": _STR, "count": _INT, "data": {"type": "array", "items": schema_ref("Memory")}},
                                   ("query", "count", "data")),
        "ForgetRequest": _obj({
            "ids": {"type": "array", "items": _STR}, "user": _STR, "agent": _STR,
            "kind": {"anyOf": [_STR, {"type": "array", "items": _STR}]},
            "older_than_days": {"type": "number", "minimum": 0, "description": "not used for this many days"},
            "importance_below": {"type": "number", "minimum": 0, "maximum": 1},
            "keep": {"type": "integer", "minimum": 0, "maximum": MAX_INT, "description": "at most this many per owner"},
            "dry_run": {**_BOOL, "default": False}, "all": {**_BOOL, "default": False}}, strict=True),
        "ForgetResult": _obj({"dry_run": _BOOL, "count": _INT, "data": {"type": "array", "items": schema_ref("Memory")}},
                             ("count", "data")),
    }


def _proxy_schemas() -> dict[str, Any]:
    """The schemas of the proxy's two wire formats (forwarded, so only loosely checked)."""
    return {
        "ChatCompletionRequest": {**_obj({"model": _STR, "messages": {"type": "array", "items": _FREE},
                                          "stream": _BOOL, "user": _STR}, ("model", "messages")),
                                  "description": "OpenAI's chat completion request; forwarded with messages "
                                                 "replaced by the assembled context"},
        "AnthropicMessagesRequest": {**_obj({"model": _STR, "max_tokens": _INT, "system": {},
                                             "messages": {"type": "array", "items": _FREE}, "stream": _BOOL},
                                            ("model", "max_tokens", "messages")),
                                     "description": "Anthropic's Messages request, forwarded the same way"},
    }


def _body(name: str) -> dict[str, Any]:
    return {"required": True, "content": {"application/json": {"schema": schema_ref(name)}}}


def _ok(name: str | None, status: str = "200", what: str = "OK") -> dict[str, Any]:
    out: dict[str, Any] = {"default": {"description": "an error", "content": {
        "application/json": {"schema": schema_ref("Error")}}}}
    out[status] = {"description": what}
    if name is not None:
        out[status]["content"] = {"application/json": {"schema": schema_ref(name)}}
    return out


def _q(name: str, schema: dict[str, Any], description: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "in": "query", "required": False, "schema": schema}
    if description:
        out["description"] = description
    return out


def _p(name: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": _STR}


def _op(op_id: str, summary: str, response: str | None, *, body: str | None = None, status: str = "200",
        params: list[dict[str, Any]] | None = None, tag: str = "conversations") -> dict[str, Any]:
    out: dict[str, Any] = {"operationId": op_id, "summary": summary, "tags": [tag], "responses": _ok(response, status)}
    if body is not None:
        out["requestBody"] = _body(body)
    if params:
        out["parameters"] = params
    return out


def _paths() -> dict[str, Any]:
    c = "/v1/lossless/conversations/{conversation_id}"
    cid = [_p("conversation_id")]
    page = [_q("limit", {"type": "integer", "minimum": 1, "maximum": 1000, "default": 50}),
            _q("offset", {"type": "integer", "minimum": 0, "maximum": MAX_INT, "default": 0})]
    tool_bodies = {"lcm_grep": "LcmGrep", "lcm_describe": "LcmDescribe", "lcm_expand": "LcmExpand"}
    return {
        "/v1/lossless/conversations": {
            "get": _op("listConversations", "The tenant's conversations, most recently updated first", "ConversationList",
                       params=page),
            "post": {**_op("createConversation", "Get or create a conversation (201 when created)", "Conversation",
                           body="CreateConversation", status="201"),
                     "responses": {**_ok("Conversation", "201", "created"),
                                   "200": {"description": "it existed", "content": {
                                       "application/json": {"schema": schema_ref("Conversation")}}}}},
        },
        c: {"get": _op("getConversation", "One conversation", "Conversation", params=cid)},
        c + "/messages": {
            "get": _op("listMessages", "Stored messages in seq order, paged by seq", "MessageList", params=[
                *cid, _q("after", {"type": "integer", "minimum": 0, "maximum": MAX_INT, "default": 0},
                   "messages after this seq"),
                _q("limit", {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100})]),
            "post": _op("addMessages", "Add one message (the body) or many ({messages}) in one transaction; "
                                       "creates the conversation", "AddedMessages", body="AddMessages", status="201",
                        params=cid),
        },
        c + "/assemble": {"post": _op("assemble", "The context for one model call", "AssembledContext",
                                      body="AssembleRequest", params=cid)},
        c + "/search": {"post": _op("searchConversation", "Search this conversation", "SearchResult",
                                    body="SearchRequest", params=cid)},
        **{f"{c}/tools/{name}": {"post": _op(name, f"The {name} agent tool, scoped to this conversation", "ToolResult",
                                             body=schema, params=cid, tag="tools")}
           for name, schema in tool_bodies.items()},
        c + "/nodes/{node_id}": {"get": _op("describeNode", "lcm_describe of a summary or message", "ToolResult",
                                            params=[*cid, _p("node_id")], tag="tools")},
        c + "/dag": {"get": _op("dag", "Every summary with its span, parent and children; the raw tail", "Dag",
                                params=cid)},
        c + "/compact": {"post": _op("compact", "Compact now (409 while another compaction runs)", "CompactionReport",
                                     body="CompactRequest", params=cid)},
        c + "/stats": {"get": _op("conversationStats", "Sizes, tokens, DAG depth, summarizer spend",
                                  "ConversationStats", params=cid)},
        c + "/verify": {"get": _op("verifyConversation", "Re-check hashes and DAG invariants", "Verification",
                                   params=cid)},
        "/v1/lossless/search": {"post": _op("search", "Search the tenant's conversations", "SearchResult",
                                            body="TenantSearchRequest", tag="tenant")},
        "/v1/lossless/stats": {"get": _op("stats", "Totals over the tenant", "TenantStats", tag="tenant")},
        "/v1/lossless/verify": {"get": _op("verify", "Verify the tenant's conversations, a page at a time",
                                           "TenantVerification", tag="tenant", params=[
                                               _q("after", _STR, "start after this conversation id (next_after)"),
                                               _q("limit", {"type": "integer", "minimum": 1, "maximum": 100000})])},
        "/v1/lossless/whoami": {"get": _op("whoami", "The tenant of the key", "WhoAmI", tag="tenant")},
        "/v1/lossless/health": {"get": _op("health", "The background work: backlog, worker, circuit breaker",
                                           "Health", tag="tenant")},
        "/v1/lossless/memories": {
            "get": _op("listMemories", "The tenant's long-term memories", "MemoryList", tag="memories", params=[
                _q("user", _STR), _q("agent", _STR), _q("kind", _STR, "comma-separated kinds"), *page,
                _q("order", {"type": "string", "enum": ["recent", "oldest", "used", "importance"]})]),
            "post": _op("addMemory", "Store a memory (the same content for the same owners is stored once)", "Memory",
                        body="MemoryIn", status="201", tag="memories"),
        },
        "/v1/lossless/memories/search": {"post": _op("searchMemories", "Memories this user/agent may see that match",
                                                     "MemorySearchResult", body="MemorySearchRequest",
                                                     tag="memories")},
        "/v1/lossless/memories/forget": {"post": _op("forgetMemories", "Forget for good (every criterion must hold)",
                                                     "ForgetResult", body="ForgetRequest", tag="memories")},
        "/v1/lossless/memories/{memory_id}": {
            "get": _op("getMemory", "One memory", "Memory", params=[_p("memory_id")], tag="memories"),
            "delete": _op("deleteMemory", "Forget one memory", "ForgetResult", params=[_p("memory_id")],
                          tag="memories"),
        },
        "/v1/chat/completions": {"post": {**_op(
            "chatCompletions", "OpenAI-compatible context proxy (JSON or SSE, as the upstream answers)", None,
            body="ChatCompletionRequest", tag="proxy"), "parameters": [
            {"name": "X-Lossless-Conversation", "in": "header", "required": False, "schema": _STR,
             "description": "the conversation (else the request's user field)"}]}},
        "/v1/messages": {"post": {**_op(
            "anthropicMessages", "Anthropic-compatible context proxy", None, body="AnthropicMessagesRequest",
            tag="proxy"), "parameters": [
            {"name": "X-Lossless-Conversation", "in": "header", "required": False, "schema": _STR,
             "description": "the conversation (else metadata.user_id)"}],
            "responses": {"200": {"description": "OK"}, "default": {
                "description": "an error (lossless's own: Anthropic's shape; the provider's: as it sent it)",
                "content": {"application/json": {"schema": schema_ref("AnthropicError")}}}}}},
        "/openapi.json": {"get": {"operationId": "openapi", "summary": "This document", "security": [],
                                  "responses": {"200": {"description": "OpenAPI 3.1"}}}},
        "/healthz": {"get": {"operationId": "health", "summary": "Liveness", "security": [],
                             "responses": {"200": {"description": "ok"}}}},
    }


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("lossless")
    except PackageNotFoundError:
        return "unknown"


def openapi_document(server_url: str | None = None) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {"title": "lossless", "version": _version(),
                 "description": "A long-context memory engine for LLM agents, over HTTP. Every request carries "
                                "Authorization: Bearer <key> (keys: `lossless keys create --tenant T`); a keyless "
                                "server answers loopback clients only. Errors are {\"error\": {\"type\", \"message\"}}."},
        "paths": _paths(),
        "components": {"schemas": _schemas(),
                       "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
        "security": [{"bearer": []}],
    }
    if server_url:
        doc["servers"] = [{"url": server_url}]
    return doc
