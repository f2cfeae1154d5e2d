"""The request flow every wire format of the context proxy shares: read the request,
store what is new, assemble the context, forward it, recover from "context too long",
relay the answer and store the reply.

What differs between wire formats is a :class:`Dialect`; one module each implements it
(:mod:`~lossless.server.proxy.openai_wire`, :mod:`~lossless.server.proxy.anthropic_wire`)
and imports this one, never the other way round.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

import httpx
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from lossless.agent.emergency import smaller_budget, truncate_tool_outputs
from lossless.conversation import Conversation
from lossless.core.errors import ContextOverflowError, ValidationError
from lossless.core.models import context_window
from lossless.core.render import content_text
from lossless.core.tokens import count_chat_tokens
from lossless.core.types import AssembledContext, Message
from lossless.providers.errors import is_context_length_error
from lossless.server.chat_match import match_request, storable
from lossless.server.errors import HTTPError, error_response, exception_response
from lossless.server.idempotency import ProxyRequests, check_key, request_sha256
from lossless.server.params import bad, read_json
from lossless.server.proxy.conversation_header import CONVERSATION_HEADER, conversation_header_value
from lossless.server.proxy.turn_locks import ConversationLocks, NewestAttempts
from lossless.server.sse import ServerSentEvent, SSEParser
from lossless.server.state import ServerState, Upstream, state_of
from lossless.server.tenancy import Tenant

if TYPE_CHECKING:
    from lossless.engine import Memory

__all__ = ["CONVERSATION_HEADER", "Dialect", "ProxyTurn", "StreamReply", "UpstreamError", "default_reserve", "proxy",
           "proxy_route"]

log = logging.getLogger("lossless.server")

_MIN_BUDGET = 256


class UpstreamError(Exception):
    """A provider's error answer, shaped so :func:`is_context_length_error` can read it."""

    def __init__(self, status: int, raw: bytes) -> None:
        self.status_code = status
        self.raw = raw
        try:
            self.body: Any = json.loads(raw)
        except ValueError:
            self.body = None
        error = self.body.get("error") if isinstance(self.body, dict) else None
        message = error.get("message") if isinstance(error, dict) else None
        super().__init__(f"HTTP {status}: {message or raw[:500].decode('utf-8', 'replace')}")


class StreamReply(Protocol):
    done: bool

    def feed(self, event: ServerSentEvent) -> None: ...


