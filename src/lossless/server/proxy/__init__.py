"""The context proxy: ``POST /v1/chat/completions`` (OpenAI) and ``POST /v1/messages``
(Anthropic) in front of a provider: the shared flow in :mod:`~lossless.server.proxy.base`, one
module per wire format (:mod:`~lossless.server.proxy.openai_wire`,
:mod:`~lossless.server.proxy.anthropic_wire`), and what both do with prompt-cache marks
(:mod:`~lossless.server.proxy.cache_marks`).

A client keeps sending its whole chat, as to the provider itself, naming the conversation
in ``X-Lossless-Conversation`` (UTF-8 or percent-encoded:
:mod:`~lossless.server.proxy.conversation_header`; or the OpenAI request's ``user`` field,
or Anthropic's ``metadata.user_id``). For each request lossless

1. stores the messages it has not seen yet (:mod:`lossless.server.chat_match`; one request
   of a conversation at a time, :mod:`~lossless.server.proxy.turn_locks`), which may
   compact older history;
2. assembles the context for the model's window (``lossless.core.models.context_window``, less
   the reply's ``max_tokens`` and the tool schemas) with the last user message as the
   recall query, in the cache-stable layout;
3. forwards the request with ``messages`` replaced by that context, using the server's
   upstream key (the client's key is lossless's own);
4. returns the provider's answer unchanged — JSON, or the SSE stream relayed chunk by
   chunk — and stores the assistant's reply (tool calls intact; a stream once it is
   complete).

When the provider says the context is too long, the conversation is compacted in
emergency mode and the request retried with a smaller budget (``max_compactions`` times),
then once more with the largest tool outputs cut; still too long is a 422
``context_overflow``. Other provider errors are passed through as they came; an
unreachable provider is a 502.
"""

from __future__ import annotations

from starlette.routing import Route

from lossless.server.proxy.anthropic_wire import AnthropicDialect
from lossless.server.proxy.base import (
    CONVERSATION_HEADER,
    Dialect,
    ProxyTurn,
    StreamReply,
    UpstreamError,
    default_reserve,
    proxy,
    proxy_route,
)
from lossless.server.proxy.openai_wire import OpenAIDialect

__all__ = [
    "CONVERSATION_HEADER",
    "AnthropicDialect",
    "Dialect",
    "OpenAIDialect",
    "ProxyTurn",
    "StreamReply",
    "UpstreamError",
    "default_reserve",
    "proxy",
    "proxy_route",
    "routes",
]


def routes() -> list[Route]:
    """The proxy's two endpoints, one per wire format."""
    return [proxy_route("/v1/chat/completions", OpenAIDialect()), proxy_route("/v1/messages", AnthropicDialect())]
