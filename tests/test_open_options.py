"""lossless.open with a model name instead of a window, and the summarizer chosen by
argument, environment or CLI flag (against the fake OpenAI server)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import lossless
from lossless.cli.main import main
from lossless.core.models import history_limits
from lossless.summarize.extractive import ExtractiveSummarizer
from lossless.summarize.openai_chat import OpenAISummarizer
from tests.conftest import StoreTarget, chat
from tests.fake_openai import FakeOpenAIServer, fake_openai

__all__ = ["fake_openai"]  # the fixture, imported for pytest to find


def test_a_named_model_sets_window_and_limits(store_target: StoreTarget, tmp_path: Path) -> None:
    mem = lossless.open(store_target("m"), embedder=None, model="gpt-4o")
    limits = history_limits(128_000)
    assert mem.config.context_window == limits.budget_tokens
    assert mem.config.context_threshold == 0.8
    assert mem.config.fresh_tail_count == limits.fresh_tail_count
    assert mem.config.compact_after_messages == limits.max_history_messages
    # explicit values win over the model's
    mem2 = lossless.open(store_target("m2"), embedder=None, model="claude-sonnet-4-5", context_window=50_000)
    assert mem2.config.context_window == 50_000 and mem2.config.compact_after_messages == 200


def test_a_saved_model_is_remembered(store_target: StoreTarget, tmp_path: Path) -> None:
    mem = lossless.open(store_target("s"), embedder=None)
    mem.save_settings(model="llama3.1:8b")
    mem.close()
    again = lossless.open(store_target("s"), embedder=None)
    assert again.config.model == "llama3.1:8b" and again.config.compact_after_messages == 100


def test_an_unknown_model_is_a_clear_error(store_target: StoreTarget, tmp_path: Path) -> None:
    with pytest.raises(lossless.ValidationError, match="zz-model-9"):
        lossless.open(store_target("u"), embedder=None, model="zz-model-9")


def test_summarizer_by_name_and_environment(store_target: StoreTarget, tmp_path: Path, fake_openai: FakeOpenAIServer,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    assert isinstance(lossless.open(":memory:", embedder=None).summarizer, ExtractiveSummarizer)
    monkeypatch.setenv("LOSSLESS_SUMMARIZER", "openai")
    monkeypatch.setenv("LOSSLESS_SUMMARIZER_BASE_URL", fake_openai.base_url)
    monkeypatch.setenv("LOSSLESS_SUMMARIZER_MODEL", "tiny-summarizer")
    mem = lossless.open(store_target("e"), embedder=None, context_window=2048)
    assert isinstance(mem.summarizer, OpenAISummarizer)
    conv = mem.conversation("c")
    conv.add_many(chat(60, words=20))
    assert mem.wait_idle(30)
    assert conv.summaries()
    sent = fake_openai.chat_requests()
    assert sent and all(r.body["model"] == "tiny-summarizer" for r in sent)
    stats = conv.stats()
    assert stats.usage.summarizer_calls >= len(sent) - 1 and stats.usage.summarizer_input_tokens > 0
    assert 0 < stats.usage.summarizer_cost_ratio < 5
    with pytest.raises(lossless.ValidationError, match="unknown summarizer"):
        lossless.open(":memory:", embedder=None, summarizer="gpt")


def test_cli_summarizer_flags(store_target: StoreTarget, tmp_path: Path, fake_openai: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch,
                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    db = store_target("cli")
    source = tmp_path / "in.jsonl"
    source.write_text("\n".join(json.dumps({k: (v.isoformat() if hasattr(v, "isoformat") else v)
                                            for k, v in m.items()}) for m in chat(60, words=20)))
    assert main(["--db", str(db), "--window", "2048", "import", str(source), "--conversation", "c"]) == 0
    assert main(["--db", str(db), "--summarizer", "openai", "--summarizer-model", "m-1",
                 "compact", "c", "--full"]) == 0
    assert fake_openai.chat_requests() and fake_openai.chat_requests()[-1].body["model"] == "m-1"
    capsys.readouterr()
    assert main(["--db", str(db), "--json", "stats", "c"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["summarizer_calls"] > 0 and "openai" in " ".join(stats["summaries_by_summarizer"])
    assert main(["--db", str(db), "--model", "no-such-model-x", "stats"]) == 1
    assert "no-such-model-x" in capsys.readouterr().err


# -- a path's directory must exist; only the default location is created ------------------


@pytest.mark.sqlite_only(reason="about SQLite file paths")
def test_open_refuses_a_path_whose_directory_does_not_exist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A typo in a path is an error naming the missing directory, in the API as in the CLI
    (issue 30): nothing is created, neither the folders nor an empty store."""
    missing = tmp_path / "no" / "such" / "dir" / "x.db"
    for given in (missing, str(missing), f"sqlite:///{missing}"):
        with pytest.raises(lossless.StoreError, match=r"no directory .*dir for the SQLite database 'x.db'"):
            lossless.open(given, embedder=None)
    monkeypatch.setenv("LOSSLESS_DB", str(missing))
    with pytest.raises(lossless.StoreError, match="no directory"):
        lossless.open(embedder=None)
    a_file = tmp_path / "plain.txt"
    a_file.write_text("not a folder")
    with pytest.raises(lossless.StoreError, match="no directory"):
        lossless.open(a_file / "x.db", embedder=None)
    assert not (tmp_path / "no").exists()
    # an existing directory is fine, and the file is created in it
    monkeypatch.delenv("LOSSLESS_DB")
    with lossless.open(tmp_path / "x.db", embedder=None) as mem:
        mem.conversation("c").add(role="user", content="hi")
    assert (tmp_path / "x.db").is_file()


@pytest.mark.sqlite_only(reason="the default store is a SQLite file under $LOSSLESS_HOME")
def test_the_default_location_is_created(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LOSSLESS_DB", raising=False)
    monkeypatch.setenv("LOSSLESS_HOME", str(tmp_path / "new" / "home"))
    with lossless.open(embedder=None) as mem:
        mem.conversation("c").add(role="user", content="hi")
    assert (tmp_path / "new" / "home" / "lossless.db").is_file()


@pytest.mark.sqlite_only(reason="about SQLite file paths")
def test_the_cli_refuses_a_mistyped_path_and_creates_the_default_location(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOSSLESS_")}
    env.update(PYTHONPATH=str(root / "src"), LOSSLESS_EMBEDDER="none", LOSSLESS_HOME=str(tmp_path / "fresh" / "home"))

    def cli(*args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "lossless", *args], capture_output=True, text=True,
                              env={**env, **extra}, timeout=120, stdin=subprocess.DEVNULL)

    add = ("add", "c", "--role", "user", "--content", "hi")
    missing = tmp_path / "no-such-dir" / "x.db"
    for done in (cli("--db", str(missing), *add), cli(*add, LOSSLESS_DB=str(missing))):
        assert done.returncode == 1 and "no directory" in done.stderr and "Traceback" not in done.stderr
    assert not missing.parent.exists()
    done = cli(*add)  # no --db, no $LOSSLESS_DB: $LOSSLESS_HOME is created
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "fresh" / "home" / "lossless.db").is_file()
