"""Workspace files in the assembled context: a message that names an indexed file, or
says /context, brings that file's best chunks, inside the budget. On SQLite and on
PostgreSQL (``backend_target``)."""

from __future__ import annotations

from pathlib import Path

import lossless


def _tree(root: Path) -> None:
    (root / "src").mkdir(parents=True)
    (root / "src" / "retry.py").write_text(
        "import random\n\n\ndef compute_backoff(attempt: int) -> float:\n"
        "    \"\"\"Exponential backoff with jitter, capped at 30 seconds.\"\"\"\n"
        "    return min(30.0, 2 ** attempt) * random.uniform(0.5, 1.0)\n")
    (root / "docs").mkdir()
    (root / "docs" / "deploy.md").write_text("# Deploying\n\nRun `make release` then tag the commit with vX.Y.Z.\n")
    for i in range(20):
        (root / "src" / f"mod_{i}.py").write_text(f"def handler_{i}(event):\n    return {i}\n")


def test_a_named_file_and_context_command_bring_chunks(tmp_path: Path, backend_target: str) -> None:
    _tree(tmp_path / "ws")
    mem = lossless.open(backend_target, embedder=None)
    report = mem.files.index([tmp_path / "ws"])
    assert report.files_indexed == 22
    conv = mem.conversation("c")
    conv.add("user", "hi")
    conv.add("assistant", "hello")
    text = "\n".join(str(m["content"]) for m in conv.assemble(budget_tokens=3000,
                                                            query="why is src/retry.py so slow?").messages)
    assert "Workspace files" in text and "compute_backoff" in text and "src/retry.py:" in text
    ctx = conv.assemble(budget_tokens=3000, query="/context how do we deploy a release")
    text = "\n".join(str(m["content"]) for m in ctx.messages)
    assert "make release" in text and ctx.tokens <= 3000
    # nothing when the message names no file
    text = "\n".join(str(m["content"]) for m in conv.assemble(budget_tokens=3000, query="hello again").messages)
    assert "Workspace files" not in text
    # the whole-window (cache-stable) layout brings them too
    conv.add("user", "check src/retry.py please")
    text = "\n".join(str(m["content"]) for m in conv.assemble(query="check src/retry.py please").messages)
    assert "compute_backoff" in text
    mem.close()


def test_a_reopened_store_knows_its_index(tmp_path: Path, backend_target: str) -> None:
    _tree(tmp_path / "ws")
    mem = lossless.open(backend_target, embedder=None)
    mem.files.index([tmp_path / "ws"])
    mem.close()
    again = lossless.open(backend_target, embedder=None)
    conv = again.conversation("c")
    conv.add("user", "hi")
    text = "\n".join(str(m["content"]) for m in conv.assemble(budget_tokens=2000, query="open retry.py").messages)
    assert "compute_backoff" in text
    again.close()
