"""Prompt-cache marks through the proxy, for both wire formats.

A client that uses Anthropic's prompt caching puts ``cache_control`` marks on content parts
(directly, or through an OpenAI-compatible gateway such as OpenRouter), usually on its
system prompt and its newest message, moving the latter each turn; the API refuses a request
with more than four. A mark says where to cache this request, not what a message says:
lossless does not store it (:func:`lossless.server.chat_match.storable`) and matching ignores
it (:func:`lossless.server.chat_match.chat_hash`). On the way out, the client's newest
messages that the assembled context ends with unchanged go as the client wrote them
(:func:`client_tail`), and everything the context rebuilt from the store goes without marks
(:func:`without_marks`), so the provider never gets more marks than the client sent.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar, cast

from lossless.server.chat_match import chat_hash, unmarked

__all__ = ["MAX_MARKS", "client_tail", "marks", "owners", "without_marks"]

MAX_MARKS = 4  # the API refuses a request with more cache_control breakpoints

_OWNER = re.compile(r"messages\[(\d+)\]")
_M = TypeVar("_M", bound=Mapping[str, Any])


def owners(labels: Sequence[str]) -> list[int]:
    """For each label (``messages[2]``, ``messages[2].content[0]``, ``system``: where the
    client wrote a stored message), the index in the client's ``messages`` of the message it
    came from; -1 for one from outside ``messages`` (Anthropic's top-level ``system``)."""
    return [int(m.group(1)) if (m := _OWNER.match(label)) else -1 for label in labels]


def client_tail(incoming: Sequence[Mapping[str, Any]], labels: Sequence[str],
                context: Sequence[Mapping[str, Any]]) -> list[int]:
    """The client's newest messages that ``context`` ends with unchanged: for each of the
    context's last messages that is one of them, the index in the client's ``messages`` of
    the message it came from (``incoming`` is the request as stored, ``labels`` where the
    client wrote each). Rebuilt from the store instead, they would lose their marks. A
    message of the client's is taken whole or not at all (an Anthropic user turn of tool
    results is several stored messages); one the context shows otherwise (a large one shown
    by excerpt, a tool output cut) and all before it come from the context."""
    owner = owners(labels)
    same = 0
    while (same < min(len(incoming), len(context)) and owner[-1 - same] >= 0
           and chat_hash(incoming[-1 - same]) == chat_hash(context[-1 - same])):
        same += 1
    if not same:
        return []
    first = len(incoming) - same
    start = owner[first] + (1 if first and owner[first - 1] == owner[first] else 0)
    return [o for o in owner if o >= start]


def marks(value: Any) -> int:
    """How many ``cache_control`` marks ``value`` (a request, or a part of one) holds."""
    if isinstance(value, Mapping):
        return ("cache_control" in value) + sum(marks(v) for v in value.values())
    if isinstance(value, list):
        return sum(marks(v) for v in value)
    return 0


def without_marks(messages: Sequence[_M]) -> list[_M]:
    """``messages`` (the context's, or Anthropic turns built from it) without ``cache_control``
    on their content parts: a mark stored before marks were left out belongs to the request
    that sent it. A message without marks is the same object."""
    out: list[_M] = []
    for message in messages:
        content = message.get("content")
        bare = unmarked(content)
        out.append(message if bare is content else cast(_M, {**message, "content": bare}))
    return out
