"""Old import paths of modules that moved, kept working without a file at the old place.

The package was reorganised (issue 18: ``core/``, ``context/``, ``agent/`` …). Code written
against the flat layout — ``import lossless.agent.tools``, ``from lossless.core.models import window_for``
— still works: a finder on :data:`sys.meta_path` answers an old name with the module at its
new home (the same module object, so ``isinstance`` checks and monkeypatching agree). An old
*package* name covers its submodules too: ``lossless.longterm.records`` is
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
    "lossless.assemble": "lossless.context",
    "lossless.demo_data": "lossless.demo.conversation",
    "lossless.demo_text": "lossless.demo.text",
    "lossless.server.anthropic_wire": "lossless.server.proxy.anthropic_wire",
    "lossless.types": "lossless.core.types",
    "lossless.errors": "lossless.core.errors",
    "lossless.config": "lossless.core.config",
    "lossless.tokens": "lossless.core.tokens",
    "lossless.models": "lossless.core.models",
    "lossless.validate": "lossless.core.validate",
    "lossless.render": "lossless.core.render",
    "lossless.owners": "lossless.core.owners",
    "lossless.importance": "lossless.core.importance",
    "lossless.worker": "lossless.compaction.worker",
    "lossless.tools": "lossless.agent.tools",
    "lossless.emergency": "lossless.agent.emergency",
    "lossless.anthropic_format": "lossless.providers.anthropic_format",
    "lossless.paging": "lossless.context.paging",
    "lossless.explore": "lossless.context.explore",
    "lossless.explore.base": "lossless.context.explore.base",
    "lossless.explore.core": "lossless.context.explore.core",
    "lossless.explore.json_shape": "lossless.context.explore.json_shape",
    "lossless.explore.logs": "lossless.context.explore.logs",
    "lossless.explore.markup": "lossless.context.explore.markup",
    "lossless.explore.prose": "lossless.context.explore.prose",
    "lossless.explore.source": "lossless.context.explore.source",
    "lossless.explore.tabular": "lossless.context.explore.tabular",
    "lossless.memory": "lossless.longterm",
    "lossless.memory.backend": "lossless.longterm.backend",
    "lossless.memory.extract": "lossless.longterm.extract",
    "lossless.memory.pg_backend": "lossless.longterm.postgres",
    "lossless.memory.records": "lossless.longterm.records",
    "lossless.memory.search": "lossless.longterm.relevance",
    "lossless.memory.store": "lossless.longterm.memories",
    "lossless.memory.validate": "lossless.longterm.validate",
    "lossless.memory.vectors": "lossless.longterm.vectors",
    "lossless.files.pg_backend": "lossless.files.postgres",
    "lossless.files.pg_vectors": "lossless.files.postgres_vectors",
    "lossless.files.search": "lossless.files.relevance",
    "lossless.recall.search": "lossless.recall.dispatch",
    "lossless.store.sqlite_recall": "lossless.store.sqlite.recall",
    "lossless.store.sqlite_search": "lossless.store.sqlite.grep",
    "lossless.store.migrations": "lossless.store.sqlite.migrations",
    "lossless.store.postgres_recall": "lossless.store.postgres.recall",
    "lossless.store.postgres_search": "lossless.store.postgres.grep",
    "lossless.store.pg_migrations": "lossless.store.postgres.migrations",
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
