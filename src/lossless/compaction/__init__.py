"""Compaction: old raw messages become leaf summaries and runs of summaries become condensed
ones (:mod:`~lossless.compaction.engine`), done off the caller's path by the background
worker (:mod:`~lossless.compaction.worker`)."""

from lossless.compaction.engine import (
    Busy,
    CompactionReport,
    Compactor,
    RedoReport,
    protected_tail_start,
    tool_groups,
)

__all__ = ["Busy", "CompactionReport", "Compactor", "RedoReport", "protected_tail_start", "tool_groups"]
