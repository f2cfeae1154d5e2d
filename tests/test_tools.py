"""Agent tools: schemas, dispatch in both wire formats, scoping."""

from __future__ import annotations

import json

import jsonschema
import pytest

import lossless
from lossless.agent.tools import TOOL_NAMES, anthropic_tools, openai_tools
from lossless.testing import HashEmbedder

from .conftest import StoreTarget, chat


def _compacted(mem: lossless.Memory, cid: str = "t") -> lossless.Conversation:
    conv = mem.conversation(cid)
    conv.add_many(chat(80, tools_every=5))
    conv.compact(full=True)
    return conv


def test_schemas_are_valid_json_schema() -> None:
    for tool in openai_tools():
        jsonschema.Draft202012Validator.check_schema(tool["function"]["parameters"])
        assert tool["type"] == "function" and tool["function"]["name"] in TOOL_NAMES
    for tool in anthropic_tools():
        jsonschema.Draft202012Validator.check_schema(tool["input_schema"])


def test_dispatch_openai_and_anthropic(mem: lossless.Memory) -> None:
    conv = _compacted(mem)
    box = conv.tools
    leaf = next(s for s in conv.summaries() if s.depth == 0)
    reply = box.dispatch({"id": "call_1", "type": "function",
                          "function": {"name": "lcm_expand", "arguments": json.dumps({"id": leaf.id})}})
    assert reply["role"] == "tool" and reply["tool_call_id"] == "call_1"
    body = json.loads(reply["content"])
    assert [i["seq"] for i in body["items"]] == list(range(leaf.first_seq, leaf.last_seq + 1))
    block = box.dispatch({"type": "tool_use", "id": "tu_1", "name": "lcm_grep", "input": {"query": "service-3"}})
    assert block["type"] == "tool_result" and block["tool_use_id"] == "tu_1" and "is_error" not in block
    assert json.loads(block["content"])["count"] >= 1
    bad = box.dispatch({"type": "tool_use", "id": "tu_2", "name": "lcm_describe", "input": {"id": "sum_nope"}})
    assert bad["is_error"] is True and "sum_nope" in bad["content"]
    bad_args = box.dispatch({"id": "c", "function": {"name": "lcm_grep", "arguments": "{not json"}})
    assert "not valid JSON" in bad_args["content"]
    unknown = box.dispatch({"id": "c", "function": {"name": "rm_rf", "arguments": "{}"}})
    assert "unknown tool" in unknown["content"]


def test_describe_shows_sources_and_parent(mem: lossless.Memory) -> None:
    conv = _compacted(mem)
    top = conv.frontier()[0]
    info = conv.describe(top.id)
    assert info["depth"] == top.depth and info["parent"] is None
    assert info["children"][0]["first_seq"] == top.first_seq
    child = conv.describe(info["children"][0]["id"])
    assert child["parent"] == top.id
    msg = conv.describe(conv.messages()[0].id)
    assert msg["summarized_in"] is not None


def test_expand_pages_under_a_token_cap(mem: lossless.Memory) -> None:
    conv = _compacted(mem)
    top = conv.frontier()[0]
    seen: list[int] = []
    page = conv.expand(top.id, max_tokens=200)
    while True:
        assert page["tokens"] <= 200 or len(page["items"]) == 1
        seen += [i["seq"] for i in page["items"]]
        if not page["truncated"]:
            break
        page = conv.expand(top.id, max_tokens=200, from_seq=page["next_from_seq"])
    assert seen == list(range(top.first_seq, top.last_seq + 1))
    sources = conv.expand(top.id, to="sources", max_tokens=10**6)
    assert all(i["kind"] == "summary" for i in sources["items"])


def test_tools_are_scoped_to_their_conversation(mem: lossless.Memory) -> None:
    a = _compacted(mem, "a")
    b = _compacted(mem, "b")
    other = b.summaries()[0].id
    reply = a.tools.dispatch({"id": "x", "function": {"name": "lcm_expand", "arguments": json.dumps({"id": other})}})
    assert "error" in json.loads(reply["content"])
    hits = a.grep("service")["hits"]
    assert hits and {h["conversation_id"] for h in hits} == {"a"}


def _chinese_chat(n: int) -> list[dict[str, str]]:
    return [{"role": "user" if i % 2 == 0 else "assistant",
             "content": f"第{i}条：今天和小美去公园散步，然后看了电影《流浪地球》，喝了一杯拿铁咖啡。"} for i in range(n)]


