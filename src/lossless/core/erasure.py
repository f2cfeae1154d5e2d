"""What an erased message becomes: the one deliberate exception to immutability.

Stored messages never change (the stores' triggers refuse any UPDATE or DELETE). For
privacy a message can be *erased*: it keeps its id, seq, role, name, time and place in
the DAG, its text becomes :data:`ERASED`, the arguments of its tool calls too (their
ids and function names stay, so a tool result still follows its call), and a tombstone
records who erased it, when and why. Its ``content_hash`` becomes the hash of the
message as erased, so ``verify`` re-hashes it cleanly; the original hash is not kept (a
hash of a short text such as a phone number can be guessed back).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from lossless.core._canonical import message_hash
from lossless.core.errors import ValidationError

__all__ = ["ERASED", "erased_hash", "erased_tool_calls", "summary_note", "tombstone_id", "validate_erase"]

ERASED = "[erased]"
MAX_REASON = 2_000


def erased_tool_calls(tool_calls: Sequence[Any]) -> list[Any]:
    """The tool calls of an erased message: each keeps its id, type and function name,
    its arguments become :data:`ERASED`."""
    out: list[Any] = []
    for call in tool_calls:
        if not isinstance(call, dict):
            out.append(ERASED)
            continue
        kept: dict[str, Any] = {k: call[k] for k in ("id", "type") if k in call}
        function = call.get("function")
        if isinstance(function, dict):
            kept["function"] = {"name": function.get("name"), "arguments": ERASED}
        out.append(kept)
    return out


def erased_hash(role: str, name: str | None, tool_calls: Sequence[Any], tool_call_id: str | None) -> str:
    """The content hash of a message as erased (what its tombstone names)."""
    return message_hash(role, ERASED, name, list(tool_calls), tool_call_id)


def tombstone_id(message_id: str, erased_at: str) -> str:
    """``tomb_`` and 20 hex digits over the message id and the time of the erase."""
    return "tomb_" + hashlib.sha256(f"{message_id}\x00{erased_at}".encode()).hexdigest()[:20]


def summary_note(first_seq: int, last_seq: int) -> str:
    """The header an erase puts above the rewritten text of a summary over #first..#last."""
    return (f"[a message of #{first_seq}–#{last_seq} was erased; this summary was rewritten without it]")


def validate_erase(reason: object, by: object) -> tuple[str, str]:
    """The reason and the eraser, checked: both non-empty text (an erase is audited)."""
    if not isinstance(reason, str) or not reason.strip():
        raise ValidationError("erase needs a reason (non-empty text): it is recorded in the tombstone")
    if not isinstance(by, str) or not by.strip():
        raise ValidationError("erase needs by= (who erases, non-empty text): it is recorded in the tombstone")
    if len(reason) > MAX_REASON:
        raise ValidationError(f"the erase reason is {len(reason)} characters; at most {MAX_REASON}")
    return reason.strip(), by.strip()
