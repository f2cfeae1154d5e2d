"""Matching a proxied request against the stored tail (lossless.server.chat_match): a client
that trims old history and sends a sliding window of its newest messages (maybe behind its
system prompt) stores each message once; a client that sends its whole chat with an earlier
message edited gets Diverged (409), not its chat stored again. Unit tests over an in-memory
message log, a hypothesis property, and the proxy end to end against the fake provider on
127.0.0.1 (tests/fake_openai.py)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lossless
from lossless.core._canonical import message_hash
from lossless.core.types import Message
from lossless.core.validate import NewMessage, validate_message
from lossless.server.chat_match import Diverged, MessageMatch, _overlap, match_request, storable
from tests.fake_openai import FakeOpenAIServer, fake_openai
from tests.server_support import proxied_memory, proxy_url

__all__ = ["fake_openai", "proxied_memory", "proxy_url"]  # fixtures (memory, proxy), imported for pytest to find

MODEL = "gpt-4o-mini"
LIMIT = 1 << 20


def _key(m: dict[str, Any]) -> str:
    v = validate_message(m, max_bytes=LIMIT)
    return message_hash(v.role, v.content, v.name, v.tool_calls, v.tool_call_id)


class MessageLog:
    """A conversation's stored messages in memory, read the way the proxy reads the store
    (``read(first, last)`` by seq, every call recorded), with the proxy's steps on top:
    store a request's new messages, then the provider's reply after it unless the request
    was answered by a replay (what ``ProxyTurn.start`` / ``store_reply`` do)."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.reads: list[tuple[int, int]] = []

    def read(self, first: int, last: int) -> list[Message]:
        self.reads.append((first, last))
        return self.messages[first - 1:last]

    def add(self, new: list[NewMessage]) -> None:
        for v in new:
            seq = len(self.messages) + 1
            self.messages.append(Message(
                id=f"msg_{seq}", conversation_id="c", seq=seq, role=v.role, content=v.content,
                created_at=v.created_at, token_count=1, name=v.name, tool_calls=v.tool_calls,  # type: ignore[arg-type]
                tool_call_id=v.tool_call_id))

    def match(self, request: list[dict[str, Any]]) -> MessageMatch:
        return match_request(storable(request), len(self.messages), self.read, LIMIT)

    def turn(self, request: list[dict[str, Any]], reply: dict[str, Any] | None = None) -> MessageMatch:
        match = self.match(request)
        self.add(match.new)
        through = len(self.messages) if match.new else match.through
        if reply is not None and match.replay is None and through == len(self.messages):
            self.add([validate_message(reply, max_bytes=LIMIT)])
        return match

    def keys(self) -> list[str]:
        return [message_hash(m.role, m.content, m.name, m.tool_calls, m.tool_call_id) for m in self.messages]


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def _assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def _call(call_id: str, name: str = "查天气") -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": call_id, "type": "function", "function": {"name": name, "arguments": '{"城市": "北京"}'}}]}


