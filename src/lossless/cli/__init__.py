"""The ``lossless`` command line (``lossless --help``)."""

from lossless.cli.main import main

__all__ = ["main"]
