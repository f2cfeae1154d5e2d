"""Checks on everything a caller hands in, before anything is written.

Every failure raises :class:`~lossless.core.errors.ValidationError` naming the field and
what was wrong, so a bad message never reaches the store half-written.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

from lossless.core.errors import ValidationError
from lossless.core.types import ROLES

__all__ = ["NewMessage", "check_conversation_id", "check_one_line", "check_text", "parse_datetime", "parse_until",
           "timestamp", "validate_message"]

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")  # C0, DEL and C1: Unicode's category Cc

_MESSAGE_KEYS = {
    "role",
    "content",
    "name",
    "created_at",
    "tool_calls",
    "tool_call_id",
    "metadata",
    "external_id",
}


@dataclass(frozen=True, slots=True)
class NewMessage:
    """A message that passed validation and is ready to be stored."""

    role: str
    content: str | list[dict[str, Any]] | None
    created_at: datetime
    name: str | None = None
    tool_calls: tuple[dict[str, Any], ...] = ()
    tool_call_id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    external_id: str | None = None


def check_text(value: str, what: str) -> None:
    """Refuse text SQLite or a tokenizer would mangle: NUL bytes, lone surrogates."""
    nul = value.find("\x00")
    if nul >= 0:
        raise ValidationError(f"{what} contains a NUL byte at position {nul}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        code = ord(value[exc.start])
        if 0xDC80 <= code <= 0xDCFF:  # a byte that did not decode (argv, stdin), kept as a surrogate
            detail = f"undecodable byte 0x{code - 0xDC00:02x} at position {exc.start}"
        else:  # from a JSON \u escape: the file is UTF-8, the text in it is cut inside a character
            detail = (f"a lone surrogate U+{code:04X} at position {exc.start}: half of a character such as an "
                      f"emoji, as a JSON \\u{code:04x} escape without its other half writes it")
        raise ValidationError(f"{what} is not valid UTF-8 ({detail})") from None


def check_one_line(value: str, what: str, noun: str = "an id") -> None:
    """Refuse a control character (C0, DEL, C1) in ``value``, naming ``what``, the
    character and where it is. Ids and names travel in HTTP headers and are printed one
    per line, where a CR or LF would end the header or the line and let the rest pose as
    another one, and an escape sequence would recolour the terminal."""
    control = _CONTROL.search(value)
    if control is not None:
        char = control.group()
        found = "a NUL byte" if char == "\x00" else f"the control character U+{ord(char):04X}"
        raise ValidationError(f"{what} {value!r} contains {found} at position {control.start()}; "
                              f"{noun} is one line of printable text")


def check_conversation_id(conversation_id: object) -> str:
    """The id, or a ValidationError: a non-empty string of at most 512 characters, valid
    UTF-8, with no control characters (:func:`check_one_line`: ids travel in the proxy's
    ``X-Lossless-Conversation`` header and are printed one per line)."""
    if not isinstance(conversation_id, str) or not conversation_id.strip():
        raise ValidationError(f"conversation id must be a non-empty string, got {conversation_id!r}")
    if len(conversation_id) > 512:
        raise ValidationError(f"conversation id is {len(conversation_id)} characters; the limit is 512")
    check_one_line(conversation_id, "conversation id")
    check_text(conversation_id, "conversation id")
    return conversation_id


def timestamp(dt: datetime) -> float:
    """Unix seconds; a naive datetime is read as UTC (how lossless orders and filters times)."""
    return (dt if dt.tzinfo else dt.replace(tzinfo=UTC)).timestamp()


def parse_datetime(value: object, what: str = "created_at") -> datetime:
    """A datetime from a datetime, an ISO 8601 string, or a Unix timestamp."""
    if isinstance(value, datetime):
        return _in_range(value, what, value)
    if isinstance(value, bool):
        raise ValidationError(f"{what} must be a datetime or ISO 8601 string, got {value!r}")
    if isinstance(value, int | float):
        try:
            return datetime.fromtimestamp(float(value), tz=UTC)
        except (OverflowError, OSError, ValueError):
            raise ValidationError(f"{what} timestamp {value!r} is out of range") from None
    if isinstance(value, str):
        text = value.strip()
        if text.endswith("Z"):
            text = text[:-1] + "+00:00"
        try:
            parsed = datetime.fromisoformat(text)
        except ValueError:
            raise ValidationError(f"{what} is not an ISO 8601 date/time: {value!r}") from None
        return _in_range(parsed, what, value)
    raise ValidationError(
        f"{what} must be a datetime, ISO 8601 string or Unix timestamp, got {type(value).__name__}"
    )


def _in_range(dt: datetime, what: str, given: object) -> datetime:
    """``dt``, or a ValidationError when its UTC time is outside the years 1–9999:
    9999-12-31T23:59-05:00 is a valid ISO string, but every later reading of it in UTC
    (dates in the context, search results) overflowed, and a stored message cannot change."""
    if dt.utcoffset():
        try:
            dt.astimezone(UTC)
        except OverflowError:
            raise ValidationError(f"{what} {str(given)!r} is outside the years 1 to 9999 once converted to "
                                  "UTC") from None
    return dt


_DATE_ONLY = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def parse_until(value: object, what: str = "until") -> datetime:
    """An upper time bound (inclusive), as :func:`parse_datetime` reads it, except that a
    date alone ("2024-05-01") means the end of that day: a person who searches "until
    May 1st" means May 1st too, not its first microsecond."""
    if isinstance(value, str) and _DATE_ONLY.match(value.strip()):
        day = parse_datetime(value.strip(), what)
        # the end of 9999-12-31 is the last instant a datetime holds (one day on would overflow)
        return day + (timedelta(days=1) - timedelta(microseconds=1)) if day.date() < date.max else datetime.max
    return parse_datetime(value, what)


