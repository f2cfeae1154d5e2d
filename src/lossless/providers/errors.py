"""Reading a provider's error: does it say the request did not fit the model's context,
and what limit and size does its text state?

Every client of a chat provider needs this, whether it summarizes, proxies or runs the
agent loop, so it lives here rather than in the agent's recovery module
(:mod:`lossless.agent.emergency`), which re-exports it.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["context_limit_from_error", "is_context_length_error"]

# Error codes and message texts providers use for "the prompt does not fit":
# OpenAI ``context_length_exceeded`` / "maximum context length is N tokens"; Anthropic
# "prompt is too long: N tokens > M maximum"; vLLM / llama.cpp / Ollama / OpenRouter
# variants; Google "exceeds the maximum number of tokens"; HTTP 413 from gateways; and the
# Chinese providers' OpenAI-compatible APIs, whose 400s say it in their own words: Moonshot
# (Kimi) "Your request exceeded model token limit: N (requested: M)", Alibaba's DashScope
# (Qwen) "Range of input length should be [1, N]", Zhipu (GLM, code 1261) "Prompt exceeds
# max length". (DeepSeek words it as OpenAI does.)
_CODES = frozenset({"context_length_exceeded", "string_above_max_length", "request_too_large",
                    "context_window_exceeded", "model_context_window_exceeded"})
_TEXTS = re.compile(
    r"context[_ ]length[_ ]exceeded|maximum context length|context window|prompt is too long"
    r"|too many tokens|input is too long|exceeds? the (?:maximum|max) (?:number of )?tokens"
    r"|reduce the length of the messages|request too large|prompt too long|context size"
    r"|exceeds the context|longer than the model's context|input length .* exceeds"
    r"|maximum (?:input|prompt) length|exceeded model token limit|range of input length should be"
    r"|prompt exceeds max(?:imum)? length",
    re.IGNORECASE,
)


def _status(exc: BaseException) -> int | None:
    for attr in ("status_code", "status", "http_status"):
        value = getattr(exc, attr, None)
        if isinstance(value, int):
            return value
    response = getattr(exc, "response", None)
    value = getattr(response, "status_code", None)
    return value if isinstance(value, int) else None


def _codes(exc: BaseException) -> list[str]:
    found: list[str] = []
    for attr in ("code", "type"):
        value = getattr(exc, attr, None)
        if isinstance(value, str):
            found.append(value)
    body: Any = getattr(exc, "body", None)
    for _ in range(2):  # {"error": {"code": …, "type": …}} or the inner dict itself
        if isinstance(body, dict):
            found.extend(str(body[k]) for k in ("code", "type") if isinstance(body.get(k), str))
            body = body.get("error")
    return found


def is_context_length_error(exc: BaseException) -> bool:
    """True when ``exc`` (or an exception it was raised from) is a provider saying the
    request does not fit the model's context: an error code like OpenAI's
    ``context_length_exceeded``, HTTP 413, or one of the usual message texts."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if _status(current) == 413:
            return True
        if any(code in _CODES for code in _codes(current)):
            return True
        if _TEXTS.search(str(current)):
            return True
        current = current.__cause__ or current.__context__
    return False


# "maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens"
# (OpenAI, vLLM), "prompt is too long: 210455 tokens > 200000 maximum" (Anthropic),
# "exceeded model token limit: 8192 (requested: 9000)" (Moonshot), "Range of input length
# should be [1, 30720]" (DashScope).
_LIMIT = re.compile(r"(?:maximum context length is|context window (?:is|of)|maximum (?:input|prompt) length (?:is |of )?"
                    r"|exceeded model token limit:?|range of input length should be \[\d+,)"
                    r"\s*(\d[\d,]*)|(\d[\d,]*) tokens? > (\d[\d,]*)", re.IGNORECASE)
_SENT = re.compile(r"(?:resulted in|you requested|requested|prompt has|input has)\s*(?:about\s*)?(\d[\d,]*) tokens"
                   r"|\(requested:?\s*(\d[\d,]*)\)", re.IGNORECASE)


def context_limit_from_error(exc: BaseException) -> tuple[int | None, int | None]:
    """(the model's limit, the size the provider counted) when the error text states them,
    e.g. ``(8192, 9000)`` for OpenAI's "maximum context length is 8192 tokens. However,
    your messages resulted in 9000 tokens"; ``None`` for what it does not say."""
    text = str(exc)
    limit = sent = None
    match = _LIMIT.search(text)
    if match:
        if match.group(1):
            limit = int(match.group(1).replace(",", ""))
        else:
            sent, limit = int(match.group(2).replace(",", "")), int(match.group(3).replace(",", ""))
    found = _SENT.search(text)
    if found and sent is None:
        sent = int((found.group(1) or found.group(2)).replace(",", ""))
    return limit, sent
