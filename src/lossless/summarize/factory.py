"""Pick a summarizer by name, from arguments or the environment."""

from __future__ import annotations

from typing import Any

from lossless.core import environ
from lossless.core.errors import ValidationError
from lossless.summarize.base import Summarizer

__all__ = ["SUMMARIZER_KINDS", "make_summarizer"]

SUMMARIZER_KINDS = ("anthropic", "extractive", "llama", "openai")


def _env(name: str) -> str | None:
    return environ.value(name)  # empty counts as unset


def make_summarizer(
    kind: str | None = None,
    *,
    model: str | None = None,
    fallback_model: str | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    **options: Any,
) -> Summarizer:
    """A summarizer of ``kind``: ``openai`` (any OpenAI-compatible server),
    ``anthropic``, ``llama`` (a local GGUF file via llama-cpp-python; ``model`` is its
    path) or ``extractive`` (offline, deterministic; the default).

    Unset arguments come from the environment: ``LOSSLESS_SUMMARIZER`` (the kind),
    ``LOSSLESS_SUMMARIZER_MODEL``, ``LOSSLESS_SUMMARIZER_FALLBACK_MODEL`` and
    ``LOSSLESS_SUMMARIZER_BASE_URL``; then the provider's own variables
    (``OPENAI_API_KEY``, ``ANTHROPIC_BASE_URL`` …). ``options`` go to the summarizer's
    constructor (``timeout``, ``max_retries``, ``context_window``, ``parts``,
    ``spend_guard`` …).

    Raises ValidationError for an unknown kind, MissingDependencyError (naming the extra
    to install) when the provider's package is missing.
    """
    chosen = (kind if kind is not None else _env("LOSSLESS_SUMMARIZER") or "extractive").strip().lower()
    if chosen not in SUMMARIZER_KINDS:
        raise ValidationError(
            f"unknown summarizer {kind if kind is not None else chosen!r}: "
            f"choose one of {', '.join(SUMMARIZER_KINDS)} (argument or LOSSLESS_SUMMARIZER)"
        )
    if chosen == "extractive":
        if options:
            raise ValidationError(
                f"the extractive summarizer takes no options, got {', '.join(sorted(options))}"
            )
        from lossless.summarize.extractive import ExtractiveSummarizer

        return ExtractiveSummarizer()

    # each constructor imports its SDK and raises MissingDependencyError naming the extra
    model = model or _env("LOSSLESS_SUMMARIZER_MODEL")
    fallback_model = fallback_model or _env("LOSSLESS_SUMMARIZER_FALLBACK_MODEL")
    if chosen == "llama":
        from lossless.summarize.llamacpp import LlamaCppSummarizer

        if base_url or api_key:
            raise ValidationError("the llama summarizer runs in-process: it takes no base_url or api_key")
        if model is None:
            raise ValidationError(
                "the llama summarizer needs the path of a GGUF model: model= or LOSSLESS_SUMMARIZER_MODEL"
            )
        return LlamaCppSummarizer(model, fallback_model=fallback_model, **options)
    base_url = base_url or _env("LOSSLESS_SUMMARIZER_BASE_URL")
    if chosen == "openai":
        from lossless.summarize.openai_chat import OpenAISummarizer

        return OpenAISummarizer(model, base_url=base_url, api_key=api_key, fallback_model=fallback_model, **options)
    from lossless.summarize.anthropic_chat import AnthropicSummarizer

    return AnthropicSummarizer(
        model, base_url=base_url, api_key=api_key, fallback_model=fallback_model, **options
    )
