"""The command line, run in-process through ``main([...])`` and once as a real process.

Every test points ``--db`` under ``tmp_path``, or at a test database with
``--store=postgres`` (and conftest sets ``LOSSLESS_HOME``), so nothing touches the user's
real data.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import zipfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import lossless
from lossless.cli import main
from lossless.store.urls import redact_url
from tests.conftest import StoreTarget

T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)


class Run:
    """``main([...])`` with ``--db`` filled in; returns (status, stdout, stderr)."""

    def __init__(self, db: str, capsys: pytest.CaptureFixture[str], *, on_postgres: bool = False) -> None:
        self.db = db
        self.capsys = capsys
        self.on_postgres = on_postgres

    def __call__(self, *args: str | Path) -> tuple[int, str, str]:
        self.capsys.readouterr()
        status = main(["--db", str(self.db), *map(str, args)])
        out, err = self.capsys.readouterr()
        assert "Traceback" not in out + err
        return status, out, err

    def json(self, *args: str | Path) -> Any:
        status, out, err = self("--json", *args)
        assert status == 0, err
        return json.loads(out)


@pytest.fixture
def run(store_target: StoreTarget, capsys: pytest.CaptureFixture[str]) -> Run:
    return Run(store_target("cli"), capsys, on_postgres=store_target.on_postgres)


def _messages(n: int, conversation: str | None = None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(n):
        msg: dict[str, Any] = {
            "role": "user" if i % 2 == 0 else "assistant",
            "content": f"Turn {i}: the depot in Porto needs van {100 + i} checked by Friday. " + "detail " * 30,
            "created_at": (T0 + timedelta(minutes=10 * i)).isoformat(),
            "external_id": f"ext-{i}",
        }
        if i % 2 == 0:
            msg["name"] = "Maya"
        if conversation is not None:
            msg["conversation"] = conversation
        out.append(msg)
    return out


def _write_jsonl(path: Path, lines: list[dict[str, Any] | str]) -> Path:
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines),
                    encoding="utf-8")
    return path


def test_add_ls_show_assemble_grep_describe_expand(run: Run, tmp_path: Path) -> None:
    status, out, _ = run("add", "c1", "--role", "system", "--content", "You are Atlas.")
    assert status == 0 and out.startswith("#1 msg_")
    status, out, _ = run("add", "c1", "--role", "user", "--name", "Maya", "--created-at", "2024-03-01T09:00:00Z",
                         "--content", "The [bold]alpha[/bold] depot code is ZX-41.")
    assert status == 0 and out.startswith("#2 ")
    assert run.json("add", "c1", "--role", "assistant", "--content", "Noted: ZX-41.")["seq"] == 3

    listing = run.json("ls")
    assert [(c["id"], c["messages"]) for c in listing] == [("c1", 3)]
    status, out, _ = run("ls")
    assert status == 0 and "c1" in out

    status, out, _ = run("show", "c1")
    assert status == 0
    assert "#2 user Maya The [bold]alpha[/bold] depot code is ZX-41." in out  # stored text, not markup

    # Enough history to compact, then the DAG shows summaries.
    _write_jsonl(tmp_path / "more.jsonl", _messages(80))
    assert run("import", tmp_path / "more.jsonl", "--conversation", "c1")[0] == 0
    status, out, _ = run("--window", "2048", "compact", "c1")
    assert status == 0 and "compacted 'c1'" in out
    tree = run.json("show", "c1")
    assert tree["roots"] and tree["tail"]
    assert tree["roots"][0]["first_seq"] == 1
    with_messages = run.json("show", "c1", "--messages")
    leaf_children = [c for n in _walk(with_messages["roots"]) if n["depth"] == 0 for c in n["children"]]
    assert {c["kind"] for c in leaf_children} == {"message"}
    assert len(leaf_children) + len(with_messages["tail"]) == 83
    status, out, _ = run("show", "c1", "--levels", "1", "--tail", "2")
    assert status == 0 and "sum_" in out and "older raw-tail messages" in out

    ctx = run.json("assemble", "c1", "--budget", "600", "--query", "depot code")
    assert set(ctx) == {"tokens", "budget_tokens", "messages", "items", "lag"}
    assert ctx["budget_tokens"] == 600 and 0 < ctx["tokens"] <= 600
    assert all("role" in m for m in ctx["messages"])
    status, out, _ = run("assemble", "c1", "--budget", "600")
    assert status == 0 and "/ 600 tokens" in out and "fresh_tail" in out

    hits = run.json("grep", "c1", "ZX-41")
    assert hits["count"] >= 1 and any(h["first_seq"] <= 2 <= h["last_seq"] for h in hits["hits"])
    status, out, _ = run("grep", "--all", "Porto", "--scope", "messages", "--limit", "3")
    assert status == 0 and "[c1]" in out

    leaf = next(n for n in _walk(tree["roots"]) if n["depth"] == 0)
    described = run.json("describe", leaf["id"])
    assert described["id"] == leaf["id"] and described["children"]
    status, out, _ = run("describe", leaf["id"])
    assert status == 0 and "direct source" in out

    expanded = run.json("expand", leaf["id"], "--max-tokens", "100000")
    assert [i["seq"] for i in expanded["items"]] == list(range(leaf["first_seq"], leaf["last_seq"] + 1))
    status, out, _ = run("expand", leaf["id"], "--max-tokens", "10")
    assert status == 0 and "--from-seq" in out

    stats = run.json("stats", "c1")
    assert stats["messages"] == 83 and stats["summaries"] >= 1
    totals = run.json("stats")
    assert totals["conversations"] == 1 and totals["messages"] == 83
    assert run.json("verify")["ok"] is True


def _walk(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for node in nodes:
        out.append(node)
        out.extend(_walk([c for c in node.get("children", []) if c["kind"] == "summary"]))
    return out


def test_expand_hints_work_when_followed(run: Run) -> None:
    """`expand --to sources` under a small budget: the command printed for the rest of a cut
    source, and the one for the next page, run as printed and give every source once, whole."""
    with lossless.open(run.db, context_window=2048, compaction="inline", embedder=None) as mem:
        conv = mem.conversation("zh")
        conv.add_many([{"role": "user" if i % 2 == 0 else "assistant",
                        "content": f"第{i}条：今天和小美去公园散步，然后看了电影《流浪地球》。"} for i in range(300)])
        top = max(conv.summaries(), key=lambda s: s.depth)
        sources = {ref.id: mem.store.get_summary(ref.id).content for ref in top.sources}
        order = [ref.id for ref in top.sources]
    assert len(order) > 1
    seen: list[str] = []
    cut = 0
    command: list[str] | None = ["expand", top.id, "--to", "sources", "--max-tokens", "30"]
    while command is not None:
        items = run.json(*command)["items"]
        status, out, _ = run(*command)
        assert status == 0
        hints = [h.split() for h in re.findall(r"`lossless ([^`]*)`", out)]
        for item in items:
            text = item["content"]
            if item.get("partial") and item["next_offset"] is not None:
                rest: list[str] | None = hints.pop(0)
                assert rest is not None and rest[:2] == ["expand", item["id"]]
                cut += 1
                while rest is not None:
                    status, chunk, err = run(*rest)
                    assert status == 0, err
                    text += chunk
                    more = re.search(r"continue with --offset (\d+)", err)
                    rest = ["expand", item["id"], "--offset", more.group(1)] if more else None
            assert text == sources[item["id"]]
            seen.append(item["id"])
        command = hints.pop(0) if hints else None
    assert seen == order and cut



def test_expand_options_that_do_not_go_together_are_named_as_flags(run: Run) -> None:
    """``expand msg_… --to sources`` answered "read it with offset, max_chars or page (to and
    from_seq are for summaries)": lcm_expand's parameter names, which the CLI does not take.
    It now names --offset, --max-chars, --page, --to and --from-seq."""
    with lossless.open(run.db, context_window=2048, compaction="inline", embedder=None) as mem:
        conv = mem.conversation("zh")
        conv.add_many([{"role": "user" if i % 2 == 0 else "assistant",
                        "content": f"第{i}条：今天和小美去公园散步，然后喝了咖啡。"} for i in range(200)])
        msg, summary = conv.messages()[0].id, conv.summaries()[0].id
    for argv in (["expand", msg, "--to", "sources"], ["expand", msg, "--from-seq", "2"],
                 ["expand", summary, "--page", "1", "--from-seq", "3"]):
        status, out, err = run(*argv)
        assert status == 1 and not out, argv
        assert "--from-seq" in err and "max_chars" not in err and "from_seq" not in err, err
    status, out, _ = run("expand", msg, "--max-chars", "4")
    assert status == 0 and out == "第0条："

def test_add_reads_stdin(run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("from a pipe"))
    assert run("add", "c", "--role", "user")[0] == 0
    assert run.json("show", "c")["tail"][0]["preview"] == "from a pipe"


def test_add_takes_the_text_as_an_argument(run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("never read"))
    assert run("add", "c", "--role", "user", "我用Python写了一个爬虫，每天凌晨3点执行。")[0] == 0
    assert run("add", "c", "我周末去了人民公园", "--role", "user", "--name", "Lin")[0] == 0
    assert [t["preview"] for t in run.json("show", "c")["tail"]] == ["我用Python写了一个爬虫，每天凌晨3点执行。",
                                                                      "我周末去了人民公园"]
    assert run.json("grep", "c", "爬虫")["hits"][0]["first_seq"] == 1
    assert run("add", "c", "--role", "user", "--", "-5 °C 서울에서 친구를 만났어요")[0] == 0  # after --: the text
    assert run.json("grep", "c", "친구")["hits"][0]["first_seq"] == 3
    status, _, err = run("add", "c", "--role", "user", "one", "two")
    assert status == 2 and "unrecognized arguments: one two" in err
    status, _, err = run("add", "c", "--role", "user", "twice", "--content", "twice")
    assert status == 2 and "given twice" in err and "TEXT" in err
    assert run.json("stats", "c")["messages"] == 3  # nothing stored by the refused adds




def test_add_with_an_external_id_already_stored_says_so(run: Run) -> None:
    """``add c 不同的内容 --external-id e1`` when e1 was stored already printed "#1 msg_…" and
    exited 0, exactly as a new message does, while the text given was dropped. The same
    message again now says "already stored" (exit 0, it is the idempotent retry); other
    content under that id is an error naming the message that holds it, and stores nothing."""
    status, first, _ = run("add", "c", "大家好", "--role", "user", "--name", "小美", "--external-id", "e1")
    assert status == 0
    status, again, err = run("add", "c", "大家好", "--role", "user", "--name", "小美", "--external-id", "e1")
    assert status == 0 and again == first and "already stored (external id 'e1'): nothing added" in err
    status, out, err = run("add", "c", "不同的内容", "--role", "user", "--external-id", "e1")
    assert status == 1 and not out and "Traceback" not in err
    assert "external id 'e1' is already stored in 'c' as #1" in " ".join(err.split()) and "not added" in err
    assert run("add", "c", "新的", "--role", "user", "--external-id", "e2")[0] == 0
    assert [(t["seq"], t["preview"]) for t in run.json("show", "c")["tail"]] == [(1, "大家好"), (2, "新的")]

def test_grep_and_search_take_the_query_after_the_options(run: Run) -> None:
    """``grep c --regex "咖."`` (the conversation, an option, then the query) was refused
    with "unrecognized arguments: 咖.": argparse had taken the conversation for the query.
    Now it means what it says, as ``grep c "咖." --regex`` does."""
    assert run("add", "c", "--role", "user", "我昨天去了公园，然后喝了一杯咖啡。")[0] == 0
    assert run("add", "d", "--role", "user", "咖喱饭很好吃")[0] == 0
    for args in (("grep", "c", "--regex", "咖."), ("grep", "c", "--scope", "messages", "--regex", "咖."),
                 ("grep", "c", "--limit", "5", "--", "咖啡"), ("search", "c", "--mode", "fts", "公园")):
        hits = run.json(*args)["hits"]
        assert [(h["conversation_id"], h["first_seq"]) for h in hits] == [("c", 1)], args
    assert run.json("grep", "--all", "--regex", "咖.")["count"] == 2  # --all: no conversation to move
    status, _, err = run("grep", "c", "--all", "--regex", "咖.")
    assert status == 2 and "not both" in err
    status, _, err = run("grep", "c", "--regex", "咖.", "extra")
    assert status == 2 and "unrecognized arguments" in err
    for command in ("grep", "search"):  # a bad bound is named by its flag ("since is not …" in grep)
        for flag, value in (("--since", "昨天"), ("--until", "2024-02-30")):
            status, _, err = run(command, "c", "咖啡", flag, value)
            assert status == 1 and f"error: {flag} is not an ISO 8601 date/time: '{value}'" in err, err


def test_a_refused_add_leaves_no_new_database(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """An empty message, a bad date, text that is not UTF-8 or an empty memory, given with a
    fresh ``--db``, were refused after the database had been created: an empty file was
    left behind. They are now refused before it is opened."""
    db = tmp_path / "新.db"
    refused: list[tuple[list[str], str]] = [
        (["add", "c", "", "--role", "user"], "needs content"),
        (["add", "c", "你好", "--role", "user", "--created-at", "昨天"], "not an ISO 8601 date/time: '昨天'"),
        (["add", "", "你好", "--role", "user"], "conversation id must be a non-empty string"),
        (["memory", "add", "  "], "content is empty")]
    for argv, said in refused:
        assert main(["--db", str(db), *argv]) == 1, argv
        assert said in capsys.readouterr().err, argv
        assert not db.exists(), argv
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"\xff\xfe"), errors="surrogateescape"))
    assert main(["--db", str(db), "add", "c", "--role", "user"]) == 1
    assert "not valid UTF-8" in capsys.readouterr().err and not db.exists()
    assert main(["--db", str(db), "add", "c", "你好", "--role", "user"]) == 0
    capsys.readouterr()
    assert main(["--db", str(db), "--json", "stats", "c"]) == 0
    assert json.loads(capsys.readouterr().out)["messages"] == 1


def test_an_unknown_model_takes_the_window_from_the_command_line(run: Run) -> None:
    """``--model 通义千问 --window 32000`` failed with "unknown model …: Pass context_window=
    explicitly", though --window is the CLI's way to do that; and without --window the
    error named only the Python API's remedies. Now the first works and the second names
    --window."""
    status, _, err = run("--model", "通义千问", "--window", "32000", "add", "c", "你好", "--role", "user")
    assert status == 0, err
    assert run.json("--model", "通义千问", "--window", "32000", "stats", "c")["context_window"] == 32_000
    status, _, err = run("--model", "通义千问", "stats", "c")
    assert status == 1 and "unknown model '通义千问'" in err and "--window N" in err

def test_import_skips_bad_lines_and_is_idempotent(run: Run, tmp_path: Path) -> None:
    good = _messages(6, conversation="imp")
    lines: list[dict[str, Any] | str] = [*good[:2], '{"role": "user", "content": broken', *good[2:4],
                                         {"role": "wizard", "content": "x", "conversation": "imp"}, "",
                                         {"role": "user", "content": "nowhere"}, *good[4:]]
    path = _write_jsonl(tmp_path / "chat.jsonl", lines)

    status, out, err = run("import", path)
    assert status == 1
    assert "line 3: invalid JSON" in err
    assert "line 6: invalid message: unknown role 'wizard'" in err
    # a line naming no conversation goes to one named after the file, as in the other formats
    assert "imported 7 messages into 2 conversations" in out and "skipped 2 lines" in out
    assert run.json("stats", "imp")["messages"] == 6 and run.json("stats", "openai:chat")["messages"] == 1

    again = run("--json", "import", path)
    assert again[0] == 1
    report = json.loads(again[1])
    assert report["added"] == 0 and report["already_stored"] == 7
    assert [s["line"] for s in report["skipped"]] == [3, 6]
    assert run.json("stats", "imp")["messages"] == 6


def test_import_conversation_option_and_stdin(run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _write_jsonl(tmp_path / "a.jsonl", _messages(3, conversation="ignored"))
    assert run("import", path, "--conversation", "chosen")[0] == 0
    assert [c["id"] for c in run.json("ls")] == ["chosen"]
    payload = "\n".join(json.dumps(m) for m in _messages(2)).encode()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(payload)))
    assert run("import", "-", "--conversation", "piped")[0] == 0
    assert run.json("stats", "piped")["messages"] == 2



def test_import_names_the_conversation_it_made(run: Run, tmp_path: Path) -> None:
    """``import 聊天记录.txt`` said "imported 4 messages into 1 conversation" without its id,
    and the docs called it ``text:<file name>``: a new user tried ``show text:聊天记录.txt``
    and got "no conversation". The summary now names the one conversation it wrote to (the
    file name without its extension), and that name works."""
    path = tmp_path / "聊天记录.txt"
    path.write_text("用户：你好，我想去公园散步。\n助手：北京有很多公园。\n", encoding="utf-8")
    status, out, _ = run("import", path)
    assert status == 0 and out.startswith("imported 2 messages into 1 conversation ('text:聊天记录') from 2 lines")
    assert run.json("stats", "text:聊天记录")["messages"] == 2
    status, out, _ = run("import", path)  # nothing written: no conversation to name
    assert status == 0 and out.startswith("imported 0 messages into 0 conversations from 2 lines (text)")
    two = _write_jsonl(tmp_path / "two.jsonl", [*_messages(1, conversation="甲"), *_messages(1, conversation="乙")])
    status, out, _ = run("import", two)
    assert status == 0 and out.startswith("imported 2 messages into 2 conversations from 2 lines")


def test_import_of_a_zip_archive_says_to_unzip_it(store_target: StoreTarget, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """A ChatGPT export arrives as a ZIP. ``import export.zip`` said "cannot tell the format:
    give --format", which no --format fixes (``--format chatgpt``: "invalid JSON"), and left
    an empty new database behind. Now both say it is a ZIP archive to unzip, before any
    database is created."""
    inner = tmp_path / "conversations.json"
    inner.write_text(json.dumps([{"title": "咖啡", "mapping": {}}], ensure_ascii=False), encoding="utf-8")
    archive = tmp_path / "export.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.write(inner, "conversations.json")
    db = tmp_path / "fresh.db"
    for extra in ([], ["--format", "chatgpt"]):
        assert main(["--db", str(db), "import", str(archive), *extra]) == 1
        err = capsys.readouterr().err
        assert "export.zip is a ZIP archive: unzip it" in err and "conversations.json" in err, err
    assert not db.exists()

def test_import_strict_writes_nothing_from_the_bad_batch(run: Run, tmp_path: Path) -> None:
    lines: list[dict[str, Any] | str] = [*_messages(3, conversation="s"), "not json"]
    path = _write_jsonl(tmp_path / "strict.jsonl", lines)
    status, _, err = run("import", path, "--strict")
    assert status == 1 and "error: line 4: invalid JSON" in err
    assert run("show", "s")[2].startswith("error:")  # nothing was written


def test_errors_are_one_line_without_traceback(run: Run, tmp_path: Path) -> None:
    if not run.on_postgres:  # a SQLite file not made yet (a PostgreSQL test database exists)
        status, _, err = run("show", "nope")
        assert status == 1 and err.startswith("error: no database at")
        assert not Path(run.db).exists()  # read commands do not create the store

    run("add", "c", "--role", "user", "--content", "hi")
    for args in (("show", "nope"), ("assemble", "nope"), ("grep", "nope", "x"), ("compact", "nope")):
        status, _, err = run(*args)
        assert status == 1 and err == "error: no conversation 'nope' in " + redact_url(run.db) + "\n"
    cases: list[tuple[str | Path, ...]] = [
        ("describe", "sum_missing"),
        ("expand", "msg_whatever"),
        ("add", "c", "--role", "user", "--created-at", "yesterday", "--content", "x"),
        ("add", "c", "--role", "tool", "--content", "no call id"),
        ("import", tmp_path / "missing.jsonl", "--conversation", "c"),
        ("grep", "c", "(unclosed", "--regex"),
        ("add", "c", "--role", "user", "--content", ""),
    ]
    for args in cases:
        status, out, err = run(*args)
        assert status == 1, args
        assert err.startswith("error: ") and out == "", args

    assert [c["id"] for c in run.json("ls")] == ["c"]  # refused adds created no conversation
    status, _, err = run("add", "fresh", "--role", "user", "--content", "")
    assert status == 1 and "needs content" in err
    assert [c["id"] for c in run.json("ls")] == ["c"]

    not_sqlite = tmp_path / "notes.txt"
    not_sqlite.write_text("just some text, certainly not a database\n" * 10)
    status = main(["--db", str(not_sqlite), "ls"])
    err = run.capsys.readouterr().err
    assert status == 1 and "is not a SQLite database" in err and "Traceback" not in err


def test_usage_errors_exit_2(run: Run) -> None:
    assert run("grep", "only-a-query")[0] == 2
    assert run("grep", "c", "q", "--all")[0] == 2
    assert run("add", "c", "--role", "wizard", "--content", "x")[0] == 2
    assert run("assemble", "c", "--budget", "0")[0] == 2
    assert run("frobnicate")[0] == 2
    assert run("--version")[0] == 0


def test_json_flag_before_or_after_the_command(run: Run) -> None:
    run("add", "c", "--role", "user", "--content", "hello")
    status, out, _ = run("ls", "--json")
    assert status == 0 and json.loads(out)[0]["id"] == "c"
    status, out, _ = run("--json", "stats")
    assert status == 0 and json.loads(out)["messages"] == 1


def test_subprocess_python_dash_m(store_target: StoreTarget, tmp_path: Path) -> None:
    db = store_target("proc")
    env = {**os.environ, "LOSSLESS_HOME": str(tmp_path / "home")}
    env.pop("LOSSLESS_DB", None)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "lossless", "--db", str(db), *args],
                              capture_output=True, text=True, env=env, timeout=120, check=False)

    added = cli("add", "p", "--role", "user", "--content", "over a real pipe")
    assert added.returncode == 0, added.stderr
    listed = cli("ls", "--json")
    assert listed.returncode == 0 and json.loads(listed.stdout)[0]["messages"] == 1
    missing = cli("show", "absent")
    assert missing.returncode == 1
    assert missing.stderr.startswith("error: no conversation 'absent'") and "Traceback" not in missing.stderr
    assert cli("--help").returncode == 0


@pytest.mark.sqlite_only(reason="the default store is a SQLite file under $LOSSLESS_HOME")
def test_default_db_honours_lossless_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("LOSSLESS_HOME", str(tmp_path / "home"))
    assert main(["add", "h", "--role", "user", "--content", "x"]) == 0
    assert (tmp_path / "home" / "lossless.db").exists()
    monkeypatch.setenv("LOSSLESS_DB", str(tmp_path / "env.db"))
    assert main(["add", "h", "--role", "user", "--content", "x"]) == 0
    assert (tmp_path / "env.db").exists()
    capsys.readouterr()


def test_demo_runs(run: Run, tmp_path: Path) -> None:
    status, out, err = run("demo", "--budget", "1500")
    assert status == 0, err
    for heading in ("1 · ingest", "2 · the summary DAG", "3 · context for one question",
                    "4 · lossless grep", "5 · lossless expand"):
        assert heading in out
    assert "1,500 tokens" in out or "/ 1500 tokens" in out
    assert redact_url(run.db) in out
    stats = run.json("stats", "demo")
    assert stats["summaries"] > 0 and stats["max_depth"] >= 1


def test_demo_runs_in_chinese(run: Run) -> None:
    status, out, err = run("demo", "--lang", "zh")
    assert status == 0, err
    for heading in ("1 · ingest", "2 · the summary DAG", "3 · context for one question",
                    "4 · lossless grep demo '缓存'", "5 · lossless expand"):
        assert heading in out
    assert "conversation: Chinese (--lang zh)" in out
    assert "我们当时定的商品详情缓存过期时间是多少？" in out  # the question, its evidence found
    assert re.search(r"商品详情缓存过期时间定为 \d+ 分钟' in the context: yes", out)
    assert "no matches for" not in out
    stats = run.json("stats", "demo")
    assert stats["summaries"] > 0 and stats["max_depth"] >= 1


def test_demo_refuses_an_unknown_language(run: Run) -> None:
    status, out, err = run("demo", "--lang", "xx")
    assert status == 2 and not out
    assert "--lang" in err and "'xx'" in err and "en" in err and "zh" in err


def test_window_is_remembered_by_the_database(store_target: StoreTarget, tmp_path: Path) -> None:
    from lossless.cli import main as cli_main

    db = store_target("w")
    assert cli_main(["--db", str(db), "--window", "4096", "add", "c", "--role", "user", "--content", "hi"]) == 0
    with lossless.open(db) as mem:
        assert mem.config.context_window == 4096


def test_search_command_hybrid_and_where(store_target: StoreTarget, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from lossless.cli import main as cli_main

    db = store_target("s")
    with lossless.open(db) as mem:
        mem.conversation("a", metadata={"user": "ann"}).add(role="user", content="the invoice job runs nightly at 02:00")
        mem.conversation("b", metadata={"user": "bob"}).add(role="user", content="bob's invoice job runs hourly")
    assert cli_main(["--db", str(db), "search", "a", "invoice job", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["count"] == 1 and out["hits"][0]["conversation_id"] == "a"
    assert cli_main(["--db", str(db), "search", "--where", "user=bob", "invoice", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {h["conversation_id"] for h in out["hits"]} == {"b"}
    assert cli_main(["--db", str(db), "search", "--where", "nokeyvalue", "x"]) == 2


@pytest.mark.model
def test_embed_command(store_target: StoreTarget, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from lossless.cli import main as cli_main

    db = store_target("e")
    with lossless.open(db) as mem:
        mem.conversation("a").add_many([{"role": "user", "content": f"note {i} about the deploy"} for i in range(5)])
    assert cli_main(["--db", str(db), "embed", "a"]) == 1  # LOSSLESS_EMBEDDER=none in tests
    assert "no embedder: LOSSLESS_EMBEDDER=none turns it off (unset it)" in capsys.readouterr().err
    # a semantic search names the same remedy, not the Python API's (embedder= to lossless.open)
    assert cli_main(["--db", str(db), "search", "a", "部署", "--mode", "semantic"]) == 1
    err = capsys.readouterr().err
    assert "LOSSLESS_EMBEDDER=none turns it off" in err and "lossless.open" not in err and "Traceback" not in err
    monkeypatch.setenv("LOSSLESS_EMBEDDER", "local")
    assert cli_main(["--db", str(db), "--json", "embed", "--all"]) == 0
    assert json.loads(capsys.readouterr().out)["embedded"]["a"] >= 5
    assert cli_main(["--db", str(db), "embed"]) == 2
