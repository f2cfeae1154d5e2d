"""What the agent runtime needs from above it: the turn loop, recovery and the tools take
these, so they import nothing of the facade (``lossless.Memory``, ``lossless.Conversation``),
which hands itself in. A :class:`lossless.Conversation` is a :class:`ConversationHandle`; a
:class:`lossless.Memory` (or its :class:`~lossless.services.Services`) is an
:class:`AgentServices`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from lossless.compaction.engine import CompactionReport, Compactor
    from lossless.context.assemble import Layout
    from lossless.core.config import Config
    from lossless.core.tokens import TokenCounter
    from lossless.core.types import AssembledContext, Message
    from lossless.core.validate import NewMessage
    from lossless.longterm import Memories, MemoryRecord
    from lossless.recall.hybrid import Recaller
    from lossless.store.base import Store

__all__ = ["AgentServices", "ConversationHandle", "ToolDispatch"]


class AgentServices(Protocol):
    """The parts of an open store the tools and the turn loop read."""

    @property
    def store(self) -> Store: ...
    @property
    def config(self) -> Config: ...
    @property
    def counter(self) -> TokenCounter: ...
    @property
    def recaller(self) -> Recaller: ...
    @property
    def compactor(self) -> Compactor: ...
    @property
    def memories(self) -> Memories: ...


class ToolDispatch(Protocol):
    """Answers a model's call of a memory tool (:meth:`lossless.agent.tools.ToolBox.dispatch`)."""

    def dispatch(self, tool_call: Mapping[str, Any]) -> dict[str, Any]: ...


class ConversationHandle(Protocol):
    """The conversation a turn or a recovery works on."""

    @property
    def id(self) -> str: ...
    @property
    def memory(self) -> AgentServices: ...
    @property
    def tools(self) -> ToolDispatch: ...
    def messages(self, first_seq: int = 1, last_seq: int | None = None) -> list[Message]: ...
    def assemble(self, budget_tokens: int | None = None, query: str | None = None, *,
                 layout: Layout = "auto") -> AssembledContext: ...
    def compact(self, *, force: bool = True, full: bool = False, emergency: bool = False,
                reason: str | None = None, wait: float | None = None) -> CompactionReport: ...
    def add_many(self, messages: Iterable[Mapping[str, Any] | NewMessage], *,
                 compact: bool = True) -> list[Message]: ...
    def end(self, *, use_summarizer: bool = True) -> list[MemoryRecord]: ...
