"""Workspace file memory (lossless.files): the chunker's invariants, indexing a generated
source tree and finding the right file and lines, incremental re-indexing that touches
only what changed, the embedding cache, every kind of bad input, mentions and /context,
the CLI, migration 6. Everything that touches a store runs on SQLite and on PostgreSQL
(``backend``), apart from the SQLite-only vector matrix; pgvector is checked against it."""

from __future__ import annotations

import itertools
import json
import os
import random
import threading
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lossless
from lossless.cli import main
from lossless.core.errors import NotFoundError, ValidationError
from lossless.core.tokens import get_counter
from lossless.files import Files, context_request, kind_of, path_candidates, split_text
from lossless.files.backend import files_backend
from lossless.files.chunk import _lines
from lossless.files.walk import decode, glob_match, read_file
from lossless.store.sqlite import migrations
from lossless.testing import HashEmbedder

COUNTER = get_counter()

# -- a generated source tree ------------------------------------------------------------

_FILLER_WORDS = ["widget", "gadget", "ledger", "parcel", "beacon", "harbor", "quartz", "meadow", "lantern",
                 "compass", "summit", "canyon", "orchid", "falcon", "glacier", "ember", "timber", "velvet"]


def _filler_module(rng: random.Random, i: int) -> str:
    parts = [f'"""Module {i}: helpers for the {rng.choice(_FILLER_WORDS)} service."""', "", "import math", ""]
    for j in range(rng.randint(4, 9)):
        a, b = rng.sample(_FILLER_WORDS, 2)
        parts += [
            "",
            f"def {a}_{b}_{i}_{j}(value, scale=2):",
            f'    """Turn a {a} into a {b} reading (step {j})."""',
            "    total = 0",
            f"    for k in range({rng.randint(2, 9)}):",
            f"        total += math.floor(value * scale + k)  # {rng.choice(_FILLER_WORDS)}",
            "    return total",
        ]
    return "\n".join(parts) + "\n"


RETRY = '''"""Retry policy for outgoing HTTP calls."""

import random

MAX_ATTEMPTS = 6


def should_retry(status):
    """Retry on 429 and on 5xx responses, never on other 4xx."""
    return status == 429 or 500 <= status < 600


def compute_backoff(attempt, base=0.5, cap=30.0):
    """Compute the retry backoff delay: exponential in the attempt number with full
    jitter, capped so a long outage never waits more than `cap` seconds."""
    delay = min(cap, base * (2 ** attempt))
    return random.uniform(0, delay)


def attempts_left(attempt):
    return max(0, MAX_ATTEMPTS - attempt)
''' + "".join(
    f"""

def record_attempt_{i}(log, attempt, status):
    \"\"\"Append attempt {i} of a call to the request log with its status code.\"\"\"
    entry = {{"attempt": attempt, "status": status, "slot": {i}}}
    log.append(entry)
    return len(log)
""" for i in range(12))

TOKENS = '''"""Access tokens for the partner API."""

import time


class TokenStore:
    """Keeps the current access token and refreshes it shortly before it expires."""

    def __init__(self, client):
        self.client = client
        self.token = None
        self.expires_at = 0.0

    def refresh_access_token(self):
        """Exchange the refresh token for a new access token (OAuth2 refresh grant)."""
        reply = self.client.post("/oauth/token", {"grant_type": "refresh_token"})
        self.token = reply["access_token"]
        self.expires_at = time.time() + reply["expires_in"]
        return self.token
'''

DEPLOY = """# Deployment guide

How releases reach production.

## Building a release

Run `make release` on a clean checkout; the artefact is signed by CI.

## Rolling back a release

If the error budget burns too fast, roll back: run `deployctl rollback --to previous`
and page the on-call engineer. The rollback keeps the database schema; migrations are
forward-only, so a rollback never undoes one.

## Canary stages

Traffic moves 1% → 10% → 50% → 100%, twenty minutes per stage.
"""

FLAGS = {"flags": {"dark_mode_theme": {"enabled": True, "owner": "web-team", "description":
                                       "Enables the dark mode colour theme for the dashboard"},
                   "beta_exports": {"enabled": False, "owner": "data-team", "description": "CSV exports"}}}


def make_tree(root: Path, *, seed: int = 3, filler: int = 24) -> dict[str, Path]:
    """~30 files: Python modules, markdown docs and JSON config, with a few distinctive
    functions and sections among filler."""
    rng = random.Random(seed)
    files = {
        "src/net/retry.py": RETRY,
        "src/auth/tokens.py": TOKENS,
        "docs/deploy.md": DEPLOY,
        "config/flags.json": json.dumps(FLAGS, indent=2),
        "README.md": "# Demo service\n\nA generated project for the file-memory tests.\n",
        "docs/retry-notes.md": "# Notes\n\nWe retry twice in the batch jobs; see the network module.\n",
    }
    for i in range(filler):
        files[f"src/pkg{i % 4}/module_{i:02d}.py"] = _filler_module(rng, i)
    out: dict[str, Path] = {}
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        out[rel] = path
    return out


def _line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.split("\n"), 1) if needle in line)


@pytest.fixture
def mem(backend_target: str) -> Iterator[lossless.Memory]:
    """A store of each backend (SQLite, PostgreSQL)."""
    m = lossless.open(backend_target, embedder=None)
    yield m
    m.close()


