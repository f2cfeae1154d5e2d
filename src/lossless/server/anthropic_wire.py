"""Moved to :mod:`lossless.server.proxy.anthropic_wire` (the proxy is a package now: a
shared base and one module per wire format); this name still imports it."""

from lossless.server.proxy.anthropic_wire import AnthropicDialect, anthropic_messages, chat_messages

__all__ = ["AnthropicDialect", "anthropic_messages", "chat_messages"]
