"""lossless as the long-term memory block of LlamaIndex's ``Memory``.

``llama_index.core.memory.Memory`` keeps a short-term FIFO of chat messages; when it
grows past its token limit the oldest messages are flushed to its memory blocks, and every
``get`` asks each block for content to put in front of the model. :class:`LosslessMemoryBlock`
stores what is flushed in a lossless conversation (verbatim, then condensed into the
summary DAG as it grows) and answers ``get`` with lossless's assembled context for the
latest message: the summaries, the newest flushed messages, and older messages recalled
for that question, within ``budget_tokens``::

    import lossless
    from llama_index.core.memory import Memory
    from lossless.integrations.llamaindex import LosslessMemoryBlock

    mem = lossless.open("agent.db")
    memory = Memory.from_defaults(
        session_id="maya",
        token_limit=8000,
        memory_blocks=[LosslessMemoryBlock(memory=mem, conversation_id="maya")],
    )

Needs ``pip install 'lossless[llamaindex]'`` (llama-index-core).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from lossless.core.errors import MissingDependencyError
from lossless.core.render import chat_message_text
from lossless.core.types import ChatMessage as LosslessChat
from lossless.engine import Memory as LosslessMemory

try:
    from llama_index.core.base.llms.types import ChatMessage, ImageBlock, TextBlock, ToolCallBlock
    from llama_index.core.bridge.pydantic import Field, PrivateAttr
    from llama_index.core.memory.memory import BaseMemoryBlock
except ImportError as exc:  # pragma: no cover - the extra is installed in the test environment
    raise MissingDependencyError(
        "lossless.integrations.llamaindex needs llama-index-core: pip install 'lossless[llamaindex]'"
    ) from exc

__all__ = ["LosslessMemoryBlock", "from_llama_message", "render_context"]

_ROLES = {"developer": "system", "chatbot": "assistant", "model": "assistant", "function": "tool"}


def from_llama_message(message: ChatMessage) -> dict[str, Any] | None:
    """A LlamaIndex chat message as a lossless message dict (None: nothing to store)."""
    role = _ROLES.get(message.role.value, message.role.value)
    kwargs = message.additional_kwargs or {}
    parts: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    for block in message.blocks:
        if isinstance(block, TextBlock):
            parts.append({"type": "text", "text": block.text})
        elif isinstance(block, ImageBlock) and block.url is not None:
            parts.append({"type": "image_url", "image_url": {"url": str(block.url)}})
        elif isinstance(block, ToolCallBlock):
            args = block.tool_kwargs if isinstance(block.tool_kwargs, str) else json.dumps(block.tool_kwargs, ensure_ascii=False)
            calls.append({"id": block.tool_call_id or f"call_{len(calls)}", "type": "function",
                          "function": {"name": block.tool_name, "arguments": args}})
    for call in kwargs.get("tool_calls") or []:  # OpenAI-style calls some LLM classes keep here
        data = call.model_dump() if hasattr(call, "model_dump") else call
        if isinstance(data, dict) and isinstance(data.get("function"), dict):
            calls.append({"id": data.get("id"), "type": "function", "function": dict(data["function"])})
    text_only = all(p["type"] == "text" for p in parts)
    content: Any = "\n".join(p["text"] for p in parts) if text_only else parts
    if not content and not calls:
        return None
    out: dict[str, Any] = {"role": role, "content": content or None}
    metadata = {"llama_index_session": kwargs["session_id"]} if isinstance(kwargs.get("session_id"), str) else {}
    if calls and role == "assistant":
        out["tool_calls"] = calls
    if role == "tool":
        call_id = kwargs.get("tool_call_id")
        if isinstance(call_id, str) and call_id:
            out["tool_call_id"] = call_id
        else:  # a tool result without its call's id cannot be a tool message: kept, labelled
            out["role"] = "system"
            metadata["llama_index_role"] = "tool"
    if isinstance(kwargs.get("name"), str):
        out["name"] = kwargs["name"]
    if metadata:
        out["metadata"] = metadata
    return out


def render_context(messages: list[LosslessChat]) -> str:
    """An assembled context as text for the memory template: one block per message."""
    return "\n\n".join(f"[{m['role']}] {chat_message_text(m)}" for m in messages)


class LosslessMemoryBlock(BaseMemoryBlock[str]):
    """A LlamaIndex memory block backed by a lossless conversation.

    ``put`` (messages flushed from the short-term queue) appends them to the conversation
    (compacting when a trigger fires); ``get`` returns lossless's assembled context for
    the latest message as text, at most ``budget_tokens`` tokens. ``priority`` 0 (the
    default) means LlamaIndex never truncates it; with a higher priority, truncation asks
    lossless for a smaller assembly instead of cutting text.
    """

    name: str = Field(default="lossless", description="The name of the memory block.")
    memory: LosslessMemory = Field(description="The lossless store (lossless.open(...)).", exclude=True)
    conversation_id: str = Field(description="The lossless conversation the flushed messages go to.")
    budget_tokens: int = Field(default=2000, gt=0, description="Token budget of what get() returns.")
    conversation_metadata: dict[str, Any] | None = Field(
        default=None, description="Metadata for the conversation (e.g. {'user': 'maya'}).")
    _last_query: str | None = PrivateAttr(default=None)

    def _query(self, messages: list[ChatMessage] | None) -> str | None:
        for message in reversed(messages or []):
            if message.role.value == "user" and message.content:
                return message.content
        return None

    def _assemble(self, query: str | None, budget: int) -> str:
        conv = self.memory.get_conversation(self.conversation_id)
        if conv is None or budget <= 0:
            return ""
        return render_context(conv.assemble(budget_tokens=budget, query=query).messages)

    async def _aget(self, messages: list[ChatMessage] | None = None, **block_kwargs: Any) -> str:
        self._last_query = self._query(messages)
        return await asyncio.to_thread(self._assemble, self._last_query, self.budget_tokens)

    def _store(self, batch: list[dict[str, Any]]) -> None:
        conv = self.memory.conversation(self.conversation_id, metadata=self.conversation_metadata)
        conv.add_many(batch)

    async def _aput(self, messages: list[ChatMessage]) -> None:
        batch = [m for m in (from_llama_message(msg) for msg in messages) if m is not None]
        if batch:
            await asyncio.to_thread(self._store, batch)

    async def atruncate(self, content: str, tokens_to_truncate: int) -> str | None:
        """A smaller assembly (for the same question) instead of cut text."""
        used = self.memory.counter.count(content)
        budget = used - tokens_to_truncate
        if budget < 64:
            return None
        return await asyncio.to_thread(self._assemble, self._last_query, budget) or None
