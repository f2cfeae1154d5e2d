"""Checks on what a caller hands to :class:`~lossless.longterm.memories.Memories`: every
failure is a :class:`~lossless.core.errors.ValidationError` naming the field."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from lossless.core.errors import ValidationError
from lossless.core.validate import check_conversation_id, check_one_line, check_text, parse_datetime
from lossless.longterm.records import KINDS, OWNER_KEYS, TASK_STATUSES, MemoryKind

__all__ = [
    "MAX_CONTENT_CHARS",
    "NewMemory",
    "check_content",
    "check_importance",
    "check_kind",
    "check_kinds",
    "check_limit",
    "check_metadata",
    "check_metadata_owners",
    "check_new",
    "check_new_owner",
    "check_owner",
    "check_status",
    "check_strings",
    "check_task",
    "dumps",
]

MAX_CONTENT_CHARS = 32_000  # a memory is a sentence or a task record, not a document
_OWNER_MAX = 512
_TASK_KEYS = frozenset({"task_id", "task_type", "status", "result", "patterns", "errors"})


def dumps(value: Any) -> str:
    """Canonical JSON, as stored (sorted keys, no NaN)."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False)


def check_content(content: object) -> str:
    if not isinstance(content, str):
        raise ValidationError(f"content must be a string, got {type(content).__name__}")
    if not content.strip():
        raise ValidationError("content is empty")
    if len(content) > MAX_CONTENT_CHARS:
        raise ValidationError(f"content is {len(content)} characters; the limit is {MAX_CONTENT_CHARS}")
    check_text(content, "content")
    return content.strip()


def check_kind(kind: object) -> MemoryKind:
    if kind not in KINDS:
        raise ValidationError(f"kind must be one of {', '.join(KINDS)}; got {kind!r}")
    return cast("MemoryKind", kind)


def check_kinds(kind: str | Sequence[str] | None) -> tuple[str, ...] | None:
    if kind is None:
        return None
    kinds = (kind,) if isinstance(kind, str) else tuple(kind)
    for k in kinds:
        check_kind(k)
    return kinds


def check_importance(value: object, what: str = "importance") -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value) or not 0 <= value <= 1:
        raise ValidationError(f"{what} must be a number in [0, 1], got {value!r}")
    return float(value)


def check_owner(value: object, what: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(f"{what} must be a non-empty string or None, got {value!r}")
    if len(value) > _OWNER_MAX:
        raise ValidationError(f"{what} is {len(value)} characters; the limit is {_OWNER_MAX}")
    check_text(value, what)
    return value


def check_new_owner(value: object, what: str) -> str | None:
    """The user or agent a new record is stored under: :func:`check_owner`, and one line of
    printable text (``"a\\nb"`` or ``"\\x1b[31m"`` would be two lines or a colour in every
    listing of owners). Filters (:meth:`Memories.ls`, ``search``, ``forget``) take what
    :func:`check_owner` takes, so a record stored before this rule can still be found and
    forgotten by its owner."""
    owner = check_owner(value, what)
    if owner is not None:
        check_one_line(owner, what, "a name")
    return owner


def check_metadata_owners(metadata: Mapping[str, Any]) -> None:
    """Refuse a conversation's metadata whose ``user``/``user_id``/``agent``/``agent_id``
    (the owners of its long-term records: :func:`~lossless.longterm.records.owners_of`)
    could not own a record, naming the key: taken as given, it would fail every assembly
    with a question (the memory search) and every distillation later, not here."""
    for key in OWNER_KEYS:
        value = metadata.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, str | int):
            raise ValidationError(f'metadata["{key}"] must be a string (the owner of its long-term memories), '
                                  f"got {type(value).__name__}")
        check_new_owner(str(value), f'metadata["{key}"]')


def check_metadata(value: object) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise ValidationError(f"metadata must be a dict with string keys, got {type(value).__name__}")
    try:
        dumps(value)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"metadata is not JSON-serialisable: {exc}") from None
    except RecursionError:
        raise ValidationError("metadata is nested too deeply to store") from None
    return dict(value)


def check_strings(value: object, what: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise ValidationError(f"{what} must be a list of strings, got {type(value).__name__}")
    items = list(value)
    if not all(isinstance(i, str) for i in items):
        raise ValidationError(f"{what} must contain only strings")
    return tuple(dict.fromkeys(items))


def check_status(value: object) -> str:
    if value not in TASK_STATUSES:
        raise ValidationError(f"status must be one of {', '.join(TASK_STATUSES)}; got {value!r}")
    return value


def check_task(task: object, kind: str) -> dict[str, Any]:
    if task is None:
        return {}
    if kind != "task":
        raise ValidationError(f"task fields are only for kind='task' records, not kind={kind!r}")
    if not isinstance(task, dict):
        raise ValidationError(f"task must be a dict, got {type(task).__name__}")
    unknown = sorted(set(task) - _TASK_KEYS)
    if unknown:
        raise ValidationError(f"task has unknown field(s) {', '.join(unknown)} (known: {', '.join(sorted(_TASK_KEYS))})")
    out: dict[str, Any] = {}
    for key in ("task_id", "task_type", "result"):
        value = task.get(key)
        if value is not None and not isinstance(value, str):
            raise ValidationError(f"task.{key} must be a string, got {type(value).__name__}")
        out[key] = value
    out["status"] = check_status(task["status"]) if task.get("status") is not None else None
    out["patterns"] = check_strings(task.get("patterns"), "task.patterns")
    out["errors"] = check_strings(task.get("errors"), "task.errors")
    return out


def check_limit(value: object, what: str = "limit", minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValidationError(f"{what} must be an integer >= {minimum}, got {value!r}")
    return value


@dataclass(frozen=True, slots=True)
class NewMemory:
    """A memory that passed validation and is ready to be stored."""

    content: str
    kind: MemoryKind
    user: str | None
    agent: str | None
    importance: float | None  # None: the kind's default (and a duplicate keeps its own)
    metadata: dict[str, Any]
    source_message_ids: tuple[str, ...]
    conversation_id: str | None
    created_at: datetime | None
    task: dict[str, Any]


def check_new(content: object, kind: object, user: object, agent: object, importance: object,
              metadata: object, source_message_ids: object, conversation_id: object,
              created_at: object, task: object) -> NewMemory:
    """Every argument of :meth:`Memories.add` checked, or a ValidationError naming the field."""
    checked_kind = check_kind(kind)
    return NewMemory(
        content=check_content(content), kind=checked_kind, user=check_new_owner(user, "user"),
        agent=check_new_owner(agent, "agent"),
        importance=None if importance is None else check_importance(importance),
        metadata=check_metadata(metadata),
        source_message_ids=check_strings(source_message_ids, "source_message_ids"),
        conversation_id=None if conversation_id is None else check_conversation_id(conversation_id),
        created_at=None if created_at is None else parse_datetime(created_at, "created_at"),
        task=check_task(task, checked_kind),
    )
