"""The bad-input corpus (``tests/data/bad_inputs.json``) through every front door.

Each case runs through the Python API and through the CLI (``lossless.cli.main.main``):
a clear :class:`~lossless.LosslessError` naming what was wrong (the CLI: a non-zero exit,
an ``error:`` line, never a traceback), or correct handling; and the store exactly as it
was before (counts and content hashes), unless the case says it writes.

Another front door (the HTTP server) joins by registering a runner::

    @runner("http")
    def run_http(case: Case, world: World, capsys: pytest.CaptureFixture[str]) -> None:
        ...  # send the case, assert on the answer like run_api / run_cli do

(registered above ``test_bad_input``, which is parametrized over every runner).

A runner gets the case with its markers and placeholders resolved and a world (a copy of
a small database: conversations ``c`` and ``other`` with summaries, a memory of user
``ann``, ``max_message_bytes`` saved as 4 MiB); the store check after it is shared.
"""

from __future__ import annotations

import base64
import json
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import apsw
import pytest

import lossless
from lossless.core import errors
from lossless.store.urls import is_postgres_url
from tests.conftest import StoreTarget, chat

CORPUS = Path(__file__).parent / "data" / "bad_inputs.json"
CASES: list[dict[str, Any]] = json.loads(CORPUS.read_text(encoding="utf-8"))["cases"]
WINDOW = 2048
MAX_MESSAGE_BYTES = 4 * 1024 * 1024


# -- markers and placeholders -------------------------------------------------------------


def _nest(depth: int) -> Any:
    value: Any = {"leaf": True}
    for _ in range(depth):
        value = {"a": value}
    return value


def materialise(value: Any) -> Any:
    """Turn the corpus markers into the values they stand for (built at run time: a
    100 MB string is not kept in a data file)."""
    if isinstance(value, list):
        return [materialise(v) for v in value]
    if not isinstance(value, dict):
        return value
    if len(value) == 1:
        (key, arg), = value.items()
        if key == "$repeat":
            return arg[0] * arg[1]
        if key == "$bytes_b64":
            return base64.b64decode(arg)
        if key == "$nest":
            return _nest(arg)
        if key == "$float":
            return float(arg)
        if key == "$nest_line":
            return '{"role": "user", "content": "deep", "metadata": ' + '{"a": ' * arg + "1" + "}" * arg + "}"
        if key == "$big_line":
            return json.dumps({"role": "user", "content": "b" * arg})
    return {k: materialise(v) for k, v in value.items()}


def substitute(value: Any, names: dict[str, str]) -> Any:
    if isinstance(value, str):
        for name, real in names.items():
            value = value.replace("{" + name + "}", real)
        return value
    if isinstance(value, list):
        return [substitute(v, names) for v in value]
    if isinstance(value, dict):
        return {k: substitute(v, names) for k, v in value.items()}
    return value


# -- the world each case runs against -------------------------------------------------------


@dataclass
class World:
    path: str  # a SQLite file or a PostgreSQL URL
    tmp: Path
    names: dict[str, str]
    memory: lossless.Memory | None = None
    files: list[Path] = field(default_factory=list)

    def mem(self) -> lossless.Memory:
        if self.memory is None:
            self.memory = lossless.open(self.path, embedder=None, context_window=WINDOW, fresh_tail_count=4)
        return self.memory

    def close(self) -> None:
        if self.memory is not None:
            self.memory.close()
            self.memory = None


@dataclass(frozen=True)
class Case:
    id: str
    op: str
    args: dict[str, Any]
    expect: str
    match: str | None
    raw: dict[str, Any]

    def cli_match(self) -> str | None:
        found: str | None = self.raw.get("cli_match", self.match)
        return found


