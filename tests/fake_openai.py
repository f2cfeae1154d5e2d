"""A fake OpenAI-compatible HTTP server on 127.0.0.1, for testing the real client code.

It speaks the wire format of ``POST /v1/embeddings`` (float or base64 encoding, optional
``dimensions``), ``POST /v1/chat/completions`` and Anthropic's ``POST /v1/messages``
(point the Anthropic SDK at ``.root_url``), both also streaming (``stream: true``: SSE
chunks, ``data: [DONE]`` / ``message_stop`` at the end), records every request, and can
be told to fail, stall, answer with a canned body or call tools::

    def test_something(fake_openai: FakeOpenAIServer) -> None:
        fake_openai.fail_next(1, status=500)      # the next request gets a 500
        fake_openai.enqueue_chat("a summary")     # the next chat completion says this
        fake_openai.enqueue_tool_calls({"name": "run_tests", "arguments": '{"n": 1}'})
        client = openai.OpenAI(base_url=fake_openai.base_url, api_key="x")
        ...
        assert fake_openai.requests[-1].body["model"] == "..."

Embeddings are deterministic: a hashed bag of lower-cased words, signed, L2-normalised,
so texts that share words have a positive cosine similarity. With no reply queued, a chat
or messages request whose last user message holds a ``<conversation>`` (or
``<partial_summaries>``) block gets a deterministic summary of it: the first words of
each line, within a third of ``max_tokens`` words, so compactions can run end to end.
Injected failures on ``/v1/messages`` use Anthropic's error shape.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import struct
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

__all__ = ["FakeOpenAIServer", "RecordedRequest", "fake_embedding", "fake_openai", "fake_summary"]

DEFAULT_DIM = 64
_WORD = re.compile(r"\w+")


def fake_embedding(text: str, dim: int = DEFAULT_DIM) -> list[float]:
    """The vector the fake server returns for ``text``: unit length, never zero."""
    words = _WORD.findall(text.lower()) or [text]
    vector = [0.0] * dim
    for word in words:
        digest = hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest()
        bucket = int.from_bytes(digest[:4], "little") % dim
        vector[bucket] += 1.0 if digest[4] & 1 else -1.0
    norm = sum(v * v for v in vector) ** 0.5
    if norm == 0:  # every word cancelled out; any fixed unit vector will do
        vector[0], norm = 1.0, 1.0
    return [v / norm for v in vector]


def _count_tokens(text: str) -> int:
    return max(1, len(_WORD.findall(text)))


_OPENAI_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")  # what the real API takes as a message name


@dataclass
class RecordedRequest:
    """One request as the server saw it; header names are lower-cased."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class _Failure:
    status: int
    message: str
    headers: dict[str, str]
    code: str | None = None
    error_type: str | None = None


@dataclass
class _ChatReply:
    content: str
    finish_reason: str
    tool_calls: list[dict[str, Any]] | None = None  # [{"id", "name", "arguments"}]


@dataclass
class _Canned:
    status: int
    body: Any  # JSON-able, or bytes sent as they are


