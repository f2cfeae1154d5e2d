"""API keys of the HTTP server: create (shown once), list, revoke, verify.

A key looks like ``lsk_<id>_<secret>``: ``id`` (12 hex) names its row, ``secret`` is 256
random bits. Only ``sha256(salt || secret)`` with a random per-key salt is stored (table
``api_keys``, migration 7 on SQLite and on PostgreSQL), never the key. Every key belongs
to a *tenant*: the conversations and memories it can reach (see
:mod:`lossless.server.tenancy`). The SQL runs on either store
(:mod:`lossless.store.runner`). Needs no server extra, so ``lossless keys`` works without
starlette.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import secrets
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from lossless.core.errors import NotFoundError, StoreError, ValidationError
from lossless.core.tenants import TENANT_NAME
from lossless.store.runner import sql_runner

if TYPE_CHECKING:
    from lossless.store.base import Store

__all__ = ["KEY_PREFIX", "TENANT_PATTERN", "APIKey", "APIKeys", "check_tenant"]

log = logging.getLogger("lossless.server")

KEY_PREFIX = "lsk_"
TENANT_PATTERN = re.compile(rf"^{TENANT_NAME}$")
_KEY = re.compile(r"^lsk_([0-9a-f]{12})_([A-Za-z0-9_-]{43})$")
_TOUCH_EVERY = 60.0  # seconds between last_used_at writes for one key


def check_tenant(tenant: object) -> str:
    """A tenant name: 1-64 ASCII letters, digits, ``_``, ``.``, ``-``, starting with a
    letter or digit (it becomes part of stored ids and key listings, so no ``/`` or ``@``;
    a tenant is an operator's label, not a user's display name)."""
    if not isinstance(tenant, str) or not TENANT_PATTERN.match(tenant):
        raise ValidationError(f"tenant must be 1-64 ASCII letters (a-z, A-Z), digits, '_', '.' or '-', starting "
                              f"with a letter or digit; got {tenant!r}")
    return tenant


@dataclass(frozen=True, slots=True)
class APIKey:
    """One key's row, without anything that would let you rebuild the key."""

    id: str
    tenant: str
    name: str | None
    prefix: str
    created_at: datetime
    revoked_at: datetime | None
    last_used_at: datetime | None

    @property
    def active(self) -> bool:
        return self.revoked_at is None

    def to_dict(self) -> dict[str, object]:
        return {"id": self.id, "tenant": self.tenant, "name": self.name, "prefix": self.prefix,
                "created_at": self.created_at.isoformat(),
                "revoked_at": self.revoked_at.isoformat() if self.revoked_at else None,
                "last_used_at": self.last_used_at.isoformat() if self.last_used_at else None,
                "active": self.active}


def _digest(salt: bytes, secret: str) -> str:
    return hashlib.sha256(salt + secret.encode("utf-8")).hexdigest()


