"""Every environment variable lossless reads, in one place (issue 28): each with what it
does, and :func:`read` / :func:`value`, the only way the package reads one. A name not
listed here is a programming error, so a variable cannot be read without being listed
(and documented: docs/configuration.md names every one, a test checks it)."""

from __future__ import annotations

import os
from typing import overload

__all__ = ["VARIABLES", "read", "value"]

VARIABLES: dict[str, str] = {
    "LOSSLESS_DB": "the database: a path, or a postgresql:// URL",
    "LOSSLESS_HOME": "the folder of the default database",
    "LOSSLESS_EMBEDDER": "auto, local, none, or a sentence-transformers model folder",
    "LOSSLESS_EMBEDDER_LANGUAGES": "what a model folder's model reads: any, or codes such as zh,en",
    "LOSSLESS_EMBEDDER_QUANTIZE": "none or int8: the local model's precision",
    "LOSSLESS_TIMEZONE": "the zone times are shown in (Asia/Shanghai, UTC, +08:00): Config.timezone",
    "LOSSLESS_CACHE_DIR": "files lossless can rebuild (the ONNX graphs)",
    "XDG_CACHE_HOME": "the cache folder's parent when LOSSLESS_CACHE_DIR is unset",
    "LOSSLESS_SUMMARIZER": "extractive, openai, anthropic or llama",
    "LOSSLESS_SUMMARIZER_MODEL": "the summarizer's model (and the LLM reranker's)",
    "LOSSLESS_SUMMARIZER_FALLBACK_MODEL": "a second model tried when the first fails",
    "LOSSLESS_SUMMARIZER_BASE_URL": "an OpenAI-compatible server for the summarizer (and the reranker)",
    "LOSSLESS_MODEL_WINDOWS": "context windows of models the registry does not know",
    "LOSSLESS_UPSTREAM_KEY": "the context proxy's provider key, kept out of the process list",
    "OPENAI_API_KEY": "the OpenAI client's key",
    "OPENAI_BASE_URL": "the OpenAI client's server",
    "ANTHROPIC_API_KEY": "the Anthropic client's key",
    "ANTHROPIC_BASE_URL": "the Anthropic client's server",
    "ANTHROPIC_AUTH_TOKEN": "a bearer token in place of ANTHROPIC_API_KEY",
}


@overload
def read(name: str) -> str | None: ...
@overload
def read(name: str, default: str) -> str: ...
def read(name: str, default: str | None = None) -> str | None:
    """The variable as set (``default`` when it is not)."""
    if name not in VARIABLES:
        raise KeyError(f"{name} is not a variable lossless reads: list it in lossless.core.environ.VARIABLES")
    return os.environ.get(name, default)


def value(name: str) -> str | None:
    """The variable stripped, None when it is unset or empty (empty counts as unset)."""
    raw = (read(name) or "").strip()
    return raw or None
