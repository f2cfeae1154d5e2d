"""Agent tools over the store: ``lcm_grep``, ``lcm_describe``, ``lcm_expand``.

As plain Python methods on :class:`ToolBox`, as JSON schemas for OpenAI and Anthropic
tool calling, and through :meth:`ToolBox.dispatch`, which takes a model's tool call in
either wire format and returns the matching tool-result message. A ToolBox is bound to
one conversation unless created with ``conversation_id=None``: a model never reaches
another conversation's history through it.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Collection, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, TypedDict

from lossless.agent.results import (
    ExpandedMessage,
    ExpandedSummary,
    ExpandResult,
    FirstSlice,
    GrepResult,
    HitDict,
    LargeContent,
    MessageBrief,
    MessageDescription,
    MessageSlice,
    PartialMessage,
    PartialSummary,
    SummaryBrief,
    SummaryDescription,
    SummarySlice,
    ToolParts,
    ToolResult,
)
from lossless.context.explore import explore
from lossless.context.paging import page_chars, page_count, text_sha256, token_slice
from lossless.core.errors import CompactionBusyError, LosslessError, NotFoundError, ValidationError
from lossless.core.importance import score_message
from lossless.core.render import message_header, message_text
from lossless.core.types import GrepHit, Message, Summary
from lossless.core.validate import parse_datetime, parse_until
from lossless.recall.dispatch import run_search
from lossless.store.base import SearchSpec

if TYPE_CHECKING:
    from lossless.agent.base import AgentServices

__all__ = ["GREP_LIMIT_MAX", "TOOL_NAMES", "ToolBox", "anthropic_tools", "hit_dict", "openai_tools",
           "wait_while_compacting"]

TOOL_NAMES = ("lcm_grep", "lcm_describe", "lcm_expand")
# lcm_grep's most hits: its schema's maximum and what every path (tool calling, the server's
# tools endpoint, MCP) accepts. A hit is ~100-150 tokens of JSON, so 100 of them already fill
# a small window; a person or program wanting more uses `lossless grep --limit` or search().
GREP_LIMIT_MAX = 100
_GREP_MODES = ("fts", "regex", "semantic", "hybrid")  # lcm_grep's mode enum, and what it accepts
# "#13": how the assembled context names message 13 (also "＃13", as a Chinese or Japanese
# input method types it; \d takes full-width digits and int() reads them)
_MESSAGE_NUMBER = re.compile(r"^\s*[#＃]\d{1,18}\s*$")

_SPECS: dict[str, dict[str, Any]] = {
    "lcm_grep": {
        "description": (
            "Search the full conversation history (every original message and every summary), "
            "including parts no longer in your context. Returns ids, message numbers, dates and snippets."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "Words to find, or a regular expression when mode is 'regex'."},
                "mode": {"type": "string", "enum": list(_GREP_MODES), "default": "fts",
                         "description": "'fts': ranked full-text search; 'regex': regular-expression scan; "
                                        "'semantic': by meaning (vectors); 'hybrid': both, fused."},
                "scope": {"type": "string", "enum": ["all", "messages", "summaries"], "default": "all"},
                "role": {"type": "string", "enum": ["system", "user", "assistant", "tool"]},
                "since": {"type": "string", "description": "ISO 8601 date/time: only at or after it."},
                "until": {"type": "string", "description": "ISO 8601 date/time: only at or before it."},
                "sort": {"type": "string", "enum": ["relevance", "recency"], "default": "relevance"},
                "limit": {"type": "integer", "minimum": 1, "maximum": GREP_LIMIT_MAX, "default": 10},
            },
            "required": ["query"],
            "additionalProperties": False,
        },
    },
    "lcm_describe": {
        "description": (
            "Describe one node of the history by id (sum_… or msg_…): its span, times, token counts, "
            "how it was made, its parent and its direct sources. For a large message (large: true) also "
            "an exploration of its content (kind: json/csv/tsv/yaml/code/log/text/html/xml, and an outline: "
            "keys, columns, definitions, errors, head and tail) and how many pages lcm_expand reads it in."
        ),
        "parameters": {
            "type": "object",
            "properties": {"id": {"type": "string", "description": "A summary id (sum_…), a message id (msg_…), "
                                                                 "or a message number as your context shows it (#N)."}},
            "required": ["id"],
            "additionalProperties": False,
        },
    },
    "lcm_expand": {
        "description": (
            "Expand a summary (sum_…) back to what it covers: its direct sources ('sources') or the exact "
            "original messages ('messages'), up to max_tokens; continue with from_seq=next_from_seq "
            "until it is null. Or read one node's own text exactly, a slice at a time, with offset, "
            "max_chars or page: a message's (msg_…), or a summary's (how the rest of an item marked partial "
            "is read). 'content' is the stored text from 'offset' (characters), at most max_tokens tokens, "
            "or max_chars characters, or page N of 'pages'. Continue with offset=next_offset until it is "
            "null; the slices joined are the original text (sha256 given)."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "id": {"type": "string", "description": "A summary id (sum_…), or a message id (msg_…) or number "
                                                       "(#N, as your context shows it) to read that message's text "
                                                       "page by page."},
                "to": {"type": "string", "enum": ["messages", "sources"], "default": "messages",
                       "description": "Summaries only: the original messages or the direct sources."},
                "max_tokens": {"type": "integer", "minimum": 1, "default": 4000,
                               "description": "Expanding a summary: the token budget of the returned items (a "
                                              "first item over it comes back as a slice marked partial: read "
                                              "the rest by that item's id with offset=next_offset, then go "
                                              "on with from_seq=next_from_seq). Reading a slice: the most "
                                              "tokens of text it holds (it ends at a line break when one is "
                                              "near)."},
                "from_seq": {"type": "integer", "minimum": 1,
                             "description": "Summaries only: start at this message number (the next_from_seq "
                                            "of the previous page)."},
                "offset": {"type": "integer", "minimum": 0,
                           "description": "Read the node's own text (a message's, or a summary's) from this "
                                          "character: the next_offset of the previous slice or of a partial "
                                          "item (a message: 0 when left out). Not with to or from_seq."},
                "max_chars": {"type": "integer", "minimum": 1,
                              "description": "A slice of the node's own text of exactly this many characters "
                                             "(fewer at the end) instead of a max_tokens slice; also the page "
                                             "size for page."},
                "page": {"type": "integer", "minimum": 1,
                         "description": "Read page N (1 is the first) of the node's own text: of the 'pages' "
                                        "that lcm_describe and lcm_expand report, page_chars characters each."},
            },
            "required": ["id"],
            "additionalProperties": False,
        },
    },
}


def openai_tools() -> list[dict[str, Any]]:
    """Tool definitions for OpenAI-style chat completions (``tools=``)."""
    return [{"type": "function", "function": {"name": n, **_SPECS[n]}} for n in TOOL_NAMES]


def anthropic_tools() -> list[dict[str, Any]]:
    """Tool definitions for Anthropic's Messages API (``tools=``)."""
    return [{"name": n, "description": _SPECS[n]["description"], "input_schema": _SPECS[n]["parameters"]} for n in TOOL_NAMES]


