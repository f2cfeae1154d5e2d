"""Importers: every format on its sample, idempotency, streaming, and bad input."""

from __future__ import annotations

import io
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lossless
from lossless.core.errors import ValidationError
from lossless.importers import (
    FORMATS,
    ImportReport,
    Problem,
    detect,
    import_file,
    import_stream,
    jsonstream,
)
from lossless.importers.base import HEAD_BYTES
from lossless.importers.jsonstream import JsonStreamError, iter_document
from tests.conftest import StoreTarget

DATA = Path(__file__).parent / "data" / "import"
CODEX = DATA / "rollout-2025-05-07T17-24-21-5973b6c0-94b8-487b-a530-2aeb6098ae0e.jsonl"
CLAUDE_SESSION = "claude-code:3f1e9c2a-7b7d-4c1e-9a51-2d0c6f8e4b10"


def _imp(mem: lossless.Memory, path: Path | str, **kwargs: Any) -> tuple[ImportReport, list[Problem]]:
    problems: list[Problem] = []
    report = import_file(mem, path, on_problem=problems.append, **kwargs)
    return report, problems


def _seq(mem: lossless.Memory, conversation: str) -> list[tuple[str, Any]]:
    return [(m.role, m.content) for m in mem.conversation(conversation).messages()]


@pytest.mark.parametrize(("name", "fmt"), [
    ("openai.jsonl", "openai"), ("openai.json", "openai"), ("anthropic.json", "anthropic"),
    ("anthropic.jsonl", "anthropic"), ("claude_code.jsonl", "claude-code"), (CODEX.name, "codex"),
    ("conversations.json", "chatgpt"), ("ses_7Hq2.json5", "openclaw"), ("transcript.md", "text"),
])
def test_detect_each_sample_by_path_and_by_bytes(name: str, fmt: str, tmp_path: Path) -> None:
    assert detect(DATA / name) == fmt
    anonymous = tmp_path / "upload.bin"  # content alone, no helpful file name
    shutil.copy(DATA / name, anonymous)
    assert detect(anonymous) == fmt  # a .json5 file too: its comments give it away
    assert detect((DATA / name).read_bytes(), name=name) == fmt


def test_a_json5_session_that_starts_with_a_comment_is_detected(mem: lossless.Memory, tmp_path: Path) -> None:
    """A comment before the first brace (as OpenClaw's own files have) was read as text:
    "cannot tell the format", though JSON5 comments are what only OpenClaw's reader takes."""
    path = tmp_path / "会话abc.json"  # the sessions folder's name, not .json5: the content decides
    path.write_text('// OpenClaw 会话\n/* 备注 */\n{\n  "sessionId": "会话abc", // 标识\n  "messages": [\n'
                    '    {"role": "user", "content": "帮我查一下天气 🌦",},\n'
                    '    {"role": "assistant", "content": "上海今天多云，22°C。"},\n  ],\n}\n', encoding="utf-8")
    assert detect(path) == "openclaw"
    report, problems = _imp(mem, path)
    assert not problems and dict(report.added) == {"openclaw:会话abc": 2}
    assert _seq(mem, "openclaw:会话abc") == [("user", "帮我查一下天气 🌦"), ("assistant", "上海今天多云，22°C。")]
    # a transcript that merely starts with a comment-like line is still text
    (tmp_path / "notes.bin").write_text("// 笔记\n用户：你好\n助手：你好！\n", encoding="utf-8")
    assert detect(tmp_path / "notes.bin") == "text"


def test_detect_refuses_what_it_cannot_tell(tmp_path: Path) -> None:
    (tmp_path / "x.bin").write_bytes(b"\x00\x01 binary")
    with pytest.raises(ValidationError, match=r"cannot tell the format of .*x\.bin.*--format"):
        detect(tmp_path / "x.bin")
    # empty, or blank: whatever the name (an empty .txt or .md was "imported 0 messages", exit 0)
    for name, data in (("empty.jsonl", b""), ("空的.txt", b""), ("blank.md", b"\xef\xbb\xbf\r\n  \n"),
                       ("conversations.json", b"\n")):
        (tmp_path / name).write_bytes(data)
        with pytest.raises(ValidationError, match="is empty: nothing to import"):
            detect(tmp_path / name)
    with pytest.raises(ValidationError, match="is a directory"):
        detect(tmp_path)
    assert set(FORMATS) == {"openai", "anthropic", "claude-code", "codex", "chatgpt", "openclaw", "text"}


def test_openai_jsonl_sample_keeps_every_field_and_reimports_nothing(mem: lossless.Memory) -> None:
    report, problems = _imp(mem, DATA / "openai.jsonl")
    assert not problems and report.format == "openai" and dict(report.added) == {"support-42": 5}
    msgs = mem.conversation("support-42").messages()
    assert [m.role for m in msgs] == ["system", "user", "assistant", "tool", "assistant"]
    assert msgs[1].name == "maya" and isinstance(msgs[1].content, list)
    assert msgs[1].content[1] == {"type": "image_url", "image_url": {"url": "https://example.com/label.png"}}
    assert msgs[2].content is None and msgs[2].tool_calls[0]["function"]["name"] == "lookup_van"
    assert msgs[3].tool_call_id == "call_1" and msgs[4].metadata == {"model": "gpt-4o"}
    assert [m.external_id for m in msgs] == ["m1", "m2", "m3", "m4", "m5"]
    again, _ = _imp(mem, DATA / "openai.jsonl")
    assert sum(again.added.values()) == 0 and again.already_stored == 5


def test_openai_json_document(mem: lossless.Memory) -> None:
    report, problems = _imp(mem, DATA / "openai.json")
    assert not problems and dict(report.added) == {"planning": 2}
    assert mem.conversation("planning").info.metadata == {"project": "atlas"}
    arr = json.dumps([{"conversation": "arr", "role": "user", "content": "hi"},
                      {"conversation": "arr", "role": "assistant", "content": "hello"}], indent=1).encode()
    report = import_stream(mem, io.BytesIO(arr), name="arr.json")
    assert dict(report.added) == {"arr": 2}


