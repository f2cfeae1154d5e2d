"""Workspace file memory: files and code indexed into chunks for keyword and vector
retrieval (seed 004's "Layer 2: Vector Memory")."""

from lossless.files import schema as _schema  # noqa: F401  (registers its migration with the store)
from lossless.files.chunk import FILE_KINDS, Chunk, FileKind, kind_of, split_text
from lossless.files.index import Files, Progress
from lossless.files.mentions import (
    DOCUMENT_PATTERNS,
    context_request,
    document_reference,
    path_candidates,
)
from lossless.files.records import FileHit, FileStats, IndexedFile, IndexReport, Skip
from lossless.files.walk import DEFAULT_EXCLUDE, MAX_FILE_BYTES

__all__ = [
    "DEFAULT_EXCLUDE",
    "DOCUMENT_PATTERNS",
    "FILE_KINDS",
    "MAX_FILE_BYTES",
    "Chunk",
    "FileHit",
    "FileKind",
    "FileStats",
    "Files",
    "IndexReport",
    "IndexedFile",
    "Progress",
    "Skip",
    "context_request",
    "document_reference",
    "kind_of",
    "path_candidates",
    "split_text",
]
