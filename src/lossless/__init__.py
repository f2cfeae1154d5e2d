"""lossless: a long-context memory engine for LLM agents."""

from lossless.compaction.engine import CompactionReport
from lossless.conversation import Conversation
from lossless.core.config import Config
from lossless.core.errors import (
    BudgetError,
    CompactionBusyError,
    ContextOverflowError,
    LosslessError,
    MigrationError,
    MissingDependencyError,
    NotFoundError,
    QueryError,
    StoreError,
    SummarizerError,
    ValidationError,
)
from lossless.core.stats import ConversationBacklog, ConversationStats, MemoryStats
from lossless.core.types import (
    AssembledContext,
    ChatMessage,
    ContextItem,
    GrepHit,
    Message,
    SourceRef,
    Summary,
)
from lossless.engine import Memory, default_db_path, open

__all__ = [
    "AssembledContext",
    "BudgetError",
    "ChatMessage",
    "CompactionBusyError",
    "CompactionReport",
    "Config",
    "ContextItem",
    "ContextOverflowError",
    "Conversation",
    "ConversationBacklog",
    "ConversationStats",
    "GrepHit",
    "LosslessError",
    "Memory",
    "MemoryStats",
    "Message",
    "MigrationError",
    "MissingDependencyError",
    "NotFoundError",
    "QueryError",
    "SourceRef",
    "StoreError",
    "Summarizer",
    "SummarizerError",
    "Summary",
    "ValidationError",
    "default_db_path",
    "open",
]

from lossless.summarize.base import Summarizer  # after __all__: it imports from lossless
