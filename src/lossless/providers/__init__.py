"""What talking to a model provider over HTTP takes, shared by the embedders
(:mod:`lossless.embed`), the summarizers (:mod:`lossless.summarize`), the proxy and the
agent loop: endpoints, URLs safe to show, and reading the provider's errors.

It sits below all of them and imports none of them."""

from lossless.providers.errors import context_limit_from_error, is_context_length_error
from lossless.providers.http import OPENAI_BASE_URL, PLACEHOLDER_API_KEY, public_url, status_detail

__all__ = [
    "OPENAI_BASE_URL",
    "PLACEHOLDER_API_KEY",
    "context_limit_from_error",
    "is_context_length_error",
    "public_url",
    "status_detail",
]
