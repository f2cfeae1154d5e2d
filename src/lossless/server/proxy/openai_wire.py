"""OpenAI's Chat Completions API on the proxy (``POST /v1/chat/completions``).

lossless stores OpenAI-shaped messages, so requests and replies pass through unconverted;
this module only says where the conversation is named, how much room the reply asks for,
which headers go upstream, and how a stored reply is answered again.

Prompt-cache marks (``cache_control`` on content parts, which OpenRouter and other gateways
pass to Anthropic) are handled as on the Anthropic route (:mod:`.cache_marks`): not stored,
the history rebuilt from the store sent without them, the client's own marked messages that
the context shows unchanged sent as the client wrote them (:func:`_as_sent`).
"""

from __future__ import annotations

import json
from typing import Any, cast

from starlette.requests import Request

from lossless.core.errors import ValidationError
from lossless.core.render import content_text
from lossless.core.types import AssembledContext, ChatMessage, Message
from lossless.providers.openai_format import openai_messages
from lossless.server.chat_match import chat_hash, storable_labelled
from lossless.server.errors import error_body
from lossless.server.proxy.base import default_reserve
from lossless.server.proxy.cache_marks import client_tail, marks, owners, without_marks
from lossless.server.proxy.conversation_header import requested_conversation
from lossless.server.sse import OpenAIStreamReply
from lossless.server.state import Upstream

__all__ = ["OpenAIDialect"]


def _reply_parts(message: Message) -> tuple[str, list[dict[str, Any]]]:
    """A stored reply's text and tool calls."""
    text = message.content if isinstance(message.content, str) else content_text(message.content)
    return text or "", [dict(c) for c in message.tool_calls]


def _as_sent(asked: list[Any], context: list[ChatMessage]) -> list[ChatMessage]:
    """The context's messages without ``cache_control`` marks, but for the client's marked
    messages that it shows unchanged, which go as the client wrote them: its newest ones
    that the context ends with (:func:`~lossless.server.proxy.cache_marks.client_tail`), and
    its system prompt. Rebuilt from the store, the history carried every mark a request had
    put on it: a client moving its breakpoint to its newest message each turn sent one more
    mark each turn, and past Anthropic's four every request was a 400. Messages without
    marks are the context's, as before."""
    if not marks(asked):  # (most requests) nothing of the client's to keep: no second pass over them
        return without_marks(context)
    incoming, labels = storable_labelled(asked)
    tail = client_tail(incoming, labels, context)
    cut = len(context) - len(tail)
    start = tail[0] if tail else len(asked)
    systems = {chat_hash(m): asked[o] for m, o in zip(incoming, owners(labels), strict=True)
               if m.get("role") == "system" and o < start and marks(asked[o])}
    out = without_marks(context)
    for i, message in enumerate(out[:cut]):
        sent = systems.pop(chat_hash(message), None) if message.get("role") == "system" else None
        if sent is not None:  # once: its marks are sent once
            out[i] = cast(ChatMessage, sent)
    for i, owner in enumerate(tail, cut):
        if marks(asked[owner]):
            out[i] = cast(ChatMessage, asked[owner])
    return out


