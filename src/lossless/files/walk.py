"""Finding and reading the files to index, safely.

* Every path is resolved (symlinks followed) before it is checked against the allowed
  roots, so a symlink leading out of them is refused, not followed.
* Directories are walked with ``os.scandir`` without following symlinks; a symlink to a
  directory inside the roots is entered once (by its real path), a second link to the
  same directory and a link to an ancestor (a loop) are not.
* A file over the size limit is skipped from its ``stat`` and never opened; reading stops
  after the limit in any case (a file may grow between the stat and the read).
* A file is binary if it has a NUL byte in its first 8 KiB (UTF-16 with a BOM aside) or
  does not decode as mostly text; text a CJK Windows saved in its code page (GBK, Big5,
  Shift_JIS, EUC-KR: its characters mostly the usual ones of that encoding) is decoded from
  it; other non-UTF-8 text is decoded with replacement characters when under 30% of it is
  undecodable and under 5% control characters.
"""

from __future__ import annotations

import codecs
import hashlib
import os
import re
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from fnmatch import translate

from lossless.core.errors import ValidationError
from lossless.core.legacy_text import legacy_cjk
from lossless.files.records import Skip

__all__ = [
    "DEFAULT_EXCLUDE",
    "MAX_FILE_BYTES",
    "Found",
    "GlobSet",
    "Target",
    "decode",
    "glob_match",
    "read_file",
    "resolve_roots",
    "resolve_targets",
    "walk",
    "within",
]

MAX_FILE_BYTES = 5 * 1024 * 1024
_HEAD = 8192
_SAMPLE = 65536
# Above these shares of the text a file is binary: undecodable bytes (Latin-1 prose has
# a few percent, random bytes most), and control characters other than tab, newlines,
# form feed and escape (text has next to none).
_MAX_REPLACED = 0.3
_MAX_CONTROL = 0.05
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1a\x1c-\x1f\x7f]")

# Skipped unless asked for: version control, dependencies, caches, build output, and
# files that commonly hold secrets (their text would end up in prompts).
DEFAULT_EXCLUDE: tuple[str, ...] = (
    ".git", ".hg", ".svn", ".jj", "node_modules", "bower_components", "__pycache__", ".venv", "venv",
    ".tox", ".nox", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".hypothesis", ".cache", ".idea",
    ".vscode", "build", "dist", "target", "out", ".next", ".nuxt", ".gradle", "*.egg-info",
    ".eggs", "coverage", "htmlcov", ".coverage", "*.pyc", "*.pyo", "*.o", "*.obj", "*.so", "*.dylib",
    "*.dll", "*.a", "*.lib", "*.class", "*.jar", "*.whl", "*.min.js", "*.min.css", "*.map",
    "*.db", "*.db-wal", "*.db-shm", "*.sqlite", "*.sqlite3", ".DS_Store",
    ".env", ".env.*", "*.pem", "*.key", "*.p12", "*.pfx", "id_rsa*", "id_ecdsa*", "id_ed25519*",
    ".netrc", ".npmrc", ".pypirc",
)


@dataclass(frozen=True, slots=True)
class Target:
    """A path given to ``index``, resolved: a directory to walk or one file."""

    given: str
    real: str
    is_dir: bool
    root: str  # what files found here are relative to
    allowed: tuple[str, ...]  # the roots files found here must resolve into


@dataclass(frozen=True, slots=True)
class Found:
    """A file found by a walk, before it is read."""

    root: str
    path: str  # relative to root, '/'-separated
    abs_path: str  # resolved
    size: int
    mtime_ns: int


class GlobSet:
    """Globs compiled once, matched against '/'-separated relative paths: a glob matches
    the whole path (``src/*.py``; ``*`` also crosses ``/``), any trailing part after a
    leading ``**/``, everything under ``dir/**``, or — a glob without ``/`` — the file or
    directory name (``*.md``, ``node_modules``)."""

    def __init__(self, patterns: Sequence[str]) -> None:
        on_path: list[str] = []
        on_name: list[str] = []

        def add(p: str) -> None:
            on_path.append(translate(p))
            if p.startswith("**/"):
                add(p[3:])
            if p.endswith("/**"):
                on_path.extend([translate(p[:-3]), translate(p[:-3] + "/*")])
            if "/" not in p:
                on_name.append(translate(p))

        for pattern in patterns:
            add(pattern)
        self.patterns = tuple(patterns)
        self._path = re.compile("|".join(on_path)) if on_path else None
        self._name = re.compile("|".join(on_name)) if on_name else None

    def __bool__(self) -> bool:
        return bool(self.patterns)

    def match(self, path: str, name: str | None = None) -> bool:
        if self._path is not None and self._path.match(path):
            return True
        if self._name is not None:
            return self._name.match(name if name is not None else path.rsplit("/", 1)[-1]) is not None
        return False