@pytest.fixture(scope="module")
def template(lasting_store_target: StoreTarget) -> tuple[str, dict[str, str]]:
    path = lasting_store_target("bad-inputs-template")
    mem = lossless.open(path, embedder=None, context_window=WINDOW, fresh_tail_count=4)
    # the database's own limit, so the cases do not depend on the built-in default (the
    # API and the CLI both read it from the saved settings)
    mem.save_settings(max_message_bytes=MAX_MESSAGE_BYTES)
    c = mem.conversation("c", metadata={"user": "ann"})
    c.add_many(chat(40, words=25, tools_every=6))
    c.compact(force=True)
    other = mem.conversation("other", metadata={"user": "bob"})
    other.add_many([{**m, "content": f"OTHER-SECRET {m['content']}"} if m["role"] != "tool" else m
                    for m in chat(40, words=25)])
    other.compact(force=True)
    record = mem.memories.add("Prefers metric units in every report", kind="preference", user="ann")
    names = {"sum_c": c.summaries()[-1].id, "msg_c": c.messages()[0].id,
             "sum_other": other.summaries()[-1].id, "msg_other": other.messages()[0].id, "mem_ann": record.id}
    mem.close()
    return path, names


@pytest.fixture
def world(store_target: StoreTarget, template: tuple[str, dict[str, str]], tmp_path: Path) -> Iterator[World]:
    path, names = template
    copy = store_target.copy_of(path, "world")
    tmp = tmp_path / "case"
    tmp.mkdir()
    w = World(copy, tmp, {**names, "tmp": str(tmp)})
    yield w
    w.close()


def snapshot(target: str) -> dict[str, Any]:
    """What must not change: every stored row that means something, with its hash."""
    if is_postgres_url(target):
        import psycopg

        conn: Any = psycopg.connect(target, autocommit=True)
    else:
        conn = apsw.Connection(target, flags=apsw.SQLITE_OPEN_READONLY)
    try:
        def q(sql: str) -> list[tuple[Any, ...]]:
            return [tuple(row) for row in conn.execute(sql)]

        return {
            "conversations": q("SELECT id, metadata, last_seq FROM conversations ORDER BY id"),
            "messages": q("SELECT conversation_id, seq, content_hash, content FROM messages "
                          "ORDER BY conversation_id, seq"),
            "summaries": q("SELECT id, content, parent_id FROM summaries ORDER BY id"),
            "memories": q("SELECT id, content, importance, user_id, agent_id FROM memories ORDER BY id"),
            "settings": q("SELECT key, value FROM settings ORDER BY key"),
        }
    finally:
        conn.close()


# -- the API runner ----------------------------------------------------------------------------

ERROR_TYPES: dict[str, type[Exception]] = {
    name: getattr(errors, name) for name in errors.__all__
}


def _api_call(case: Case, world: World) -> Any:
    a = case.args
    if case.op == "open":
        options = dict(a)
        summarizer = options.pop("summarizer", None)
        embedder = options.pop("embedder", None)
        mem = lossless.open(world.path, summarizer=summarizer, embedder=embedder, **options)
        mem.close()
        return None
    mem = world.mem()
    conv = mem.conversation("c")
    if case.op == "add":
        return conv.add(**a)
    if case.op == "add_many":
        return conv.add_many(a["messages"])
    if case.op == "conversation":
        return mem.conversation(a["id"], metadata=a.get("metadata"))
    if case.op == "search":
        return conv.search(**a)
    if case.op == "search_all":
        return mem.search(**a)
    if case.op == "grep":
        return conv.grep(**a)
    if case.op == "describe":
        return conv.describe(a["id"])
    if case.op == "expand":
        return conv.expand(a["id"], **{k: v for k, v in a.items() if k != "id"})
    if case.op == "assemble":
        return conv.assemble(**a)
    if case.op == "memory_add":
        return mem.memories.add(**a)
    if case.op == "memory_search":
        return mem.memories.search(**a)
    if case.op == "memory_get":
        return mem.memories.get(a["id"])
    if case.op == "memory_forget":
        return mem.memories.forget(**a)
    if case.op == "tool_call":
        return conv.tools.dispatch(a["call"])
    if case.op == "import":
        from lossless.importers import import_file

        return import_file(mem, _import_path(case, world), format=a.get("format"),
                           conversation=a.get("conversation", "c"), strict=True)
    raise AssertionError(f"no API for op {case.op!r}")