def test_expand_sources_reads_a_cut_source_by_its_id_and_reaches_each_source_once(
        store_target: StoreTarget) -> None:
    """A source summary over the budget comes back cut (partial); its rest is read by its own
    id from next_offset, and next_from_seq goes on after it: followed, the pages give every
    source once and whole, under every budget."""
    with lossless.open(store_target("cut"), context_window=2048, compaction="inline", embedder=None) as mem:
        conv = mem.conversation("zh")
        conv.add_many(_chinese_chat(300))
        tops = [s for s in conv.summaries() if s.depth >= 1]
        assert tops
        for top in tops:
            for budget in (1, 7, 20, 60, 10**6):
                seen: list[str] = []
                page = conv.tools.lcm_expand(top.id, to="sources", max_tokens=budget)
                while True:
                    for item in page["items"]:
                        text = item["content"]
                        following = item.get("next_offset") if item.get("partial") else None
                        while following is not None:
                            rest = conv.tools.lcm_expand(item["id"], offset=following, max_tokens=budget)
                            assert rest["kind"] == "summary" and rest["offset"] == following
                            assert rest["tokens"] <= budget or rest["chars"] == 1
                            text += rest["content"]
                            following = rest["next_offset"]
                        assert text == mem.store.get_summary(item["id"]).content
                        seen.append(item["id"])
                    if page["next_from_seq"] is None:
                        break
                    assert page["truncated"]
                    page = conv.tools.lcm_expand(top.id, to="sources", max_tokens=budget,
                                                 from_seq=page["next_from_seq"])
                assert seen == [ref.id for ref in top.sources], (top.id, budget)


