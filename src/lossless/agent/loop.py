"""The turn loop: lossless inside an agent's model call (seed 003's five steps).

    result = conv.turn("Why did the deploy fail?", call=openai.OpenAI(), model="gpt-4o-mini",
                       tools={"run_tests": run_tests})
    result.reply          # the assistant's final text
    result.messages       # what was stored: the user message, tool calls, results, the reply

One turn: (1) long-term memories of the conversation's user/agent that match the message
and (2) the context for the model's window are assembled together (`Assembler`); (3) the
model is called — an ``openai`` client, an ``anthropic`` client, or any function from
OpenAI-style messages to a reply — and its tool calls are run (yours, and the lossless
memory tools ``lcm_grep`` / ``lcm_describe`` / ``lcm_expand``) for at most
``max_tool_rounds`` rounds; (4) the user message, the tool calls and results and the reply
are stored in one transaction, and compaction runs if a trigger fired (in a background
thread when ``background_compaction`` with ``compaction="inline"``; by default the worker
does it); (5) with ``end_task`` the session's durable items
are distilled into long-term memory and the task's record is written (seed 003's task-level
memory, :mod:`lossless.longterm.tasks`). Every message a turn stores carries its task's
id in ``metadata["task_id"]``. While a compaction of the conversation runs, tool
calls wait for it (``tool_wait_seconds``), then answer :data:`COMPACTING_RESULT`. A context-length error from the provider compacts
harder and retries (see :mod:`lossless.agent.emergency`). A turn that fails stores nothing: the
conversation is as it was before it.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from lossless.agent.tools import openai_tools, wait_while_compacting
from lossless.core.content import content_text
from lossless.core.errors import ContextOverflowError, LosslessError, ValidationError
from lossless.core.tokens import count_chat_tokens
from lossless.core.types import AssembledContext, ChatMessage, Message
from lossless.core.validate import validate_message
from lossless.providers.anthropic_format import anthropic_messages
from lossless.providers.errors import is_context_length_error
from lossless.providers.openai_format import openai_messages

if TYPE_CHECKING:
    from lossless.agent.base import ConversationHandle
    from lossless.longterm import MemoryRecord

__all__ = ["COMPACTING_RESULT", "ModelCallError", "TurnResult", "run_turn"]

_MEMORY_TOOLS = frozenset({"lcm_grep", "lcm_describe", "lcm_expand"})
# what the model reads when one of your tools waited ``tool_wait_seconds`` for a compaction
COMPACTING_RESULT = "lossless: the conversation is being compacted; call the tool again"
ToolFn = Callable[..., Any]


class ModelCallError(LosslessError):
    """The model callable failed or answered something that is not a reply."""


@dataclass
class TurnResult:
    """What one turn did."""

    reply: str
    messages: list[Message]  # stored, in order: user, (assistant tool calls, tool results)*, reply
    context: AssembledContext  # the context of the last model call
    model_calls: int = 0
    tool_calls: int = 0
    emergency_compactions: int = 0
    memories: list[MemoryRecord] = field(default_factory=list)  # distilled, with end_task
    compaction: threading.Thread | None = None  # the background compaction, if any


# -- talking to the model ----------------------------------------------------------------

def _is_openai_client(obj: Any) -> bool:
    return hasattr(obj, "chat") and hasattr(getattr(obj, "chat", None), "completions")


def _is_anthropic_client(obj: Any) -> bool:
    return hasattr(obj, "messages") and hasattr(getattr(obj, "messages", None), "create") and not _is_openai_client(obj)


def _resolve(value: Any) -> Any:
    """A sync value, or the result of an awaitable run on the caller's event loop (set by
    ``aturn``), so an async client works in the worker thread."""
    if inspect.isawaitable(value):
        loop = _LOOP.get()
        if loop is None:
            raise ModelCallError("the model callable returned an awaitable: use aturn() for async clients")
        return asyncio.run_coroutine_threadsafe(_await(value), loop).result()
    return value


async def _await(value: Any) -> Any:
    return await value


class _LoopHolder(threading.local):
    loop: asyncio.AbstractEventLoop | None = None

    def get(self) -> asyncio.AbstractEventLoop | None:
        return self.loop


_LOOP = _LoopHolder()


def _field(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _openai_reply(response: Any) -> ChatMessage:
    choices = _field(response, "choices")
    if not choices:
        raise ModelCallError("the model's response has no choices")
    message = _field(choices[0], "message")
    if message is None:
        raise ModelCallError("the model's response has no message")
    reply: dict[str, Any] = {"role": "assistant", "content": _field(message, "content") or ""}
    calls = []
    for call in _field(message, "tool_calls") or []:
        fn = _field(call, "function")
        calls.append({"id": _field(call, "id") or f"call_{uuid.uuid4().hex[:12]}", "type": "function",
                      "function": {"name": _field(fn, "name"), "arguments": _field(fn, "arguments") or "{}"}})
    if calls:
        reply["tool_calls"] = calls
    return reply  # type: ignore[return-value]


def _anthropic_reply(response: Any) -> ChatMessage:
    blocks = _field(response, "content") or []
    texts, calls = [], []
    for block in blocks:
        kind = _field(block, "type")
        if kind == "text":
            texts.append(_field(block, "text") or "")
        elif kind == "tool_use":
            calls.append({"id": _field(block, "id"), "type": "function",
                          "function": {"name": _field(block, "name"),
                                       "arguments": json.dumps(_field(block, "input") or {}, ensure_ascii=False)}})
    reply: dict[str, Any] = {"role": "assistant", "content": "".join(texts)}
    if calls:
        reply["tool_calls"] = calls
    return reply  # type: ignore[return-value]


def _call_model(call: Any, messages: list[ChatMessage], *, model: str | None, tools: list[dict[str, Any]] | None,
                max_tokens: int, options: Mapping[str, Any]) -> ChatMessage:
    if _is_openai_client(call):
        if not model:
            raise ValidationError("model= is required with an OpenAI client")
        kwargs: dict[str, Any] = {"model": model, "messages": openai_messages(messages), **options}
        if tools:
            kwargs["tools"] = tools
        return _openai_reply(_resolve(call.chat.completions.create(**kwargs)))
    if _is_anthropic_client(call):
        if not model:
            raise ValidationError("model= is required with an Anthropic client")
        system, body = anthropic_messages(messages)
        kwargs = {"model": model, "max_tokens": max_tokens, "messages": body, **options}
        if system:
            kwargs["system"] = system
        if tools:
            kwargs["tools"] = [{"name": t["function"]["name"], "description": t["function"].get("description", ""),
                                "input_schema": t["function"].get("parameters", {"type": "object"})} for t in tools]
        return _anthropic_reply(_resolve(call.messages.create(**kwargs)))
    if not callable(call):
        raise ValidationError(f"call must be an OpenAI client, an Anthropic client or a function, got {type(call).__name__}")
    reply = _resolve(call(messages, tools) if _wants_tools(call) else call(messages))
    if isinstance(reply, str):
        return {"role": "assistant", "content": reply}
    if isinstance(reply, Mapping) and reply.get("role", "assistant") == "assistant" and (
            isinstance(reply.get("content"), str | None) or reply.get("tool_calls")):
        out: dict[str, Any] = {"role": "assistant", "content": reply.get("content") or ""}
        if reply.get("tool_calls"):
            out["tool_calls"] = list(reply["tool_calls"])
        return out  # type: ignore[return-value]
    if _field(reply, "choices") is not None:
        return _openai_reply(reply)
    raise ModelCallError(f"the model callable returned {type(reply).__name__}, not a reply "
                         "(a string, an assistant message dict, or a chat completion)")


def _wants_tools(fn: Callable[..., Any]) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    positional = [p for p in params.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    return len(required) >= 2 or (len(positional) >= 2 and positional[1].name == "tools")


# -- the turn ------------------------------------------------------------------------------

def _tool_specs(tools: Mapping[str, ToolFn] | None, specs: list[dict[str, Any]] | None,
                memory_tools: bool) -> list[dict[str, Any]]:
    out = list(specs or [])
    named = {t.get("function", {}).get("name") for t in out}
    for name, fn in (tools or {}).items():
        if name not in named:
            doc = (inspect.getdoc(fn) or name).splitlines()[0]
            out.append({"type": "function", "function": {
                "name": name, "description": doc,
                "parameters": {"type": "object", "properties": {}, "additionalProperties": True}}})
    if memory_tools:
        out.extend(t for t in openai_tools() if t["function"]["name"] not in named)
    return out


def _run_tool(conv: ConversationHandle, call: Mapping[str, Any], tools: Mapping[str, ToolFn] | None) -> str:
    fn = call.get("function") or {}
    name = str(fn.get("name") or "")
    if name in _MEMORY_TOOLS and (not tools or name not in tools):
        return str(conv.tools.dispatch(call)["content"])
    handler = (tools or {}).get(name)
    if handler is None:
        return json.dumps({"error": f"unknown tool {name!r}"}, ensure_ascii=False)
    # seed 003: no new tool call while the conversation is COMPACTING (a worker, another
    # process or a background thread holds its lease); past the wait the model retries
    if not wait_while_compacting(conv.memory, conv.id):
        return json.dumps({"error": COMPACTING_RESULT, "retry": True})
    try:
        args = json.loads(fn.get("arguments") or "{}")
    except ValueError as exc:
        return json.dumps({"error": f"arguments are not JSON: {exc}"}, ensure_ascii=False)
    try:
        result = _resolve(handler(**args) if isinstance(args, dict) else handler(args))
    except Exception as exc:  # the model reads the failure and can recover
        return json.dumps({"error": f"{type(exc).__name__}: {exc}"}, ensure_ascii=False)
    return result if isinstance(result, str) else json.dumps(result, ensure_ascii=False, default=str)


def run_turn(
    conv: ConversationHandle,
    user_message: str | Mapping[str, Any],
    call: Any,
    *,
    model: str | None = None,
    tools: Mapping[str, ToolFn] | None = None,
    tool_specs: list[dict[str, Any]] | None = None,
    memory_tools: bool = True,
    budget_tokens: int | None = None,
    max_tool_rounds: int = 8,
    max_tokens: int = 1024,
    max_compactions: int = 3,
    background_compaction: bool = False,
    end_task: bool = False,
    options: Mapping[str, Any] | None = None,
    layout: Literal["stable", "budgeted"] = "stable",
) -> TurnResult:
    """One agent turn; see the module docstring. ``call`` is an OpenAI client
    (``model=`` required), an Anthropic client, or ``fn(messages)`` / ``fn(messages,
    tools)`` returning a string, an assistant message dict or a chat completion.
    ``layout="budgeted"`` turns the cache-stable context layout off (for comparison)."""
    memory = conv.memory
    data: dict[str, Any] = ({"role": "user", "content": user_message} if isinstance(user_message, str)
                            else dict(user_message))
    data.setdefault("created_at", datetime.now(UTC))
    pending_user = validate_message(data, max_bytes=memory.config.max_message_bytes)
    if pending_user.role != "user":
        raise ValidationError(f"a turn starts with a user message, got role {pending_user.role!r}")
    task = _current_task(conv, data)
    if max_tool_rounds < 0:
        raise ValidationError(f"max_tool_rounds must be >= 0, got {max_tool_rounds}")
    user_chat: ChatMessage = {"role": "user", "content": pending_user.content}
    if pending_user.name:
        user_chat["name"] = pending_user.name
    # the recall query is the message's text, as the proxy reads it: content parts as JSON
    # were \u escapes (\u6211…) for any non-ASCII text, so a Chinese question recalled nothing
    query = content_text(pending_user.content) or None
    specs = _tool_specs(tools, tool_specs, memory_tools) if (tools or tool_specs or memory_tools) else []
    budget = budget_tokens or memory.config.context_window
    new: list[ChatMessage] = []  # this turn's messages, stored only when the turn succeeds
    result = TurnResult(reply="", messages=[], context=AssembledContext([], 0, budget))
    rounds = 0
    while True:
        # the stored history plus this turn so far, within the budget
        extra = count_chat_tokens(memory.counter, [user_chat, *new]) - count_chat_tokens(memory.counter, [])
        room = budget - extra - (max_tokens if max_tokens < budget // 2 else 0)
        if room < 64:
            raise ContextOverflowError(f"this turn's own messages ({extra} tokens) leave no room in {budget} tokens")
        ctx = conv.assemble(room, query, layout=layout)
        messages = [*ctx.messages, user_chat, *new]
        try:
            reply = _call_model(call, messages, model=model, tools=specs or None, max_tokens=max_tokens,
                                options=options or {})
        except Exception as exc:
            if is_context_length_error(exc) and result.emergency_compactions < max_compactions:
                conv.compact(emergency=True, reason="context-length error")
                result.emergency_compactions += 1
                budget = max(256, int(budget * 0.8))
                continue
            if isinstance(exc, LosslessError):
                raise
            raise ModelCallError(f"the model call failed: {type(exc).__name__}: {exc}") from exc
        result.model_calls += 1
        result.context = AssembledContext(messages, count_chat_tokens(memory.counter, messages), budget, ctx.items)
        new.append(reply)
        calls = reply.get("tool_calls") or []
        if not calls or rounds >= max_tool_rounds:
            break
        rounds += 1
        for tool_call in calls:
            result.tool_calls += 1
            new.append({"role": "tool", "tool_call_id": tool_call["id"],
                        "content": _run_tool(conv, tool_call, tools)})
    result.reply = str(new[-1].get("content") or "")
    stamp = data["created_at"]
    to_store = [{**m, "created_at": stamp, "metadata": {**(m.get("metadata") or {}), "task_id": task}}
                for m in [data, *new]]
    result.messages = _store(conv, to_store, background_compaction, result)
    if end_task:
        result.memories = conv.end()
    return result


def _current_task(conv: ConversationHandle, data: Mapping[str, Any]) -> str:
    """The id of the conversation's current task (the record ``end_task`` writes, see
    :mod:`lossless.longterm.tasks`), which every message of the turn carries in
    ``metadata["task_id"]``; the hierarchical strategy groups history by it. A user
    message naming another task is refused before the model is called."""
    from lossless.longterm.tasks import task_id_for

    task = task_id_for(conv.id, conv.memory.memories.task_start(conv.id))
    given = (data.get("metadata") or {}).get("task_id")
    if given is not None and given != task:
        raise ValidationError(f"metadata task_id {given!r} is not the conversation's current task {task!r}: "
                              "the turn loop sets it (end a task with end_task=True)")
    return task


def _store(conv: ConversationHandle, messages: list[dict[str, Any]], background: bool, result: TurnResult) -> list[Message]:
    """The turn's messages in one transaction, then compaction if a trigger fired (in a
    daemon thread when ``background``)."""
    memory = conv.memory
    if memory.config.compaction != "inline":  # the worker compacts: nothing to start here
        return conv.add_many(messages)
    stored = conv.add_many(messages, compact=not background)
    if background and memory.config.auto_compact:
        # as a write's own trigger check: no forcing, no waiting for a compaction running elsewhere
        thread = threading.Thread(target=conv.compact, kwargs={"force": False, "wait": 0.0}, daemon=True,
                                  name=f"lossless-compact-{conv.id}")
        thread.start()
        result.compaction = thread
    return stored


async def arun_turn(conv: ConversationHandle, user_message: str | Mapping[str, Any], call: Any,
                    **kwargs: Any) -> TurnResult:
    """:func:`run_turn` in a worker thread; an async client's coroutines run on this loop."""
    loop = asyncio.get_running_loop()

    def work() -> TurnResult:
        _LOOP.loop = loop
        try:
            return run_turn(conv, user_message, call, **kwargs)
        finally:
            _LOOP.loop = None

    return await asyncio.to_thread(work)
