"""Large content kept out of the window: a bounded outline of a big text (JSON, CSV/TSV,
YAML, code, logs, Markdown/plain text, HTML, XML) for a model to decide what to read.

The agent tools use it for messages over ``large_content_tokens``: ``lcm_describe`` shows
the exploration, ``lcm_expand`` pages through the exact text.
"""

from lossless.context.explore.base import KINDS, Exploration, Kind
from lossless.context.explore.core import detect_kind, explore

__all__ = ["KINDS", "Exploration", "Kind", "detect_kind", "explore"]