def _import_path(case: Case, world: World) -> str:
    if "path" in case.args:
        return str(case.args["path"])
    target = world.tmp / "input.jsonl"
    if not target.exists():
        chunks = [line if isinstance(line, bytes) else str(line).encode("utf-8") for line in case.args["lines"]]
        target.write_bytes(b"".join(c + b"\n" for c in chunks))
    return str(target)


def _contains(text: str, phrase: str | None) -> bool:
    return phrase is None or phrase.lower() in text.lower()


def _check_ok(case: Case, world: World, result: Any) -> None:
    for check in case.raw.get("checks", []):
        if check == "empty":
            assert not result, f"{case.id}: expected nothing, got {str(result)[:200]}"
        elif check == "within_budget":
            assert result.tokens <= case.args["budget_tokens"]
        elif check == "no_other_conversation":
            assert all(h.conversation_id == "c" for h in result)
        elif check == "stored_verbatim":
            sent = case.args["content"] if case.op == "add" else case.args["messages"][-1]["content"]
            assert world.mem().conversation("c").messages()[-1].content == sent
        elif check == "conversation_exists":
            assert world.mem().get_conversation(case.args["id"]) is not None
        else:
            raise AssertionError(f"unknown check {check!r}")


def run_api(case: Case, world: World, capsys: pytest.CaptureFixture[str]) -> None:
    if case.op == "cli_only":
        pytest.skip("the input is a command line")
    t0 = time.monotonic()
    try:
        result = _api_call(case, world)
    except lossless.LosslessError as exc:
        assert case.expect not in ("ok", "tool_error"), f"{case.id}: unexpected {type(exc).__name__}: {exc}"
        if case.expect != "import_refused":
            assert isinstance(exc, ERROR_TYPES[case.expect]), f"{case.id}: {type(exc).__name__}: {exc}"
        assert _contains(str(exc), case.match), f"{case.id}: {exc!s} does not say {case.match!r}"
    else:
        if case.expect == "tool_error":
            payload = json.loads(result["content"])
            assert result.get("is_error") or "error" in payload
            assert _contains(payload["error"], case.match), payload
        elif case.expect == "import_refused":
            assert result.stopped_at is not None and not sum(result.added.values()), result.to_json()
            assert _contains(" ".join(f"line {p.line}: {p.reason}" for p in result.skipped), case.match)
        else:
            assert case.expect == "ok", f"{case.id}: expected {case.expect}, got {str(result)[:200]}"
            _check_ok(case, world, result)
    if "fast" in case.raw:
        assert time.monotonic() - t0 < case.raw["fast"]


# -- the CLI runner ----------------------------------------------------------------------------


def _cli_argv(case: Case, world: World) -> list[str] | None:
    if "cli" in case.raw:
        given = case.raw["cli"]
        return None if given is None else list(materialise(substitute(given, world.names)))
    a = case.args
    if case.op == "add":
        flags = {"name": "--name", "created_at": "--created-at", "external_id": "--external-id"}
        if set(a) - {"role", "content", *flags} or not all(isinstance(v, str) for v in a.values()):
            return None
        if "role" not in a or "content" not in a:
            return None
        argv = ["add", "c", "--role", a["role"], "--content", a["content"]]
        for key, flag in flags.items():
            if key in a:
                argv += [flag, a[key]]
        return argv
    if case.op == "add_many":
        messages = a["messages"]
        if not isinstance(messages, list):
            return None
        try:
            lines = [json.dumps(m, ensure_ascii=False, allow_nan=False) for m in messages]
        except (TypeError, ValueError):
            return None
        except RecursionError:
            lines = [_deep_json(m) for m in messages]  # what a JSONL file with such a line holds
        target = world.tmp / "batch.jsonl"
        target.write_text("".join(line + "\n" for line in lines), encoding="utf-8", errors="surrogatepass")
        return ["import", str(target), "--conversation", "c", "--strict", "--format", "openai"]
    if case.op == "conversation":
        if not isinstance(a["id"], str) or "metadata" in a:
            return None
        return ["add", a["id"], "--role", "user", "--content", "x"]
    if case.op == "import":
        argv = ["import", _import_path(case, world), "--strict", "--conversation", a.get("conversation", "c")]
        return argv + (["--format", a["format"]] if a.get("format") else [])
    if case.op == "memory_add" and all(isinstance(v, str) for v in a.values()) and set(a) == {"content"}:
        return ["memory", "add", a["content"]]
    return None


