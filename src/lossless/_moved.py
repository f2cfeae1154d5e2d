"""Old import paths of modules that moved, kept working without a file at the old place.

The package was reorganised (issue 18: ``core/``, ``context/``, ``agent/`` …). Code written
against the flat layout — ``import lossless.tools``, ``from lossless.models import window_for``
— still works: a finder on :data:`sys.meta_path` answers an old name with the module at its
new home (the same module object, so ``isinstance`` checks and monkeypatching agree). An old
*package* name covers its submodules too: ``lossless.memory.records`` is
``lossless.longterm.records``.

Only names listed in :data:`MOVED` are redirected; everything else imports as usual.
Importing this module installs the finder (``lossless/__init__`` does so first).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from collections.abc import Sequence
from types import ModuleType

__all__ = ["MOVED", "install", "new_name"]

#: old dotted name -> new dotted name (a package entry also maps everything under it)
MOVED: dict[str, str] = {
    "lossless.demo_data": "lossless.demo.conversation",
    "lossless.demo_text": "lossless.demo.text",
}


def new_name(old: str) -> str | None:
    """Where the module once importable as ``old`` lives now, or None if it never moved."""
    if old in MOVED:
        return MOVED[old]
    head, _, tail = old.rpartition(".")
    while head:
        if head in MOVED:
            return f"{MOVED[head]}.{old[len(head) + 1:]}"
        head, _, _ = head.rpartition(".")
    del tail
    return None


class _Alias(importlib.abc.Loader):
    """Loads an old name by importing the new one and handing back that very module."""

    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return importlib.import_module(self.target)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module was executed under its new name."""


class _MovedFinder(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith("lossless."):
            return None
        new = new_name(fullname)
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _Alias(new))


def install() -> None:
    """Put the finder on :data:`sys.meta_path` once (idempotent)."""
    if not any(isinstance(finder, _MovedFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _MovedFinder())


install()
