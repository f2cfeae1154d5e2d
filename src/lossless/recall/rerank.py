"""An optional rerank step over recall's best candidates (seed 001's retriever takes an
LLM reranker as a node postprocessor). Off by default (``Config.rerank``).

Two rerankers behind one small protocol (:class:`Reranker`: a question and candidate
texts in, an order out):

- :class:`LLMReranker` (``rerank="llm"``): the configured chat model through the
  OpenAI-compatible client. One request lists the numbered candidates and asks for
  their numbers, most useful first; the answer is read leniently (a JSON array, ``[3] >
  [1]``, a bare ``3, 1, 2``) but never guessed from prose. A timeout per request, no
  retries (a rerank that waits is worse than none), and a circuit breaker per model, so
  a provider that is down or keeps answering nonsense costs nothing for a while.
- :class:`CrossEncoderReranker` (``rerank="cross-encoder"``): a sentence-transformers
  cross-encoder loaded from a local folder (``rerank_model``); nothing is downloaded.

Whatever goes wrong (a timeout, an HTTP error, an answer with no ordering, an open
breaker, a model that does not load), :func:`rerank_order` logs it and returns None:
recall keeps its own order and assembly goes on. Only what the configuration names
wrongly (no model, a folder that is not there, a missing package) is an error, raised
when the reranker is built.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from lossless.core import environ
from lossless.core.errors import (
    LosslessError,
    MissingDependencyError,
    SummarizerError,
    ValidationError,
)
from lossless.core.textfit import fit_text
from lossless.core.tokens import TokenCounter
from lossless.embed.native import native_call
from lossless.providers.http import OPENAI_BASE_URL, PLACEHOLDER_API_KEY, public_url, status_detail
from lossless.summarize.guards import CircuitBreaker

if TYPE_CHECKING:
    from lossless.core.config import Config

__all__ = [
    "RERANK_KINDS",
    "CrossEncoderReranker",
    "LLMReranker",
    "RerankError",
    "RerankStats",
    "Reranker",
    "RerankerCache",
    "build_prompt",
    "make_reranker",
    "parse_order",
    "rerank_order",
]

RERANK_KINDS = ("llm", "cross-encoder")

log = logging.getLogger("lossless")

_SYSTEM = (
    "You rank search results. You get a question and numbered passages from an earlier conversation. "
    "Answer with the numbers of the passages that help answer the question, most useful first, "
    "as a JSON array of integers, for example [3, 1, 2]. Leave out passages that do not help. "
    "Answer with the array only."
)
_ARRAY = re.compile(r"\[\s*\d+\s*(?:,\s*\d+\s*)+,?\s*\]")  # [3, 1, 2]: at least two numbers
_BRACKETED = re.compile(r"\[\s*(\d+)\s*\]")  # [3] > [1] or "1. [3]" lines
_NUMBERS_ONLY = re.compile(r"[\s\d,;>|.#()\-]+")  # 3, 1, 2 / 3 > 1 > 2 / one per line
_LABEL = re.compile(r"\A(?:#{1,6}\s*)?(?:ranking|order|answer|result)s?\s*:\s*", re.IGNORECASE)
_FENCE = re.compile(r"\A```[\w+-]*\s*\n?(.*?)\n?\s*```\Z", re.DOTALL)


class RerankError(LosslessError):
    """One rerank failed (the caller keeps recall's order)."""


@dataclass
class RerankStats:
    """What a reranker has cost so far, summed over its calls (thread-safe)."""

    calls: int = 0
    failures: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    seconds: float = 0.0
    candidates: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, *, seconds: float, candidates: int, input_tokens: int = 0, output_tokens: int = 0,
            failed: bool = False) -> None:
        with self.lock:
            self.calls += 1
            self.failures += int(failed)
            self.seconds += seconds
            self.candidates += candidates
            self.input_tokens += input_tokens
            self.output_tokens += output_tokens

    def as_dict(self) -> dict[str, Any]:
        with self.lock:
            return {"calls": self.calls, "failures": self.failures, "input_tokens": self.input_tokens,
                    "output_tokens": self.output_tokens, "seconds": round(self.seconds, 4),
                    "candidates": self.candidates}


