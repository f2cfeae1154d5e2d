"""Issue 19: recall fills the room it has (depth follows the room, neighbours of a match,
room left to whoever can use it), and the whole-window (cache-stable) layout keeps its
prefix byte-identical while giving the question room."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lossless
from lossless.context import DYNAMIC_HEADER
from lossless.core.tokens import count_chat_tokens, get_counter

from .conftest import T0, chat

PROPS = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
PEOPLE = ("Caroline", "Melanie")
TOPICS = ("pottery", "hiking", "painting", "adoption", "camping", "guitar", "the museum", "a charity run")


def _casual(n: int, *, planted: dict[int, str] | None = None) -> list[dict[str, Any]]:
    """Short turns between two named people, a few minutes apart, days between sessions."""
    out = []
    for i in range(n):
        who = PEOPLE[i % 2]
        text = (planted or {}).get(i) or f"{who} here: I keep thinking about {TOPICS[i % len(TOPICS)]}, day {i // 6}."
        out.append({"role": "user" if i % 2 == 0 else "assistant", "name": who, "content": text,
                    "created_at": T0 + timedelta(days=i // 6, minutes=i)})
    return out


def _prefix(messages: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """What comes before the question's block: the cache-stable prefix (None without a block)."""
    for i, m in enumerate(messages):
        if m["role"] == "system" and str(m["content"]).startswith(DYNAMIC_HEADER):
            return messages[:i]
    return None


