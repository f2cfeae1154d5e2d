"""What every LLM summarizer shares, whatever the provider: prompts, a fallback model,
output checks, a spend guard, a circuit breaker (bad credentials, a provider down), multi-part
summarization of inputs too large for one call, and accounting.

A provider subclasses :class:`LLMSummarizer` and implements one method, ``_complete``:
send a system and a user prompt, return a :class:`Completion`, and map its SDK's
failures to :class:`ProviderError` (``kind="auth"`` for 401/403). Retries with backoff
are the SDK's job (``max_retries``); nothing here retries the same model again.

One ``summarize()`` call, in order:

1. the input is rendered and counted; if it is larger than one call may carry (a share
   of ``context_window`` given by :func:`chunk_ratio`, over ``SAFETY_MARGIN``), the
   items are split by tokens into ``parts`` parts or more (an assistant message keeps
   the tool results that follow it), the parts are summarized concurrently, and the
   partial summaries are merged, in rounds while they are still too large together;
2. each provider call: the circuit breaker (per model; see :class:`CircuitBreaker`)
   and the spend guard may refuse it without a request; the primary model is asked; on a failure that is not about credentials or
   the input's size, the ``fallback_model`` once; the answer is unwrapped ("Summary:",
   a code fence) and checked (empty, no letters, a refusal, not shorter than its input);
3. a provider saying the input is too long for its context makes the whole summary
   start over split into smaller parts (at most twice).

Every failure ends as :class:`~lossless.core.errors.SummarizerError`; the compaction engine
then escalates (aggressive mode, then deterministic extraction), so no message is lost.
"""

from __future__ import annotations

import math
import re
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from types import TracebackType
from typing import Any, Literal, TypeVar

from lossless.core.errors import SummarizerError, ValidationError
from lossless.core.scripts import CJK_LETTERS
from lossless.core.stats import BreakerState
from lossless.core.tokens import TokenCounter
from lossless.core.zones import zone_of
from lossless.summarize.base import SummaryItem, SummaryRequest, SummaryResult
from lossless.summarize.guards import CircuitBreaker, SpendGuard
from lossless.summarize.prompts import (
    PromptKind,
    build_merge_prompt,
    build_prompt,
    prompt_kind,
    render_item,
)

__all__ = [
    "BASE_CHUNK_RATIO",
    "DEFAULT_CONTEXT_WINDOW",
    "MIN_CHUNK_RATIO",
    "SAFETY_MARGIN",
    "CircuitBreaker",
    "Completion",
    "LLMSummarizer",
    "ProviderError",
    "SpendGuard",
    "chunk_ratio",
    "clean_output",
    "split_units",
    "tool_units",
]

BASE_CHUNK_RATIO = 0.4  # share of the window one call's input may take, for small items
MIN_CHUNK_RATIO = 0.15  # ... never less than this, however large the items are
SAFETY_MARGIN = 1.2  # our token count may be ~20 % below the provider's tokenizer
DEFAULT_CONTEXT_WINDOW = 128_000

# Items whose average share of the window (with the margin) is below this leave the
# ratio at its base; above it the ratio falls twice as fast as the share grows.
_SMALL_ITEM_SHARE = 0.1
_MAX_RESPLITS = 2  # times a context-length error may make a summary start over, smaller
_MAX_MERGE_ROUNDS = 16  # each round at least halves the partials; this is a backstop
_LENGTH_REASONS = frozenset({"length", "max_tokens", "model_length"})

ProviderErrorKind = Literal["auth", "context_length", "timeout", "connection", "status", "malformed"]


class ProviderError(SummarizerError):
    """A provider call failed. ``kind``: ``auth`` (401/403: opens the circuit breaker,
    no fallback model), ``context_length`` (the input is too long for the model: the
    summary is split further), else ``timeout``, ``connection``, ``status`` (any other
    HTTP error) or ``malformed`` (a reply of the wrong shape), which try the fallback
    model. ``status`` is the HTTP status, if there was one."""

    def __init__(self, message: str, *, kind: ProviderErrorKind = "status", status: int | None = None) -> None:
        super().__init__(message)
        self.kind: ProviderErrorKind = kind
        self.status = status


class _ContextLengthExceeded(SummarizerError):
    """The provider said the input does not fit; the summary starts over, split."""


@dataclass(frozen=True, slots=True)
class Completion:
    """One provider answer. Token counts are the provider's own (None if not reported);
    ``finish_reason`` as the provider says it (``stop``, ``length``, ``end_turn``,
    ``max_tokens`` …)."""

    text: str
    model: str
    input_tokens: int | None = None
    output_tokens: int | None = None
    finish_reason: str | None = None


