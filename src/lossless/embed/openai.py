"""Embeddings from OpenAI, or from any server that speaks its ``/v1/embeddings`` API
(Ollama, vLLM, llama.cpp, LM Studio, ...). Needs the ``openai`` extra."""

from __future__ import annotations

import json
from collections.abc import Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

import numpy as np

from lossless.core import environ
from lossless.core.errors import LosslessError, MissingDependencyError, ValidationError
from lossless.embed.base import Vectors, normalize
from lossless.embed.languages import ANY, Languages, parse_languages
from lossless.providers.http import OPENAI_BASE_URL, PLACEHOLDER_API_KEY, public_url, status_detail

if TYPE_CHECKING:
    import openai

__all__ = ["OpenAIEmbedder"]

# Native sizes of OpenAI's own models, so the default embedder knows ``dim`` without a
# probe request. Used only against api.openai.com: a local server may reuse the names.
_KNOWN_DIMS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}

_PROBE_TEXT = "probe"

# Old private names of the shared HTTP helpers (now in lossless.providers.http), kept so
# the path they were imported from still works.
_public_url = public_url
_status_detail = status_detail


class OpenAIEmbedder:
    """An :class:`~lossless.embed.base.Embedder` over the OpenAI embeddings API.

    ``base_url`` and ``api_key`` default to ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY``.
    With a ``base_url`` (a local server) the key may be missing: a placeholder is sent.

    ``provider`` is ``"openai"`` for api.openai.com, else ``"openai-compatible:<url>"``
    with any credentials removed from the URL. ``model`` is the model name, plus
    ``[dimensions=N]`` when ``dimensions`` asks the API to shorten vectors, because
    together they key the embedding cache and must differ whenever the vectors would.

    ``dim`` is ``dim`` if given, else ``dimensions``, else the native size of a known
    OpenAI model, else learned from the first response (reading ``.dim`` before any
    ``embed()`` sends a one-word probe).

    ``languages`` (default ``"any"``): what the model reads; text in other languages is
    not sent (:mod:`lossless.embed.languages`). Say ``["en"]`` for an English-only model
    behind a local server.

    Every failure (connection refused, timeout, an HTTP error after ``max_retries``
    retries, a response of the wrong shape) raises :class:`~lossless.core.errors.LosslessError`
    naming the endpoint and model. Call :meth:`close` (or use ``with``) to release the
    HTTP connection pool.
    """

    provider: str
    model: str

    def __init__(
        self,
        model: str = "text-embedding-3-small",
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        dim: int | None = None,
        batch_size: int = 256,
        timeout: float = 30.0,
        max_retries: int = 2,
        dimensions: int | None = None,
        languages: str | Sequence[str] = ANY,
    ) -> None:
        try:
            import openai
        except ImportError as exc:
            raise MissingDependencyError(
                "OpenAIEmbedder needs the openai package: pip install 'lossless[openai]'"
            ) from exc

        if not model:
            raise ValidationError("OpenAIEmbedder: model must be a non-empty string")
        for name, value in (("dim", dim), ("dimensions", dimensions)):
            if value is not None and (isinstance(value, bool) or value <= 0):
                raise ValidationError(
                    f"OpenAIEmbedder: {name} must be a positive integer, got {value!r}"
                )
        if dim is not None and dimensions is not None and dim != dimensions:
            raise ValidationError(
                f"OpenAIEmbedder: dim={dim} contradicts dimensions={dimensions}; pass one of them"
            )
        if isinstance(batch_size, bool) or batch_size <= 0:
            raise ValidationError(
                f"OpenAIEmbedder: batch_size must be a positive integer, got {batch_size!r}"
            )
        if not timeout > 0:
            raise ValidationError(f"OpenAIEmbedder: timeout must be positive, got {timeout!r}")
        if max_retries < 0:
            raise ValidationError(f"OpenAIEmbedder: max_retries must be >= 0, got {max_retries!r}")

        # Empty environment variables count as unset, as they do for most tools.
        base_url = base_url or environ.read("OPENAI_BASE_URL") or None
        api_key = api_key or environ.read("OPENAI_API_KEY") or None
        shown_url = public_url(base_url) if base_url else OPENAI_BASE_URL
        official = shown_url == OPENAI_BASE_URL
        if api_key is None:
            if official:
                raise ValidationError(
                    f"OpenAIEmbedder: no API key for {OPENAI_BASE_URL} (model {model}): "
                    "pass api_key= or set OPENAI_API_KEY (or set base_url for a local server)"
                )
            api_key = PLACEHOLDER_API_KEY

        self.api_model = model
        self.base_url = shown_url
        self.provider = "openai" if official else f"openai-compatible:{shown_url}"
        self.model = model if dimensions is None else f"{model}[dimensions={dimensions}]"
        self.dimensions = dimensions
        self.batch_size = batch_size
        # hosted embedding models read most languages; a server running an English-only
        # model (all-minilm under Ollama, say) is declared with languages=["en"]
        self.languages: Languages = parse_languages(languages, "OpenAIEmbedder: languages")
        self._timeout = timeout
        self._dim: int | None = dim or dimensions or (_KNOWN_DIMS.get(model) if official else None)
        try:
            self._client: openai.OpenAI = openai.OpenAI(
                base_url=base_url or OPENAI_BASE_URL,
                api_key=api_key,
                timeout=timeout,
                max_retries=max_retries,
            )
        except openai.OpenAIError as exc:
            raise self._error(f"cannot create the client: {exc}") from exc

    # -- the Embedder protocol -------------------------------------------------------

    @property
    def dim(self) -> int:
        """Vector width; asks the server (one short request) if not known yet."""
        if self._dim is None:
            self._dim = int(self._embed_batch([_PROBE_TEXT]).shape[1])
        return self._dim

    @dim.setter
    def dim(self, value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValidationError(f"OpenAIEmbedder: dim must be a positive integer, got {value!r}")
        self._dim = value

    def embed(self, texts: Sequence[str]) -> Vectors:
        """One L2-normalised float32 row per text, in order. No request for no texts."""
        if isinstance(texts, str):
            raise ValidationError("OpenAIEmbedder.embed takes a sequence of texts, not one string")
        if len(texts) == 0:
            # Never a request for nothing: the width is 0 if it is not known yet.
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        batches = [
            self._embed_batch(texts[start : start + self.batch_size])
            for start in range(0, len(texts), self.batch_size)
        ]
        return batches[0] if len(batches) == 1 else np.concatenate(batches, axis=0)

    # -- lifecycle -------------------------------------------------------------------

    def close(self) -> None:
        """Close the HTTP connection pool. The embedder cannot be used afterwards."""
        self._client.close()

    def __enter__(self) -> OpenAIEmbedder:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"OpenAIEmbedder(provider={self.provider!r}, model={self.model!r}, dim={self._dim!r})"
        )

    # -- internals -------------------------------------------------------------------

    def _error(self, cause: str) -> LosslessError:
        return LosslessError(
            f"embedding with {self.api_model!r} at {self.base_url} failed: {cause}"
        )

    def _embed_batch(self, texts: Sequence[str]) -> Vectors:
        import openai

        # The API rejects the empty string; a single space embeds as "nothing".
        inputs = [text if text else " " for text in texts]
        kwargs: dict[str, Any] = {}
        if self.dimensions is not None:
            kwargs["dimensions"] = self.dimensions
        try:
            response = self._client.embeddings.create(model=self.api_model, input=inputs, **kwargs)
        except openai.APITimeoutError as exc:
            raise self._error(f"timed out after {self._timeout:g}s") from exc
        except openai.APIConnectionError as exc:
            cause = exc.__cause__ or exc
            raise self._error(f"cannot connect ({cause})") from exc
        except openai.APIStatusError as exc:
            hint = " (is base_url right? it usually ends in /v1)" if exc.status_code == 404 else ""
            raise self._error(f"HTTP {exc.status_code}: {status_detail(exc)}{hint}") from exc
        except openai.OpenAIError as exc:
            raise self._error(str(exc)) from exc
        except json.JSONDecodeError as exc:
            raise self._error(f"the response is not JSON ({exc})") from exc
        except ValueError as exc:  # the SDK's own check on an empty ``data`` list
            raise self._error(f"malformed response: {exc}") from exc
        return self._vectors(response, len(inputs))

    def _vectors(self, response: Any, expected: int) -> Vectors:
        # ``response`` is a CreateEmbeddingResponse, but compatible servers are not
        # validated by the SDK, so every field is checked here as if untyped.
        data = getattr(response, "data", None)
        if not isinstance(data, list):
            raise self._error("malformed response: no 'data' list")
        if len(data) != expected:
            raise self._error(f"asked for {expected} vectors, got {len(data)}")
        # Servers may answer out of order; ``index`` says which input each vector is for.
        # A server that leaves ``index`` out is taken to answer in order.
        indexes: list[int] = [
            i for item in data if isinstance(i := getattr(item, "index", None), int)
        ]
        if len(indexes) == expected:
            if sorted(indexes) != list(range(expected)):
                raise self._error(f"response indexes {sorted(indexes)} are not 0..{expected - 1}")
            data = [
                item
                for _, item in sorted(zip(indexes, data, strict=True), key=lambda pair: pair[0])
            ]
        rows = [getattr(item, "embedding", None) for item in data]
        width = self._dim
        for position, row in enumerate(rows):
            if not isinstance(row, list) or not row:
                raise self._error(f"malformed response: vector {position} is not a list of numbers")
            if width is None:
                width = len(row)
            if len(row) != width:
                raise self._error(
                    f"dimension mismatch: vector {position} has {len(row)} values, expected {width}"
                )
        try:
            vectors = np.asarray(rows, dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise self._error(f"malformed response: {exc}") from exc
        if not np.isfinite(vectors).all():
            raise self._error("response contains NaN or infinite values")
        if self._dim is None:
            self._dim = width
        return normalize(vectors)

