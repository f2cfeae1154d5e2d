"""Who is asking: the request's key, and the tenant it belongs to.

Keys come as ``Authorization: Bearer <key>`` (or ``x-api-key: <key>``, which is how the
Anthropic SDK sends its key). Once any key was created for the database, every request
needs an active one: missing, unknown or revoked is 401, also when every key has been
revoked (the server stays locked; ``lossless serve --keyless`` is the explicit way back to
no keys). A database that never had a key is served as a single implicit tenant (the whole
database, ids as stored), and only on a loopback address: a server bound elsewhere refuses
to start without keys (:func:`check_bind`), and a request from a non-loopback client is 403.
"""

from __future__ import annotations

import ipaddress

from lossless.server.errors import HTTPError
from lossless.server.keys import APIKeys
from lossless.server.tenancy import Tenant

__all__ = ["Authenticator", "check_bind", "is_loopback"]

_IMPLICIT = Tenant(None)


def is_loopback(host: str | None) -> bool:
    """``127.0.0.0/8``, ``::1`` or ``localhost``."""
    if not host:
        return False
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, keys: APIKeys, *, keyless: bool = False) -> str | None:
    """A warning for a keyless loopback server; raises for a keyless non-loopback one, and
    for ``keyless`` (``lossless serve --keyless``) while keys are still active."""
    if keyless and keys.any_active():
        raise HTTPError(403, "forbidden", "--keyless, but API keys are active: revoke them first "
                                          "(lossless keys ls, lossless keys revoke ID), or serve without --keyless")
    if keys.locked() and not keyless:
        return None
    if not is_loopback(host):
        raise HTTPError(403, "forbidden",
                        f"refusing to serve on {host} without API keys: anyone who can reach it could read "
                        "and write every conversation. Create a key first (lossless keys create --tenant NAME), "
                        "or bind 127.0.0.1")
    return (f"no API keys: serving the whole database without authentication on {host} (loopback only). "
            "Create one with `lossless keys create --tenant NAME` to require keys.")


class Authenticator:
    """Resolves a request's tenant (blocking: it reads the database; call it off the loop)."""

    def __init__(self, keys: APIKeys, *, allow_implicit: bool = True, keyless: bool = False) -> None:
        self.keys = keys
        self.allow_implicit = allow_implicit
        self.keyless = keyless  # started with --keyless: no key needed, though keys were created once

    def keyed(self) -> bool:
        """Whether requests need a key: once any key was created (revoked or not), unless
        the server was started with ``--keyless`` (and then no key may be active)."""
        return self.keys.any_active() or (self.keys.locked() and not self.keyless)

    def tenant(self, authorization: str | None, api_key: str | None, client_host: str | None) -> Tenant:
        if self.keyed():
            if not self.keys.any_active():
                raise HTTPError(401, "unauthorized", "every API key of this server is revoked: create one "
                                                     "(lossless keys create --tenant NAME), or restart it with "
                                                     "--keyless", {"www-authenticate": "Bearer"})
            token = _bearer(authorization) or (api_key.strip() if api_key else None)
            if not token:
                raise HTTPError(401, "unauthorized", "this server needs an API key: send Authorization: Bearer <key>",
                                {"www-authenticate": "Bearer"})
            key = self.keys.verify(token)
            if key is None:
                raise HTTPError(401, "unauthorized", "unknown or revoked API key", {"www-authenticate": "Bearer"})
            return Tenant(key.tenant, key.id)
        if not self.allow_implicit:
            raise HTTPError(401, "unauthorized", "no API key is active on this server; create one with "
                                                 "`lossless keys create --tenant NAME`", {"www-authenticate": "Bearer"})
        if client_host is not None and not is_loopback(client_host):
            raise HTTPError(403, "forbidden", "without API keys this server only answers loopback clients")
        return _IMPLICIT


def _bearer(header: str | None) -> str | None:
    if not header:
        return None
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    return value.strip() or None
