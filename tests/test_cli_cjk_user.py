"""A user whose chats are in Chinese (and Japanese, Korean), following the docs literally:
what they saw go wrong, each pinned here."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import lossless
from lossless.importers import import_file
from tests.conftest import StoreTarget
from tests.test_cli import Run, run

__all__ = ["run"]  # the fixture, used by name

# each a chat saved by a CJK Windows in its "ANSI" code page, the first line as it reads
_LEGACY_CHATS = [
    ("big5", "big5", "用戶：請問資料庫怎麼備份？\n助手：可以使用 pg_dump，我們討論了備份策略。\n", "資料"),
    ("shift_jis", "shift_jis", "ユーザー：こんにちは、データベースの質問です\nアシスタント：はい、日本語で話します\n",
     "日本"),
    ("cp949", "euc_kr", "사용자: 안녕하세요 데이터베이스 질문입니다\n어시스턴트: 무엇을 도와드릴까요?\n", "안녕"),
    ("gb18030", "gbk", "用户：你好，我想订一张去上海的火车票。\n助手：好的，请问您哪天出发？\n", "火车"),
]


@pytest.mark.parametrize(("option", "saved_in", "chat", "word"), _LEGACY_CHATS,
                         ids=[c[0] for c in _LEGACY_CHATS])
def test_a_legacy_cjk_file_is_refused_naming_the_encoding_it_was_saved_in(
        store_target: StoreTarget, tmp_path: Path, option: str, saved_in: str, chat: str, word: str) -> None:
    """A Big5 (Taiwan), Shift_JIS or EUC-KR transcript was refused with "its bytes read as
    GB18030/GBK … import it with --encoding gb18030": their bytes do decode as GB18030, into
    rare and private-use characters, so following the advice stored mojibake. The refusal now
    names the encoding whose reading is made of usual characters, and shows the first line as
    it reads; with that option every message is stored as written."""
    path = tmp_path / f"记录-{option}.txt"
    path.write_bytes(chat.encode(saved_in))
    first = chat.splitlines()[0]
    with lossless.open(store_target(f"legacy-{option}"), embedder=None) as mem:
        with pytest.raises(lossless.ValidationError, match=f"--encoding {option} ") as refused:
            import_file(mem, path)
        assert "Nothing was imported" in str(refused.value) and mem.conversations() == []
        assert first in str(refused.value)  # the line as it reads in that encoding
        import_file(mem, path, encoding=option)
        (conversation,) = mem.conversations()
        stored = [m.content for m in mem.conversation(conversation.id).messages()]
        assert stored == [line.split("：", 1)[-1].split(": ", 1)[-1] for line in chat.splitlines()]
        assert [h.conversation_id for h in mem.search(word)] == [conversation.id]


def test_a_windows_1252_file_is_still_named_as_such(tmp_path: Path) -> None:
    """Accented Latin text also decodes as GB18030 (as rare hanzi): it stays cp1252."""
    path = tmp_path / "notes.txt"
    path.write_bytes("User: Résumé naïve façade Ärger\nAssistant: Grüße\n".encode("cp1252"))
    with lossless.open(":memory:", embedder=None) as mem, \
            pytest.raises(lossless.ValidationError, match="--encoding cp1252 "):
        import_file(mem, path)


def test_counts_of_one_read_as_one(run: Run) -> None:
    """`assemble` said "35 / 60 tokens in 1 messages" and grep / search "1 match(es)"."""
    assert run("add", "对话-小美", "我们明天去公园散步吧", "--role", "user")[0] == 0
    assert run("add", "对话-小美", "好的，颐和园门口见。Let's meet at 10am.", "--role", "assistant")[0] == 0
    status, out, err = run("assemble", "对话-小美", "--budget", "50", "--query", "公园在哪里？")
    assert status == 0, err
    assert " in 1 message ·" in out and "1 messages" not in out
    status, out, _ = run("assemble", "对话-小美", "--budget", "400")
    assert " in 2 messages ·" in out
    for command in ("grep", "search"):
        status, out, err = run(command, "对话-小美", "公园")
        assert status == 0, err
        assert out.rstrip().endswith("\n1 match") and "(es)" not in out
    status, out, _ = run("grep", "对话-小美", "10am 见")
    assert out.rstrip().endswith("\n1 match")
    run("add", "对话-小美", "公园里人很多", "--role", "user")
    status, out, _ = run("grep", "对话-小美", "公园")
    assert out.rstrip().endswith("\n2 matches")


def test_a_budget_that_fits_nothing_names_the_budget_that_does(run: Run) -> None:
    """`assemble --budget 40 --query 公园在哪里？` answered "the newest message alone is 20
    tokens; give a larger --budget": 40 is larger than 20, and the context needs more (the
    framing, the room kept for recall). The error now names the smallest budget that fits,
    and that budget does."""
    run("add", "对话-小美", "我们明天去公园散步吧", "--role", "user")
    run("add", "对话-小美", "好的，颐和园门口见。Let's meet at 10am.", "--role", "assistant")
    for extra in (("--query", "公园在哪里？"), ()):
        status, _, err = run("assemble", "对话-小美", "--budget", "20", *extra)
        assert status == 1
        match = re.search(r"the smallest budget that fits it (with this --query )?is --budget (\d+)", err)
        assert match is not None, err
        assert bool(match.group(1)) == bool(extra)
        needed = int(match.group(2))
        assert run("assemble", "对话-小美", "--budget", str(needed), *extra)[0] == 0
        assert run("assemble", "对话-小美", "--budget", str(needed - 1), *extra)[0] == 1


def test_erase_shows_whole_ids_in_a_pipe(run: Run) -> None:
    """`erase … --message 2` and `erase --list` printed their table at rich's 80 columns into
    a pipe: "msg_3ce6991e92…", "tomb_6cb2bc155…", "2026-11-27T13…", ids no one could copy."""
    run("add", "对话-小美", "我们明天去公园散步吧", "--role", "user")
    run("add", "对话-小美", "我的手机号是 13800138000，颐和园门口见。", "--role", "assistant")
    for args in (("--message", "2", "--reason", "用户要求删除个人信息（隐私）", "--by", "管理员"), ("--list",)):
        status, out, err = run("erase", "对话-小美", *args)
        assert status == 0, err
        (stone,) = run.json("erase", "对话-小美", "--list")
        assert stone["message_id"] in out and stone["id"] in out, out
        assert "用户要求删除个人信息（隐私）" in out and "管理员" in out and "…" not in out
        assert stone["erased_at"][:16].replace("T", " ") in out


def test_describe_and_expand_count_in_words(run: Run) -> None:
    """describe said "13 direct source(s)" and expand "2 item(s)": the count says which."""
    with lossless.open(run.db, embedder=None, context_window=2048) as mem:
        conv = mem.conversation("项目-杭州")
        conv.add_many([{"role": "user" if i % 2 == 0 else "assistant",
                        "content": f"第{i}轮：关于缓存过期时间，我们决定把超时时间设为{30 + i}秒。"} for i in range(60)])
        conv.compact(full=True)
        leaf = next(s for s in conv.summaries() if s.depth == 0)
        sources = leaf.last_seq - leaf.first_seq + 1
    status, out, err = run("describe", leaf.id)
    assert status == 0, err
    assert f"{sources} direct sources" in out and "(s)" not in out
    for tokens, items in (("30", "1 item,"), ("60", "2 items,")):
        status, out, err = run("expand", leaf.id, "--max-tokens", tokens)
        assert status == 0, err
        assert items in out and "(s)" not in out, out


def test_the_import_summary_counts_ignored_lines_in_words(run: Run) -> None:
    """A Codex rollout's summary read "ignored 4 non-message items (3 codex event_msg line, …)"."""
    rollout = Path(__file__).parent / "data" / "import" / \
        "rollout-2025-05-07T17-24-21-5973b6c0-94b8-487b-a530-2aeb6098ae0e.jsonl"
    status, out, err = run("import", rollout, "--no-wait")
    assert status == 0, err
    assert "(3 codex event_msg lines, 1 codex turn_context line)" in out, out


