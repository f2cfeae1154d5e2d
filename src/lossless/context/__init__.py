"""Context assembly: the context handed to the model for one call, built to fit a token
budget from the conversation's pinned prompt, fresh tail, summaries and recall, plus
long-term memories and workspace files (:mod:`lossless.context.assemble`)."""

from lossless.context.assemble import Assembler
from lossless.context.pieces import (
    DYNAMIC_HEADER,
    FILES_HEADER,
    LONG_TERM_HEADER,
    MEMORY_HEADER,
    RECALL_HEADER,
)

__all__ = ["DYNAMIC_HEADER", "FILES_HEADER", "LONG_TERM_HEADER", "MEMORY_HEADER", "RECALL_HEADER", "Assembler"]