def chunk_ratio(avg_item_tokens: float, window: int) -> float:
    """The share of ``window`` that one call's conversation input may take.

    ``BASE_CHUNK_RATIO`` (0.4) while an average item, times ``SAFETY_MARGIN``, is at most
    a tenth of the window; then it falls by twice the excess share, down to
    ``MIN_CHUNK_RATIO`` (0.15), reached when an item is about 22 % of the window.
    Large items leave less room for estimation error (an item is never cut, so one big
    one can overshoot a part by its whole size) and say more per item, so parts are kept
    smaller. The function is continuous and never increases as items grow.
    """
    if window <= 0 or avg_item_tokens <= 0:
        return BASE_CHUNK_RATIO
    share = avg_item_tokens * SAFETY_MARGIN / window
    return max(MIN_CHUNK_RATIO, BASE_CHUNK_RATIO - 2.0 * max(0.0, share - _SMALL_ITEM_SHARE))


# -- output checks ---------------------------------------------------------------------

_FENCED_RE = re.compile(r"\A```[\w+-]*[ \t]*\n(.*?)\n?[ \t]*```\Z", re.DOTALL)
# (and the same in Chinese, as a model asked to write in the conversation's language
# wraps it: "摘要：", "## 总结", "以下是对话的摘要：")
_LABEL_RE = re.compile(
    r"\A(?:#{1,6}[ \t]*)?(?:\*\*|__)?(?:(?:(?:leaf|condensed|root|merged|final|conversation)[ \t]+)?"
    r"summary|(?:对话|会话)?(?:摘要|总结))(?:\*\*|__)?[ \t]*(?:[:：](?:\*\*|__)?[ \t]*|(?=\n))",
    re.IGNORECASE,
)
_PREAMBLE_RE = re.compile(r"\A(?:(?:here is|here's|below is)\b[^\n]{0,80}\bsummary\b[^\n]*:|"
                          r"(?:以下是|下面是)[^\n]{0,40}(?:摘要|总结)[^\n]*[:：])[ \t]*\n", re.IGNORECASE)
_REFUSAL_RE = re.compile(
    r"\A(?:i['’]m sorry|i am sorry|sorry,|i apologi[sz]e|as an ai\b|"
    r"i (?:cannot|can['’]t|can not|won['’]t|will not|am unable to|['’]m unable to|am not able to)\b|"
    # the same in Chinese, how a model asked to write in the conversation's language refuses
    r"(?:很|非常)?抱歉|对不起|作为(?:一个|一名)?(?:ai|人工智能)|我(?:无法|不能|没办法|不可以)(?:为您|帮您|帮你)?"
    r"(?:帮|协助|提供|完成|处理|回答|总结|概括))",
    re.IGNORECASE,
)
_REFUSAL_MAX_WORDS = 60
_CJK_CHAR = re.compile(f"[{CJK_LETTERS}]")


def clean_output(text: str) -> str:
    """``text`` without the wrappers models like to add: a preamble line ("Here is the
    summary:"), a leading "Summary:" label or heading, a code fence around everything."""
    out = text.strip()
    for _ in range(3):  # wrappers nest: "Summary:" then a fence, or the other way round
        before = out
        out = _PREAMBLE_RE.sub("", out, count=1).strip()
        out = _LABEL_RE.sub("", out, count=1).strip()
        fenced = _FENCED_RE.match(out)
        if fenced:
            out = fenced.group(1).strip()
        if out == before:
            break
    return out


def _problem(text: str) -> str | None:
    """Why ``text`` is not a summary, or None. Deliberately conservative."""
    if not any(ch.isalnum() for ch in text):
        return "output has no letters or digits"
    visible = [ch for ch in text if not ch.isspace()]
    if len(visible) >= 8 and len(set(visible)) == 1:
        return "output is one character repeated"
    # Chinese and Japanese are not written with spaces: two characters count as a word
    if _REFUSAL_RE.match(text) and len(text.split()) + len(_CJK_CHAR.findall(text)) // 2 <= _REFUSAL_MAX_WORDS:
        return f"the model refused: {text[:120]!r}"
    return None


# -- splitting -------------------------------------------------------------------------

_Unit = tuple[tuple[SummaryItem, ...], int]  # items that stay together, their tokens