def test_anthropic_request_blocks_become_openai_messages(mem: lossless.Memory) -> None:
    report, problems = _imp(mem, DATA / "anthropic.json")
    assert not problems and dict(report.added) == {"anthropic:anthropic": 6}
    msgs = mem.conversation("anthropic:anthropic").messages()
    assert [m.role for m in msgs] == ["system", "user", "assistant", "tool", "user", "assistant"]
    assert msgs[0].content == "You are a careful SRE."
    assert msgs[1].content == [{"type": "text", "text": "Why is the disk full on db-2?"},
                               {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]
    reply = msgs[2]
    assert reply.content == "Let me look at the biggest directories."
    assert reply.tool_calls == ({"id": "toolu_01", "type": "function", "function": {
        "name": "bash", "arguments": '{"command": "du -sh /var/* | sort -h | tail -3"}'}},)
    assert reply.metadata["thinking"][0]["thinking"].startswith("I should check")
    assert msgs[3].tool_call_id == "toolu_01" and msgs[3].content == "12G /var/log\n40G /var/lib"
    assert msgs[4].content == "Is it the WAL?"  # the text after the tool result, as its own message
    assert len({m.external_id for m in msgs}) == 6
    again, _ = _imp(mem, DATA / "anthropic.json")
    assert again.already_stored == 6 and sum(again.added.values()) == 0


def test_anthropic_lines_keep_ids_and_errors(mem: lossless.Memory) -> None:
    report, problems = _imp(mem, DATA / "anthropic.jsonl")
    assert not problems and report.format == "anthropic"
    msgs = mem.conversation("anthropic-lines").messages()
    assert msgs[1].external_id == "msg_01ABC" and msgs[1].content == "A stuck WAL archiver filled db-2's disk."
    assert msgs[2].tool_calls[0]["function"]["arguments"] == '{"city": "Porto"}'
    assert msgs[3].role == "tool" and msgs[3].metadata == {"is_error": True}


def test_claude_code_transcript(mem: lossless.Memory) -> None:
    report, problems = _imp(mem, DATA / "claude_code.jsonl")
    assert not problems
    assert dict(report.added) == {CLAUDE_SESSION: 4, f"{CLAUDE_SESSION}:agent-7c1d": 1}
    assert report.ignored == {"claude-code system line": 1, "claude-code file-history-snapshot line": 1}
    conv = mem.conversation(CLAUDE_SESSION)
    assert conv.info.metadata == {"source": "claude-code", "session_id": CLAUDE_SESSION.split(":")[1],
                                  "cwd": "/home/maya/billing", "git_branch": "main", "version": "1.0.51",
                                  "title": "Fix the flaky billing test"}
    msgs = conv.messages()
    assert [m.role for m in msgs] == ["user", "assistant", "tool", "assistant"]
    assert msgs[0].external_id == "a1b2c3d4-0000-4000-8000-000000000001"
    # the reply's three lines (thinking, text, tool_use; one message.id) are one message
    assert msgs[1].metadata["thinking"][0]["thinking"].startswith("Flaky one in ten")
    assert msgs[1].metadata["message_id"] == "msg_01Xa" and msgs[1].metadata["model"].startswith("claude-sonnet")
    assert msgs[1].content == "I'll run the test a few times to see the failure."
    assert msgs[1].tool_calls[0]["id"] == "toolu_01A" and msgs[1].tool_calls[0]["function"]["name"] == "Bash"
    assert msgs[2].tool_call_id == "toolu_01A" and msgs[2].content.startswith("FAILED")
    assert str(msgs[0].created_at) == "2025-07-01 10:00:00+00:00"


def test_a_growing_session_is_completed_not_duplicated(mem: lossless.Memory, tmp_path: Path,
                                                       store_target: StoreTarget) -> None:
    for sample, conversation in ((DATA / "claude_code.jsonl", CLAUDE_SESSION),
                                 (CODEX, "codex:5973b6c0-94b8-487b-a530-2aeb6098ae0e")):
        lines = sample.read_text(encoding="utf-8").splitlines(keepends=True)
        partial = tmp_path / sample.name
        partial.write_text("".join(lines[:3]), encoding="utf-8")  # a session still being written
        _imp(mem, partial)
        partial.write_text("".join(lines), encoding="utf-8")
        _imp(mem, partial)
        fresh = lossless.open(store_target(f"fresh-{sample.stem}"), embedder=None)
        import_file(fresh, sample)
        assert _seq(mem, conversation) == _seq(fresh, conversation)
        assert [m.metadata for m in mem.conversation(conversation).messages()] == [
            m.metadata for m in fresh.conversation(conversation).messages()]
        fresh.close()


def test_codex_rollout(mem: lossless.Memory) -> None:
    report, problems = _imp(mem, CODEX)
    conv_id = "codex:5973b6c0-94b8-487b-a530-2aeb6098ae0e"
    assert not problems and dict(report.added) == {conv_id: 5}
    assert report.ignored == {"codex event_msg line": 3, "codex turn_context line": 1}
    conv = mem.conversation(conv_id)
    assert conv.info.metadata["cwd"] == "/home/maya/atlas" and conv.info.metadata["model"] == "gpt-5-codex"
    msgs = conv.messages()
    assert [m.role for m in msgs] == ["user", "user", "assistant", "tool", "assistant"]
    assert msgs[1].content == "Why does `make test` fail?"
    call = msgs[2].tool_calls[0]
    assert call["id"] == "call_Qx1" and call["function"]["name"] == "shell"
    assert json.loads(call["function"]["arguments"])["command"] == ["bash", "-lc", "make test"]
    assert msgs[2].metadata == {"reasoning": ["**Running the tests** to see the error."]}
    assert msgs[3].tool_call_id == "call_Qx1" and "ModuleNotFoundError" in str(msgs[3].content)
    again, _ = _imp(mem, CODEX)
    assert again.already_stored == 5


def test_chatgpt_export_flattens_the_current_branch(mem: lossless.Memory) -> None:
    report, problems = _imp(mem, DATA / "conversations.json")
    first, second = "chatgpt:6630a1b2-0000-4000-8000-00000000c0a1", "chatgpt:6630a1b2-0000-4000-8000-00000000c0a2"
    assert not problems and dict(report.added) == {first: 5, second: 2}
    conv = mem.conversation(first)
    assert conv.info.metadata["title"] == "Porto depot math" and conv.info.metadata["model"] == "gpt-4o"
    msgs = conv.messages()
    assert [m.external_id for m in msgs] == ["n1", "n2", "n3", "n4", "n6"]  # not the edited-away n2a
    assert msgs[0].role == "system" and "delivery depot in Porto" in str(msgs[0].content)
    assert msgs[2].tool_calls[0]["function"] == {"name": "python", "arguments": "import math\nprint(math.ceil(340 / 48))"}
    assert msgs[3].role == "tool" and msgs[3].tool_call_id == msgs[2].tool_calls[0]["id"] and msgs[3].content == "8"
    assert msgs[4].content == "You need 8 vans." and msgs[4].metadata["thinking"][0]["summary"] == "Rounding up"
    assert str(msgs[1].created_at) == "2024-05-01 08:00:30+00:00"
    image = mem.conversation(second).messages()[0].content
    assert image == [{"type": "image_url", "image_url": {"url": "file-service://file-Abc123"}},
                     {"type": "text", "text": "What does this label say?"}]


def _chatgpt(cid: str, mapping: dict[str, Any], current: str, title: str = "t") -> dict[str, Any]:
    return {"title": title, "conversation_id": cid, "create_time": 1714550400.0, "current_node": current,
            "mapping": mapping}


def _node(nid: str, parent: str | None, role: str, text: str) -> dict[str, Any]:
    return {"id": nid, "parent": parent, "children": [], "message": {
        "id": nid, "author": {"role": role}, "create_time": 1714550400.0,
        "content": {"content_type": "text", "parts": [text]}, "recipient": "all"}}


def test_chatgpt_cycle_refuses_that_conversation_only(mem: lossless.Memory, tmp_path: Path) -> None:
    good = _chatgpt("ok-1", {"a": _node("a", None, "user", "hi"), "b": _node("b", "a", "assistant", "hello")}, "b")
    looped = _chatgpt("loop", {"x": _node("x", "y", "user", "one"), "y": _node("y", "x", "assistant", "two")}, "y",
                      title="Looped")
    later = _chatgpt("ok-2", {"c": _node("c", None, "user", "bye")}, "c")
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps([good, looped, later], indent=1), encoding="utf-8")
    report, problems = _imp(mem, path)
    assert dict(report.added) == {"chatgpt:ok-1": 2, "chatgpt:ok-2": 1}
    assert len(problems) == 1 and problems[0].line > 1
    assert "cycle" in problems[0].reason and "'Looped'" in problems[0].reason and "chatgpt:loop" in problems[0].reason
    assert mem.get_conversation("chatgpt:loop") is None  # nothing half-written