def _share_the_prefix(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> None:
    """Whichever context has a question block, what precedes it starts the other one too
    (a context without a block holds nothing question-dependent, so it must then equal the
    other one up to that point)."""
    pa, pb = _prefix(a), _prefix(b)
    if pa is not None:
        assert b[: len(pa)] == pa
    if pb is not None:
        assert a[: len(pb)] == pb


def _recall_tokens(ctx: lossless.AssembledContext) -> int:
    return ctx.tier_tokens().get("recall", 0)


def test_depth_follows_the_room() -> None:
    """More matches than the old fixed depth (60) are recalled when the room holds them."""
    planted = {i: f"Caroline: the lighthouse trip number {i} was lovely." for i in range(0, 600, 4)}
    mem = lossless.open(":memory:", embedder=None, context_window=8192, compaction="inline")
    conv = mem.conversation("c")
    conv.add_many(_casual(700, planted=planted))
    ctx = conv.assemble(budget_tokens=8000, query="lighthouse trip")
    recalled = [i for i in ctx.items if i.tier == "recall"]
    assert len(recalled) > 60 and ctx.tokens <= 8000
    small = conv.assemble(budget_tokens=1000, query="lighthouse trip")
    assert small.tokens <= 1000 and 0 < len([i for i in small.items if i.tier == "recall"]) < len(recalled)
    mem.close()


def test_a_match_brings_its_short_neighbours() -> None:
    """The reply to a matched question (and the question a matched reply answers) come along."""
    planted = {40: "Melanie: what did you name the new puppy?", 41: "Caroline: Biscuit, after the cookie!"}
    mem = lossless.open(":memory:", embedder=None, context_window=8192, compaction="inline")
    conv = mem.conversation("c")
    conv.add_many(_casual(400, planted=planted))
    text = "\n".join(str(m["content"]) for m in conv.assemble(budget_tokens=2000, query="new puppy name").messages)
    assert "what did you name the new puppy" in text and "Biscuit" in text
    mem.close()


def test_with_a_question_the_room_summaries_leave_goes_to_recall_not_older_tail() -> None:
    """The summaries' and the root's shares, when they cannot use them, go to the matches
    for the question before the tail grows past its own share; the tail takes what
    recall leaves, and nothing is shown twice."""
    planted = {i: f"Caroline: the lighthouse trip number {i} was lovely." for i in range(0, 600, 4)}
    mem = lossless.open(":memory:", embedder=None, context_window=8192, compaction="inline")
    conv = mem.conversation("c")
    conv.add_many(_casual(700, planted=planted))
    budget = 1000
    ctx = conv.assemble(budget_tokens=budget, query="lighthouse trip")
    tiers = ctx.tier_tokens()
    # more matches than fit: the tail stays at its share (the newest turn is one short message)
    assert tiers.get("fresh_tail", 0) <= int(budget * mem.config.tail_share) + 40
    assert tiers["recall"] > 0.6 * budget
    ids = [i.ref for i in ctx.items]
    assert len(ids) == len(set(ids))
    # a question nothing matches: the summaries and the tail grow into the room recall left
    none = conv.assemble(budget_tokens=budget, query="zyzzyva quux")
    assert none.tier_tokens().get("recall", 0) == 0
    grown = none.tier_tokens()["fresh_tail"] + none.tier_tokens().get("summary", 0)  # (the root is placed first)
    assert grown > budget * (mem.config.tail_share + mem.config.summaries_share) and none.tokens > 0.8 * budget
    mem.close()


def test_the_whole_window_gives_the_question_room() -> None:
    """At window = budget the question's block may take far more than 10 % of the window
    when it has matches, and the prefix stays the same for another question."""
    planted = {i: f"Caroline: my pottery class {i} made a blue bowl with a glaze." for i in range(10, 300, 7)}
    mem = lossless.open(":memory:", embedder=None, context_window=4096, compaction="inline")
    conv = mem.conversation("c")
    conv.add_many(_casual(320, planted=planted))
    assert conv.summaries()
    a = conv.assemble(query="pottery class blue bowl glaze")
    b = conv.assemble(query="what about hiking and camping?")
    assert a.tokens <= 4096 and b.tokens <= 4096
    assert _recall_tokens(a) > 0.3 * 4096
    assert _prefix(a.messages) == _prefix(b.messages) and _prefix(a.messages)
    mem.close()


@pytest.mark.parametrize("rounds", [0, 1])
def test_a_second_round_follows_what_the_first_match_names(rounds: int) -> None:
    """Multi-hop: the question names a city, the message that answers it names only the
    relative who lives there. A second keyword round with the first match's words finds
    it; one round does not."""
    planted = {40: "Caroline: my sister-in-law lives in Porto now, the rent there is wild",
               160: "Caroline: my sister-in-law got hired as a welder, finally!"}
    mem = lossless.open(":memory:", embedder=None, context_window=8192, compaction="inline",
                        recall_second_round=rounds)
    conv = mem.conversation("c")
    conv.add_many(_casual(320, planted=planted))
    ctx = conv.assemble(budget_tokens=2048, query="What does the person who lives in Porto do for work?")
    recalled = [str(m.get("content", "")) for m in ctx.messages]
    assert any("lives in Porto" in c for c in recalled)
    assert any("hired as a welder" in c for c in recalled) == (rounds == 1)
    mem.close()


@pytest.mark.parametrize("window", [1024, 2048])
def test_a_window_too_small_to_cache_gives_the_question_the_budgeted_room(window: int) -> None:
    """At window = budget below what a provider caches ((1 - dynamic_share) of the window
    under ``cache_min_prefix``), a question gets the same context as the budgeted layout
    gives it, not a fixed prefix that no cache would hold; ``cache_min_prefix=0`` keeps
    the fixed prefix."""
    planted = {i: f"Caroline: my pottery class {i} made a blue bowl with a glaze." for i in range(10, 300, 7)}
    contexts = {}
    for name, extra in (("auto", {}), ("budgeted", {"cache_stable": False}), ("forced", {"cache_min_prefix": 0})):
        mem = lossless.open(":memory:", embedder=None, context_window=window, compaction="inline", **extra)
        conv = mem.conversation("c")
        conv.add_many(_casual(320, planted=planted))
        contexts[name] = conv.assemble(query="pottery class blue bowl glaze")
        mem.close()
    assert contexts["auto"].messages == contexts["budgeted"].messages
    assert _recall_tokens(contexts["auto"]) > _recall_tokens(contexts["forced"])
    assert any(str(m.get("content", "")).startswith(DYNAMIC_HEADER) for m in contexts["forced"].messages)


@PROPS
@given(window=st.sampled_from([256, 512, 1024, 4096]), n=st.integers(min_value=1, max_value=160),
       over=st.sampled_from([0, 0, 1, 500]), tools=st.sampled_from([0, 3]),
       query=st.sampled_from([None, "", "pottery", "port 5012 service-12", "Caroline's guitar"]),
       words=st.sampled_from([2, 20, 200]))
def test_never_over_the_budget_at_any_window(window: int, n: int, over: int, tools: int, query: str | None,
                                             words: int) -> None:
    mem = lossless.open(":memory:", embedder=None, context_window=window, compaction="inline")
    conv = mem.conversation("c")
    conv.add("system", "You are a helpful assistant.")
    conv.add_many(chat(n, words=words, tools_every=tools))
    for budget in (window, window + over, max(1, window // 3)):
        ctx = conv.assemble(budget_tokens=budget, query=query)
        assert ctx.tokens <= budget
        assert ctx.tokens == count_chat_tokens(get_counter("cl100k_base"), ctx.messages)
        open_calls: set[str] = set()
        for m in ctx.messages:  # never a tool result without its call
            if m.get("tool_calls"):
                open_calls = {c["id"] for c in m["tool_calls"]}
            elif m["role"] == "tool":
                assert m["tool_call_id"] in open_calls
            else:
                open_calls = set()
    mem.close()


@PROPS
@given(window=st.sampled_from([2048, 4096]), n=st.integers(min_value=4, max_value=120),
       words=st.sampled_from([5, 30]), queries=st.lists(st.sampled_from(
           ["service-3 port", "latency", "what did we decide?", "Maya", "deploy"]), min_size=2, max_size=2))
def test_the_whole_window_prefix_is_byte_identical_across_questions_and_turns(
        window: int, n: int, words: int, queries: list[str]) -> None:
    """Two questions on the same history: the same prefix; one more message (no
    compaction in between): the old prefix starts the new context. (Short messages, so
    the summaries and the newest turn always fit and the cache-stable layout applies.)"""
    mem = lossless.open(":memory:", embedder=None, context_window=window, compaction="inline")
    conv = mem.conversation("c")
    conv.add("system", "You are a helpful assistant.")
    conv.add_many(chat(n, words=words))
    first = conv.assemble(query=queries[0])
    second = conv.assemble(query=queries[1])
    if len(first.messages) > 1 and any(m["role"] == "user" for m in first.messages):
        _share_the_prefix(first.messages, second.messages)
    compactions = len(conv.compaction_log())
    conv.add("user", f"one more question about {queries[1]}", created_at=T0 + timedelta(days=9))
    later = conv.assemble(query=queries[1])
    if len(conv.compaction_log()) == compactions and any(m["role"] == "user" for m in first.messages):
        prefix = _prefix(first.messages)  # the old prefix starts the new context (it may grow)
        if prefix is not None:
            assert later.messages[: len(prefix)] == prefix
    mem.close()


@pytest.mark.model
def test_with_the_real_model_a_paraphrase_is_recalled_into_the_context(monkeypatch: pytest.MonkeyPatch) -> None:
    """The configuration users run with the embeddings extra: the local MiniLM, the
    background worker, the default recall settings. A question that shares no word with
    the planted message still brings it into a small budget, whole, exactly once."""
    from lossless.embed.local import LocalEmbedder

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    planted = {37: "Melanie: my automobile broke down on the highway, so I took the bus to work."}
    with lossless.open(":memory:", embedder=LocalEmbedder(), context_window=8192) as mem:
        conv = mem.conversation("c")
        conv.add_many(_casual(400, planted=planted))
        assert mem.wait_idle(120)
        ctx = conv.assemble(budget_tokens=1000, query="Did her car stop working at some point?")
        recalled = [i for i in ctx.items if i.tier == "recall"]
        assert ctx.tokens <= 1000 and recalled
        text = "\n".join(str(m["content"]) for m in ctx.messages)
        assert planted[37].split(": ", 1)[1] in text
        refs = [i.ref for i in ctx.items]
        assert len(refs) == len(set(refs))
