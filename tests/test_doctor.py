"""`lossless doctor`: what is installed, what the store holds, the background work, and
what to do about each problem; exit 1 only when something is broken; nothing written."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

import lossless
from lossless.cli import main
from lossless.testing import HashEmbedder
from tests.backends import create_database, drop_database
from tests.conftest import StoreTarget, chat


def _doctor(capsys: pytest.CaptureFixture[str], db: str | Path, *args: str) -> tuple[int, dict[str, Any]]:
    capsys.readouterr()
    status = main(["--db", str(db), "--json", "doctor", "--quick", *args])
    out = capsys.readouterr().out
    return status, json.loads(out)


def _by_name(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in report["checks"]}


def test_doctor_on_a_store_with_work_in_it(store_target: StoreTarget, capsys: pytest.CaptureFixture[str]) -> None:
    db = store_target("doctor")
    with lossless.open(db, embedder=None, context_window=4096) as mem:
        conv = mem.conversation("c1")
        conv.add_many(chat(40))
        assert mem.wait_idle(60)
        mem.memories.add("Maya takes her coffee black", kind="preference")
        summaries = len(conv.summaries())
    status, report = _doctor(capsys, db)
    assert status == 0 and report["ok"] and report["failures"] == 0
    checks = _by_name(report)
    assert checks["database"]["status"] == "ok"
    assert checks["schema"]["status"] == "ok" and "(current)" in checks["schema"]["detail"]
    assert checks["holds"]["detail"] == f"1 conversation, 40 messages, {summaries} summaries, 1 memory"
    assert checks["backlog"]["status"] == "ok"
    assert checks["sqlite"]["status"] == "ok" and "trigram" in checks["sqlite"]["detail"]
    assert checks["lossless"]["status"] == "ok"
    assert checks["tokenizer"]["status"] == "ok" and "cl100k_base" in checks["tokenizer"]["detail"]
    # PostgreSQL's extensions are reported where the store is PostgreSQL, and only there
    on_postgres = str(db).startswith("postgresql")
    assert ("pgvector" in checks) == ("pg_trgm" in checks) == on_postgres
    # every extra of the package is reported, and one not installed says how to install it
    extras = {c["name"]: c for c in report["checks"] if c["name"].startswith("[")}
    assert {"[embeddings]", "[server]", "[mcp]", "[postgres]"} <= set(extras)
    for name, check in extras.items():
        assert check["status"] == "ok" or check["fix"].startswith(f"pip install 'lossless{name}'")
    # every finding that is not ok says what to do
    assert all(c["fix"] for c in report["checks"] if c["status"] in ("warn", "fail"))


def test_doctor_reports_failing_and_long_owed_work_with_what_to_do(store_target: StoreTarget,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    db = store_target("owed")
    with lossless.open(db, embedder=None, context_window=4096, compaction="deferred") as mem:
        mem.conversation("c1").add_many(chat(30))
        mem.conversation("c2").add_many(chat(30))
        assert "c1" in {c.conversation_id for c in mem.backlog.claim("test")}  # as a worker would
        mem.backlog.fail("c1", "test", "summarizer: 401 Unauthorized (check OPENAI_API_KEY)", retry_in=600)
        mem.backlog.report_worker("host:1", "process", time.time() - 5, "working",
                                  {"breaker": {"provider": "openai", "state": "open", "circuits": {}}})
    status, report = _doctor(capsys, db)
    assert status == 0  # degraded, not broken
    checks = _by_name(report)
    assert checks["backlog"]["status"] == "warn"
    assert "2 conversation(s) owed work, 1 failing" in checks["backlog"]["detail"]
    assert "401 Unauthorized" in checks["backlog"]["detail"] and "lossless worker" in checks["backlog"]["fix"]
    assert checks["breaker"]["status"] == "warn" and "open" in checks["breaker"]["detail"]
    assert "provider" in checks["breaker"]["fix"]


def test_doctor_exits_1_when_the_database_is_broken(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "broken.db"
    db.write_bytes(b"this is not a SQLite database, just some bytes " * 100)
    status, report = _doctor(capsys, db)
    assert status == 1 and not report["ok"] and report["failures"] == 1
    database = _by_name(report)["database"]
    assert database["status"] == "fail" and "does not open" in database["detail"] and database["fix"]
    # the text report names the problem and what to do, and exits 1 too
    assert main(["--db", str(db), "doctor", "--quick"]) == 1
    out = capsys.readouterr().out
    assert "✗ database" in out and "→ " in out and "1 problem" in out


def test_doctor_writes_nothing_where_there_is_no_database_yet(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "not-yet.db"
    status, report = _doctor(capsys, db)
    assert status == 0 and not db.exists()
    database = _by_name(report)["database"]
    assert database["status"] == "info" and "lossless demo" in database["fix"]


def test_doctor_says_recall_is_keyword_only_when_vectors_are_off(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "k.db"
    with lossless.open(db, embedder=None) as mem:
        mem.conversation("c").add_many(chat(3))
    monkeypatch.setenv("LOSSLESS_EMBEDDER", "none")
    _, report = _doctor(capsys, db)
    embedder = _by_name(report)["embedder"]
    assert embedder["status"] == "info" and "keyword-only" in embedder["detail"]
    assert "LOSSLESS_EMBEDDER" in embedder["fix"]


@pytest.mark.model
def test_doctor_loads_the_model_and_embeds_a_probe(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "m.db"
    with lossless.open(db, embedder=None) as mem:
        mem.conversation("c").add_many(chat(3))
    monkeypatch.setenv("LOSSLESS_EMBEDDER", "auto")
    capsys.readouterr()
    assert main(["--db", str(db), "--json", "doctor"]) == 0
    embedder = _by_name(json.loads(capsys.readouterr().out))["embedder"]
    assert embedder["status"] == "ok" and "384 dimensions" in embedder["detail"] and "probe" in embedder["detail"]


def _no_store_yet(store_target: StoreTarget) -> tuple[str, Any]:
    """A target holding no lossless store, and a way to tell whether one was created: a
    SQLite path with no file, or a PostgreSQL database's schema that does not exist."""
    db = store_target("none-yet")
    if isinstance(db, str) and db.startswith("postgresql"):
        import psycopg

        from lossless.store.postgres.store import split_schema

        url = db + ("&" if "?" in db else "?") + "schema=never_made"

        def made() -> bool:
            with psycopg.connect(split_schema(url)[0]) as conn:
                return conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname = 'never_made'").fetchone() != (0,)
        return url, made
    path = Path(str(db))
    return str(path), path.exists