def test_reimporting_openai_lines_after_an_erase_adds_nothing(mem: lossless.Memory, tmp_path: Path) -> None:
    """Lines without external ids are recognised by position and content; an erased
    message no longer had its content, so the import stored it again (undoing the erase)
    and every message after it a second time."""
    path = tmp_path / "聊天.jsonl"
    lines = [{"role": "user", "content": "我的电话是 138-0000-0000"},
             {"role": "assistant", "content": "好的，已记下 📞", "tool_calls": [
                 {"id": "c1", "type": "function", "function": {"name": "save", "arguments": '{"号码": "138"}'}}]},
             {"role": "tool", "tool_call_id": "c1", "content": "已保存"},
             {"role": "user", "content": "谢谢"}]
    path.write_text("".join(json.dumps({**m, "conversation": "隐私"}, ensure_ascii=False) + "\n" for m in lines),
                    encoding="utf-8")
    _imp(mem, path)
    conv = mem.conversation("隐私")
    conv.erase([1, 2], reason="个人信息", by="测试")
    before = [(m.role, m.content) for m in conv.messages()]
    report, problems = _imp(mem, path)
    assert not problems and sum(report.added.values()) == 0 and report.already_stored == 4
    assert [(m.role, m.content) for m in conv.messages()] == before
    assert before[0] == ("user", "[erased]") and before[3] == ("user", "谢谢")
    # a different message where an erased one stands is still new, and so is all after it
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"role": "assistant", "content": "不同", "conversation": "隐私"}, ensure_ascii=False)
                     + "\n", encoding="utf-8")
    report, _ = _imp(mem, other)
    assert dict(report.added) == {"隐私": 1}


def test_chatgpt_conversation_without_mapping_is_named(mem: lossless.Memory, tmp_path: Path) -> None:
    """It was "element 2 has no 'mapping' object" alone: counted from 0, in an export of
    hundreds, with nothing that says which conversation it was."""
    good = _chatgpt("好-1", {"a": _node("a", None, "user", "你好")}, "a")
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps([good, {"conversation_id": "坏-2", "title": "没有映射 📎"}, ["not", "a", "conversation"]],
                               ensure_ascii=False), encoding="utf-8")
    report, problems = _imp(mem, path)
    assert dict(report.added) == {"chatgpt:好-1": 1}
    assert [p.reason for p in problems] == [
        "invalid conversation: element 1 (chatgpt:坏-2, '没有映射 📎') has no 'mapping' object",
        "invalid conversation: element 2 has no 'mapping' object"]


def test_openclaw_json5_and_jsonl(mem: lossless.Memory, tmp_path: Path) -> None:
    report, problems = _imp(mem, DATA / "ses_7Hq2.json5")
    assert not problems and dict(report.added) == {"openclaw:ses_7Hq2": 5}
    conv = mem.conversation("openclaw:ses_7Hq2")
    assert conv.info.metadata["title"] == "Deploy checklist"
    msgs = conv.messages()
    assert [m.role for m in msgs] == ["system", "user", "assistant", "tool", "assistant"]
    assert msgs[2].tool_calls[0]["function"] == {"name": "read_file", "arguments": '{"path": "deploy.sh"}'}
    assert msgs[2].metadata["thinking"][0]["thinking"] == "Read the script first."
    assert msgs[3].tool_call_id == "tc_1" and msgs[3].content == "#!/bin/sh\nmkdir /srv/app\n"
    assert str(msgs[0].created_at) == "2025-01-01 10:00:00+00:00"  # milliseconds since the epoch
    lines = [{"type": "session", "id": "ses_L1", "timestamp": "2025-01-02T10:00:00Z", "cwd": "/srv"},
             {"type": "message", "id": "e1", "message": {"role": "user", "content": "hi", "timestamp": 1735812000000}},
             {"type": "model_change", "provider": "anthropic"},
             {"type": "message", "id": "e2", "message": {"role": "assistant", "content": [{"type": "text", "text": "yo"}]}}]
    path = tmp_path / "ses_L1.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    assert detect(path) == "openclaw"
    report, problems = _imp(mem, path)
    assert not problems and dict(report.added) == {"openclaw:ses_L1": 2} and report.ignored
    assert [m.external_id for m in mem.conversation("openclaw:ses_L1").messages()] == ["e1", "e2"]


def test_plain_text_transcript(mem: lossless.Memory) -> None:
    report, problems = _imp(mem, DATA / "transcript.md")
    assert not problems and report.ignored == {"text before the first speaker line": 1}
    assert _seq(mem, "text:transcript") == [
        ("user", "Which van goes to Braga on Friday?"),
        ("assistant", "Van 104, leaving at 07:30.\nIt carries the refrigerated load."),
        ("user", "And the driver?"),
        ("assistant", "Rui drives it.\n\n- He knows the route.\n- He has the keys."),
        ("user", "Thanks!"),
        ("assistant", "You're welcome."),
    ]
    again, _ = _imp(mem, DATA / "transcript.md")
    assert again.already_stored == 6 and sum(again.added.values()) == 0


def test_chinese_japanese_and_korean_transcripts(mem: lossless.Memory, tmp_path: Path) -> None:
    # a Chinese user's transcript labels its speakers in Chinese, with a full-width colon
    zh = tmp_path / "聊天记录.txt"
    zh.write_text("以下是我和助手的对话\n用户：我上周末去了人民公园。\n助手：听起来很惬意！\n公园里有什么？\n"
                  "**用戶**：還喝了一杯拿鐵。\nAI助手: 好的。\n系统：会话结束\nUser：mixed labels work too\n",
                  encoding="utf-8")
    assert detect(zh) == "text"
    report, problems = _imp(mem, zh)
    assert not problems and report.ignored == {"text before the first speaker line": 1}
    assert _seq(mem, "text:聊天记录") == [
        ("user", "我上周末去了人民公园。"), ("assistant", "听起来很惬意！\n公园里有什么？"),
        ("user", "還喝了一杯拿鐵。"), ("assistant", "好的。"), ("system", "会话结束"),
        ("user", "mixed labels work too")]
    ja_ko = tmp_path / "ja_ko.md"
    ja_ko.write_text("ユーザー：東京で寿司を食べました。\nアシスタント：いいですね。\n사용자: 학교에 갔어요.\n"
                     "어시스턴트：좋아요.\n助手说的话不是标签\n", encoding="utf-8")
    report, problems = _imp(mem, ja_ko)
    assert not problems
    assert _seq(mem, "text:ja_ko") == [("user", "東京で寿司を食べました。"), ("assistant", "いいですね。"),
                                       ("user", "학교에 갔어요."), ("assistant", "좋아요.\n助手说的话不是标签")]
    hits = mem.conversation("text:聊天记录").search("公园", mode="fts")
    assert sorted(h.first_seq for h in hits) == [1, 2]  # the two that say 公园, in either store's order


