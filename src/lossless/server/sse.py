"""Reading a relayed Server-Sent Events stream on the side: the proxy passes the provider's
bytes through untouched and rebuilds the assistant's reply from a copy, to store it."""

from __future__ import annotations

import codecs
import json
from dataclasses import dataclass, field
from typing import Any

__all__ = ["AnthropicStreamReply", "OpenAIStreamReply", "SSEParser", "ServerSentEvent"]


@dataclass(frozen=True)
class ServerSentEvent:
    event: str | None
    data: str


class SSEParser:
    """Incremental: feed it bytes as they arrive, get the complete events so far.

    Follows the WHATWG event-stream rules that change which events come out: lines end at
    CRLF, LF or a lone CR (also when a CRLF is split between two reads), a leading BOM is
    dropped, bytes that are not UTF-8 read as U+FFFD, ``:`` lines are comments, ``data``
    lines join with LF, a block with no ``data`` (only ``id``/``retry``, say) dispatches
    nothing, and an event cut off by the end of the stream is never dispatched. ``id`` and
    ``retry`` are read past: the proxy does not reconnect. Kept by hand rather than
    httpx-sse or an SDK's decoder: the proxy parses a copy of bytes it relays, which those
    read from a response they own, and each misses some of these cases
    (``bench/lib_sse.py``)."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._pending: list[str] = []  # the start of a line not ended yet
        self._after_cr = False  # the last read ended in CR: a LF starting the next is its CRLF
        self._started = False  # a BOM is dropped only at the very start
        self._event: str | None = None
        self._data: list[str] = []

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        text = self._decoder.decode(chunk)
        if not self._started and text:
            self._started = True
            text = text.removeprefix("\ufeff")
        if self._after_cr and text.startswith("\n"):
            text = text[1:]
        if not text:
            return []
        self._after_cr = text.endswith("\r")
        if "\r" in text:
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        lines = text.split("\n")
        rest = lines.pop()  # after the last line end: "" when the text ends with one
        if lines and self._pending:
            lines[0] = "".join([*self._pending, lines[0]])
            self._pending = []
        if rest:
            self._pending.append(rest)
        events: list[ServerSentEvent] = []
        for line in lines:
            self._line(line, events)
        return events

    def _line(self, line: str, events: list[ServerSentEvent]) -> None:
        if not line:  # a blank line ends an event
            if self._data:
                events.append(ServerSentEvent(self._event, "\n".join(self._data)))
            self._event, self._data = None, []
        elif not line.startswith(":"):  # ":" starts a comment (keep-alive)
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "data":
                self._data.append(value)
            elif name == "event":
                self._event = value or None  # empty: the default type, "message"


def _json(data: str) -> dict[str, Any] | None:
    try:
        value = json.loads(data)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


@dataclass
class OpenAIStreamReply:
    """Chat-completion chunks (``choices[0].delta``) put back together; ``done`` at
    ``data: [DONE]``."""

    content: list[str] = field(default_factory=list)
    calls: dict[int, dict[str, Any]] = field(default_factory=dict)
    finish_reason: str | None = None
    done: bool = False

    def feed(self, event: ServerSentEvent) -> None:
        if event.data.strip() == "[DONE]":
            self.done = True
            return
        chunk = _json(event.data)
        choices = chunk.get("choices") if chunk else None
        if not choices or not isinstance(choices[0], dict):
            return
        choice = choices[0]
        if choice.get("finish_reason"):
            self.finish_reason = str(choice["finish_reason"])
        delta = choice.get("delta") or {}
        if isinstance(delta.get("content"), str):
            self.content.append(delta["content"])
        for part in delta.get("tool_calls") or []:
            if not isinstance(part, dict):
                continue
            slot = self.calls.setdefault(int(part.get("index", len(self.calls))),
                                         {"id": None, "type": "function", "function": {"name": "", "arguments": ""}})
            if part.get("id"):
                slot["id"] = part["id"]
            fn = part.get("function") or {}
            if fn.get("name"):
                slot["function"]["name"] += fn["name"]
            if fn.get("arguments"):
                slot["function"]["arguments"] += fn["arguments"]

    def message(self) -> dict[str, Any]:
        reply: dict[str, Any] = {"role": "assistant", "content": "".join(self.content)}
        calls = [self.calls[i] for i in sorted(self.calls)]
        for i, call in enumerate(calls):
            call["id"] = call["id"] or f"call_{i}"
        if calls:
            reply["tool_calls"] = calls
        return reply


@dataclass
class AnthropicStreamReply:
    """Messages-API stream events put back together as the response's content blocks;
    ``done`` at ``message_stop``."""

    blocks: dict[int, dict[str, Any]] = field(default_factory=dict)
    partial_json: dict[int, list[str]] = field(default_factory=dict)
    done: bool = False

    def feed(self, event: ServerSentEvent) -> None:
        data = _json(event.data)
        if data is None:
            return
        kind = data.get("type", event.event)
        index = int(data.get("index", 0))
        if kind == "content_block_start" and isinstance(data.get("content_block"), dict):
            self.blocks[index] = dict(data["content_block"])
        elif kind == "content_block_delta" and isinstance(data.get("delta"), dict):
            delta = data["delta"]
            block = self.blocks.setdefault(index, {"type": "text", "text": ""})
            if delta.get("type") == "text_delta":
                block["text"] = block.get("text", "") + str(delta.get("text", ""))
            elif delta.get("type") == "input_json_delta":
                self.partial_json.setdefault(index, []).append(str(delta.get("partial_json", "")))
        elif kind == "content_block_stop" and index in self.partial_json:
            raw = "".join(self.partial_json.pop(index))
            try:
                self.blocks[index]["input"] = json.loads(raw) if raw.strip() else {}
            except ValueError:
                self.blocks[index]["input"] = {"raw": raw}
        elif kind == "message_stop":
            self.done = True

    def content(self) -> list[dict[str, Any]]:
        return [self.blocks[i] for i in sorted(self.blocks)]