def test_doctor_and_read_commands_create_no_store(store_target: StoreTarget,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """doctor "writes nothing", and a read command says there is no store: on PostgreSQL
    they created the schema and all its tables (a mistyped ?schema= became a new, empty
    tenant that `ls` called empty), where SQLite leaves no file behind."""
    db, made = _no_store_yet(store_target)
    status, report = _doctor(capsys, db)
    assert status == 0 and report["ok"] and report["owed"] is None
    assert _by_name(report)["database"]["status"] == "info"
    assert _by_name(report)["database"]["detail"].startswith("none yet at ")
    assert main(["--db", db, "ls"]) == 1
    err = capsys.readouterr().err
    assert "no lossless store at" in err or "no database at" in err
    assert main(["--db", db, "stats"]) == 1
    assert not made()
    assert main(["--db", db, "add", "对话", "--role", "user", "--content", "退款单号是多少？"]) == 0
    assert made()
    status, report = _doctor(capsys, db)
    assert status == 0 and _by_name(report)["holds"]["detail"].startswith("1 conversation, 1 message")
    assert main(["--db", db, "grep", "对话", "单号", "--json"]) == 0
    assert "退款单号" in capsys.readouterr().out


def _server_has(url: str) -> dict[str, tuple[str | None, str | None]]:
    """What the catalogues say of pgvector and pg_trgm: (on the server, installed here)."""
    import psycopg

    with psycopg.connect(url) as conn:
        return {name: conn.execute(
            "SELECT (SELECT default_version FROM pg_available_extensions WHERE name = %s), "
            "(SELECT extversion FROM pg_extension WHERE extname = %s)", (name, name)).fetchone()
            for name in ("vector", "pg_trgm")}


@pytest.mark.postgres
def test_doctor_reports_pgvector_and_pg_trgm_on_postgres(pg_server: str, capsys: pytest.CaptureFixture[str]) -> None:
    """doctor said nothing of the two extensions a PostgreSQL store relies on: pgvector
    (vector recall fails without it) and pg_trgm (trigram indexes for regex search). It
    reports each, from a database with no store yet (creating nothing) to one with vectors."""
    name = f"lossless_doctor_{uuid.uuid4().hex[:10]}"
    url = create_database(pg_server, name)  # a bare database: no lossless store in it
    try:
        before = _server_has(url)
        assert before["vector"][0] is not None  # the suite's server has pgvector (tests/backends.py)
        status, report = _doctor(capsys, url)
        checks = _by_name(report)
        assert status == 0 and checks["database"]["detail"].startswith("none yet at ")
        vector, trgm = checks["pgvector"], checks["pg_trgm"]
        if before["vector"][1] is None:
            assert vector["status"] == "info" and "not installed in this database yet" in vector["detail"]
            assert "CREATE EXTENSION vector" in vector["detail"] and vector["fix"]
        available, installed = before["pg_trgm"]
        if installed:
            assert trgm["status"] == "ok" and installed in trgm["detail"]
        elif available:
            assert trgm["status"] == "info" and "a new store creates it" in trgm["detail"]
        else:
            assert trgm["status"] == "info" and trgm["detail"].startswith("not on this server") and trgm["fix"]
        assert _server_has(url) == before  # nothing created: no extension,
        assert main(["--db", url, "ls"]) == 1  # and no store
        capsys.readouterr()

        # a store, then vectors in it: pgvector is installed by then, and doctor says so
        with lossless.open(url, embedder=HashEmbedder()) as mem:
            conv = mem.conversation("体检")
            conv.add_many([{"role": "user", "content": "数据库的扩展装好了吗？"},
                           {"role": "assistant", "content": "pgvector holds the recall vectors."}])
            conv.index()
        after = _server_has(url)
        assert after["vector"][1] is not None
        status, report = _doctor(capsys, url)
        vector, trgm = _by_name(report)["pgvector"], _by_name(report)["pg_trgm"]
        assert status == 0 and vector["status"] == "ok" and after["vector"][1] in vector["detail"]
        if after["pg_trgm"][1]:  # a store made where the server has pg_trgm gets its indexes
            assert trgm["status"] == "ok" and "trigram indexes serve regex" in trgm["detail"]
        else:
            assert trgm["status"] == "info" and trgm["fix"]
        assert main(["--db", url, "doctor", "--quick"]) == 0
        out = capsys.readouterr().out
        assert "✓ pgvector" in out and "pg_trgm" in out and "Traceback" not in out
    finally:
        drop_database(pg_server, name)
