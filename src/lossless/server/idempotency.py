"""Idempotency keys on the proxy: ``Idempotency-Key: <any string>`` (as payment APIs take
it) makes a retried request exact. The first request with a key is recorded with a hash
of what it asked (model and messages) and the seq its messages end at; the reply, once
stored, is recorded too. A retry with the same key and the same request stores nothing
and gets the stored reply again (or is forwarded again if no reply came yet); the same
key with a different request is refused (422), as a payment API refuses it."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from lossless.core.errors import ValidationError
from lossless.store.runner import sql_runner

__all__ = ["IdempotencyRecord", "ProxyRequests", "request_sha256"]

MAX_KEY_LENGTH = 255


@dataclass(frozen=True, slots=True)
class IdempotencyRecord:
    key: str
    request_sha256: str
    request_seq: int
    reply_id: str | None


def request_sha256(model: Any, messages: list[dict[str, Any]]) -> str:
    canonical = json.dumps([model, messages], ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def check_key(key: str) -> str:
    key = key.strip()
    if not key or len(key) > MAX_KEY_LENGTH or not key.isprintable():
        raise ValidationError(f"Idempotency-Key must be 1 to {MAX_KEY_LENGTH} printable characters")
    return key


class ProxyRequests:
    def __init__(self, store: Any) -> None:
        self.db = sql_runner(store)

    def get(self, conversation_id: str, key: str) -> IdempotencyRecord | None:
        rows = self.db.query("SELECT request_sha256, request_seq, reply_id FROM proxy_requests "
                             "WHERE conversation_id = ? AND idempotency_key = ?", (conversation_id, key))
        if not rows:
            return None
        sha, seq, reply = rows[0]
        return IdempotencyRecord(key, sha, int(seq), reply)

    def record(self, conversation_id: str, key: str, sha: str, request_seq: int) -> None:
        """Record the first request with this key (a concurrent twin's row stands)."""
        self.db.query("INSERT INTO proxy_requests (conversation_id, idempotency_key, request_sha256, request_seq, "
                      "created_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT (conversation_id, idempotency_key) DO NOTHING",
                      (conversation_id, key, sha, request_seq, datetime.now(UTC).isoformat()))

    def replied(self, conversation_id: str, key: str, reply_id: str) -> None:
        self.db.query("UPDATE proxy_requests SET reply_id = ? WHERE conversation_id = ? AND idempotency_key = ? "
                      "AND reply_id IS NULL", (reply_id, conversation_id, key))
