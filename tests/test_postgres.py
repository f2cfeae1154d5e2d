"""What only the PostgreSQL store has: its migrations, schema-per-tenant isolation, the URL
in ``open()`` / ``$LOSSLESS_DB`` / ``--db``, ``lossless migrate`` from SQLite, pgvector,
regular expressions PostgreSQL cannot run, and many processes writing and compacting
at once."""

from __future__ import annotations

import itertools
import json
import multiprocessing
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
import pytest

import lossless
from lossless.cli import main
from lossless.core.errors import MigrationError, StoreError, ValidationError
from lossless.store.postgres import migrations as pg_migrations
from lossless.store.postgres.grep import pg_regex, search_document
from lossless.store.postgres.store import PostgresStore, split_schema
from lossless.store.urls import redact_url, sqlite_path
from lossless.testing import HashEmbedder

from .backends import tamper
from .conftest import T0, chat

pytestmark = pytest.mark.postgres


def _with_query(url: str, **params: str) -> str:
    parts = urlsplit(url)
    query = [*parse_qsl(parts.query), *params.items()]
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(query), parts.fragment))


# -- migrations ---------------------------------------------------------------------------


def test_blank_schema_gets_every_migration(pg_url: str) -> None:
    store = PostgresStore(pg_url, schema="blank")
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("SET search_path TO blank")
        assert pg_migrations.applied(conn) == [m[0] for m in pg_migrations.MIGRATIONS]
        assert pg_migrations.pending(conn) == []
    store.close()


@pytest.mark.parametrize("version", [0, *[m[0] for m in pg_migrations.MIGRATIONS]])
def test_upgrade_from_every_earlier_version(pg_url: str, version: int) -> None:
    schema = f"v{version}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        conn.execute(f"SET search_path TO {schema}, public")
        pg_migrations.migrate(conn, upto=version)
        assert pg_migrations.applied(conn) == [m[0] for m in pg_migrations.MIGRATIONS if m[0] <= version]
    with lossless.open(_with_query(pg_url, schema=schema)) as mem:
        mem.conversation("c").add(role="user", content="after upgrade")
        assert mem.verify() == []
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"SET search_path TO {schema}")
        assert pg_migrations.pending(conn) == []


def test_newer_schema_is_refused(pg_url: str) -> None:
    lossless.open(pg_url).close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("INSERT INTO schema_migrations VALUES (9999, 'future', '2030-01-01')")
    with pytest.raises(MigrationError, match="newer"):
        lossless.open(pg_url)


def test_verify_detects_tampering(pg_url: str) -> None:
    with lossless.open(pg_url) as mem:
        mem.conversation("t").add(role="user", content="original")
    tamper(pg_url, "UPDATE messages SET content = 'tampered'")  # with the triggers off
    with lossless.open(pg_url) as mem:
        assert any("content hash" in p for p in mem.verify())


def test_unreachable_server_is_a_clear_store_error() -> None:
    with pytest.raises(StoreError, match="cannot connect to PostgreSQL"):
        PostgresStore("postgresql://nobody:secret@/nowhere?host=/nonexistent-socket-dir", connect_timeout=2)
    with pytest.raises(ValidationError, match="schema"):
        PostgresStore("postgresql://nobody@/nowhere?host=/nonexistent", schema="bad;name")


def test_urls() -> None:
    assert redact_url("postgresql://ann:s3cret@db.example:5433/lossless") == "postgresql://ann:***@db.example:5433/lossless"
    assert sqlite_path("sqlite:///tmp/x.db") == "/tmp/x.db" and sqlite_path("x.db") == "x.db"
    assert split_schema("postgresql://h/db?schema=t1&sslmode=require") == ("postgresql://h/db?sslmode=require", "t1")
    assert split_schema("postgresql://h/db?options=-csearch_path%3Dt2")[1] == "t2"
    assert split_schema("postgresql://h/db")[1] is None


# -- tenants --------------------------------------------------------------------------------


