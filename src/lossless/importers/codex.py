"""OpenAI Codex CLI session rollouts (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``).

One JSON object per line: ``{"timestamp", "type", "payload"}``. Decisions:

- conversation ``codex:<session id>`` (from the ``session_meta`` line, else the uuid in
  the file name, else the file name); ``cwd``, ``cli_version``, ``originator``, ``git``
  and the model from ``turn_context`` become conversation metadata;
- ``response_item`` payloads are the conversation: ``message`` (``input_text`` /
  ``output_text`` parts; role ``developer`` is stored as ``system``), ``function_call`` /
  ``custom_tool_call`` / ``local_shell_call`` (an assistant message with one tool call),
  ``function_call_output`` / ``custom_tool_call_output`` (a ``tool`` message);
  ``reasoning`` summaries go on the next assistant message's ``metadata["reasoning"]``;
- ``event_msg`` (they repeat what the response items say), ``turn_context`` and
  ``compacted`` lines, and other item types, are counted and skipped;
- rollouts have no message ids: the external id hashes the session, the item's position
  and the item, so re-importing a session that has grown adds only the new items.

The pre-2025 layout (a bare session header line, then bare response items) is read too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from lossless.importers.anthropic_messages import ConversionError, tool_call
from lossless.importers.base import (
    ByteStream,
    Ignored,
    Item,
    Meta,
    Problem,
    Record,
    Source,
    derived_id,
    iter_json_lines,
    text_or_parts,
)

__all__ = ["FORMAT", "read"]

FORMAT = "codex"
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I)
_CALLS = ("function_call", "custom_tool_call", "local_shell_call")
_OUTPUTS = ("function_call_output", "custom_tool_call_output")
_ROLES = {"developer": "system"}


def _parts(content: Any) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    parts: list[dict[str, Any]] = []
    for item in content if isinstance(content, list) else []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind in ("input_text", "output_text", "text"):
            parts.append({"type": "text", "text": str(item.get("text", ""))})
        elif kind == "input_image" and isinstance(item.get("image_url"), str):
            parts.append({"type": "image_url", "image_url": {"url": item["image_url"]}})
        elif isinstance(kind, str):
            parts.append(dict(item))
    return text_or_parts(parts) if parts else ""


def _output(output: Any) -> str | list[dict[str, Any]]:
    if isinstance(output, str):
        return output if output else "(empty)"
    if isinstance(output, list):
        return _parts(output) or "(empty)"
    if isinstance(output, dict) and isinstance(output.get("content"), str):
        return output["content"] or "(empty)"
    return json.dumps(output, ensure_ascii=False)


class _Rollout:
    def __init__(self, source: Source) -> None:
        found = _UUID.search(source.stem)
        self.conversation = f"{FORMAT}:{found.group(0) if found else source.stem}"
        self.started = False  # a record was made: the conversation id is fixed
        self.position = 0
        self.reasoning: list[str] = []
        self.reasoning_line = 0

    def meta(self, payload: dict[str, Any], line: int) -> Iterator[Item]:
        session = payload.get("id")
        if isinstance(session, str) and session and not self.started:
            self.conversation = f"{FORMAT}:{session}"
        keep = ("cwd", "cli_version", "originator", "model_provider", "git")
        meta = {"source": FORMAT, "session_id": session, **{k: payload.get(k) for k in keep}}
        yield Meta(self.conversation, {k: v for k, v in meta.items() if v}, line)

    def item(self, payload: dict[str, Any], line: int, timestamp: Any) -> Iterator[Item]:
        kind = payload.get("type")
        fields: dict[str, Any] = {}
        if timestamp is not None:
            fields["created_at"] = timestamp
        if kind == "reasoning":
            summary = payload.get("summary")
            for part in summary if isinstance(summary, list) else []:
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    self.reasoning.append(part["text"])
            self.reasoning_line = self.reasoning_line or line
            return
        if kind == "message":
            role = payload.get("role")
            msg: dict[str, Any] = {"role": _ROLES.get(str(role), role), "content": _parts(payload.get("content")),
                                   **fields}
        elif kind in _CALLS:
            name: Any
            if kind == "local_shell_call":
                name, args = "local_shell", payload.get("action")
            else:
                name, args = payload.get("name"), payload.get("arguments", payload.get("input"))
            try:
                call = tool_call(payload.get("call_id") or payload.get("id"), name, args, 0)
            except ConversionError:
                yield Problem(line, f"invalid message: a codex {kind} needs a 'call_id' and a 'name'", self.conversation)
                return
            msg = {"role": "assistant", "content": None, "tool_calls": [call], **fields}
        elif kind in _OUTPUTS:
            msg = {"role": "tool", "tool_call_id": payload.get("call_id"), "content": _output(payload.get("output")),
                   **fields}
        else:
            yield Ignored(line, f"codex {kind} item")
            return
        if msg["role"] == "assistant" and self.reasoning:
            msg["metadata"] = {"reasoning": self.reasoning}
            self.reasoning, self.reasoning_line = [], 0
        elif msg["role"] == "user" and self.reasoning:
            yield Ignored(self.reasoning_line, "codex reasoning with no reply after it")
            self.reasoning, self.reasoning_line = [], 0
        msg["external_id"] = derived_id(FORMAT, self.conversation, self.position, payload)
        self.position += 1
        self.started = True
        yield Record(self.conversation, msg, line)


def read(stream: ByteStream, source: Source) -> Iterator[Item]:
    """Records from one Codex rollout file."""
    rollout = _Rollout(source)
    for parsed in iter_json_lines(stream, source):
        if isinstance(parsed, Problem):
            yield parsed
            continue
        line, data = parsed
        if not isinstance(data, dict):
            yield Problem(line, f"invalid line: expected a JSON object, got {type(data).__name__}")
            continue
        kind = data.get("type")
        payload = data.get("payload")
        if kind == "session_meta" and isinstance(payload, dict):
            yield from rollout.meta(payload, line)
        elif kind == "response_item" and isinstance(payload, dict):
            yield from rollout.item(payload, line, data.get("timestamp"))
        elif kind == "turn_context" and isinstance(payload, dict):
            if isinstance(payload.get("model"), str):
                yield Meta(rollout.conversation, {"model": payload["model"]}, line)
            yield Ignored(line, "codex turn_context line")
        elif kind in ("event_msg", "compacted", "turn_context", "session_meta", "response_item"):
            if kind in ("session_meta", "response_item"):
                yield Problem(line, f"invalid line: a '{kind}' line without a 'payload' object")
            else:
                yield Ignored(line, f"codex {kind} line")
        elif "record_type" in data:  # the old layout's state lines
            yield Ignored(line, "codex state line")
        elif line == 1 and "id" in data and "type" not in data:  # the old layout's header
            yield from rollout.meta(data, line)
        elif isinstance(kind, str) and "payload" not in data:  # the old layout's bare items
            yield from rollout.item(data, line, data.get("timestamp"))
        else:
            yield Problem(line, "invalid line: no 'type'" if kind is None else f"invalid line: unknown type {kind!r}")
    if rollout.reasoning:
        yield Ignored(rollout.reasoning_line, "codex reasoning with no reply after it")
