"""Retrieval units cut from messages: single messages (long ones as several passages)
and windows of three user→assistant pairs with stride two (seed 001's QA-pair windows).

Units are text only; any number of embedders can index them. They are cut incrementally:
a window is made only once all three of its pairs are closed (a later user message
exists), so a window never changes after it is written.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from lossless.core.erasure import ERASED
from lossless.core.render import message_text
from lossless.core.tokens import TokenCounter
from lossless.core.types import Message
from lossless.core.validate import timestamp

__all__ = ["Unit", "message_units", "qa_pairs", "text_sha256", "window_units"]

PASSAGE_TOKENS = 200  # a small encoder reads ~256 word pieces: longer text would be cut off
MAX_PASSAGES = 64  # beyond this a huge message is found by keyword search only
WINDOW_PAIRS = 3
WINDOW_STRIDE = 2
_USER_CHARS = 480  # of each pair in a window's digest: the question and the answer's opening
_ANSWER_CHARS = 240
_SPLIT = re.compile(r"(?<=[.!?。！？；])\s+|\n+")


@dataclass(frozen=True, slots=True)
class Unit:
    kind: str  # "message" | "window"
    first_seq: int
    last_seq: int
    part: int
    role: str | None
    message_ids: tuple[str, ...]
    text: str
    start_ts: float
    end_ts: float

    @property
    def sha256(self) -> str:
        return text_sha256(self.text)


def text_sha256(text: str) -> str:
    """The embedding cache's key for a text (with the provider and model)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _passages(text: str, counter: TokenCounter) -> list[str]:
    if counter.count(text) <= PASSAGE_TOKENS:
        return [text]
    out: list[str] = []
    current: list[str] = []
    size = 0
    for piece in _SPLIT.split(text):
        piece = piece.strip()
        if not piece:
            continue
        n = counter.count(piece)
        if n > PASSAGE_TOKENS:  # one enormous sentence or line: cut it by characters
            for i in range(0, len(piece), PASSAGE_TOKENS * 3):
                out.append(piece[i : i + PASSAGE_TOKENS * 3])
            continue
        if current and size + n > PASSAGE_TOKENS:
            out.append(" ".join(current))
            current, size = [], 0
        current.append(piece)
        size += n
        if len(out) >= MAX_PASSAGES:
            break
    if current and len(out) < MAX_PASSAGES:
        out.append(" ".join(current))
    return out[:MAX_PASSAGES] or [text[: PASSAGE_TOKENS * 3]]


def message_units(messages: Sequence[Message], counter: TokenCounter) -> list[Unit]:
    units: list[Unit] = []
    for msg in messages:
        if msg.role == "tool":
            continue  # logs and JSON: their identifiers and numbers are found by keyword search
        if msg.content == ERASED and not msg.tool_calls:
            continue  # erased: its vector would be the marker's, a near match for any short question
        text = message_text(msg).strip()
        if not text:
            continue
        who = f"{msg.name} ({msg.role})" if msg.name else msg.role
        for part, passage in enumerate(_passages(text, counter)):
            units.append(Unit("message", msg.seq, msg.seq, part, msg.role, (msg.id,), f"{who}: {passage}",
                              timestamp(msg.created_at), timestamp(msg.created_at)))
    return units


def qa_pairs(messages: Sequence[Message]) -> list[list[Message]]:
    """Each pair: a user message and the messages after it up to the next user message."""
    pairs: list[list[Message]] = []
    for msg in messages:
        if msg.role == "user":
            pairs.append([msg])
        elif pairs:
            pairs[-1].append(msg)
    return pairs


def _digest(pair: list[Message]) -> str:
    user = message_text(pair[0]).strip()[:_USER_CHARS]
    answer = " ".join(message_text(m).strip() for m in pair[1:] if m.role == "assistant" and m.content)
    who = pair[0].name or "user"
    return f"{who}: {user}\nassistant: {answer[:_ANSWER_CHARS]}".strip()


def window_units(messages: Sequence[Message], *, closed: bool) -> tuple[list[Unit], int | None]:
    """Windows over the QA pairs of ``messages`` (which start at a window boundary).

    Only windows whose pairs are all closed are made: with ``closed`` False the last pair
    may still grow. Returns the windows and the seq just before the next window's start
    (None when no window was made).
    """
    pairs = qa_pairs(messages)
    usable = len(pairs) if closed else len(pairs) - 1
    units: list[Unit] = []
    start = 0
    next_start: int | None = None
    while start + WINDOW_PAIRS <= usable:
        chunk = pairs[start : start + WINDOW_PAIRS]
        msgs = [m for pair in chunk for m in pair]
        text = "\n".join(_digest(pair) for pair in chunk)
        units.append(Unit("window", msgs[0].seq, msgs[-1].seq, 0, None, tuple(m.id for m in msgs), text,
                          timestamp(msgs[0].created_at), timestamp(msgs[-1].created_at)))
        start += WINDOW_STRIDE
        next_start = pairs[start][0].seq - 1 if start < len(pairs) else msgs[-1].seq
    return units, next_start