@runtime_checkable
class Reranker(Protocol):
    """Orders candidate texts for a question. ``rerank`` returns a permutation of
    ``range(len(texts))``, best first, or raises :class:`RerankError`."""

    name: str

    def rerank(self, query: str, texts: Sequence[str]) -> list[int]: ...


# -- the LLM prompt and its answer ---------------------------------------------------------


def build_prompt(query: str, texts: Sequence[str]) -> tuple[str, str]:
    """The system and user prompts that ask for an ordering of ``texts``."""
    lines = [f"Question: {' '.join(query.split())}", "", "Passages:"]
    lines += [f"[{i}] {' '.join(text.split())}" for i, text in enumerate(texts, start=1)]
    return _SYSTEM, "\n".join(lines)


def parse_order(answer: str, n: int) -> list[int]:
    """The order a model's ``answer`` gives to ``n`` candidates numbered from 1, as a
    permutation of ``range(n)``: the numbers it names first (each once, out-of-range ones
    ignored), then the others in recall's order. Read from, in turn: a JSON array of two
    or more numbers; bracketed numbers (``[3] > [1]``); an answer made of numbers and
    separators only. Anything else, or no usable number, raises :class:`RerankError`:
    an ordering is never guessed from prose."""
    text = answer.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1).strip()
    text = _LABEL.sub("", text).strip()
    array = _ARRAY.search(text)
    if array is not None:
        numbers = [int(x) for x in re.findall(r"\d+", array.group())]
    elif _BRACKETED.search(text):
        numbers = [int(x) for x in _BRACKETED.findall(text)]
    elif text and _NUMBERS_ONLY.fullmatch(text):
        numbers = [int(x) for x in re.findall(r"\d+", text)]
    else:
        raise RerankError(f"the answer is not an ordering: {answer[:120]!r}")
    picked: list[int] = []
    for k in numbers:
        if 1 <= k <= n and k - 1 not in picked:
            picked.append(k - 1)
    if not picked:
        raise RerankError(f"the answer names no candidate between 1 and {n}: {answer[:120]!r}")
    chosen = set(picked)
    return picked + [i for i in range(n) if i not in chosen]


def _env(name: str) -> str | None:
    return environ.value(name)  # empty counts as unset


