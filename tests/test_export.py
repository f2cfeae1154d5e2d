"""Export: OpenAI JSONL and DAG JSON, exact round trips through import, safe paths."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import lossless
from lossless.cli import main
from lossless.core.errors import ValidationError
from lossless.core.types import Message
from lossless.export import export_conversation, export_to_path, file_name_for
from lossless.importers import import_file
from tests.backends import raw_query
from tests.conftest import StoreTarget

T0 = datetime(2024, 3, 1, 9, 0, 0, 123456, tzinfo=UTC)
FIELDS = ("seq", "role", "content", "name", "tool_calls", "tool_call_id", "created_at", "metadata",
          "external_id", "token_count")


def _fill(conv: lossless.Conversation, n: int = 90) -> None:
    batch: list[dict[str, Any]] = [{"role": "system", "content": "You are Atlas.", "created_at": T0}]
    for i in range(n):
        t = T0 + timedelta(minutes=7 * i, microseconds=i)
        if i % 9 == 4:
            call = f"call_{i}"
            batch.append({"role": "assistant", "content": None, "created_at": t, "tool_calls": [
                {"id": call, "type": "function", "function": {"name": "lookup", "arguments": f'{{"van": {i}}}'}}]})
            batch.append({"role": "tool", "tool_call_id": call, "content": f"van {i}: 在波尔图 ✓", "created_at": t,
                          "metadata": {"ms": i}})
        elif i % 2:
            batch.append({"role": "assistant", "content": f"Reply {i} with [bold]markup[/bold]. " + "word " * 30,
                          "created_at": t, "external_id": f"r{i}"})
        else:
            batch.append({"role": "user", "name": "maya", "created_at": t, "content": [
                {"type": "text", "text": f"Question {i} about depot ZX-{i}"},
                {"type": "image_url", "image_url": {"url": f"https://example.com/{i}.png"}}]})
    batch.append({"role": "user", "content": "naive time", "created_at": datetime(2024, 4, 1, 8, 30)})
    conv.add_many(batch)


def _stored_hashes(db: str, conversation: str) -> list[str]:
    rows = raw_query(db, "SELECT content_hash FROM messages WHERE conversation_id = ? ORDER BY seq", (conversation,))
    return [r[0] for r in rows]


def _fields(msgs: list[Message]) -> list[tuple[Any, ...]]:
    return [tuple(getattr(m, f) for f in FIELDS) for m in msgs]


@pytest.mark.parametrize("fmt", ["openai-jsonl", "json"])
def test_export_import_round_trips_exactly(store_target: StoreTarget, tmp_path: Path, fmt: str) -> None:
    src_db, dst_db = store_target("src"), store_target("dst")
    with lossless.open(src_db, embedder=None, context_window=2048) as src:
        conv = src.conversation("depot", metadata={"user": "maya"})
        _fill(conv)
        conv.compact(full=True)
        assert conv.summaries()  # the JSON export carries a DAG
        out = tmp_path / f"depot.{fmt}"
        path, n_messages, n_summaries = export_to_path(conv, out, fmt)
        assert path == out and n_messages == src.store.last_seq("depot")
        assert n_summaries == (len(conv.summaries()) if fmt == "json" else 0)
        original = conv.messages()
    with lossless.open(dst_db, embedder=None, context_window=2048) as dst:
        report = import_file(dst, out)
        assert not report.skipped and report.added["depot"] == len(original)
        copy = dst.conversation("depot").messages()
        assert _fields(copy) == _fields(original)
        if fmt == "json":
            assert dst.conversation("depot").info.metadata == {"user": "maya"}
            assert sum(report.ignored.values()) == n_summaries > 1  # each summary counted, not the list
    assert _stored_hashes(dst_db, "depot") == _stored_hashes(src_db, "depot")


def test_json_export_holds_the_dag(store_target: StoreTarget, tmp_path: Path) -> None:
    with lossless.open(store_target("a"), embedder=None, context_window=2048) as mem:
        conv = mem.conversation("depot")
        _fill(conv, 60)
        conv.compact(full=True)
        buf = io.StringIO()
        messages, summaries = export_conversation(conv, buf, "json")
        doc = json.loads(buf.getvalue())
        assert doc["format"] == "lossless.conversation" and doc["conversation"]["id"] == "depot"
        assert len(doc["messages"]) == messages and len(doc["summaries"]) == summaries > 0
        ids = {m["id"] for m in doc["messages"]} | {s["id"] for s in doc["summaries"]}
        for node in doc["summaries"]:
            assert node["sources"] and all(ref["id"] in ids for ref in node["sources"])
        tops = [s for s in doc["summaries"] if s["parent"] is None and s["type"] != "root"]
        assert {s["id"] for s in tops} == {s.id for s in conv.frontier()}
        root = conv.root()  # the whole-conversation root: beside the frontier, over all of it
        assert root is not None and [s["id"] for s in doc["summaries"] if s["type"] == "root"][-1:] == [root.id]
        assert doc["messages"][0]["content_hash"] == _stored_hashes(store_target("a"), "depot")[0]


def test_export_paths_are_checked(store_target: StoreTarget, tmp_path: Path) -> None:
    with lossless.open(store_target("a"), embedder=None) as mem:
        conv = mem.conversation("c")
        conv.add("user", "hi")
        with pytest.raises(ValidationError, match="is a directory"):
            export_to_path(conv, tmp_path)
        with pytest.raises(ValidationError, match="no directory"):
            export_to_path(conv, tmp_path / "missing" / "c.jsonl")
        export_to_path(conv, tmp_path / "c.jsonl")
        with pytest.raises(ValidationError, match="exists: pass --force"):
            export_to_path(conv, tmp_path / "c.jsonl")
        export_to_path(conv, tmp_path / "c.jsonl", force=True)
        outside = tmp_path / "sub"
        outside.mkdir()
        with pytest.raises(ValidationError, match="outside"):
            export_to_path(conv, tmp_path / "sub" / ".." / "x.jsonl", inside=outside)
    assert not list(tmp_path.glob(".*.part"))  # no temporary file left behind
    name = file_name_for("../../etc/passwd", "openai-jsonl")
    assert "/" not in name and not name.startswith(".") and name.endswith(".jsonl")
    assert file_name_for("a/b", "json") != file_name_for("a_b", "json")


def test_export_cli(store_target: StoreTarget, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(store_target("cli"))
    with lossless.open(db, embedder=None) as mem:
        mem.conversation("claude-code:../../evil").add("user", "escape?")
        mem.conversation("plain").add("user", "hello", external_id="h1")

    def run(*args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        status = main(["--db", db, *args])
        out, err = capsys.readouterr()
        return status, out, err

    status, out, _ = run("export", "plain")
    assert status == 0 and json.loads(out)["external_id"] == "h1"
    status, _, err = run("export", "plain", "-o", str(tmp_path))
    assert status == 1 and "is a directory" in err
    status, out, _ = run("export", "plain", "-o", str(tmp_path / "plain.json"), "--format", "json")
    assert status == 0 and "plain: 1 message → " in out
    status, _, err = run("export", "plain", "-o", str(tmp_path / "plain.json"), "--format", "json")
    assert status == 1 and "--force" in err
    status, _, err = run("export", "nope")
    assert status == 1 and "no conversation 'nope'" in err
    status, _, err = run("export")
    assert status == 1 and "give a conversation or --all" in err
    # both: the message said "give a conversation or --all", which the command had been given
    status, _, err = run("export", "plain", "--all", "-o", str(tmp_path / "both"))
    assert status == 1 and "not both ('plain' and --all)" in err and not (tmp_path / "both").exists()
    backup = tmp_path / "backup"
    status, out, _ = run("--json", "export", "--all", "-o", str(backup))
    assert status == 0
    written = json.loads(out)["written"]
    assert sorted(w["conversation"] for w in written) == ["claude-code:../../evil", "plain"]
    assert all(Path(w["path"]).parent == backup for w in written)
    assert len(list(backup.iterdir())) == 2


@pytest.mark.parametrize("conversation_id", ["对话-小美", "会話-日本語", "-rm -rf", ".hidden", "हिन्दी बातचीत",
                                             "a\u202eexe.txt", "长" * 200, "C:\\Users\\x|y?*<>\"", " ", "CON"])
def test_export_file_names_keep_any_script_and_stay_safe(conversation_id: str) -> None:
    name = file_name_for(conversation_id, "openai-jsonl")
    stem = name.removesuffix(".jsonl").rsplit("-", 1)[0]
    assert name.endswith(".jsonl") and not name.startswith(("-", ".", "_"))
    assert not set(name) & set('/\\:*?"<>| \u202e') and len(name.encode("utf-8")) <= 160
    assert all(c in stem for c in conversation_id if c.isalpha())  # letters of every script kept
    assert name != file_name_for(conversation_id + "_", "openai-jsonl")  # the hash keeps ids apart


def test_export_all_names_read_back_by_import(store_target: StoreTarget, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """`export --all` of conversations named in Chinese and Japanese: readable names that
    `lossless import NAME` takes as they are (a name starting with `-` would be an option)."""
    db = str(store_target("cjk"))
    with lossless.open(db, embedder=None) as mem:
        for cid in ("对话-小美", "会話-日本語"):
            mem.conversation(cid).add("user", "你好")
    assert main(["--db", db, "export", "--all", "-o", str(tmp_path / "out")]) == 0
    names = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert [n.rsplit("-", 1)[0] for n in names] == ["会話-日本語", "对话-小美"]
    monkeypatch.chdir(tmp_path / "out")
    again = str(tmp_path / "again.db")
    for name in names:
        assert main(["--db", again, "import", name, "--no-wait"]) == 0, capsys.readouterr().err
    with lossless.open(again, embedder=None) as mem:
        assert sorted(c.id for c in mem.conversations()) == ["会話-日本語", "对话-小美"]


def test_jsonl_export_carries_conversation_metadata(store_target: StoreTarget, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """The JSONL export once held messages only: a conversation's title and metadata were
    lost on export → import. A first line now carries them; a file without it (an older
    export) still imports, and a conversation without metadata still exports messages only."""
    db, copy, other = store_target("meta"), store_target("copy"), store_target("other")
    metadata = {"title": "小美的生日 party", "user_id": "maya", "tags": ["家庭", "plans"]}
    with lossless.open(db, embedder=None) as mem:
        conv = mem.conversation("对话-小美", metadata=metadata)
        conv.add("user", "小美的生日是几号？")
        conv.add("assistant", "March 3rd — 三月三日。")
        mem.conversation("bare").add("user", "no metadata here")
    out = tmp_path / "对话.jsonl"
    assert main(["--db", str(db), "export", "对话-小美", "-o", str(out)]) == 0
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert lines[0] == {"conversation": {"id": "对话-小美", "metadata": metadata}, "messages": []}
    assert [line["content"] for line in lines[1:]] == ["小美的生日是几号？", "March 3rd — 三月三日。"]
    capsys.readouterr()
    assert main(["--db", str(copy), "import", str(out), "--no-wait"]) == 0, capsys.readouterr().err
    assert "imported 2 messages" in capsys.readouterr().out
    with lossless.open(copy, embedder=None) as mem:
        restored = mem.conversation("对话-小美")
        assert restored.info.metadata == metadata
        assert [m.content for m in restored.messages()] == ["小美的生日是几号？", "March 3rd — 三月三日。"]
    # into another conversation: the metadata goes with the messages
    assert main(["--db", str(other), "import", str(out), "--conversation", "renamed", "--no-wait"]) == 0
    with lossless.open(other, embedder=None) as mem:
        assert mem.conversation("renamed").info.metadata == metadata
    # an older export (messages only) still reads back; a conversation without metadata has no extra line
    old = tmp_path / "old.jsonl"
    old.write_text("\n".join(json.dumps(line, ensure_ascii=False) for line in lines[1:]) + "\n", encoding="utf-8")
    assert main(["--db", str(other), "import", str(old), "--no-wait"]) == 0
    with lossless.open(other, embedder=None) as mem:
        assert len(mem.conversation("对话-小美").messages()) == 2
    with lossless.open(db, embedder=None) as mem:
        buf = io.StringIO()
        assert export_conversation(mem.conversation("bare"), buf) == (1, 0)
        assert [json.loads(line)["content"] for line in buf.getvalue().splitlines()] == ["no metadata here"]