def test_conversation_option_puts_everything_in_one(mem: lossless.Memory) -> None:
    report, _ = _imp(mem, DATA / "conversations.json", conversation="all-chatgpt")
    assert dict(report.added) == {"all-chatgpt": 7}
    assert mem.conversation("all-chatgpt").info.metadata["source"] == "chatgpt"


# -- streaming ------------------------------------------------------------------------


def test_stream_parser_matches_json_load_at_any_chunk_size(monkeypatch: pytest.MonkeyPatch) -> None:
    raw = (DATA / "conversations.json").read_bytes()
    expected = json.loads(raw)
    for size in (1, 7, 64, 1 << 16):
        monkeypatch.setattr(jsonstream, "_CHUNK", size)
        got = [value for _, value, _ in iter_document(io.BytesIO(raw))]
        assert got == expected
    lines = [line for _, _, line in iter_document(io.BytesIO(raw))]
    assert lines == [2, 22]  # where each conversation starts


def test_json5_prepass_at_any_chunk_size(monkeypatch: pytest.MonkeyPatch) -> None:
    text = ('// head\n{"url": "http://x//y", /* c,\n d */ "a": [1, 2, ],\n'
            ' "s": "/* not a comment */", "b": {"c": "d",}, // tail\n}\n')
    for size in (1, 2, 5, 1 << 16):
        monkeypatch.setattr(jsonstream, "_CHUNK", size)
        got = {path[0]: (value, line) for path, value, line in iter_document(io.BytesIO(text.encode()), json5=True)}
        assert got == {"url": ("http://x//y", 2), "a": ([1, 2], 3), "s": ("/* not a comment */", 4),
                       "b": ({"c": "d"}, 4)}


def test_stream_parser_errors_name_the_line() -> None:
    with pytest.raises(JsonStreamError) as err:
        list(iter_document(io.BytesIO(b'[\n{"a": 1},\n{"b": 2,\n')))
    assert err.value.line == 3 and "truncated" in err.value.message  # where the cut value starts
    with pytest.raises(JsonStreamError) as err:
        list(iter_document(io.BytesIO(b'[\n{"a": 1},\n{"b" 2}]')))
    assert err.value.line == 3 and "Expecting ':'" in err.value.message


def test_stream_parser_reads_what_streaming_json_libraries_refuse() -> None:
    # kept by hand over ijson (bench/lib_jsonstream.py): its C backend refuses integers past
    # 2**63 and a BOM, and reads a lone surrogate escape as "?", silently changing the text
    raw = b'\xef\xbb\xbf[\n{"id": 18446744073709551616},\n"\\ud800 x",\n-1.5e3]'
    assert [(v, line) for _, v, line in iter_document(io.BytesIO(raw))] == [
        ({"id": 2**64}, 2), ("\ud800 x", 3), (-1500.0, 4)]  # the surrogate is kept for validation to refuse


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=6), kids, max_size=4),
    max_leaves=25)


@settings(max_examples=150, deadline=None)
@given(doc=st.lists(_JSON, max_size=6), indent=st.sampled_from([None, 1]), chunk=st.sampled_from([1, 3, 64, 1 << 16]))
def test_stream_parser_gives_json_loads_items_at_any_chunk_size(doc: list[Any], indent: int | None, chunk: int) -> None:
    raw = json.dumps(doc, indent=indent, ensure_ascii=chunk % 2 == 0).encode()
    old = jsonstream._CHUNK
    jsonstream._CHUNK = chunk  # (not monkeypatch: hypothesis runs many examples in one test call)
    try:
        got = [value for _, value, _ in iter_document(io.BytesIO(raw))]
    finally:
        jsonstream._CHUNK = old
    assert got == json.loads(raw)


# -- bad input ------------------------------------------------------------------------


def test_truncated_files_keep_what_came_before(mem: lossless.Memory, tmp_path: Path) -> None:
    raw = (DATA / "conversations.json").read_bytes()
    cut = tmp_path / "conversations.json"
    cut.write_bytes(raw[: raw.index(b'"title": "Label photo"') + 40])
    report, problems = _imp(mem, cut)
    assert list(report.added) == ["chatgpt:6630a1b2-0000-4000-8000-00000000c0a1"]
    assert len(problems) == 1 and "truncated" in problems[0].reason and problems[0].line == 22

    lines = (DATA / "claude_code.jsonl").read_bytes()
    jsonl = tmp_path / "cut.jsonl"
    jsonl.write_bytes(lines[: lines.rindex(b"\n") - 30])  # the last line cut in half
    report, problems = _imp(mem, jsonl, format="claude-code")
    assert [p.line for p in problems] == [10] and problems[0].reason.startswith("invalid JSON")


def test_bad_lines_are_reported_by_line_and_the_rest_imported(mem: lossless.Memory, tmp_path: Path) -> None:
    good = (DATA / "claude_code.jsonl").read_text(encoding="utf-8").splitlines()
    bad = [good[0], good[1], "not json at all", '{"type": "user", "sessionId": "s"}', '["a", "list"]',
           '{"type": "assistant", "sessionId": "s", "message": {"role": "assistant", "content": [{"no": "type"}]}}',
           *good[2:]]
    path = tmp_path / "session.jsonl"
    path.write_text("\n".join(bad) + "\n", encoding="utf-8")
    report, problems = _imp(mem, path)
    assert [(p.line, p.reason.split(":")[0]) for p in problems] == [
        (3, "invalid JSON"), (4, "invalid line"), (5, "invalid line"), (6, "invalid message")]
    assert "without a 'message'" in problems[1].reason and "content block 0" in problems[3].reason
    assert report.added[CLAUDE_SESSION] == 4
    assert "skipped 4 lines (2 invalid line, 1 invalid JSON, 1 invalid message)" in report.line()


