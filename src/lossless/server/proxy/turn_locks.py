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
from weakref import WeakValueDictionary

__all__ = ["ConversationLocks"]


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