def test_a_summary_reads_its_own_text_in_slices(mem: lossless.Memory) -> None:
    conv = _compacted(mem)
    top = conv.frontier()[0]
    text = top.content
    paged = [conv.tools.lcm_expand(top.id, page=n, max_chars=40) for n in range(1, -(-len(text) // 40) + 1)]
    assert "".join(p["content"] for p in paged) == text and paged[-1]["next_offset"] is None
    assert conv.tools.lcm_expand(top.id, offset=0, max_chars=10**6)["content"] == text
    reply = conv.tools.dispatch({"type": "tool_use", "id": "t", "name": "lcm_expand",
                                "input": {"id": top.id, "offset": 3, "from_seq": top.first_seq}})
    assert reply.get("is_error") is True and "give one or the other" in reply["content"]
    # without offset, max_chars or page a summary still expands to what it covers
    assert "items" in conv.tools.lcm_expand(top.id)


def test_a_message_number_the_context_shows_reads_that_message(store_target: StoreTarget) -> None:
    """The context names messages by number ("#12 user: …", "[abridged by lossless: #12,
    …]"), and the tools took only msg_… ids: lcm_expand("#12"), how a model reads the rest
    of an abridged message, answered "'#12' is not a summary (sum_…) or message (msg_…) id"."""
    long = "".join(f"第{i}段：我们讨论了公园、咖啡和医生的事情。\n" for i in range(300))
    with lossless.open(store_target("numbers"), embedder=None) as mem:
        conv = mem.conversation("c")
        conv.add_many([*({"role": ("user", "assistant")[i % 2], "content": f"第{i}条消息"} for i in range(11)),
                       {"role": "user", "content": long}])
        shown = str(conv.assemble(budget_tokens=200).messages[-1]["content"])
        assert "[abridged by lossless: #12," in shown
        box = conv.tools
        parts, offset = [], 0
        while offset is not None:
            reply = box.dispatch({"id": "c1", "type": "function", "function": {
                "name": "lcm_expand", "arguments": json.dumps({"id": "#12", "offset": offset, "max_tokens": 500})}})
            body = json.loads(reply["content"])
            assert "error" not in body, body
            parts.append(body["content"])
            offset = body["next_offset"]
        assert "".join(parts) == long
        assert box.lcm_describe("#1")["id"] == conv.messages()[0].id
        # as a Chinese input method types it: a full-width number sign, full-width digits
        assert box.lcm_describe("＃2")["id"] == box.lcm_describe("#２")["id"] == conv.messages()[1].id
        reply = box.dispatch({"type": "tool_use", "id": "t", "name": "lcm_describe", "input": {"id": "第2条"}})
        assert reply.get("is_error") and "#N" in reply["content"]
        for wrong in ("#13", "#0"):
            reply = box.dispatch({"type": "tool_use", "id": "t", "name": "lcm_describe", "input": {"id": wrong}})
            assert reply.get("is_error") and "no message" in reply["content"]
        # a ToolBox over many conversations has no one message #1
        reply = mem.tools(None).dispatch({"type": "tool_use", "id": "t", "name": "lcm_describe", "input": {"id": "#1"}})
        assert reply.get("is_error") and "msg_" in reply["content"]


def test_an_assistant_tool_call_message_is_read_with_its_calls(store_target: StoreTarget) -> None:
    """lcm_expand of an assistant message that only calls tools read "" (its content), so
    the call's arguments were out of the model's reach; one too long for max_tokens read
    "" in every slice. Its text is now the calls as the tools render them, paged exactly."""
    args = json.dumps({"城市": "北京", "notes": "晴" * 3000}, ensure_ascii=False)
    with lossless.open(store_target("calls"), embedder=None) as mem:
        conv = mem.conversation("c")
        conv.add_many([{"role": "user", "content": "北京天气怎么样？"},
                       {"role": "assistant", "content": "",
                        "tool_calls": [{"id": "call_1", "type": "function",
                                        "function": {"name": "查天气", "arguments": args}}]},
                       {"role": "tool", "content": "晴，25度", "tool_call_id": "call_1"}])
        call = conv.messages()[1]
        box = conv.tools
        parts, offset = [], 0
        while offset is not None:
            body = box.lcm_expand(call.id, offset=offset, max_tokens=400)
            assert body["text_source"] == "tool_calls" and body["content"], body
            parts.append(body["content"])
            offset = body["next_offset"]
        assert "".join(parts) == f"→ tool_call 查天气({args})"
        # a message without calls reads as stored
        assert box.lcm_expand(conv.messages()[2].id)["text_source"] == "content"


def test_lcm_grep_takes_the_modes_its_schema_lists_and_no_other(store_target: StoreTarget,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """The schema never offered mode 'raw' (nor does MCP, nor /openapi.json's LcmGrep), yet
    the tool took it, from a model's tool call and over HTTP: FTS5 syntax over unicode61 words
    and CJK bigrams, where '颐和园' finds nothing of '明天去颐和园开会' (a run of Chinese is one
    word). Raw syntax stays the operator's: search(mode="raw") and `lossless grep --raw`."""
    from lossless.cli.main import main

    db = store_target("g")
    with lossless.open(db, embedder=HashEmbedder()) as mem:
        conv = mem.conversation("会议记录")
        conv.add("user", "明天去颐和园开会，讨论预算。")
        conv.add("user", "Meeting at the Summer Palace tomorrow to discuss the budget.")
        modes = openai_tools()[0]["function"]["parameters"]["properties"]["mode"]["enum"]
        assert modes == ["fts", "regex", "semantic", "hybrid"]
        for mode in modes:  # each one it lists, it takes
            conv.grep("预算" if mode != "regex" else "预.", mode=mode)
        assert conv.grep("颐和园")["count"] == 1 and conv.grep("budget")["count"] == 1
        with pytest.raises(lossless.ValidationError, match=r"fts, regex, semantic, hybrid; got 'raw'"):
            conv.grep("颐和园", mode="raw")
        reply = conv.tools.dispatch({"id": "c", "function": {"name": "lcm_grep",
                                                             "arguments": json.dumps({"query": "颐和园", "mode": "raw"})}})
        assert "got 'raw'" in json.loads(reply["content"])["error"]
        assert [h.snippet for h in conv.search('"budget"', mode="raw")] != []  # the search API reads it
    # the CLI's --raw goes through the search: the same hits it always gave
    # (raw is the store's own syntax: FTS5's on SQLite, a tsquery on PostgreSQL)
    both = "discuss & budget" if str(db).startswith("postgresql") else "discuss AND budget"
    for query, found in (("budget", 1), (both, 1), ("预算", 1), ("颐和园", 0)):
        capsys.readouterr()
        assert main(["--db", str(db), "--json", "grep", "会议记录", query, "--raw"]) == 0
        assert json.loads(capsys.readouterr().out)["count"] == found, query
    malformed = "budget & (" if str(db).startswith("postgresql") else "budget AND ("
    assert main(["--db", str(db), "grep", "会议记录", malformed, "--raw"]) == 1  # malformed: a clear error
    assert "invalid full-text query" in capsys.readouterr().err