@pytest.fixture
def sqlite_mem(tmp_path: Path) -> Iterator[lossless.Memory]:
    m = lossless.open(tmp_path / "files.db", embedder=None)
    yield m
    m.close()


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    make_tree(root)
    return root


def _files(mem: lossless.Memory, embedder: Any = None, **kw: Any) -> Files:
    return Files(mem.store, embedder, mem.counter, **kw)


def _query(mem: lossless.Memory, sql: str, args: Any = ()) -> list[tuple[Any, ...]]:
    """Rows of one ``?``-placeholder statement, on either backend."""
    return files_backend(mem.store).query(sql, args)


def _count(mem: lossless.Memory, sql: str, args: Any = ()) -> int:
    return int(_query(mem, sql, args)[0][0])


def _vectors(mem: lossless.Memory) -> dict[int, Any]:
    """chunk rowid → its vector as stored (SQLite: a blob; PostgreSQL: pgvector's text of
    it), read straight from the tables."""
    if mem.store.dialect == "sqlite":
        return dict(_query(mem, "SELECT chunk_rowid, vector FROM file_chunk_vectors"))
    out: dict[int, Any] = {}
    for (table,) in _query(mem, "SELECT name FROM file_vector_indexes"):
        out.update(_query(mem, f"SELECT chunk_rowid, embedding::text FROM {table}"))
    return out


def _vector_count(mem: lossless.Memory) -> int:
    return len(_vectors(mem))


def _chunk_rows(mem: lossless.Memory) -> dict[str, list[tuple[Any, ...]]]:
    """path → [(chunk rowid, start, end, vector or None)] for every indexed file."""
    rows = _query(mem, "SELECT f.path, c.rowid, c.start_line, c.end_line FROM file_chunks c JOIN files f "
                       "ON f.rowid = c.file_rowid ORDER BY c.rowid")
    vectors = _vectors(mem)
    out: dict[str, list[tuple[Any, ...]]] = {}
    for path, rowid, start, end in rows:
        out.setdefault(path, []).append((rowid, start, end, vectors.get(rowid)))
    return out


# -- the chunker ----------------------------------------------------------------------------

_code_line = st.one_of(
    st.sampled_from(["", "def handler(event):", "class Store:", "    return value", "@decorator",
                     "# a comment", "    x = compute(a, b)  # why", "fn main() {", "}", "func Run() error {"]),
    st.text(alphabet="abcdefghij klmnop_()=+.,", max_size=60),
)
_md_line = st.one_of(
    st.sampled_from(["", "# Title", "## Section", "### Sub", "- item one", "Some prose about the system.",
                     "```python", "```", "| a | b |"]),
    st.text(alphabet="abcdefghij klmnop,.", max_size=80),
)
_long_line = st.text(alphabet="abcdefghijklmnopqrstuvwxyz ,;0123456789", min_size=2000, max_size=4000)


def _check_chunks(text: str, kind: Any, cap: int, overlap: int) -> list[Any]:
    chunks = split_text(text, kind, COUNTER, chunk_tokens=cap, overlap_tokens=overlap)
    lines = _lines(text)
    if not lines:
        assert chunks == []
        return chunks
    covered = set()
    for a, b in itertools.pairwise(chunks):
        assert (a.start_line, a.end_line) <= (b.start_line, b.end_line)  # ordered
        assert b.end_line >= a.end_line and b.start_line >= a.start_line
    for c in chunks:
        assert 1 <= c.start_line <= c.end_line <= len(lines)
        covered.update(range(c.start_line, c.end_line + 1))
        if c.start_line != c.end_line:
            assert c.text == "\n".join(lines[c.start_line - 1 : c.end_line])
        # within the cap unless it is (a piece of) one line
        assert c.token_count <= cap or c.start_line == c.end_line
        assert c.token_count == COUNTER.count(c.text)
    assert covered == set(range(1, len(lines) + 1))  # every line is in a chunk
    assert chunks[0].start_line == 1 and chunks[-1].end_line == len(lines)
    # the pieces of one long line put it back together
    for n in {c.start_line for c in chunks if c.start_line == c.end_line}:
        pieces = [c for c in chunks if c.start_line == c.end_line == n]
        if len(pieces) > 1:
            assert "".join(p.text for p in pieces) == lines[n - 1]
            assert all(p.token_count <= cap for p in pieces)
    return chunks


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(_code_line, _code_line, _code_line, _long_line), max_size=300),
       st.sampled_from([("code", 64, 16), ("text", 100, 30), ("data", 40, 0), ("code", 400, 80)]))
def test_chunks_cover_every_line_in_order_within_the_cap(lines: list[str], params: tuple[Any, int, int]) -> None:
    kind, cap, overlap = params
    _check_chunks("\n".join(lines), kind, cap, overlap)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_md_line, max_size=300), st.sampled_from([(64, 16), (120, 40), (400, 80)]))
def test_markdown_chunks_keep_the_invariants(lines: list[str], params: tuple[int, int]) -> None:
    _check_chunks("\n".join(lines), "markdown", *params)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(["alpha beta gamma", "x = 1", "", "def f():", "    return g(x) + h(y)",
                                 "class K:", "delta epsilon zeta eta theta"]), min_size=1, max_size=400),
       st.sampled_from(["code", "text"]))
