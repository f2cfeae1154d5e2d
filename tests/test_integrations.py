"""LlamaIndex and LangChain adapters, run through the frameworks themselves, offline."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

import lossless

pytest.importorskip("llama_index.core")
pytest.importorskip("langchain_core")

from langchain_core._api.deprecation import LangChainDeprecationWarning
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables.history import RunnableWithMessageHistory
from llama_index.core.chat_engine import SimpleChatEngine
from llama_index.core.llms import ChatMessage
from llama_index.core.llms.mock import MockLLMWithChatMemoryOfLastCall
from llama_index.core.memory import Memory

from lossless.integrations.langchain import LosslessChatMessageHistory
from lossless.integrations.llamaindex import LosslessMemoryBlock, from_llama_message
from tests.conftest import StoreTarget


@pytest.fixture
def store(store_target: StoreTarget, tmp_path: Path) -> Iterator[lossless.Memory]:
    mem = lossless.open(store_target("int"), embedder=None, context_window=4096)
    yield mem
    mem.close()


# -- LlamaIndex ---------------------------------------------------------------------------


def test_llamaindex_memory_flushes_into_lossless_and_recalls(store: lossless.Memory) -> None:
    async def scenario() -> None:
        block = LosslessMemoryBlock(memory=store, conversation_id="li", budget_tokens=800,
                                    conversation_metadata={"user": "maya"})
        memory = Memory.from_defaults(session_id="s1", token_limit=300, token_flush_size=60,
                                      chat_history_token_ratio=0.5, memory_blocks=[block])
        try:
            await memory.aput(ChatMessage(role="user", content="The depot gate code is ZX-41."))
            await memory.aput(ChatMessage(role="assistant", content="Noted: the gate code is ZX-41."))
            for i in range(24):
                await memory.aput(ChatMessage(role="user" if i % 2 == 0 else "assistant",
                                              content=f"Turn {i}: routes and vans around Porto. " * 3))
            stored = store.conversation("li").messages()
            assert stored[0].content == "The depot gate code is ZX-41."  # flushed, verbatim, in order
            assert stored[0].metadata == {"llama_index_session": "s1"}
            assert store.conversation("li").info.metadata == {"user": "maya"}
            active = await memory.aget_all()
            assert len(stored) + len([m for m in active if m.additional_kwargs.get("status") != "archived"]) >= 26

            llm = MockLLMWithChatMemoryOfLastCall(is_chat_model=True, max_tokens=8)
            engine = SimpleChatEngine.from_defaults(llm=llm, memory=memory)
            await engine.achat("What is the depot gate code?")
            sent = llm.last_chat_messages or []
            system = next(m for m in sent if m.role.value == "system")
            assert "<lossless>" in (system.content or "") and "ZX-41" in (system.content or "")
            # what the model saw from lossless is within the block's budget
            assert store.counter.count(system.content or "") < 900
        finally:
            engine_obj = memory.sql_store._async_engine  # close aiosqlite before the loop ends
            if engine_obj is not None:
                await engine_obj.dispose()

    asyncio.run(scenario())


def test_llamaindex_message_conversion() -> None:
    assert from_llama_message(ChatMessage(role="developer", content="be brief")) == {
        "role": "system", "content": "be brief"}
    assert from_llama_message(ChatMessage(role="assistant", content="")) is None
    call = ChatMessage(role="assistant", content="", additional_kwargs={"tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]})
    assert from_llama_message(call) == {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}
    result = ChatMessage(role="tool", content="42", additional_kwargs={"tool_call_id": "c1"})
    assert from_llama_message(result) == {"role": "tool", "content": "42", "tool_call_id": "c1"}


# -- LangChain ----------------------------------------------------------------------------


def test_langchain_history_round_trip_and_idempotent(store: lossless.Memory) -> None:
    history = LosslessChatMessageHistory(store, "lc")
    assert history.messages == []
    sent = [
        SystemMessage(content="You are Atlas."),
        HumanMessage(content="Look up van 104", name="maya", id="h1"),
        AIMessage(content="", tool_calls=[{"name": "lookup", "args": {"van": 104}, "id": "call_1"}], id="a1"),
        ToolMessage(content="in Porto", tool_call_id="call_1", id="t1"),
        AIMessage(content="Van 104 is in Porto.", id="a2"),
    ]
    history.add_messages(sent)
    history.add_messages(sent[1:])  # LangChain ids are external ids: nothing added twice
    stored = store.conversation("lc").messages()
    assert [m.role for m in stored] == ["system", "user", "assistant", "tool", "assistant"]
    assert stored[2].tool_calls[0]["function"] == {"name": "lookup", "arguments": '{"van": 104}'}
    back = history.all_messages()
    assert isinstance(back[2], AIMessage) and back[2].tool_calls[0]["args"] == {"van": 104}
    assert isinstance(back[3], ToolMessage) and back[3].tool_call_id == "call_1"
    assert [m.content for m in history.messages] == ["You are Atlas.", "Look up van 104", "", "in Porto",
                                                     "Van 104 is in Porto."]


def test_langchain_clear_starts_fresh_and_deletes_nothing(store: lossless.Memory) -> None:
    history = LosslessChatMessageHistory(store, "lc")
    history.add_messages([HumanMessage(content="old question"), AIMessage(content="old answer")])
    history.clear()
    assert history.messages == [] and history.current_id == "lc~2"
    again = LosslessChatMessageHistory(store, "lc")  # a new object for the same session follows the clear
    again.add_messages([HumanMessage(content="new question")])
    assert [m.content for m in history.messages] == ["new question"]
    assert [m.content for m in store.conversation("lc").messages()] == ["old question", "old answer"]
    history.clear()
    assert history.current_id == "lc~3"


def test_langchain_runnable_with_history_stays_within_budget(store: lossless.Memory) -> None:
    replies = [AIMessage(content=f"Answer {i}: " + "detail " * 60) for i in range(40)]
    model = FakeMessagesListChatModel(responses=replies)
    prompt = ChatPromptTemplate.from_messages([MessagesPlaceholder("history"), ("human", "{question}")])
    histories: dict[str, LosslessChatMessageHistory] = {}

    def get_history(session_id: str) -> LosslessChatMessageHistory:
        return histories.setdefault(session_id, LosslessChatMessageHistory(store, session_id, budget_tokens=1200))

    # LangChain deprecates RunnableWithMessageHistory (1.3.3) but still runs it: the classic consumer
    with pytest.warns(LangChainDeprecationWarning, match="RunnableWithMessageHistory is deprecated"):
        chain = RunnableWithMessageHistory(prompt | model, get_history, input_messages_key="question",
                                           history_messages_key="history")
    config = {"configurable": {"session_id": "run"}}
    chain.invoke({"question": "Remember: the gate code is ZX-41."}, config=config)
    for i in range(1, 40):
        chain.invoke({"question": f"Question {i} about routes. " + "filler " * 40}, config=config)
    assert store.conversation("run").info.message_count == 80  # every turn stored
    assert store.wait_idle(60)  # the worker condensed the older turns
    history = get_history("run")
    context = history.messages
    tokens = sum(store.counter.count(str(m.content)) for m in context)
    assert tokens <= 1200 and len(context) < 80  # older turns condensed, not all replayed
    assert store.conversation("run").summaries()
