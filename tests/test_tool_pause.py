"""Seed 003, "暂停新的工具调用": while a compaction of the conversation holds its lease,
the user's tools in ``conv.turn`` wait (``tool_wait_seconds``) like lossless's own; past
the wait the model gets a result it can retry on, and the tool does not run."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import lossless
from lossless.agent.loop import COMPACTING_RESULT
from lossless.summarize.base import SummaryRequest, SummaryResult
from lossless.testing import ScriptedSummarizer
from tests.conftest import StoreTarget, chat


def _tool_then_reply(tool: str) -> Any:
    """A model that calls ``tool`` once, then answers with the tool's result."""

    def model(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> dict[str, Any] | str:
        if messages[-1].get("role") == "tool":
            return f"tool said: {messages[-1]['content']}"
        return {"role": "assistant", "content": "",
                "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": tool, "arguments": "{}"}}]}

    return model


def test_a_user_tool_waits_for_a_running_compaction(store_target: StoreTarget) -> None:
    """A real compaction (its summarizer blocked) holds the lease; the tool runs only
    after the compaction ends, and the turn completes normally."""
    release = threading.Event()
    entered = threading.Event()

    def slow(_n: int, request: SummaryRequest) -> SummaryResult:
        entered.set()
        release.wait(20)
        return SummaryResult(f"Span #{request.items[0].first_seq}-#{request.items[-1].last_seq}.", model="slow-1")

    mem = lossless.open(store_target("pause"), embedder=None, summarizer=ScriptedSummarizer(slow),
                        compaction="inline", context_window=4096, fresh_tail_count=4, tool_wait_seconds=30)
    try:
        conv = mem.conversation("c")
        conv.add_many(chat(40), compact=False)
        compaction = threading.Thread(target=conv.compact)
        compaction.start()
        assert entered.wait(20)
        assert conv.state == "COMPACTING"
        ran: list[tuple[float, str]] = []

        def deploy() -> str:
            """Deploy the service."""
            ran.append((time.monotonic(), conv.state))
            return "deployed"

        released_at: list[float] = []

        def let_go() -> None:
            time.sleep(0.6)
            released_at.append(time.monotonic())
            release.set()

        threading.Thread(target=let_go).start()
        result = conv.turn("Deploy it.", call=_tool_then_reply("deploy"), tools={"deploy": deploy})
        compaction.join(20)
        assert len(ran) == 1
        assert ran[0][0] >= released_at[0]  # not before the compaction let go
        assert ran[0][1] == "ACTIVE"
        assert result.reply == "tool said: deployed"
    finally:
        release.set()
        mem.close()


def test_past_the_wait_the_model_gets_a_result_to_retry_on(store_target: StoreTarget) -> None:
    mem = lossless.open(store_target("pause2"), embedder=None, compaction="inline", tool_wait_seconds=0.3)
    try:
        conv = mem.conversation("c")
        conv.add("user", "hello")
        held = threading.Event()
        done = threading.Event()

        def hold() -> None:
            with mem.compactor.holding("c", "test holds the lease") as owner:
                assert isinstance(owner, str)
                held.set()
                done.wait(20)

        holder = threading.Thread(target=hold)
        holder.start()
        assert held.wait(10)
        calls: list[int] = []

        def deploy() -> str:
            """Deploy the service."""
            calls.append(1)
            return "deployed"

        started = time.monotonic()
        result = conv.turn("Deploy it.", call=_tool_then_reply("deploy"), tools={"deploy": deploy})
        waited = time.monotonic() - started
        done.set()
        holder.join(10)
        assert calls == []  # never silently run during the compaction
        tool_msg = next(m for m in result.messages if m.role == "tool")
        payload = json.loads(str(tool_msg.content))
        assert payload == {"error": COMPACTING_RESULT, "retry": True}
        assert waited >= 0.3
        assert "call the tool again" in result.reply
        # once the lease is gone the same call runs
        again = conv.turn("Deploy it now.", call=_tool_then_reply("deploy"), tools={"deploy": deploy})
        assert calls == [1] and again.reply == "tool said: deployed"
    finally:
        mem.close()
