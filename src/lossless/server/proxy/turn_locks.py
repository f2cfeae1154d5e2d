"""One lock per conversation, so two requests for it are matched and stored one after the
other.

Matching a request against the stored conversation and storing what is new
(:meth:`lossless.server.proxy.base.ProxyTurn.start`) reads, then writes: two identical
requests at once (a double-send, an SDK retry racing the first attempt) would both read
"the last message is new" and both store it. Holding the conversation's lock across both
steps makes the second one see the first one's message, so it is matched as a retry.

The locks live in one server process. Several processes serving one database rely on the
matching's retry rule alone (a request that equals the newest stored messages adds
nothing), which a race between processes can still miss; run one process per database
when double-sends must never store twice.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from weakref import WeakValueDictionary

__all__ = ["ConversationLocks", "NewestAttempts"]


class ConversationLocks:
    """An :class:`asyncio.Lock` per stored conversation id, made when first asked for and
    dropped once no request holds or waits for it (a weak-valued dict), so the table is as
    large as the requests in flight, not as the conversations ever seen."""

    def __init__(self) -> None:
        self._locks: WeakValueDictionary[str, asyncio.Lock] = WeakValueDictionary()

    def __len__(self) -> int:
        return len(self._locks)

    @asynccontextmanager
    async def hold(self, conversation_id: str) -> AsyncIterator[None]:
        """Hold ``conversation_id``'s lock for the block (waiting for it first)."""
        lock = self._locks.get(conversation_id)
        if lock is None:
            lock = asyncio.Lock()
            self._locks[conversation_id] = lock
        async with lock:
            yield


class NewestAttempts:
    """Which attempt at one request may store the provider's reply: the newest one in flight.

    An SDK that timed out sends the request again while its first attempt still waits for
    the provider. When the first answer came before the retry's, it was stored, while the
    client got the retry's, another text: its next turn differed from the stored history
    (409 ``conversation_diverged`` for good). Each attempt sent to the provider is the
    newest for its conversation and request position until a later one is; a reply is
    stored only by the newest attempt in flight (or by an older one once none is: the newer
    ones failed, so a later retry replays it). An attempt is forgotten with its turn (a
    weak-valued dict), so the table is as large as the requests in flight."""

    def __init__(self) -> None:
        self._newest: WeakValueDictionary[tuple[str, int], Any] = WeakValueDictionary()

    def begin(self, conversation_id: str, request_seq: int, attempt: object) -> None:
        """``attempt`` is now the newest for the request ending at ``request_seq``."""
        self._newest[(conversation_id, request_seq)] = attempt

    def may_store(self, conversation_id: str, request_seq: int, attempt: object) -> bool:
        """Whether no newer attempt at the same request is in flight."""
        newest = self._newest.get((conversation_id, request_seq))
        return newest is None or newest is attempt