def _time(dt: datetime) -> str:
    return dt.isoformat()


def hit_dict(h: GrepHit) -> HitDict:
    """A search hit as the tools and the CLI return it (JSON-ready); ``matched`` (vector,
    keyword or both) only from a semantic or hybrid search."""
    out: HitDict = {"id": h.id, "kind": h.kind, "conversation_id": h.conversation_id, "first_seq": h.first_seq,
           "last_seq": h.last_seq, "role": h.role, "depth": h.depth, "created_at": _time(h.created_at),
           "score": h.score, "snippet": h.snippet}
    if h.matched is not None:
        out["matched"] = h.matched
    return out


def _summary_brief(node: Summary) -> SummaryBrief:
    return {
        "id": node.id, "kind": "summary", "depth": node.depth, "first_seq": node.first_seq, "last_seq": node.last_seq,
        "earliest_at": _time(node.earliest_at), "latest_at": _time(node.latest_at), "tokens": node.token_count,
    }


def _message_brief(msg: Message) -> MessageBrief:
    return {"id": msg.id, "kind": "message", "seq": msg.seq, "role": msg.role, "name": msg.name,
            "created_at": _time(msg.created_at), "tokens": msg.token_count}


class _TokenCount(TypedDict, total=False):
    tokens: int


class _SliceExtra(_TokenCount, total=False):
    tool_call_id: str