def tool_units(items: Sequence[SummaryItem]) -> list[tuple[SummaryItem, ...]]:
    """Items grouped into units that are never split: a tool result stays with the
    message before it (the assistant message that called the tool, with any results
    already attached); everything else is a unit of its own."""
    units: list[list[SummaryItem]] = []
    for item in items:
        if item.kind == "message" and item.role == "tool" and units:
            units[-1].append(item)
        else:
            units.append([item])
    return [tuple(u) for u in units]


def _share_split(units: Sequence[_Unit], parts: int) -> list[list[_Unit]]:
    """``units`` cut into at most ``parts`` runs of about equal tokens: a unit goes to
    the next run when its midpoint lies past the current run's share."""
    total = sum(t for _, t in units)
    share = total / parts
    runs: list[list[_Unit]] = [[]]
    cumulative = 0
    for unit in units:
        if runs[-1] and len(runs) < parts and cumulative + unit[1] / 2 > share * len(runs):
            runs.append([])
        runs[-1].append(unit)
        cumulative += unit[1]
    if len(runs) == 1 and len(units) > 1:  # defensive: always make progress
        runs = [list(units[:-1]), [units[-1]]]
    return runs


def split_units(units: Sequence[_Unit], budget: int, parts: int = 2) -> list[list[_Unit]]:
    """``units`` (with their token counts) in order, cut into runs of at most ``budget``
    tokens: ``max(parts, ⌈total / budget⌉)`` runs of about equal size, a run still over
    budget cut again. A single unit over budget is a run of its own."""
    total = sum(t for _, t in units)
    if total <= budget or len(units) <= 1:
        return [list(units)]
    count = min(len(units), max(parts, math.ceil(total / max(1, budget))))
    out: list[list[_Unit]] = []
    for run in _share_split(units, count):
        out.extend(split_units(run, budget, 2))
    return out


# -- accounting ------------------------------------------------------------------------