class OpenAIDialect:
    path = "/chat/completions"
    conversation_field = "user"

    def conversation(self, request: Request, body: dict[str, Any]) -> str | None:
        return requested_conversation(request, body.get("user"), self.conversation_field)

    def incoming(self, body: dict[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
        messages, labels = storable_labelled(body.get("messages"))
        if not messages:  # else sent on as an empty list, for the provider to refuse in its own words
            raise ValidationError("'messages' holds nothing to store or send: every message is an assistant turn "
                                  "with neither text nor tool calls")
        return messages, labels

    def outgoing(self, body: dict[str, Any], ctx: AssembledContext) -> dict[str, Any]:
        return {**body, "messages": openai_messages(_as_sent(body["messages"], ctx.messages))}

    def reserve(self, body: dict[str, Any], window: int) -> int:
        return default_reserve(body.get("max_completion_tokens", body.get("max_tokens")), window)

    def headers(self, request: Request, upstream: Upstream) -> dict[str, str]:
        out = {"content-type": "application/json"}
        if upstream.api_key:
            out["authorization"] = f"Bearer {upstream.api_key}"
        for name in ("openai-organization", "openai-project"):
            if request.headers.get(name):
                out[name] = request.headers[name]
        return out

    def reply(self, data: Any) -> dict[str, Any] | None:
        """The assistant message of a chat completion; ValueError when it is not one."""
        choices = data.get("choices") if isinstance(data, dict) else None
        if not isinstance(choices, list):
            raise ValueError("no 'choices' list")
        message = choices[0].get("message") if choices and isinstance(choices[0], dict) else None
        if not isinstance(message, dict):
            return None
        content = message.get("content")
        if content is not None and not isinstance(content, str | list):
            raise ValueError(f"message.content is a {type(content).__name__}")
        out: dict[str, Any] = {"role": "assistant", "content": content or ""}
        calls = []
        for i, c in enumerate(message.get("tool_calls") or []):
            function = c.get("function") if isinstance(c, dict) else None
            if not isinstance(function, dict) or not isinstance(function.get("name"), str):
                raise ValueError(f"tool_calls[{i}].function is not an object with a name")
            arguments = function.get("arguments")
            calls.append({"id": str(c.get("id") or f"call_{i}"), "type": "function",
                          "function": {"name": function["name"],
                                       "arguments": arguments if isinstance(arguments, str) else "{}"}})
        if calls:
            out["tool_calls"] = calls
        return out if out["content"] or calls else None

    def stream_reply(self) -> OpenAIStreamReply:
        return OpenAIStreamReply()

    def error(self, type_: str, message: str) -> dict[str, Any]:
        return error_body(type_, message)

    def replay_body(self, message: Message, model: str) -> dict[str, Any]:
        """A stored reply as a chat completion (usage: what lossless counted of it)."""
        text, calls = _reply_parts(message)
        reply: dict[str, Any] = {"role": "assistant", "content": text or None}
        if calls:
            reply["tool_calls"] = calls
        return {"id": f"chatcmpl-{message.id}", "object": "chat.completion",
                "created": int(message.created_at.timestamp()), "model": model,
                "choices": [{"index": 0, "message": reply, "logprobs": None,
                             "finish_reason": "tool_calls" if calls else "stop"}],
                "usage": {"prompt_tokens": 0, "completion_tokens": message.token_count,
                          "total_tokens": message.token_count}}

    def replay_events(self, message: Message, model: str, body: dict[str, Any]) -> list[bytes]:
        """The same reply as a stream of chat.completion.chunk events; with
        ``stream_options.include_usage``, the usage chunk (``choices`` empty) before
        ``[DONE]``, as the provider sends it: a client reading the last chunk's usage
        got ``None`` on a replayed answer."""
        text, calls = _reply_parts(message)
        base = {"id": f"chatcmpl-{message.id}", "object": "chat.completion.chunk",
                "created": int(message.created_at.timestamp()), "model": model}
        deltas: list[tuple[dict[str, Any], str | None]] = [({"role": "assistant", "content": text}, None)]
        if calls:
            deltas.append(({"tool_calls": [{"index": i, **c} for i, c in enumerate(calls)]}, None))
        deltas.append(({}, "tool_calls" if calls else "stop"))
        events = [{**base, "choices": [{"index": 0, "delta": d, "finish_reason": f}]} for d, f in deltas]
        options = body.get("stream_options")
        if isinstance(options, dict) and options.get("include_usage") is True:
            usage = self.replay_body(message, model)["usage"]
            events = [{**e, "usage": None} for e in events] + [{**base, "choices": [], "usage": usage}]
        return [f"data: {json.dumps(e, ensure_ascii=False)}\n\n".encode() for e in events] + [b"data: [DONE]\n\n"]

    def streamed(self, acc: Any) -> dict[str, Any] | None:
        message: dict[str, Any] = acc.message()
        return message if message.get("content") or message.get("tool_calls") else None