def glob_match(pattern: str, path: str, name: str | None = None) -> bool:
    """Whether one glob matches a relative path (see :class:`GlobSet`)."""
    return GlobSet([pattern]).match(path, name)


def within(path: str, roots: Sequence[str]) -> str | None:
    """The deepest of ``roots`` (resolved directories) that contains ``path``, or None."""
    best: str | None = None
    for root in roots:
        prefix = root if root.endswith(os.sep) else root + os.sep
        if (path == root or path.startswith(prefix)) and (best is None or len(root) > len(best)):
            best = root
    return best


def resolve_roots(roots: Sequence[str | os.PathLike[str]] | None) -> tuple[str, ...] | None:
    """Allowed roots as resolved directories (ValidationError for one that is not)."""
    if roots is None:
        return None
    if isinstance(roots, str | os.PathLike):
        roots = [roots]
    out: list[str] = []
    for root in roots:
        real = os.path.realpath(os.path.expanduser(os.fspath(root)))
        if not os.path.isdir(real):
            raise ValidationError(f"root {os.fspath(root)!r} is not a directory")
        out.append(real)
    if not out:
        raise ValidationError("roots is empty: give at least one directory, or None for no limit")
    return tuple(dict.fromkeys(out))


def resolve_targets(paths: Sequence[str | os.PathLike[str]],
                    roots: tuple[str, ...] | None) -> list[Target]:
    """Check every given path before anything is indexed; one ValidationError names all
    that are refused (missing, a dangling symlink, outside the roots, not a file or
    directory). Without ``roots`` each path is its own root: symlinks found inside it
    may not lead out of it."""
    if isinstance(paths, str | os.PathLike):
        raise ValidationError("paths must be a list of paths, not one string")
    problems: list[str] = []
    out: list[Target] = []
    for given in paths:
        text = os.fspath(given)
        if not isinstance(text, str) or not text.strip() or "\x00" in text:
            problems.append(f"{text!r} is not a usable path")
            continue
        raw = os.path.abspath(os.path.expanduser(text))
        if not os.path.lexists(raw):
            problems.append(f"{text}: no such file or directory")
            continue
        real = os.path.realpath(raw)
        if not os.path.exists(real):
            problems.append(f"{text}: a symlink to {real}, which does not exist")
            continue
        if roots is not None and within(real, roots) is None:
            via = f" (a symlink to {real})" if real != raw else ""
            problems.append(f"{text}{via} is outside the allowed roots ({', '.join(roots)})")
            continue
        mode = os.stat(real).st_mode
        if stat.S_ISDIR(mode):
            out.append(Target(text, real, True, real, roots or (real,)))
        elif stat.S_ISREG(mode):
            root = within(real, roots) if roots is not None else os.path.dirname(real)
            assert root is not None
            out.append(Target(text, real, False, root, roots or (real,)))
        else:
            problems.append(f"{text}: not a regular file or directory")
    if problems:
        raise ValidationError("refused: " + "; ".join(problems))
    return out


def _relative(path: str, root: str) -> str:
    return os.path.relpath(path, root).replace(os.sep, "/")


