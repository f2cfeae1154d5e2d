"""The earlier texts of summaries written again (``lossless compact --redo-fallbacks``),
read the same way from either store (:mod:`lossless.store.runner`)."""

from __future__ import annotations

import json
from typing import Any

from lossless.store.runner import sql_runner

__all__ = ["summary_revisions"]

_KEYS = ("revision", "content", "token_count", "summarizer", "fallback_level", "metadata", "replaced_at")


def summary_revisions(store: Any, summary_id: str) -> list[dict[str, Any]]:
    """The earlier texts of a summary, oldest first, each with what wrote it and when it
    was replaced."""
    rows = sql_runner(store).query(f"SELECT {', '.join(_KEYS)} FROM summary_revisions WHERE summary_id = ? "
                                   "ORDER BY revision", (summary_id,))
    return [{**dict(zip(_KEYS, r, strict=True)), "metadata": json.loads(r[5])} for r in rows]