class _Slice(NamedTuple):
    """Where a slice of a node's text lies: ``text[start:end]``, the page size and count,
    and (a ``max_tokens`` slice) the tokens it holds."""

    start: int
    end: int
    size: int
    pages: int
    tokens: int | None


def _message_body(msg: Message) -> tuple[str, Literal["content", "parts", "tool_calls"]]:
    """The text a message is paged through, and what it is: its content string exactly
    as stored ("content"); for content parts, their text as the tools render it
    ("parts"); for a message with tool calls, its text and then each call as the tools
    render it, ``→ tool_call name(arguments)`` ("tool_calls": the calls were out of reach,
    an assistant's call message read as "")."""
    if msg.tool_calls:
        return message_text(msg), "tool_calls"
    if isinstance(msg.content, str):
        return msg.content, "content"
    if msg.content is None:
        return "", "content"
    return message_text(msg), "parts"


def _check_int(value: Any, name: str, *, minimum: int = 0) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        kind = "a positive integer" if minimum else "an integer >= 0"
        raise ValidationError(f"{name} must be {kind}; got {value!r}")
    return value


def wait_while_compacting(memory: AgentServices, conversation_id: str, seconds: float | None = None) -> bool:
    """Wait while the conversation is COMPACTING (its lease is held by any thread or
    process: seed 003's "pause new tool calls"), at most ``seconds`` (default: the
    config's ``tool_wait_seconds``). True when it is ACTIVE, False when the time ran out."""
    compactor = memory.compactor
    deadline = time.monotonic() + (memory.config.tool_wait_seconds if seconds is None else seconds)
    while compactor.state(conversation_id) == "COMPACTING":
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