class LLMReranker:
    """Reranks with a chat model over ``/v1/chat/completions`` (OpenAI or any compatible
    server). ``base_url`` and ``api_key`` default to ``$OPENAI_BASE_URL`` and
    ``$OPENAI_API_KEY``; a local server may go without a key. ``timeout`` bounds each
    request (no retries); ``breaker`` (default: 3 failures in a row pause the model for
    60 s) also counts answers that hold no ordering."""

    name = "llm"

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 timeout: float = 5.0, breaker: CircuitBreaker | None = None) -> None:
        try:
            import openai
        except ImportError as exc:
            raise MissingDependencyError("rerank='llm' needs the openai package: pip install 'lossless[openai]'") \
                from exc
        if not isinstance(model, str) or not model.strip():
            raise ValidationError(f"LLMReranker: model must be a non-empty string, got {model!r}")
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
            raise ValidationError(f"LLMReranker: timeout must be a positive number of seconds, got {timeout!r}")
        base_url = base_url or _env("OPENAI_BASE_URL")
        api_key = api_key or _env("OPENAI_API_KEY")
        self.base_url = public_url(base_url) if base_url else OPENAI_BASE_URL
        official = self.base_url == OPENAI_BASE_URL
        if api_key is None and official:
            raise ValidationError(f"rerank='llm': no API key for {OPENAI_BASE_URL} (model {model}): set "
                                  "OPENAI_API_KEY, or rerank_base_url for a local server")
        self.model = model.strip()
        self.timeout = float(timeout)
        self.breaker = breaker if breaker is not None else CircuitBreaker(failure_cooldown=60.0)
        self.stats = RerankStats()
        # api.openai.com's newer models take only max_completion_tokens; compatible servers know max_tokens
        self._limit_param = "max_completion_tokens" if official else "max_tokens"
        self._client = openai.OpenAI(base_url=base_url or OPENAI_BASE_URL, api_key=api_key or PLACEHOLDER_API_KEY,
                                     timeout=self.timeout, max_retries=0)

    def close(self) -> None:
        self._client.close()

    def rerank(self, query: str, texts: Sequence[str]) -> list[int]:
        where = f"reranker ({self.model} at {self.base_url})"
        try:
            self.breaker.check(where, key=self.model)
        except SummarizerError as exc:
            raise RerankError(str(exc)) from exc
        system, user = build_prompt(query, texts)
        started = time.perf_counter()
        try:
            answer, used_in, used_out = self._ask(system, user, len(texts))
            order = parse_order(answer, len(texts))
        except RerankError as exc:
            self.stats.add(seconds=time.perf_counter() - started, candidates=len(texts), failed=True)
            self.breaker.record_failure(self.model, str(exc)[:80])
            raise RerankError(f"{where}: {exc}") from exc
        self.breaker.record_success(self.model)
        self.stats.add(seconds=time.perf_counter() - started, candidates=len(texts), input_tokens=used_in,
                       output_tokens=used_out)
        return order

    def _ask(self, system: str, user: str, n: int) -> tuple[str, int, int]:
        """The model's answer text and the tokens it reports (in, out)."""
        import openai

        limit = {self._limit_param: 16 + 4 * n}  # "[12, 3, …]": a few tokens a number
        try:
            response = self._client.chat.completions.create(
                model=self.model, messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
                timeout=self.timeout, **limit)  # type: ignore[call-overload]
        except openai.APITimeoutError as exc:
            raise RerankError(f"timed out after {self.timeout:g}s") from exc
        except openai.APIConnectionError as exc:
            raise RerankError(f"cannot connect ({exc.__cause__ or exc})") from exc
        except openai.APIStatusError as exc:
            raise RerankError(f"HTTP {exc.status_code}: {status_detail(exc)}") from exc
        except (openai.OpenAIError, ValueError) as exc:
            raise RerankError(f"bad reply: {exc}") from exc
        choices = getattr(response, "choices", None)
        message = getattr(choices[0], "message", None) if isinstance(choices, list) and choices else None
        content = getattr(message, "content", None)
        usage = getattr(response, "usage", None)
        used_in, used_out = getattr(usage, "prompt_tokens", None), getattr(usage, "completion_tokens", None)
        return (content if isinstance(content, str) else "",
                used_in if isinstance(used_in, int) else 0, used_out if isinstance(used_out, int) else 0)


class CrossEncoderReranker:
    """Reranks with a sentence-transformers cross-encoder from a local folder (for
    example a copy of ``cross-encoder/ms-marco-MiniLM-L-6-v2``). Nothing is downloaded:
    the folder must hold the model. The model loads on the first rerank."""

    name = "cross-encoder"

    def __init__(self, path: str | os.PathLike[str], *, device: str | None = None) -> None:
        folder = Path(path).expanduser()
        if not folder.is_dir():
            raise ValidationError(f"rerank_model: no cross-encoder model folder at {folder} (give the path of a local "
                                  "folder holding one; lossless never downloads a model at run time)")
        if not (folder / "config.json").is_file():
            raise ValidationError(f"rerank_model: {folder} holds no config.json, so it is not a sentence-transformers "
                                  "or Hugging Face model folder")
        try:
            import sentence_transformers  # noqa: F401
        except ImportError as exc:
            raise MissingDependencyError("rerank='cross-encoder' needs sentence-transformers: "
                                         "pip install 'lossless[torch]'") from exc
        self.path = folder
        self.device = device
        self.stats = RerankStats()
        self._model: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                from sentence_transformers import CrossEncoder

                try:
                    self._model = CrossEncoder(str(self.path), device=self.device, local_files_only=True)
                except Exception as exc:  # a folder that is not a cross-encoder, weights missing …
                    raise RerankError(f"cannot load the cross-encoder at {self.path}: {type(exc).__name__}: {exc}") \
                        from exc
            return self._model

    def rerank(self, query: str, texts: Sequence[str]) -> list[int]:
        started = time.perf_counter()
        try:
            with native_call():  # torch releases the GIL: no daemon thread may be in it at exit
                scores = self._load().predict([(query, t) for t in texts], show_progress_bar=False)
        except RerankError:
            self.stats.add(seconds=time.perf_counter() - started, candidates=len(texts), failed=True)
            raise
        except Exception as exc:
            self.stats.add(seconds=time.perf_counter() - started, candidates=len(texts), failed=True)
            raise RerankError(f"cross-encoder at {self.path}: {type(exc).__name__}: {exc}") from exc
        self.stats.add(seconds=time.perf_counter() - started, candidates=len(texts))
        values = [float(s) for s in scores]
        return sorted(range(len(texts)), key=lambda i: (-values[i], i))


