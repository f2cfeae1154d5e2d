"""Summaries from OpenAI's chat completions API, or from any server that speaks it
(Ollama, vLLM, llama.cpp's server, LM Studio, a gateway). Needs the ``openai`` extra."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from lossless.core import environ
from lossless.core.errors import MissingDependencyError, ValidationError
from lossless.providers.errors import is_context_length_error
from lossless.providers.http import OPENAI_BASE_URL, PLACEHOLDER_API_KEY, public_url, status_detail
from lossless.summarize.llm import (
    CircuitBreaker,
    Completion,
    LLMSummarizer,
    ProviderError,
    SpendGuard,
)

if TYPE_CHECKING:
    import openai

__all__ = ["DEFAULT_OPENAI_MODEL", "OpenAISummarizer"]

DEFAULT_OPENAI_MODEL = "gpt-4o-mini"

class OpenAISummarizer(LLMSummarizer):
    """An :class:`~lossless.summarize.llm.LLMSummarizer` over ``/v1/chat/completions``.

    ``model`` defaults to ``$LOSSLESS_SUMMARIZER_MODEL``, else ``gpt-4o-mini``.
    ``base_url`` and ``api_key`` default to ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY``;
    with a ``base_url`` (a local server) the key may be missing: a placeholder is sent.
    ``timeout`` and ``max_retries`` configure the SDK client, which retries 408, 409,
    429 and 5xx answers and connection errors with backoff (honouring ``retry-after``).

    The answer length is capped with ``max_completion_tokens`` on api.openai.com (the
    only form its reasoning models accept) and ``max_tokens`` elsewhere (what compatible
    servers understand); ``token_limit_param`` overrides that choice.

    Other options (``fallback_model``, ``context_window``, ``parts``,
    ``max_concurrency``, ``max_output_tokens``, ``spend_guard``, ``breaker``) are those of
    :class:`~lossless.summarize.llm.LLMSummarizer`.
    """

    name = "openai"

    def __init__(
        self,
        model: str | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        fallback_model: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 2,
        context_window: int | None = None,
        parts: int = 2,
        max_concurrency: int = 4,
        max_output_tokens: int | None = None,
        spend_guard: SpendGuard | None = None,
        breaker: CircuitBreaker | None = None,
        token_limit_param: str | None = None,
    ) -> None:
        try:
            import openai
        except ImportError as exc:
            raise MissingDependencyError(
                "OpenAISummarizer needs the openai package: pip install 'lossless[openai]'"
            ) from exc
        model = model or environ.read("LOSSLESS_SUMMARIZER_MODEL") or DEFAULT_OPENAI_MODEL
        super().__init__(
            model,
            fallback_model=fallback_model,
            timeout=timeout,
            context_window=context_window,
            parts=parts,
            max_concurrency=max_concurrency,
            max_output_tokens=max_output_tokens,
            spend_guard=spend_guard,
            breaker=breaker,
        )
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise ValidationError(f"OpenAISummarizer: max_retries must be an integer >= 0, got {max_retries!r}")
        if token_limit_param not in (None, "max_tokens", "max_completion_tokens"):
            raise ValidationError(
                "OpenAISummarizer: token_limit_param must be max_tokens or max_completion_tokens, "
                f"got {token_limit_param!r}"
            )
        # Empty environment variables count as unset, as they do for most tools.
        base_url = base_url or environ.read("OPENAI_BASE_URL") or None
        api_key = api_key or environ.read("OPENAI_API_KEY") or None
        shown_url = public_url(base_url) if base_url else OPENAI_BASE_URL
        official = shown_url == OPENAI_BASE_URL
        if api_key is None:
            if official:
                raise ValidationError(
                    f"OpenAISummarizer: no API key for {OPENAI_BASE_URL} (model {self.model}): "
                    "pass api_key= or set OPENAI_API_KEY (or set base_url for a local server)"
                )
            api_key = PLACEHOLDER_API_KEY
        self.base_url = shown_url
        self._provider = "openai" if official else f"openai-compatible:{shown_url}"
        self.token_limit_param = token_limit_param or ("max_completion_tokens" if official else "max_tokens")
        self.max_retries = max_retries
        try:
            self._client: openai.OpenAI = openai.OpenAI(
                base_url=base_url or OPENAI_BASE_URL,
                api_key=api_key,
                timeout=self.timeout,
                max_retries=max_retries,
            )
        except openai.OpenAIError as exc:
            raise ValidationError(f"OpenAISummarizer: cannot create the client: {exc}") from exc

    @property
    def provider(self) -> str:
        """``openai``, or ``openai-compatible:<url>`` (without credentials)."""
        return self._provider

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._client.close()

    def _complete(self, system: str, user: str, *, model: str, max_tokens: int, timeout: float) -> Completion:
        import openai

        limit: dict[str, Any] = {self.token_limit_param: max_tokens}
        where = f"{self.base_url}"
        # after a failure that says the provider is down, no SDK retries: fail fast toward the breaker
        client = self._client.with_options(max_retries=0) if self.breaker.failing(model) else self._client
        try:
            response = client.chat.completions.create(
                model=model,
                messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
                timeout=timeout,
                **limit,
            )
        except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
            raise ProviderError(
                f"HTTP {exc.status_code} from {where}: {status_detail(exc)} "
                "(check OPENAI_API_KEY or api_key=)",
                kind="auth",
                status=exc.status_code,
            ) from exc
        except openai.APITimeoutError as exc:
            raise ProviderError(f"timed out after {timeout:g}s at {where}", kind="timeout") from exc
        except openai.APIConnectionError as exc:
            raise ProviderError(f"cannot connect to {where} ({exc.__cause__ or exc})", kind="connection") from exc
        except openai.APIStatusError as exc:
            too_long = exc.status_code in (400, 413, 422) and is_context_length_error(exc)
            raise ProviderError(
                f"HTTP {exc.status_code} from {where}: {status_detail(exc)}",
                kind="context_length" if too_long else "status",
                status=exc.status_code,
            ) from exc
        except (openai.OpenAIError, json.JSONDecodeError, ValueError) as exc:
            raise ProviderError(f"bad reply from {where}: {exc}", kind="malformed") from exc
        return _completion(response, model, where)


def _completion(response: Any, model: str, where: str) -> Completion:
    # Compatible servers are not validated by the SDK: read every field defensively.
    choices = getattr(response, "choices", None)
    if not isinstance(choices, list) or not choices:
        raise ProviderError(f"bad reply from {where}: no choices", kind="malformed")
    choice = choices[0]
    message = getattr(choice, "message", None)
    content = getattr(message, "content", None)
    text = content if isinstance(content, str) else ""
    finish = getattr(choice, "finish_reason", None)
    if not text and getattr(message, "refusal", None):
        finish = "refusal"
    usage = getattr(response, "usage", None)
    prompt_tokens = getattr(usage, "prompt_tokens", None)
    completion_tokens = getattr(usage, "completion_tokens", None)
    answered = getattr(response, "model", None)
    return Completion(
        text=text,
        model=answered if isinstance(answered, str) and answered else model,
        input_tokens=prompt_tokens if isinstance(prompt_tokens, int) else None,
        output_tokens=completion_tokens if isinstance(completion_tokens, int) else None,
        finish_reason=finish if isinstance(finish, str) else None,
    )