def test_schema_per_tenant_isolation(pg_url: str) -> None:
    a_url = _with_query(pg_url, schema="tenant_a")
    b_url = _with_query(pg_url, options="-csearch_path=tenant_b")  # libpq's own way
    emb_a, emb_b = HashEmbedder(), HashEmbedder()
    with lossless.open(a_url, embedder=emb_a) as a, lossless.open(b_url, embedder=emb_b) as b:
        assert (a.store.schema, b.store.schema) == ("tenant_a", "tenant_b")  # type: ignore[attr-defined]
        for mem, word in ((a, "alpha"), (b, "bravo")):
            conv = mem.conversation("shared-id", metadata={"user": "ann"})
            conv.add(role="user", content=f"the {word} launch code is secret")
            conv.add_many(chat(20))
            mem.memories.add(f"ann prefers {word} reports", user="ann")
        for mem, mine, theirs in ((a, "alpha", "bravo"), (b, "bravo", "alpha")):
            conv = mem.conversation("shared-id")
            assert mine in conv.messages()[0].text and len(conv.messages()) == 21
            for mode in ("fts", "semantic", "hybrid"):
                hits = mem.search(f"{theirs} launch code", mode=mode)  # type: ignore[arg-type]
                assert all(theirs not in h.snippet for h in hits), mode
            assert [r.content for r in mem.memories.search("reports", user="ann")] == [f"ann prefers {mine} reports"]
            assert [c.id for c in mem.conversations()] == ["shared-id"]
            assert mem.verify() == []
    with lossless.open(pg_url) as public:  # the default schema saw none of it
        assert public.conversations() == [] and public.memories.count() == 0
    third = PostgresStore(pg_url, schema="tenant_c")  # the keyword argument
    assert third.list_conversations() == []
    third.close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        counts = conn.execute("SELECT (SELECT count(*) FROM tenant_a.messages), (SELECT count(*) FROM tenant_b.messages), "
                              "(SELECT count(*) FROM public.messages)").fetchone()
    assert counts == (21, 21, 0)


# -- open(), $LOSSLESS_DB, the CLI --------------------------------------------------------