def test_unknown_roles_and_missing_fields(mem: lossless.Memory, tmp_path: Path) -> None:
    path = tmp_path / "roles.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in [
        {"conversation": "r", "role": "wizard", "content": "abracadabra"},
        {"conversation": "r", "role": "user"},
        {"conversation": "r", "role": "tool", "content": "no call id"},
        {"conversation": "r", "role": "user", "content": "fine"},
    ]) + "\n", encoding="utf-8")
    report, problems = _imp(mem, path)
    assert [p.line for p in problems] == [1, 2, 3] and report.added["r"] == 1
    assert "unknown role 'wizard'" in problems[0].reason
    assert "needs content" in problems[1].reason and "tool_call_id" in problems[2].reason

    rollout = tmp_path / "rollout-x.jsonl"
    rollout.write_text("\n".join(json.dumps(x) for x in [
        {"type": "response_item", "payload": {"type": "function_call", "name": "shell", "arguments": "{}"}},
        {"type": "response_item"},
        {"type": "response_item", "payload": {"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "ok"}]}},
    ]) + "\n", encoding="utf-8")
    report, problems = _imp(mem, rollout)
    assert [p.line for p in problems] == [1, 2] and report.added["codex:rollout-x"] == 1


def test_a_50_mb_message_is_refused_with_its_line(store_target: StoreTarget, mem: lossless.Memory, tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    with path.open("w", encoding="utf-8") as f:
        f.write(json.dumps({"conversation": "big", "role": "user", "content": "before"}) + "\n")
        f.write(json.dumps({"conversation": "big", "role": "assistant", "content": "x" * (50 * 1024 * 1024)}) + "\n")
        f.write(json.dumps({"conversation": "big", "role": "user", "content": "after"}) + "\n")
    report, problems = _imp(mem, path)
    assert [p.line for p in problems] == [2] and report.added["big"] == 2
    reason = problems[0].reason  # refused unread past the line guard, or by size once parsed
    assert "max_message_bytes" in reason
    assert reason.startswith("message too large") or "message is 52,428,800 bytes" in reason
    assert _seq(mem, "big") == [("user", "before"), ("user", "after")]
    # under the line guard but over the limit: validation names the size and the limit
    small = lossless.open(store_target("small"), embedder=None, max_message_bytes=1000)
    mid = tmp_path / "mid.jsonl"
    mid.write_text(json.dumps({"conversation": "m", "role": "user", "content": "y" * 5000}) + "\n", encoding="utf-8")
    _, problems = _imp(small, mid)
    assert problems[0].line == 1 and "message is 5,000 bytes; the limit is 1,000" in problems[0].reason
    # far over the limit: the line is skipped unread (memory stays bounded), the next one still imported
    huge = tmp_path / "huge.jsonl"
    huge.write_text(json.dumps({"conversation": "h", "role": "user", "content": "z" * 3_000_000}) + "\n"
                    + json.dumps({"conversation": "h", "role": "user", "content": "small"}) + "\n", encoding="utf-8")
    report, problems = _imp(small, huge)
    assert [p.line for p in problems] == [1] and problems[0].reason.startswith("message too large: the line is over")
    assert report.added["h"] == 1
    small.close()


def test_missing_path_or_directory(mem: lossless.Memory, tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match=r"nope\.jsonl: no such file"):
        import_file(mem, tmp_path / "nope.jsonl")
    with pytest.raises(ValidationError, match="is a directory"):
        import_file(mem, tmp_path)
    with pytest.raises(ValidationError, match="unknown import format 'yaml'"):
        import_file(mem, DATA / "openai.jsonl", format="yaml")


def test_strict_writes_nothing_of_the_pending_batch(mem: lossless.Memory, tmp_path: Path) -> None:
    text = (DATA / "transcript.md").read_text(encoding="utf-8").replace("User: And the driver?", "User:")
    path = tmp_path / "t.md"
    path.write_text(text, encoding="utf-8")
    report = import_file(mem, path, strict=True)
    assert report.stopped_at == 8 and mem.get_conversation("text:t") is None


def test_not_utf8(mem: lossless.Memory, tmp_path: Path) -> None:
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(json.dumps({"conversation": "u", "role": "user", "content": "ok"}).encode() + b"\n"
                     + b'{"conversation": "u", "role": "user", "content": "caf\xe9"}\n')
    report, problems = _imp(mem, path)
    assert report.added["u"] == 1 and problems[0].line == 2 and problems[0].reason.startswith("not UTF-8")


def _openai_lines(n: int, conversation: str = "u") -> bytes:
    return b"".join(json.dumps({"conversation": conversation, "role": "user", "content": f"m{i}"}).encode() + b"\n"
                    for i in range(n))


_BAD_FIRST_LINES = {
    # a byte that is not UTF-8 inside a string: a line the writer's encoding broke
    "latin-1": b'{"conversation": "u", "role": "user", "content": "caf\xe9"}\n',
    "half-written": b'{"conversation": "u", "role": "us\n',
    "binary": b"\x00\x9f\x92\x96 not json at all\n",
}


@pytest.mark.parametrize("bad", sorted(_BAD_FIRST_LINES))
def test_a_bad_first_line_is_one_skipped_line(mem: lossless.Memory, tmp_path: Path, bad: str) -> None:
    """The attacker's file: a first line that is not UTF-8 (or not JSON) before 1,000 good
    ones imported nothing and reported one skipped line (the head read as one document)."""
    path = tmp_path / "chat.jsonl"
    path.write_bytes(_BAD_FIRST_LINES[bad] + _openai_lines(1000))
    assert detect(path) == "openai"
    report, problems = _imp(mem, path)
    assert report.added["u"] == 1000 and not report.document and [p.line for p in problems] == [1]
    assert problems[0].reason.startswith("invalid JSON" if bad == "half-written" else "not UTF-8")
    # the same for the other line formats: the head's other lines decide
    session = (DATA / "claude_code.jsonl").read_bytes()
    (tmp_path / "session.jsonl").write_bytes(_BAD_FIRST_LINES[bad] + session)
    assert detect(tmp_path / "session.jsonl") == "claude-code"
    report, problems = _imp(mem, tmp_path / "session.jsonl")
    assert report.added[CLAUDE_SESSION] == 4 and [p.line for p in problems] == [1]
    anthropic = (DATA / "anthropic.jsonl").read_bytes()
    (tmp_path / "api.jsonl").write_bytes(_BAD_FIRST_LINES[bad] + anthropic)
    assert detect(tmp_path / "api.jsonl") == "anthropic"
    report, problems = _imp(mem, tmp_path / "api.jsonl")
    assert sum(report.added.values()) == len(anthropic.splitlines()) and [p.line for p in problems] == [1]


@settings(max_examples=150, deadline=None)
@given(first=st.binary(max_size=120).filter(lambda b: b"\n" not in b and b"\r" not in b))
def test_whatever_the_first_line_the_lines_after_it_are_imported(first: bytes) -> None:
    """Property: the format and the reading are decided by the file, not by its first line:
    whatever that line holds, the 30 good lines after it are imported, and only line 1 can
    be reported."""
    data = first + b"\n" + _openai_lines(30)
    assert detect(data, name="chat.jsonl") == "openai"
    with lossless.open(":memory:", embedder=None) as mem:
        problems: list[Problem] = []
        report = import_stream(mem, io.BytesIO(data), name="chat.jsonl", on_problem=problems.append)
        assert report.added["u"] >= 30 and not report.document
        assert {p.line for p in problems} <= {1}


def test_a_pretty_printed_document_is_still_one_document(mem: lossless.Memory, tmp_path: Path) -> None:
    doc = {"conversation": "pretty", "messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]}
    path = tmp_path / "doc.json"
    path.write_text(json.dumps(doc, indent=2), encoding="utf-8")  # its innermost lines parse on their own
    report, problems = _imp(mem, path)
    assert report.document and not problems and report.added["pretty"] == 2


_HUGE = "9" * 5000  # over Python's 4,300-digit limit for int(str): json.loads raised a bare ValueError


def test_an_integer_too_long_to_read_skips_its_line_only(mem: lossless.Memory, tmp_path: Path) -> None:
    """One line with a 5,000-digit integer aborted the whole import ("unexpected
    ValueError") and stored nothing."""
    huge = ('{"conversation": "u", "role": "user", "content": "x", "metadata": {"n": ' + _HUGE + "}}\n").encode()
    path = tmp_path / "big.jsonl"
    path.write_bytes(_openai_lines(10) + huge + _openai_lines(10, "v"))
    report, problems = _imp(mem, path)
    assert dict(report.added) == {"u": 10, "v": 10} and [p.line for p in problems] == [11]
    assert problems[0].reason == "invalid JSON: an integer of 5,000 digits (at most 4,300 are read)"
    first = tmp_path / "first.jsonl"  # the head's first line: detection reads past it too
    first.write_bytes(huge + _openai_lines(3, "w"))
    report, problems = _imp(mem, first)
    assert report.added["w"] == 3 and [p.line for p in problems] == [1]
    # a JSON document: that element is skipped, the ones after it read
    doc = tmp_path / "doc.json"
    doc.write_text('[\n{"conversation": "d", "role": "user", "content": "one"},\n{"conversation": "d", "role": "user", '
                   '"content": "x", "metadata": {"n": -' + _HUGE + '}},\n{"conversation": "d", "role": "user", '
                   '"content": "three"}\n]\n', encoding="utf-8")
    report, problems = _imp(mem, doc)
    assert _seq(mem, "d") == [("user", "one"), ("user", "three")] and [p.line for p in problems] == [3]
    assert "an integer of 5,000 digits" in problems[0].reason
    # a ChatGPT export: that conversation is skipped, the others imported
    good = _chatgpt("ok-1", {"a": _node("a", None, "user", "hi")}, "a")
    bad = json.dumps(_chatgpt("bad", {"b": _node("b", None, "user", "big")}, "b")).replace("1714550400.0", _HUGE, 1)
    later = _chatgpt("ok-2", {"c": _node("c", None, "user", "bye")}, "c")
    export = tmp_path / "conversations.json"
    export.write_text(f"[{json.dumps(good)},\n{bad},\n{json.dumps(later)}]", encoding="utf-8")
    report, problems = _imp(mem, export)
    assert sorted(report.added) == ["chatgpt:ok-1", "chatgpt:ok-2"] and [p.line for p in problems] == [2]
    # Claude Code, Codex, Anthropic lines: the same line reader
    for sample, fmt in ((DATA / "claude_code.jsonl", "claude-code"), (CODEX, "codex"), (DATA / "anthropic.jsonl",
                                                                                        "anthropic")):
        lines = sample.read_bytes().splitlines(keepends=True)
        spoiled = tmp_path / f"spoiled-{sample.name}"
        spoiled.write_bytes(b"".join(lines[:2]) + b'{"n": ' + _HUGE.encode() + b"}\n" + b"".join(lines[2:]))
        report, problems = _imp(mem, spoiled, format=fmt)
        assert [p.reason for p in problems if p.line == 3] == [problems[0].reason]
        assert "an integer of 5,000 digits" in problems[0].reason


def test_openai_lines_without_a_conversation_go_to_one_named_after_the_file(mem: lossless.Memory,
                                                                             tmp_path: Path) -> None:
    """Other formats fall back to the file name; OpenAI lines without 'conversation' were
    all rejected ("no conversation")."""
    path = tmp_path / "support-chat.jsonl"
    path.write_text("".join(json.dumps({"role": r, "content": c}) + "\n" for r, c in (
        ("user", "Where is van 112?"), ("assistant", "At the Porto depot.")))
        + json.dumps({"conversation": "named", "role": "user", "content": "elsewhere"}) + "\n", encoding="utf-8")
    report, problems = _imp(mem, path)
    assert not problems and dict(report.added) == {"openai:support-chat": 2, "named": 1}
    assert _seq(mem, "openai:support-chat") == [("user", "Where is van 112?"), ("assistant", "At the Porto depot.")]
    again, _ = _imp(mem, path)
    assert sum(again.added.values()) == 0 and again.already_stored == 3
    doc = tmp_path / "plain.json"  # a JSON array of bare messages too
    doc.write_text(json.dumps([{"role": "user", "content": "hi"}], indent=1), encoding="utf-8")
    assert dict(_imp(mem, doc)[0].added) == {"openai:plain": 1}
    assert dict(_imp(mem, path, conversation="chosen")[0].added) == {"chosen": 3}  # --conversation still wins


# -- one BEAM chat through every format -------------------------------------------------


def _beam_messages() -> list[tuple[str, str]]:
    bench = Path(__file__).resolve().parent.parent / "bench"
    sys.path.insert(0, str(bench))
    try:
        from beam import DEFAULT_DATA, load_chat
    finally:
        sys.path.remove(str(bench))
    if not (DEFAULT_DATA / "1" / "chat.json").exists():
        pytest.skip("the BEAM dev data is not here")
    return [(m.role, m.content) for m in load_chat(1).messages]


def _to_openai(chat: list[tuple[str, str]]) -> str:
    return "".join(json.dumps({"conversation": "beam", "role": r, "content": c}) + "\n" for r, c in chat)


def _to_anthropic(chat: list[tuple[str, str]]) -> str:
    return json.dumps({"model": "claude", "conversation": "beam", "messages": [
        {"role": r, "content": c if r == "user" else [{"type": "text", "text": c}]} for r, c in chat]}, indent=2)


def _to_claude_code(chat: list[tuple[str, str]]) -> str:
    out, parent = [], None
    for i, (role, content) in enumerate(chat):
        uuid = f"00000000-0000-4000-8000-{i:012d}"
        message: dict[str, Any] = {"role": role, "content": content} if role == "user" else {
            "id": f"msg_{i}", "type": "message", "role": role, "model": "claude",
            "content": [{"type": "text", "text": content}]}
        out.append({"parentUuid": parent, "isSidechain": False, "sessionId": "beam", "type": role,
                    "message": message, "uuid": uuid, "timestamp": f"2024-03-15T09:{i // 60:02d}:{i % 60:02d}Z"})
        parent = uuid
    return "".join(json.dumps(x) + "\n" for x in out)


def _to_codex(chat: list[tuple[str, str]]) -> str:
    out: list[dict[str, Any]] = [{"timestamp": "2024-03-15T09:00:00Z", "type": "session_meta",
                                  "payload": {"id": "beam", "cwd": "/tmp"}}]
    for role, content in chat:
        kind = "input_text" if role == "user" else "output_text"
        out.append({"timestamp": "2024-03-15T09:00:01Z", "type": "response_item",
                    "payload": {"type": "message", "role": role, "content": [{"type": kind, "text": content}]}})
        out.append({"timestamp": "2024-03-15T09:00:01Z", "type": "event_msg", "payload": {"type": "token_count"}})
    return "".join(json.dumps(x) + "\n" for x in out)


def _to_chatgpt(chat: list[tuple[str, str]]) -> str:
    mapping: dict[str, Any] = {"root": {"id": "root", "message": None, "parent": None, "children": ["n0"]}}
    parent = "root"
    for i, (role, content) in enumerate(chat):
        node = _node(f"n{i}", parent, role, content)
        node["children"] = [f"n{i + 1}"] if i + 1 < len(chat) else []
        mapping[f"n{i}"] = node
        parent = f"n{i}"
    return json.dumps([_chatgpt("beam", mapping, parent, title="BEAM 1")])


def _to_openclaw(chat: list[tuple[str, str]]) -> str:
    body = ",\n".join(f"    {json.dumps({'role': r, 'content': c, 'timestamp': 1710493200000 + i})}"
                      for i, (r, c) in enumerate(chat))
    return f'// a session\n{{\n  "sessionId": "beam",\n  "messages": [\n{body},\n  ],\n}}\n'


def _to_text(chat: list[tuple[str, str]]) -> str:
    return "".join(f"{'**User**' if r == 'user' else '**Assistant**'}: {c}\n\n" for r, c in chat)


@pytest.mark.parametrize(("fmt", "file_name", "convert", "conversation"), [
    ("openai", "beam.jsonl", _to_openai, "beam"),
    ("anthropic", "beam.json", _to_anthropic, "beam"),
    ("claude-code", "beam-session.jsonl", _to_claude_code, "claude-code:beam"),
    ("codex", "rollout-beam.jsonl", _to_codex, "codex:beam"),
    ("chatgpt", "conversations.json", _to_chatgpt, "chatgpt:beam"),
    ("openclaw", "beam.json5", _to_openclaw, "openclaw:beam"),
    ("text", "beam.md", _to_text, "text:beam"),
])
def test_one_beam_chat_through_every_format(store_target: StoreTarget, fmt: str, file_name: str, convert: Any, conversation: str,
                                            tmp_path: Path) -> None:
    chat = _beam_messages()
    path = tmp_path / file_name
    path.write_text(convert(chat), encoding="utf-8")
    # text-only content blocks are valid OpenAI content parts too: the Claude model tells them apart
    assert detect(path) == fmt
    with lossless.open(store_target("beam"), embedder=None, context_window=200_000) as mem:
        report, problems = _imp(mem, path, format=fmt)
        assert not problems and report.added[conversation] == len(chat)
        assert _seq(mem, conversation) == chat


# -- the command ----------------------------------------------------------------------


def test_import_command(store_target: StoreTarget, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from lossless.cli import main

    db = str(store_target("cli"))

    def run(*args: str | Path) -> tuple[int, str, str]:
        capsys.readouterr()
        status = main(["--db", db, *map(str, args)])
        out, err = capsys.readouterr()
        assert "Traceback" not in out + err
        return status, out, err

    status, out, err = run("import", DATA / "claude_code.jsonl")
    assert status == 0 and err == ""
    assert out.startswith("imported 5 messages into 2 conversations from 10 lines (claude-code)")
    assert "ignored 2 non-message items" in out
    status, out, _ = run("--json", "import", CODEX)
    report = json.loads(out)
    assert status == 0 and report["format"] == "codex" and report["ignored"]["codex event_msg line"] == 3
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"conversation": "b", "role": "user", "content": "ok"}\n{oops\n', encoding="utf-8")
    status, out, err = run("import", bad)
    assert status == 1 and f"{bad} line 2: invalid JSON" in err and "skipped 1 line (1 invalid JSON)" in out
    status, _, err = run("import", DATA / "transcript.md", "--format", "yaml")
    assert status == 2 and "invalid choice" in err
    for path, message in ((tmp_path, "is a directory"), (tmp_path / "none.json", "no such file")):
        status, out, err = run("import", path)
        assert status == 1 and out == "" and err.startswith("error: ") and message in err
    status, out, _ = run("import", DATA / "transcript.md", "--format", "text", "--conversation", "notes")
    assert status == 0 and "imported 6 messages into 1 conversation" in out


# -- files that are not UTF-8 -----------------------------------------------------------

_ZH = [("user", "你好，我想订一张去上海的火车票。"), ("assistant", "好的！请问您想哪天出发？"),
       ("user", "明天上午，二等座。"), ("assistant", "OK, 明天上午的G1次列车还有二等座。")]
# the English twin: what a French or German Windows saves as "ANSI"
_EN = [("user", "I'd like a café table for two, près de la fenêtre."), ("assistant", "Très bien: 7 pm, à bientôt."),
       ("user", "Danke schön, Grüße aus Köln."), ("assistant", "You're welcome.")]


def _as(fmt: str, chat: list[tuple[str, str]]) -> str:
    """``chat`` written the way each format's tools write it: JSON with its characters as
    they are (not ``\\u`` escapes), text with Chinese speaker labels for Chinese."""
    if fmt == "text":
        chinese = any("\u4e00" <= ch <= "\u9fff" for _, c in chat for ch in c)
        label = {"user": "用户：" if chinese else "User: ", "assistant": "助手：" if chinese else "Assistant: "}
        return "".join(f"{label[r]}{c}\r\n" for r, c in chat)  # Windows line ends, as Notepad saves
    if fmt == "openai":
        return "".join(json.dumps({"role": r, "content": c}, ensure_ascii=False) + "\n" for r, c in chat)
    return json.dumps(json.loads(_to_chatgpt(chat)), ensure_ascii=False)


@pytest.mark.parametrize("language", ["zh", "en"])
@pytest.mark.parametrize(("fmt", "file_name"), [("text", "记录.txt"), ("openai", "记录.jsonl"),
                                                ("chatgpt", "conversations.json")])
def test_a_file_in_a_legacy_encoding_is_refused_whole_then_read_with_encoding(
        store_target: StoreTarget, tmp_path: Path, fmt: str, file_name: str, language: str) -> None:
    """A GBK transcript (Chinese Windows' "ANSI") had each line with a Chinese character
    reported "not UTF-8" and skipped, its ASCII lines stored: 1 message of 4, a conversation
    with holes. A GBK ChatGPT export stopped at its first Chinese character. Now the file is
    refused before anything is stored, naming the encoding it reads as and the option to
    give; with it, every message is imported exactly (and found by a two-character word)."""
    chat, legacy, word = (_ZH, "gb18030", "火车") if language == "zh" else (_EN, "cp1252", "fenêtre")
    path = tmp_path / file_name
    path.write_bytes(_as(fmt, chat).encode(legacy))
    with lossless.open(store_target(f"enc-{fmt}-{language}"), embedder=None) as mem:
        with pytest.raises(lossless.ValidationError, match=f"is not UTF-8.*--encoding {legacy}") as refused:
            import_file(mem, path)
        assert "Nothing was imported" in str(refused.value) and mem.conversations() == []
        with pytest.raises(lossless.ValidationError, match="is not UTF-8"):
            detect(path)  # not "cannot tell the format"
        assert detect(path, encoding=legacy) == fmt
        report, problems = _imp(mem, path, encoding=legacy)
        assert not problems and sum(report.added.values()) == len(chat)
        (conversation,) = report.added
        assert _seq(mem, conversation) == chat
        assert _imp(mem, path, encoding=legacy)[0].already_stored == len(chat)  # a re-import adds nothing
        assert [h.conversation_id for h in mem.search(word)] == [conversation]
        # a UTF-8 file given an encoding would be garbled: refused
        utf8 = tmp_path / f"utf8-{file_name}"
        utf8.write_text(_as(fmt, chat), encoding="utf-8")
        with pytest.raises(lossless.ValidationError, match=f"is UTF-8 already.*without --encoding {legacy}"):
            import_file(mem, utf8, encoding=legacy)
        with pytest.raises(lossless.ValidationError, match="unknown encoding 'klingon'"):
            import_file(mem, path, encoding="klingon")


@pytest.mark.parametrize("fmt", ["text", "openai", "chatgpt"])
def test_utf16_with_a_byte_order_mark_is_read_as_such(mem: lossless.Memory, tmp_path: Path, fmt: str) -> None:
    """What Windows PowerShell's ``>`` and Notepad's "Unicode" write: the format could not
    be told ("give --format"), and with --format every line was "not UTF-8"."""
    path = tmp_path / ("conversations.json" if fmt == "chatgpt" else f"会话.{'txt' if fmt == 'text' else 'jsonl'}")
    path.write_bytes(_as(fmt, _ZH + _EN).encode("utf-16"))
    assert detect(path) == fmt
    report, problems = _imp(mem, path)
    assert not problems and _seq(mem, next(iter(report.added))) == _ZH + _EN


def test_a_decoded_file_is_read_whole_across_chunks_and_a_bad_byte_is_named(mem: lossless.Memory,
                                                                            tmp_path: Path) -> None:
    """Bigger than the head and the decoder's chunks (characters of two bytes split between
    reads), and a byte that is not GB18030 halfway: named by its offset."""
    chat = [("user" if i % 2 == 0 else "assistant", f"第{i}条：我们讨论了预算和交货时间。" * (i % 7 + 1))
            for i in range(3000)]
    path = tmp_path / "长记录.txt"
    data = _as("text", chat).encode("gb18030")
    path.write_bytes(data)
    assert len(data) > 4 * HEAD_BYTES
    _, problems = _imp(mem, path, encoding="gb18030")
    assert not problems and _seq(mem, "text:长记录") == chat
    broken = tmp_path / "坏记录.txt"
    at = data.index(b"\n", 200_000) + 1  # a lead byte with no trail, at the start of a line: not GB18030
    broken.write_bytes(data[:at] + b"\x81\x20" + data[at:])
    with pytest.raises(lossless.ValidationError, match=rf"offset {at:,} are not gb18030"):
        import_file(mem, broken, encoding="gb18030")


def test_the_import_command_refuses_a_gbk_file_before_making_a_database(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    from lossless.cli import main

    path = tmp_path / "聊天记录.txt"
    path.write_bytes(_as("text", _ZH).encode("gbk"))
    db = tmp_path / "new.db"
    assert main(["--db", str(db), "import", str(path)]) == 1
    err = capsys.readouterr().err
    assert "is not UTF-8 (4 of its first 4 lines hold bytes" in err and "--encoding gb18030" in err
    assert not db.exists()
    assert main(["--db", str(db), "import", str(path), "--encoding", "gb18030", "--no-wait"]) == 0
    assert "imported 4 messages into 1 conversation ('text:聊天记录')" in capsys.readouterr().out


@pytest.mark.parametrize("indent", [None, 2])
def test_a_claude_ai_export_is_named_not_read_as_chatgpt(mem: lossless.Memory, tmp_path: Path,
                                                        indent: int | None) -> None:
    """Claude.ai's data export is a conversations.json too: the name made it ChatGPT's, whose
    reader refused each conversation with "element 0 has no 'mapping' object" (exit 1, the
    format shown as chatgpt). Now it is named for what it is, before anything is opened."""
    export = [{"uuid": "5f2c0a9e-1b1d-4c1e-9a51-2d0c6f8e4b10", "name": "周末计划 / weekend plans",
               "created_at": "2024-05-01T10:00:00Z", "updated_at": "2024-05-01T10:05:00Z",
               "chat_messages": [
                   {"uuid": "m1", "text": "这个周末去哪里玩？Where to go this weekend?", "sender": "human",
                    "content": [{"type": "text", "text": "这个周末去哪里玩？Where to go this weekend?"}],
                    "created_at": "2024-05-01T10:00:00Z", "attachments": [], "files": []},
                   {"uuid": "m2", "text": "可以去香山看红叶。The Fragrant Hills.", "sender": "assistant",
                    "content": [{"type": "text", "text": "可以去香山看红叶。The Fragrant Hills."}],
                    "created_at": "2024-05-01T10:00:05Z", "attachments": [], "files": []}]}]
    for name in ("conversations.json", "claude-export.json"):
        path = tmp_path / name
        path.write_text(json.dumps(export, ensure_ascii=False, indent=indent), encoding="utf-8")
        with pytest.raises(lossless.ValidationError, match=r"is a Claude\.ai data export .* does not import yet"):
            import_file(mem, path)
    assert mem.conversations() == []
    # the words in a transcript are only words
    notes = tmp_path / "notes.md"
    notes.write_text('User: what is "chat_messages": [ in the export?\nAssistant: the messages.\n', encoding="utf-8")
    assert detect(notes) == "text"


@pytest.mark.parametrize("text", ["我：北京有什么好玩的？\n它：故宫和长城。\n",
                                  "Me: What is there to do in Beijing?\nIt: The Forbidden City and the Great Wall.\n"])
def test_text_with_no_speaker_line_is_a_problem_not_a_silent_nothing(mem: lossless.Memory, tmp_path: Path,
                                                                     text: str) -> None:
    """A transcript whose lines name no speaker this reader knows imported nothing, exit 0,
    saying only "ignored 1 non-message item (1 text before the first speaker line)"."""
    path = tmp_path / "问答.txt"
    path.write_text(text, encoding="utf-8")
    report, problems = _imp(mem, path)
    assert not report.added and [p.line for p in problems] == [1]
    assert problems[0].reason.startswith("no speaker lines:") and "用户：" in problems[0].reason
    # text before the first speaker line of a transcript is still only counted
    path.write_text("导出于 2024-05-01\n" + text.replace("我：", "用户：").replace("它：", "助手：")
                    .replace("Me:", "User:").replace("It:", "Assistant:"), encoding="utf-8")
    report, problems = _imp(mem, path)
    assert not problems and sum(report.added.values()) == 2 and report.ignored["text before the first speaker line"] == 1


@pytest.mark.parametrize("chinese", [True, False])
def test_question_and_answer_labels_and_a_chinese_indent(mem: lossless.Memory, tmp_path: Path, chinese: bool) -> None:
    """问：/答： (Q:/A:) transcripts were refused as having no speaker lines, and a speaker
    line indented with full-width spaces (　　用户：) was text of the message before it.
    Question-and-answer labels are speakers only in a file that starts with them: in a
    用户/助手 transcript an answer's own "问：…" lines stay its text."""
    q, a = ("问：", "答：") if chinese else ("Q: ", "A: ")
    qa = tmp_path / "qa.txt"
    qa.write_text(f"{q}北京有什么好玩的？\n{a}故宫和长城。\n还有颐和园。\n{q}门票多少钱？\n{a}六十元。\n",
                  encoding="utf-8")
    report, problems = _imp(mem, qa)
    assert not problems and sum(report.added.values()) == 4
    assert _seq(mem, "text:qa") == [("user", "北京有什么好玩的？"), ("assistant", "故宫和长城。\n还有颐和园。"),
                                    ("user", "门票多少钱？"), ("assistant", "六十元。")]
    chat = tmp_path / "chat.txt"
    user, helper = ("用户：", "助手：") if chinese else ("User: ", "Assistant: ")
    chat.write_text(f"\u3000\u3000{user}帮我写两条常见问题。\n\u3000\u3000{helper}好的：\n{q}怎么退款？\n"
                    f"{a}七天内可以退。\n\u3000\u3000{user}谢谢！\n", encoding="utf-8")
    report, problems = _imp(mem, chat)
    assert not problems
    assert _seq(mem, "text:chat") == [("user", "帮我写两条常见问题。"),
                                      ("assistant", f"好的：\n{q}怎么退款？\n{a}七天内可以退。"),
                                      ("user", "谢谢！")]
    assert [h.first_seq for h in mem.conversation("text:qa").search("门票", mode="fts")] == [3]