def _deep_json(value: Any) -> str:
    """JSON text of a value too deeply nested for json.dumps at the normal recursion limit."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 50_000))
    try:
        return json.dumps(value, ensure_ascii=False)
    finally:
        sys.setrecursionlimit(limit)


def run_cli(case: Case, world: World, capsys: pytest.CaptureFixture[str]) -> None:
    from lossless.cli.main import main

    argv = _cli_argv(case, world)
    if argv is None:
        pytest.skip("the CLI cannot express this input (a non-string value)")
    world.close()
    capsys.readouterr()
    t0 = time.monotonic()
    status = main(["--db", str(world.path), *argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "Traceback" not in out, err
    assert "unexpected" not in err, f"{case.id}: an unexpected exception reached the CLI: {err}"
    want = case.raw.get("cli_exit")
    if want is None:
        want = 0 if case.expect == "ok" else None
    if want == 0:
        assert status == 0, f"{case.id}: exit {status}: {err}"
    else:
        assert status != 0 and (want is None or status == want), f"{case.id}: exit {status}: {out[:300]} {err}"
        assert "error:" in err, f"{case.id}: no error line: {err!r}"
        assert _contains(err, case.cli_match()), f"{case.id}: {err!r} does not say {case.cli_match()!r}"
    if "fast" in case.raw:
        assert time.monotonic() - t0 < case.raw["fast"] * 2


# -- the runners and the test --------------------------------------------------------------------

Runner = Callable[..., None]
RUNNERS: dict[str, Runner] = {}


def runner(name: str) -> Callable[[Runner], Runner]:
    """Register a front door the whole corpus runs through (see the module docstring)."""

    def register(fn: Runner) -> Runner:
        RUNNERS[name] = fn
        return fn

    return register


runner("api")(run_api)
runner("cli")(run_cli)


def _case(raw: dict[str, Any]) -> Case:
    return Case(id=raw["id"], op=raw["op"], args=raw.get("args", {}), expect=raw["expect"],
                match=raw.get("match"), raw=raw)


def test_the_corpus_is_big_and_well_formed() -> None:
    ids = [c["id"] for c in CASES]
    assert len(ids) == len(set(ids)) and len(CASES) >= 60
    for raw in CASES:
        assert raw["expect"] in ("ok", "tool_error", "import_refused") or raw["expect"] in ERROR_TYPES, raw["id"]
        assert raw["expect"] == "ok" or raw.get("match") or raw.get("cli_match"), raw["id"]


@pytest.mark.parametrize("door", sorted(RUNNERS))
@pytest.mark.parametrize("raw", [
    pytest.param(c, marks=pytest.mark.sqlite_only(reason=c["sqlite_only"])) if "sqlite_only" in c else c for c in CASES
], ids=[c["id"] for c in CASES])
def test_bad_input(raw: dict[str, Any], door: str, world: World, monkeypatch: pytest.MonkeyPatch,
                   capsys: pytest.CaptureFixture[str]) -> None:
    case = _case(raw)
    # placeholders first: the markers may build values too deep to walk again
    case = Case(case.id, case.op, materialise(substitute(case.args, world.names)), case.expect, case.match, raw)
    for name, value in raw.get("env", {}).items():
        monkeypatch.setenv(name, value)
    before = snapshot(world.path)
    try:
        RUNNERS[door](case, world, capsys)
    finally:
        world.close()
        monkeypatch.undo()
    if not raw.get("writes"):
        assert snapshot(world.path) == before, f"{case.id}: the store changed"
