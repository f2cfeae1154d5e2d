"""Which messages of a proxied request are new: the client sends its whole chat every time,
lossless stores each message once.

Every message is identified by the hash the store keeps for it (role, content, name, tool
calls, tool call id: :func:`lossless.core._canonical.message_hash`), and a request is matched
by content, position by position, against the stored conversation from its first message:

* the request **extends** what is stored (every stored message in order, then more): the
  messages after the stored ones are new;
* the request is **stored already** (a prefix of the stored conversation, or all of it: an
  SDK retrying after a timeout, a client re-sending): nothing is new; when the stored
  message right after it is an assistant reply, that reply is the answer to replay (the
  client did not get it the first time);
* the request **diverges** from what is stored after sharing at least one non-system
  message with it (an edited or regenerated turn): lossless history is append-only, so that
  is :class:`Diverged` (HTTP 409), naming the first position that differs;
* the request shares no message with the start of the conversation (besides a system
  prompt): a client that lets lossless keep the history and sends only its new messages.
  They are stored, unless they are exactly the newest stored ones (a retry), and a
  system prompt already stored is not stored again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lossless.core._canonical import message_hash
from lossless.core.errors import LosslessError, ValidationError
from lossless.core.types import Message
from lossless.core.validate import NewMessage, validate_message

__all__ = ["Diverged", "MessageMatch", "match_request", "storable"]

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


def _new_hash(new: NewMessage) -> str:
    return message_hash(new.role, new.content, new.name, new.tool_calls, new.tool_call_id)


def stored_hash(msg: Message) -> str:
    return message_hash(msg.role, msg.content, msg.name, msg.tool_calls, msg.tool_call_id)


@dataclass(frozen=True)
class MessageMatch:
    new: list[NewMessage]  # the request's messages to store (validated), in order
    known: int  # how many request messages were already stored
    replay: Message | None = None  # the stored reply to a request that was stored already
    through: int = 0  # with nothing new: the seq of the request's last message as stored


def match_request(request: Sequence[dict[str, Any]], stored_count: int,
                  read: Callable[[int, int], list[Message]], max_bytes: int) -> MessageMatch:
    """Split the request's (storable) messages into known and new; ``read(first, last)``
    gives the stored messages of that seq range. See the module docstring. Each message is
    validated once, here: the new ones are returned validated, to be stored as they are."""
    validated: list[NewMessage] = []
    for i, m in enumerate(request):
        try:
            validated.append(validate_message(m, max_bytes=max_bytes))
        except ValidationError as exc:
            raise ValidationError(f"messages[{i}]: {exc}") from None
    if stored_count == 0:
        return MessageMatch(validated, 0)
    hashes = [_new_hash(m) for m in validated]
    n = min(len(hashes), stored_count)
    head = read(1, n + 1)  # one more: the message after the request, if it is stored already
    common = 0
    while common < n and hashes[common] == stored_hash(head[common]):
        common += 1
    if common == n:  # aligned with what is stored from its first message
        if len(hashes) > stored_count:
            return MessageMatch(validated[stored_count:], stored_count)
        after = head[n] if len(head) > n else None
        if after is not None and after.role == "assistant":
            return MessageMatch([], n, after, n)
        if after is not None:
            raise Diverged(f"the request is stored already, and the conversation went on past it (#{after.seq} "
                           f"{after.role} follows it, not a reply): send the whole conversation, or only the new "
                           "messages")
        return MessageMatch([], n, None, n)
    if any(m.get("role") != "system" for m in request[:common]):
        stored = head[common]
        raise Diverged(f"messages[{common}] ({request[common].get('role')}) differs from the stored message "
                       f"#{stored.seq} ({stored.role}, {stored.id}) the request had matched up to it: lossless "
                       "history is append-only, so an edited or regenerated turn needs a new conversation id "
                       "(or send only the new messages)")
    # only new messages (and maybe a system prompt): a retry of the newest ones adds nothing
    body = [(h, m) for h, m in zip(hashes, request, strict=True) if m.get("role") != "system"]
    if body:
        tail = [stored_hash(m) for m in read(max(1, stored_count - len(body) + 1), stored_count)]
        if tail == [h for h, _ in body]:
            return MessageMatch([], len(request), None, stored_count)
    systems = {stored_hash(m) for m in head if m.role == "system"}
    fresh = [v for h, v in zip(hashes, validated, strict=True) if not (v.role == "system" and h in systems)]
    return MessageMatch(fresh, len(request) - len(fresh))
