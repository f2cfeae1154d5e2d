"""The time zone times are shown in (``Config.timezone``): to the model (recalled dates,
summary spans, the times a summarizer reads) and in the CLI's views; a time given
without an offset is read in it. Stored instants do not depend on it, only their text."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from lossless.core.errors import ValidationError

__all__ = ["in_zone", "zone_of"]

_OFFSET = re.compile(r"(?:UTC|GMT)?([+-])(\d{1,2})(?::?(\d{2}))?")


@lru_cache(maxsize=64)
def zone_of(name: str) -> tzinfo:
    """The zone ``name`` names: an IANA name (``Asia/Shanghai``), ``UTC``, or a fixed
    offset (``+08:00``, ``UTC+8``, ``-0530``). ValidationError naming it otherwise."""
    text = name.strip() if isinstance(name, str) else ""
    if text.upper() in ("UTC", "Z", "GMT"):
        return UTC
    if m := _OFFSET.fullmatch(text):
        hours, minutes = int(m.group(2)), int(m.group(3) or 0)
        if hours <= 14 and minutes < 60 and hours * 60 + minutes <= 14 * 60:
            delta = timedelta(hours=hours, minutes=minutes) * (-1 if m.group(1) == "-" else 1)
            return UTC if not delta else timezone(delta)
    elif text and ".." not in text and not text.startswith("/"):
        try:
            return ZoneInfo(text)
        except (ZoneInfoNotFoundError, ValueError, OSError):
            pass
    raise ValidationError(f"timezone must be an IANA time zone name (Asia/Shanghai, Europe/Berlin), UTC, "
                          f"or an offset such as +08:00; got {name!r}")


def in_zone(dt: datetime, zone: tzinfo | None) -> datetime:
    """``dt`` as a time of ``zone`` (None: UTC). A naive time (given without an offset
    while no zone was set, and kept as given) is read as UTC, as searches read it."""
    return (dt if dt.tzinfo is not None else dt.replace(tzinfo=UTC)).astimezone(zone or UTC)