def walk(target: Target, include: GlobSet, exclude: GlobSet, visited: set[str]) -> Iterator[Found | Skip]:
    """Files under a directory target, in a stable order, filtered by the globs (matched
    against the path relative to the target, through symlinks as the user sees it).
    ``visited`` holds real directory paths already walked (shared across targets)."""
    stack: list[tuple[str, str]] = [(target.real, "")]  # (real directory, logical relative path)
    visited.add(target.real)
    while stack:
        real_dir, logical = stack.pop()
        try:
            with os.scandir(real_dir) as it:
                entries = sorted(it, key=lambda e: e.name)
        except FileNotFoundError:
            continue  # removed while we walked
        except OSError:
            yield Skip(_relative(real_dir, target.root) or ".", "unreadable")
            continue
        subdirs: list[tuple[str, str]] = []
        for entry in entries:
            rel = f"{logical}/{entry.name}" if logical else entry.name
            if exclude.match(rel, entry.name):
                continue
            try:
                if entry.is_symlink():
                    real = os.path.realpath(entry.path)
                    if within(real, target.allowed) is None:
                        yield Skip(rel, "outside roots")
                        continue
                    if os.path.isdir(real):
                        if real == real_dir or target.real.startswith(real + os.sep) or real_dir.startswith(real + os.sep):
                            yield Skip(rel, "symlink loop")
                        elif real not in visited:
                            visited.add(real)
                            subdirs.append((real, rel))
                        continue
                    st = os.stat(real)
                elif entry.is_dir(follow_symlinks=False):
                    if entry.path not in visited:
                        visited.add(entry.path)
                        subdirs.append((entry.path, rel))
                    continue
                else:
                    real = entry.path
                    st = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                yield Skip(rel, "vanished")
                continue
            except OSError:
                yield Skip(rel, "unreadable")
                continue
            if not stat.S_ISREG(st.st_mode):
                yield Skip(rel, "not a regular file")
                continue
            if include and not include.match(rel, entry.name):
                continue
            root = target.root if within(real, (target.root,)) else within(real, target.allowed)
            assert root is not None  # a link leading out of the allowed roots was refused above
            yield Found(root, _relative(real, root), real, st.st_size, st.st_mtime_ns)
        stack.extend(reversed(subdirs))


def found_file(target: Target) -> Found | Skip:
    """The one file a file target names."""
    try:
        st = os.stat(target.real)
    except FileNotFoundError:
        return Skip(target.given, "vanished")
    return Found(target.root, _relative(target.real, target.root), target.real, st.st_size, st.st_mtime_ns)


@dataclass(frozen=True, slots=True)
class Read:
    """A file's bytes as read: its hash, text, and the stat of the open file."""

    sha256: str
    text: str
    size: int
    mtime_ns: int


def read_file(path: str, max_bytes: int) -> Read | str:
    """Read a text file; a skip reason (``binary``, ``too large``, ``vanished``,
    ``unreadable``, ``not a regular file``) instead when it cannot or should not be."""
    try:
        f = open(path, "rb")  # noqa: SIM115 - closed below; the fstat needs the open file
    except FileNotFoundError:
        return "vanished"
    except OSError:
        return "unreadable"
    with f:
        try:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):
                return "not a regular file"
            if st.st_size > max_bytes:
                return "too large"
            head = f.read(_HEAD)
            if b"\x00" in head and not head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
                return "binary"
            data = head + f.read(max_bytes + 1 - len(head))
        except OSError:
            return "unreadable"
    if len(data) > max_bytes:
        return "too large"
    text = decode(data)
    if text is None:
        return "binary"
    return Read(hashlib.sha256(data).hexdigest(), text, len(data), st.st_mtime_ns)


def _legacy_text(data: bytes) -> str | None:
    """The text of a file a CJK Windows saved in its "ANSI" code page (GBK, Big5, Shift_JIS,
    EUC-KR), when its first bytes read as mostly the usual characters of one of them and the
    whole file decodes from it; else None. Read as UTF-8 with replacement, a GBK source file
    had its Chinese comments stored as U+FFFD, and a GBK Markdown file was "binary"."""
    best = legacy_cjk(data[:_SAMPLE])
    if best is None or best[0] < 0.5:
        return None
    try:
        return data.decode(best[1])
    except UnicodeDecodeError:
        return None


def decode(data: bytes) -> str | None:
    """Text of a file's bytes, or None when it is not mostly text."""
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8):]
    elif data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError:
            return None
    try:
        text = data.decode("utf-8")
        replaced = 0
    except UnicodeDecodeError:
        legacy = _legacy_text(data)
        if legacy is not None:
            text, replaced = legacy, 0
        else:
            text = data.decode("utf-8", errors="replace")
            replaced = text.count("\ufffd", 0, _SAMPLE)
    sample = text[:_SAMPLE]
    if not sample:
        return text
    if replaced > _MAX_REPLACED * len(sample) or len(_CONTROL.findall(sample)) > _MAX_CONTROL * len(sample):
        return None
    return text
