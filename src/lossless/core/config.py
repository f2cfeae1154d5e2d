"""Configuration: the knobs DESIGN.md names, their defaults, and how they scale with
the model's context window."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import tzinfo
from typing import Any, Literal, get_args, get_origin, get_type_hints

from lossless.core.errors import ValidationError
from lossless.core.zones import zone_of

__all__ = ["SECTIONS", "Bound", "Compaction", "Config", "Fusion", "Rerank", "Strategy", "VectorBackend"]

Compaction = Literal["background", "inline", "deferred"]
VectorBackend = Literal["auto", "sqlite-vec", "numpy"]
Fusion = Literal["weighted", "rrf"]
Rerank = Literal["llm", "cross-encoder"]
Strategy = Literal["summary", "selective", "hierarchical"]

#: the sections the fields are grouped in (``Config.section``, docs/configuration.md)
SECTIONS = ("window", "compaction", "memory", "files", "assembly", "recall", "rerank", "store")


@dataclass(frozen=True, slots=True)
class Bound:
    """The values a number field takes: ``lo`` (``lo_open``: excluded) to ``hi``, and how
    its error names that range (``what``; by default it is spelled from the bounds)."""

    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    what: str = ""

    def holds(self, value: float) -> bool:
        if self.lo is not None and (value <= self.lo if self.lo_open else value < self.lo):
            return False
        return self.hi is None or value <= self.hi

    def describe(self, integer: bool) -> str:
        if self.what:
            return self.what
        if self.lo is not None and self.hi is not None:
            return f"in {'(' if self.lo_open else '['}{self.lo:g}, {self.hi:g}]"
        if self.lo == 0 and self.lo_open:
            return "positive"
        if integer:
            return "a positive integer" if self.lo == 1 else f"an integer >= {self.lo:g}"
        return f">= {self.lo:g}"


def knob(default: Any, section: str, bound: Bound | None = None) -> Any:
    """A field of ``section`` with its bounds declared (checked by ``Config.__post_init__``)."""
    return field(default=default, metadata={"section": section, "bound": bound})


SHARE = Bound(0, 1)  # a share of something: [0, 1]
PART = Bound(0, 1, lo_open=True)  # (0, 1]
COUNT = Bound(1)  # a positive integer
POSITIVE = Bound(0, lo_open=True)
AT_LEAST_0 = Bound(0)


@dataclass(frozen=True, slots=True)
class Config:
    """Engine settings. Pass any of these as keyword arguments to :func:`lossless.open`.

    Sizes that DESIGN.md gives for large windows (``leaf_chunk_tokens`` 20000 and the
    summary targets) are scaled down for small windows by the ``effective_*``
    properties, so an 8k-window agent gets leaves it can afford to show.
    """

    # (the largest windows models offer are ~10M tokens: a larger one is a typo, and would
    # leave compaction never due)
    context_window: int = knob(128_000, "window", Bound(256, 100_000_000,
                                                        what="an integer from 256 to 100,000,000 (tokens)"))
    model: str | None = knob(None, "window")  # the chat model; lossless.open fills the window and limits from it
    context_threshold: float = knob(0.75, "compaction", PART)
    fresh_tail_count: int = knob(32, "compaction", COUNT)
    fresh_tail_ratio: float = knob(0.30, "compaction", PART)  # the tail compaction protects, as a share of the window
    leaf_chunk_tokens: int = knob(20_000, "compaction", COUNT)
    leaf_target_tokens: int = knob(1_200, "compaction", COUNT)
    condensed_target_tokens: int = knob(2_000, "compaction", COUNT)
    condense_min_fanout: int = knob(2, "compaction")
    condense_max_fanout: int = knob(8, "compaction")
    # the whole-conversation root (seeds 000, 001): a summary of everything summarized,
    # refreshed by compaction and shown first in every context; at most this many tokens
    # (0: no root is written)
    root_max_tokens: int = knob(1_500, "compaction", Bound(0, what="a non-negative integer (0: no root)"))
    summary_share: float = knob(0.40, "compaction", PART)  # frontier summaries above this share of the window get condensed
    max_summary_ratio: float = knob(0.5, "compaction", PART)  # a summary is at most this share of what it covers
    auto_compact: bool = knob(True, "compaction")
    # where compaction and embedding run: "background" (a worker thread of this process:
    # writes store the messages and their full-text rows and return), "inline" (inside the
    # write that triggered it, and vectors made by the first query that needs them), or
    # "deferred" (queued for a `lossless worker` process, or for Memory.wait_idle())
    compaction: Compaction = knob("background", "compaction")
    # more triggers (seed 003: 500 messages, one hour since the last compaction; None: off)
    # and a cooldown after an automatic compaction that could not get under the trigger, so
    # it does not retry on every message. The interval is also checked by the worker on a
    # timer, so a conversation that went quiet is compacted without a new message.
    compact_after_messages: int | None = knob(500, "compaction", COUNT)
    compact_interval_seconds: float | None = knob(3600.0, "compaction", POSITIVE)
    compaction_cooldown_seconds: float = knob(30.0, "compaction", AT_LEAST_0)
    chat_commands: bool = knob(True, "compaction")  # a user message "/compact" compacts the conversation
    tool_wait_seconds: float = knob(10.0, "compaction", AT_LEAST_0)  # tool calls (lossless's and yours in conv.turn) wait this long for a running compaction
    # long-term memory: distil durable items (decisions, preferences, errors, …) into
    # memory records before compaction summarizes their messages; show the records that
    # match the query (same user/agent scope) in assembly, within this share of recall
    memory_flush: bool = knob(True, "memory")
    memory_share: float = knob(0.10, "memory", SHARE)
    # the forgetting policy the worker applies (seed 003; None: that rule is off; see
    # lossless.longterm.forgetting): at most memory_capacity records per owner pool, none
    # unused for memory_max_unused_days, none under memory_importance_floor; checked at
    # most every memory_policy_interval_seconds, each record gone logged and restorable
    memory_capacity: int | None = knob(10_000, "memory", COUNT)
    memory_max_unused_days: float | None = knob(None, "memory", POSITIVE)
    memory_importance_floor: float | None = knob(None, "memory", SHARE)
    memory_policy_interval_seconds: float = knob(600.0, "memory", POSITIVE)
    # workspace file chunks (seed 004): a message that names an indexed file, says
    # "/context …", or (files_reference_phrases) refers to earlier documents without a
    # path ("the API doc I shared", "参考之前的 API 文档") brings up to files_top_k
    # chunks, as many as fit in files_share of recall's room, as one <context> block. A
    # chunk found by search (not one of a named file) needs a cosine distance to the
    # message of at most files_max_distance or a keyword relevance of at least
    # files_min_relevance (None: that side sets no bound); bench/files_threshold.py
    files_share: float = knob(0.25, "files", SHARE)
    files_top_k: int = knob(10, "files", Bound(1, 1000, what="an integer in 1..1000"))
    files_max_distance: float | None = knob(0.6, "files", Bound(0, 2, what="a cosine distance in [0, 2]"))
    files_min_relevance: float | None = knob(0.7, "files", SHARE)
    files_reference_phrases: bool = knob(True, "files")
    # a message over this many tokens is shown as an exploration of its content (at most
    # large_content_summary_tokens) with its id; lcm_expand pages through the exact text
    large_content_tokens: int = knob(25_000, "assembly", COUNT)
    large_content_summary_tokens: int = knob(600, "assembly", COUNT)
    # assembling for the whole window (budget >= context_window): a prefix of the pinned
    # messages, the frontier summaries and the oldest raw messages, in a fixed order and
    # at most (1 - dynamic_share) of the budget, then one block with what depends on the
    # question, then the newest messages; the prefix stays byte-identical between
    # compactions (provider prompt caches keep hitting) and the question keeps room
    cache_stable: bool = knob(True, "assembly")
    dynamic_share: float = knob(0.70, "assembly", SHARE)  # as recall_share: the question gets as much room as in the budgeted layout
    # ... but only where the prefix can be cached: when (1 - dynamic_share) of the window is
    # below this many tokens (OpenAI and Anthropic cache no shorter prefix), a call with a
    # question gets the budgeted layout, which gives recall the room a prefix would hold
    cache_min_prefix: int = knob(1024, "assembly", AT_LEAST_0)
    tokenizer: str = knob("cl100k_base", "window")
    max_message_bytes: int = knob(32 * 1024 * 1024, "store", COUNT)
    max_compaction_passes: int = knob(10_000, "compaction", COUNT)
    # Assembly shares of the budget (P0 fresh tail, P1 summaries, P2 root, P3 recall); a
    # tier with nothing to show passes its share on, so without a query the split is
    # 50/33/17 over tail, summaries and root. A leaner 8/5/2/85 kept slightly more on both
    # retention dev sets but lost the previous turn's tool output at small budgets (the
    # fresh tail must hold what the agent just did), so these stay.
    tail_share: float = knob(0.15, "assembly", SHARE)
    summaries_share: float = knob(0.10, "assembly", SHARE)
    root_share: float = knob(0.05, "assembly", SHARE)
    recall_share: float = knob(0.70, "assembly", SHARE)
    # recall
    vector_backend: VectorBackend = knob("auto", "store")  # "auto" (sqlite-vec if it loads, else numpy), "sqlite-vec", "numpy"
    fusion: Fusion = knob("weighted", "recall")  # "weighted" (normalised score sum) or "rrf" (reciprocal rank)
    vector_weight: float = knob(0.5, "recall", SHARE)  # the vector list's share in fusion (as for memories and file chunks)
    recency_half_life_days: float | None = knob(None, "recall", POSITIVE)  # decay older recall hits; None: off
    mmr_lambda: float | None = knob(None, "recall", SHARE)  # diversify recall hits (1 = relevance only); None: off
    # recall's depth follows its room: it looks at as many matches as the room could hold
    # short messages (at most ``recall_depth``, a bound on the work) and keeps those scoring
    # at least ``recall_score_floor`` of the best match (0: every match the depth reaches; a
    # floor of 0.1 left chit-chat's room at 4096 to the tail and summaries while matches
    # were left out: 0.815 -> 0.882 keyword-only: bench/README.md#room-per-tier). It packs them in passes: every one
    # that fits whole within ``recall_whole_share`` of the recall room, then their short
    # neighbours, then excerpts of the rest (each cut to ``recall_item_share`` of the room,
    # at most ``recall_item_max_tokens``). Whole means at most ``recall_whole_max_tokens``
    # too, whatever the room: more room brings more matches, not longer ones (BEAM at
    # 4,096 tokens: evidence in context 0.598 -> 0.725, bench/README.md)
    recall_depth: int = knob(400, "recall", COUNT)
    recall_score_floor: float = knob(0.0, "recall", SHARE)
    # a second keyword round with the words of the best N matches added to the question
    # (pseudo-relevance feedback), its matches interleaved after the first N: on chit-chat
    # multi-hop answers +0.03/+0.07 at 2048/4096 but open inference -0.03, overall level
    recall_second_round: int = knob(0, "recall", AT_LEAST_0)
    recall_lead_excerpts: int = knob(1, "recall", AT_LEAST_0)  # ... except the best N matches, which come (cut) in the first pass
    recall_whole_share: float = knob(0.2, "recall", SHARE)
    recall_whole_max_tokens: int = knob(320, "recall", COUNT)
    recall_item_share: float = knob(0.125, "recall", SHARE)
    recall_item_max_tokens: int = knob(160, "recall", COUNT)
    # recall and search QA-pair windows as well as single messages; windows are cut and
    # embedded only then (off: the model reads the messages alone, 58 % less text)
    recall_windows: bool = knob(False, "recall")
    # an optional rerank of recall's best candidates (seed 001's LLM reranker; None: off):
    # "llm" asks the chat model (rerank_model, else model) through the OpenAI-compatible
    # client (rerank_base_url, else $LOSSLESS_SUMMARIZER_BASE_URL / $OPENAI_BASE_URL) for
    # their order; "cross-encoder" scores them with a sentence-transformers cross-encoder
    # from a local folder (rerank_model is its path). The rerank_top_n best, each cut to
    # rerank_candidate_tokens, within rerank_timeout_seconds; on any failure recall keeps
    # its own order (see lossless.recall.rerank)
    rerank: Rerank | None = knob(None, "rerank")
    rerank_model: str | None = knob(None, "rerank")
    rerank_base_url: str | None = knob(None, "rerank")
    rerank_top_n: int = knob(20, "rerank", COUNT)
    rerank_candidate_tokens: int = knob(120, "rerank", COUNT)
    rerank_timeout_seconds: float = knob(5.0, "rerank", POSITIVE)
    # what leaves the assembled context first (never the store): "summary" (the newest
    # raw messages, then summaries newest first, then the root), "selective" (raw messages
    # by importance and recency), "hierarchical" (by task: the active task's summaries
    # whole, completed tasks' as key points; history of no task by age: newest summary
    # whole, older ones as key points, the oldest as statistics). Chosen with bench/shares_sweep.py.
    strategy: Strategy = knob("summary", "assembly")
    # the zone times are shown in: the dates of recalled messages, summaries' spans, the
    # times a summarizer reads, the CLI's views ("Asia/Shanghai", "UTC", "+08:00"). A
    # message at 07:30 in Beijing is 23:30 UTC the day before: shown in UTC, "what did I do
    # on the 20th?" finds it under the 19th. A time given without an offset is a time of
    # this zone (with UTC, kept as given). Stored instants do not change; summaries already
    # written keep the zone they were written in
    timezone: str = knob("UTC", "assembly")

    def __post_init__(self) -> None:
        """Every field checked against its declaration: its type, its ``Literal`` values,
        its :class:`Bound`; then the one rule between two fields (the fan-outs)."""
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            hint = _HINTS[f.name]
            optional = type(None) in get_args(hint)
            if value is None and optional:
                continue
            _check_type(f.name, value, hint)
            choices = _literal_values(hint)
            if choices and value not in choices:
                off = " or None (off)" if optional else ""
                raise ValidationError(f"{f.name} must be {', '.join(choices[:-1])} or {choices[-1]}{off}, got {value!r}"
                                      if len(choices) > 1 and not off else
                                      f"{f.name} must be {', '.join(choices)}{off}, got {value!r}")
            bound: Bound | None = f.metadata.get("bound")
            if bound is not None and not bound.holds(value):
                kind = bound.describe(int in _kinds(hint))
                raise ValidationError(f"{f.name} must be {kind}{' or None' if optional else ''}, got {value!r}")
        zone_of(self.timezone)  # (an unknown zone: ValidationError naming it)
        if not 2 <= self.condense_min_fanout <= self.condense_max_fanout:
            raise ValidationError(
                "need 2 <= condense_min_fanout <= condense_max_fanout, got "
                f"{self.condense_min_fanout} and {self.condense_max_fanout}"
            )

    def section(self, name: str) -> dict[str, Any]:
        """The fields of one of :data:`SECTIONS` with their values, in declaration order."""
        if name not in SECTIONS:
            raise ValidationError(f"unknown config section {name!r} (known: {', '.join(SECTIONS)})")
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.metadata["section"] == name}

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
    def zone(self) -> tzinfo:
        """The :class:`~datetime.tzinfo` of ``timezone``."""
        return zone_of(self.timezone)

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


_HINTS: dict[str, Any] = get_type_hints(Config)


def _literal_values(hint: Any) -> list[Any]:
    """The values a ``Literal`` (or an optional one) allows; [] for any other type."""
    if get_origin(hint) is Literal:
        return list(get_args(hint))
    return [v for a in get_args(hint) if get_origin(a) is Literal for v in get_args(a)]


def _kinds(hint: Any) -> set[Any]:
    """The types a field's hint allows, None left out (a Literal stays whole)."""
    return {a for a in (get_args(hint) if get_origin(hint) is not Literal else (hint,)) if a is not type(None)} or {hint}


def _check_type(name: str, value: Any, hint: Any) -> None:
    """``value`` of the field's type, so a wrong one ("high" for a threshold) is a
    ValidationError naming the field, not a TypeError from a comparison."""
    kinds = _kinds(hint)
    if float in kinds and (isinstance(value, bool) or not isinstance(value, int | float)):
        raise ValidationError(f"{name} must be a number, got {value!r}")
    if int in kinds and (isinstance(value, bool) or not isinstance(value, int)):
        raise ValidationError(f"{name} must be an integer, got {value!r}")
    if bool in kinds and not isinstance(value, bool):
        raise ValidationError(f"{name} must be true or false, got {value!r}")
    if (str in kinds or _literal_values(hint)) and not isinstance(value, str):
        raise ValidationError(f"{name} must be a string, got {value!r}")