@dataclass
class _Run:
    """What one ``summarize()`` cost, summed over its calls (parts run in threads)."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    used_fallback_model: bool = False
    truncated: bool = False
    model: str | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count_call(self) -> None:
        with self.lock:
            self.calls += 1

    def add(self, model: str, input_tokens: int, output_tokens: int, *, fallback: bool, truncated: bool) -> None:
        with self.lock:
            self.input_tokens += input_tokens
            self.output_tokens += output_tokens
            self.used_fallback_model |= fallback
            self.truncated |= truncated
            self.model = model


T = TypeVar("T")
R = TypeVar("R")


# -- the base class --------------------------------------------------------------------


class LLMSummarizer(ABC):
    """A :class:`~lossless.summarize.base.Summarizer` backed by a chat model.

    ``model`` answers first; ``fallback_model`` (optional) gets one try when a call to
    ``model`` fails for a reason other than credentials or input size. ``timeout`` is
    per request (the SDK retries within its own ``max_retries``). ``context_window`` is
    the summarizer model's window in tokens, which decides when an input is summarized
    in ``parts`` (>= 2) parts, up to ``max_concurrency`` at a time. ``max_output_tokens``
    caps each answer (default: twice the target, at least 64). ``spend_guard`` and
    ``breaker`` are described on their classes; by default there is no spend limit and
    a breaker of 3 failures / 300 s.

    Result metadata: ``provider``, ``model`` (the model that answered the last call),
    ``input_tokens`` and ``output_tokens`` (summed over calls: the provider's usage, else
    our own count), ``latency_ms``, ``calls`` (provider calls made, including failed
    ones, parts and merges; SDK retries inside one call are not counted), ``parts`` (1
    for a single call), ``used_fallback_model``, ``prompt`` (leaf, condensed or root),
    ``mode``, and ``truncated`` when an answer hit ``max_tokens``.
    """

    name: str = "llm"
    default_context_window: int = DEFAULT_CONTEXT_WINDOW

    def __init__(
        self,
        model: str,
        *,
        fallback_model: str | None = None,
        timeout: float = 60.0,
        context_window: int | None = None,
        parts: int = 2,
        max_concurrency: int = 4,
        max_output_tokens: int | None = None,
        spend_guard: SpendGuard | None = None,
        breaker: CircuitBreaker | None = None,
    ) -> None:
        cls = type(self).__name__
        if not isinstance(model, str) or not model.strip():
            raise ValidationError(f"{cls}: model must be a non-empty string, got {model!r}")
        if fallback_model is not None and (not isinstance(fallback_model, str) or not fallback_model.strip()):
            raise ValidationError(f"{cls}: fallback_model must be a non-empty string or None, got {fallback_model!r}")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            raise ValidationError(f"{cls}: timeout must be a positive number of seconds, got {timeout!r}")
        window = self.default_context_window if context_window is None else context_window
        if isinstance(window, bool) or not isinstance(window, int) or window < 256:
            raise ValidationError(f"{cls}: context_window must be an integer >= 256, got {window!r}")
        for label, value, least in (("parts", parts, 2), ("max_concurrency", max_concurrency, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ValidationError(f"{cls}: {label} must be an integer >= {least}, got {value!r}")
        if max_output_tokens is not None and (
            isinstance(max_output_tokens, bool) or not isinstance(max_output_tokens, int) or max_output_tokens < 1
        ):
            raise ValidationError(f"{cls}: max_output_tokens must be a positive integer, got {max_output_tokens!r}")
        self.model = model.strip()
        fallback = fallback_model.strip() if fallback_model else None
        self.fallback_model = fallback if fallback != self.model else None
        self.timeout = float(timeout)
        self.context_window = window
        self.parts = parts
        self.max_concurrency = max_concurrency
        self.max_output_tokens = max_output_tokens
        self.spend_guard = spend_guard
        self.breaker = breaker if breaker is not None else CircuitBreaker()

    # -- what a provider implements --------------------------------------------------

    @property
    def provider(self) -> str:
        """Who serves the model, as recorded in metadata (default: ``name``)."""
        return self.name

    @abstractmethod
    def _complete(self, system: str, user: str, *, model: str, max_tokens: int, timeout: float) -> Completion:
        """One chat call. Raise :class:`ProviderError` on failure (``kind="auth"`` for
        rejected credentials, ``"context_length"`` for an input too long)."""

    def close(self) -> None:  # noqa: B027 - optional hook: not every provider holds a client
        """Release the provider client's connections (a no-op here)."""

    def __enter__(self) -> LLMSummarizer:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        fallback = f", fallback_model={self.fallback_model!r}" if self.fallback_model else ""
        return f"{type(self).__name__}(model={self.model!r}{fallback}, context_window={self.context_window})"

    def unavailable(self) -> str | None:
        """Why no model can be called now (every circuit it would use is open), or
        None. Compaction asks first and, if so, uses its fallback at once."""
        reasons = []
        for model in [self.model] + ([self.fallback_model] if self.fallback_model else []):
            why = self.breaker.blocked(model)
            if why is None:
                return None
            reasons.append(f"{model}: {why}")
        return f"{self.name}: " + "; ".join(reasons)

    def breaker_state(self) -> BreakerState:
        """The circuit breaker's open or failing circuits (see :class:`CircuitBreaker`)."""
        return {"provider": self.provider, "state": self.breaker.state, "circuits": self.breaker.snapshot()}

    # -- the Summarizer protocol -----------------------------------------------------

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        """Summarize ``request`` in one call, or in parts then merged when it is too
        large for one. Raises SummarizerError on any failure."""
        if not request.items:
            raise SummarizerError(f"{self.name}: nothing to summarize")
        started = time.perf_counter()
        run = _Run()
        kind = prompt_kind(request)
        counter = request.counter
        zone = zone_of(request.timezone)
        units: list[_Unit] = [
            (unit, sum(counter.count(render_item(it, zone)) + 2 for it in unit)) for unit in tool_units(request.items)
        ]
        budget = self.input_budget(request, units)
        resplits = 0
        try:
            while True:
                try:
                    text, parts = self._staged(request, units, budget, kind, run)
                    break
                except _ContextLengthExceeded as exc:
                    total = sum(t for _, t in units)
                    if len(units) < 2 or resplits >= _MAX_RESPLITS:
                        raise SummarizerError(str(exc)) from exc
                    resplits += 1
                    budget = max(1, min(budget, total) // 2)  # forces at least one more cut
        except SummarizerError as exc:
            # what the failed attempt spent, for the compactor's accounting
            exc.metadata = {"provider": self.provider, "calls": run.calls,  # type: ignore[attr-defined]
                            "input_tokens": run.input_tokens, "output_tokens": run.output_tokens}
            raise
        metadata: dict[str, Any] = {
            "provider": self.provider,
            "model": run.model,
            "input_tokens": run.input_tokens,
            "output_tokens": run.output_tokens,
            "latency_ms": round((time.perf_counter() - started) * 1000),
            "calls": run.calls,
            "parts": parts,
            "used_fallback_model": run.used_fallback_model,
            "prompt": kind,
            "mode": request.mode,
        }
        if run.truncated:
            metadata["truncated"] = True
        return SummaryResult(text, run.model, metadata)

    def input_budget(self, request: SummaryRequest, units: Sequence[_Unit]) -> int:
        """Tokens of rendered conversation one call may carry: ``context_window`` times
        :func:`chunk_ratio`, and never more than what the window leaves after the
        instructions, the previous summary and the answer, over ``SAFETY_MARGIN``."""
        counter = request.counter
        total = sum(t for _, t in units)
        avg = total / max(1, len(request.items))
        window = self.context_window
        system, _ = build_prompt(replace(request, items=request.items[:1], previous_summary=None))
        overhead = counter.count(system) + counter.count(request.previous_summary or "") + 200
        room = min(window * chunk_ratio(avg, window), window - overhead - self._max_tokens(request.target_tokens))
        # a window too small for the instructions: still parts of a sensible size
        return max(1, int(max(room, window * MIN_CHUNK_RATIO) / SAFETY_MARGIN))

    # -- stages ----------------------------------------------------------------------

    def _staged(
        self, request: SummaryRequest, units: Sequence[_Unit], budget: int, kind: PromptKind, run: _Run
    ) -> tuple[str, int]:
        """The summary text and the number of parts it was made from."""
        counter = request.counter
        runs = split_units(units, budget, self.parts)
        if len(runs) == 1:
            system, user = build_prompt(request, kind=kind)
            source = sum(counter.count(it.text) for it in request.items)
            return self._call(system, user, request.target_tokens, counter, source, run), 1

        n = len(runs)
        target = request.target_tokens

        def part(index: int) -> tuple[SummaryItem, int]:
            items = tuple(it for unit, _ in runs[index] for it in unit)
            source = sum(counter.count(it.text) for it in items)
            sub = replace(
                request,
                items=items,
                target_tokens=max(1, min(target, source // 2)),
                previous_summary=request.previous_summary if index == 0 else None,
            )
            system, user = build_prompt(sub, kind=kind, part=(index + 1, n))
            text = self._call(system, user, sub.target_tokens, counter, source, run)
            return _span_item(items, text, request.depth, f"part-{index + 1}"), source

        partials = self._map(part, list(range(n)))
        for _ in range(_MAX_MERGE_ROUNDS):
            sizes = [counter.count(render_item(p, zone_of(request.timezone))) + 8 for p, _ in partials]
            if len(partials) <= 2 or sum(sizes) <= budget:
                return self._merge(request, partials, kind, run), n
            groups: list[list[tuple[SummaryItem, int]]] = [[]]
            used = 0
            for partial, size in zip(partials, sizes, strict=True):
                if len(groups[-1]) >= 2 and used + size > budget:
                    groups.append([])
                    used = 0
                groups[-1].append(partial)
                used += size

            def merge_group(group: list[tuple[SummaryItem, int]]) -> tuple[SummaryItem, int]:
                if len(group) == 1:
                    return group[0]
                text = self._merge(request, group, kind, run)
                items = [p for p, _ in group]
                return _span_item(items, text, request.depth, "merge"), sum(s for _, s in group)

            partials = self._map(merge_group, groups)
        raise SummarizerError(f"{self.name}: partial summaries did not converge")  # pragma: no cover

    def _merge(self, request: SummaryRequest, partials: Sequence[tuple[SummaryItem, int]], kind: PromptKind, run: _Run) -> str:
        system, user = build_merge_prompt(request, [p for p, _ in partials], kind=kind)
        source = sum(s for _, s in partials)
        return self._call(system, user, request.target_tokens, request.counter, source, run)

    def _map(self, fn: Callable[[T], R], tasks: Sequence[T]) -> list[R]:
        """``fn`` over ``tasks`` in a bounded pool, results in order; on the first
        failure the tasks not started yet are cancelled and the failure is raised."""
        if len(tasks) <= 1 or self.max_concurrency == 1:
            return [fn(t) for t in tasks]
        with ThreadPoolExecutor(max_workers=min(self.max_concurrency, len(tasks)),
                                thread_name_prefix=f"lossless-{self.name}") as pool:
            futures: list[Future[R]] = [pool.submit(fn, t) for t in tasks]
            done, _ = wait(futures, return_when=FIRST_EXCEPTION)
            failed = next((f for f in futures if f in done and f.exception() is not None), None)
            if failed is not None:
                for f in futures:
                    f.cancel()
                exc = failed.exception()
                assert exc is not None
                raise exc
            return [f.result() for f in futures]

    # -- one provider call -----------------------------------------------------------

    def _max_tokens(self, target: int) -> int:
        return self.max_output_tokens or max(64, 2 * target)

    def _call(self, system: str, user: str, target: int, counter: TokenCounter, source_tokens: int, run: _Run) -> str:
        """One summary from the primary model, else the fallback model; checked."""
        max_tokens = self._max_tokens(target)
        prompt_tokens = counter.count(system) + counter.count(user)
        models = [self.model] + ([self.fallback_model] if self.fallback_model else [])
        failures: list[str] = []
        for attempt, model in enumerate(models):
            blocked = self.breaker.blocked(model)
            if blocked is not None and attempt + 1 < len(models):
                failures.append(f"{model}: {blocked}")
                continue  # the fallback model may still be up
            self.breaker.check(f"{self.name} summarizer ({model})", key=model)
            spend = self.spend_guard.reserve(prompt_tokens + max_tokens) if self.spend_guard else None
            try:
                completion = self._complete(system, user, model=model, max_tokens=max_tokens, timeout=self.timeout)
            except ProviderError as exc:
                run.count_call()
                if exc.kind == "auth":
                    self.breaker.record_auth_failure(model)
                    raise SummarizerError(f"{self.name} ({model}): {exc}") from exc
                if exc.kind == "context_length":
                    self.breaker.record_success(model)  # it answered: it is up
                    raise _ContextLengthExceeded(f"{self.name} ({model}): {exc}") from exc
                if _unavailable(exc):
                    self.breaker.record_failure(model, f"{exc.kind}{f' {exc.status}' if exc.status else ''}")
                else:
                    self.breaker.record_success(model)
                failures.append(f"{model}: {exc}")
                continue
            except Exception as exc:  # a provider's bug or an odd reply: still just a failure
                run.count_call()
                self.breaker.record_failure(model, type(exc).__name__)
                failures.append(f"{model}: {type(exc).__name__}: {exc}")
                continue
            run.count_call()
            self.breaker.record_success(model)
            used_in = completion.input_tokens if completion.input_tokens is not None else prompt_tokens
            used_out = (
                completion.output_tokens if completion.output_tokens is not None else counter.count(completion.text)
            )
            if spend is not None and self.spend_guard is not None:
                self.spend_guard.settle(spend, used_in + used_out)
            truncated = (completion.finish_reason or "") in _LENGTH_REASONS
            run.add(completion.model or model, used_in, used_out, fallback=attempt > 0, truncated=truncated)
            return self._checked(completion, counter, source_tokens, model)
        raise SummarizerError(f"{self.name}: every model failed: " + "; ".join(failures))

    def _checked(self, completion: Completion, counter: TokenCounter, source_tokens: int, model: str) -> str:
        text = clean_output(completion.text or "")
        where = f"{self.name} ({completion.model or model})"
        if not text:
            if (completion.finish_reason or "") in _LENGTH_REASONS:
                raise SummarizerError(f"{where}: the answer hit max_tokens before any text")
            raise SummarizerError(f"{where}: empty output (finish_reason={completion.finish_reason!r})")
        problem = _problem(text)
        if problem:
            raise SummarizerError(f"{where}: {problem}")
        tokens = counter.count(text)
        if source_tokens > 0 and tokens >= source_tokens:
            raise SummarizerError(f"{where}: output of {tokens} tokens is not shorter than its input of {source_tokens}")
        return text


def _unavailable(exc: ProviderError) -> bool:
    """Whether a failure says the provider is down or overloaded (what opens the
    breaker): a timeout, no connection, 408, 429 or a 5xx; not a reply of the wrong
    shape or another 4xx, which show it is up."""
    if exc.kind in ("timeout", "connection"):
        return True
    return exc.kind == "status" and (exc.status is None or exc.status in (408, 429) or exc.status >= 500)


def _span_item(items: Sequence[SummaryItem], text: str, depth: int, ref: str) -> SummaryItem:
    """A partial summary as an item covering ``items``' span (items are in order; times
    are not compared, since naive and aware ones may mix)."""
    return SummaryItem(
        kind="summary",
        ref=ref,
        text=text,
        first_seq=items[0].first_seq,
        last_seq=items[-1].last_seq,
        created_at=items[0].created_at,
        latest_at=items[-1].latest_at,
        depth=depth,
    )
