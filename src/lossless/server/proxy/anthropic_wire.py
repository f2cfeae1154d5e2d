"""Anthropic's Messages API on the proxy (``POST /v1/messages``).

lossless stores OpenAI-shaped messages, so a request is converted on the way in — the
top-level ``system`` becomes a system message, ``tool_use`` blocks become tool calls
(arguments as JSON text), ``tool_result`` blocks become tool messages, text blocks join
into the message text, other blocks (images, documents) are kept as content parts,
``thinking`` blocks are not stored — and the assembled context is converted back on the
way out: system messages into ``system``, tool calls into ``tool_use`` blocks, tool
messages into ``tool_result`` blocks of a user turn. The same conversion applied to the
stored reply and to the reply the client sends back makes them match.

The client's newest messages that the context ends with unchanged go to the provider as
the client wrote them (:func:`_as_sent_tail`): their ``cache_control`` marks (Anthropic's
prompt-cache breakpoints), a tool result's ``is_error`` and blocks, their thinking. Marks
are not stored (a transport hint, not what a message says); the history the context shows
in place of the client's carries none.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request

from lossless.core.errors import ValidationError
from lossless.core.render import content_text
from lossless.core.types import AssembledContext, ChatMessage, Message
from lossless.providers.anthropic_format import anthropic_messages, block_text, user_first
from lossless.server.chat_match import storable_labelled
from lossless.server.errors import anthropic_error_body
from lossless.server.proxy.base import default_reserve
from lossless.server.proxy.cache_marks import MAX_MARKS, client_tail, marks, without_marks
from lossless.server.proxy.conversation_header import requested_conversation
from lossless.server.sse import AnthropicStreamReply
from lossless.server.state import Upstream

__all__ = ["AnthropicDialect", "anthropic_messages", "chat_messages"]

_SKIP = frozenset({"thinking", "redacted_thinking"})
_text = block_text


def _assistant(blocks: list[Any]) -> dict[str, Any] | None:
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for block in blocks:
        if not isinstance(block, dict) or block.get("type") in _SKIP:
            continue
        if block.get("type") == "text":
            texts.append(str(block.get("text", "")))
        elif block.get("type") == "tool_use":
            calls.append({"id": str(block.get("id") or f"toolu_{len(calls)}"), "type": "function",
                          "function": {"name": str(block.get("name", "")),
                                       "arguments": json.dumps(block.get("input") or {}, ensure_ascii=False,
                                                               sort_keys=True)}})
    out: dict[str, Any] = {"role": "assistant", "content": "".join(texts)}
    if calls:
        out["tool_calls"] = calls
    return out if texts or calls else None


def _check_system(system: Any) -> None:
    """A ValidationError naming what in ``system`` is not Anthropic's: a string, or a list
    of text blocks. Anything else was dropped without a word (``"system": 5``, a block of
    another type, a text block whose text is not a string): the system prompt the client
    meant was neither stored nor sent, and the provider answered without it."""
    if system is None or isinstance(system, str):
        return
    if not isinstance(system, list):
        raise ValidationError(f"'system' must be a string or a list of text blocks, got {type(system).__name__}")
    for j, block in enumerate(system):
        if not isinstance(block, dict) or block.get("type") != "text" or not isinstance(block.get("text"), str):
            raise ValidationError(f"system[{j}] must be a text block ({{\"type\": \"text\", \"text\": \"…\"}})")


def _as_sent(asked: Any, system: str) -> Any:
    """The context's system prompt, as the client's text blocks when it is what they say
    (checked by :func:`_check_system`): a block's ``cache_control`` (Anthropic's prompt
    caching) was dropped with the blocks, so every turn paid for the whole prompt again."""
    return asked if isinstance(asked, list) and _text(asked) == system else system


def _with_thinking(turns: list[dict[str, Any]], asked: Any) -> list[dict[str, Any]]:
    """``turns`` with the thinking blocks of the client's last assistant message put back at
    the head of the same turn (found by its tool calls). They are not stored, and a tool
    loop with extended thinking went out without them: the API refuses a final assistant
    turn that calls tools without starting with its thinking, so every such request was a 400."""
    last = next((m for m in reversed(asked) if isinstance(m, dict) and m.get("role") == "assistant"), None) \
        if isinstance(asked, list) else None
    blocks = last.get("content") if last is not None else None
    if not isinstance(blocks, list):
        return turns
    thinking = [b for b in blocks if isinstance(b, dict) and b.get("type") in _SKIP]
    calls = [b.get("id") for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"]
    turn = next((t for t in reversed(turns) if t["role"] == "assistant"), None)
    if not thinking or not calls or turn is None:
        return turns
    if [b.get("id") for b in turn["content"] if b.get("type") == "tool_use"] != calls:
        return turns  # the context's last assistant turn is not the client's (it cannot be, but never mix them)
    turn["content"] = [*thinking, *turn["content"]]
    return turns


def _as_sent_tail(system: Any, asked: Any, context: list[ChatMessage]) -> tuple[list[dict[str, Any]], int]:
    """The client's newest messages that ``context`` ends with unchanged
    (:func:`~lossless.server.proxy.cache_marks.client_tail`), as the client wrote them, and
    how many of the context's messages they are. Rebuilt from the store, the newest turn
    lost its ``cache_control`` marks: the prompt cache the client asked for was never
    written, and every turn paid for its whole prompt."""
    incoming, labels = chat_messages(system, asked)
    tail = client_tail(incoming, labels, context)
    return (list(asked[tail[0]:]) if tail else []), len(tail)


def _stable_mark(asked: Any, head: list[ChatMessage], stable: int, count: int) -> list[dict[str, Any]] | None:
    """The context's system prompt as text blocks, the last one of the cache-stable prefix
    (the client's system prompt and the summaries; :mod:`lossless.context.stable`) marked
    for caching; the client's own system blocks as it wrote them. None when there is no
    such block, it is marked already, or the request has the API's four marks.

    The block about the current question comes after it, also in ``system``, and differs
    from turn to turn: a client's breakpoints further on are written again every turn,
    never read; this one is read until the next compaction."""
    blocks: list[dict[str, Any]] = []
    last = -1
    own = isinstance(asked, list)
    for i, message in enumerate(head):
        text = _text(message.get("content")) if message.get("role") == "system" else ""
        if not text:
            continue
        if own and text == _text(asked):
            blocks += [dict(b) for b in asked]
            own = False  # once: its marks are counted once
        else:
            blocks.append({"type": "text", "text": ("\n\n" if blocks else "") + text})
        last = len(blocks) - 1 if i < stable else last
    if last < 0 or "cache_control" in blocks[last] or count >= MAX_MARKS:
        return None
    blocks[last] = {**blocks[last], "cache_control": {"type": "ephemeral"}}
    return blocks


def _joined(turns: list[dict[str, Any]], tail: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The context's turns, then the client's; two turns of one role at the seam merge, as
    the API would merge them."""
    if not tail:
        return turns
    if not turns or turns[-1]["role"] != tail[0].get("role"):
        return [*turns, *tail]
    seam = tail[0].get("content")
    blocks = [{"type": "text", "text": seam}] if isinstance(seam, str) else list(seam or [])
    return [*turns[:-1], {"role": turns[-1]["role"], "content": [*turns[-1]["content"], *blocks]}, *tail[1:]]


def chat_messages(system: Any, messages: Any) -> tuple[list[dict[str, Any]], list[str]]:
    """An Anthropic request's ``system`` and ``messages`` as OpenAI-style messages, and
    where the client wrote each (``system``, ``messages[2]``, ``messages[2].content[0]``
    for a tool result), for errors to name."""
    if not isinstance(messages, list) or not messages:
        raise ValidationError("'messages' must be a non-empty list")
    out: list[dict[str, Any]] = []
    labels: list[str] = []
    _check_system(system)
    system_text = _text(system)
    if system_text:
        out.append({"role": "system", "content": system_text})
        labels.append("system")
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
            raise ValidationError(f"messages[{i}] must be an object with role user or assistant")
        content = message.get("content")
        for j, block in enumerate(content if isinstance(content, list) else ()):
            if not isinstance(block, dict):  # skipped, it would be lost: stored nowhere, sent nowhere
                raise ValidationError(f"messages[{i}].content[{j}] must be a content block object such as "
                                      f'{{"type": "text", "text": "…"}}, got {type(block).__name__}')
        if message["role"] == "assistant":
            reply = _assistant(content if isinstance(content, list) else [{"type": "text", "text": content or ""}])
            if reply is not None:
                out.append(reply)
                labels.append(f"messages[{i}]")
            continue
        if isinstance(content, str):
            out.append({"role": "user", "content": content})
            labels.append(f"messages[{i}]")
            continue
        if not isinstance(content, list):
            raise ValidationError(f"messages[{i}].content must be a string or a list of blocks")
        parts: list[dict[str, Any]] = []
        for j, block in enumerate(content):
            if block.get("type") in _SKIP:
                continue
            if block.get("type") == "tool_result":
                result = block.get("content")
                out.append({"role": "tool", "tool_call_id": str(block.get("tool_use_id", "")),
                            "content": result if isinstance(result, str) else _text(result)
                            or json.dumps(result, ensure_ascii=False)})
                labels.append(f"messages[{i}].content[{j}]")
            else:
                parts.append(block)  # stored without its cache_control mark (storable_labelled)
        if parts and all(p.get("type") == "text" for p in parts):
            out.append({"role": "user", "content": "\n".join(str(p.get("text", "")) for p in parts)})
            labels.append(f"messages[{i}]")
        elif parts:
            out.append({"role": "user", "content": parts})
            labels.append(f"messages[{i}]")
    if not out:  # (storable_labelled would say "must be a non-empty list" of a list that was not)
        raise ValidationError("'messages' holds nothing to store or send: its turns hold only thinking blocks "
                              "or replies with neither text nor tool calls")
    return storable_labelled(out, labels)


class AnthropicDialect:
    path = "/messages"
    conversation_field = "metadata.user_id"

    def conversation(self, request: Request, body: dict[str, Any]) -> str | None:
        meta = body.get("metadata")
        return requested_conversation(request, meta.get("user_id") if isinstance(meta, dict) else None,
                                      self.conversation_field)

    def incoming(self, body: dict[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
        return chat_messages(body.get("system"), body.get("messages"))

    def outgoing(self, body: dict[str, Any], ctx: AssembledContext) -> dict[str, Any]:
        messages, asked = ctx.messages, body.get("messages")
        tail, shown = _as_sent_tail(body.get("system"), asked, messages)
        head = messages[:len(messages) - shown]
        system, turns = anthropic_messages(head)
        turns = without_marks(turns)
        if not any(m.get("role") == "assistant" for m in tail):  # else the client's last one is as it sent it
            turns = _with_thinking(turns, asked)
        out = {k: v for k, v in body.items() if k != "system"}
        out["messages"] = user_first(_joined(turns, tail))
        if system:
            out["system"] = _as_sent(body.get("system"), system)
            if marks(body):  # the client uses prompt caching
                out["system"] = _stable_mark(body.get("system"), head, ctx.stable_prefix, marks(out)) \
                    or out["system"]
        return out

    def reserve(self, body: dict[str, Any], window: int) -> int:
        return default_reserve(body.get("max_tokens"), window)

    def headers(self, request: Request, upstream: Upstream) -> dict[str, str]:
        out = {"content-type": "application/json",
               "anthropic-version": request.headers.get("anthropic-version", "2023-06-01")}
        if request.headers.get("anthropic-beta"):
            out["anthropic-beta"] = request.headers["anthropic-beta"]
        if upstream.api_key:
            out["x-api-key"] = upstream.api_key
        return out

    def reply(self, data: Any) -> dict[str, Any] | None:
        """The assistant message of an Anthropic answer; ValueError when it is not one."""
        content = data.get("content") if isinstance(data, dict) else None
        if not isinstance(content, list):
            raise ValueError("no 'content' list")
        return _assistant(content)

    def stream_reply(self) -> AnthropicStreamReply:
        return AnthropicStreamReply()

    def streamed(self, acc: Any) -> dict[str, Any] | None:
        return _assistant(acc.content())

    def error(self, type_: str, message: str) -> dict[str, Any]:
        return anthropic_error_body(type_, message)

    def replay_body(self, message: Message, model: str) -> dict[str, Any]:
        """A stored reply as an Anthropic message (usage: what lossless counted of it)."""
        blocks = _blocks(message)
        return {"id": f"msg_{message.id}", "type": "message", "role": "assistant", "model": model,
                "content": blocks, "stop_sequence": None,
                "stop_reason": "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn",
                "usage": {"input_tokens": 0, "output_tokens": message.token_count}}

    def replay_events(self, message: Message, model: str, body: dict[str, Any]) -> list[bytes]:
        """The same reply as Anthropic's stream of events (``body``, the request, asks for nothing more here)."""
        reply = self.replay_body(message, model)
        events: list[dict[str, Any]] = [{"type": "message_start", "message": {
            **reply, "content": [], "stop_reason": None, "usage": {"input_tokens": 0, "output_tokens": 0}}}]
        for i, block in enumerate(reply["content"]):
            if block["type"] == "text":
                events += [{"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}},
                           {"type": "content_block_delta", "index": i,
                            "delta": {"type": "text_delta", "text": block["text"]}}]
            else:
                events += [{"type": "content_block_start", "index": i,
                            "content_block": {**block, "input": {}}},
                           {"type": "content_block_delta", "index": i,
                            "delta": {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}}]
            events.append({"type": "content_block_stop", "index": i})
        events += [{"type": "message_delta", "delta": {"stop_reason": reply["stop_reason"], "stop_sequence": None},
                    "usage": {"output_tokens": message.token_count}},
                   {"type": "message_stop"}]
        return [f"event: {e['type']}\ndata: {json.dumps(e, ensure_ascii=False)}\n\n".encode() for e in events]


def _blocks(message: Message) -> list[dict[str, Any]]:
    text = message.content if isinstance(message.content, str) else content_text(message.content)
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    for call in message.tool_calls:
        function = call.get("function") or {}
        try:
            arguments = json.loads(function.get("arguments") or "{}")
        except ValueError:
            arguments = {"arguments": function.get("arguments")}
        blocks.append({"type": "tool_use", "id": call.get("id"), "name": function.get("name"), "input": arguments})
    return blocks
