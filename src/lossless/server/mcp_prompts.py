"""The MCP server's prompts: templates a user picks in their client, filled from the store.

- ``recall`` (``topic``, optional ``conversation``, ``limit``): "what did we say about X"
  — a search of every message and summary (hybrid keyword + vector when an embedder is
  configured, else keyword), the matches quoted with their ids, dates and places, and
  the question put to the model, told to cite the ids and to read more with
  ``lcm_expand``;
- ``resume`` (``conversation``, optional ``budget`` tokens and ``focus``): "pick up where
  we left off" — the conversation's assembled context (recent messages verbatim, older
  history as summaries, what the focus recalls) as the prompt's messages, then a request
  to carry on.

An MCP prompt has only user and assistant messages: system text (summaries, recalled
history) and tool results come as user messages that say what they are. Over HTTP with
keys both read the key's tenant's conversations only (:mod:`lossless.server.mcp_scope`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

from mcp.server.mcpserver.prompts.base import AssistantMessage, Message, Prompt, UserMessage
from mcp.shared.exceptions import MCPError
from mcp.types import INTERNAL_ERROR, INVALID_PARAMS, InputRequiredResult
from pydantic import Field

from lossless.core.errors import LosslessError, NotFoundError, ValidationError
from lossless.core.graphemes import cluster_start
from lossless.core.render import format_time
from lossless.core.types import GrepHit
from lossless.recall.dispatch import run_search
from lossless.server.mcp_notify import in_thread
from lossless.server.mcp_scope import OPERATOR, request_tenant, tenant_conversation
from lossless.server.tenancy import Tenant
from lossless.store.base import SearchSpec
from lossless.store.fts import match_position

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.context import Context

    from lossless.engine import Memory

__all__ = ["PROMPT_IDS", "add_prompts", "recall_messages", "resume_messages"]

# the prompts' arguments that take ids, for completion/complete
PROMPT_IDS = {"recall": {"conversation": "conversation"}, "resume": {"conversation": "conversation"}}
QUOTE_CHARS = 1200  # of each match quoted in the recall prompt (lcm_expand reads the rest)
RECALL_LIMIT = 50  # the most matches the recall prompt quotes


class _CheckedPrompt(Prompt):
    """A prompt that answers an unknown or missing argument with a JSON-RPC invalid-params
    error naming it. (The SDK would check them itself, after this, and answer with error
    code 0 and a traceback on stderr.) Its functions take every argument as the string
    the protocol sends and read numbers themselves (:func:`_whole_number`), for the same
    reason."""

    async def render(self, arguments: dict[str, Any] | None,
                     context: Context[Any, Any]) -> list[Message] | InputRequiredResult:
        given = arguments or {}
        known = [a.name for a in self.arguments or ()]
        unknown = sorted(set(given) - set(known))
        if unknown:
            raise MCPError(code=INVALID_PARAMS, message=f"prompt {self.name!r} got unknown argument(s): "
                                                        f"{', '.join(unknown)} (it takes {', '.join(known)})")
        missing = [a.name for a in self.arguments or () if a.required and a.name not in given]
        if missing:
            raise MCPError(code=INVALID_PARAMS, message=f"prompt {self.name!r} needs argument(s): "
                                                        f"{', '.join(missing)}")
        return await super().render(arguments, context)


def _whole_number(value: str | None, name: str, what: str, *, minimum: int = 1,
                  maximum: int | None = None) -> int | None:
    """A prompt argument that is a number (sent as a string, as all of them are): None when
    not given, else the number, or a ValidationError naming the argument and what it must be."""
    if value is None:
        return None
    text = value.strip()
    number = int(text) if text.isascii() and text.isdigit() else None
    if number is None or number < minimum or (maximum is not None and number > maximum):
        bounds = f"from {minimum} to {maximum}" if maximum is not None else f"{minimum} or more"
        raise ValidationError(f"{name} must be a whole number, {bounds} ({what}); got {value!r}")
    return number


async def _fill(fn: Callable[[Tenant], list[Message]]) -> list[Message]:
    """``fn(tenant)`` in a worker thread, as the request's tenant; a lossless error as a
    JSON-RPC error naming what was wrong (the SDK would hide it behind "Error rendering
    prompt"): a bad argument or an unknown conversation is invalid params."""
    tenant = OPERATOR
    try:
        tenant = request_tenant()
        return await in_thread(lambda: fn(tenant))
    except (NotFoundError, ValidationError) as exc:
        raise MCPError(code=INVALID_PARAMS, message=tenant.public_text(str(exc))) from exc
    except LosslessError as exc:
        raise MCPError(code=INTERNAL_ERROR, message=tenant.public_text(str(exc))) from exc


def _quote(memory: Memory, hit: GrepHit, tenant: Tenant, topic: str) -> str:
    """One match: where and when, then its text (a message's own, a summary's content); a
    text over ``QUOTE_CHARS`` is quoted around the first of the topic's words it holds."""
    if hit.kind == "message":
        text = memory.store.get_message(hit.id).text
        where = f"message #{hit.first_seq} ({hit.role})"
    elif hit.kind == "summary":
        text = memory.store.get_summary(hit.id).content
        where = f"summary of #{hit.first_seq}–{hit.last_seq}"
    else:
        text, where = hit.snippet, f"messages #{hit.first_seq}–{hit.last_seq}"
    if len(text) > QUOTE_CHARS:
        # around the match, as a search snippet is: the head of a long message need not
        # hold the words it was found by. A summary's text is what lcm_expand reads from an
        # offset; a message is read whole (its quoted text may spell out tool calls that
        # its stored content does not hold)
        at = match_position(text, topic)
        start = cluster_start(text, max(0, min(at - QUOTE_CHARS // 3, len(text) - QUOTE_CHARS)))
        end = cluster_start(text, start + QUOTE_CHARS)  # (never half a flag or a joined emoji)
        summary = hit.kind == "summary"
        before = f"lcm_expand(id={hit.id!r}, max_chars={start})" if summary else f"lcm_expand {hit.id}"
        after = f"lcm_expand(id={hit.id!r}, offset={end})" if summary else f"lcm_expand {hit.id}"
        text = ((f"[{start} characters before: {before}] … " if start else "") + text[start:end]
                + (f" … [{len(text) - end} more characters: {after}]" if end < len(text) else ""))
    return (f"[{hit.id} · {tenant.public_id(hit.conversation_id)} · {where} · {format_time(hit.created_at, memory.config.zone)}]"
            f"\n{text}")


def recall_messages(memory: Memory, topic: str, conversation: str | None = None, limit: int = 8,
                    tenant: Tenant = OPERATOR) -> list[Message]:
    """The ``recall`` prompt's messages for ``topic``, from ``tenant``'s conversations."""
    topic = topic.strip()
    if not topic:
        raise ValidationError("topic must say what to recall (it is empty)")
    scope: tuple[str, ...] | None = None
    if conversation:
        scope = (tenant_conversation(memory, tenant, conversation).id,)
    elif not tenant.implicit:
        scope = tuple(tenant.conversation_ids(memory))
    spec = SearchSpec(query=topic, conversation_ids=scope, kinds=("message", "summary"),
                      mode="hybrid" if memory.embedder is not None else "fts", limit=limit)
    hits = run_search(memory.store, memory.recaller, spec) if scope != () else []
    where = f"conversation {conversation!r}" if conversation else "every conversation"
    if not hits:
        return [UserMessage(f"Recall what we said about: {topic}\n\nThe memory ({where}) has nothing that matches. "
                            "Say so, and offer to search with other words (lcm_grep).")]
    quoted = "\n\n".join(_quote(memory, h, tenant, topic) for h in hits)
    return [UserMessage(
        f"Recall what we said about: {topic}\n\nWhat the memory ({where}) holds on it, best match first "
        f"({len(hits)} of them):\n\n{quoted}\n\nAnswer from these, citing the ids in brackets. Where a quote "
        "is cut or a summary is too coarse, read the original with lcm_expand(id). If they do not settle "
        "it, say what is missing.")]


def _chat_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        text = "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text")
    else:
        text = "" if content is None else str(content)
    for call in message.get("tool_calls") or ():
        fn = call.get("function") or {}
        text += f"\n[tool call {call.get('id', '')}: {fn.get('name', '')}({fn.get('arguments', '')})]"
    return text.strip()


def resume_messages(memory: Memory, conversation: str, budget: int | None = None,
                    focus: str | None = None, tenant: Tenant = OPERATOR) -> list[Message]:
    """The ``resume`` prompt's messages: ``tenant``'s ``conversation``'s assembled context."""
    conv = tenant_conversation(memory, tenant, conversation)
    ctx = conv.assemble(budget_tokens=budget, query=focus or None)
    out: list[Message] = []
    for m in ctx.messages:
        text = _chat_text(dict(m))
        role = m.get("role")
        if role == "assistant":
            out.append(AssistantMessage(text or "(no text)"))
        elif role == "user":
            out.append(UserMessage(text))
        elif role == "tool":
            out.append(UserMessage(f"[tool result for {m.get('tool_call_id', '?')}]\n{text}"))
        else:
            out.append(UserMessage(f"[{role}: earlier history and context]\n{text}"))
    tail = f" Keep in mind: {focus}." if focus else ""
    out.append(UserMessage(f"That is conversation {conversation!r} so far ({ctx.tokens} tokens of a "
                           f"{ctx.budget_tokens}-token budget; older parts summarized, ids can be expanded with "
                           f"lcm_expand). Pick up where it left off.{tail}"))
    return out


def add_prompts(server: MCPServer[Any], mem: Callable[[], Memory]) -> None:
    """``recall`` and ``resume``."""

    async def recall(
        topic: Annotated[str, Field(description="What to recall, in plain words.")],
        conversation: Annotated[str | None, Field(description="Only this conversation (default: all).")] = None,
        limit: Annotated[str | None, Field(description="How many matches to quote: a whole number from 1 to "
                                                       f"{RECALL_LIMIT} (default 8).")] = None,
    ) -> list[Message]:
        def fill(t: Tenant) -> list[Message]:
            count = _whole_number(limit, "limit", "how many matches to quote", maximum=RECALL_LIMIT)
            return recall_messages(mem(), topic, conversation, count or 8, t)

        return await _fill(fill)

    async def resume(
        conversation: Annotated[str, Field(description="The conversation to resume.")],
        budget: Annotated[str | None, Field(description="At most this many tokens, a whole number (default: the "
                                                        "context window).")] = None,
        focus: Annotated[str | None, Field(description="What the next turn is about: older history on it is "
                                                        "recalled into the context.")] = None,
    ) -> list[Message]:
        def fill(t: Tenant) -> list[Message]:
            tokens = _whole_number(budget, "budget", "a number of tokens")
            return resume_messages(mem(), conversation, tokens, focus, t)

        return await _fill(fill)

    server.add_prompt(_CheckedPrompt.from_function(
        recall, name="recall", title="Recall what we said about…",
        description="Search the whole history (messages and summaries) for a topic and ask the model to answer "
                    "from the matches, quoted with their ids and dates."))
    server.add_prompt(_CheckedPrompt.from_function(
        resume, name="resume", title="Pick up where we left off",
        description="A conversation's context as the model would get it (recent messages verbatim, older history "
                    "summarized), to carry on from."))
