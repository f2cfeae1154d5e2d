"""Workspace file memory: index files and code into chunks (keyword + vector), find the
chunks that answer a question, and the chunks of a file a message names.

Indexing only does what changed. A file whose size and mtime are as stored is not read;
a changed one is re-hashed, and if its bytes are the same only its mtime is updated;
otherwise its chunks (and only its chunks) are replaced. A file's rows are written in
one transaction (files read together share it), so a reader never sees a file half
indexed. Files gone from an indexed directory lose their chunks. Chunk texts are embedded through the store's embedding cache: the same text is
never embedded twice by one model.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from lossless.core.errors import NotFoundError, ValidationError
from lossless.files import walk as walker
from lossless.files.backend import ChunkVectorIndex, files_backend
from lossless.files.chunk import (
    CHUNK_TOKENS,
    FILE_KINDS,
    OVERLAP_TOKENS,
    Chunk,
    kind_of,
    split_text,
)
from lossless.files.lookup import FILE_COLS, display, lookup, one
from lossless.files.mentions import context_request, document_reference, path_candidates
from lossless.files.records import FileHit, FileStats, IndexedFile, IndexReport, Skip
from lossless.files.relevance import kind_prior, path_boost, query_terms, recency_factor
from lossless.files.vectors import text_sha256

if TYPE_CHECKING:
    from lossless.core.tokens import TokenCounter
    from lossless.embed.base import Embedder
    from lossless.recall.queries import QueryVectors
    from lossless.store.base import Store

__all__ = ["Files", "Progress"]

log = logging.getLogger("lossless")

Progress = Callable[[int, int, str], None]  # (files done, files in total, path)
_HIT_COLS = ("c.rowid, c.file_rowid, c.start_line, c.end_line, c.text, c.kind, f.path, f.root, f.abs_path, "
             "f.mtime_ns")
_BATCH_CHUNKS = 256  # chunks read ahead of writing, so the embedder gets full batches
_BATCH_FILES = 64
_BATCH_TOUCHES = 1000
_MAX_LIMIT = 1000


@dataclass(frozen=True, slots=True)
class _Stored:
    rowid: int
    root: str
    path: str
    size: int
    mtime_ns: int
    sha256: str


@dataclass(frozen=True, slots=True)
class _Prepared:
    found: walker.Found
    read: walker.Read
    chunks: list[Chunk]
    changed: bool


@dataclass(slots=True)
class _Batch:
    """Files read and chunked, and mtime/root updates, waiting to be written together."""

    files: list[_Prepared] = field(default_factory=list)
    touches: list[tuple[str, str, str, int, int, int]] = field(default_factory=list)  # root, path, name, …

    def full(self) -> bool:
        return (sum(len(p.chunks) for p in self.files) >= _BATCH_CHUNKS or len(self.files) >= _BATCH_FILES
                or len(self.touches) >= _BATCH_TOUCHES)


def _globs(value: str | Sequence[str] | None, name: str) -> tuple[str, ...]:
    if value is None:
        return ()
    items = [value] if isinstance(value, str) else list(value)
    if not all(isinstance(p, str) and p for p in items):
        raise ValidationError(f"{name} must be glob strings, got {value!r}")
    return tuple(p.replace("\\", "/") for p in items)


def _limit(limit: object) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= _MAX_LIMIT:
        raise ValidationError(f"limit must be an integer in 1..{_MAX_LIMIT}, got {limit!r}")
    return limit


def _threshold(value: object, name: str, top: float) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= top:
        raise ValidationError(f"{name} must be a number in 0..{top:g} or None, got {value!r}")


def _in_dir(column: str, directory: str) -> tuple[str, list[str]]:
    """SQL for "under this directory" as a range on an indexed column ('/' sorts just
    before '0', so every path starting with dir + '/' lies between them)."""
    base = directory.rstrip(os.sep)
    return f"({column} >= ? AND {column} < ?)", [base + os.sep, base + chr(ord(os.sep) + 1)]


class Files:
    """Indexed workspace files in one store (SQLite or PostgreSQL: :mod:`lossless.files.backend`).

    ``embedder`` (optional) adds vector search; ``counter`` sizes chunks. ``roots``
    limits what may be indexed: paths (after resolving symlinks) must lie inside one of
    these directories; without it each indexed path is its own limit, so a symlink found
    inside it may not lead out of it.
    """

    def __init__(self, store: Store, embedder: Embedder | None, counter: TokenCounter, *,
                 roots: Sequence[str | os.PathLike[str]] | None = None, chunk_tokens: int = CHUNK_TOKENS,
                 overlap_tokens: int = OVERLAP_TOKENS, vector_weight: float = 0.5,
                 min_similarity: float = 0.1, queries: QueryVectors | None = None) -> None:
        self.store = store
        self.db = files_backend(store)
        # question vectors, each computed once; Memory shares recall's, so an assembly embeds its question once
        self.queries = queries
        self.embedder = embedder
        self.counter = counter
        self.roots = walker.resolve_roots(roots)
        split_text("", "text", counter, chunk_tokens=chunk_tokens, overlap_tokens=overlap_tokens)  # validates
        self.chunk_tokens = chunk_tokens
        self.overlap_tokens = overlap_tokens
        for name, value in (("vector_weight", vector_weight), ("min_similarity", min_similarity)):
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
                raise ValidationError(f"{name} must be a number in 0..1, got {value!r}")
        self.vector_weight = float(vector_weight)
        # A vector search always has a nearest neighbour; one this far away is no match.
        self.min_similarity = float(min_similarity)
        self._vectors: ChunkVectorIndex | None = None

    @property
    def vectors(self) -> ChunkVectorIndex | None:
        """The vector side, for the current ``embedder`` (None: keyword search only)."""
        e = self.embedder
        if e is None:
            return None
        if self._vectors is None or self._vectors.embedder is not e:
            self._vectors = self.db.chunk_vectors(e)
            self._vectors.queries = self.queries
        return self._vectors

    # -- indexing -------------------------------------------------------------------------

    def index(self, paths: Sequence[str | os.PathLike[str]], *,
              roots: Sequence[str | os.PathLike[str]] | None = None, include: str | Sequence[str] | None = None,
              exclude: str | Sequence[str] | None = None, default_exclude: bool = True,
              max_file_bytes: int = walker.MAX_FILE_BYTES, force: bool = False,
              progress: Progress | None = None) -> IndexReport:
        """Index files and directories (walked recursively) and return what was done.

        Every path is checked first: one outside ``roots`` (default: the ones given to
        the constructor), missing, or not a file or directory raises ValidationError and
        nothing is indexed. ``include``/``exclude`` are globs on the path relative to the
        directory given (``*.py``, ``src/**``, ``docs``); ``exclude`` adds to
        :data:`~lossless.files.walk.DEFAULT_EXCLUDE` unless ``default_exclude=False``.
        Files over ``max_file_bytes``, binary files, and files that vanish or cannot be
        read are skipped with a reason in the report. ``force`` re-chunks files whose
        content did not change (after changing ``chunk_tokens``). ``progress(done,
        total, path)`` is called as files are handled.
        """
        started = time.perf_counter()
        if isinstance(max_file_bytes, bool) or not isinstance(max_file_bytes, int) or max_file_bytes < 1:
            raise ValidationError(f"max_file_bytes must be a positive integer, got {max_file_bytes!r}")
        includes = walker.GlobSet(_globs(include, "include"))
        excludes = walker.GlobSet((walker.DEFAULT_EXCLUDE if default_exclude else ()) + _globs(exclude, "exclude"))
        allowed = walker.resolve_roots(roots) if roots is not None else self.roots
        targets = self._keep_roots(walker.resolve_targets(paths, allowed))
        report = IndexReport()
        found: dict[str, walker.Found] = {}
        visited: set[str] = set()
        for target in targets:
            items = walker.walk(target, includes, excludes, visited) if target.is_dir else [walker.found_file(target)]
            for item in items:
                if isinstance(item, Skip):
                    report.skipped.append(item)
                else:
                    found.setdefault(item.abs_path, item)
        dirs = [t.real for t in targets if t.is_dir]
        stored = self._stored(dirs, list(found))
        todo = sorted(found.values(), key=lambda f: (f.root, f.path))
        report.files_seen = len(todo)
        batch = _Batch()
        for done, item in enumerate(todo, 1):
            self._prepare(item, stored.get(item.abs_path), max_file_bytes, force, report, batch)
            if batch.full():
                self._flush(batch, report)
                batch = _Batch()
            if progress is not None:
                progress(done, len(todo), item.path)
        self._flush(batch, report)
        self._drop_gone(dirs, found, stored, report)
        self._backfill([stored[a].rowid for a in found if a in stored], report)
        report.seconds = time.perf_counter() - started
        return report

    def _keep_roots(self, targets: Sequence[walker.Target]) -> list[walker.Target]:
        """Paths stay relative to the widest root they were indexed under: indexing
        ``proj/src`` after ``proj`` keeps ``src/app.py``, not ``app.py``."""
        known = [r[0] for r in self.db.query("SELECT DISTINCT root FROM files")]
        out: list[walker.Target] = []
        for t in targets:
            wider = [r for r in known if walker.within(t.real, [r]) is not None and len(r) < len(t.root)]
            out.append(replace(t, root=min(wider, key=len)) if wider else t)
        return out

    def _stored(self, dirs: Sequence[str], abs_paths: Sequence[str]) -> dict[str, _Stored]:
        """What the index holds for files under ``dirs`` and for ``abs_paths``."""
        cols = "abs_path, rowid, root, path, size, mtime_ns, sha256"
        out: dict[str, _Stored] = {}
        for d in dirs:
            where, args = _in_dir("abs_path", d)
            for row in self.db.query(f"SELECT {cols} FROM files WHERE {where}", args):
                out[row[0]] = _Stored(*row[1:])
        rest = [a for a in abs_paths if a not in out]
        for i in range(0, len(rest), 500):
            batch = rest[i : i + 500]
            for row in self.db.query(
                    f"SELECT {cols} FROM files WHERE abs_path IN ({','.join('?' * len(batch))})", batch):
                out[row[0]] = _Stored(*row[1:])
        return out

    def _prepare(self, item: walker.Found, row: _Stored | None, max_bytes: int, force: bool,
                 report: IndexReport, batch: _Batch) -> None:
        """Decide what one file needs; read and chunk it if its content may have changed."""
        too_large = item.size > max_bytes  # checked first: the limit holds for indexed files too
        if not too_large and row is not None and not force and (row.size, row.mtime_ns) == (item.size, item.mtime_ns):
            report.files_unchanged += 1
            if (row.root, row.path) != (item.root, item.path):  # now reached under a wider root
                batch.touches.append(_touch(row.rowid, item, item.size, item.mtime_ns))
            return
        read = "too large" if too_large else walker.read_file(item.abs_path, max_bytes)
        if isinstance(read, str):
            report.skipped.append(Skip(item.path, read))
            if row is not None:  # what the index holds for it is stale now
                self._remove_rows([row.rowid], report)
            return
        if row is not None and not force and row.sha256 == read.sha256:
            report.files_unchanged += 1
            report.files_touched += 1
            batch.touches.append(_touch(row.rowid, item, read.size, read.mtime_ns))
            return
        chunks = split_text(read.text, kind_of(item.path), self.counter, chunk_tokens=self.chunk_tokens,
                            overlap_tokens=self.overlap_tokens)
        batch.files.append(_Prepared(item, read, chunks, row is not None))

    def _flush(self, pending: _Batch, report: IndexReport) -> None:
        """Embed a batch's chunk texts (cache misses only), then write its files. Each
        file's rows go in with one transaction, never split across two; the files of one
        batch share it (a commit per file costs more than the writes: FTS5 flushes a
        segment per table per commit), so a batch is stored whole or not at all."""
        batch = pending.files
        if pending.touches:
            with self.db.transaction() as conn:
                for root, path, name, size, mtime_ns, rowid in pending.touches:
                    old = conn.execute("SELECT path FROM files WHERE rowid = ?", (rowid,)).fetchone()
                    conn.execute("UPDATE files SET root = ?, path = ?, name = ?, size = ?, mtime_ns = ? "
                                 "WHERE rowid = ?", (root, path, name, size, mtime_ns, rowid))
                    if old is not None and old[0] != path:  # the path words in the keyword index move too
                        self.db.move_path(conn, rowid, path)
        if not batch:
            return
        vectors = self.vectors
        embedded: dict[str, np.ndarray] | None = None
        if vectors is not None:
            try:
                embedded, n = vectors.vectors_for([c.text for p in batch for c in p.chunks])
                report.chunks_embedded += n
            except Exception as exc:  # the chunks are still worth keeping for keyword search
                message = f"embedding failed ({type(exc).__name__}: {exc}); indexed for keyword search only"
                log.warning("lossless: %s", message)
                if message not in report.warnings:
                    report.warnings.append(message)
        now = datetime.now(UTC).isoformat()
        removed = 0
        with self.db.transaction() as conn:
            for p in batch:
                removed += self._write(conn, p, now, embedded)
            self.db.bump_generation(conn)
        report.chunks_removed += removed
        report.files_indexed += len(batch)
        report.files_changed += sum(p.changed for p in batch)
        report.chunks_written += sum(len(p.chunks) for p in batch)

    def _write(self, conn: Any, p: _Prepared, now: str, embedded: dict[str, np.ndarray] | None) -> int:
        """Replace one file's rows (inside the caller's transaction); returns how many old
        chunks went."""
        f, kind = p.found, kind_of(p.found.path)
        removed = 0
        hit = conn.execute("SELECT rowid FROM files WHERE abs_path = ?", (f.abs_path,)).fetchone()
        values = (f.root, f.path, f.path.rsplit("/", 1)[-1], kind, p.read.size, p.read.mtime_ns, p.read.sha256, now,
                  len(p.chunks))
        if hit is not None:
            file_rowid = int(hit[0])
            removed = self.db.drop_chunks(conn, [file_rowid])
            conn.execute("UPDATE files SET root = ?, path = ?, name = ?, kind = ?, size = ?, mtime_ns = ?, "
                         "sha256 = ?, indexed_at = ?, chunk_count = ? WHERE rowid = ?", (*values, file_rowid))
        else:
            file_rowid = self.db.insert_file(conn, (*values, f.abs_path))
        rows: list[tuple[int, str, np.ndarray]] = []
        for chunk in p.chunks:
            sha = text_sha256(chunk.text)
            chunk_rowid = self.db.insert_chunk(conn, file_rowid, f.path, chunk, kind, sha)
            if embedded is not None and sha in embedded:  # (none for a chunk the model does not read)
                rows.append((chunk_rowid, sha, embedded[sha]))
        vectors = self.vectors
        if rows and vectors is not None:
            vectors.write(conn, rows)
        return removed

    def _remove_rows(self, file_rowids: Sequence[int], report: IndexReport) -> None:
        if not file_rowids:
            return
        with self.db.transaction() as conn:
            for i in range(0, len(file_rowids), 500):
                batch = list(file_rowids[i : i + 500])
                report.chunks_removed += self.db.drop_chunks(conn, batch)
                conn.execute(f"DELETE FROM files WHERE rowid IN ({','.join('?' * len(batch))})", batch)
            self.db.bump_generation(conn)
        report.files_removed += len(file_rowids)

    def _drop_gone(self, dirs: Sequence[str], found: dict[str, walker.Found], stored: dict[str, _Stored],
                   report: IndexReport) -> None:
        """Remove indexed files under the walked directories that are no longer regular
        files at that path (deleted, or replaced by a symlink). Files that still exist but
        were filtered out this time (include/exclude) are kept."""
        gone: list[int] = []
        for abs_path, row in stored.items():
            if abs_path in found or walker.within(abs_path, dirs) is None:
                continue
            if not os.path.isfile(abs_path) or os.path.realpath(abs_path) != abs_path:
                gone.append(row.rowid)
        # (a file skipped this time, binary now or too large, was dropped in _prepare)
        self._remove_rows(gone, report)

    def _backfill(self, file_rowids: Sequence[int], report: IndexReport) -> None:
        """Embed the chunks of unchanged files that have no vector from this embedder yet
        (indexed keyword-only before, or their embedding failed)."""
        vectors = self.vectors
        if vectors is None or not file_rowids:
            return
        todo = vectors.missing(file_rowids)
        for i in range(0, len(todo), _BATCH_CHUNKS):
            batch = todo[i : i + _BATCH_CHUNKS]
            try:
                embedded, n = vectors.vectors_for([text for _, text, _ in batch])
            except Exception as exc:
                report.warnings.append(f"embedding failed ({type(exc).__name__}: {exc}); some chunks have no vector")
                return
            report.chunks_embedded += n
            with self.db.transaction() as conn:
                live = {r[0] for r in conn.execute(
                    f"SELECT rowid FROM file_chunks WHERE rowid IN ({','.join('?' * len(batch))})",
                    [r for r, _, _ in batch])}
                vectors.write(conn, [(r, sha, embedded[sha]) for r, _, sha in batch if r in live and sha in embedded])
                self.db.bump_generation(conn)

    # -- finding files by name ------------------------------------------------------------

    def mentioned(self, text: str) -> list[str]:
        """Indexed files a message names (``src/app.py``, ``./docs/x.md``, an absolute
        path, or a file name like ``server.ts`` that matches exactly one indexed file),
        in order of mention; each as its relative path, or absolute when two roots share it."""
        if not isinstance(text, str):
            raise ValidationError(f"text must be a string, got {type(text).__name__}")
        out: dict[str, None] = {}
        for candidate in path_candidates(text):
            try:
                rows = lookup(self.db, candidate)
            except ValidationError:
                continue
            if len(rows) == 1:
                out.setdefault(display(self.db, rows[0]), None)
        return list(out)

    @staticmethod
    def context_request(text: str) -> str | None:
        """The argument of a ``/context <query or path>`` line in a message, or None."""
        return context_request(text)

    @staticmethod
    def document_reference(text: str) -> str | None:
        """What to search for when a message refers to earlier documents without a path
        ("the API doc I shared", "参考之前的 API 文档"), or None: see
        :func:`lossless.files.mentions.document_reference`."""
        return document_reference(text)

    def for_path(self, path_text: str, query: str | None = None, limit: int = 3) -> list[FileHit]:
        """The best chunks of one indexed file, named by an absolute or relative path or a
        unique file name: those matching ``query`` best, or (no query, or nothing in the
        file matches it) the file's first chunks. NotFoundError for a file not indexed,
        ValidationError for a name several indexed files share."""
        _limit(limit)
        row = one(self.db, path_text)
        if query is not None and query.strip():
            hits = self._search(query, limit, files={int(row[0])}, kinds=None)
            if hits:
                return hits
        rows = self.db.query(f"SELECT {_HIT_COLS} FROM file_chunks c JOIN files f ON f.rowid = c.file_rowid "
                                 "WHERE c.file_rowid = ? ORDER BY c.ordinal LIMIT ?", (row[0], limit))
        return [self._hit(r, 0.0) for r in rows]

    # -- searching ------------------------------------------------------------------------

    def search(self, query: str, *, limit: int = 10, paths: str | Sequence[str] | None = None,
               kinds: str | Sequence[str] | None = None, max_distance: float | None = None,
               min_relevance: float | None = None) -> list[FileHit]:
        """Chunks relevant to ``query``, best first: keyword (bm25 and term coverage) and
        vector similarity fused by weight, then re-ranked by kind (code, markdown, text,
        data), query words in the path, and (mildly) how recently the file changed.
        ``paths`` keeps files matching any of these globs; ``kinds`` those kinds.

        The thresholds (seed 004's ``WHERE cosine_distance < threshold``) keep only the
        chunks with enough evidence of their own: a cosine distance to the query of at
        most ``max_distance`` (when the index has vectors), or a keyword relevance
        (:attr:`FileHit.keyword`) of at least ``min_relevance``. A chunk passing either
        is kept; with neither given (or only ``max_distance`` and no embedder) all are.
        (Vector candidates end at a distance of ``1 - min_similarity``, 0.9 by default.)"""
        if not isinstance(query, str) or not query.strip():
            raise ValidationError("query must be a non-empty string")
        _limit(limit)
        _threshold(max_distance, "max_distance", 2.0)
        _threshold(min_relevance, "min_relevance", 1.0)
        kind_set: set[str] | None = None
        if kinds is not None:
            kind_set = {kinds} if isinstance(kinds, str) else set(kinds)
            bad = kind_set - set(FILE_KINDS)
            if bad:
                raise ValidationError(f"kinds must be among {', '.join(FILE_KINDS)}; got {sorted(bad)}")
        files: set[int] | None = None
        if paths is not None:
            globs = walker.GlobSet(_globs(paths, "paths"))
            files = {int(r[0]) for r in self.db.query("SELECT rowid, path, abs_path, name FROM files")
                     if globs.match(r[1], r[3]) or globs.match(r[2], r[3])}
            if not files:
                return []
        return self._search(query, limit, files=files, kinds=kind_set, max_distance=max_distance,
                            min_relevance=min_relevance)

    def _search(self, query: str, limit: int, *, files: set[int] | None, kinds: set[str] | None,
                max_distance: float | None = None, min_relevance: float | None = None) -> list[FileHit]:
        wide = max(limit * 3, 30)
        clauses, args = [], []
        if files is not None:
            clause, clause_args = self.db.in_ids("c.file_rowid", files)
            clauses.append(clause)
            args.extend(clause_args)
        if kinds is not None:
            clauses.append(f"c.kind IN ({','.join('?' * len(kinds))})")
            args.extend(sorted(kinds))
        keyword = self.db.keyword_candidates(query, " AND ".join(clauses) or self.db.true, args, wide)
        vectors = self.vectors
        similar: dict[int, float] = {}
        if vectors is not None:
            similar = vectors.nearest(query, wide, files=files, kinds=kinds, min_similarity=self.min_similarity)
        ids = list(dict.fromkeys([*keyword, *similar]))
        if not ids:
            return []
        rows = self.db.query(f"SELECT {_HIT_COLS} FROM file_chunks c JOIN files f ON f.rowid = c.file_rowid "
                                 f"WHERE c.rowid IN ({','.join('?' * len(ids))})", ids)
        stems, _ = query_terms(query)
        w = self.vector_weight if similar else 0.0
        lo, hi = (min(similar.values()), max(similar.values())) if similar else (0.0, 1.0)
        newest = max(r[9] for r in rows) / 1e9
        hits: list[FileHit] = []
        by_vector = max_distance is not None and vectors is not None
        for r in rows:
            rowid = int(r[0])
            kw = keyword.get(rowid, 0.0)
            distance = round(1.0 - similar[rowid], 6) if rowid in similar else None
            if (by_vector or min_relevance is not None) and not (
                    (by_vector and distance is not None and max_distance is not None and distance <= max_distance)
                    or (min_relevance is not None and kw >= min_relevance)):
                continue  # below both thresholds: seed 004's "no match" rather than a nearest neighbour
            score = (1 - w) * kw
            if rowid in similar:
                score += w * ((similar[rowid] - lo) / (hi - lo) if hi > lo else 1.0)
            score *= kind_prior(r[5], query) * path_boost(r[6], stems) * recency_factor(r[9] / 1e9, newest)
            hits.append(self._hit(r, round(score, 6), distance, round(kw, 6)))
        hits.sort(key=lambda h: (-h.score, h.path, h.start_line))
        return _distinct(hits)[:limit]

    @staticmethod
    def _hit(r: Sequence[Any], score: float, distance: float | None = None, keyword: float = 0.0) -> FileHit:
        return FileHit(path=r[6], start_line=r[2], end_line=r[3], text=r[4], score=score, chunk_id=int(r[0]),
                       root=r[7], abs_path=r[8], kind=r[5], mtime=r[9] / 1e9, distance=distance, keyword=keyword)

    # -- listing and removing -------------------------------------------------------------

    @staticmethod
    def _file(r: Sequence[Any]) -> IndexedFile:
        return IndexedFile(path=r[1], root=r[2], abs_path=r[3], kind=r[4], size=r[5], mtime=r[6] / 1e9,
                           sha256=r[7], chunk_count=r[8], indexed_at=r[9])

    def ls(self, paths: str | Sequence[str] | None = None) -> list[IndexedFile]:
        """Indexed files (those matching any of the ``paths`` globs), by root and path."""
        globs = walker.GlobSet(_globs(paths, "paths"))
        rows = self.db.query(f"SELECT {FILE_COLS} FROM files f ORDER BY f.root, f.path")
        files = [self._file(r) for r in rows]
        if globs:
            files = [f for f in files if globs.match(f.path) or globs.match(f.abs_path)]
        return files

    def remove(self, paths: Sequence[str | os.PathLike[str]]) -> IndexReport:
        """Take files out of the index: each path names an indexed file (as
        :meth:`for_path` reads it) or a directory (everything indexed under it). All in
        one transaction; NotFoundError if a path names nothing indexed."""
        started = time.perf_counter()
        if isinstance(paths, str | os.PathLike):
            paths = [paths]
        rowids: dict[int, None] = {}
        missing: list[str] = []
        for p in paths:
            rows = lookup(self.db, os.fspath(p))
            if len(rows) > 1:
                raise ValidationError(f"{os.fspath(p)!r} names {len(rows)} indexed files; give more of the path")
            if not rows:
                text = os.fspath(p).rstrip("/\\")
                real = os.path.realpath(os.path.expanduser(text))
                where, args = _in_dir("abs_path", real)
                rows = self.db.query(f"SELECT rowid FROM files WHERE {where}", args)
                if not rows and not os.path.isabs(text):
                    rows = self.db.query("SELECT rowid FROM files WHERE substr(path, 1, ?) = ?",
                                             (len(text) + 1, text + "/"))
            if not rows:
                missing.append(os.fspath(p))
            rowids.update((int(r[0]), None) for r in rows)
        if missing:
            raise NotFoundError(f"not indexed: {', '.join(missing)}")
        report = IndexReport()
        self._remove_rows(list(rowids), report)
        report.seconds = time.perf_counter() - started
        return report

    def stats(self) -> FileStats:
        """How many files, chunks, bytes, tokens and vectors the index holds."""
        q = self.db.query
        files, size = q("SELECT count(*), coalesce(sum(size), 0) FROM files")[0]
        chunks, tokens = q("SELECT count(*), coalesce(sum(token_count), 0) FROM file_chunks")[0]
        vectors = self.db.vector_count()
        roots = [r[0] for r in q("SELECT DISTINCT root FROM files ORDER BY root")]
        by_kind = {k: int(n) for k, n in q("SELECT kind, count(*) FROM files GROUP BY kind ORDER BY kind")}
        last = q("SELECT max(indexed_at) FROM files")[0][0]
        # int(): PostgreSQL's sum of integers is a numeric (a Decimal)
        return FileStats(files=int(files), chunks=int(chunks), bytes=int(size), tokens=int(tokens), vectors=vectors,
                         roots=roots, by_kind=by_kind, last_indexed_at=last)


def _touch(rowid: int, item: walker.Found, size: int, mtime_ns: int) -> tuple[str, str, str, int, int, int]:
    """An UPDATE's arguments: new mtime/size (same bytes), or the root it is now under."""
    return (item.root, item.path, item.path.rsplit("/", 1)[-1], size, mtime_ns, rowid)


def _distinct(hits: Sequence[FileHit]) -> list[FileHit]:
    """Best first, leaving out a hit that mostly repeats a better one of the same file
    (more than half its lines inside it; neighbouring chunks only share their overlap)."""
    kept: list[FileHit] = []
    for h in hits:
        lines = h.end_line - h.start_line + 1
        if any(k.abs_path == h.abs_path and
               min(k.end_line, h.end_line) - max(k.start_line, h.start_line) + 1 > lines / 2 for k in kept):
            continue
        kept.append(h)
    return kept
