"""Context assembly moved to :mod:`lossless.context`; this module re-exports what other
modules, tests and benchmarks import from its old place."""

from lossless.context.assemble import Assembler
from lossless.context.pieces import (
    DYNAMIC_HEADER,
    FILES_HEADER,
    LONG_TERM_HEADER,
    MEMORY_HEADER,
    RECALL_HEADER,
)

__all__ = ["DYNAMIC_HEADER", "FILES_HEADER", "LONG_TERM_HEADER", "MEMORY_HEADER", "RECALL_HEADER", "Assembler"]