def test_consecutive_chunks_overlap(lines: list[str], kind: Any) -> None:
    """With lines far shorter than the overlap, every chunk shares lines with the next."""
    chunks = _check_chunks("\n".join(lines), kind, 80, 20)
    for a, b in itertools.pairwise(chunks):
        assert b.start_line <= a.end_line < b.end_line


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, 12), st.integers(1, 14)), min_size=1, max_size=25))
def test_a_fenced_block_that_fits_is_never_split(shape: list[tuple[int, int]]) -> None:
    lines: list[str] = []
    fences: list[tuple[int, int]] = []
    for prose, code in shape:
        lines += [f"Paragraph line {i} about the deployment." for i in range(prose)] + [""]
        start = len(lines) + 1
        lines += ["```python", *[f"    step_{i} = run(step_{i - 1})" for i in range(code)], "```", ""]
        fences.append((start, start + code + 1))
    cap = 120
    chunks = _check_chunks("\n".join(lines), "markdown", cap, 30)
    for first, last in fences:
        if sum(COUNTER.count(line + "\n") for line in lines[first - 1 : last]) <= cap:  # it fits
            assert any(c.start_line <= first and last <= c.end_line for c in chunks), (first, last)


def test_cuts_prefer_definitions_and_headings() -> None:
    code = "\n".join(_filler_module(random.Random(1), 1) for _ in range(3))
    chunks = split_text(code, "code", COUNTER, chunk_tokens=120, overlap_tokens=0)
    lines = _lines(code)
    # every chunk but the first starts at a definition (or the module docstring)
    starts = [lines[c.start_line - 1] for c in chunks[1:]]
    assert all(s.startswith(("def ", '"""')) for s in starts), starts
    md = "\n\n".join(f"## Section {i}\n\n" + "Prose sentence here. " * 12 for i in range(8))
    chunks = split_text(md, "markdown", COUNTER, chunk_tokens=200, overlap_tokens=0)
    assert all(_lines(md)[c.start_line - 1].startswith("## ") for c in chunks)


def test_chunk_parameters_and_kinds() -> None:
    with pytest.raises(ValidationError, match="chunk_tokens"):
        split_text("x", "text", COUNTER, chunk_tokens=4)
    with pytest.raises(ValidationError, match="overlap_tokens"):
        split_text("x", "text", COUNTER, chunk_tokens=100, overlap_tokens=60)
    assert split_text("", "text", COUNTER) == []
    crlf = split_text("a\r\nb\r\n", "text", COUNTER)
    assert [(c.start_line, c.end_line, c.text) for c in crlf] == [(1, 2, "a\nb")]
    assert [kind_of(p) for p in ("a.py", "b.md", "c.json", "Makefile", "notes.txt", "x")] == [
        "code", "markdown", "data", "code", "text", "text"]


# -- indexing and searching ---------------------------------------------------------------


def test_index_a_tree_and_find_the_right_file_and_lines(mem: lossless.Memory, tree: Path) -> None:
    files = _files(mem)
    report = files.index([tree])
    assert report.files_seen == report.files_indexed == 30 and not report.skipped
    assert report.chunks_written == _count(mem, "SELECT count(*) FROM file_chunks") > 30
    hits = files.search("where is the retry backoff computed?", limit=3)
    top = hits[0]
    assert top.path == "src/net/retry.py" and top.kind == "code" and top.root == str(tree.resolve())
    assert top.start_line <= _line_of(RETRY, "def compute_backoff") <= top.end_line
    assert "def compute_backoff" in top.text
    assert top.end_line - top.start_line < len(RETRY.split("\n")) // 2  # a chunk, not the file
    assert top.abs_path == str((tree / "src/net/retry.py").resolve())
    doc = files.search("how do I roll back a release?", limit=3)[0]
    assert doc.path == "docs/deploy.md"
    assert doc.start_line <= _line_of(DEPLOY, "## Rolling back") <= doc.end_line
    assert files.search("which flag turns on dark mode", limit=1)[0].path == "config/flags.json"
    assert files.search("refresh the access token before it expires", limit=1)[0].path == "src/auth/tokens.py"
    # filters
    assert {h.kind for h in files.search("retry", kinds=["markdown"])} == {"markdown"}
    assert {h.path for h in files.search("retry", paths="docs/*")} <= {"docs/deploy.md", "docs/retry-notes.md"}
    assert files.search("retry", paths="nothing/*") == []
    assert files.search("zzyzx qwertyuiop") == []
    # 中文 text is found by its bigrams (store/fts.py), a two-character word too (issue 27)
    (tree / "docs/zh.md").write_text("# 部署\n\n回滚发布时请先通知值班工程师。\n", encoding="utf-8")
    files.index([tree])
    assert files.search("回滚发布", limit=1)[0].path == "docs/zh.md"
    assert files.search("值班", limit=1)[0].path == "docs/zh.md"
    assert files.search("怎么回滚？", limit=1)[0].path == "docs/zh.md"


