"""Layers point down: read every module's imports (with ast, so nothing is imported) and
fail on one that reaches up.

- Every package has its place in :data:`LAYERS` (issue 28): core → providers → embed,
  summarize → store → recall, longterm, files, compaction → context → agent → the facade
  (``lossless``, ``engine``, ``conversation``, ``export``, ``services``) → the interfaces
  (the agent runtime works on a conversation handle it declares, ``agent.base``, and
  ``Conversation.turn`` hands itself to it, so the runtime sits under the facade). A
  module imports from its own layer and the layers below, never above; packages of one
  layer import each other without a circle, and no circle runs between any two packages.
- Every import counts: inside functions (a lazy import hides a dependency; it does not
  remove it) and under ``if TYPE_CHECKING:`` (a type a module names is a type it depends
  on: a lower layer that must name a shape from above declares it as a Protocol of its
  own, as ``store.base.NewUnit`` does for recall's units).
- The store, the summarizers, the embedders and the provider helpers import nothing from
  the facade, the agent runtime or the interfaces (the first of these checks, kept).
- Inside a package, no import cycle among its modules either (a module that names a
  type of a sibling above it declares the Protocol it uses, as the stores' recall and
  search modules do).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
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


def imported_modules(path: Path, text: str | None = None) -> Iterator[tuple[int, str]]:
    """(line, module) for every import in the file (or in ``text``, read as that file),
    at any depth. ``from a import b`` names ``a.b`` when that is a module of ours, else ``a``."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    source = path.read_text(encoding="utf-8") if text is None else text
    for node in ast.walk(ast.parse(source, filename=str(path))):
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
    return _find_cycle(graph)


def _find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` (node -> the nodes it points to), as a list of names, or None."""
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


def _packages() -> list[str]:
    return sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file())


@pytest.mark.parametrize("package", _packages())
def test_no_import_cycles_inside(package: str) -> None:
    cycle = _cycle(package)
    assert cycle is None, f"import cycle in lossless.{package}: {' -> '.join(cycle or [])}"


# Bottom to top (issue 28). A package's name is its directory or module under lossless/,
# but for the facade: the package root (``from lossless import Memory``), engine.py,
# conversation.py and export.py are one (Memory and Conversation name each other).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("core",),
    ("providers",),
    ("embed", "summarize"),
    ("store",),
    ("recall", "longterm", "files", "compaction"),
    ("context",),
    ("agent",),
    ("facade",),
    ("cli", "server", "integrations", "importers", "demo", "testing", "__main__"),
)
_LAYER = {package: n for n, layer in enumerate(LAYERS) for package in layer}
_FACADE = {"lossless", "engine", "conversation", "export", "services"}

# Imports allowed to reach up: none now. (The services refactor took the last ones: the
# agent runtime works on the conversation handle it declares, agent.base, so the facade
# delegates Conversation.turn to it from above; compaction takes its own protocols,
# compaction.base, not Memory.) An entry, if one is ever needed, must go with its import.
KNOWN_UPWARD: set[tuple[str, str]] = set()


def _package_of(module: str) -> str:
    """The package a module of ours belongs to (``lossless.store.sqlite.store`` → store)."""
    parts = module.split(".")
    package = parts[1] if len(parts) > 1 else "lossless"
    return "facade" if package in _FACADE else package


def _imports_of_ours() -> Iterator[tuple[str, int, str]]:
    """(importing module, line, imported module) for every import of lossless by lossless."""
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module_name(path)
        for line, name in imported_modules(path):
            if name == "lossless" or name.startswith("lossless."):
                yield module, line, name


def _upward(imports: Iterable[tuple[str, int, str]]) -> list[str]:
    """The imports, of those given, that reach a higher layer (and are not known to)."""
    return sorted({f"{module}:{line} imports {name} ({_package_of(module)} is below {_package_of(name)})"
                   for module, line, name in imports
                   if _LAYER[_package_of(name)] > _LAYER[_package_of(module)] and (module, name) not in KNOWN_UPWARD})


def _between_packages(imports: Iterable[tuple[str, int, str]]) -> dict[str, set[str]]:
    """Package -> the other packages it imports (the known upward imports left out)."""
    graph: dict[str, set[str]] = {}
    for module, _, name in imports:
        source, target = _package_of(module), _package_of(name)
        if source != target and (module, name) not in KNOWN_UPWARD:
            graph.setdefault(source, set()).add(target)
    return graph


def test_every_package_has_a_layer() -> None:
    found = {_package_of(_module_name(path)) for path in PACKAGE.rglob("*.py")}
    assert sorted(found - set(_LAYER)) == [], "a package with no place in LAYERS"
    assert sorted(set(_LAYER) - found) == [], "LAYERS names a package that is gone"


def test_no_package_imports_from_a_higher_layer() -> None:
    upward = _upward(_imports_of_ours())
    assert upward == [], "\n".join(upward)


def test_no_circle_between_packages() -> None:
    cycle = _find_cycle(_between_packages(_imports_of_ours()))
    assert cycle is None, f"import circle between packages: {' -> '.join(cycle or [])}"


def test_the_known_upward_imports_are_still_there() -> None:
    """An entry of KNOWN_UPWARD whose import is gone must leave the list, so the list
    never hides a new import of the same kind."""
    present = {(module, name) for module, _, name in _imports_of_ours()}
    assert sorted(KNOWN_UPWARD - present) == []


def test_the_layer_checks_catch_a_violation() -> None:
    """The checks above on made-up imports: one up a layer, one up from under
    TYPE_CHECKING inside a function, and a circle between two packages of one layer."""
    assert _upward([("lossless.store.reindex", 1, "lossless.files.backend")])
    assert _upward([("lossless.core.types", 1, "lossless")])  # the root is the facade
    assert not _upward([("lossless.files.backend", 1, "lossless.store.fts")])
    assert not _upward([("lossless.files.backend", 1, "lossless.recall.queries")])  # one layer
    circle = [("lossless.recall.hybrid", 1, "lossless.longterm.memories"),
              ("lossless.longterm.vectors", 2, "lossless.recall.units")]
    assert _find_cycle(_between_packages(circle)) is not None
    assert _find_cycle(_between_packages(circle[:1])) is None
    reindex = PACKAGE / "store" / "reindex.py"
    hidden = ("from typing import TYPE_CHECKING\n\ndef f():\n    if TYPE_CHECKING:\n"
              "        from ..files import backend\n")
    found = [("lossless.store.reindex", line, name) for line, name in imported_modules(reindex, hidden)
             if name.startswith("lossless")]
    assert found == [("lossless.store.reindex", 5, "lossless.files.backend")] and _upward(found)


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
    backlog; ``verify`` for the file's integrity) and the long-term memory (a tenant's
    records: ``Memories.ids``/``ls`` with a namespace) rather than writing SQL against
    messages, summaries, conversations, the backlog, the recall units, the memories or the
    file index (issue 28); tables a server package owns (keys, idempotency) are its own."""
    import re
    from pathlib import Path

    import lossless

    core = ("messages", "messages_fts", "summaries", "summaries_fts", "summary_parents", "summary_messages",
            "conversations", "backlog", "recall_units", "vector_progress", "leases",
            "memories", "memories_fts", "memory_vectors", "forgotten_memories", "task_bounds", "memory_flush",
            "files", "file_chunks", "file_chunks_fts", "file_chunk_vectors")
    pattern = re.compile(r"\b(?:FROM|INTO|UPDATE|JOIN)\s+(" + "|".join(core) + r")\b|\bPRAGMA\s+\w+")
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
