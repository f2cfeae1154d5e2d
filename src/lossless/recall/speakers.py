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

from lossless.core.scripts import CJK_LETTERS

if TYPE_CHECKING:
    from lossless.core.types import Message
    from lossless.store.base import MessageLog

__all__ = ["SPEAKER_BOOST", "Candidate", "lean_to_speakers", "named_authors"]

SPEAKER_BOOST = 0.25
# the best matches whose writers are read: a boost of 1.25 lifts a match past few more
_LOOKED_AT = 64
_WORD = re.compile(r"[^\W\d_]+(?:['\u2019\u02bc][^\W\d_]+)*")
_POSSESSIVE = re.compile("['\u2019\u02bc]s$")
_CJK = re.compile(f"[{CJK_LETTERS}]")

Candidate = tuple[tuple[str, ...], bool, float]  # (message ids, whether a window, score)


def _words(query: str) -> set[str]:
    """The query's words, lower-cased, a possessive ending dropped (Caroline's → caroline)."""
    return {_POSSESSIVE.sub("", m.group(0).lower()) for m in _WORD.finditer(query)}


def named_authors(query: str, authors: set[str]) -> set[str]:
    """The ``authors`` (message names) that ``query`` names, lower-cased: a name as a word of
    its own ("Ann's" names Ann, "Anna" does not), a name of several words as those words in
    a row ("Li Wei"), and a name in Chinese, Japanese or Korean wherever it stands, since
    those scripts put no spaces around it ("小美的姐姐" names 小美)."""
    words = _words(query)
    lowered = query.lower()
    out: set[str] = set()
    for author in authors:
        name = " ".join(author.lower().split()) if author else ""
        if not name:
            continue
        if name in words:
            out.add(name)
        elif _CJK.search(name):
            if name in lowered:
                out.add(name)
        elif " " in name:
            between = r"\s+".join(re.escape(part) for part in name.split())
            if re.search(rf"(?<![^\W\d_]){between}(?![^\W\d_])", lowered):
                out.add(name)
    return out


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
        if msg is not None and msg.name and " ".join(msg.name.lower().split()) in named:
            score *= 1 + SPEAKER_BOOST
        out.append((ids, window, score))
    out.sort(key=lambda c: -c[2])
    return out + rest
