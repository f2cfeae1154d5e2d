"""What the file index hands back: search hits, indexed files, index reports, totals."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from lossless.files.chunk import FileKind

__all__ = ["REFUSALS", "SKIP_REASONS", "FileHit", "FileStats", "IndexReport", "IndexedFile", "Skip"]

# Why a file found by a walk was not indexed. "outside roots" is a refusal (a symlink
# leading out of the allowed roots): the CLI exits 1 when there is one.
SKIP_REASONS = ("binary", "too large", "vanished", "unreadable", "outside roots", "symlink loop",
                "not a regular file")
REFUSALS = frozenset({"outside roots"})


@dataclass(frozen=True, slots=True)
class FileHit:
    """One chunk of an indexed file: lines ``start_line``..``end_line`` of ``path``
    (relative to ``root``; ``abs_path`` is the resolved real path). ``score`` ranks the
    hits of one search; ``distance`` (the cosine distance of the chunk to the query, None
    without a vector) and ``keyword`` (its keyword relevance in [0, 1]) are the absolute
    evidence a threshold is held against (seed 004's ``cosine_distance < threshold``)."""

    path: str
    start_line: int
    end_line: int
    text: str
    score: float
    chunk_id: int
    root: str
    abs_path: str
    kind: FileKind
    mtime: float  # Unix seconds
    distance: float | None = None
    keyword: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class IndexedFile:
    """A file as the index knows it."""

    path: str
    root: str
    abs_path: str
    kind: FileKind
    size: int
    mtime: float
    sha256: str
    chunk_count: int
    indexed_at: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class Skip:
    """A file that was not indexed, and why (one of :data:`SKIP_REASONS`)."""

    path: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True)
class IndexReport:
    """What one :meth:`Files.index` (or :meth:`Files.remove`) call did.

    ``files_indexed`` counts files whose chunks were (re)written: new ones plus
    ``files_changed`` (content changed). ``files_unchanged`` were left alone, including
    ``files_touched`` (mtime changed, same bytes: only the mtime was updated).
    ``chunks_embedded`` is how many chunk texts went to the embedder (cache misses)."""

    files_seen: int = 0
    files_indexed: int = 0
    files_changed: int = 0
    files_unchanged: int = 0
    files_touched: int = 0
    files_removed: int = 0
    chunks_written: int = 0
    chunks_removed: int = 0
    chunks_embedded: int = 0
    skipped: list[Skip] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def files_skipped(self) -> int:
        return len(self.skipped)

    @property
    def refused(self) -> list[Skip]:
        """Skips that were refusals (a symlink leading outside the allowed roots)."""
        return [s for s in self.skipped if s.reason in REFUSALS]

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["files_skipped"] = self.files_skipped
        out["seconds"] = round(self.seconds, 3)
        return out


@dataclass(frozen=True, slots=True)
class FileStats:
    """Totals of the file index."""

    files: int
    chunks: int
    bytes: int
    tokens: int
    vectors: int
    roots: list[str]
    by_kind: dict[str, int]  # files per kind
    last_indexed_at: str | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