def _time(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


_COLS = "id, tenant, name, prefix, created_at, revoked_at, last_used_at"


class APIKeys:
    """The keys stored in one lossless database (SQLite or PostgreSQL)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.db = sql_runner(store)  # the SQL below runs as written on both
        self._touched: dict[str, float] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _row(row: tuple[object, ...]) -> APIKey:
        kid, tenant, name, prefix, created, revoked, used = row
        return APIKey(id=str(kid), tenant=str(tenant), name=name if isinstance(name, str) else None,
                      prefix=str(prefix), created_at=datetime.fromisoformat(str(created)),
                      revoked_at=_time(revoked if isinstance(revoked, str) else None),
                      last_used_at=_time(used if isinstance(used, str) else None))

    def create(self, tenant: str, name: str | None = None) -> tuple[APIKey, str]:
        """A new key for ``tenant``: its row and the key itself (the only time it exists)."""
        check_tenant(tenant)
        if name is not None and (not isinstance(name, str) or len(name) > 200):
            raise ValidationError("key name must be a string of at most 200 characters")
        kid = secrets.token_hex(6)
        secret = secrets.token_urlsafe(32)  # 43 characters of base64url: 256 bits
        key = f"{KEY_PREFIX}{kid}_{secret}"
        salt = secrets.token_bytes(16)
        now = datetime.now(UTC).isoformat()
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT INTO api_keys (id, tenant, name, salt, hash, prefix, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (f"key_{kid}", tenant, name, salt.hex(), _digest(salt, secret), key[:12], now),
            )
        return self.get(f"key_{kid}"), key

    def get(self, key_id: str) -> APIKey:
        rows = self.db.query(f"SELECT {_COLS} FROM api_keys WHERE id = ?", (key_id,))
        if not rows:
            raise NotFoundError(f"no API key {key_id!r}")
        return self._row(rows[0])

    def ls(self, tenant: str | None = None, *, include_revoked: bool = True) -> list[APIKey]:
        where, args = [], []
        if tenant is not None:
            where.append("tenant = ?")
            args.append(tenant)
        if not include_revoked:
            where.append("revoked_at IS NULL")
        sql = f"SELECT {_COLS} FROM api_keys {'WHERE ' + ' AND '.join(where) if where else ''} ORDER BY created_at, id"
        return [self._row(r) for r in self.db.query(sql, args)]

    def revoke(self, key_id: str) -> APIKey:
        """Refuse this key from now on (its row stays, with ``revoked_at``)."""
        with self.db.transaction() as conn:
            row = conn.execute("SELECT revoked_at FROM api_keys WHERE id = ?", (key_id,)).fetchone()
            if row is None:
                raise NotFoundError(f"no API key {key_id!r}")
            if row[0] is None:
                conn.execute("UPDATE api_keys SET revoked_at = ? WHERE id = ?", (datetime.now(UTC).isoformat(), key_id))
        return self.get(key_id)

    def any_active(self) -> bool:
        return bool(self.db.query("SELECT 1 FROM api_keys WHERE revoked_at IS NULL LIMIT 1"))

    def locked(self) -> bool:
        """Whether the server needs keys: once any key was created, revoked or not. Revoking
        the last key leaves the server refusing everyone (not open to anyone): only an
        explicit ``lossless serve --keyless`` serves such a database without keys."""
        return bool(self.db.query("SELECT 1 FROM api_keys LIMIT 1"))

    def verify(self, key: str) -> APIKey | None:
        """The active key ``key`` is, or None (unknown, malformed or revoked). Compares
        hashes in constant time; records the use at most once a minute per key."""
        match = _KEY.match(key.strip()) if isinstance(key, str) else None
        if match is None:
            return None
        kid, secret = f"key_{match.group(1)}", match.group(2)
        rows = self.db.query("SELECT salt, hash, revoked_at FROM api_keys WHERE id = ?", (kid,))
        if not rows:
            return None
        salt, stored, revoked = rows[0]
        if not hmac.compare_digest(_digest(bytes.fromhex(str(salt)), secret), str(stored)) or revoked is not None:
            return None
        self._touch(kid)
        return self.get(kid)

    def _touch(self, key_id: str) -> None:
        """Record the key's use, best effort: a request only reading must not wait for the
        write lock (another process may hold it for seconds), so the write is tried without
        waiting, and when it cannot be made now the next request tries again."""
        now = time.monotonic()
        with self._lock:
            if now - self._touched.get(key_id, -_TOUCH_EVERY) < _TOUCH_EVERY:
                return
            self._touched[key_id] = now
        try:
            with self.db.transaction(wait=False) as conn:
                conn.execute("UPDATE api_keys SET last_used_at = ? WHERE id = ?",
                             (datetime.now(UTC).isoformat(), key_id))
        except StoreError as exc:
            log.debug("lossless: the use of %s is not recorded yet: %s", key_id, exc)
            with self._lock:
                self._touched.pop(key_id, None)
