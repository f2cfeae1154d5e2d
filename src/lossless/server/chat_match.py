"""Which messages of a proxied request are new: the client sends its chat every time,
lossless stores each message once.

Every message is identified by the hash the store keeps for it (role, content, name, tool
calls, tool call id: :func:`lossless.core._canonical.message_hash`), with Anthropic's
``cache_control`` marks on content parts left out (a client moves its cache breakpoint to
its newest message every turn: the message it took the mark off is the same message;
:func:`chat_hash`). A request is matched
by content against the stored conversation, first position by position from its first
message:

* the request **extends** what is stored (every stored message in order, then more): the
  messages after the stored ones are new;
* the request is **stored already** (all of it, or all but the newest message when that
  is an assistant reply: an SDK retrying after a timeout, a client re-sending): nothing is
  new; the stored reply after it is the answer to replay (the client did not get it the
  first time).

Then against the stored tail, for a client that trims old history and sends a **sliding
window** (its last messages, maybe behind its system prompt). The request's non-system
messages are compared with the stored non-system messages that end the conversation; the
longest run that is both a suffix of the stored ones and a prefix of the request's is the
overlap:

* the overlap is the whole request: a retry, nothing is new;
* the request is the stored tail but for the newest stored message, an assistant reply:
  a retry, that reply is replayed;
* otherwise the request's messages after the overlap are new.

The last two need a convincing overlap: at least two messages, or one that is an assistant
reply or a tool result (a user's "ok" that repeats the previous user message is a new
message, not an overlap). Only the newest ``len(request) + 8`` stored messages are read for
this (more, up to twice that, when stored system messages take their room). A system
message of the request that is stored already (the pinned prompt) is not stored again; one
that is not is new (stored before the request's new messages).

Then what is left:

* the request matches the start of the conversation but ends further back (an old request
  sent again): its stored reply is replayed; if a message that is not a reply follows it,
  that is :class:`Diverged`;
* the request shares the start of the conversation, and what is stored after that is a
  turn that never got a reply (one to four user messages: the provider refused it, or the
  call failed), while the request sends something else in its place: the request's
  messages after the shared ones are new, stored after the unanswered turn, which stays
  in the history (a rephrased question after a refusal);
* the request differs from what is stored at some position, and has a non-system message
  at the same position as the stored one before or after it (an edited or regenerated
  turn, the whole chat sent with an earlier message changed): lossless history is
  append-only, so that is :class:`Diverged` (HTTP 409), naming the first position that
  differs;
* the request shares nothing with the stored conversation: a client that lets lossless
  keep the history and sends only its new messages. They are stored (a system prompt
  stored already is not stored again).

Content cannot always tell these apart (a chat that repeats itself word for word can be a
window or a retry); the first rule that fits, in this order, decides.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lossless.core._canonical import message_hash
from lossless.core.errors import LosslessError, ValidationError
from lossless.core.types import Message
from lossless.core.validate import NewMessage, validate_message

__all__ = ["Diverged", "MessageMatch", "chat_hash", "match_request", "storable", "storable_labelled", "unmarked"]

_KEEP = ("role", "content", "name", "tool_calls", "tool_call_id")
# stored messages read for a sliding window beyond the request's own length: room for the
# reply to replay and for system prompts stored between the messages the window repeats
_TAIL_SLACK = 8
# a one-message overlap is only trusted when it is a message a user does not repeat at will
_DISTINCT_ROLES = ("assistant", "tool")


class Diverged(LosslessError):
    """The request rewrites stored history (HTTP 409 ``conversation_diverged``)."""


def storable(messages: Any) -> list[dict[str, Any]]:
    """OpenAI chat messages reduced to what lossless stores: ``developer`` becomes
    ``system``; provider-only fields (``refusal``, ``audio``, …) and the ``cache_control``
    marks of content parts (:func:`unmarked`) are dropped; an assistant
    turn with neither text nor tool calls carries nothing and is left out (lossless does
    not store an empty reply either, so matching stays aligned)."""
    return storable_labelled(messages)[0]


def storable_labelled(messages: Any, labels: Sequence[str] | None = None) -> tuple[list[dict[str, Any]], list[str]]:
    """:func:`storable`, and for each message kept where the client wrote it (``labels``,
    one per message, default ``messages[i]``), so an error names the client's own message
    even when a message before it was left out or a wire format was converted."""
    if not isinstance(messages, list) or not messages:
        raise ValidationError("'messages' must be a non-empty list")
    out: list[dict[str, Any]] = []
    kept_labels: list[str] = []
    for index, message in enumerate(messages):
        label = labels[index] if labels is not None else f"messages[{index}]"
        if not isinstance(message, Mapping):
            raise ValidationError(f"{label} must be an object, got {type(message).__name__}")
        kept = {k: message[k] for k in _KEEP if message.get(k) is not None}
        if "content" in kept:
            kept["content"] = unmarked(kept["content"])
        if kept.get("role") == "developer":
            kept["role"] = "system"
        if kept.get("role") == "assistant" and not kept.get("content"):
            if not kept.get("tool_calls"):
                continue
            kept.pop("content", None)  # "" and null are the same empty text beside tool calls
        out.append(kept)
        kept_labels.append(label)
    return out, kept_labels


def unmarked(content: Any) -> Any:
    """``content`` without the ``cache_control`` marks of its parts (Anthropic's prompt-cache
    breakpoints: where the client wants this request cached, not what the message says)."""
    if not isinstance(content, list) or not any(isinstance(p, Mapping) and "cache_control" in p for p in content):
        return content
    return [{k: v for k, v in p.items() if k != "cache_control"} if isinstance(p, Mapping) else p for p in content]


def _new_hash(new: NewMessage) -> str:
    return message_hash(new.role, unmarked(new.content), new.name, new.tool_calls, new.tool_call_id)


def stored_hash(msg: Message) -> str:
    # unmarked: a message stored with a mark (before marks were taken off on the way in) is
    # still the message a client sends without it
    return message_hash(msg.role, unmarked(msg.content), msg.name, msg.tool_calls, msg.tool_call_id)


def chat_hash(message: Mapping[str, Any]) -> str:
    """The hash matching compares for a chat message (a :func:`storable` one, or a context's)."""
    return message_hash(str(message.get("role")), unmarked(message.get("content")), message.get("name"),
                        message.get("tool_calls"), message.get("tool_call_id"))


@dataclass(frozen=True)
class MessageMatch:
    new: list[NewMessage]  # the request's messages to store (validated), in order
    known: int  # how many request messages were already stored
    replay: Message | None = None  # the stored reply to a request that was stored already
    through: int = 0  # with nothing new: the seq of the request's last message as stored


def match_request(request: Sequence[dict[str, Any]], stored_count: int,
                  read: Callable[[int, int], list[Message]], max_bytes: int,
                  labels: Sequence[str] | None = None) -> MessageMatch:
    """Split the request's (storable) messages into known and new; ``read(first, last)``
    gives the stored messages of that seq range; ``labels`` name the messages in errors as
    the client wrote them (:func:`storable_labelled`; default ``messages[i]``). See the
    module docstring. Each message is validated once, here: the new ones are returned
    validated, to be stored as they are."""
    names = list(labels) if labels is not None else [f"messages[{i}]" for i in range(len(request))]
    validated: list[NewMessage] = []
    for i, m in enumerate(request):
        try:
            validated.append(validate_message(m, max_bytes=max_bytes))
        except ValidationError as exc:
            raise ValidationError(f"{names[i]}: {exc}") from None
    if stored_count == 0:
        return MessageMatch(validated, 0)
    hashes = [_new_hash(m) for m in validated]
    n = min(len(hashes), stored_count)
    head = read(1, n + 1)  # one more: the message after the request, if it is stored already
    common = 0
    while common < n and hashes[common] == stored_hash(head[common]):
        common += 1
    after = head[n] if common == n and len(head) > n else None
    if common == n:  # aligned with what is stored from its first message
        if len(hashes) > stored_count:
            return MessageMatch(validated[stored_count:], stored_count)
        if after is None:
            return MessageMatch([], n, None, n)
        if after.role == "assistant" and after.seq == stored_count:
            return MessageMatch([], n, after, n)
    tail = head if stored_count <= len(head) else _read_tail(read, stored_count, validated)
    systems = {stored_hash(m) for m in (*head, *tail) if m.role == "system"}
    window = _match_window(validated, hashes, tail, systems, stored_count)
    if window is not None:
        return window
    if after is not None:  # an older request sent again
        if after.role == "assistant":
            return MessageMatch([], n, after, n)
        raise Diverged(f"the request is stored already, and the conversation went on past it (#{after.seq} "
                       f"{after.role} follows it, not a reply): send the whole conversation, only the new "
                       "messages, or a window of the newest ones")
    shared = next((i for i in range(common, n)
                   if validated[i].role != "system" and hashes[i] == stored_hash(head[i])), None)
    if shared is None and _unanswered(head, common, stored_count):
        # the stored turn after the shared messages never got a reply (the provider refused
        # it, or the call failed): the client sends another message in its place, which is
        # stored after it; the unanswered one stays in the history
        return MessageMatch(validated[common:], common)
    if shared is not None or any(m.role != "system" for m in validated[:common]):
        stored = head[common]
        why = ("the request had matched up to it" if shared is None
               else f"while {names[shared]} is the stored #{head[shared].seq}")
        raise Diverged(f"{names[common]} ({validated[common].role}) differs from the stored message "
                       f"#{stored.seq} ({stored.role}, {stored.id}) {why}: lossless history is append-only, "
                       "so an edited or regenerated turn needs a new conversation id (or send only the new "
                       "messages)")
    # only new messages (and maybe a system prompt stored already)
    fresh = [v for h, v in zip(hashes, validated, strict=True) if not (v.role == "system" and h in systems)]
    return MessageMatch(fresh, len(request) - len(fresh))


def _unanswered(head: Sequence[Message], common: int, stored_count: int) -> bool:
    """Whether everything stored after the request's first ``common`` messages (at least
    one shared, and ``head`` holding the whole rest) is the user's, with no reply after it:
    a turn that never got an answer."""
    rest = head[common:stored_count]
    return (common > 0 and len(head) >= stored_count and 0 < len(rest) <= _UNANSWERED_MAX
            and all(m.role == "user" for m in rest))


_UNANSWERED_MAX = 4  # user messages in a row a failed turn may have left (a retry loop's)


def _read_tail(read: Callable[[int, int], list[Message]], stored_count: int,
               validated: list[NewMessage]) -> list[Message]:
    """The newest stored messages, enough to hold as many non-system ones as the request
    has, plus the reply after them: ``len(request) + 8`` at first, more when stored system
    prompts (a client's changed prompt, stored each time) take their room; never more than
    ``2 * len(request) + 8``."""
    wanted = sum(v.role != "system" for v in validated) + 1
    cap = 2 * len(validated) + _TAIL_SLACK
    first = max(1, stored_count - len(validated) - _TAIL_SLACK + 1)
    tail = read(first, stored_count)
    while first > 1:
        short = wanted - sum(m.role != "system" for m in tail)
        start = max(1, first - short, stored_count - cap + 1)
        if short <= 0 or start >= first:
            break
        tail = read(start, first - 1) + tail
        first = start
    return tail


def _match_window(validated: list[NewMessage], hashes: list[str], tail: list[Message],
                  systems: set[str], stored_count: int) -> MessageMatch | None:
    """The request as a sliding window over the stored tail (see the module docstring), or
    None when it does not overlap the tail convincingly."""
    body = [i for i, v in enumerate(validated) if v.role != "system"]
    if not body:
        return None
    body_hashes = [hashes[i] for i in body]
    ours = [m for m in tail if m.role != "system"]
    ours_hashes = [stored_hash(m) for m in ours]
    overlap = _overlap(ours_hashes, body_hashes)
    replay = None
    if overlap < len(body):
        newest = ours[-1] if ours else None
        if (newest is not None and newest.role == "assistant" and newest.seq == stored_count
                and _convincing(validated[body[0]], len(body))
                and ours_hashes[-len(body) - 1:-1] == body_hashes):
            overlap, replay = len(body), newest
        elif overlap == 0 or not _convincing(validated[body[0]], overlap):
            return None
    # known: the body's first `overlap` messages, and system messages stored already
    cut = body[overlap - 1]
    new = [v for i, (h, v) in enumerate(zip(hashes, validated, strict=True))
           if (v.role == "system" and h not in systems) or (v.role != "system" and i > cut)]
    if new:
        return MessageMatch(new, len(validated) - len(new))
    if replay is not None:
        return MessageMatch([], len(validated), replay, ours[-2].seq)
    return MessageMatch([], len(validated), None, stored_count)


def _convincing(first: NewMessage, overlap: int) -> bool:
    """Whether an overlap of ``overlap`` messages starting with ``first`` shows the request
    repeats stored history, rather than a user saying the same thing again."""
    return overlap >= 2 or first.role in _DISTINCT_ROLES


def _overlap(stored: Sequence[str], request: Sequence[str]) -> int:
    """The length of the longest suffix of ``stored`` that is a prefix of ``request``
    (Knuth-Morris-Pratt: linear in both)."""
    if not request:
        return 0
    fallback = [0] * len(request)  # fallback[i]: the longest proper border of request[:i + 1]
    k = 0
    for i in range(1, len(request)):
        while k and request[i] != request[k]:
            k = fallback[k - 1]
        if request[i] == request[k]:
            k += 1
        fallback[i] = k
    matched = 0
    for h in stored:
        if matched == len(request):
            matched = fallback[matched - 1]
        while matched and h != request[matched]:
            matched = fallback[matched - 1]
        if h == request[matched]:
            matched += 1
    return matched
