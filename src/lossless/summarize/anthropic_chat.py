"""Summaries from Anthropic's Messages API (``POST /v1/messages``), or from a server that
speaks it. Needs the ``anthropic`` extra."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from lossless.core import environ
from lossless.core.errors import MissingDependencyError, ValidationError
from lossless.providers.errors import is_context_length_error
from lossless.providers.http import PLACEHOLDER_API_KEY, public_url, status_detail
from lossless.summarize.llm import (
    CircuitBreaker,
    Completion,
    LLMSummarizer,
    ProviderError,
    SpendGuard,
)

if TYPE_CHECKING:
    import anthropic

__all__ = ["ANTHROPIC_BASE_URL", "DEFAULT_ANTHROPIC_MODEL", "AnthropicSummarizer"]

# claude-3-5-haiku-latest was retired on 2026-02-19 (the SDK warns about it); this is
# its successor, the small fast model meant for jobs like summarizing.
DEFAULT_ANTHROPIC_MODEL = "claude-haiku-4-5"
ANTHROPIC_BASE_URL = "https://api.anthropic.com"


class AnthropicSummarizer(LLMSummarizer):
    """An :class:`~lossless.summarize.llm.LLMSummarizer` over Anthropic's Messages API.

    ``model`` defaults to ``$LOSSLESS_SUMMARIZER_MODEL``, else ``claude-haiku-4-5``.
    ``base_url`` and ``api_key`` default to ``ANTHROPIC_BASE_URL`` and
    ``ANTHROPIC_API_KEY`` (the SDK also finds ``ANTHROPIC_AUTH_TOKEN`` and profiles);
    with a ``base_url`` and no credentials at all a placeholder key is sent. ``base_url``
    is the server root: the SDK appends ``/v1/messages``. ``timeout`` and
    ``max_retries`` configure the SDK client, which retries 408, 409, 429, 5xx and
    connection errors with backoff. ``context_window`` defaults to 200 000 tokens, the
    window of current Claude models.

    Other options are those of :class:`~lossless.summarize.llm.LLMSummarizer`.
    """

    name = "anthropic"
    default_context_window = 200_000

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
    ) -> None:
        try:
            import anthropic
        except ImportError as exc:
            raise MissingDependencyError(
                "AnthropicSummarizer needs the anthropic package: pip install 'lossless[anthropic]'"
            ) from exc
        model = model or environ.read("LOSSLESS_SUMMARIZER_MODEL") or DEFAULT_ANTHROPIC_MODEL
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
            raise ValidationError(f"AnthropicSummarizer: max_retries must be an integer >= 0, got {max_retries!r}")
        base_url = base_url or environ.read("ANTHROPIC_BASE_URL") or None
        api_key = api_key or environ.read("ANTHROPIC_API_KEY") or None
        shown_url = public_url(base_url) if base_url else ANTHROPIC_BASE_URL
        official = shown_url == ANTHROPIC_BASE_URL
        if api_key is None and not official and not environ.read("ANTHROPIC_AUTH_TOKEN"):
            api_key = PLACEHOLDER_API_KEY  # a local server or gateway that wants no key
        self.base_url = shown_url
        self._provider = "anthropic" if official else f"anthropic-compatible:{shown_url}"
        self.max_retries = max_retries
        options: dict[str, Any] = {"timeout": self.timeout, "max_retries": max_retries}
        if base_url:
            options["base_url"] = base_url
        if api_key:
            options["api_key"] = api_key
        try:
            self._client: anthropic.Anthropic = anthropic.Anthropic(**options)
        except anthropic.AnthropicError as exc:
            raise ValidationError(f"AnthropicSummarizer: cannot create the client: {exc}") from exc

    @property
    def provider(self) -> str:
        """``anthropic``, or ``anthropic-compatible:<url>`` (without credentials)."""
        return self._provider

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._client.close()

    def _complete(self, system: str, user: str, *, model: str, max_tokens: int, timeout: float) -> Completion:
        import anthropic

        where = self.base_url
        # after a failure that says the provider is down, no SDK retries: fail fast toward the breaker
        client = self._client.with_options(max_retries=0) if self.breaker.failing(model) else self._client
        try:
            response = client.messages.create(
                model=model,
                max_tokens=max_tokens,
                system=system,
                messages=[{"role": "user", "content": user}],
                timeout=timeout,
            )
        except (anthropic.AuthenticationError, anthropic.PermissionDeniedError) as exc:
            raise ProviderError(
                f"HTTP {exc.status_code} from {where}: {status_detail(exc)} "
                "(check ANTHROPIC_API_KEY or api_key=)",
                kind="auth",
                status=exc.status_code,
            ) from exc
        except anthropic.APITimeoutError as exc:
            raise ProviderError(f"timed out after {timeout:g}s at {where}", kind="timeout") from exc
        except anthropic.APIConnectionError as exc:
            raise ProviderError(f"cannot connect to {where} ({exc.__cause__ or exc})", kind="connection") from exc
        except anthropic.APIStatusError as exc:
            too_long = exc.status_code in (400, 413) and is_context_length_error(exc)
            raise ProviderError(
                f"HTTP {exc.status_code} from {where}: {status_detail(exc)}",
                kind="context_length" if too_long else "status",
                status=exc.status_code,
            ) from exc
        except TypeError as exc:
            if "authentication" in str(exc).lower():  # the SDK found no credentials at all
                raise ProviderError(
                    f"no credentials for {where}: set ANTHROPIC_API_KEY or pass api_key=", kind="auth"
                ) from exc
            raise
        except (anthropic.AnthropicError, json.JSONDecodeError, ValueError) as exc:
            raise ProviderError(f"bad reply from {where}: {exc}", kind="malformed") from exc
        return _completion(response, model, where)


def _completion(response: Any, model: str, where: str) -> Completion:
    blocks = getattr(response, "content", None)
    if not isinstance(blocks, list):
        raise ProviderError(f"bad reply from {where}: no content list", kind="malformed")
    text = "".join(
        str(getattr(block, "text", "")) for block in blocks if getattr(block, "type", None) == "text"
    )
    usage = getattr(response, "usage", None)
    input_tokens = getattr(usage, "input_tokens", None)
    output_tokens = getattr(usage, "output_tokens", None)
    answered = getattr(response, "model", None)
    stop = getattr(response, "stop_reason", None)
    return Completion(
        text=text,
        model=answered if isinstance(answered, str) and answered else model,
        input_tokens=input_tokens if isinstance(input_tokens, int) else None,
        output_tokens=output_tokens if isinstance(output_tokens, int) else None,
        finish_reason=stop if isinstance(stop, str) else None,
    )