# -- building one from the configuration, and using it ------------------------------------


def make_reranker(config: Config) -> Reranker | None:
    """The reranker ``config`` asks for, or None when ``rerank`` is off.

    ``llm``: model ``rerank_model``, else ``model`` (the agent's chat model), else
    ``$LOSSLESS_SUMMARIZER_MODEL``; endpoint ``rerank_base_url``, else
    ``$LOSSLESS_SUMMARIZER_BASE_URL``, else ``$OPENAI_BASE_URL``, else OpenAI's; the key
    from ``$OPENAI_API_KEY`` (never stored with the settings). ``cross-encoder``:
    ``rerank_model`` is the path of a local model folder. Raises ValidationError naming
    what is missing, MissingDependencyError naming the extra to install."""
    if config.rerank is None:
        return None
    if config.rerank == "cross-encoder":
        if not config.rerank_model:
            raise ValidationError("rerank='cross-encoder' needs rerank_model: the path of a local cross-encoder folder")
        return CrossEncoderReranker(config.rerank_model)
    model = config.rerank_model or config.model or _env("LOSSLESS_SUMMARIZER_MODEL")
    if not model:
        raise ValidationError("rerank='llm' needs a chat model: set rerank_model (or model, or "
                              "$LOSSLESS_SUMMARIZER_MODEL)")
    base_url = config.rerank_base_url or _env("LOSSLESS_SUMMARIZER_BASE_URL")
    return LLMReranker(model, base_url=base_url, timeout=config.rerank_timeout_seconds)


class RerankerCache:
    """The reranker for a configuration, built once per distinct setting (a benchmark may
    swap the configuration between calls). ``override``, when set, is used instead."""

    def __init__(self) -> None:
        self.override: Reranker | None = None
        self._built: dict[tuple[Any, ...], Reranker | None] = {}
        self._lock = threading.Lock()

    def get(self, config: Config) -> Reranker | None:
        if self.override is not None:
            return self.override
        key = (config.rerank, config.rerank_model, config.model, config.rerank_base_url,
               config.rerank_timeout_seconds)
        with self._lock:
            if key not in self._built:
                self._built[key] = make_reranker(config)
            return self._built[key]

    def close(self) -> None:
        with self._lock:
            built, self._built = list(self._built.values()), {}
        for reranker in built:
            closer = getattr(reranker, "close", None)
            if callable(closer):
                closer()


def rerank_order(reranker: Reranker, query: str, texts: Sequence[str], counter: TokenCounter,
                 tokens_each: int) -> list[int] | None:
    """The reranker's order for ``texts`` (each cut to ``tokens_each`` tokens, keeping the
    sentences that share the question's words), or None, logged, when it fails or answers
    with something that is not an order of them: the caller keeps its own order."""
    # a text far beyond the cut is read only in part: counting a whole 100k-token log per query costs more than it gives
    heads = [t[: tokens_each * 12] for t in texts]
    shown = [fit_text(t, tokens_each, counter, focus=query) or t[: tokens_each * 3] for t in heads]
    try:
        order = reranker.rerank(query, shown)
    except RerankError as exc:
        log.warning("lossless: rerank failed, recall keeps its own order: %s", exc)
        return None
    except Exception as exc:  # a plug-in's bug must not fail assembly either
        log.warning("lossless: rerank failed, recall keeps its own order: %s: %s", type(exc).__name__, exc)
        return None
    if sorted(order) != list(range(len(texts))):
        log.warning("lossless: the %s reranker returned %r, not an order of %d candidates; recall keeps its own order",
                    getattr(reranker, "name", "?"), order[:20], len(texts))
        return None
    return order
