"""Layers point down: read every module's imports (with ast, so nothing is imported) and
fail on one that reaches up.

- The store, the summarizers, the embedders and the provider helpers import nothing from
  the facade (``lossless.Memory``, ``engine``, ``conversation``), the agent runtime
  (``agent``, ``tools``, ``emergency``, ``worker``) or the interfaces (``cli``,
  ``server``, ``integrations``) — not even under ``if TYPE_CHECKING:``.
- The CLI and the server have no import cycles among their own modules, counting the
  imports made inside functions too (a lazy import hides a cycle; it does not remove it).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src"
PACKAGE = SRC / "lossless"

LOWER_PACKAGES = ("store", "summarize", "embed", "providers")

# The package root counts as the facade: ``from lossless import Memory`` reaches up.
UPPER = ("lossless", "lossless.engine", "lossless.conversation", "lossless.agent", "lossless.compaction.worker",
         "lossless.cli", "lossless.server", "lossless.integrations")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_module(name: str) -> bool:
    relative = Path(*name.split("."))
    return (SRC / relative).with_suffix(".py").is_file() or (SRC / relative / "__init__.py").is_file()


def imported_modules(path: Path) -> Iterator[tuple[int, str]]:
    """(line, module) for every import in the file, at any depth. ``from a import b``
    names ``a.b`` when that is a module of ours, else ``a``."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # a relative import: resolve it against this module's package
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                child = f"{base}.{alias.name}"
                yield node.lineno, child if _is_module(child) else base


def _reaches_up(name: str) -> bool:
    return any(name == upper or (upper != "lossless" and name.startswith(upper + ".")) for upper in UPPER)


def _lower_modules() -> list[Path]:
    return sorted(path for package in LOWER_PACKAGES for path in (PACKAGE / package).rglob("*.py"))


@pytest.mark.parametrize("path", _lower_modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_lower_layers_import_nothing_from_above(path: Path) -> None:
    upward = [f"line {line}: {name}" for line, name in imported_modules(path) if _reaches_up(name)]
    assert not upward, f"{path.relative_to(SRC)} imports from a higher layer: {'; '.join(upward)}"


def _cycle(package: str) -> list[str] | None:
    """One import cycle among the modules of ``package`` (as a list of names), or None."""
    root = PACKAGE / package
    graph: dict[str, set[str]] = {}
    for path in root.rglob("*.py"):
        own = f"lossless.{package}"
        graph[_module_name(path)] = {name for _, name in imported_modules(path)
                                     if name.startswith(own + ".")}
    state: dict[str, int] = {}  # 1 on the current path, 2 done
    path_stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path_stack.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                return [*path_stack[path_stack.index(target):], target]
            if target not in state and (found := visit(target)):
                return found
        path_stack.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return None


@pytest.mark.parametrize("package", ["cli", "server", "providers"])
def test_no_import_cycles_inside(package: str) -> None:
    cycle = _cycle(package)
    assert cycle is None, f"import cycle in lossless.{package}: {' -> '.join(cycle or [])}"


def test_the_reader_sees_what_the_checks_rely_on() -> None:
    """The checks above would pass on a reader that finds nothing; this proves it reads."""
    agent = {name for _, name in imported_modules(PACKAGE / "agent" / "loop.py")}
    assert "lossless.agent.tools" in agent and any(_reaches_up(name) for name in agent)
    main = {name for _, name in imported_modules(PACKAGE / "cli" / "main.py")}
    assert "lossless.cli.commands" in main  # ``from lossless.cli import commands`` names the module
    assert _reaches_up("lossless") and _reaches_up("lossless.engine") and _reaches_up("lossless.server.app")
    assert not _reaches_up("lossless.core.errors") and not _reaches_up("lossless.providers.http")


@pytest.mark.parametrize("path", sorted((PACKAGE / "core").rglob("*.py")), ids=lambda p: p.name)
def test_the_core_imports_only_the_core(path: Path) -> None:
    """Types, errors, configuration, tokens, canonical ids, text fitting and the DAG's rules
    are the bottom layer: everything may use them, they use nothing of ours above them."""
    above = [f"line {line}: {name}" for line, name in imported_modules(path)
             if name.startswith("lossless") and not name.startswith("lossless.core")]
    assert not above, f"{path.relative_to(SRC)} imports from above the core: {'; '.join(above)}"


MAX_FUNCTION_LINES = 100
MAX_MODULE_LINES = 800


def test_no_function_is_over_100_lines_and_no_module_over_800() -> None:
    """Size limits from the structure review (issue 18): past them a function hides a ladder
    of cases and a module holds more than one idea. Prose and data live outside ``.py``."""
    too_long: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        lines = len(text.splitlines())
        if lines > MAX_MODULE_LINES:
            too_long.append(f"{path.relative_to(SRC)}: {lines} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    too_long.append(f"{path.relative_to(SRC)}:{node.lineno} {node.name}: {length} lines")
    assert not too_long, "; ".join(too_long)


def test_import_lossless_installs_no_import_hook_and_old_names_are_gone() -> None:
    """0.1.0 has no users of the flat layout to serve: no meta-path finder mapping old
    module names (issue 28), so ``lossless.errors`` is not a module."""
    import importlib.util
    import sys

    import lossless  # noqa: F401

    assert not [f for f in sys.meta_path if type(f).__module__.startswith("lossless")]
    assert importlib.util.find_spec("lossless.errors") is None
    assert importlib.util.find_spec("lossless.core.errors") is not None


def test_the_server_runs_no_sql_against_the_core_tables() -> None:
    """The server asks the store (``lossless.store.scoped`` for a tenant's totals, ids and
    backlog) rather than writing SQL against messages, summaries, conversations, the backlog
    or the recall units (issue 28); tables a server package owns (keys, idempotency) are its own."""
    import re
    from pathlib import Path

    import lossless

    core = ("messages", "messages_fts", "summaries", "summaries_fts", "summary_parents", "summary_messages",
            "conversations", "backlog", "recall_units", "vector_progress", "leases")
    pattern = re.compile(r"\b(?:FROM|INTO|UPDATE|JOIN)\s+(" + "|".join(core) + r")\b")
    server = Path(lossless.__file__).parent / "server"
    found = [f"{path.relative_to(server)}: {m.group(0)}" for path in sorted(server.rglob("*.py"))
             for m in pattern.finditer(path.read_text(encoding="utf-8"))]
    assert found == []


def test_the_environment_is_read_in_one_place_and_every_variable_is_documented() -> None:
    """``lossless.core.environ`` is the only module that reads the environment (issue 28:
    it was read in ten), and docs/configuration.md names every variable it lists. (The
    sbert embedder still *sets* the Hugging Face libraries' offline switches.)"""
    import re
    from pathlib import Path

    import lossless
    from lossless.core.environ import VARIABLES

    package = Path(lossless.__file__).parent
    reads = re.compile(r"os\.environ(?:\.get|\[)|os\.getenv")
    found = [str(path.relative_to(package)) for path in sorted(package.rglob("*.py"))
             if path.name != "environ.py" and reads.search(path.read_text(encoding="utf-8"))]
    assert found == []
    docs = (package.parents[1] / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert [name for name in VARIABLES if name not in docs] == []