class ToolBox:
    """The three agent tools, scoped to one conversation (or, if None, to the conversations
    ``within`` names: a server tenant's; None: every conversation).

    Messages over ``large_content_tokens`` (config; 25,000 by default) are described
    with an exploration of their content and read with ``lcm_expand`` in exact slices.
    """

    explore_tokens = 600  # the token budget of a large message's exploration outline

    def __init__(self, memory: AgentServices, conversation_id: str | None, *,
                 within: Collection[str] | None = None) -> None:
        self.memory = memory
        self.conversation_id = conversation_id
        self.within = frozenset(within) if within is not None and conversation_id is None else None

    # -- scoping ------------------------------------------------------------------------

    def _not_found(self, ident: str) -> NotFoundError:
        """A node that is not in scope, said alike whether it exists elsewhere or nowhere:
        message ids are ``sha256(conversation, seq)``, so a difference would let a server
        tenant learn which of another's conversation ids exist, and how long they are."""
        kind = "summary" if ident.startswith("sum_") else "message"
        where = " in this conversation" if self.conversation_id is not None else ""
        return NotFoundError(f"no {kind} with id {ident!r}{where}")

    def _check_scope(self, conversation_id: str, ident: str) -> None:
        if (self.conversation_id is not None and conversation_id != self.conversation_id) or (
                self.within is not None and conversation_id not in self.within):
            raise self._not_found(ident)

    def node(self, ident: str) -> Summary | Message:
        """The summary or message ``ident`` (NotFoundError when it is not in scope); in a
        conversation's ToolBox also "#N", message number N, as the context names messages
        ("#13 user: …", "[abridged by lossless: #13, …]")."""
        if not isinstance(ident, str) or not ident:
            raise ValidationError("id must be a non-empty string (sum_… or msg_…)")
        node: Summary | Message
        if ident.startswith(("sum_", "msg_")):
            try:
                node = (self.memory.store.get_summary if ident.startswith("sum_") else self.memory.store.get_message)(ident)
            except NotFoundError:
                raise self._not_found(ident) from None
        elif _MESSAGE_NUMBER.match(ident):
            if self.conversation_id is None:
                raise NotFoundError(f"{ident!r}: a message number names a message of one conversation; "
                                    "give its id (msg_…)")
            seq = int(ident.strip().lstrip("#＃"))
            found = self.memory.store.get_messages(self.conversation_id, seq, seq)
            if not found:
                raise NotFoundError(f"no message #{seq} in this conversation")
            node = found[0]
        else:
            raise NotFoundError(f"{ident!r} is not a summary (sum_…) or message (msg_…) id"
                                + (" nor a message number (#N)" if self.conversation_id is not None else ""))
        self._check_scope(node.conversation_id, ident)
        return node

    # -- the tools ----------------------------------------------------------------------

    def lcm_grep(self, query: str, mode: str = "fts", scope: str = "all", role: str | None = None,
                 since: str | datetime | None = None, until: str | datetime | None = None,
                 sort: str = "relevance", limit: int = 10) -> GrepResult:
        kinds = {"all": ("message", "summary"), "messages": ("message",), "summaries": ("summary",)}.get(scope)
        if kinds is None:
            raise ValidationError(f"scope must be all, messages or summaries; got {scope!r}")
        if mode not in _GREP_MODES:
            # (raw FTS5 syntax is the operator's: search(mode="raw"), `lossless grep --raw`. Its
            # terms are unicode61 words and CJK bigrams, so a Chinese word of three characters or
            # more (颐和园) finds only a run that is exactly it; the published schema never offered it)
            raise ValidationError(f"mode must be one of {', '.join(_GREP_MODES)}; got {mode!r}")
        if sort not in ("relevance", "recency"):
            raise ValidationError(f"sort must be relevance or recency; got {sort!r}")
        if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= GREP_LIMIT_MAX:
            raise ValidationError(f"limit must be an integer from 1 to {GREP_LIMIT_MAX}; got {limit!r}")
        if self.within is not None and not self.within:
            return {"query": query, "count": 0, "hits": []}
        scoped = tuple(sorted(self.within)) if self.within is not None else None
        spec = SearchSpec(
            query=query,
            conversation_ids=(self.conversation_id,) if self.conversation_id is not None else scoped,
            kinds=kinds,  # type: ignore[arg-type]
            roles=(role,) if role else None,
            since=parse_datetime(since, "since") if since is not None else None,
            until=parse_until(until, "until") if until is not None else None,
            mode=mode,  # type: ignore[arg-type]
            sort=sort,  # type: ignore[arg-type]
            limit=limit,
        )
        hits = run_search(self.memory.store, self.memory.recaller, spec)
        return {"query": query, "count": len(hits), "hits": [hit_dict(h) for h in hits]}

    def lcm_describe(self, id: str) -> MessageDescription | SummaryDescription:
        node = self.node(id)
        store = self.memory.store
        if isinstance(node, Message):
            return self._describe_message(node)
        sources: list[SummaryBrief | MessageBrief] = []
        for ref in node.sources:
            if ref.kind == "summary":
                sources.append(_summary_brief(store.get_summary(ref.id)))
            else:
                sources.append(_message_brief(store.get_message(ref.id)))
        return {
            **_summary_brief(node),
            "conversation_id": node.conversation_id,
            "type": node.kind,  # seed 000's node type: leaf, condensed or root
            "message_count": node.message_count,
            "descendant_count": node.descendant_count,
            "source_tokens": node.source_token_count,
            "summarizer": node.summarizer,
            "fallback_level": node.fallback_level,
            "created_at": _time(node.created_at),
            "parent": store.parent_of(node.id),
            "children": sources,
            "metadata": node.metadata,
            "content": node.content,
        }

    def _describe_message(self, node: Message) -> MessageDescription:
        """``lcm_describe`` of a message: with an exploration of its content when large."""
        leaf = self._leaf_for(node)
        importance = score_message(node)
        large = node.token_count > self.large_content_tokens
        content: LargeContent = {}
        if large:
            text, source = _message_body(node)
            exploration = explore(text, max_tokens=self.explore_tokens, counter=self.memory.counter,
                                  hint=self._content_hint(node)).as_dict()
            exploration["stats"].setdefault("tokens", node.token_count)
            size = page_chars(len(text), node.token_count)
            pages = page_count(len(text), size)
            content = {
                "exploration": exploration, "total_chars": len(text), "sha256": text_sha256(text),
                "text_source": source, "page_chars": size, "pages": pages,
                "read": (f"lcm_expand(id={node.id!r}, page=1) … page={pages} ({size:,} characters each), "
                         "or offset=N with max_tokens; slices join to the exact original"),
            }
        return {**_message_brief(node), "conversation_id": node.conversation_id,
                "metadata": node.metadata, "external_id": node.external_id,
                "summarized_in": leaf.id if leaf else None,
                "importance": {"value": importance.value,
                               "reasons": [{"label": r.label, "weight": r.weight, "evidence": r.evidence}
                                           for r in importance.reasons],
                               "explanation": importance.explain()},
                "preview": message_text(node)[:300],
                "large": large, **content}

    def _leaf_for(self, msg: Message) -> Summary | None:
        return self.memory.store.leaf_for(msg.conversation_id, msg.seq)

    @property
    def large_content_tokens(self) -> int:
        """Messages over this many tokens get an exploration in ``lcm_describe``."""
        value: int = getattr(self.memory.config, "large_content_tokens", 25_000)
        return value

    def _content_hint(self, msg: Message) -> str:
        """What names a message's content, for :func:`lossless.context.explore.explore`: its name,
        file-ish metadata, and for a tool result the call's function name and arguments
        (``read_file {"path": "data.csv"}``)."""
        parts: list[str] = [msg.name or ""]
        for key in ("filename", "file", "path", "tool", "tool_name", "content_type", "mime_type"):
            value = msg.metadata.get(key)
            if isinstance(value, str):
                parts.append(value)
        if msg.tool_call_id:
            earlier = self.memory.store.get_messages(msg.conversation_id, max(1, msg.seq - 20), msg.seq - 1)
            for prior in reversed(earlier):
                call = next((c for c in prior.tool_calls if c.get("id") == msg.tool_call_id), None)
                if call is not None:
                    fn = call.get("function") or {}
                    parts += [str(fn.get("name", "")), str(fn.get("arguments", ""))[:2000]]
                    break
        return " ".join(p for p in parts if p)

    def lcm_expand(self, id: str, to: str = "messages", max_tokens: int = 4000,
                   from_seq: int | None = None, offset: int | None = None, max_chars: int | None = None,
                   page: int | None = None) -> ExpandResult | MessageSlice | SummarySlice:
        """A summary's coverage (``to``, ``from_seq``), or one node's own text a slice at a
        time (``offset``, ``max_chars``, ``page``): a message's, or a summary's, which is
        how the rest of a partial item is read (by its id from its ``next_offset``)."""
        if to not in ("messages", "sources"):
            raise ValidationError(f"to must be 'messages' or 'sources'; got {to!r}")
        _check_int(max_tokens, "max_tokens", minimum=1)
        if offset is not None:
            _check_int(offset, "offset")
        if max_chars is not None:
            _check_int(max_chars, "max_chars", minimum=1)
        if page is not None:
            _check_int(page, "page", minimum=1)
        if from_seq is not None:
            _check_int(from_seq, "from_seq", minimum=1)
        node = self.node(id)
        if isinstance(node, Message):
            if to != "messages" or from_seq is not None:
                raise ValidationError(f"{id!r} is a message: read it with offset, max_chars or page "
                                      "(to and from_seq are for summaries)")
            return self._read_message(node, max_tokens=max_tokens, offset=offset or 0, max_chars=max_chars,
                                      page=page)
        if offset is not None or max_chars is not None or page is not None:
            if to != "messages" or from_seq is not None:
                raise ValidationError(f"{id!r}: offset, max_chars and page read the summary's own text; to and "
                                      "from_seq page through what it covers: give one or the other")
            return self._read_summary(node, max_tokens=max_tokens, offset=offset or 0, max_chars=max_chars,
                                      page=page)
        store = self.memory.store
        items: list[ExpandedMessage | PartialMessage | ExpandedSummary | PartialSummary] = []
        spent = 0
        truncated = False
        next_seq: int | None = None
        if to == "sources" and node.depth > 0:
            for ref in node.sources:
                child = store.get_summary(ref.id)
                if from_seq is not None and child.last_seq < from_seq:
                    continue
                if spent + child.token_count > max_tokens:
                    if not items:  # the first alone is over: a slice of it, never more than asked
                        first, spent = self._first_slice(child.content, max_tokens)
                        piece: PartialSummary = {**_summary_brief(child), **first}
                        items.append(piece)
                        following = child.last_seq + 1
                    else:
                        following = child.first_seq
                    truncated, next_seq = True, following if following <= node.last_seq else None
                    break
                whole: ExpandedSummary = {**_summary_brief(child), "content": child.content}
                items.append(whole)
                spent += child.token_count
        else:
            # past the summary's end: nothing to read (bounded, so a huge from_seq never reaches SQL)
            start = max(node.first_seq, min(from_seq or node.first_seq, node.last_seq + 1))
            for msg in store.get_messages(node.conversation_id, start, node.last_seq):
                if spent + msg.token_count > max_tokens:
                    if not items:  # the first alone is over: a slice of it, never more than asked
                        first, spent = self._first_slice(_message_body(msg)[0], max_tokens)
                        cut: PartialMessage = {**_message_brief(msg), "header": message_header(msg, self.memory.config.zone), **first}
                        items.append(cut)
                        following = msg.seq + 1
                    else:
                        following = msg.seq
                    truncated, next_seq = True, following if following <= node.last_seq else None
                    break
                tools: ToolParts = {}
                if msg.tool_calls:
                    tools["tool_calls"] = list(msg.tool_calls)
                if msg.tool_call_id:
                    tools["tool_call_id"] = msg.tool_call_id
                items.append({**_message_brief(msg), "header": message_header(msg, self.memory.config.zone), "content": msg.content, **tools})
                spent += msg.token_count
        return {"id": node.id, "to": "sources" if to == "sources" else "messages", "first_seq": node.first_seq, "last_seq": node.last_seq, "tokens": spent,
                "truncated": truncated, "next_from_seq": next_seq, "items": items}

    def _first_slice(self, text: str, max_tokens: int) -> tuple[FirstSlice, int]:
        """For an item whose text alone is over ``max_tokens``: its first slice within
        them, marked ``partial`` with where the rest starts (read it by the item's own id
        with ``offset=next_offset``), and the tokens the slice holds."""
        end, tokens = token_slice(text, 0, max_tokens, self.memory.counter)
        return {"content": text[:end], "partial": True, "next_offset": end if end < len(text) else None,
                "total_chars": len(text)}, tokens

    def _slice(self, text: str, token_count: int, ident: str, *, max_tokens: int, offset: int,
               max_chars: int | None, page: int | None) -> _Slice:
        """Where one exact slice of ``text`` (the stored text of node ``ident``, of
        ``token_count`` tokens) lies: a page, ``max_chars`` characters, or about
        ``max_tokens`` tokens, from ``offset``."""
        total = len(text)
        size = max_chars if max_chars is not None else page_chars(total, token_count)
        pages = page_count(total, size)
        tokens: int | None = None
        if page is not None:
            if offset:
                raise ValidationError("give page or offset, not both")
            if page > pages:
                raise ValidationError(f"page {page} is past the last page ({pages}) of {ident!r}")
            start = (page - 1) * size
            end = min(total, start + size)
        else:
            if offset > total:
                raise ValidationError(f"offset {offset:,} is past the end of {ident!r} ({total:,} characters)")
            start = offset
            if max_chars is not None:
                end = min(total, start + max_chars)
            else:
                end, tokens = token_slice(text, start, max_tokens, self.memory.counter)
        return _Slice(start, end, size, pages, tokens)

    def _read_message(self, msg: Message, *, max_tokens: int, offset: int, max_chars: int | None,
                      page: int | None) -> MessageSlice:
        """One exact slice of a message's text."""
        text, source = _message_body(msg)
        cut = self._slice(text, msg.token_count, msg.id, max_tokens=max_tokens, offset=offset,
                          max_chars=max_chars, page=page)
        extra: _SliceExtra = {}  # (before the content, which comes last)
        if cut.tokens is not None:
            extra["tokens"] = cut.tokens
        if msg.tool_call_id:
            extra["tool_call_id"] = msg.tool_call_id
        return {
            "id": msg.id, "kind": "message", "conversation_id": msg.conversation_id, "seq": msg.seq,
            "role": msg.role, "header": message_header(msg, self.memory.config.zone), "text_source": source,
            "offset": cut.start, "next_offset": cut.end if cut.end < len(text) else None,
            "chars": cut.end - cut.start, "total_chars": len(text), "page_chars": cut.size, "pages": cut.pages,
            "page": page,
            "sha256": text_sha256(text),
            **extra,
            "content": text[cut.start:cut.end],
        }

    def _read_summary(self, node: Summary, *, max_tokens: int, offset: int, max_chars: int | None,
                      page: int | None) -> SummarySlice:
        """One exact slice of a summary's own text (the rest of a partial source)."""
        text = node.content
        cut = self._slice(text, node.token_count, node.id, max_tokens=max_tokens, offset=offset,
                          max_chars=max_chars, page=page)
        extra: _TokenCount = {}  # (before the content, which comes last)
        if cut.tokens is not None:
            extra["tokens"] = cut.tokens
        return {
            "id": node.id, "kind": "summary", "conversation_id": node.conversation_id, "depth": node.depth,
            "first_seq": node.first_seq, "last_seq": node.last_seq,
            "offset": cut.start, "next_offset": cut.end if cut.end < len(text) else None,
            "chars": cut.end - cut.start, "total_chars": len(text), "page_chars": cut.size, "pages": cut.pages,
            "page": page,
            "sha256": text_sha256(text),
            **extra,
            "content": text[cut.start:cut.end],
        }

    # -- tool calling -------------------------------------------------------------------

    def call(self, name: str, arguments: Mapping[str, Any] | str | None) -> ToolResult:
        """Run one tool by name with JSON arguments; raises on bad input."""
        if name not in TOOL_NAMES:
            raise ValidationError(f"unknown tool {name!r} (known: {', '.join(TOOL_NAMES)})")
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except json.JSONDecodeError as exc:
                raise ValidationError(f"tool arguments are not valid JSON: {exc}") from None
        if arguments is not None and not isinstance(arguments, Mapping):
            raise ValidationError(f"{name} arguments must be a JSON object, got {type(arguments).__name__}")
        args = dict(arguments or {})
        allowed = set(_SPECS[name]["parameters"]["properties"])
        unknown = sorted(set(args) - allowed)
        if unknown:
            raise ValidationError(f"{name} got unknown argument(s): {', '.join(unknown)}")
        missing = [k for k in _SPECS[name]["parameters"]["required"] if k not in args]
        if missing:
            raise ValidationError(f"{name} needs argument(s): {', '.join(missing)}")
        result: ToolResult = getattr(self, name)(**args)
        return result

    def _wait_for_compaction(self) -> None:
        """While this conversation is being compacted, wait (``tool_wait_seconds``), then
        refuse with an error the model can read and retry on."""
        if self.conversation_id is None:
            return
        if not wait_while_compacting(self.memory, self.conversation_id):
            raise CompactionBusyError(
                f"conversation {self.conversation_id!r} is being compacted; try the tool call again shortly"
            )

    def dispatch(self, tool_call: Mapping[str, Any]) -> dict[str, Any]:
        """Answer a model's tool call with the tool-result message for its API.

        An OpenAI tool call (``{"id", "function": {"name", "arguments"}}``) gets a
        ``{"role": "tool", "tool_call_id", "content"}`` message; an Anthropic
        ``tool_use`` block gets a ``tool_result`` block. Errors become error results the
        model can read, never exceptions.
        """
        if not isinstance(tool_call, Mapping):
            raise ValidationError(f"a tool call must be an object, got {type(tool_call).__name__}")
        anthropic = tool_call.get("type") == "tool_use"
        if anthropic:
            call_id, name, args = tool_call.get("id", ""), tool_call.get("name", ""), tool_call.get("input")
        else:
            fn = tool_call.get("function") or {}
            if not isinstance(fn, Mapping):  # answered as an unknown tool, like a missing name
                fn = {}
            call_id, name, args = tool_call.get("id", ""), fn.get("name", ""), fn.get("arguments")
        error = False
        try:
            self._wait_for_compaction()
            payload: ToolResult | dict[str, str] = self.call(str(name), args)
        except LosslessError as exc:
            payload, error = {"error": str(exc)}, True
        content = json.dumps(payload, ensure_ascii=False, default=str)
        if anthropic:
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id, "content": content}
            if error:
                block["is_error"] = True
            return block
        return {"role": "tool", "tool_call_id": call_id, "content": content}