def test_files_counts_agree_with_their_nouns(run: Run, tmp_path: Path) -> None:
    """`files rm` said "removed 1 files (1 chunks)", `files stats` "1 files (1 markdown), 1 chunks"."""
    root = tmp_path / "ws"
    (root / "文档").mkdir(parents=True)
    (root / "文档" / "部署指南.md").write_text("# 部署指南\n\n数据库迁移前先备份。缓存过期时间为 30 分钟。\n",
                                           encoding="utf-8")
    (root / "代码.py").write_text('def 计算():\n    return "价格"\n', encoding="utf-8")
    status, out, err = run("index", root, "--root", root)
    assert status == 0, err
    assert out.startswith("2 files: 2 indexed") and "2 chunks written" in out
    status, out, err = run("files", "search", "缓存")
    assert status == 0 and "文档/部署指南.md:1-3" in out, err
    status, out, err = run("files", "rm", root / "代码.py")
    assert status == 0 and "removed 1 file (1 chunk)" in out, out + err
    status, out, err = run("files", "stats")
    assert status == 0 and out.startswith("1 file (1 markdown), 1 chunk, "), out


def test_a_time_bound_with_an_offset_and_one_without_are_compared(run: Run, store_target: StoreTarget) -> None:
    """`grep 会话 北京 --since 2024-05-01T02:00:00+08:00 --until 2024-04-30` (a Beijing time and a
    date) failed with "unexpected TypeError: can't compare offset-naive and offset-aware
    datetimes", a valid range as much as a reversed one. A bound without an offset is UTC, as
    the filters read it."""
    run("add", "会话", "北京时间上午九点开会", "--role", "user", "--created-at", "2024-05-01T09:00:00+08:00")
    for since, until, found in (("2024-04-30T02:00:00+08:00", "2024-05-01", 1),   # 04-29 18:00Z .. 05-01 end
                                ("2024-05-01T02:00:00+08:00", "2024-04-30", 0),   # 04-30 18:00Z .. 04-30 end
                                ("2024-04-30", "2024-05-01T09:00:00+08:00", 1),   # .. 05-01 01:00Z, inclusive
                                ("2024-04-30", "2024-05-01T08:59:59+08:00", 0)):
        for command in ("grep", "search"):
            result = run.json(command, "会话", "北京", "--since", since, "--until", until)
            assert result["count"] == found, (command, since, until)
    status, _, err = run("grep", "会话", "北京", "--since", "2024-05-02T09:00:00+08:00", "--until", "2024-05-01")
    assert status == 1 and "is after until" in err and "TypeError" not in err
    with lossless.open(store_target("mixed-bounds"), embedder=None) as mem:
        conv = mem.conversation("会话")
        conv.add(role="user", content="北京时间上午九点开会", created_at="2024-05-01T09:00:00+08:00")
        for mode in ("fts", "hybrid"):
            assert len(conv.search("北京", mode=mode, since="2024-04-30T02:00:00+08:00", until="2024-05-01")) == 1
            with pytest.raises(lossless.ValidationError, match="is after until"):
                conv.search("北京", mode=mode, since="2024-05-02T09:00:00+08:00", until="2024-05-01")