def test_open_env_and_cli_take_a_url(pg_url: str, monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--db", pg_url, "add", "cli-conv", "--role", "user", "--content", "hello from the shell"]) == 0
    monkeypatch.setenv("LOSSLESS_DB", pg_url)
    capsys.readouterr()
    assert main(["ls", "--json"]) == 0
    assert [c["id"] for c in json.loads(capsys.readouterr().out)] == ["cli-conv"]
    assert main(["grep", "cli-conv", "shell", "--json"]) == 0
    assert "hello from the shell" in capsys.readouterr().out
    assert main(["stats", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["conversations"] == 1
    with lossless.open() as mem:  # $LOSSLESS_DB names the server
        assert mem.store.dialect == "postgresql"
        assert [m.content for m in mem.conversation("cli-conv").messages()] == ["hello from the shell"]
    monkeypatch.delenv("LOSSLESS_DB")
    assert main(["--db", "postgresql://nobody:pw@/nowhere?host=/nonexistent-socket-dir&connect_timeout=2", "ls"]) == 1
    err = capsys.readouterr().err
    assert "cannot connect to PostgreSQL" in err and "pw@" not in err


# -- lossless migrate ----------------------------------------------------------------------


def _rich_sqlite_store(path: Path) -> lossless.Memory:
    emb = HashEmbedder()
    mem = lossless.open(path, embedder=emb, context_window=2048, vector_backend="numpy")
    mem.save_settings(context_window=2048, fresh_tail_count=12)
    a = mem.conversation("a", metadata={"user": "ann"})
    a.add(role="user", content="Our invoice service runs on port 7711. 数据库迁移到新的服务器。", created_at=T0,
          external_id="x1")
    a.add_many(chat(120, tools_every=6, start=T0))
    a.add(role="user", content=[{"type": "text", "text": "parts"}], name="Maya")
    a.index()
    b = mem.conversation("b")
    b.add_many(chat(15))
    assert mem.wait_idle(60)  # the worker's summaries and vectors, before the copy
    mem.memories.add("Ann prefers metric units", kind="preference", user="ann")
    a.end()
    return mem


def test_migrate_round_trip(tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "src.db"
    src = _rich_sqlite_store(path)
    expected = {cid: (src.conversation(cid).messages(), src.conversation(cid).summaries()) for cid in ("a", "b")}
    memories = src.memories.ls(limit=1000)
    settings = src.store.get_settings()
    assert expected["a"][1], "the source has summaries"
    src.close()

    assert main(["migrate", "--from", f"sqlite:///{path}", "--to", pg_url, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] and report["problems"] == [] and report["counts"]["messages"] == 137
    assert report["vectors"] > 0

    emb = HashEmbedder()
    with lossless.open(pg_url, embedder=emb) as mem:
        for cid, (messages, summaries) in expected.items():
            conv = mem.conversation(cid)
            assert conv.messages() == messages  # same ids, seqs, content, times
            assert conv.summaries() == summaries  # same ids, spans, sources, times
        assert mem.memories.ls(limit=1000) == memories
        assert mem.store.get_settings() == settings and mem.config.fresh_tail_count == 12
        assert mem.conversation("a").search("invoice port", mode="semantic")[0].first_seq == 1
        assert emb.texts == ["invoice port"]  # every document vector came across: only the query is embedded
        assert mem.conversation("a").search("数据库")[0].first_seq == 1
        added = mem.conversation("a").add(role="user", content="after the move")
        assert added.seq == 123 and mem.verify() == []

    # a second run would mix two stores: refused, nothing written
    assert main(["migrate", "--from", str(path), "--to", pg_url]) == 1
    assert "not empty" in capsys.readouterr().err
    assert main(["migrate", "--from", pg_url, "--to", pg_url]) == 1


def test_migrate_refuses_a_source_that_is_not_a_lossless_store(tmp_path: Path, pg_url: str,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """A --from naming another application's SQLite database got lossless's tables created
    in it, and an empty store "copied and verified" (exit 0); a file that is not SQLite at
    all was an "unexpected NotADBError". Both are refused, the file untouched, the target
    schema not made."""
    import sqlite3

    other = tmp_path / "notes.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
        conn.execute("INSERT INTO notes VALUES ('明天开会')")
    conn.close()
    before = other.read_bytes()
    text = tmp_path / "聊天.db"
    text.write_text("用户：你好\n", encoding="utf-8")
    empty = tmp_path / "empty.db"
    empty.touch()
    target = _with_query(pg_url, schema="from_wrong_file")
    for path, said in ((other, "is not a lossless store"), (text, "is not a SQLite database"),
                       (empty, "is not a lossless store")):
        capsys.readouterr()
        assert main(["migrate", "--from", f"sqlite:///{path}", "--to", target]) == 1
        err = capsys.readouterr().err
        assert said in err and "unexpected" not in err and "Traceback" not in err
    assert other.read_bytes() == before and empty.stat().st_size == 0
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname = 'from_wrong_file'").fetchone() == (0,)


def test_migrate_into_a_store_only_searched_so_far(tmp_path: Path, pg_url: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """A new user checks the empty PostgreSQL store with a search first: the search caches
    the question's vector there. That cache is no store to protect: migrate copies (it was
    refused as "not empty (1 embedding_cache)"), and the copy verifies."""
    path = tmp_path / "src.db"
    with lossless.open(path, embedder=HashEmbedder()) as src:
        conv = src.conversation("小美")
        conv.add_many([{"role": "user", "content": "我们决定缓存过期时间设成七天。"},
                       {"role": "assistant", "content": "好的，缓存过期时间七天。"}])
        conv.index()
    with lossless.open(pg_url, embedder=HashEmbedder()) as target:
        assert target.search("缓存过期", mode="hybrid") == []
        assert target.store._query("SELECT count(*) FROM embedding_cache")[0][0] == 1
    assert main(["migrate", "--from", str(path), "--to", pg_url, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] and report["problems"] == [] and report["counts"]["messages"] == 2
    with lossless.open(pg_url, embedder=None) as mem:
        assert {h.first_seq for h in mem.conversation("小美").search("缓存")} == {1, 2}
    # anything else stored there is still refused
    assert main(["migrate", "--from", str(path), "--to", pg_url]) == 1
    assert "not empty (1 conversations" in capsys.readouterr().err


def test_migrate_verification_catches_a_difference(tmp_path: Path, pg_url: str) -> None:
    from lossless.files.tables import FILE_TABLES
    from lossless.longterm.tables import MEMORY_TABLES
    from lossless.store.transfer import copy_sqlite_to_postgres

    path = tmp_path / "v.db"
    with lossless.open(path, context_window=2048) as mem:
        mem.conversation("v").add_many(chat(80))
        assert mem.wait_idle(60)
    assert copy_sqlite_to_postgres(str(path), pg_url, owners=(MEMORY_TABLES, FILE_TABLES)).ok
    tamper(pg_url, "UPDATE summaries SET content = content || ' (edited)' WHERE rowid = 1")
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("DELETE FROM compaction_log WHERE rowid = 1")
    problems = _copy_problems(path, pg_url)
    assert any(p.startswith("summaries: the rows differ") for p in problems)
    assert any(p.startswith("compaction_log:") for p in problems)


def test_migrate_that_does_not_verify_keeps_nothing(tmp_path: Path, pg_url: str,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """A source whose message no longer matches its hash (a damaged file) copied, failed
    verification (exit 1) and left the whole unverified copy committed in the target, which
    the next run then refused as "not empty". The copy is verified before it commits: it is
    rolled back, the error says so, and once the source is put right the same command works."""
    path = tmp_path / "damaged.db"
    with lossless.open(path, embedder=HashEmbedder()) as mem:
        conv = mem.conversation("搬家", metadata={"title": "迁移 test"})
        conv.add_many([{"role": "user", "content": "数据库迁移到新的服务器。"},
                       {"role": "assistant", "content": "The invoice service moves to port 7711."}])
        conv.index()
        good = conv.messages()[0].content
    tamper(str(path), "UPDATE messages SET content = ? WHERE seq = 1", ("数据库迁移到旧的服务器。",))
    with psycopg.connect(pg_url) as conn:
        tables_before = conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").fetchone()

    assert main(["migrate", "--from", str(path), "--to", pg_url]) == 1
    err = capsys.readouterr().err
    assert "mismatch: postgresql:" in err and "rolled back" in err and "holds none of it" in err
    assert "Traceback" not in err and "secret" not in err
    with psycopg.connect(pg_url) as conn:
        for table in ("conversations", "messages", "summaries", "recall_units", "embedding_cache", "settings"):
            assert conn.execute(f"SELECT count(*) FROM {table}").fetchone() == (0,), table
        # the vector tables the copy made went with it: only the store's own tables are there
        assert conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").fetchone() == tables_before
    assert main(["migrate", "--from", str(path), "--to", pg_url, "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["rolled_back"] and not report["ok"] and report["problems"]

    tamper(str(path), "UPDATE messages SET content = ? WHERE seq = 1", (good,))  # the source put right
    assert main(["migrate", "--from", str(path), "--to", pg_url, "--json"]) == 0, capsys.readouterr().err
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] and not report["rolled_back"] and report["counts"]["messages"] == 2
    with lossless.open(pg_url, embedder=None) as mem:
        assert mem.conversation("搬家").info.metadata == {"title": "迁移 test"}
        assert mem.verify() == []


def _copy_problems(path: Path, pg_url: str) -> list[str]:
    """What ``verify_copy`` finds between the SQLite file and the PostgreSQL copy."""
    from lossless.files.tables import FILE_TABLES
    from lossless.longterm.tables import MEMORY_TABLES
    from lossless.store.postgres.store import PostgresStore
    from lossless.store.sqlite.store import SQLiteStore
    from lossless.store.transfer import verify_copy

    src, dst = SQLiteStore(path), PostgresStore(pg_url)
    try:
        return verify_copy(src, dst, owners=(MEMORY_TABLES, FILE_TABLES))
    finally:
        src.close()
        dst.close()


class OtherHashEmbedder(HashEmbedder):
    model = "hash-64-b"  # another embedder: its chunk vectors get a pgvector table of their own


def test_migrate_round_trip_with_api_keys_and_indexed_files(tmp_path: Path, pg_url: str,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """API keys and the workspace file index come across: every key still verifies (the
    revoked one stays refused), the files, chunks (same rowids) and their vectors of two
    embedders are identical, nothing is embedded again, keyword and vector search work,
    and new rows continue after the copied rowids."""
    from lossless.files import Files
    from lossless.server.keys import APIKeys

    from .test_files import make_tree

    tree = tmp_path / "proj"
    make_tree(tree)
    path = tmp_path / "files.db"
    emb, other = HashEmbedder(), OtherHashEmbedder()
    query = "ledger beacon harbor value scale"
    with lossless.open(path, embedder=None) as src:
        src.conversation("c").add_many(chat(20))
        keys = APIKeys(src.store)
        acme, acme_key = keys.create("acme", "ci")
        assert keys.verify(acme_key) is not None  # sets last_used_at
        bravo, bravo_key = keys.create("bravo")
        keys.revoke(bravo.id)
        listed = keys.ls()
        files = Files(src.store, emb, src.counter)
        files.index([tree])
        Files(src.store, other, src.counter).index([tree / "docs"])  # docs/ chunks get the other's vectors
        stats, ls = files.stats(), files.ls()
        assert files.vectors is not None
        nearest = files.vectors.nearest(query, 8)  # the query's vector is cached, and copied
        for_path = files.for_path("retry.py", "backoff")
        n_chunks = src.store._query("SELECT count(*) FROM file_chunks")[0][0]
        by_model = dict(src.store._query("SELECT model, count(*) FROM file_chunk_vectors GROUP BY model"))
        max_chunk = src.store._query("SELECT max(rowid) FROM file_chunks")[0][0]
        docs = src.store._query("SELECT count(*) FROM file_chunks c JOIN files f ON f.rowid = c.file_rowid "
                                "WHERE f.path LIKE 'docs/%'")[0][0]
    assert by_model == {"hash-64": n_chunks - docs, "hash-64-b": docs} and docs > 0

    assert main(["migrate", "--from", str(path), "--to", pg_url, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] and report["problems"] == []
    assert report["counts"]["api_keys"] == 2 and report["counts"]["files"] == 30
    assert report["counts"]["file_chunks"] == n_chunks == report["counts"]["file_chunk_vectors"]

    emb_pg = HashEmbedder()
    with lossless.open(pg_url, embedder=None) as pg:
        keys = APIKeys(pg.store)
        assert keys.ls() == listed
        assert keys.verify(acme_key) == keys.get(acme.id) and keys.verify(bravo_key) is None
        files = Files(pg.store, emb_pg, pg.counter)
        assert files.stats() == stats and files.ls() == ls
        assert files.for_path("retry.py", "backoff") == for_path
        assert files.vectors is not None and files.vectors.nearest(query, 8) == pytest.approx(nearest)
        assert list(files.vectors.nearest(query, 8)) == list(nearest)
        assert emb_pg.texts == []  # every chunk vector (and the query's) came across
        assert files.search("where is the retry backoff computed?", limit=1)[0].path == "src/net/retry.py"
        tables = pg.store._query("SELECT model, name FROM file_vector_indexes ORDER BY model")
        assert [m for m, _ in tables] == ["hash-64", "hash-64-b"]
        assert {m: pg.store._query(f"SELECT count(*) FROM {t}")[0][0] for m, t in tables} == by_model
        # the index is current: nothing to read or embed again
        again = files.index([tree / "src"])
        assert (again.files_unchanged, again.files_indexed, again.chunks_embedded) == (26, 0, 0)
        (tree / "src" / "new.py").write_text("def brand_new_function():\n    return 42\n")
        assert files.index([tree / "src"]).files_indexed == 1
        new_rowid = pg.store._query("SELECT c.rowid FROM file_chunks c JOIN files f ON f.rowid = c.file_rowid "
                                    "WHERE f.path = 'src/new.py'")[0][0]
        assert new_rowid > max_chunk and emb_pg.texts  # a new chunk after the copied ones, embedded


def test_migrate_verification_catches_file_and_key_differences(tmp_path: Path, pg_url: str) -> None:
    from lossless.files import Files
    from lossless.files.tables import FILE_TABLES
    from lossless.longterm.tables import MEMORY_TABLES
    from lossless.server.keys import APIKeys
    from lossless.store.transfer import copy_sqlite_to_postgres

    from .test_files import make_tree

    make_tree(tmp_path / "proj", filler=2)
    path = tmp_path / "v.db"
    with lossless.open(path, embedder=None) as mem:
        APIKeys(mem.store).create("acme")
        Files(mem.store, HashEmbedder(), mem.counter).index([tmp_path / "proj"])
    assert copy_sqlite_to_postgres(str(path), pg_url, owners=(MEMORY_TABLES, FILE_TABLES)).ok
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE file_chunks SET text = text || ' (edited)' WHERE rowid = 1")
        conn.execute("UPDATE api_keys SET tenant = 'bravo'")
        (table,) = conn.execute("SELECT name FROM file_vector_indexes").fetchone()
        conn.execute(f"DELETE FROM {table} WHERE chunk_rowid = 2")
    problems = _copy_problems(path, pg_url)
    assert any(p.startswith("file_chunks: the rows differ") for p in problems)
    assert any(p.startswith("api_keys: the rows differ") for p in problems)
    assert any(p.startswith("file_chunk_vectors:") and "rows in SQLite" in p for p in problems)
    assert not any(p.startswith("files:") for p in problems)


# -- vectors --------------------------------------------------------------------------------


def test_pgvector_agrees_with_numpy(tmp_path: Path, pg_url: str) -> None:
    queries = ("service-41 port 5041", "latency fine decided", "run_tests passed")

    def run(target: str | Path, **cfg: Any) -> tuple[lossless.Memory, list[list[tuple[str, int]]]]:
        mem = lossless.open(target, embedder=HashEmbedder(), context_window=2048, **cfg)
        conv = mem.conversation("v")
        conv.add_many(chat(120, tools_every=7))
        conv.index()
        return mem, [[(h.kind, h.first_seq) for h in conv.search(q, mode="semantic", limit=10)] for q in queries]

    numpy_mem, with_numpy = run(tmp_path / "n.db", vector_backend="numpy")
    numpy_mem.close()
    pg_mem, with_pgvector = run(pg_url)
    assert pg_mem.recaller.index_store.backend == "pgvector"
    assert with_pgvector == with_numpy and all(with_numpy)
    pg_mem.recaller.index_store.exact_below = 0  # type: ignore[attr-defined]  # the HNSW path
    conv = pg_mem.conversation("v")
    assert [[(h.kind, h.first_seq) for h in conv.search(q, mode="semantic", limit=10)] for q in queries] == with_numpy
    pg_mem.close()


# -- search details -------------------------------------------------------------------------


def test_regex_translation_and_fallback(pg_url: str) -> None:
    # only ever wider than Python's: the rows it finds are confirmed with Python's re
    assert pg_regex(r"port 50\d\b") == r"port 50."
    assert pg_regex(r"end$") == r"end(?=\n?$)"
    assert pg_regex(r"[\w-]+x") == r".+x" and pg_regex(r"lu{,1}nch") == r"lu{0,1}nch"
    assert pg_regex(r"(?P<w>x)") is None and pg_regex(r"(?m)^x") is None and pg_regex(r"(?i)café") is None
    assert pg_regex(r"(?i)[$]x") == r"(?i)[$]x"
    with lossless.open(pg_url) as mem:
        conv = mem.conversation("rx")
        conv.add(role="user", content="lunch at noon")
        conv.add(role="user", content="lnch typo")
        assert [h.first_seq for h in conv.search(r"(?P<w>lunch)", mode="regex")] == [1]  # scanned in Python
        assert sorted(h.first_seq for h in conv.search(r"lu{,1}nch", mode="regex")) == [1, 2]
        assert [h.first_seq for h in conv.search(r"^lunch", mode="regex")] == [1]
        conv.add(role="user", content="数据库 ５４３３ ÉCOLE")
        assert [h.first_seq for h in conv.search(r"\w+ \d{4}\b", mode="regex")] == [3]  # Unicode classes, as Python
        assert [h.first_seq for h in conv.search(r"(?i)école", mode="regex")] == [3]
        assert [h.first_seq for h in conv.search(r"a{1", mode="regex")] == []  # PostgreSQL refuses: scanned


def test_search_document_holds_parts_and_bigrams() -> None:
    doc = search_document("Café at src/app.py: 数据库迁移")
    lines = doc.split("\n")
    assert lines[0] == "cafe at src/app.py: 数据库迁移"
    assert lines[1].split() == ["src", "app", "py"]
    assert lines[2].split() == ["apppy"]  # store/fts.py's index_extras, as on SQLite
    # store/fts.py's cjk_index_terms, as on SQLite: the bigrams and the run's last character
    assert lines[3].split() == ["数据", "据库", "库迁", "迁移", "移"]
    assert "デ" in search_document("データ")  # kana keep their marks


# -- many processes -------------------------------------------------------------------------


def _writer(url: str, conversation: str, writer: int, count: int, batch: int) -> None:
    # inline: every write compacts at once, so the processes contend for the lease
    mem = lossless.open(url, context_window=2048, fresh_tail_count=6, embedder=None, compaction="inline")
    conv = mem.conversation(conversation)
    for start in range(0, count, batch):
        conv.add_many([{"role": "user" if j % 2 == 0 else "assistant",
                        "content": f"writer {writer} message {j}: " + "detail " * 25}
                       for j in range(start, min(count, start + batch))])
    mem.close()


def _reader(url: str, conversation: str, stop: Any, out: Any) -> None:
    """Checks the partition over and over while writers compact: a reader must never
    see half of a pass."""
    store = PostgresStore(url, pool_size=1)
    seen = problems = 0
    while not stop.is_set():
        with store.transaction():  # one snapshot-consistent read of frontier and tail
            store._query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            frontier = store.frontier(conversation)
            last = store.last_seq(conversation)
        expect = 1
        for node in frontier:
            problems += node.first_seq != expect
            expect = node.last_seq + 1
        problems += expect - 1 > last
        seen += 1
        time.sleep(0.01)
    store.close()
    out.put((seen, problems))


def test_many_processes_write_and_compact_without_loss(pg_url: str) -> None:
    ctx = multiprocessing.get_context("spawn")
    shared, writers, count = "shared", 4, 50
    with lossless.open(pg_url) as mem:
        mem.conversation(shared)
    stop, out = ctx.Event(), ctx.Queue()
    reader = ctx.Process(target=_reader, args=(pg_url, shared, stop, out))
    procs = [ctx.Process(target=_writer, args=(pg_url, shared, w, count, 3)) for w in range(writers)]
    procs += [ctx.Process(target=_writer, args=(pg_url, f"own-{w}", w, count, 5)) for w in range(2)]
    reader.start()
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=240)
        assert p.exitcode == 0
    stop.set()
    seen, problems = out.get(timeout=60)
    reader.join(timeout=60)
    assert seen > 0 and problems == 0

    with lossless.open(pg_url) as mem:
        assert mem.verify() == []
        messages = mem.conversation(shared).messages()
        assert [m.seq for m in messages] == list(range(1, writers * count + 1))  # gap-free, nothing lost
        for w in range(writers):
            mine = [m.content for m in messages if str(m.content).startswith(f"writer {w} ")]
            assert [str(c).split(":")[0] for c in mine] == [f"writer {w} message {j}" for j in range(count)]
        for w in range(2):
            assert len(mem.conversation(f"own-{w}").messages()) == count
        assert mem.conversation(shared).frontier(), "compaction ran"
        # one compaction at a time: the runs that held the lease never overlap
        runs = sorted((e["started_ts"], e["finished_ts"]) for e in mem.conversation(shared).compaction_log(1000))
        assert len(runs) > 1
        assert all(a[1] <= b[0] for a, b in itertools.pairwise(runs))


def test_external_id_race_stores_one_message(pg_url: str) -> None:
    """Two handles adding the same external id concurrently: the row lock makes the
    second see the first's message."""
    from concurrent.futures import ThreadPoolExecutor

    with lossless.open(pg_url) as one, lossless.open(pg_url) as two:
        one.conversation("ext")
        ids = [f"e{uuid.uuid4().hex[:6]}" for _ in range(20)]

        def add(mem: lossless.Memory) -> list[str]:
            return [mem.conversation("ext").add(role="user", content=i, external_id=i).id for i in ids]

        with ThreadPoolExecutor(2) as pool:
            first, second = pool.map(add, (one, two))
        assert first == second
        assert len(one.conversation("ext").messages()) == len(ids) and one.verify() == []