def _check_json(value: Any, what: str) -> None:
    try:
        json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"{what} is not JSON-serialisable: {exc}") from None
    except RecursionError:
        raise ValidationError(f"{what} is nested too deeply to store") from None


def _check_nested_text(value: Any, what: str) -> None:
    """check_text on every string (keys too) inside a JSON value: json.dumps would hide
    a NUL as ``\\u0000``."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            check_text(item, what)
        elif isinstance(item, Mapping):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)


def _check_content(content: Any) -> str | list[dict[str, Any]] | None:
    if content is None or isinstance(content, str):
        if isinstance(content, str):
            check_text(content, "content")
        return content
    if isinstance(content, bytes | bytearray):
        raise ValidationError("content must be str or a list of content parts, got bytes (decode it first)")
    if isinstance(content, list):
        parts: list[dict[str, Any]] = []
        for i, part in enumerate(content):
            if not isinstance(part, Mapping):
                raise ValidationError(
                    f"content part {i} must be an object with a 'type', got {type(part).__name__}"
                )
            if "type" not in part:
                raise ValidationError(f"content part {i} has no 'type' field")
            if part.get("type") == "text" and not isinstance(part.get("text"), str):
                raise ValidationError(f"content part {i} is of type 'text' but its 'text' is not a string")
            _check_json(part, f"content part {i}")
            _check_nested_text(part, f"content part {i}")
            parts.append(dict(part))
        return parts
    raise ValidationError(
        f"content must be str, a list of content parts, or None; got {type(content).__name__}"
    )


def _check_tool_calls(tool_calls: Any) -> tuple[dict[str, Any], ...]:
    if tool_calls is None:
        return ()
    if not isinstance(tool_calls, list | tuple):
        raise ValidationError(f"tool_calls must be a list, got {type(tool_calls).__name__}")
    out: list[dict[str, Any]] = []
    for i, call in enumerate(tool_calls):
        if not isinstance(call, Mapping):
            raise ValidationError(f"tool_calls[{i}] must be an object, got {type(call).__name__}")
        call_id = call.get("id")
        if not isinstance(call_id, str) or not call_id:
            raise ValidationError(f"tool_calls[{i}] has no string 'id'")
        fn = call.get("function")
        if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str) or not fn.get("name"):
            raise ValidationError(f"tool_calls[{i}] needs a 'function' object with a 'name'")
        args = fn.get("arguments", "")
        if not isinstance(args, str):
            _check_json(args, f"tool_calls[{i}] arguments")
            args = json.dumps(args, ensure_ascii=False, sort_keys=True)
        normal = {"id": call_id, "type": call.get("type", "function"),
                  "function": {"name": fn["name"], "arguments": args}}
        check_text(json.dumps(normal, ensure_ascii=False), f"tool_calls[{i}]")
        out.append(normal)
    return tuple(out)


def validate_message(data: Mapping[str, Any], *, max_bytes: int, now: datetime | None = None) -> NewMessage:
    """Validate one message given as keyword fields or an OpenAI-style dict."""
    if not isinstance(data, Mapping):
        raise ValidationError(f"a message must be an object, got {type(data).__name__}")
    unknown = sorted(set(data) - _MESSAGE_KEYS)
    if unknown:
        raise ValidationError(f"unknown message field(s): {', '.join(unknown)}")
    role = data.get("role")
    if role is None:
        raise ValidationError(f"a message needs a 'role' (one of: {', '.join(ROLES)})")
    if role not in ROLES:
        raise ValidationError(f"unknown role {role!r} (expected one of: {', '.join(ROLES)})")
    content = _check_content(data.get("content"))
    tool_calls = _check_tool_calls(data.get("tool_calls"))
    if tool_calls and role != "assistant":
        raise ValidationError(f"only assistant messages carry tool_calls, not {role!r}")
    empty = content is None or content == "" or content == []
    if empty and not tool_calls:
        raise ValidationError(f"a {role} message needs content or tool_calls; it has neither")
    tool_call_id = data.get("tool_call_id")
    if role == "tool":
        if not isinstance(tool_call_id, str) or not tool_call_id:
            raise ValidationError("a tool message needs the tool_call_id of the call it answers")
    elif tool_call_id is not None:
        raise ValidationError(f"tool_call_id belongs on tool messages, not {role!r}")
    name = data.get("name")
    if name is not None:
        if not isinstance(name, str):
            raise ValidationError(f"name must be a string, got {type(name).__name__}")
        check_text(name, "name")
    metadata = data.get("metadata") or {}
    if not isinstance(metadata, Mapping):
        raise ValidationError(f"metadata must be an object, got {type(metadata).__name__}")
    if metadata:
        _check_json(metadata, "metadata")
    external_id = data.get("external_id")
    if external_id is not None:
        if not isinstance(external_id, str) or not external_id:
            raise ValidationError(f"external_id must be a non-empty string, got {external_id!r}")
        check_text(external_id, "external_id")
    created_raw = data.get("created_at")
    created_at = (now or datetime.now(UTC)) if created_raw is None else parse_datetime(created_raw)
    size = len(content.encode("utf-8")) if isinstance(content, str) else (
        len(json.dumps(content, ensure_ascii=False).encode("utf-8")) if content else 0
    )
    size += sum(len(json.dumps(c, ensure_ascii=False).encode("utf-8")) for c in tool_calls)
    if size > max_bytes:
        raise ValidationError(
            f"message is {size:,} bytes; the limit is {max_bytes:,} (config max_message_bytes)"
        )
    return NewMessage(
        role=role,
        content=content,
        created_at=created_at,
        name=name,
        tool_calls=tool_calls,
        tool_call_id=tool_call_id,
        metadata=dict(metadata),
        external_id=external_id,
    )
