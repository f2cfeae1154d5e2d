"""lossless as a LangChain chat message history.

:class:`LosslessChatMessageHistory` stores every message in a lossless conversation and
gives LangChain back the *assembled* context: the stored messages verbatim while they fit
``budget_tokens``, then summaries of the older ones plus the newest messages raw — so a
``RunnableWithMessageHistory`` never sends the model more than the budget, and nothing is
lost (``all_messages()`` returns everything stored)::

    import lossless
    from langchain_core.runnables.history import RunnableWithMessageHistory
    from lossless.integrations.langchain import LosslessChatMessageHistory

    mem = lossless.open("agent.db")
    chain = RunnableWithMessageHistory(
        prompt | model, lambda session_id: LosslessChatMessageHistory(mem, session_id),
        input_messages_key="question", history_messages_key="history")

``clear()`` does not delete anything (lossless never does): it starts a fresh lossless
conversation ``<id>~2`` (then ``~3`` …) and records it on the original conversation, so
every history object made for that id from then on reads and writes the fresh one. The
old messages stay in the store, searchable and exportable.

A message's LangChain ``id`` becomes its ``external_id``: adding it again adds nothing.
LangChain marks ``BaseChatMessageHistory`` (since langchain-core 1.6.4) and
``RunnableWithMessageHistory`` (since 1.3.3) deprecated, for removal in 2.0, in favour of
LangGraph persistence; both still work. Without them, use the history directly — read
``history.messages`` before the model call, ``history.add_messages([...])`` after.
Needs ``pip install 'lossless[langchain]'``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from lossless.conversation import Conversation
from lossless.core.errors import MissingDependencyError, ValidationError
from lossless.core.types import ChatMessage, Message
from lossless.engine import Memory

try:
    from langchain_core.chat_history import BaseChatMessageHistory
    from langchain_core.messages import (
        AIMessage,
        BaseMessage,
        HumanMessage,
        InvalidToolCall,
        SystemMessage,
        ToolCall,
        ToolMessage,
    )
    from langchain_core.messages import ChatMessage as LCChatMessage
except ImportError as exc:  # pragma: no cover - the extra is installed in the test environment
    raise MissingDependencyError(
        "lossless.integrations.langchain needs langchain-core: pip install 'lossless[langchain]'"
    ) from exc

__all__ = ["CURRENT_KEY", "LosslessChatMessageHistory", "from_langchain", "to_langchain"]

CURRENT_KEY = "langchain_current"  # metadata of the original conversation: where clear() moved to
_ROLES = {"human": "user", "ai": "assistant", "developer": "system"}


def _content(content: Any) -> Any:
    if isinstance(content, list):
        return [{"type": "text", "text": part} if isinstance(part, str) else part for part in content]
    return content


def from_langchain(message: BaseMessage) -> dict[str, Any]:
    """A LangChain message as a lossless message dict."""
    out: dict[str, Any] = {"content": _content(message.content)}
    if isinstance(message, HumanMessage):
        out["role"] = "user"
    elif isinstance(message, AIMessage):
        out["role"] = "assistant"
        calls = [{"id": c.get("id") or f"call_{i}", "type": "function",
                  "function": {"name": c["name"], "arguments": json.dumps(c.get("args", {}), ensure_ascii=False)}}
                 for i, c in enumerate(message.tool_calls)]
        calls += [{"id": c.get("id") or f"invalid_{i}", "type": "function",
                   "function": {"name": c.get("name") or "unknown", "arguments": c.get("args") or ""}}
                  for i, c in enumerate(message.invalid_tool_calls)]
        if calls:
            out["tool_calls"] = calls
            if out["content"] in ("", []):
                out["content"] = None
    elif isinstance(message, ToolMessage):
        out["role"] = "tool"
        out["tool_call_id"] = message.tool_call_id
    elif isinstance(message, SystemMessage):
        out["role"] = "system"
    elif isinstance(message, LCChatMessage):
        out["role"] = _ROLES.get(message.role, message.role)
    else:
        raise ValidationError(f"a {type(message).__name__} cannot be stored (use Human/AI/System/ToolMessage)")
    if message.name:
        out["name"] = message.name
    if message.id:
        out["external_id"] = message.id
    return out


def _tool_calls(calls: Sequence[Any]) -> tuple[list[ToolCall], list[InvalidToolCall]]:
    good: list[ToolCall] = []
    bad: list[InvalidToolCall] = []
    for call in calls:
        fn = call.get("function") or {}
        try:
            args = json.loads(fn.get("arguments") or "{}")
        except ValueError:
            args = None
        if isinstance(args, dict):
            good.append(ToolCall(name=fn.get("name", ""), args=args, id=call.get("id"), type="tool_call"))
        else:
            bad.append(InvalidToolCall(name=fn.get("name"), args=fn.get("arguments"), id=call.get("id"),
                                       error="arguments are not a JSON object", type="invalid_tool_call"))
    return good, bad


def to_langchain(message: ChatMessage | Message) -> BaseMessage:
    """A lossless message (stored, or one of an assembled context) as a LangChain message."""
    if isinstance(message, Message):
        role, content, name = message.role, message.content, message.name
        calls: Sequence[Any] = message.tool_calls
        call_id = message.tool_call_id
        mid: str | None = message.external_id or message.id
    else:
        role, content, name = message["role"], message.get("content"), message.get("name")
        calls, call_id, mid = message.get("tool_calls") or [], message.get("tool_call_id"), None
    body: Any = content if content is not None else ""
    extra: dict[str, Any] = {"name": name} if name else {}
    if mid:
        extra["id"] = mid
    if role == "user":
        return HumanMessage(content=body, **extra)
    if role == "assistant":
        good, bad = _tool_calls(calls)
        return AIMessage(content=body, tool_calls=good, invalid_tool_calls=bad, **extra)
    if role == "tool":
        return ToolMessage(content=body, tool_call_id=call_id or "", **extra)
    return SystemMessage(content=body, **extra)


class LosslessChatMessageHistory(BaseChatMessageHistory):
    """A LangChain chat history stored in the lossless conversation ``conversation_id``.

    ``messages`` is the assembled context (at most ``budget_tokens``, default the
    configured context window); ``all_messages()`` every stored message; ``clear()``
    moves on to a fresh conversation without deleting anything (see the module doc).
    """

    def __init__(self, memory: Memory, conversation_id: str, *, budget_tokens: int | None = None,
                 metadata: dict[str, Any] | None = None) -> None:
        self.memory = memory
        self.conversation_id = conversation_id
        self.budget_tokens = budget_tokens
        self.memory.conversation(conversation_id, metadata=metadata)

    @property
    def current_id(self) -> str:
        """The conversation messages go to now: ``conversation_id``, or the one the last
        ``clear()`` started."""
        info = self.memory.store.get_conversation(self.conversation_id)
        current = info.metadata.get(CURRENT_KEY) if info is not None else None
        return current if isinstance(current, str) and current else self.conversation_id

    @property
    def conversation(self) -> Conversation:
        return self.memory.conversation(self.current_id)

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The context to send the model: stored messages, older ones condensed into
        summaries once they no longer fit ``budget_tokens``."""
        conv = self.conversation
        if not self.memory.store.last_seq(conv.id):
            return []
        return [to_langchain(m) for m in conv.assemble(budget_tokens=self.budget_tokens).messages]

    def all_messages(self) -> list[BaseMessage]:
        """Every message stored since the last ``clear()``, verbatim."""
        return [to_langchain(m) for m in self.conversation.messages()]

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Store the messages in one transaction (all or none)."""
        batch = [from_langchain(m) for m in messages]
        if batch:
            self.conversation.add_many(batch)

    def clear(self) -> None:
        """Start a fresh conversation ``<id>~N`` for this history; delete nothing."""
        n = 2
        while self.memory.store.get_conversation(f"{self.conversation_id}~{n}") is not None:
            n += 1
        fresh = f"{self.conversation_id}~{n}"
        self.memory.conversation(fresh, metadata={"langchain_cleared_from": self.conversation_id})
        self.memory.conversation(self.conversation_id, metadata={CURRENT_KEY: fresh})
