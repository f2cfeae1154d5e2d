"""Summaries from a local GGUF model run in-process by llama-cpp-python. Needs the
``llama`` extra (which builds llama.cpp from source on most machines)."""

from __future__ import annotations

import importlib
import os
import threading
from typing import Any

from lossless.core.errors import MissingDependencyError, ValidationError
from lossless.providers.errors import is_context_length_error
from lossless.summarize.llm import (
    CircuitBreaker,
    Completion,
    LLMSummarizer,
    ProviderError,
    SpendGuard,
)

__all__ = ["LlamaCppSummarizer"]


class LlamaCppSummarizer(LLMSummarizer):
    """An :class:`~lossless.summarize.llm.LLMSummarizer` over a local GGUF file.

    ``model_path`` is the model (``fallback_model``, if given, another GGUF path). A
    model is loaded on first use with ``n_ctx = context_window`` (default 8192) and kept;
    calls are serialised, since one llama.cpp context is not thread-safe. ``n_threads``
    and ``n_gpu_layers`` go to ``llama_cpp.Llama``. There is no network, so ``timeout``
    is accepted for the common interface but not enforced.
    """

    name = "llama"
    default_context_window = 8192

    def __init__(
        self,
        model_path: str | os.PathLike[str],
        *,
        fallback_model: str | None = None,
        context_window: int | None = None,
        parts: int = 2,
        max_output_tokens: int | None = None,
        spend_guard: SpendGuard | None = None,
        breaker: CircuitBreaker | None = None,
        n_threads: int | None = None,
        n_gpu_layers: int = 0,
        timeout: float = 600.0,
    ) -> None:
        try:
            self._llama_cpp: Any = importlib.import_module("llama_cpp")
        except ImportError as exc:
            raise MissingDependencyError(
                "LlamaCppSummarizer needs llama-cpp-python: pip install 'lossless[llama]'"
            ) from exc
        path = os.fspath(model_path)
        for candidate in (path, fallback_model):
            if candidate is not None and not os.path.isfile(candidate):
                raise ValidationError(f"LlamaCppSummarizer: no model file at {candidate!r}")
        super().__init__(
            path,
            fallback_model=fallback_model,
            timeout=timeout,
            context_window=context_window,
            parts=parts,
            max_concurrency=1,
            max_output_tokens=max_output_tokens,
            spend_guard=spend_guard,
            breaker=breaker,
        )
        self.n_threads = n_threads
        self.n_gpu_layers = n_gpu_layers
        self._models: dict[str, Any] = {}
        self._lock = threading.Lock()

    @property
    def provider(self) -> str:
        return "llama.cpp"

    def close(self) -> None:
        """Free the loaded models."""
        with self._lock:
            for llm in self._models.values():
                closer = getattr(llm, "close", None)
                if callable(closer):
                    closer()
            self._models.clear()

    def _load(self, path: str) -> Any:
        llm = self._models.get(path)
        if llm is None:
            llm = self._llama_cpp.Llama(
                model_path=path,
                n_ctx=self.context_window,
                n_threads=self.n_threads,
                n_gpu_layers=self.n_gpu_layers,
                verbose=False,
            )
            self._models[path] = llm
        return llm

    def _complete(self, system: str, user: str, *, model: str, max_tokens: int, timeout: float) -> Completion:
        with self._lock:
            try:
                llm = self._load(model)
                reply = llm.create_chat_completion(
                    messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
                    max_tokens=max_tokens,
                    temperature=0.2,
                )
            except ValueError as exc:  # llama.cpp says "Requested tokens (…) exceed context window"
                too_long = is_context_length_error(exc)
                raise ProviderError(
                    f"llama.cpp ({model}): {exc}", kind="context_length" if too_long else "malformed"
                ) from exc
            except (OSError, RuntimeError) as exc:
                raise ProviderError(f"llama.cpp ({model}): {exc}", kind="status") from exc
        try:
            choice = reply["choices"][0]
            usage = reply.get("usage") or {}
            return Completion(
                text=str(choice["message"].get("content") or ""),
                model=os.path.basename(model),
                input_tokens=usage.get("prompt_tokens"),
                output_tokens=usage.get("completion_tokens"),
                finish_reason=choice.get("finish_reason"),
            )
        except (KeyError, IndexError, TypeError, AttributeError) as exc:
            raise ProviderError(f"llama.cpp ({model}): malformed reply: {exc}", kind="malformed") from exc
