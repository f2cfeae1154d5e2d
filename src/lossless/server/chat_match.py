"""Which messages of a proxied request are new: the client sends its whole chat every time,
lossless stores each message once.

Every message is identified by the hash the store keeps for it (role, content, name, tool
calls, tool call id: :func:`lossless.store.sqlite.message_hash`). The stored conversation's
last message is the *anchor*: the request's messages after the anchor are new. When the
anchor appears more than once in the request, the occurrence preceded by the longest run
of stored messages wins, then the latest. A request that repeats none of the stored
messages (apart from system prompts) only carries new ones (a client that lets lossless
keep the history). A request that repeats stored messages but not the anchor has
rewritten history (an edited or regenerated turn): lossless history is append-only, so
that is refused (:class:`Diverged`, HTTP 409); use a new conversation id.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lossless.errors import LosslessError, ValidationError
from lossless.store.sqlite import message_hash
from lossless.types import Message
from lossless.validate import validate_message

__all__ = ["Diverged", "MessageMatch", "chat_hash", "match_new", "storable"]

_KEEP = ("role", "content", "name", "tool_calls", "tool_call_id")


class Diverged(LosslessError):
    """The request rewrites stored history (HTTP 409 ``conversation_diverged``)."""


def storable(messages: Any) -> list[dict[str, Any]]:
    """OpenAI chat messages reduced to what lossless stores: ``developer`` becomes
    ``system``; provider-only fields (``refusal``, ``audio``, …) are dropped; an assistant
    turn with neither text nor tool calls carries nothing and is left out (lossless does
    not store an empty reply either, so matching stays aligned)."""
    if not isinstance(messages, list) or not messages:
        raise ValidationError("'messages' must be a non-empty list")
    out: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise ValidationError(f"messages[{index}] must be an object, got {type(message).__name__}")
        kept = {k: message[k] for k in _KEEP if message.get(k) is not None}
        if kept.get("role") == "developer":
            kept["role"] = "system"
        if kept.get("role") == "assistant" and not kept.get("content"):
            if not kept.get("tool_calls"):
                continue
            kept.pop("content", None)  # "" and null are the same empty text beside tool calls
        out.append(kept)
    return out


def chat_hash(message: Mapping[str, Any], max_bytes: int) -> str:
    """The store's content hash of a storable message (validating it on the way)."""
    new = validate_message(message, max_bytes=max_bytes)
    return message_hash(new.role, new.content, new.name, new.tool_calls, new.tool_call_id)


def stored_hash(msg: Message) -> str:
    return message_hash(msg.role, msg.content, msg.name, msg.tool_calls, msg.tool_call_id)


@dataclass(frozen=True)
class MessageMatch:
    new: list[dict[str, Any]]  # the request's messages to store, in order
    known: int  # how many request messages were already stored


def match_new(stored_tail: Sequence[Message], request: Sequence[dict[str, Any]], max_bytes: int) -> MessageMatch:
    """Split the request's (storable) messages into known and new; see the module docstring."""
    hashes = []
    for i, m in enumerate(request):
        try:
            hashes.append(chat_hash(m, max_bytes))
        except ValidationError as exc:
            raise ValidationError(f"messages[{i}]: {exc}") from None
    if not stored_tail:
        return MessageMatch(list(request), 0)
    tail = [stored_hash(m) for m in stored_tail]
    anchor = tail[-1]
    best, best_run = -1, 0
    for p in range(len(hashes) - 1, -1, -1):
        if hashes[p] != anchor:
            continue
        run = 1
        while run <= p and run < len(tail) and hashes[p - run] == tail[-1 - run]:
            run += 1
        if run > best_run:
            best, best_run = p, run
    if best >= 0:
        return MessageMatch(list(request[best + 1:]), best + 1)
    known = set(tail)
    if any(h in known for h, m in zip(hashes, request, strict=True) if m.get("role") != "system"):
        last = stored_tail[-1]
        raise Diverged(f"the request's messages no longer include the conversation's last stored message "
                       f"(#{last.seq} {last.role}, {last.id}): lossless history is append-only, so an edited or "
                       "regenerated turn needs a new conversation id (or send only the new messages)")
    fresh = [m for h, m in zip(hashes, request, strict=True) if h not in known]
    return MessageMatch(fresh, len(request) - len(fresh))