@dataclass
class FakeOpenAIServer:
    """The server. Start it with :meth:`start` (the ``fake_openai`` fixture does)."""

    dim: int = DEFAULT_DIM
    delay: float = 0.0
    """Seconds to wait before answering each request (to exercise client timeouts)."""
    retry_after_ms: int | None = 1
    stream_delay: float = 0.0
    """Seconds between the chunks of a streamed answer."""
    """Sent as ``retry-after-ms`` with injected failures so SDK retries do not back off
    for half a second; ``None`` sends no such header."""
    sse_line_end: str = "\n"  # "\r\n" or "\r": the other line ends the SSE spec allows
    sse_bom: bool = False  # start the event stream with a UTF-8 BOM (the spec says to drop it)
    requests: list[RecordedRequest] = field(default_factory=list)
    _failures: list[_Failure | _Canned] = field(default_factory=list)
    _chat_replies: list[_ChatReply] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _closing: threading.Event = field(default_factory=threading.Event)
    _httpd: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None
    _chat_count: int = 0
    responder: Callable[[dict[str, Any]], str] | None = None
    """With no reply queued, answer a chat completion with ``responder(request body)``:
    a scripted model that reads its prompt (before the summary fallback)."""

    # -- control ---------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``, what an OpenAI client takes as ``base_url``."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def root_url(self) -> str:
        """``http://127.0.0.1:PORT``, what the Anthropic SDK takes as ``base_url``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("the fake server is not running")
        return int(self._httpd.server_address[1])

    def fail_next(
        self,
        n: int = 1,
        *,
        status: int = 500,
        message: str = "The server had an error while processing your request.",
        headers: dict[str, str] | None = None,
        code: str | None = None,
        error_type: str | None = None,
    ) -> None:
        """Answer the next ``n`` requests (any endpoint) with ``status`` and an error body:
        OpenAI's shape (with ``code``, e.g. ``context_length_exceeded``), or Anthropic's on
        ``/v1/messages``. ``error_type`` overrides the type derived from the status."""
        with self._lock:
            self._failures.extend(
                _Failure(status, message, dict(headers or {}), code, error_type) for _ in range(n)
            )

    def respond_next(self, body: Any, *, status: int = 200) -> None:
        """Answer the next request with exactly ``body`` (JSON-encoded unless bytes)."""
        with self._lock:
            self._failures.append(_Canned(status, body))

    def enqueue_chat(self, *replies: str, finish_reason: str = "stop") -> None:
        """Queue the contents of the next chat completions (or Anthropic messages), in
        order. With nothing queued the server summarizes a ``<conversation>`` block, else
        answers with a short digest of the last user message. ``finish_reason`` is sent
        as given on chat completions; on messages ``stop`` and ``length`` become
        ``end_turn`` and ``max_tokens``."""
        with self._lock:
            self._chat_replies.extend(_ChatReply(r, finish_reason) for r in replies)

    def enqueue_tool_calls(self, *calls: dict[str, Any], content: str = "") -> None:
        """Queue a reply that calls tools: each ``{"name", "arguments"}`` (JSON text), with
        an ``id`` made up if not given; ``finish_reason`` ``tool_calls`` (``tool_use`` on
        messages)."""
        made = [{"id": c.get("id") or f"call_fake{i}", "name": c["name"], "arguments": c.get("arguments", "{}")}
                for i, c in enumerate(calls)]
        with self._lock:
            self._chat_replies.append(_ChatReply(content, "tool_calls", made))

    def embedding_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path.endswith("/embeddings")]

    def chat_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    def messages_requests(self) -> list[RecordedRequest]:
        """Requests to Anthropic's ``/v1/messages``."""
        return [r for r in self.requests if r.path.split("?", 1)[0].rstrip("/").endswith("/v1/messages")]

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> FakeOpenAIServer:
        server = self

        class Handler(_Handler):
            fake = server

        httpd = _QuietHTTPServer(("127.0.0.1", 0), Handler)
        # Join handler threads on close: they end quickly because ``delay`` is cut short.
        httpd.daemon_threads = False
        httpd.block_on_close = True
        self._httpd = httpd
        self._closing.clear()
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        if self._httpd is None:
            return
        self._closing.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- what the handler calls ------------------------------------------------------

    def _next_override(self) -> _Failure | _Canned | None:
        with self._lock:
            return self._failures.pop(0) if self._failures else None

    def _next_chat(self) -> _ChatReply | None:
        with self._lock:
            self._chat_count += 1
            return self._chat_replies.pop(0) if self._chat_replies else None


class _QuietHTTPServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hung up (a timeout test) is expected; anything else is a bug here.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def _error_body(
    message: str, type_: str, code: str | None = None, param: str | None = None
) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


_ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def _anthropic_error_body(message: str, type_: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": type_, "message": message}}


_SECTION_RE = re.compile(
    r"<(conversation|partial_summaries)>\n(.*)\n</\1>", re.DOTALL
)


_ASKED_WORDS = re.compile(r"about (\d+) words")
_PIECE = re.compile(r"\w+|[^\w\s]")


def fake_summary(prompt: str, max_tokens: int | None) -> str | None:
    """The fake's summary of the ``<conversation>`` (or ``<partial_summaries>``) block in
    ``prompt``: "- " and the first six words of each content line, at most a third of
    ``max_tokens`` words, two thirds of the words the prompt asks for (dashes and
    identifiers cost tokens too), and under half the block's words. None without a
    block."""
    match = _SECTION_RE.search(prompt)
    if match is None:
        return None
    block = match.group(2)
    budget = max(4, min((max_tokens or 300) // 3, len(block.split()) // 2))
    asked = _ASKED_WORDS.search(prompt)  # a model that follows the length it is told
    if asked:
        budget = max(4, min(budget, int(asked.group(1)) * 2 // 3))
    lines: list[str] = []
    used = 0
    for line in block.splitlines():
        line = line.strip().lstrip("-* ").strip()  # a partial summary's own bullets
        if not line or line.startswith(("[", "<")):  # item headers and <part> tags
            continue
        words: list[str] = []
        for word in line.split()[:6]:
            cost = max(1, len(_PIECE.findall(word)))  # a word like `app.route("/x")` is many tokens
            if used + cost > budget:
                break
            words.append(word)
            used += cost
        if not words:
            break
        lines.append("- " + " ".join(words))
        used += 1  # the dash
    return "\n".join(lines) or "- (nothing to keep)"


class _Handler(BaseHTTPRequestHandler):
    fake: FakeOpenAIServer
    # HTTP/1.0: one request per connection, so no handler thread waits on a kept-alive
    # socket when the server shuts down.
    protocol_version = "HTTP/1.0"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._record(None)
        self._send(
            404, _error_body(f"Unknown request URL: GET {self.path}", "invalid_request_error")
        )

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        self._record(body)

        fake = self.fake
        if fake.delay and fake._closing.wait(fake.delay):
            return  # shutting down: drop the connection

        path = self.path.split("?", 1)[0].rstrip("/")
        override = fake._next_override()
        if isinstance(override, _Failure):
            headers = dict(override.headers)
            if fake.retry_after_ms is not None:
                headers.setdefault("retry-after-ms", str(fake.retry_after_ms))
            if path == "/v1/messages":
                error_type = override.error_type or _ANTHROPIC_ERROR_TYPES.get(
                    override.status, "api_error" if override.status >= 500 else "invalid_request_error"
                )
                error = _anthropic_error_body(override.message, error_type)
            else:
                error_type = override.error_type or (
                    "server_error" if override.status >= 500 else "invalid_request_error"
                )
                error = _error_body(override.message, error_type, override.code)
            self._send(override.status, error, headers)
            return
        if isinstance(override, _Canned):
            self._send(override.status, override.body)
            return

        if not isinstance(body, dict):
            self._send(
                400,
                _error_body(
                    "We could not parse the JSON body of your request.", "invalid_request_error"
                ),
            )
        elif path == "/v1/embeddings":
            self._embeddings(body)
        elif path == "/v1/chat/completions":
            self._chat(body)
        elif path == "/v1/messages":
            self._messages(body)
        else:
            self._send(
                404, _error_body(f"Unknown request URL: POST {self.path}", "invalid_request_error")
            )

    # -- endpoints -------------------------------------------------------------------

    def _embeddings(self, body: dict[str, Any]) -> None:
        model = body.get("model")
        texts = body.get("input")
        if isinstance(texts, str):
            texts = [texts]
        encoding = body.get("encoding_format", "float")
        dim = body.get("dimensions", self.fake.dim)
        invalid = (
            "model"
            if not isinstance(model, str) or not model
            else "input"
            if not isinstance(texts, list)
            or not texts
            or not all(isinstance(t, str) and t for t in texts)
            else "encoding_format"
            if encoding not in ("float", "base64")
            else "dimensions"
            if not isinstance(dim, int) or isinstance(dim, bool) or dim <= 0
            else None
        )
        if invalid is not None:
            self._send(
                400,
                _error_body(
                    f"'$.{invalid}' is invalid. Please check the API reference: "
                    "https://platform.openai.com/docs/api-reference.",
                    "invalid_request_error",
                ),
            )
            return
        assert isinstance(texts, list)
        data = []
        for index, text in enumerate(texts):
            vector = fake_embedding(text, dim)
            embedding: Any = vector
            if encoding == "base64":
                packed = struct.pack(f"<{len(vector)}f", *vector)
                embedding = base64.b64encode(packed).decode("ascii")
            data.append({"object": "embedding", "index": index, "embedding": embedding})
        tokens = sum(_count_tokens(t) for t in texts)
        self._send(
            200,
            {
                "object": "list",
                "data": data,
                "model": model,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            },
        )

    def _chat(self, body: dict[str, Any]) -> None:
        model = body.get("model")
        messages = body.get("messages")
        if not isinstance(model, str) or not isinstance(messages, list) or not messages:
            self._send(400, _error_body("'$.messages' is invalid.", "invalid_request_error"))
            return
        for i, m in enumerate(messages):  # as the real API checks a message's name
            name = m.get("name") if isinstance(m, dict) else None
            if name is not None and not (isinstance(name, str) and _OPENAI_NAME.fullmatch(name)):
                self._send(400, _error_body(
                    f"Invalid 'messages[{i}].name': string does not match pattern. Expected a string that "
                    "matches the pattern '^[a-zA-Z0-9_-]+$'.", "invalid_request_error", "invalid_value"))
                return
        prompt = "\n".join(_message_text(m) for m in messages)
        last_user = next(
            (
                _message_text(m)
                for m in reversed(messages)
                if isinstance(m, dict) and m.get("role") == "user"
            ),
            prompt,
        )
        reply = self.fake._next_chat()
        if reply is None and self.fake.responder is not None:
            reply = _ChatReply(self.fake.responder(body), "stop")
        if reply is None:
            limit = body.get("max_tokens", body.get("max_completion_tokens"))
            summary = fake_summary(last_user, limit if isinstance(limit, int) else None)
            words = last_user.split()
            reply = _ChatReply(
                summary or f"Digest ({len(words)} words): {' '.join(words[:12])}", "stop"
            )
        prompt_tokens = _count_tokens(prompt)
        completion_tokens = _count_tokens(reply.content)
        calls = [
            {"id": c["id"], "type": "function",
             "function": {"name": c["name"], "arguments": c["arguments"]}}
            for c in reply.tool_calls or []
        ]
        if body.get("stream"):
            self._stream_chat(body, model, reply, calls, prompt_tokens, completion_tokens)
            return
        message: dict[str, Any] = {"role": "assistant", "content": reply.content or None if calls
                                   else reply.content, "refusal": None}
        if calls:
            message["tool_calls"] = calls
        self._send(
            200,
            {
                "id": f"chatcmpl-fake{self.fake._chat_count}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": message,
                        "logprobs": None,
                        "finish_reason": reply.finish_reason,
                    }
                ],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "total_tokens": prompt_tokens + completion_tokens,
                },
            },
        )

    def _stream_chat(self, body: dict[str, Any], model: str, reply: _ChatReply,
                     calls: list[dict[str, Any]], prompt_tokens: int, completion_tokens: int) -> None:
        """The chat completion as SSE chunks: the role, the content a few words at a time,
        each tool call (name, then its arguments in two pieces), the finish reason, the
        usage if asked (``stream_options.include_usage``), then ``[DONE]``."""
        base = {"id": f"chatcmpl-fake{self.fake._chat_count}", "object": "chat.completion.chunk",
                "created": int(time.time()), "model": model}

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {**base, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}

        events: list[Any] = [chunk({"role": "assistant", "content": ""})]
        words = reply.content.split(" ") if reply.content else []
        for i in range(0, len(words), 3):
            piece = " ".join(words[i:i + 3])
            events.append(chunk({"content": piece if i == 0 else " " + piece}))
        for index, call in enumerate(calls):
            args = call["function"]["arguments"]
            half = len(args) // 2
            events.append(chunk({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                                                 "function": {"name": call["function"]["name"], "arguments": ""}}]}))
            for part in (args[:half], args[half:]):
                events.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": part}}]}))
        events.append(chunk({}, reply.finish_reason))
        options = body.get("stream_options")
        if isinstance(options, dict) and options.get("include_usage"):
            events.append({**base, "choices": [], "usage": {
                "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens}})
        self._send_sse([(None, json.dumps(e)) for e in events] + [(None, "[DONE]")])

    def _messages(self, body: dict[str, Any]) -> None:
        """Anthropic's ``POST /v1/messages`` (``stream: true``: its SSE events)."""
        model = body.get("model")
        messages = body.get("messages")
        max_tokens = body.get("max_tokens")
        invalid = (
            "model"
            if not isinstance(model, str) or not model
            else "max_tokens"
            if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1
            else "messages"
            if not isinstance(messages, list) or not messages
            else None
        )
        if invalid is not None:
            self._send(
                400, _anthropic_error_body(f"{invalid}: invalid or missing", "invalid_request_error")
            )
            return
        assert isinstance(messages, list) and isinstance(max_tokens, int)
        unsigned = _unsigned_tool_turn(body, messages)
        if unsigned is not None:  # as the API refuses a tool loop whose thinking was dropped
            self._send(400, _anthropic_error_body(
                f"messages.{unsigned}.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
                "`tool_use`. When `thinking` is enabled, a final `assistant` message must start with a thinking "
                "block (preceeding the lastmost set of `tool_use` and `tool_result` blocks).",
                "invalid_request_error"))
            return
        system = body.get("system")
        system_text = system if isinstance(system, str) else _message_text({"content": system})
        last_user = next(
            (
                _message_text(m)
                for m in reversed(messages)
                if isinstance(m, dict) and m.get("role") == "user"
            ),
            "",
        )
        reply = self.fake._next_chat()
        if reply is None:
            words = last_user.split()
            summary = fake_summary(last_user, max_tokens)
            reply = _ChatReply(
                summary or f"Digest ({len(words)} words): {' '.join(words[:12])}", "stop"
            )
        stop = {"stop": "end_turn", "length": "max_tokens"}.get(
            reply.finish_reason, reply.finish_reason
        )
        prompt = "\n".join([system_text, *(_message_text(m) for m in messages)])
        content: list[dict[str, Any]] = [{"type": "text", "text": reply.content}] if reply.content else []
        for call in reply.tool_calls or []:
            content.append({"type": "tool_use", "id": call["id"].replace("call_", "toolu_"),
                            "name": call["name"], "input": json.loads(call["arguments"] or "{}")})
        if reply.tool_calls:
            stop = "tool_use"
        if body.get("stream"):
            self._stream_messages(model, content, stop, _count_tokens(prompt))
            return
        self._send(
            200,
            {
                "id": f"msg_fake{self.fake._chat_count}",
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": content,
                "stop_reason": stop,
                "stop_sequence": None,
                "usage": {
                    "input_tokens": _count_tokens(prompt),
                    "output_tokens": _count_tokens(reply.content) if reply.content else 0,
                },
            },
        )

    def _stream_messages(self, model: str, content: list[dict[str, Any]], stop: str, input_tokens: int) -> None:
        """Anthropic's stream: message_start, each block's start / deltas / stop (text a few
        words at a time, tool input as partial JSON), message_delta, message_stop."""
        events: list[tuple[str, dict[str, Any]]] = [("message_start", {"type": "message_start", "message": {
            "id": f"msg_fake{self.fake._chat_count}", "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": input_tokens, "output_tokens": 0}}})]
        for index, block in enumerate(content):
            if block["type"] == "text":
                events.append(("content_block_start", {"type": "content_block_start", "index": index,
                                                       "content_block": {"type": "text", "text": ""}}))
                words = block["text"].split(" ")
                for i in range(0, len(words), 3):
                    piece = " ".join(words[i:i + 3])
                    events.append(("content_block_delta", {"type": "content_block_delta", "index": index, "delta": {
                        "type": "text_delta", "text": piece if i == 0 else " " + piece}}))
            else:
                events.append(("content_block_start", {"type": "content_block_start", "index": index,
                                                       "content_block": {**block, "input": {}}}))
                raw = json.dumps(block["input"])
                for part in (raw[: len(raw) // 2], raw[len(raw) // 2:]):
                    events.append(("content_block_delta", {"type": "content_block_delta", "index": index,
                                                           "delta": {"type": "input_json_delta", "partial_json": part}}))
            events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
        events.append(("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                         "usage": {"output_tokens": sum(_count_tokens(json.dumps(b)) for b in content)}}))
        events.append(("message_stop", {"type": "message_stop"}))
        self._send_sse([(name, json.dumps(data)) for name, data in events])

    # -- plumbing --------------------------------------------------------------------

    def _send_sse(self, events: list[tuple[str | None, str]]) -> None:
        """A ``text/event-stream`` answer, one event at a time (``stream_delay`` apart);
        HTTP/1.0, so the end of the body is the end of the connection."""
        try:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            self.end_headers()
            if self.fake.sse_bom:
                self.wfile.write(b"\xef\xbb\xbf")
            end = self.fake.sse_line_end
            for name, data in events:
                frame = (f"event: {name}{end}" if name else "") + f"data: {data}{end}{end}"
                self.wfile.write(frame.encode("utf-8"))
                self.wfile.flush()
                if self.fake.stream_delay and self.fake._closing.wait(self.fake.stream_delay):
                    return
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client hung up mid-stream

    def _record(self, body: Any) -> None:
        request = RecordedRequest(
            method=self.command,
            path=self.path,
            headers={k.lower(): v for k, v in self.headers.items()},
            body=body,
        )
        with self.fake._lock:
            self.fake.requests.append(request)

    def _send(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        payload = body if isinstance(body, bytes) else json.dumps(body).encode("utf-8")
        try:
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout test); nothing to tell it


def _unsigned_tool_turn(body: dict[str, Any], messages: list[Any]) -> int | None:
    """With ``thinking`` enabled, the index of a final assistant message that calls tools
    without starting with its thinking block, which Anthropic's API refuses."""
    thinking = body.get("thinking")
    if not isinstance(thinking, dict) or thinking.get("type") != "enabled":
        return None
    last = max((i for i, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == "assistant"),
               default=None)
    content = messages[last].get("content") if last is not None else None
    if not isinstance(content, list) or not any(isinstance(b, dict) and b.get("type") == "tool_use" for b in content):
        return None
    first = content[0] if content and isinstance(content[0], dict) else {}
    return None if first.get("type") in ("thinking", "redacted_thinking") else last


def _message_text(message: Any) -> str:
    if not isinstance(message, dict):
        return ""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: [{"type": "text", "text": ...}, ...]
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAIServer]:
    """A running fake server; ``.base_url`` is ``http://127.0.0.1:PORT/v1``."""
    with FakeOpenAIServer() as server:
        yield server
