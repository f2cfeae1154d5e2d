"""``lossless stats CONV``: how much a conversation is condensed, and ``--plot`` to draw it."""

from __future__ import annotations

import re
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

from lossless.conversation import Conversation
from lossless.core.errors import MissingDependencyError, ValidationError
from lossless.core.stats import ConversationStats

__all__ = ["compression_stats", "plot_compression"]

# Fonts that draw Chinese, Japanese and Korean, used for the title (the conversation id)
# after DejaVu Sans, matplotlib's own, where installed: it falls back glyph by glyph.
_CJK_FONTS = ("Noto Sans CJK SC", "Noto Sans CJK JP", "Noto Sans CJK KR", "Noto Sans SC", "Source Han Sans SC",
              "Source Han Sans", "WenQuanYi Zen Hei", "WenQuanYi Micro Hei", "Droid Sans Fallback",
              "Microsoft YaHei", "SimHei", "PingFang SC", "Hiragino Sans GB", "Hiragino Sans", "Yu Gothic",
              "Meiryo", "Malgun Gothic", "Apple SD Gothic Neo", "AR PL UMing CN")
_MISSING_GLYPH = re.compile(r"Glyph (\d+) .*missing from font")


def compression_stats(conv: Conversation, stats: ConversationStats) -> dict[str, Any]:
    """Raw tokens against the active context (frontier summaries + raw tail), their ratio,
    and the summaries and their tokens at each depth of the DAG."""
    summaries = conv.summaries()
    count = Counter(s.depth for s in summaries)
    tokens: Counter[int] = Counter()
    for s in summaries:
        tokens[s.depth] += s.token_count
    raw, active = stats.message_tokens, stats.active_tokens
    return {
        "raw_tokens": raw,
        "active_context_tokens": active,
        "compression_ratio": round(raw / active, 2) if active else None,
        "summaries_per_depth": {str(d): count[d] for d in sorted(count)},
        "summary_tokens_per_depth": {str(d): tokens[d] for d in sorted(tokens)},
    }


def plot_compression(conv: Conversation, stats: ConversationStats, path: str) -> tuple[Path, str]:
    """Draw the compression to a PNG: raw history beside the active context (summaries and
    raw tail), and the summaries at each depth. matplotlib is imported only here. Returns
    the file and the characters of the title no installed font draws ("" when none)."""
    target = Path(path)
    if target.is_dir():
        raise ValidationError(f"--plot {target} is a directory: give a file name such as compression.png")
    if not target.parent.is_dir():
        raise ValidationError(f"--plot {target}: no directory {target.parent}")
    try:
        from matplotlib import font_manager
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise MissingDependencyError("--plot needs matplotlib: pip install matplotlib") from None
    extra = compression_stats(conv, stats)
    fig = Figure(figsize=(10, 4.2), layout="constrained")
    FigureCanvasAgg(fig)  # attaches itself to the figure: no pyplot, no global backend
    left, right = fig.subplots(1, 2)
    frontier, tail = stats.frontier_tokens, stats.raw_tail_tokens
    left.bar(["raw history"], [extra["raw_tokens"]], color="#9aa5b1")
    left.bar(["active context"], [tail], color="#f0b429", label="raw tail")
    left.bar(["active context"], [frontier], bottom=[tail], color="#2680c2", label="frontier summaries")
    ratio = extra["compression_ratio"]
    installed = {f.name for f in font_manager.fontManager.ttflist}
    left.set_title(f"{conv.id}: {extra['raw_tokens']:,} → {extra['active_context_tokens']:,} tokens"
                   + (f" ({ratio:g}×)" if ratio else ""), fontsize=10,
                   fontfamily=["DejaVu Sans", *(f for f in _CJK_FONTS if f in installed)])
    left.set_ylabel("tokens")
    left.legend(loc="upper right", fontsize=8)
    depths = [int(d) for d in extra["summaries_per_depth"]]
    counts = list(extra["summaries_per_depth"].values())
    right.bar([f"d{d}" for d in depths], counts, color="#2680c2")
    for i, d in enumerate(depths):
        right.annotate(f"{extra['summary_tokens_per_depth'][str(d)]:,} tok", (i, counts[i]),
                       ha="center", va="bottom", fontsize=8)
    right.set_title("summaries per depth" if depths else "no summaries yet", fontsize=10)
    right.set_ylabel("summaries")
    with warnings.catch_warnings(record=True) as caught:  # a glyph no font has: the caller says so once
        warnings.simplefilter("always")
        fig.savefig(target, format="png", dpi=100)
    missing: dict[str, None] = {}
    for w in caught:
        if found := _MISSING_GLYPH.search(str(w.message)):
            missing[chr(int(found[1]))] = None
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return target, "".join(missing)
