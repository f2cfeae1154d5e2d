"""What each extra adds to an install, on disk: the dependency closure of the core and of
each extra (as pyproject.toml declares them, markers evaluated here), summed from the
installed files of each distribution (``importlib.metadata``: the RECORD of every wheel).
It reads the current environment, so run it where ``.[test,torch]`` is installed; a
package not installed here is listed as missing rather than guessed.

    python bench/install_sizes.py [--json OUT]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _size(dist: metadata.Distribution) -> int:
    total = 0
    for f in dist.files or ():
        try:
            total += Path(str(dist.locate_file(f))).stat().st_size
        except OSError:
            continue
    return total


def closure(reqs: list[str], extras_of_self: dict[str, list[str]], missing: set[str]) -> set[str]:
    """The distributions ``reqs`` pull in (normalised names), following each one's own
    requirements with the extras asked for."""
    seen: set[str] = set()
    todo: list[str] = []
    for text in reqs:
        r = Requirement(text)
        if _norm(r.name) == "lossless":
            for extra in r.extras:
                todo.extend(extras_of_self.get(extra, []))
            continue
        todo.append(text)
    while todo:
        text = todo.pop()
        r = Requirement(text)
        if r.marker is not None and not r.marker.evaluate({"extra": ""}):
            continue
        name = _norm(r.name)
        key = name + "[" + ",".join(sorted(r.extras)) + "]"
        if key in seen:
            continue
        seen.add(key)
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            missing.add(name)
            continue
        for sub in dist.requires or ():
            sr = Requirement(sub)
            if sr.marker is None or sr.marker.evaluate({"extra": ""}) or any(
                    sr.marker.evaluate({"extra": e}) for e in r.extras):
                todo.append(str(sr).split(";")[0].strip())
    return {k.split("[")[0] for k in seen}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", metavar="OUT")
    a = p.parse_args()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras: dict[str, list[str]] = project["optional-dependencies"]
    core_missing: set[str] = set()
    core = closure(project["dependencies"], extras, core_missing)
    sizes = {}
    for name in core:
        with contextlib.suppress(metadata.PackageNotFoundError):
            sizes[name] = _size(metadata.distribution(name))
    core_mb = sum(sizes.get(n, 0) for n in core) / 1e6
    rows = [{"extra": "(core)", "adds_mb": round(core_mb, 1), "total_mb": round(core_mb, 1),
             "packages": len(core), "missing": sorted(core_missing)}]
    for extra, reqs in extras.items():
        missing: set[str] = set()
        names = closure(reqs, extras, missing) | core
        for n in names - sizes.keys():
            with contextlib.suppress(metadata.PackageNotFoundError):
                sizes[n] = _size(metadata.distribution(n))
        total = sum(sizes.get(n, 0) for n in names) / 1e6
        rows.append({"extra": extra, "adds_mb": round(total - core_mb, 1), "total_mb": round(total, 1),
                     "packages": len(names), "missing": sorted(missing)})
    print(f"{'extra':12s} {'adds MB':>9s} {'total MB':>9s} {'packages':>8s}  missing here")
    for r in rows:
        print(f"{r['extra']:12s} {r['adds_mb']:9.1f} {r['total_mb']:9.1f} {r['packages']:8d}  {' '.join(r['missing'])}")
    if a.json:
        Path(a.json).write_text(json.dumps({"rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
