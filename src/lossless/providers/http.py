"""What every client of an OpenAI- or Anthropic-style HTTP API needs, whatever it asks
for (embeddings or summaries): the default endpoint, the placeholder key for servers
that want none, a URL safe to show and to key a cache with, and the server's own words
from an error answer."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit

__all__ = ["OPENAI_BASE_URL", "PLACEHOLDER_API_KEY", "public_url", "status_detail"]

OPENAI_BASE_URL = "https://api.openai.com/v1"

# Sent as the API key to servers that ignore it; the SDK refuses to start without one.
PLACEHOLDER_API_KEY = "not-needed"


def public_url(url: str) -> str:
    """``url`` without credentials (user:password@, query string, fragment), scheme and
    host lower-cased and no trailing slash, so it can be shown and used as a cache key."""
    parts = urlsplit(url.strip())
    host = (parts.hostname or "").lower()
    if ":" in host:  # an IPv6 literal keeps its brackets
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = f"{host}:{port}" if port is not None else host
    return urlunsplit((parts.scheme.lower(), netloc, parts.path.rstrip("/"), "", ""))


def status_detail(exc: Any) -> str:
    """The server's own error message when it sent the OpenAI error shape."""
    body = exc.body  # the SDK has already unwrapped {"error": ...} when it could
    if isinstance(body, str) and body.strip():
        text = " ".join(body.split())  # may be a proxy's HTML page: keep the start
        return text if len(text) <= 200 else text[:200] + "..."
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return str(inner["message"])
        if isinstance(inner, str):
            return inner
    message = getattr(exc, "message", None)
    return str(message) if message else type(exc).__name__
