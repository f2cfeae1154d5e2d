"""ChatGPT data export: ``conversations.json``.

An array of conversations, each a tree of messages in ``mapping`` (node id → ``{message,
parent, children}``) with ``current_node`` the end of the branch that was last shown.
The array is streamed one conversation at a time. Decisions:

- conversation ``chatgpt:<conversation_id>`` (``id`` in older exports); ``title``,
  ``create_time`` and the default model become its metadata;
- the branch is flattened from ``current_node`` up to the root (without ``current_node``:
  from the root along the last child); edits and regenerations off that branch are not
  imported. A tree with a cycle or a dangling parent is refused for that conversation,
  with its line and title; the others are still imported;
- the external id is the node id;
- an assistant message addressed to a tool (``recipient`` other than ``all``: python,
  browser, dalle …) becomes a tool call named after the recipient, with the message text as
  its arguments; the tool's answer becomes the ``tool`` message for it (a tool message no
  call precedes is kept as a ``system`` message with ``metadata.chatgpt_role = "tool"``);
- ``thoughts`` (reasoning) go on the next assistant message's ``metadata["thinking"]``;
  empty and hidden messages and "thought for N seconds" recaps are counted and skipped;
- images are kept as ``image_url`` parts pointing at the export's asset (``file-service://…``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from lossless.importers.base import (
    ByteStream,
    Ignored,
    Item,
    Meta,
    Problem,
    Record,
    Source,
    text_or_parts,
)
from lossless.importers.jsonstream import BadValue, JsonStreamError, iter_document

__all__ = ["FORMAT", "TreeError", "branch", "read"]

FORMAT = "chatgpt"


class TreeError(ValueError):
    """The ``mapping`` tree cannot be walked (a cycle, a missing node)."""


def branch(mapping: dict[str, Any], current: Any) -> list[str]:
    """Node ids from the root down to ``current`` (or, without it, to the last leaf)."""
    if not isinstance(current, str) or current not in mapping:
        roots = [k for k, v in mapping.items() if isinstance(v, dict) and v.get("parent") is None]
        if len(roots) != 1:
            raise TreeError(f"no usable 'current_node' and {len(roots)} roots")
        current, seen = roots[0], {roots[0]}
        while True:
            children = mapping[current].get("children") or []
            if not children:
                break
            current = children[-1]
            if current in seen or current not in mapping:
                raise TreeError(f"node {current!r} is its own descendant or missing")
            seen.add(current)
    path: list[str] = []
    seen = set()
    node: Any = current
    while node is not None:
        if node in seen:
            raise TreeError(f"cycle in 'mapping': node {node!r} is its own ancestor")
        seen.add(node)
        entry = mapping.get(node) if isinstance(node, str) else None
        if not isinstance(entry, dict):
            raise TreeError(f"node {node!r} is missing from 'mapping'")
        path.append(node)
        node = entry.get("parent")
    path.reverse()
    return path


def _part(part: Any) -> dict[str, Any] | None:
    if isinstance(part, str):
        return {"type": "text", "text": part} if part else None
    if not isinstance(part, dict):
        return None
    kind = part.get("content_type")
    if kind == "image_asset_pointer" and isinstance(part.get("asset_pointer"), str):
        return {"type": "image_url", "image_url": {"url": part["asset_pointer"]}}
    if isinstance(part.get("text"), str):
        return {"type": "text", "text": part["text"]}
    rest = {k: v for k, v in part.items() if k != "content_type"}
    return {"type": str(kind or "unknown"), **rest}


def _text(content: dict[str, Any]) -> str | list[dict[str, Any]]:
    kind = content.get("content_type")
    if kind == "user_editable_context":
        texts = [content.get("user_profile"), content.get("user_instructions")]
        return "\n\n".join(t for t in texts if isinstance(t, str) and t)
    if kind == "tether_quote":
        bits = [content.get("title"), content.get("url"), content.get("text")]
        return "\n".join(b for b in bits if isinstance(b, str) and b)
    if kind == "tether_browsing_display":
        return str(content.get("result") or content.get("summary") or "")
    if isinstance(content.get("parts"), list):
        parts = [p for p in (_part(x) for x in content["parts"]) if p is not None]
        if parts and all(p.get("type") == "text" for p in parts):
            return "".join(p["text"] for p in parts) if len(parts) == 1 else text_or_parts(parts)
        return parts
    if isinstance(content.get("text"), str):
        return str(content["text"])
    rest = {k: v for k, v in content.items() if k != "content_type"}
    return json.dumps(rest, ensure_ascii=False) if rest else ""


def _time(value: Any) -> str | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            return datetime.fromtimestamp(float(value), tz=UTC).isoformat()
        except (OverflowError, OSError, ValueError):
            return None
    return None


def _conversation(data: Any, index: int, line: int) -> Iterator[Item]:
    fields = data if isinstance(data, dict) else {}
    cid = fields.get("conversation_id") or fields.get("id")
    conv = f"{FORMAT}:{cid}" if isinstance(cid, str) and cid else f"{FORMAT}:#{index}"
    title = fields.get("title")
    mapping = fields.get("mapping")
    if not isinstance(mapping, dict):
        # named as a cycle is below, so the one conversation of hundreds can be found
        named = ""
        if isinstance(cid, str) and cid:
            named = f" ({conv}, {title!r})" if isinstance(title, str) else f" ({conv})"
        yield Problem(line, f"invalid conversation: element {index}{named} has no 'mapping' object")
        return
    try:
        path = branch(mapping, data.get("current_node"))
    except TreeError as exc:
        named = f" ({title!r})" if isinstance(title, str) else ""
        yield Problem(line, f"invalid conversation: {conv}{named}: {exc}; nothing of it was imported", conv)
        return
    meta = {"source": FORMAT, "title": title, "created_at": _time(data.get("create_time")),
            "model": data.get("default_model_slug")}
    yield Meta(conv, {k: v for k, v in meta.items() if v}, line)
    last_time = _time(data.get("create_time"))
    call: str | None = None  # the tool call tool messages answer
    thinking: list[dict[str, Any]] = []
    for node_id in path:
        msg = mapping[node_id].get("message")
        if not isinstance(msg, dict):
            continue
        author: dict[str, Any] = msg["author"] if isinstance(msg.get("author"), dict) else {}
        role = author.get("role")
        content: dict[str, Any] = msg["content"] if isinstance(msg.get("content"), dict) else {}
        kind = content.get("content_type")
        last_time = _time(msg.get("create_time")) or last_time
        metadata: dict[str, Any] = {}
        model = (msg.get("metadata") or {}).get("model_slug") if isinstance(msg.get("metadata"), dict) else None
        if model:
            metadata["model"] = model
        if kind not in (None, "text", "multimodal_text"):
            metadata["content_type"] = kind
        if kind == "thoughts":
            thinking.extend(t for t in content.get("thoughts") or [] if isinstance(t, dict))
            continue
        if kind == "reasoning_recap":
            yield Ignored(line, "chatgpt reasoning recap")
            continue
        body = _text(content)
        if body in ("", []):
            yield Ignored(line, f"chatgpt empty {role or 'unknown'} message")
            continue
        out: dict[str, Any] = {"role": role, "content": body}
        recipient = msg.get("recipient") or "all"
        if role == "user" and kind == "user_editable_context":
            out["role"] = "system"
        elif role == "assistant" and recipient != "all":
            call = f"call_{node_id}"
            args = body if isinstance(body, str) else json.dumps(body, ensure_ascii=False)
            out = {"role": "assistant", "content": None,
                   "tool_calls": [{"id": call, "type": "function", "function": {"name": recipient, "arguments": args}}]}
        elif role == "tool":
            metadata["tool_name"] = author.get("name")
            if call is not None:
                out["tool_call_id"] = call
            else:
                out["role"] = "system"
                metadata["chatgpt_role"] = "tool"
        elif role in ("assistant", "user"):
            call = None
        if out["role"] == "assistant" and thinking:
            metadata["thinking"], thinking = thinking, []
        if last_time is not None:
            out["created_at"] = last_time
        if metadata:
            out["metadata"] = metadata
        out["external_id"] = str(msg.get("id") or node_id)
        yield Record(conv, out, line)
    if thinking:
        yield Ignored(line, "chatgpt thoughts with no reply after them")


def read(stream: ByteStream, source: Source) -> Iterator[Item]:
    """Records from a ``conversations.json`` (or one conversation object)."""
    single: dict[str, Any] = {}
    first_line = 1
    try:
        for path, value, line in iter_document(stream):
            key = path[0]
            if isinstance(value, BadValue):
                yield Problem(line, value.reason)
            elif isinstance(key, int):
                yield from _conversation(value, key, line)
            else:
                single[key] = value
    except JsonStreamError as exc:
        yield Problem(exc.line, f"{exc.message}; the conversations after it were not read")
        return
    if single:
        yield from _conversation(single, 0, first_line)
