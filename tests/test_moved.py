"""Old import paths keep working after a module moved (``lossless._moved``)."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from lossless import _moved


@pytest.mark.parametrize("old", sorted(_moved.MOVED))
def test_an_old_path_is_the_module_at_its_new_home(old: str) -> None:
    assert importlib.import_module(old) is importlib.import_module(_moved.MOVED[old])


def test_a_submodule_of_a_moved_package_follows_it() -> None:
    packages = {old: new for old, new in _moved.MOVED.items() if "." not in old[len("lossless."):]}
    for old, new in packages.items():
        assert _moved.new_name(f"{old}.anything") == f"{new}.anything"
    assert _moved.new_name("lossless.store.sqlite.store") is None or "lossless.store.sqlite.store" in _moved.MOVED


def test_names_that_never_moved_import_as_usual() -> None:
    assert _moved.new_name("lossless.engine") is None
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("lossless.no_such_module")


def test_old_paths_work_in_a_fresh_interpreter_without_importing_lossless_first() -> None:
    """`from lossless.<old> import x` as the first line of a script (the finder is installed by
    importing the package, which Python does before the submodule)."""
    old = sorted(_moved.MOVED)[0]
    code = f"import {old} as m, {_moved.MOVED[old]} as n; assert m is n; print('ok')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
