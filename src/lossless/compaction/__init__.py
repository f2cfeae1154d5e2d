"""Compaction: old raw messages become leaf summaries and runs of summaries become condensed
ones (:mod:`~lossless.compaction.engine`), done off the caller's path by the background
worker (:mod:`~lossless.compaction.worker`), run in a thread or on the caller's thread by
:mod:`~lossless.compaction.scheduler`; erasing for privacy is planned in
:mod:`~lossless.compaction.erase`. What they need of an open store is
:mod:`~lossless.compaction.base`'s protocols, never the facade."""

from lossless.compaction.engine import (
    Busy,
    CompactionReport,
    Compactor,
    RedoReport,
    protected_tail_start,
    tool_groups,
)

__all__ = ["Busy", "CompactionReport", "Compactor", "RedoReport", "protected_tail_start", "tool_groups"]
