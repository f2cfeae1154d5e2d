"""The example agent (examples/agent.py) against the local fake OpenAI server: a tool call
round trip, memory kept across runs."""

from __future__ import annotations

import importlib.util
import io
import json
from pathlib import Path
from types import ModuleType

import openai
import pytest

from tests.conftest import StoreTarget
from tests.fake_openai import FakeOpenAIServer, fake_openai

__all__ = ["fake_openai"]  # the fixture, imported for pytest to find

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "agent.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("example_agent", EXAMPLE)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_example_agent_reads_a_file_with_a_tool(store_target: StoreTarget, tmp_path: Path, fake_openai: FakeOpenAIServer,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    agent = _load()
    monkeypatch.setattr(agent, "ROOT", tmp_path)
    (tmp_path / "notes.md").write_text("The release codename is BLUE HERON.\n")
    fake_openai.respond_next({
        "id": "c1", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": None,
            "tool_calls": [{"id": "call_1", "type": "function",
                            "function": {"name": "read_file", "arguments": json.dumps({"path": "notes.md"})}}]}}]})
    fake_openai.enqueue_chat("The codename is BLUE HERON.")
    client = openai.OpenAI(base_url=fake_openai.base_url, api_key="t", max_retries=0)
    out = io.StringIO()
    db = store_target("agent")
    assert agent.run(["--db", str(db), "--model", "gpt-4o-mini", "--once", "What is the codename?"],
                     client=client, out=out) == 0
    assert "BLUE HERON" in out.getvalue()
    second = fake_openai.chat_requests()[1].body["messages"]
    assert second[-1]["role"] == "tool" and "BLUE HERON" in second[-1]["content"]
    # a second run remembers the first
    fake_openai.enqueue_chat("Still BLUE HERON.")
    assert agent.run(["--db", str(db), "--model", "gpt-4o-mini", "--once", "And again?"], client=client, out=out) == 0
    third = fake_openai.chat_requests()[-1].body["messages"]
    assert any("BLUE HERON" in str(m.get("content")) for m in third[:-1])


def test_example_agent_refuses_paths_outside_the_workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    agent = _load()
    monkeypatch.setattr(agent, "ROOT", tmp_path)
    with pytest.raises(ValueError, match="outside the workspace"):
        agent.read_file("../../etc/passwd")