def _result(call_id: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def _turns() -> list[tuple[list[dict[str, Any]], dict[str, Any]]]:
    """A Chinese chat with tool calls, as (what the client adds, the provider's reply) turns;
    the user says "好的" more than once."""
    return [
        ([_user("我上周末去了颐和园，看到了很多荷花。")], _assistant("听起来很美！荷花开得怎么样？")),
        ([_user("开得很好。明天北京天气怎么样？")], _call("call_1")),
        ([_result("call_1", "晴，25°C")], _assistant("明天北京晴，25°C，适合出门。")),
        ([_user("好的")], _assistant("还有什么想问的吗？")),
        ([_user("好的")], _call("call_2")),
        ([_result("call_2", "多云，22°C")], _assistant("后天多云，22°C。")),
        ([_user("谢谢！"), _user("再查一下上海。")], _call("call_3", "查上海天气")),
        ([_result("call_3", "小雨，20°C")], _assistant("上海小雨，20°C，记得带伞。")),
        ([_user("好的")], _assistant("不客气。")),
    ]


def _replay(log: MessageLog, turns: list[tuple[list[dict[str, Any]], dict[str, Any]]],
            window: int, system: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The client's side: each turn it adds its messages and sends the newest ``window`` of
    its chat (behind ``system``); the reply goes into its chat. Returns the whole chat."""
    chat: list[dict[str, Any]] = []
    for added, reply in turns:
        chat += added
        log.turn(([system] if system else []) + chat[-window:], reply)
        chat.append(reply)
    return ([system] if system else []) + chat


# -- sliding windows ---------------------------------------------------------------------------


@pytest.mark.parametrize("window", [2, 3, 4, 6, 100])
def test_sliding_windows_store_a_growing_chat_once(window: int) -> None:
    log = MessageLog()
    chat = _replay(log, _turns(), window)
    assert log.keys() == [_key(m) for m in chat]


@pytest.mark.parametrize("window", [2, 4, 5])
def test_a_window_behind_its_system_prompt_stores_the_prompt_once(window: int) -> None:
    log = MessageLog()
    system = {"role": "system", "content": "你是一个友好的助手。"}
    chat = _replay(log, _turns(), window, system)
    assert log.keys() == [_key(m) for m in chat]
    assert [m.role for m in log.messages].count("system") == 1


@pytest.mark.parametrize("window", [4, 1000])
def test_a_system_prompt_that_changes_every_turn_is_stored_each_time_and_the_chat_once(window: int) -> None:
    """A client that puts the day in its system prompt: each new prompt is stored (before
    the turn's message), and the chat still once, the stored prompts between its messages
    notwithstanding (the tail is read further back for them)."""
    log = MessageLog()
    chat: list[dict[str, Any]] = []
    expected: list[dict[str, Any]] = []
    for i in range(40):
        system = {"role": "system", "content": f"今天是第{i}天。"}
        chat.append(_user(f"问题{i}"))
        log.turn([system, *chat[-window:]], _assistant(f"回答{i}"))
        chat.append(_assistant(f"回答{i}"))
        expected += [system, *chat[-2:]]
    assert log.keys() == [_key(m) for m in expected]


def test_a_window_after_the_first_reply_overlaps_by_that_reply() -> None:
    log = MessageLog()
    log.turn([_user("你好")], _assistant("你好！有什么可以帮你？"))
    match = log.match([_assistant("你好！有什么可以帮你？"), _user("今天天气怎么样？")])
    assert [v.content for v in match.new] == ["今天天气怎么样？"] and match.known == 1


def test_a_repeated_ok_is_a_new_message() -> None:
    """One user message that is the stored one before the reply is a user saying it again,
    not a window: stored (an overlap of one user message does not convince)."""
    log = MessageLog()
    log.turn([_user("帮我订明天的票")], _assistant("订好了。"))
    log.turn([_user("好的")], _assistant("还需要别的吗？"))
    match = log.turn([_user("好的")], _assistant("好。"))
    assert [v.content for v in match.new] == ["好的"] and match.replay is None
    assert [m.content for m in log.messages] == ["帮我订明天的票", "订好了。", "好的", "还需要别的吗？", "好的", "好。"]
    # the same message again while no reply is stored after it is a retry, as before
    log.add([validate_message(_user("在吗？"), max_bytes=LIMIT)])
    retry = log.match([_user("在吗？")])
    assert retry.new == [] and retry.replay is None and retry.through == len(log.messages)


def test_a_window_sent_again_adds_nothing_and_gets_the_stored_reply() -> None:
    log = MessageLog()
    chat = _replay(log, _turns()[:4], 3)
    window = chat[-4:-1]  # the last request: what the client sent before the reply came
    stored = len(log.messages)
    again = log.match(window)
    assert again.new == [] and again.replay is not None and again.replay.content == chat[-1]["content"]
    assert again.through == stored - 1 and again.known == len(window)
    # with the reply not stored (the provider failed), the same window is a retry: nothing new
    bare = MessageLog()
    bare.add([validate_message(m, max_bytes=LIMIT) for m in chat[:-1]])
    retry = bare.match(window)
    assert retry.new == [] and retry.replay is None and retry.through == len(bare.messages)


def test_a_window_of_a_tool_result_replays_the_answer_to_it() -> None:
    log = MessageLog()
    _replay(log, _turns()[:3], 2)
    match = log.match([_result("call_1", "晴，25°C")])  # one tool result: a convincing overlap
    assert match.new == [] and match.replay is not None and match.replay.content == "明天北京晴，25°C，适合出门。"


def test_only_new_messages_are_still_stored_as_they_are() -> None:
    log = MessageLog()
    log.turn([{"role": "system", "content": "简短回答。"}, _user("你好")], _assistant("你好。"))
    match = log.match([{"role": "system", "content": "简短回答。"}, _user("今天星期几？")])
    assert [v.content for v in match.new] == ["今天星期几？"]


def test_a_window_reads_only_the_newest_stored_messages() -> None:
    log = MessageLog()
    chat: list[dict[str, Any]] = []
    for i in range(300):
        chat += [_user(f"问题{i}"), _assistant(f"回答{i}")]
    log.add([validate_message(m, max_bytes=LIMIT) for m in chat])
    log.reads.clear()
    window = [*chat[-3:], _user("新问题")]
    assert [v.content for v in log.match(window).new] == ["新问题"]
    assert sum(last - first + 1 for first, last in log.reads) <= 2 * len(window) + 10
    # stored system prompts among the newest messages: read further back, at most twice as far
    log.add([validate_message({"role": "system", "content": f"提示{i}"}, max_bytes=LIMIT) for i in range(50)])
    log.reads.clear()
    assert len(log.match(window).new) == 4  # its overlap lies beyond that: not looked for
    assert sum(last - first + 1 for first, last in log.reads) <= 5 + 2 * 4 + 8


# -- edited history ------------------------------------------------------------------------------


def test_an_edited_first_message_is_diverged_naming_it() -> None:
    """The tester's case: the first message sent again with a half-width comma, the rest as
    stored: a 409, not the whole chat stored again every turn."""
    log = MessageLog()
    first = "我上周末去了颐和园，看到了很多荷花。"
    log.turn([_user(first)], _assistant("真不错！"))
    log.turn([_user(first), _assistant("真不错！"), _user("你还记得吗？")], _assistant("记得。"))
    before = log.keys()
    edited = [_user(first.replace("，", ",")), _assistant("真不错！"), _user("你还记得吗？"),
              _assistant("记得。"), _user("我看到了什么？")]
    with pytest.raises(Diverged) as caught:
        log.turn(edited, _assistant("荷花。"))
    assert "messages[0]" in str(caught.value) and "#1" in str(caught.value)
    assert "messages[1] is the stored #2" in str(caught.value)
    assert log.keys() == before
    # a request sharing nothing is still the "only new messages" client
    assert [v.content for v in log.match([_user(first.replace("，", ","))]).new] == [first.replace("，", ",")]


def test_an_edited_turn_behind_the_system_prompt_is_diverged() -> None:
    log = MessageLog()
    chat = _replay(log, _turns()[:3], 100, {"role": "system", "content": "你是助手。"})
    edited = [{"role": "system", "content": "你是助手。"}, _user("我上周末去了香山。"), *chat[2:], _user("然后呢？")]
    with pytest.raises(Diverged, match=r"messages\[1\]"):
        log.match(edited)


# -- properties ----------------------------------------------------------------------------------

_SAID = st.sampled_from(["ok", "好的", "继续", "why?", "嗯"])


@st.composite
def _chats(draw: st.DrawFn) -> tuple[int, dict[str, Any] | None, list[tuple[list[dict[str, Any]], dict[str, Any]]]]:
    """A window width, maybe a system prompt, and turns: 1 to (window - 1) client messages
    (user messages from a few words that repeat, tool results), then a reply. The replies
    differ from each other, as a model's do: a chat that repeats a reply word for word
    (and the user's words around it) cannot tell a window from a retry."""
    window = draw(st.integers(2, 7))
    system = draw(st.sampled_from([None, {"role": "system", "content": "你是助手。"}]))
    turns = []
    last_call: str | None = None
    for t in range(draw(st.integers(1, 14))):
        added = []
        for _ in range(draw(st.integers(1, min(3, window - 1)))):
            if last_call is not None and draw(st.booleans()):
                added.append(_result(last_call, draw(_SAID)))
            else:
                added.append(_user(draw(_SAID)))
        last_call = None
        if draw(st.booleans()):
            last_call = f"call_{t}"
            reply = _call(last_call)
        else:
            reply = _assistant(f"回答 {t}")
        turns.append((added, reply))
    return window, system, turns


@settings(max_examples=300)
@given(_chats())
def test_sliding_windows_store_any_chat_once_in_order(
        case: tuple[int, dict[str, Any] | None, list[tuple[list[dict[str, Any]], dict[str, Any]]]]) -> None:
    window, system, turns = case
    log = MessageLog()
    chat = _replay(log, turns, window, system)
    assert log.keys() == [_key(m) for m in chat]


@given(st.lists(st.sampled_from("ab"), max_size=12), st.lists(st.sampled_from("ab"), max_size=12))
def test_overlap_is_the_longest_stored_suffix_the_request_starts_with(stored: list[str], request: list[str]) -> None:
    longest = max(size for size in range(min(len(stored), len(request)) + 1)
                  if stored[len(stored) - size:] == request[:size])
    assert _overlap(stored, request) == longest


# -- end to end ----------------------------------------------------------------------------------


def _chat(proxy: str, cid: str, messages: list[dict[str, Any]]) -> httpx.Response:
    return httpx.post(f"{proxy}/v1/chat/completions", json={"model": MODEL, "messages": messages},
                      headers={"X-Lossless-Conversation": cid}, timeout=30)


def test_a_client_sending_its_last_four_messages_is_stored_once(proxy: str, memory: lossless.Memory,
                                                                fake_openai: FakeOpenAIServer) -> None:
    chat: list[dict[str, Any]] = []
    for i in range(8):
        chat.append(_user(f"问题{i}：今天天气怎么样？"))
        fake_openai.enqueue_chat(f"第{i}次回答：晴，{20 + i}°C。")
        response = _chat(proxy, "slide", chat[-4:])
        assert response.status_code == 200, response.text
        chat.append(response.json()["choices"][0]["message"])
    stored = memory.conversation("slide").messages()
    assert [(m.role, m.content) for m in stored] == [(m["role"], m["content"]) for m in chat]
    assert len(stored) == 16
    asked = [m.get("content") for m in fake_openai.chat_requests()[-1].body["messages"] if m["role"] == "user"]
    assert asked[-1] == "问题7：今天天气怎么样？" and len(asked) == len(set(asked))


def test_an_edited_first_turn_over_the_proxy_is_409(proxy: str, memory: lossless.Memory,
                                                    fake_openai: FakeOpenAIServer) -> None:
    first = "我上周末去了颐和园，看到了很多荷花。"
    fake_openai.enqueue_chat("真不错！")
    assert _chat(proxy, "edit", [_user(first)]).status_code == 200
    edited = [_user(first.replace("，", ",")), _assistant("真不错！"), _user("我看到了什么？")]
    response = _chat(proxy, "edit", edited)
    assert response.status_code == 409 and response.json()["error"]["type"] == "conversation_diverged"
    assert "messages[0]" in response.json()["error"]["message"]
    assert [m.content for m in memory.conversation("edit").messages()] == [first, "真不错！"]


def test_a_turn_the_provider_refused_does_not_lock_the_conversation() -> None:
    """The user's message is stored before the provider is called; when the provider
    refuses it (a content filter, a 400) there is no reply, and the client sends its
    question again rephrased. That was a 409 forever: the conversation could not go on."""
    log = MessageLog()
    first = [_user("我上周末去了颐和园。"), _assistant("真不错！")]
    log.add([validate_message(m, max_bytes=LIMIT) for m in [*first, _user("那里的荷花为什么这么红？")]])
    rephrased = [*first, _user("颐和园的荷花是什么颜色的？")]  # (the first was refused: no reply)
    match = log.turn(rephrased, _assistant("是粉红色的。"))
    assert [m.content for m in match.new] == ["颐和园的荷花是什么颜色的？"] and match.known == 2
    assert [m.content for m in log.messages][-2:] == ["颐和园的荷花是什么颜色的？", "是粉红色的。"]
    # answered now: an edit of the answered turn is still a 409, as is an edit further back
    with pytest.raises(Diverged):
        log.match([*first, _user("颐和园的荷花是什么颜色的？！")])
    with pytest.raises(Diverged):
        log.match([_user("我上周末去了颐和园!"), _assistant("真不错！"), _user("还有呢？")])
    # the same question sent again after the refusal is a retry: nothing stored twice
    again = MessageLog()
    again.add([validate_message(m, max_bytes=LIMIT) for m in [*first, _user("那里的荷花为什么这么红？")]])
    assert again.match([*first, _user("那里的荷花为什么这么红？")]).new == []


def test_a_refused_turn_over_the_proxy_can_be_asked_again(proxy: str, memory: lossless.Memory,
                                                          fake_openai: FakeOpenAIServer) -> None:
    first = [_user("我上周末去了颐和园。")]
    fake_openai.enqueue_chat("真不错！")
    assert _chat(proxy, "refused", first).status_code == 200
    chat = [*first, _assistant("真不错！")]
    fake_openai.fail_next(1, status=400, message="content filter")
    assert _chat(proxy, "refused", [*chat, _user("那里的荷花为什么这么红？")]).status_code == 400
    fake_openai.enqueue_chat("是粉红色的。")
    again = _chat(proxy, "refused", [*chat, _user("颐和园的荷花是什么颜色的？")])
    assert again.status_code == 200, again.text
    assert [m.content for m in memory.conversation("refused").messages()] == [
        "我上周末去了颐和园。", "真不错！", "那里的荷花为什么这么红？", "颐和园的荷花是什么颜色的？", "是粉红色的。"]