class Dialect(Protocol):
    """What differs between the OpenAI and the Anthropic wire formats."""

    path: str
    conversation_field: str  # the body's field that may name the conversation, as a client writes it

    def conversation(self, request: Request, body: dict[str, Any]) -> str | None: ...
    def incoming(self, body: dict[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
        """The request's messages as lossless stores them, and where the client wrote each
        (``messages[2]``, ``system``: what an error names)."""
    def outgoing(self, body: dict[str, Any], ctx: AssembledContext) -> dict[str, Any]:
        """The request to the provider: the client's, with the assembled context for its messages."""
    def reserve(self, body: dict[str, Any], window: int) -> int: ...
    def headers(self, request: Request, upstream: Upstream) -> dict[str, str]: ...
    def reply(self, data: Any) -> dict[str, Any] | None: ...
    def stream_reply(self) -> StreamReply: ...
    def streamed(self, acc: Any) -> dict[str, Any] | None: ...
    def replay_body(self, message: Message, model: str) -> dict[str, Any]: ...
    def replay_events(self, message: Message, model: str, body: dict[str, Any]) -> list[bytes]: ...
    def error(self, type_: str, message: str) -> dict[str, Any]:
        """The body of an error lossless answers on this route, in the wire format's shape."""


def default_reserve(requested: Any, window: int) -> int:
    """Room kept for the reply: what the request asks for, else an eighth of the window
    (at most 4096), never more than half the window."""
    if isinstance(requested, int) and not isinstance(requested, bool) and requested > 0:
        return min(requested, window // 2)
    return min(4096, window // 8)


@dataclass
class ProxyTurn:
    """The blocking half of one proxied request (each method runs in a worker thread)."""

    memory: Memory
    stored_id: str
    budget: int
    query: str | None
    compactions: int = 0
    truncate: bool = False
    sent_tokens: list[int] = field(default_factory=list)
    replay: Message | None = None  # the stored reply to a request sent before: answered without the provider
    request_seq: int = 0  # the seq of the request's last message: its reply goes right after it
    key: str | None = None  # the request's Idempotency-Key
    attempts: NewestAttempts | None = None  # the server's attempts in flight (see NewestAttempts)

    @classmethod
    def start(cls, memory: Memory, tenant: Tenant, public_id: str, incoming: list[dict[str, Any]],
              budget: int, *, model: Any = None, idempotency_key: str | None = None,
              labels: list[str] | None = None) -> ProxyTurn:
        """Store the request's new messages (creating the conversation if needed), or find
        that it was sent before (an Idempotency-Key, or its messages; see
        :mod:`lossless.server.chat_match`) and the reply to replay, if one is stored."""
        stored_id = tenant.stored_id(public_id)
        limit = memory.config.max_message_bytes
        store = memory.store
        exists = memory.get_conversation(stored_id) is not None
        conv = memory.conversation(stored_id, None if exists else tenant.metadata_in(None))
        key = check_key(idempotency_key) if idempotency_key is not None else None
        requests = ProxyRequests(store)
        sha = request_sha256(model, incoming) if key is not None else ""
        record = requests.get(stored_id, key) if key is not None and exists else None
        if record is not None:
            if record.request_sha256 != sha:
                raise ValidationError(f"Idempotency-Key {key!r} was sent before with a different request; "
                                      "a retry must send the same request (or use a new key)")
            replay = store.get_message(record.reply_id) if record.reply_id else None
            request_seq = record.request_seq
        else:
            count = store.last_seq(stored_id) if exists else 0
            match = match_request(incoming, count, lambda a, b: store.get_messages(stored_id, a, b), limit, labels)
            stored = conv.add_many(match.new) if match.new else []
            replay, request_seq = match.replay, stored[-1].seq if stored else match.through
            if key is not None:
                requests.record(stored_id, key, sha, request_seq)
        last_user = next((m for m in reversed(incoming) if m.get("role") == "user"), None)
        query = content_text(last_user.get("content")) if last_user else None
        return cls(memory, stored_id, budget, query or None, replay=replay, request_seq=request_seq, key=key)

    @property
    def conversation(self) -> Conversation:
        """The stored conversation's handle (it exists: :meth:`start` made it)."""
        return Conversation(self.memory, self.stored_id)

    def context(self) -> AssembledContext:
        ctx = self.conversation.assemble(self.budget, self.query, layout="stable")
        if self.truncate:  # the last resort: cut the biggest tool outputs (whole in the store)
            messages = truncate_tool_outputs(ctx.messages, self.memory.counter, self.budget)
            ctx = replace(ctx, messages=messages, tokens=count_chat_tokens(self.memory.counter, messages))
        self.sent_tokens.append(ctx.tokens)
        return ctx

    def recover(self, error: BaseException, max_compactions: int) -> bool:
        """After a context-length error: compact in emergency mode and shrink the budget;
        False when nothing is left to try."""
        if self.truncate:
            return False
        if self.compactions >= max_compactions:
            self.truncate = True
            return True
        self.conversation.compact(emergency=True, reason="context-length error")
        self.compactions += 1
        self.budget = smaller_budget(self.budget, self.sent_tokens[-1] if self.sent_tokens else 0, error)
        return True

    def store_reply(self, reply: dict[str, Any] | None) -> None:
        """Store the reply right after the request it answers; not when the conversation
        moved on meanwhile (the client gave up on this answer and went on), and never twice
        (a retry that raced the first attempt: one reply per request position)."""
        kept = storable([reply]) if reply is not None else []
        if not kept:
            return
        if self.attempts is not None and not self.attempts.may_store(self.stored_id, self.request_seq, self):
            log.info("lossless proxy: %s: a newer attempt at the request ending at #%d is in flight; its reply "
                     "is the one stored", self.stored_id, self.request_seq)
            return
        try:
            if self.memory.store.last_seq(self.stored_id) != self.request_seq:
                log.info("lossless proxy: %s: the conversation went past #%d before its reply came; not stored",
                         self.stored_id, self.request_seq)
                return
            stored = self.memory.conversation(self.stored_id).add_many(
                [{**kept[0], "external_id": f"lossless-reply-after-{self.request_seq}"}])
            if self.key is not None:
                ProxyRequests(self.memory.store).replied(self.stored_id, self.key, stored[0].id)
        except Exception:  # the client still gets its answer; the next request re-sends the reply
            log.exception("lossless proxy: %s: storing the reply failed", self.stored_id)


_T = TypeVar("_T")


def _kept(state: ServerState, name: str, make: Callable[[], _T]) -> _T:
    """The server's one ``name`` (made on first use, kept in ``state.extra``)."""
    kept = state.extra.get(name)
    if kept is None:
        kept = state.extra[name] = make()
    return cast(_T, kept)


def _http(state: ServerState) -> httpx.AsyncClient:
    timeout = state.upstream.timeout if state.upstream else 600.0
    return _kept(state, "http", lambda: httpx.AsyncClient(timeout=httpx.Timeout(timeout, connect=10.0)))


def _attempts(state: ServerState) -> NewestAttempts:
    return _kept(state, "newest_attempts", NewestAttempts)


def _locks(state: ServerState) -> ConversationLocks:
    """The server's per-conversation locks (see :mod:`lossless.server.proxy.turn_locks`)."""
    return _kept(state, "conversation_locks", ConversationLocks)


def _check_options(body: dict[str, Any]) -> str:
    """The request's model, after checking the fields lossless itself reads (``model``,
    ``stream``) are of the right type: a 400 naming the field, before anything is stored."""
    model = body.get("model")
    if model is None or model == "":
        raise bad("'model' is required")
    if not isinstance(model, str):
        raise bad(f"'model' must be a string, got {type(model).__name__} {model!r}")
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise bad(f"'stream' must be true or false, got {type(stream).__name__} {stream!r}")
    return model


def _budget(state: ServerState, dialect: Dialect, body: dict[str, Any], model: str) -> int:
    given = state.upstream.window if state.upstream is not None else None
    window = given or context_window(model, default=state.memory.config.context_window)
    tools = body.get("tools")
    schema_tokens = state.memory.counter.count(json.dumps(tools, ensure_ascii=False)) if tools else 0
    return max(_MIN_BUDGET, window - dialect.reserve(body, window) - schema_tokens)


async def proxy(request: Request, dialect: Dialect) -> Response:
    state = state_of(request)
    try:
        tenant = await run_in_threadpool(state.tenant, request)
        if state.upstream is None:
            raise HTTPError(501, "not_available", "this server has no upstream model provider: start it with "
                                                  "`lossless serve --upstream BASE_URL`")
        async with state.slots.hold(tenant):  # released before the provider is waited for
            body, public, turn, ctx = await _prepare(request, state, dialect, tenant)
    except Exception as exc:
        return exception_response(exc, shape=dialect.error)
    named = conversation_header_value(public)
    if turn.replay is not None:  # sent before, and answered: the same answer, no provider call
        headers = {CONVERSATION_HEADER: named, "x-lossless-replayed": "true"}
        model = str(body.get("model") or "")
        if body.get("stream"):
            events = dialect.replay_events(turn.replay, model, body)
            return StreamingResponse(_chunks(events), media_type="text/event-stream",
                                     headers={**headers, "cache-control": "no-cache"})
        return Response(json.dumps(dialect.replay_body(turn.replay, model), ensure_ascii=False),
                        media_type="application/json", headers=headers)
    assert ctx is not None
    return await _forward(request, state, dialect, body, turn, named, ctx)


async def _prepare(request: Request, state: ServerState, dialect: Dialect,
                   tenant: Tenant) -> tuple[dict[str, Any], str, ProxyTurn, AssembledContext | None]:
    """What a request costs lossless before the provider is asked (the work one of the
    tenant's slots covers): read and check it, store what is new (one request of a
    conversation at a time), assemble the first context (none when the stored reply is
    replayed)."""
    body = await read_json(request, state.max_body_bytes)
    if not isinstance(body, dict):
        raise bad("the request body must be a JSON object")
    public = dialect.conversation(request, body)
    if not public:
        raise bad(f"name the conversation: send the X-Lossless-Conversation header (or the request's "
                  f"'{dialect.conversation_field}' field)")
    stored_id = tenant.stored_id(public)  # a bad id is refused here, before anything is stored or sent
    model = _check_options(body)
    if isinstance(body.get("messages"), list):  # refused before any of them is looked at
        state.limits.check_messages(len(body["messages"]))
    key = _idempotency_key(request)

    def start() -> ProxyTurn:
        incoming, labels = dialect.incoming(body)
        turn = ProxyTurn.start(state.memory, tenant, public, incoming, _budget(state, dialect, body, model),
                               model=body.get("model"), idempotency_key=key, labels=labels)
        if turn.replay is None:  # it goes to the provider: the newest attempt at this request
            turn.attempts = _attempts(state)
            turn.attempts.begin(turn.stored_id, turn.request_seq, turn)
        return turn

    async with _locks(state).hold(stored_id):  # match and store as one step (see turn_locks)
        turn = await run_in_threadpool(start)
    ctx = await run_in_threadpool(turn.context) if turn.replay is None else None
    return body, public, turn, ctx


def _idempotency_key(request: Request) -> str | None:
    """The Idempotency-Key header as the client wrote it. Header bytes reach us read as
    latin-1: a key in UTF-8 (幂等-1) read that way was mojibake, refused as "not printable"
    when it held a byte of C1 controls (most Chinese) and stored garbled when it did not."""
    value = request.headers.get("idempotency-key")
    if value is None:
        return None
    try:
        return value.encode("latin-1").decode("utf-8")
    except UnicodeDecodeError:
        raise bad("the Idempotency-Key header is not UTF-8: send the key as UTF-8 (or plain ASCII)") from None


async def _chunks(events: list[bytes]) -> AsyncIterator[bytes]:
    for event in events:
        yield event


async def _forward(request: Request, state: ServerState, dialect: Dialect, body: dict[str, Any], turn: ProxyTurn,
                   named: str, ctx: AssembledContext) -> Response:
    """Send ``ctx`` (then, after a "context too long", smaller ones) and relay the answer
    (``named``: the conversation as its response header carries it)."""
    upstream = state.upstream
    assert upstream is not None
    client = _http(state)
    url = upstream.base_url.rstrip("/") + dialect.path
    headers = dialect.headers(request, upstream)
    stream = bool(body.get("stream"))
    while True:
        payload = dialect.outgoing(body, ctx)
        try:
            response = await client.send(client.build_request("POST", url, json=payload, headers=headers), stream=True)
        except httpx.HTTPError as exc:
            log.warning("lossless proxy: %s: the upstream provider at %s did not answer: %s: %s", turn.stored_id,
                        httpx.URL(upstream.base_url).copy_with(userinfo=b"", query=b""), type(exc).__name__, exc)
            return error_response(502, "upstream_error", "the upstream provider did not answer: "
                                  f"{type(exc).__name__}: {_redacted(str(exc), upstream)}", shape=dialect.error)
        if response.status_code < 400:
            break
        raw = await response.aread()
        await response.aclose()
        error = UpstreamError(response.status_code, raw)
        if not is_context_length_error(error):
            return Response(raw, status_code=response.status_code, headers=_passed_on(response.headers),
                            media_type=response.headers.get("content-type", "application/json"))
        log.warning("lossless proxy: %s: the provider refused %d tokens as too long", turn.stored_id, ctx.tokens)
        try:
            more = await run_in_threadpool(turn.recover, error, upstream.max_compactions)
        except Exception as exc:
            return exception_response(exc, shape=dialect.error)
        if not more:
            return exception_response(ContextOverflowError(
                f"the provider still refused the context as too long after {turn.compactions} emergency "
                f"compactions and cutting tool outputs: {error}"), shape=dialect.error)
        try:
            ctx = await run_in_threadpool(turn.context)
        except Exception as exc:
            return exception_response(exc, shape=dialect.error)
    extra = {**_passed_on(response.headers), CONVERSATION_HEADER: named,
             "x-lossless-context-tokens": str(ctx.tokens), "x-lossless-compactions": str(turn.compactions)}
    if not stream:
        try:
            raw = await response.aread()
        except httpx.HTTPError as exc:  # the body broke off
            return error_response(502, "upstream_error", f"the upstream provider's answer broke off: "
                                  f"{type(exc).__name__}: {_redacted(str(exc), upstream)}", shape=dialect.error)
        finally:
            await response.aclose()
        try:
            reply = dialect.reply(json.loads(raw))
        except (ValueError, TypeError, AttributeError, KeyError, IndexError) as exc:
            return error_response(502, "upstream_error", f"the upstream provider answered {response.status_code} "
                                  f"with a body that is not a {dialect.path} answer: {exc}", shape=dialect.error)
        await run_in_threadpool(turn.store_reply, reply)
        return Response(raw, status_code=response.status_code,
                        media_type=response.headers.get("content-type", "application/json"), headers=extra)
    return StreamingResponse(_relay(response, dialect, turn), status_code=response.status_code,
                             media_type=response.headers.get("content-type", "text/event-stream"),
                             headers={**extra, "cache-control": "no-cache"})


def _redacted(text: str, upstream: Upstream) -> str:
    """``text`` without the operator's upstream URL, its host or its credentials: a tenant
    is told the provider failed, not where the operator's gateway lives nor the user and
    password or key its URL may carry (``https://user:token@gateway.internal/v1``)."""
    url = httpx.URL(upstream.base_url)
    parts = (upstream.base_url, upstream.base_url.rstrip("/"), str(url), url.netloc.decode("ascii", "replace"),
             url.userinfo.decode("ascii", "replace"), url.host, url.query.decode("ascii", "replace"))
    for part in sorted({p for p in parts if p}, key=len, reverse=True):
        text = text.replace(part, "…")
    return text


# the provider's headers a client's SDK acts on (backing off, pacing, quoting a request id
# to support): passed on as they are; no other upstream header is
_PASSED = frozenset({"retry-after", "retry-after-ms", "x-request-id", "request-id"})
_PASSED_PREFIXES = ("x-ratelimit-", "anthropic-ratelimit-")


def _passed_on(headers: httpx.Headers) -> dict[str, str]:
    return {name: value for name, value in headers.items()
            if name.lower() in _PASSED or name.lower().startswith(_PASSED_PREFIXES)}


async def _relay(response: httpx.Response, dialect: Dialect, turn: ProxyTurn) -> AsyncIterator[bytes]:
    """The provider's bytes as they come, decoded from any Content-Encoding (httpx asks for
    gzip, and the client is answered without one); the reply is stored before the final
    event is passed on (a client may hang up right after it)."""
    parser = SSEParser()
    acc = dialect.stream_reply()
    stored = False
    reading = True  # the side parser, which the client's stream never depends on
    try:
        async for chunk in response.aiter_bytes():
            if reading:
                try:
                    for event in parser.feed(chunk):
                        acc.feed(event)
                    if acc.done and not stored:
                        stored = True
                        await run_in_threadpool(turn.store_reply, dialect.streamed(acc))
                except Exception as exc:  # a chunk lossless cannot read: relay the rest, store no reply
                    reading = False
                    log.warning("lossless proxy: %s: an upstream stream event could not be read (%s: %s); the "
                                "stream is relayed as it is, its reply not stored", turn.stored_id,
                                type(exc).__name__, exc)
            yield chunk
    except httpx.HTTPError as exc:  # the provider's stream broke off: the client's ends there too
        log.warning("lossless proxy: %s: the upstream stream broke off: %s", turn.stored_id, exc)
    finally:
        await response.aclose()


def proxy_route(path: str, dialect: Dialect) -> Route:
    async def handle(request: Request) -> Response:
        return await proxy(request, dialect)

    handle.__name__ = f"proxy_{dialect.__class__.__name__.lower()}"
    return Route(path, handle, methods=["POST"])