def test_export_counts_agree_with_their_nouns(run: Run, tmp_path: Path) -> None:
    """`export 对话:1 -o x.jsonl` said "对话:1: 1 messages → x.jsonl"."""
    run("add", "对话:1", "只有一条消息", "--role", "user")
    status, out, err = run("export", "对话:1", "-o", tmp_path / "x.jsonl")
    assert status == 0, err
    assert out.startswith("对话:1: 1 message → ") and "1 messages" not in out
    status, out, err = run("export", "--all", "-o", tmp_path / "all")
    assert status == 0 and "对话:1: 1 message → " in out and (tmp_path / "all").is_dir(), err


def test_show_counts_agree_with_their_nouns(run: Run) -> None:
    """`show 대화` of a one-message conversation said "대화 · 1 messages" and "raw tail #1–#1 · 1 messages"."""
    run("add", "대화", "안녕하세요，你好", "--role", "user")
    status, out, err = run("show", "대화")
    assert status == 0, err
    assert out.startswith("대화 · 1 message, ") and "· 1 message ·" in out and "1 messages" not in out


@pytest.mark.model
def test_embed_counts_agree_with_their_noun(run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    """`embed 中` said "中: 1 retrieval units embedded, 1 left to keyword search …"."""
    monkeypatch.setenv("LOSSLESS_EMBEDDER", "local")
    run("add", "中", "我们明天去公园散步吧", "--role", "user", "--no-wait")
    run("add", "中", "The park is nice in spring", "--role", "user", "--no-wait")
    status, out, err = run("embed", "中")
    assert status == 0, err
    assert "中: 1 retrieval unit embedded, 1 left to keyword search" in " ".join(out.split()), out


def test_the_import_summary_counts_every_line_of_the_file(run: Run, tmp_path: Path) -> None:
    """``import 聊天记录.txt`` of a three-line chat whose answer goes on over a second line said
    "from 2 lines": the count stopped at the line the last message began on. A Claude Code
    reply written over two lines at the end of its file was one line short the same way."""
    chat = tmp_path / "聊天记录.txt"
    chat.write_text("用户：明天北京天气怎么样？\n助手：晴，气温 −2℃ 到 8℃，\n西北风三级。\n", encoding="utf-8")
    status, out, err = run("import", chat, "--no-wait")
    assert status == 0, err
    assert "('text:聊天记录') from 3 lines (text)" in out, out
    session = tmp_path / "session.jsonl"
    lines = [{"type": "user", "sessionId": "s1", "uuid": "u1", "message": {"role": "user", "content": "读一下 main.py"}},
             {"type": "assistant", "sessionId": "s1", "uuid": "u2",
              "message": {"id": "m1", "role": "assistant", "content": [{"type": "text", "text": "好的。"}]}},
             {"type": "assistant", "sessionId": "s1", "uuid": "u3",
              "message": {"id": "m1", "role": "assistant",
                          "content": [{"type": "tool_use", "id": "t1", "name": "Read", "input": {"path": "main.py"}}]}}]
    session.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")
    status, out, err = run("import", session, "--no-wait")
    assert status == 0, err
    assert "imported 2 messages into 1 conversation ('claude-code:s1') from 3 lines (claude-code)" in out, out


def test_index_reads_a_workspace_file_a_chinese_windows_saved_in_gbk(run: Run, tmp_path: Path) -> None:
    """``lossless index`` of a GBK source file stored its Chinese comments as U+FFFD (found
    by no Chinese word, shown garbled), and a GBK Markdown file was skipped as "binary"."""
    root = tmp_path / "项目"
    root.mkdir()
    (root / "config.py").write_bytes("import os\n\n# 读取配置文件，返回字典\ndef load_config(path):\n"
                                     "    with open(path) as f:\n        return dict(l.split('=') for l in f)\n"
                                     .encode("gbk"))
    (root / "部署.md").write_bytes("# 部署说明\n\n每天凌晨三点备份数据库。\n".encode("gbk"))
    (root / "說明.txt").write_bytes("資料庫每天備份一次，保留三十天。\n".encode("big5"))
    (root / "latin1.txt").write_bytes("Café crème brûlée, the menu of the day. ".encode("latin-1") * 20)
    status, out, err = run("index", root)
    assert status == 0, err
    assert "4 indexed" in out and " 0 skipped" in out, out
    for word, path, line in (("配置", "config.py", "# 读取配置文件，返回字典"), ("凌晨", "部署.md", "每天凌晨三点备份数据库。"),
                             ("備份", "說明.txt", "資料庫每天備份一次，保留三十天。")):
        hits = run.json("files", "search", word)
        assert [h["path"] for h in hits] == [path], (word, hits)
        assert line in hits[0]["text"] and "\ufffd" not in hits[0]["text"]
    # text in no CJK code page is read as before: UTF-8 with replacement characters
    latin = run.json("files", "search", "menu of the day")
    assert latin[0]["path"] == "latin1.txt" and "\ufffd" in latin[0]["text"]


def test_a_compressed_file_or_a_database_is_named_not_taken_for_legacy_text(run: Run, tmp_path: Path) -> None:
    """``import 聊天.jsonl.gz`` said the file "is in a legacy encoding (Windows-1252 …): import
    it with --encoding cp1252", which imports garbage; a store's own ``.db`` and a PDF said
    "cannot tell the format: give --format". Each is now named, with what to do, and nothing
    is stored; the same from standard input."""
    import bz2
    import gzip
    import io
    import lzma
    import sqlite3

    chat = "".join(json.dumps({"role": role, "content": text}, ensure_ascii=False) + "\n"
                   for role, text in (("user", "北京明天天气怎么样？"), ("assistant", "晴，西北风三级。"))).encode()
    (tmp_path / "聊天.jsonl.gz").write_bytes(gzip.compress(chat))
    (tmp_path / "聊天.jsonl.bz2").write_bytes(bz2.compress(chat))
    (tmp_path / "聊天.jsonl.xz").write_bytes(lzma.compress(chat))
    sqlite3.connect(tmp_path / "旧库.db").execute("CREATE TABLE t (x)").connection.close()
    (tmp_path / "记录.pdf").write_bytes(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<<>>\nendobj\n")
    for name, said in (("聊天.jsonl.gz", "is a gzip-compressed file, not a chat log: decompress it"),
                       ("聊天.jsonl.bz2", "is a bzip2-compressed file"), ("聊天.jsonl.xz", "is an xz-compressed file"),
                       ("旧库.db", "is an SQLite database, not a chat log"), ("记录.pdf", "is a PDF document")):
        status, out, err = run("import", tmp_path / name)
        assert status == 1 and said in err and "--encoding" not in err and "--format" not in err, err
        assert "Traceback" not in err
    with lossless.open(tmp_path / "api.db", embedder=None) as mem:
        with pytest.raises(lossless.ValidationError, match="<stdin> is a gzip-compressed file"):
            lossless.importers.import_stream(mem, io.BytesIO(gzip.compress(chat)), name="<stdin>")
        assert mem.store.list_conversations() == []
    (tmp_path / "聊天.jsonl").write_bytes(chat)  # decompressed, it imports
    status, out, err = run("import", tmp_path / "聊天.jsonl", "--no-wait")
    assert status == 0 and "imported 2 messages" in out, err


def _whole(text: str) -> bool:
    """No flag split from its pair (counted from the start of each run), no joiner, mark or
    skin tone left at an end."""
    import unicodedata

    body = text.strip("…")
    if (not body or body[-1] == "\u200d" or body[0] in "\u200d\ufe0f\u20e3" or "\U0001f3fb" <= body[0] <= "\U0001f3ff"
            or unicodedata.category(body[0]).startswith("M")):
        return False
    flags = re.findall("[\U0001f1e6-\U0001f1ff]+", body)
    return all(len(run) % 2 == 0 for run in flags) and all(run[:2] in {"🇨🇳", "🇯🇵"} for run in flags)


def test_snippets_and_titles_never_cut_a_flag_or_a_joined_emoji(run: Run) -> None:
    """``grep 旗 关键词`` over 🇨🇳🇨🇳… showed …🇳🇨🇳🇨… (every flag paired with the wrong half:
    New Caledonia's), and ended on a dangling ZWJ (👨‍👩‍); ``ls`` cut titles the same way."""
    from lossless.cli.render import one_line
    from lossless.core.graphemes import cluster_start

    texts = ["a" + "🇨🇳" * 100 + "关键词" + "👨‍👩‍👧‍👦" * 60, "b" + "🇯🇵" * 100 + "关键词" + "e\u0301" * 200,
             "甲" + "👍🏽" * 30 + "关键词" + "1️⃣" * 80]
    for text in texts:
        status, _, err = run("add", "旗", "--role", "user", "--content", text, "--no-wait")
        assert status == 0, err
    hits = run.json("grep", "旗", "关键词")["hits"]
    assert len(hits) == 3
    for hit in hits:
        assert "关键词" in hit["snippet"] and _whole(hit["snippet"]), hit["snippet"]
    for width in range(2, 90):
        for text in texts:
            cut = one_line(text, width)
            assert len(cut) <= width and _whole(cut), (width, cut)
    assert cluster_start("x🇨🇳🇨🇳", 2) == 1 and cluster_start("x🇨🇳🇨🇳", 3) == 3 and cluster_start("ae\u0301", 2) == 1
    assert cluster_start("a\r\nb", 2) == 1 and cluster_start("abc", 1) == 1


def test_a_gbk_locale_still_exports_and_prints_utf8_into_a_pipe(tmp_path: Path) -> None:
    """Under a GBK locale (a Chinese Windows redirecting ``>``, a ``zh_CN.GBK`` shell),
    ``lossless export 对话 > backup.jsonl`` wrote GBK, which ``import`` refuses, and stopped
    at the first emoji with "unexpected UnicodeEncodeError" (exit 1, the file cut there);
    ``grep`` and ``--json`` of a message with an emoji printed nothing. Into a pipe or a
    file the output is UTF-8 now, and the export reads back exactly."""
    import os
    import subprocess
    import sys

    db, copy = tmp_path / "gbk.db", tmp_path / "copy.db"
    env = {**os.environ, "PYTHONIOENCODING": "gbk", "LOSSLESS_EMBEDDER": "none",
           "PYTHONPATH": str(Path(lossless.__file__).parent.parent)}

    def cli(*args: str, data: bytes | None = None, target: Path = db) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run([sys.executable, "-m", "lossless", "--db", str(target), *args], input=data,
                              capture_output=True, env=env, timeout=120, check=False)

    for role, text in (("user", "周末去哪里玩？🎉"), ("assistant", "可以去香山看红叶 🍁，人不多。")):
        done = cli("add", "对话", "--role", role, "--content", text, "--no-wait")
        assert done.returncode == 0, done.stderr.decode("utf-8", "replace")
    exported = cli("export", "对话")
    assert exported.returncode == 0 and b"Traceback" not in exported.stderr, exported.stderr
    lines = [json.loads(line) for line in exported.stdout.decode("utf-8").splitlines()]
    assert [m["content"] for m in lines] == ["周末去哪里玩？🎉", "可以去香山看红叶 🍁，人不多。"]
    assert cli("import", "-", "--no-wait", data=exported.stdout, target=copy).returncode == 0
    assert cli("export", "对话", target=copy).stdout == exported.stdout
    found = cli("grep", "对话", "香山")
    assert found.returncode == 0 and "🍁" in found.stdout.decode("utf-8"), found.stderr
    hits = json.loads(cli("--json", "grep", "对话", "香山").stdout.decode("utf-8"))["hits"]
    assert [h["snippet"] for h in hits] == ["可以去香山看红叶 🍁，人不多。"]


def test_text_piped_to_add_under_a_gbk_locale_is_stored_as_written(tmp_path: Path) -> None:
    """Under a GBK locale, ``echo 你好🎉 | lossless add 甲 --role user`` (UTF-8 in the pipe)
    stored the mojibake 浣犲ソ馃帀, and so ``lossless expand X | lossless add Y``, whose
    output into a pipe is UTF-8, did not give the text back. UTF-8 is read as UTF-8 now,
    other bytes in the locale's encoding (GBK piped on a Chinese Windows), line ends as
    they are."""
    import os
    import subprocess
    import sys

    db = tmp_path / "gbk.db"
    env = {**os.environ, "PYTHONIOENCODING": "gbk", "LOSSLESS_EMBEDDER": "none",
           "PYTHONPATH": str(Path(lossless.__file__).parent.parent)}

    def cli(*args: str, data: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run([sys.executable, "-m", "lossless", "--db", str(db), *args], input=data,
                              capture_output=True, env=env, timeout=120, check=False)

    for data in ("你好🎉\n".encode(), "你好世界\r\n".encode("gbk")):
        done = cli("add", "甲", "--role", "user", "--no-wait", data=data)
        assert done.returncode == 0, done.stderr.decode("utf-8", "replace")
    assert cli("memory", "add", data="我喜欢喝茶🍵".encode()).returncode == 0
    exported = [json.loads(line)["content"] for line in cli("export", "甲").stdout.decode("utf-8").splitlines()]
    assert exported == ["你好🎉\n", "你好世界\r\n"]
    memories = json.loads(cli("--json", "memory", "ls").stdout.decode("utf-8"))
    assert [m["content"] for m in memories] == ["我喜欢喝茶🍵"]


def test_describe_quotes_why_a_message_matters_without_cutting_a_flag_or_a_joined_emoji(run: Run) -> None:
    """``describe`` quoted the words an importance reason matched with 24 characters either
    side, cut anywhere: “…🇳🇨🇳🇨…我们决定用 PostgreSQL👨‍👩‍👧👨‍…” (flags paired with the wrong
    half, a ZWJ left dangling)."""
    text = "🇨🇳" * 20 + "。我们决定用 PostgreSQL" + "👨‍👩‍👧" * 20
    status, out, err = run("add", "决定", "--role", "user", "--content", text, "--no-wait")
    assert status == 0, err
    described = run.json("describe", out.split()[-1])
    quotes = [r["evidence"] for r in described["importance"]["reasons"] if "决定" in r["evidence"]]
    assert quotes and all(_whole(q) for q in quotes), quotes


def test_a_lone_surrogate_escape_is_named_as_such_not_as_bad_utf8(run: Run, tmp_path: Path) -> None:
    """A JSON line whose text was cut inside an emoji (``"你好\\ud83d"``) was skipped as "not
    valid UTF-8 (undecodable character at position 2)", though the file is valid UTF-8: the
    user checked the file's encoding and found nothing wrong. The reason names the lone
    surrogate and where it comes from; bytes that did not decode are named as bytes."""
    path = tmp_path / "cut.jsonl"
    path.write_text('{"role": "user", "content": "你好\\ud83d"}\n{"role": "assistant", "content": "好的\\ud83d\\ude00"}\n',
                    encoding="utf-8")
    status, out, err = run("import", path, "--no-wait")
    assert status == 1 and "imported 1 message" in out, out
    assert "line 1: invalid message: content is not valid UTF-8 (a lone surrogate U+D83D at position 2" in err, err
    assert "JSON \\ud83d escape without its other half" in err, err
    with pytest.raises(lossless.ValidationError, match=r"undecodable byte 0xc4 at position 0"):
        lossless.core.validate.check_text("\udcc4\udce3", "content")


@pytest.mark.parametrize("first", [b"PK\x03\x04", b"\x1f\x8b\x08\x00", b"SQLite format 3\x00", b"%PDF-1.4"],
                         ids=["zip", "gzip", "sqlite", "pdf"])
def test_a_first_line_that_looks_like_an_archive_before_json_lines_is_one_bad_line(first: bytes) -> None:
    """The refusal of archives and compressed files by their first bytes does not take a
    JSON-lines stream whose first line is junk for one: the lines after it are imported
    (found by the property test when the refusal was first applied to streams)."""
    import io

    lines = b"".join(json.dumps({"conversation": "u", "role": "user", "content": f"第{i}条"}, ensure_ascii=False)
                     .encode() + b"\n" for i in range(5))
    with lossless.open(":memory:", embedder=None) as mem:
        report = lossless.importers.import_stream(mem, io.BytesIO(first + b"\n" + lines), name="chat.jsonl")
        assert report.added["u"] == 5 and [p.line for p in report.skipped] == [1]
