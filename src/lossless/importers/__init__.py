"""Importers: other tools' chat logs into lossless.

One module per format, each a streaming ``read(stream, source)`` that yields
:class:`Record` ``(conversation, message, line)`` items plus :class:`Problem`,
:class:`Ignored` and :class:`Meta`; :func:`detect` picks the format and
:func:`import_file` stores what a reader yields.
"""

from lossless.importers.base import ByteStream, Ignored, Item, Meta, Problem, Reader, Record, Source
from lossless.importers.detect import FORMATS, detect, reader_for
from lossless.importers.load import (
    BATCH_SIZE,
    ImportInterrupted,
    ImportReport,
    check_source,
    file_size,
    import_file,
    import_stream,
)

__all__ = [
    "BATCH_SIZE",
    "FORMATS",
    "ByteStream",
    "Ignored",
    "ImportInterrupted",
    "ImportReport",
    "Item",
    "Meta",
    "Problem",
    "Reader",
    "Record",
    "Source",
    "check_source",
    "detect",
    "file_size",
    "import_file",
    "import_stream",
    "reader_for",
]
