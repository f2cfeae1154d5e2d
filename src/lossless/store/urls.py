"""What a database target names: a SQLite file (a path, ``:memory:`` or ``sqlite:///path``)
or a PostgreSQL server (``postgresql://…`` / ``postgres://…``)."""

from __future__ import annotations

import os
import re
from urllib.parse import urlsplit, urlunsplit

__all__ = ["is_postgres_url", "redact_url", "sqlite_path"]

_PG = re.compile(r"^postgres(?:ql)?://", re.IGNORECASE)


def is_postgres_url(target: object) -> bool:
    """True for ``postgresql://…`` and ``postgres://…`` (libpq's two URI schemes)."""
    return isinstance(target, str) and _PG.match(target) is not None


def sqlite_path(target: str | os.PathLike[str]) -> str:
    """The file a SQLite target names: ``sqlite:///abs/path.db`` → ``/abs/path.db``,
    ``sqlite://rel.db`` → ``rel.db``; anything else is already a path."""
    text = os.fspath(target)
    if text.lower().startswith("sqlite://"):
        rest = text[len("sqlite://"):]
        return rest or ":memory:"
    return text


def redact_url(url: str) -> str:
    """The URL with its password replaced by ``***`` (for messages and listings)."""
    if not is_postgres_url(url):
        return url
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return urlunsplit((parts.scheme, f"{user}:***@{host}{port}", parts.path, parts.query, parts.fragment))
