"""Configuration: the knobs DESIGN.md names, their defaults, and how they scale with
the model's context window."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal, get_args

from lossless.core.errors import ValidationError

__all__ = ["Compaction", "Config", "Fusion", "Rerank", "VectorBackend"]

Compaction = Literal["background", "inline", "deferred"]
VectorBackend = Literal["auto", "sqlite-vec", "numpy"]
Fusion = Literal["weighted", "rrf"]
Rerank = Literal["llm", "cross-encoder"]


@dataclass(frozen=True, slots=True)
class Config:
    """Engine settings. Pass any of these as keyword arguments to :func:`lossless.open`.

    Sizes that DESIGN.md gives for large windows (``leaf_chunk_tokens`` 20000 and the
    summary targets) are scaled down for small windows by the ``effective_*``
    properties, so an 8k-window agent gets leaves it can afford to show.
    """

    context_window: int = 128_000
    model: str | None = None  # the chat model; lossless.open fills the window and limits from it
    context_threshold: float = 0.75
    fresh_tail_count: int = 32
    fresh_tail_ratio: float = 0.30  # the tail compaction protects, as a share of the window
    leaf_chunk_tokens: int = 20_000
    leaf_target_tokens: int = 1_200
    condensed_target_tokens: int = 2_000
    condense_min_fanout: int = 2
    condense_max_fanout: int = 8
    # the whole-conversation root (seeds 000, 001): a summary of everything summarized,
    # refreshed by compaction and shown first in every context; at most this many tokens
    # (0: no root is written)
    root_max_tokens: int = 1_500
    summary_share: float = 0.40  # frontier summaries above this share of the window get condensed
    max_summary_ratio: float = 0.5  # a summary is at most this share of what it covers
    auto_compact: bool = True
    # where compaction and embedding run: "background" (a worker thread of this process:
    # writes store the messages and their full-text rows and return), "inline" (inside the
    # write that triggered it, and vectors made by the first query that needs them), or
    # "deferred" (queued for a `lossless worker` process, or for Memory.wait_idle())
    compaction: Compaction = "background"
    # more triggers (seed 003: 500 messages, one hour since the last compaction; None: off)
    # and a cooldown after an automatic compaction that could not get under the trigger, so
    # it does not retry on every message. The interval is also checked by the worker on a
    # timer, so a conversation that went quiet is compacted without a new message.
    compact_after_messages: int | None = 500
    compact_interval_seconds: float | None = 3600.0
    compaction_cooldown_seconds: float = 30.0
    chat_commands: bool = True  # a user message "/compact" compacts the conversation
    tool_wait_seconds: float = 10.0  # tool calls (lossless's and yours in conv.turn) wait this long for a running compaction
    # long-term memory: distil durable items (decisions, preferences, errors, …) into
    # memory records before compaction summarizes their messages; show the records that
    # match the query (same user/agent scope) in assembly, within this share of recall
    memory_flush: bool = True
    memory_share: float = 0.10
    # the forgetting policy the worker applies (seed 003; None: that rule is off; see
    # lossless.longterm.forgetting): at most memory_capacity records per owner pool, none
    # unused for memory_max_unused_days, none under memory_importance_floor; checked at
    # most every memory_policy_interval_seconds, each record gone logged and restorable
    memory_capacity: int | None = 10_000
    memory_max_unused_days: float | None = None
    memory_importance_floor: float | None = None
    memory_policy_interval_seconds: float = 600.0
    # workspace file chunks (seed 004): a message that names an indexed file, says
    # "/context …", or (files_reference_phrases) refers to earlier documents without a
    # path ("the API doc I shared", "参考之前的 API 文档") brings up to files_top_k
    # chunks, as many as fit in files_share of recall's room, as one <context> block. A
    # chunk found by search (not one of a named file) needs a cosine distance to the
    # message of at most files_max_distance or a keyword relevance of at least
    # files_min_relevance (None: that side sets no bound); bench/files_threshold.py
    files_share: float = 0.25
    files_top_k: int = 10
    files_max_distance: float | None = 0.6
    files_min_relevance: float | None = 0.7
    files_reference_phrases: bool = True
    # a message over this many tokens is shown as an exploration of its content (at most
    # large_content_summary_tokens) with its id; lcm_expand pages through the exact text
    large_content_tokens: int = 25_000
    large_content_summary_tokens: int = 600
    # assembling for the whole window (budget >= context_window): a prefix of the pinned
    # messages, the frontier summaries and the oldest raw messages, in a fixed order and
    # at most (1 - dynamic_share) of the budget, then one block with what depends on the
    # question, then the newest messages; the prefix stays byte-identical between
    # compactions (provider prompt caches keep hitting) and the question keeps room
    cache_stable: bool = True
    dynamic_share: float = 0.70  # as recall_share: the question gets as much room as in the budgeted layout
    # ... but only where the prefix can be cached: when (1 - dynamic_share) of the window is
    # below this many tokens (OpenAI and Anthropic cache no shorter prefix), a call with a
    # question gets the budgeted layout, which gives recall the room a prefix would hold
    cache_min_prefix: int = 1024
    tokenizer: str = "cl100k_base"
    max_message_bytes: int = 32 * 1024 * 1024
    max_compaction_passes: int = 10_000
    # Assembly shares of the budget (P0 fresh tail, P1 summaries, P2 root, P3 recall); a
    # tier with nothing to show passes its share on, so without a query the split is
    # 50/33/17 over tail, summaries and root. A leaner 8/5/2/85 kept slightly more on both
    # retention dev sets but lost the previous turn's tool output at small budgets (the
    # fresh tail must hold what the agent just did), so these stay.
    tail_share: float = 0.15
    summaries_share: float = 0.10
    root_share: float = 0.05
    recall_share: float = 0.70
    # recall
    vector_backend: VectorBackend = "auto"  # "auto" (sqlite-vec if it loads, else numpy), "sqlite-vec", "numpy"
    fusion: Fusion = "weighted"  # "weighted" (normalised score sum) or "rrf" (reciprocal rank)
    vector_weight: float = 0.5  # the vector list's share in fusion (as for memories and file chunks)
    recency_half_life_days: float | None = None  # decay older recall hits; None: off
    mmr_lambda: float | None = None  # diversify recall hits (1 = relevance only); None: off
    # recall's depth follows its room: it looks at as many matches as the room could hold
    # short messages (at most ``recall_depth``, a bound on the work) and keeps those scoring
    # at least ``recall_score_floor`` of the best match (0: every match the depth reaches; a
    # floor of 0.1 left chit-chat's room at 4096 to the tail and summaries while matches
    # were left out: 0.815 -> 0.882 keyword-only: bench/README.md#room-per-tier). It packs them in passes: every one
    # that fits whole within ``recall_whole_share`` of the recall room, then their short
    # neighbours, then excerpts of the rest (each cut to ``recall_item_share`` of the room,
    # at most ``recall_item_max_tokens``)
    recall_depth: int = 400
    recall_score_floor: float = 0.0
    # a second keyword round with the words of the best N matches added to the question
    # (pseudo-relevance feedback), its matches interleaved after the first N: on chit-chat
    # multi-hop answers +0.03/+0.07 at 2048/4096 but open inference -0.03, overall level
    recall_second_round: int = 0
    recall_lead_excerpts: int = 1  # ... except the best N matches, which come (cut) in the first pass
    recall_whole_share: float = 0.2
    recall_item_share: float = 0.125
    recall_item_max_tokens: int = 160
    # recall and search QA-pair windows as well as single messages; windows are cut and
    # embedded only then (off: the model reads the messages alone, 58 % less text)
    recall_windows: bool = False
    # an optional rerank of recall's best candidates (seed 001's LLM reranker; None: off):
    # "llm" asks the chat model (rerank_model, else model) through the OpenAI-compatible
    # client (rerank_base_url, else $LOSSLESS_SUMMARIZER_BASE_URL / $OPENAI_BASE_URL) for
    # their order; "cross-encoder" scores them with a sentence-transformers cross-encoder
    # from a local folder (rerank_model is its path). The rerank_top_n best, each cut to
    # rerank_candidate_tokens, within rerank_timeout_seconds; on any failure recall keeps
    # its own order (see lossless.recall.rerank)
    rerank: Rerank | None = None
    rerank_model: str | None = None
    rerank_base_url: str | None = None
    rerank_top_n: int = 20
    rerank_candidate_tokens: int = 120
    rerank_timeout_seconds: float = 5.0
    # what leaves the assembled context first (never the store): "summary" (the newest
    # raw messages, then summaries newest first, then the root), "selective" (raw messages
    # by importance and recency), "hierarchical" (by task: the active task's summaries
    # whole, completed tasks' as key points; history of no task by age: newest summary
    # whole, older ones as key points, the oldest as statistics). Chosen with bench/shares_sweep.py.
    strategy: str = "summary"

    def __post_init__(self) -> None:
        self._check_types()
        if not isinstance(self.context_window, int) or self.context_window < 256:
            raise ValidationError(
                f"context_window must be an integer >= 256, got {self.context_window!r}"
            )
        for name in ("context_threshold", "fresh_tail_ratio", "summary_share", "max_summary_ratio"):
            value = getattr(self, name)
            if not 0 < value <= 1:
                raise ValidationError(f"{name} must be in (0, 1], got {value!r}")
        for name in ("tail_share", "summaries_share", "root_share", "recall_share", "memory_share", "dynamic_share",
                     "files_share", "recall_whole_share", "recall_item_share", "recall_score_floor"):
            if not 0 <= getattr(self, name) <= 1:
                raise ValidationError(f"{name} must be in [0, 1], got {getattr(self, name)!r}")
        for name in (
            "fresh_tail_count",
            "leaf_chunk_tokens",
            "leaf_target_tokens",
            "condensed_target_tokens",
            "max_message_bytes",
            "max_compaction_passes",
            "large_content_tokens",
            "large_content_summary_tokens",
            "recall_depth",
            "recall_item_max_tokens",
            "rerank_top_n",
            "rerank_candidate_tokens",
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValidationError(f"{name} must be a positive integer, got {value!r}")
        if isinstance(self.root_max_tokens, bool) or not isinstance(self.root_max_tokens, int) or self.root_max_tokens < 0:
            raise ValidationError(f"root_max_tokens must be a non-negative integer (0: no root), "
                                  f"got {self.root_max_tokens!r}")
        if self.compact_after_messages is not None and (
                not isinstance(self.compact_after_messages, int) or self.compact_after_messages < 1):
            raise ValidationError(f"compact_after_messages must be a positive integer or None, "
                                  f"got {self.compact_after_messages!r}")
        if self.compact_interval_seconds is not None and not self.compact_interval_seconds > 0:
            raise ValidationError(f"compact_interval_seconds must be positive or None, got {self.compact_interval_seconds!r}")
        if self.memory_capacity is not None and self.memory_capacity < 1:
            raise ValidationError(f"memory_capacity must be a positive integer or None, got {self.memory_capacity!r}")
        if self.memory_max_unused_days is not None and not self.memory_max_unused_days > 0:
            raise ValidationError(f"memory_max_unused_days must be positive or None, got {self.memory_max_unused_days!r}")
        if self.memory_importance_floor is not None and not 0 <= self.memory_importance_floor <= 1:
            raise ValidationError(f"memory_importance_floor must be in [0, 1] or None, "
                                  f"got {self.memory_importance_floor!r}")
        if not 1 <= self.files_top_k <= 1000:
            raise ValidationError(f"files_top_k must be an integer in 1..1000, got {self.files_top_k!r}")
        if self.files_max_distance is not None and not 0 <= self.files_max_distance <= 2:
            raise ValidationError(f"files_max_distance must be a cosine distance in [0, 2] or None, "
                                  f"got {self.files_max_distance!r}")
        if self.files_min_relevance is not None and not 0 <= self.files_min_relevance <= 1:
            raise ValidationError(f"files_min_relevance must be in [0, 1] or None, got {self.files_min_relevance!r}")
        if not self.memory_policy_interval_seconds > 0:
            raise ValidationError(f"memory_policy_interval_seconds must be positive, "
                                  f"got {self.memory_policy_interval_seconds!r}")
        for name in ("compaction_cooldown_seconds", "tool_wait_seconds"):
            if not getattr(self, name) >= 0:
                raise ValidationError(f"{name} must be >= 0, got {getattr(self, name)!r}")
        for name in ("recall_lead_excerpts", "cache_min_prefix", "recall_second_round"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValidationError(f"{name} must be an integer >= 0, got {value!r}")
        if self.compaction not in get_args(Compaction):
            raise ValidationError(f"compaction must be background, inline or deferred, got {self.compaction!r}")
        if self.vector_backend not in get_args(VectorBackend):
            raise ValidationError(f"vector_backend must be auto, sqlite-vec or numpy, got {self.vector_backend!r}")
        if self.strategy not in ("summary", "selective", "hierarchical"):
            raise ValidationError(f"strategy must be summary, selective or hierarchical, got {self.strategy!r}")
        if self.rerank is not None and self.rerank not in get_args(Rerank):
            raise ValidationError(f"rerank must be llm, cross-encoder or None (off), got {self.rerank!r}")
        if not self.rerank_timeout_seconds > 0:
            raise ValidationError(f"rerank_timeout_seconds must be positive, got {self.rerank_timeout_seconds!r}")
        if self.fusion not in get_args(Fusion):
            raise ValidationError(f"fusion must be rrf or weighted, got {self.fusion!r}")
        if not 0 <= self.vector_weight <= 1:
            raise ValidationError(f"vector_weight must be in [0, 1], got {self.vector_weight!r}")
        if self.recency_half_life_days is not None and self.recency_half_life_days <= 0:
            raise ValidationError(f"recency_half_life_days must be positive, got {self.recency_half_life_days!r}")
        if self.mmr_lambda is not None and not 0 <= self.mmr_lambda <= 1:
            raise ValidationError(f"mmr_lambda must be in [0, 1], got {self.mmr_lambda!r}")
        if not 2 <= self.condense_min_fanout <= self.condense_max_fanout:
            raise ValidationError(
                "need 2 <= condense_min_fanout <= condense_max_fanout, got "
                f"{self.condense_min_fanout} and {self.condense_max_fanout}"
            )

    def _check_types(self) -> None:
        """Each value of its field's type, so a wrong one ("high" for a threshold) is a
        ValidationError naming the field, not a TypeError from a comparison below."""
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            kind = str(f.type)
            if value is None and kind.endswith("| None"):
                continue
            if kind.startswith("float") and (isinstance(value, bool) or not isinstance(value, int | float)):
                raise ValidationError(f"{f.name} must be a number, got {value!r}")
            if kind.startswith("int") and (isinstance(value, bool) or not isinstance(value, int)):
                raise ValidationError(f"{f.name} must be an integer, got {value!r}")
            if kind.startswith("bool") and not isinstance(value, bool):
                raise ValidationError(f"{f.name} must be true or false, got {value!r}")
            if kind.startswith("str") and not isinstance(value, str):
                raise ValidationError(f"{f.name} must be a string, got {value!r}")

    @classmethod
    def field_names(cls) -> frozenset[str]:
        return frozenset(f.name for f in dataclasses.fields(cls))

    @classmethod
    def from_kwargs(cls, **kwargs: Any) -> Config:
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(kwargs) - names)
        if unknown:
            raise ValidationError(
                f"unknown config option(s): {', '.join(unknown)} (known: {', '.join(sorted(names))})"
            )
        return cls(**kwargs)

    def replace(self, **changes: Any) -> Config:
        return dataclasses.replace(self, **changes)

    @property
    def trigger_tokens(self) -> int:
        """Active-context size above which compaction runs."""
        return int(self.context_window * self.context_threshold)

    @property
    def effective_leaf_chunk_tokens(self) -> int:
        return max(512, min(self.leaf_chunk_tokens, int(self.context_window * 0.25)))

    @property
    def effective_leaf_target_tokens(self) -> int:
        return max(96, min(self.leaf_target_tokens, int(self.effective_leaf_chunk_tokens * 0.15)))

    @property
    def effective_condensed_target_tokens(self) -> int:
        return max(160, min(self.condensed_target_tokens, int(self.context_window * 0.06)))

    @property
    def fresh_tail_tokens(self) -> int:
        return int(self.context_window * self.fresh_tail_ratio)

    @property
    def summary_share_tokens(self) -> int:
        return int(self.context_window * self.summary_share)