def test_vector_search_finds_by_meaning_through_the_cache(mem: lossless.Memory, tree: Path) -> None:
    emb = HashEmbedder()
    files = _files(mem, emb, vector_weight=0.7)
    report = files.index([tree])
    n = _count(mem, "SELECT count(*) FROM file_chunks")
    assert _vector_count(mem) == n
    assert report.chunks_embedded == len(emb.texts) == _count(mem, "SELECT count(DISTINCT text_sha256) FROM file_chunks")
    hit = files.search("backoff jitter exponential attempt", limit=1)[0]
    assert hit.path == "src/net/retry.py"
    # the matrix reloads after a write: a new file is found by its vector at once
    (tree / "src/net/circuit.py").write_text("def trip_breaker(failures):\n    return failures > 5\n")
    files.index([tree / "src"])
    assert files.search("trip breaker failures", limit=1)[0].path == "src/net/circuit.py"


@pytest.mark.sqlite_only(reason="the SQLite store's numpy matrix of file vectors")
def test_the_vector_matrix_catches_up_exactly(sqlite_mem: lossless.Memory, tree: Path) -> None:
    """After many edits, deletions and additions, the matrix kept up to date by segments
    answers exactly like one loaded from scratch."""
    from lossless.files.vectors import ChunkVectors

    mem = sqlite_mem

    emb = HashEmbedder()
    files = _files(mem, emb)
    files.index([tree])
    rng = random.Random(4)
    query = "ledger beacon harbor value scale"
    files.vectors.nearest(query, 10)  # type: ignore[union-attr]
    paths = sorted(p for p in tree.rglob("*.py") if "pkg" in str(p))
    for step in range(12):
        victim = rng.choice(paths)
        if step % 3 == 2 and victim.exists():
            victim.unlink()
        else:
            victim.write_text(_filler_module(rng, 100 + step))
        files.index([tree])
        live = files.vectors.nearest(query, 20)  # type: ignore[union-attr]
        assert live == ChunkVectors(mem.store, emb).nearest(query, 20)
        matrix = files.vectors.matrix()  # type: ignore[union-attr]
        assert sum(int(s.alive.sum()) for s in matrix.segments) == _vector_count(mem)
        assert len(matrix.segments) <= 8


@pytest.mark.postgres
def test_pgvector_agrees_with_the_numpy_matrix(sqlite_mem: lossless.Memory, pg_url: str, tree: Path) -> None:
    """The same tree indexed on PostgreSQL: pgvector finds the same nearest chunks, with
    the same similarities, as SQLite's numpy matrix; exactly and through the HNSW index,
    with and without the path and kind filters."""
    emb = HashEmbedder()
    on_sqlite = _files(sqlite_mem, emb)
    on_sqlite.index([tree])
    with lossless.open(pg_url, embedder=None) as pg:
        on_pg = _files(pg, emb)
        on_pg.index([tree])
        assert on_pg.stats().vectors == on_sqlite.stats().vectors > 30

        def where(mem: lossless.Memory, found: dict[int, float]) -> list[tuple[str, int, float]]:
            spans = {r[0]: (r[1], r[2]) for r in _query(mem, "SELECT c.rowid, f.path, c.start_line FROM file_chunks c "
                                                              "JOIN files f ON f.rowid = c.file_rowid")}
            return [(*spans[rowid], round(sim, 5)) for rowid, sim in found.items()]

        def file_ids(mem: lossless.Memory, prefix: str) -> set[int]:
            return {r[0] for r in _query(mem, "SELECT rowid FROM files WHERE substr(path, 1, ?) = ?",
                                         (len(prefix), prefix))}

        pg_vectors, np_vectors = on_pg.vectors, on_sqlite.vectors
        assert pg_vectors is not None and np_vectors is not None
        for exact_below in (10**9, 0):  # an exact scan, then the HNSW index
            pg_vectors.exact_below = exact_below  # type: ignore[attr-defined]
            for query in ("ledger beacon harbor value scale", "backoff jitter exponential attempt",
                          "refresh the access token"):
                want = where(sqlite_mem, np_vectors.nearest(query, 8))
                assert len(want) == 8 and where(pg, pg_vectors.nearest(query, 8)) == want
                want = where(sqlite_mem, np_vectors.nearest(query, 5, kinds={"markdown"},
                                                            files=file_ids(sqlite_mem, "docs/")))
                got = where(pg, pg_vectors.nearest(query, 5, kinds={"markdown"}, files=file_ids(pg, "docs/")))
                assert want and got == want and {p for p, _, _ in got} <= {"docs/deploy.md", "docs/retry-notes.md"}
        # a question whose words no chunk holds is still answered by the vector side alone
        hit = on_pg.search("jitter", limit=1)[0]
        assert hit.path == on_sqlite.search("jitter", limit=1)[0].path == "src/net/retry.py"


def test_reindex_touches_only_the_changed_file(mem: lossless.Memory, tree: Path) -> None:
    emb = HashEmbedder()
    files = _files(mem, emb)
    files.index([tree])
    before = _chunk_rows(mem)
    again = files.index([tree])
    assert (again.files_unchanged, again.files_indexed, again.chunks_written, again.chunks_embedded) == (30, 0, 0, 0)
    assert _chunk_rows(mem) == before
    target = tree / "src/pkg1/module_05.py"
    old_count = len(before["src/pkg1/module_05.py"])
    target.write_text(target.read_text() + "\n\ndef reconcile_ledger_totals(rows):\n    return sum(rows)\n")
    texts_before = len(emb.texts)
    report = files.index([tree])
    assert (report.files_changed, report.files_indexed, report.files_unchanged) == (1, 1, 29)
    assert report.chunks_removed == old_count and report.chunks_written >= 1
    after = _chunk_rows(mem)
    for path, rows in before.items():
        if path != "src/pkg1/module_05.py":
            assert after[path] == rows  # same chunk rowids, lines and vector bytes
    assert {r[0] for r in after["src/pkg1/module_05.py"]}.isdisjoint({r[0] for r in before["src/pkg1/module_05.py"]})
    # only the chunks whose text changed went to the embedder
    assert 1 <= len(emb.texts) - texts_before <= len(after["src/pkg1/module_05.py"])
    assert files.search("reconcile ledger totals", limit=1)[0].path == "src/pkg1/module_05.py"


