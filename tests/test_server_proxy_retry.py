"""The proxy behind an SDK that retries on its own: a request whose first attempt the client
gave up on (a timeout) while the provider was still answering it. The reply stored is the
one the client got, so its next turn continues the stored history."""

from __future__ import annotations

import threading
import time
from contextlib import ExitStack
from typing import Any

import openai
import pytest

import lossless
from tests.fake_openai import FakeOpenAIServer, fake_openai
from tests.server_support import proxied_memory, proxy_url

__all__ = ["fake_openai", "proxied_memory", "proxy_url"]  # fixtures (memory, proxy), imported for pytest to find


@pytest.mark.parametrize("stream", [False, True])
def test_the_reply_stored_is_the_one_the_retrying_client_got(
        proxy: str, memory: lossless.Memory, fake_openai: FakeOpenAIServer, stream: bool,
        closing: ExitStack) -> None:
    """The SDK times out on the first attempt and sends it again; the provider answers the
    first attempt (回答一) a moment before the retry (回答二). 回答一 was stored, the client
    got 回答二, and its next turn, which carries 回答二, was 409 conversation_diverged from
    then on: the conversation was stuck through no fault of the client's."""
    retried = threading.Event()
    calls: list[str] = []

    def provider(body: dict[str, Any]) -> str:
        calls.append(body["messages"][-1]["content"])
        if len(calls) == 1:  # the first attempt: answered only once the client has retried
            retried.wait(30)
            return "回答一"
        if len(calls) == 2:
            retried.set()
            time.sleep(0.6)  # the first attempt's answer comes (and was stored) before this one
            return "回答二"
        return "好的，继续。"

    fake_openai.responder = provider
    client = closing.enter_context(openai.OpenAI(
        base_url=proxy + "/v1", api_key="unused", max_retries=1, timeout=1.5,
        default_headers={"X-Lossless-Conversation": "%E9%87%8D%E8%AF%95"}))

    def ask(chat: list[Any]) -> str:
        if not stream:
            return client.chat.completions.create(model="gpt-4o", messages=chat).choices[0].message.content or ""
        chunks = client.chat.completions.create(model="gpt-4o", messages=chat, stream=True)
        return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)

    chat: list[Any] = [{"role": "user", "content": "讲个故事"}]
    got = ask(chat)
    assert got == "回答二" and len(calls) == 2
    time.sleep(0.3)  # the first attempt's answer has come and gone
    stored = memory.get_conversation("重试").messages()  # type: ignore[union-attr]
    assert [(m.role, m.content) for m in stored] == [("user", "讲个故事"), ("assistant", "回答二")]
    chat += [{"role": "assistant", "content": got}, {"role": "user", "content": "然后呢"}]
    assert ask(chat) == "好的，继续。"
    assert [m.content for m in memory.get_conversation("重试").messages()] == [  # type: ignore[union-attr]
        "讲个故事", "回答二", "然后呢", "好的，继续。"]
