"""How a stored message is shown to the model and what it costs there: verbatim, as an
exploration of its content when it is large, or abridged to an allowance."""

from __future__ import annotations

from dataclasses import dataclass, field

from lossless.context.pieces import SEP
from lossless.core.config import Config
from lossless.core.importance import score_message
from lossless.core.render import chat_message_text, message_text, render_summary
from lossless.core.textfit import fit_text
from lossless.core.tokens import MESSAGE_OVERHEAD, NAME_OVERHEAD, TokenCounter
from lossless.core.types import ChatMessage, Message, Summary

__all__ = ["AssemblyCaches", "MessageView"]


@dataclass
class AssemblyCaches:
    """What an assembler remembers between calls. Messages and summaries are immutable
    and extraction is deterministic, so an agent assembling every turn pays for each
    abridgement, exploration and score once. Each cache is emptied when it grows past
    its bound."""

    abridged_summaries: dict[tuple[str, int], str] = field(default_factory=dict)  # (id, room) -> text
    abridged_messages: dict[tuple[str, int, bool], ChatMessage | None] = field(default_factory=dict)
    importance: dict[str, float] = field(default_factory=dict)
    explored: dict[str, str] = field(default_factory=dict)  # message id -> what stands in for it
    role_counts: dict[str, dict[str, int]] = field(default_factory=dict)
    task_tagged: dict[tuple[str, int, int], bool] = field(default_factory=dict)  # (cid, lo, hi) -> has a task's message
    terms: dict[str, frozenset[str]] = field(default_factory=dict)  # summary id -> its words (excerpt.query_terms)
    filler: dict[str, bool] = field(default_factory=dict)  # message id -> nothing but acknowledgement


class MessageView:
    """Messages as one assembly shows them, under the assembler's current config."""

    def __init__(self, config: Config, counter: TokenCounter, caches: AssemblyCaches) -> None:
        self.config = config
        self.counter = counter
        self.caches = caches
        self.zone = config.zone  # the zone times are shown in (Config.timezone), read once
        self._sep = counter.count(SEP)

    def shown_size(self, msg: Message) -> int:
        """About what a stored message costs in a context, from its stored count (a large
        one is shown as an exploration of its content, :meth:`chat`)."""
        if self.is_large(msg):
            return MESSAGE_OVERHEAD + self.config.large_content_summary_tokens + 64
        return MESSAGE_OVERHEAD + msg.token_count

    def importance(self, msg: Message) -> float:
        cache = self.caches.importance
        value = cache.get(msg.id)
        if value is None:
            value = score_message(msg).value
            if len(cache) >= 65536:
                cache.clear()
            cache[msg.id] = value
        return value

    def unit_value(self, unit: list[Message], index: int, count: int) -> float:
        """Selective eviction's keep-order: the unit's importance (its most important
        message) blended evenly with how recent it is."""
        recency = (index + 1) / count
        return 0.5 * max(self.importance(m) for m in unit) + 0.5 * recency

    def chat_cost(self, msg: ChatMessage) -> int:
        cost = MESSAGE_OVERHEAD + self.counter.count(chat_message_text(msg))
        if msg.get("name"):
            cost += NAME_OVERHEAD + self.counter.count(str(msg["name"]))
        return cost

    def message_cost(self, msg: Message) -> int:
        """A stored message's chat cost from its stored count (the same text, counted once);
        a large one costs what stands in for it (:meth:`chat`)."""
        if self.is_large(msg):
            return self.chat_cost(self.chat(msg))
        cost = MESSAGE_OVERHEAD + msg.token_count
        if msg.name:
            cost += NAME_OVERHEAD + self.counter.count(msg.name)
        return cost

    def unit_cost(self, unit: list[Message]) -> int:
        return sum(self.message_cost(m) for m in unit)

    def is_large(self, msg: Message) -> bool:
        return msg.token_count > self.config.large_content_tokens

    def chat(self, msg: Message) -> ChatMessage:
        """The message as the model gets it: verbatim, or — over ``large_content_tokens`` —
        an exploration of its content (shape, keys, columns, definitions, errors, head and
        tail) with its id, so the model can page through the exact text with lcm_expand.
        Nothing is cut from the store."""
        chat = msg.to_chat()
        if not self.is_large(msg):
            return chat
        chat["content"] = self.large_text(msg)
        return chat

    def large_text(self, msg: Message) -> str:
        cache = self.caches.explored
        text = cache.get(msg.id)
        if text is None:
            from lossless.context.explore import explore

            body = message_text(msg) if not isinstance(msg.content, str) else msg.content
            found = explore(body, max_tokens=self.config.large_content_summary_tokens, counter=self.counter,
                            hint=msg.name)
            text = (f"[large {found.kind} content kept out of the window by lossless: message {msg.id}, "
                    f"{msg.token_count:,} tokens. Read it exactly with lcm_expand(\"{msg.id}\", page=1, 2, …) "
                    f"or search it with lcm_grep.]\n{found.summary}")
            if len(cache) >= 256:
                cache.clear()
            cache[msg.id] = text
        return text

    def body(self, msg: Message) -> str:
        """The text a message is abridged or recalled from: what stands in for a large one."""
        return self.large_text(msg) if self.is_large(msg) else message_text(msg)

    def piece_cost(self, text: str) -> int:
        """What a piece of the memory block costs, with the separator before it."""
        return self.counter.count(text) + self._sep

    def summary_text(self, node: Summary, content: str | None = None, *, abridged: bool = False) -> str:
        """:func:`~lossless.core.render.render_summary` with its span in this view's zone."""
        return render_summary(node, content, abridged=abridged, zone=self.zone)

    def line_cost(self, text: str) -> int:
        """What a line of a block (a recalled message, its date line, a long-term memory)
        costs with the newline that ends it. Counted together: a tokenizer joins the
        newline to a line's closing punctuation ("。\\n", "]\\n" are one token each), so the
        line's count plus one would overcharge most lines by a token."""
        return self.counter.count(text + "\n")

    def abridge(self, msg: Message, allowance: int, *, keep: bool = False) -> ChatMessage | None:
        """The message with its text cut to fit ``allowance`` tokens of chat cost (with
        ``keep``, a message that must be shown, even if it is filler only: see ``fit_text``)."""
        cache = self.caches.abridged_messages
        key = (msg.id, allowance, keep)
        if key in cache:
            return cache[key]
        out = self._abridge_uncached(msg, allowance, keep)
        if len(cache) >= 4096:
            cache.clear()
        cache[key] = out
        return out

    def _abridge_uncached(self, msg: Message, allowance: int, keep: bool = False) -> ChatMessage | None:
        base = self.chat(msg)
        if msg.role != "assistant":
            base.pop("tool_calls", None)
        marker = f"\n[abridged by lossless: #{msg.seq}, {msg.token_count} tokens in full]"
        room = allowance - self.chat_cost({**base, "content": ""}) - self.counter.count(marker)
        for _ in range(3):  # joining text and marker can cost a token or two more than apart
            if room < 8:
                return None
            short = fit_text(self.body(msg), room, self.counter, keep=keep)
            if not short:
                return None
            chat: ChatMessage = {**base, "content": short + marker}
            over = self.chat_cost(chat) - allowance
            if over <= 0:
                return chat
            room -= over
        return None