def test_touch_and_reindex_embed_nothing(mem: lossless.Memory, tree: Path) -> None:
    emb = HashEmbedder()
    files = _files(mem, emb)
    files.index([tree])
    embedded = len(emb.texts)
    retry = tree / "src/net/retry.py"
    st = retry.stat()
    os.utime(retry, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    report = files.index([tree])
    assert (report.files_touched, report.files_indexed, report.chunks_embedded) == (1, 0, 0)
    assert _count(mem, "SELECT mtime_ns FROM files WHERE path = 'src/net/retry.py'") == st.st_mtime_ns + 5_000_000_000
    # taken out and indexed again, or forced: chunks are rewritten, vectors come from the cache
    files.remove(["src/net/retry.py"])
    report = files.index([tree])
    assert report.files_indexed == 1 and report.chunks_embedded == 0
    report = files.index([tree], force=True)
    assert report.files_indexed == 30 and report.chunks_embedded == 0
    assert len(emb.texts) == embedded


def test_keyword_index_gets_vectors_when_an_embedder_comes(mem: lossless.Memory, tree: Path) -> None:
    _files(mem).index([tree])
    assert _vector_count(mem) == 0
    emb = HashEmbedder()
    report = _files(mem, emb).index([tree])
    assert report.files_unchanged == 30 and report.chunks_embedded > 0
    assert _vector_count(mem) == _count(mem, "SELECT count(*) FROM file_chunks")


def test_deleted_files_leave_the_index(mem: lossless.Memory, tree: Path) -> None:
    files = _files(mem, HashEmbedder())
    files.index([tree])
    gone = len(_chunk_rows(mem)["src/net/retry.py"])
    (tree / "src/net/retry.py").unlink()
    report = files.index([tree])
    assert (report.files_removed, report.chunks_removed) == (1, gone)
    assert "src/net/retry.py" not in _chunk_rows(mem)
    assert all(h.path != "src/net/retry.py" for h in files.search("compute backoff retry"))
    # the keyword index entries and vector rows went with the chunks
    assert _vector_count(mem) == _count(mem, "SELECT count(*) FROM file_chunks")
    if mem.store.dialect == "sqlite":
        assert _count(mem, "SELECT count(*) FROM file_chunks_fts WHERE file_chunks_fts MATCH 'compute_backoff'") == 0
    else:
        assert _count(mem, "SELECT count(*) FROM file_chunks WHERE search @@ to_tsquery('english', 'backoff')") == 0
    # narrowing the filters does not remove files that still exist
    report = files.index([tree], include="*.md")
    assert report.files_removed == 0 and report.files_seen == 3
    assert len(files.ls()) == 29
    # remove() by directory and by name; unknown names are an error
    assert files.remove([tree / "docs"]).files_removed == 2
    assert files.remove(["tokens.py"]).files_removed == 1
    with pytest.raises(NotFoundError):
        files.remove(["no/such/file.py"])
    stats = files.stats()
    assert stats.files == 26 and stats.chunks == stats.vectors > 0 and stats.roots == [str(tree.resolve())]


def test_each_file_is_written_in_one_transaction(mem: lossless.Memory, tree: Path) -> None:
    """An embedder that fails leaves no half-written file: chunks are stored for keyword
    search, with a warning, and get their vectors on a later run."""

    class Flaky(HashEmbedder):
        fail = True

        def embed(self, texts: Any) -> Any:
            if self.fail:
                raise RuntimeError("provider down")
            return super().embed(texts)

    emb = Flaky()
    files = _files(mem, emb)
    report = files.index([tree])
    assert report.files_indexed == 30 and report.warnings and "provider down" in report.warnings[0]
    counts = _query(mem, "SELECT f.chunk_count, (SELECT count(*) FROM file_chunks c WHERE c.file_rowid = f.rowid) "
                         "FROM files f")
    assert all(a == b for a, b in counts)
    emb.fail = False
    assert files.index([tree]).chunks_embedded > 0
    assert _vector_count(mem) == _count(mem, "SELECT count(*) FROM file_chunks")


def test_concurrent_indexers_store_each_file_once(mem: lossless.Memory, tree: Path) -> None:
    """Indexers racing over one tree (threads here, processes or hosts on PostgreSQL) take
    turns writing: every file is stored once, with all its chunks."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            _files(mem).index([tree])
        except BaseException as exc:  # pragma: no cover - the assertion below shows it
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert _count(mem, "SELECT count(*) FROM files") == 30
    assert _count(mem, "SELECT count(*) FROM files f WHERE chunk_count != "
                       "(SELECT count(*) FROM file_chunks c WHERE c.file_rowid = f.rowid)") == 0
    assert _files(mem).search("where is the retry backoff computed?", limit=1)[0].path == "src/net/retry.py"


# -- bad input -----------------------------------------------------------------------------


def test_paths_outside_the_roots_are_refused(mem: lossless.Memory, tmp_path: Path) -> None:
    inside, outside = tmp_path / "inside", tmp_path / "outside"
    inside.mkdir()
    outside.mkdir()
    (inside / "a.py").write_text("def a():\n    pass\n")
    (outside / "secret.txt").write_text("the launch code is 0000\n")
    files = _files(mem, roots=[inside])
    with pytest.raises(ValidationError, match="outside the allowed roots"):
        files.index([outside])
    with pytest.raises(ValidationError, match="outside the allowed roots"):
        files.index([inside / ".." / "outside" / "secret.txt"])
    (inside / "link.txt").symlink_to(outside / "secret.txt")
    with pytest.raises(ValidationError, match="a symlink to"):
        files.index([inside / "link.txt"])
    # one bad path refuses the whole call: nothing was indexed
    with pytest.raises(ValidationError, match="no such file"):
        files.index([inside, tmp_path / "missing"])
    assert files.ls() == []
    # found by a walk, the link is skipped as a refusal (the CLI exits 1 on it)
    (inside / "linkdir").symlink_to(outside, target_is_directory=True)
    report = files.index([inside])
    assert sorted((s.path, s.reason) for s in report.refused) == [("link.txt", "outside roots"),
                                                                   ("linkdir", "outside roots")]
    assert [f.path for f in files.ls()] == ["a.py"]
    assert files.search("launch code") == []
    # without roots each path is its own limit
    report = _files(mem).index([inside])
    assert {s.reason for s in report.skipped} == {"outside roots"}
    (inside / "dangling").symlink_to(tmp_path / "nowhere")
    with pytest.raises(ValidationError, match="does not exist"):
        files.index([inside / "dangling"])
    with pytest.raises(ValidationError):
        Files(mem.store, None, mem.counter, roots=[tmp_path / "not-a-dir"])
    with pytest.raises(ValidationError, match="list of paths"):
        files.index(str(inside))  # type: ignore[arg-type]


def test_binary_and_badly_encoded_files(mem: lossless.Memory, tmp_path: Path) -> None:
    root = tmp_path / "w"
    root.mkdir()
    (root / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 8)
    rng = random.Random(1)
    (root / "noise.dat").write_bytes(bytes(rng.randrange(1, 256) for _ in range(4000)))
    (root / "latin1.txt").write_bytes("Café crème brûlée, the menu of the day. ".encode("latin-1") * 20)
    (root / "utf16.txt").write_text("hello from utf-16 land\n", encoding="utf-16")
    (root / "ok.md").write_text("# Fine\n\nplain text\n")
    report = _files(mem).index([root])
    assert sorted((s.path, s.reason) for s in report.skipped) == [("image.png", "binary"), ("noise.dat", "binary")]
    paths = {f.path for f in _files(mem).ls()}
    assert paths == {"latin1.txt", "utf16.txt", "ok.md"}
    latin = _files(mem).search("menu of the day", limit=1)[0]
    assert latin.path == "latin1.txt" and "\ufffd" in latin.text
    assert _files(mem).search("utf-16 land", limit=1)[0].path == "utf16.txt"
    assert decode(b"plain") == "plain" and decode(b"\x01\x02\x03\x04 x") is None
    # a file that became binary loses its stale chunks
    (root / "ok.md").write_bytes(b"\x00\x01binary now")
    report = _files(mem).index([root])
    assert report.files_removed == 1 and "ok.md" not in {f.path for f in _files(mem).ls()}


def test_huge_files_are_skipped_without_reading_them(mem: lossless.Memory, tmp_path: Path) -> None:
    root = tmp_path / "logs"
    root.mkdir()
    with open(root / "huge.log", "wb") as f:
        f.truncate(1 << 30)  # 1 GiB, sparse: costs no disk
    (root / "small.log").write_text("service started\n")
    tracemalloc.start()
    try:
        report = _files(mem).index([root])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [(s.path, s.reason) for s in report.skipped] == [("huge.log", "too large")]
    assert peak < 20 * 1024 * 1024
    assert report.files_indexed == 1
    report = _files(mem).index([root / "small.log"], max_file_bytes=4)
    assert [(s.path, s.reason) for s in report.skipped] == [("small.log", "too large")]
    assert read_file(str(root / "small.log"), 4) == "too large"
    with pytest.raises(ValidationError, match="max_file_bytes"):
        _files(mem).index([root], max_file_bytes=0)


def test_a_file_that_vanishes_mid_index_leaves_no_rows(mem: lossless.Memory, tree: Path) -> None:
    order: list[str] = []

    def progress(done: int, total: int, path: str) -> None:
        order.append(path)
        if path == "src/auth/tokens.py":
            (tree / "src/net/retry.py").unlink()  # the walk saw it; it goes before it is read

    report = _files(mem).index([tree], progress=progress)
    assert ("src/net/retry.py", "vanished") in [(s.path, s.reason) for s in report.skipped]
    assert report.files_indexed == 29 and len(order) == 30
    assert _count(mem, "SELECT count(*) FROM files WHERE path = 'src/net/retry.py'") == 0
    assert _count(mem, "SELECT count(*) FROM files f WHERE chunk_count != "
                       "(SELECT count(*) FROM file_chunks c WHERE c.file_rowid = f.rowid)") == 0


def test_symlink_loops_and_duplicates_are_walked_once(mem: lossless.Memory, tmp_path: Path) -> None:
    root = tmp_path / "loop"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "deep.py").write_text("def deep_function():\n    return 1\n")
    (root / "a" / "b" / "up").symlink_to(root, target_is_directory=True)  # a loop
    (root / "alias").symlink_to(root / "a", target_is_directory=True)  # a second way in
    (root / "file-alias.py").symlink_to(root / "a" / "b" / "deep.py")
    if hasattr(os, "mkfifo"):
        os.mkfifo(root / "pipe")  # must not block the walk
    report = _files(mem).index([root])
    assert ("a/b/up", "symlink loop") in [(s.path, s.reason) for s in report.skipped]
    assert [f.path for f in _files(mem).ls()] == ["a/b/deep.py"]  # one row, by its real path
    if hasattr(os, "mkfifo"):
        assert ("pipe", "not a regular file") in [(s.path, s.reason) for s in report.skipped]


def test_excludes_and_includes(mem: lossless.Memory, tree: Path) -> None:
    (tree / "node_modules" / "lib").mkdir(parents=True)
    (tree / "node_modules" / "lib" / "index.js").write_text("function leftPad() {}\n")
    (tree / ".git").mkdir()
    (tree / ".git" / "config").write_text("[core]\n")
    (tree / ".env").write_text("API_KEY=hunter2\n")
    files = _files(mem)
    report = files.index([tree], include=["*.py"], exclude=["src/pkg0/**"])
    assert report.files_seen == 20
    assert all(f.path.endswith(".py") and not f.path.startswith("src/pkg0/") for f in files.ls())
    report = files.index([tree])
    assert not any(f.path.startswith(("node_modules", ".git", ".env")) for f in files.ls())
    assert files.search("hunter2") == []
    report = files.index([tree], default_exclude=False, include="*.js")
    assert [f.path for f in files.ls("*.js")] == ["node_modules/lib/index.js"]
    assert glob_match("src/**", "src/a/b.py") and glob_match("*.py", "src/a/b.py")
    assert glob_match("**/b.py", "src/a/b.py") and not glob_match("docs/*", "src/docs.md")
    with pytest.raises(ValidationError, match="include"):
        files.index([tree], include=[""])


# -- mentions, /context and for_path --------------------------------------------------------


def test_mentioned_paths_and_context_requests(mem: lossless.Memory, tree: Path) -> None:
    files = _files(mem)
    files.index([tree])
    text = ("Can you open `src/net/retry.py` and ./docs/deploy.md? Also tokens.py, module_99.py, "
            "README.md, e.g. version 1.2.3 and foo.bar")
    assert files.mentioned(text) == ["src/net/retry.py", "docs/deploy.md", "src/auth/tokens.py", "README.md"]
    assert files.mentioned("打开 `retry.py` 文件") == ["src/net/retry.py"]
    assert files.mentioned("打开retry.py文件，参考deploy.md") == ["src/net/retry.py", "docs/deploy.md"]
    assert files.mentioned(f"see {tree / 'config/flags.json'}:12") == ["config/flags.json"]
    assert files.mentioned("net/retry.py line 4") == ["src/net/retry.py"]  # a path suffix
    assert files.mentioned("nothing here") == []
    # a name two files share is not a mention; a longer path is
    (tree / "docs" / "tokens.py").write_text("TOKENS = []\n")
    files.index([tree])
    assert files.mentioned("tokens.py") == []
    assert files.mentioned("auth/tokens.py") == ["src/auth/tokens.py"]
    assert path_candidates("see a/b.py, ./c.md. and @user") == ["a/b.py", "c.md"]
    assert context_request("/context project layout") == "project layout"
    assert context_request("hi\n  /context   src/net/retry.py  \nthanks") == "src/net/retry.py"
    assert context_request("/context") == ""
    assert context_request("/contextual thing") is None and context_request("no command") is None
    assert files.context_request("/context 项目结构") == "项目结构"


def test_for_path(mem: lossless.Memory, tree: Path) -> None:
    files = _files(mem)
    files.index([tree])
    hits = files.for_path("retry.py", "backoff")
    assert hits and hits[0].path == "src/net/retry.py" and "compute_backoff" in hits[0].text
    assert [h.path for h in files.for_path(str(tree / "docs/deploy.md"))] == ["docs/deploy.md"]
    head = files.for_path("./src/net/retry.py", limit=1)
    assert head[0].start_line == 1 and head[0].score == 0.0
    assert files.for_path("net/retry.py", "no such words anywhere")[0].start_line == 1
    with pytest.raises(NotFoundError):
        files.for_path("missing.py")
    (tree / "docs" / "tokens.py").write_text("TOKENS = []\n")
    files.index([tree])
    with pytest.raises(ValidationError, match="names 2 indexed files"):
        files.for_path("tokens.py")
    with pytest.raises(ValidationError):
        files.for_path("")
    with pytest.raises(ValidationError, match="query"):
        files.search("   ")
    with pytest.raises(ValidationError, match="limit"):
        files.search("x", limit=0)
    with pytest.raises(ValidationError, match="kinds"):
        files.search("x", kinds=["binary"])


def test_a_wider_root_keeps_paths_relative_to_it(mem: lossless.Memory, tree: Path) -> None:
    files = _files(mem)
    files.index([tree / "src"])
    assert files.search("compute backoff")[0].path == "net/retry.py"
    report = files.index([tree])
    assert report.files_indexed == 4 and report.files_unchanged == 26  # src/ was not read again
    assert files.search("compute backoff")[0].path == "src/net/retry.py"
    # the new path's words are searchable: "pkg2" is only in the paths
    assert {h.path.split("/")[1] for h in files.search("pkg2", limit=50)} == {"pkg2"}
    files.index([tree / "src" / "net"])  # a narrower index keeps the wider root
    assert [f.path for f in files.ls("*retry*")] == ["docs/retry-notes.md", "src/net/retry.py"]


def test_two_roots_with_the_same_relative_path(mem: lossless.Memory, tmp_path: Path) -> None:
    for name in ("one", "two"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "README.md").write_text(f"# Project {name}\n\nThe {name} project readme.\n")
    files = _files(mem)
    files.index([tmp_path / "one", tmp_path / "two"])
    assert len(files.ls()) == 2
    mentioned = files.mentioned(f"compare {tmp_path / 'one' / 'README.md'} with the other")
    assert mentioned == [str((tmp_path / "one" / "README.md").resolve())]  # relative path is ambiguous
    assert files.for_path(mentioned[0])[0].abs_path == mentioned[0]


# -- CLI and migration ----------------------------------------------------------------------


def _run(capsys: pytest.CaptureFixture[str], db: Path | str, *args: Any) -> tuple[int, str, str]:
    capsys.readouterr()
    status = main(["--db", str(db), *map(str, args)])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return status, out, err


def test_cli_index_search_ls(tmp_path: Path, tree: Path, backend_target: str,
                             capsys: pytest.CaptureFixture[str]) -> None:
    db = backend_target
    status, out, err = _run(capsys, db, "index", tree)
    assert status == 0, err
    assert "30 files: 30 indexed" in out
    status, out, _ = _run(capsys, db, "--json", "index", tree)
    report = json.loads(out)
    assert status == 0 and report["files_unchanged"] == 30 and report["files_indexed"] == 0
    status, out, _ = _run(capsys, db, "files", "search", "where is the retry backoff computed?", "--limit", "2")
    assert status == 0 and out.startswith("src/net/retry.py:1-") and "Retry policy" in out
    hits = json.loads(_run(capsys, db, "files", "search", "roll back a release", "--json", "--path", "docs/*")[1])
    assert hits[0]["path"] == "docs/deploy.md" and set(hits[0]) >= {"start_line", "end_line", "text", "score",
                                                                     "chunk_id"}
    listed = json.loads(_run(capsys, db, "--json", "files", "ls")[1])
    assert len(listed) == 30 and {"path", "root", "chunk_count", "sha256"} <= set(listed[0])
    status, out, _ = _run(capsys, db, "files", "ls", "--path", "*.md")
    assert status == 0 and "deploy.md" in out and "retry.py" not in out
    stats = json.loads(_run(capsys, db, "--json", "files", "stats")[1])
    assert stats["files"] == 30
    status, out, _ = _run(capsys, db, "files", "rm", tree / "docs")
    assert status == 0 and "removed 2 files" in out
    status, _, err = _run(capsys, db, "files", "rm", "nope.py")
    assert status == 1 and "not indexed" in err
    # refusals: exit 1 with a clean message
    status, _, err = _run(capsys, db, "index", "--root", tree / "src", tree / "docs")
    assert status == 1 and "outside the allowed roots" in err
    (tree / "out-link").symlink_to(tmp_path, target_is_directory=True)
    status, out, err = _run(capsys, db, "index", tree)
    assert status == 1 and "refused out-link" in err and "30 files" in out
    status, _, err = _run(capsys, tmp_path / "none.db", "files", "search", "x")  # a SQLite file not there
    assert status == 1 and "no database" in err


def test_cli_progress_bar_on_a_terminal(backend_target: str, tree: Path) -> None:
    import io

    from rich.console import Console

    from lossless.cli import files_cmd
    from lossless.cli.context import CommandContext
    from lossless.cli.main import build_parser

    args = build_parser().parse_args(["--db", backend_target, "index", str(tree)])
    out, err = io.StringIO(), io.StringIO()
    ctx = CommandContext(args=args, out=Console(file=out, width=200),
                         err=Console(file=err, force_terminal=True, width=120))
    try:
        assert files_cmd.cmd_index(ctx) == 0
    finally:
        ctx.close()
    assert "30 files: 30 indexed" in out.getvalue() and "indexing" in err.getvalue()


@pytest.mark.sqlite_only(reason="upgrades a SQLite file written by migration 5")
def test_migration_6_upgrades_an_older_database(tmp_path: Path) -> None:
    import apsw

    path = tmp_path / "old.db"
    conn = apsw.Connection(str(path))
    migrations.migrate(conn, upto=5)
    assert migrations.applied(conn) == [1, 2, 3, 4, 5]
    conn.close()
    mem = lossless.open(path, embedder=None)
    try:
        assert migrations.applied(mem.store.connection) == [m[0] for m in migrations.MIGRATIONS]
        assert _count(mem, "SELECT value FROM files_generation") == 0
    finally:
        mem.close()
