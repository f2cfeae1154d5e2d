"""Recall leaning toward what the person a question names said (issue 27 item 4).

A question that names someone who wrote messages in the conversation ("What is
Caroline's sister's job?", where Caroline is the ``name`` of one side of the chat) is most
often answered by that person's own messages ("my sister's a nurse now"). Among the best
matches of the question's words, those written by a named person get their score raised
by :data:`SPEAKER_BOOST` and the matches are sorted again: a tie-break between matches,
never a way in for a message that matches nothing.

Only names count. Leaning toward the user's messages when a question says "I" or "my"
(or toward the assistant's on "you said") was measured on the four dev sets of
``bench/retention.py`` and kept out: it lost answer recall on BEAM at 1024 tokens and on
LongMemEval at 2048 as often as it won.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lossless.core.types import Message
    from lossless.store.base import MessageLog

__all__ = ["SPEAKER_BOOST", "Candidate", "lean_to_speakers", "named_authors"]

SPEAKER_BOOST = 0.25
# the best matches whose writers are read: a boost of 1.25 lifts a match past few more
_LOOKED_AT = 64
_WORD = re.compile(r"[^\W\d_]+(?:['\u2019\u02bc][^\W\d_]+)*")
_POSSESSIVE = re.compile("['\u2019\u02bc]s$")

Candidate = tuple[tuple[str, ...], bool, float]  # (message ids, whether a window, score)


def _words(query: str) -> set[str]:
    """The query's words, lower-cased, a possessive ending dropped (Caroline's → caroline)."""
    return {_POSSESSIVE.sub("", m.group(0).lower()) for m in _WORD.finditer(query)}


def named_authors(query: str, authors: set[str]) -> set[str]:
    """The ``authors`` (message names) that ``query`` names as a word of its own, lower-cased."""
    words = _words(query)
    return {a.lower() for a in authors if a and a.lower() in words}


def lean_to_speakers(store: MessageLog, query: str, candidates: list[Candidate],
                     read_into: dict[str, Message] | None = None) -> list[Candidate]:
    """``candidates`` (best first) with the score of each single message among the first
    ``_LOOKED_AT`` written by someone ``query`` names raised by :data:`SPEAKER_BOOST` and
    those sorted again (ties keep their order); unchanged when it names no writer. The
    messages it reads are added to ``read_into`` (the caller packs them next)."""
    head, rest = candidates[:_LOOKED_AT], candidates[_LOOKED_AT:]
    single = [ids[0] for ids, _window, _score in head if len(ids) == 1]
    if not single or not _WORD.search(query):
        return candidates
    read = store.messages_by_id(single)
    if read_into is not None:
        read_into.update(read)
    named = named_authors(query, {m.name for m in read.values() if m.name})
    if not named:
        return candidates
    out: list[Candidate] = []
    for ids, window, score in head:
        msg = read.get(ids[0]) if len(ids) == 1 else None
        if msg is not None and msg.name and msg.name.lower() in named:
            score *= 1 + SPEAKER_BOOST
        out.append((ids, window, score))
    out.sort(key=lambda c: -c[2])
    return out + rest
