"""Who holds a lease: owner strings, and whether a holder is gone.

Compaction leases (one compactor per conversation) and backlog claims (one worker per
queued conversation) are rows naming their holder as ``host:pid:thread:nonce``. A holder
refreshes its row while it works; a row that stops being refreshed is taken over after
its time runs out. A holder that is a dead process on this very host (SIGKILL, OOM), or
a run of this process that ended without releasing its row, need not be waited for:
:func:`holder_is_dead` says so at once.
"""

from __future__ import annotations

import os
import secrets
import socket
import threading

__all__ = ["HOST", "holder_is_dead", "live", "new_owner", "retire"]


def _host_identity() -> str:
    """This host's name and, on Linux, its pid namespace: containers that share a
    hostname and a database file must not judge each other's pids."""
    host = socket.gethostname().replace(":", "_")
    try:
        return f"{host}@{os.stat('/proc/self/ns/pid').st_ino}"
    except OSError:
        return host


HOST = _host_identity()
_LIVE: set[str] = set()  # owners of the leases and claims held by runs of this process
_LIVE_GUARD = threading.Lock()


def new_owner() -> str:
    """A fresh owner string for this thread; :func:`live` it before taking a row."""
    return f"{HOST}:{os.getpid()}:{threading.get_ident()}:{secrets.token_hex(4)}"


def live(owner: str) -> None:
    """Mark ``owner`` as a run of this process that is still going."""
    with _LIVE_GUARD:
        _LIVE.add(owner)


def retire(owner: str) -> None:
    """``owner``'s run has ended: a row it failed to release may be taken over at once."""
    with _LIVE_GUARD:
        _LIVE.discard(owner)


def holder_is_dead(owner: str) -> bool:
    """True when ``owner`` is a process on this host that no longer exists, or a run of
    this very process that has ended without releasing its row (the release failed:
    disk full). Owners on other hosts, or whose pid is alive (or reused), are left to the
    row's timeout."""
    host, _, rest = owner.partition(":")
    pid = rest.partition(":")[0]
    if host != HOST or not pid.isdigit():
        return False
    if int(pid) == os.getpid():
        with _LIVE_GUARD:
            return owner not in _LIVE
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:  # e.g. another user's process: alive
        return False
    return False
