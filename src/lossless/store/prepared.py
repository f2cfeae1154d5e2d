"""A new message's rows, made before the write transaction that stores it.

Everything about a message but its seq, id and rowid (its JSON, content hash, search
document, and the :class:`~lossless.core.types.Message` it comes back as) is computed
outside :meth:`~lossless.store.sql.SQLStore.append_messages`'s transaction: on SQLite that
transaction holds the store's lock, which every read of the process waits for, so a batch
holds it for little more than the inserts (a read beside a 40,000-message batch waited up
to 1.5 s, now 0.4 s); on PostgreSQL it holds the conversation's row lock.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from lossless.core._canonical import canonical_json, message_hash
from lossless.core.render import content_text
from lossless.core.types import Message
from lossless.core.validate import NewMessage, timestamp

__all__ = ["PreparedMessage"]


@dataclass(frozen=True, slots=True)
class PreparedMessage:
    columns: tuple[Any, ...]  # the messages row after (rowid, id, conversation_id, seq)
    document: str  # the text its search index is given (the store's ``_search_text`` of it)
    fields: dict[str, Any]  # the returned Message's fields but id, conversation_id and seq

    @classmethod
    def of(cls, msg: NewMessage, tokens: int, search_text: Callable[[str], str]) -> PreparedMessage:
        content = msg.content
        stored = canonical_json(content) if isinstance(content, list) else content
        calls = canonical_json(list(msg.tool_calls)) if msg.tool_calls else None
        meta = canonical_json(msg.metadata) if msg.metadata else "{}"
        created = msg.created_at.isoformat()
        columns = (msg.role, msg.name, stored, int(isinstance(content, list)), calls, msg.tool_call_id, created,
                   timestamp(msg.created_at), tokens, meta, msg.external_id,
                   message_hash(msg.role, content, msg.name, msg.tool_calls, msg.tool_call_id))
        text = content_text(content, msg.tool_calls)
        text = f"{msg.name}: {text}" if msg.name else text
        # the Message as a read would give it back: the values written, parsed again
        fields = {"role": msg.role,
                  "content": json.loads(stored) if isinstance(content, list) and stored is not None else content,
                  "created_at": datetime.fromisoformat(created), "token_count": tokens, "name": msg.name,
                  "tool_calls": tuple(json.loads(calls)) if calls else (), "tool_call_id": msg.tool_call_id,
                  "metadata": json.loads(meta) if msg.metadata else {}, "external_id": msg.external_id}
        return cls(columns, search_text(text), fields)

    def message(self, message_id: str, conversation_id: str, seq: int) -> Message:
        return Message(id=message_id, conversation_id=conversation_id, seq=seq, **self.fields)
