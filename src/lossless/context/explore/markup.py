"""YAML, HTML and XML, read with tolerant line and tag scans (no parser dependency).

YAML: a top-level key scan gives every key with its line number and what it holds (a
scalar, a list of N items, a mapping of N keys). When PyYAML happens to be importable
and the text is small it also confirms the document parses; it is never required.
"""

from __future__ import annotations

import html
import importlib
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from lossless.context.explore.base import (
    DETAIL,
    KEY,
    MAIN,
    SAMPLE,
    TITLE,
    Outline,
    clip,
    human_bytes,
)

__all__ = ["explore_html", "explore_xml", "explore_yaml", "looks_like_yaml", "markup_kind"]

_YAML_LINE = re.compile(r"\s*(?:-\s+)?(?:[^\s:#\-\[\]{},][^:#]*|\"[^\"]*\"|'[^']*'):(?:\s|$)|\s*-(?:\s|$)|---|\.\.\.")
_TOP_KEY = re.compile(r"(?P<key>[^\s:#\-\[\]{},][^:#]*?|\"[^\"]*\"|'[^']*'):(?:[ \t]+(?P<value>.*))?$")
_TIMESTAMP_START = re.compile(r"\s*\[?\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}")
_YAML_PARSE_CHARS = 256_000
_SCAN_CHARS = 1_000_000
_YAML_SCAN_CHARS = 1_000_000
_HEADINGS_CHARS = 100_000


def looks_like_yaml(sample: str) -> bool:
    """Mostly ``key: value`` / ``- item`` lines, with at least two top-level keys."""
    lines = [ln for ln in sample.split("\n")[:400] if ln.strip() and not ln.lstrip().startswith("#")]
    if len(lines) < 2:
        return False
    if sum(bool(_TIMESTAMP_START.match(ln)) for ln in lines) > 0.2 * len(lines):
        return False
    matching = sum(bool(_YAML_LINE.match(ln)) for ln in lines)
    top = sum(bool(ln[:1] not in " \t-" and _TOP_KEY.match(ln)) for ln in lines)
    return matching >= 0.8 * len(lines) and (top >= 2 or lines[0].strip() == "---")


def _yaml_parses(text: str) -> bool | None:
    """True/False when PyYAML is importable and the text small enough; else None."""
    if len(text) > _YAML_PARSE_CHARS:
        return None
    try:
        yaml: Any = importlib.import_module("yaml")
    except ImportError:
        return None
    loader = getattr(yaml, "CSafeLoader", None) or yaml.SafeLoader
    try:
        for _ in yaml.load_all(text, Loader=loader):
            pass
    except Exception:  # any YAMLError or odd input: it does not parse
        return False
    return True


@dataclass
class _TopKey:
    line: int
    key: str
    value: str
    items: int = 0  # "- " children
    child_keys: list[str] = field(default_factory=list)
    child_indent: int | None = None

    def what(self) -> str:
        if self.value:
            return clip(self.value, 80)
        if self.items:
            return f"list of {self.items:,} item{'s' if self.items != 1 else ''}"
        if self.child_keys:
            more = ", …" if len(self.child_keys) > 6 else ""
            return f"mapping of {len(self.child_keys):,} keys: " + ", ".join(self.child_keys[:6]) + more
        return "(empty)"


def explore_yaml(text: str, out: Outline, stats: dict[str, Any]) -> bool:
    scan = text[:_YAML_SCAN_CHARS]
    keys: list[_TopKey] = []
    documents = 1
    for lineno, raw in enumerate(scan.split("\n"), 1):
        line = raw.rstrip()
        if not line or line.lstrip().startswith("#"):
            continue
        if line in ("---", "..."):
            if line == "---" and lineno > 1:
                documents += 1
            continue
        indent = len(line) - len(line.lstrip())
        if indent == 0 and not line.startswith("-"):
            m = _TOP_KEY.match(line)
            if m:
                keys.append(_TopKey(lineno, m.group("key").strip("'\""), (m.group("value") or "").strip()))
                continue
        if not keys or (indent == 0 and not line.startswith("-")):
            continue
        top = keys[-1]
        if top.child_indent is None:
            top.child_indent = indent
        if indent == top.child_indent:
            stripped = line.strip()
            if stripped.startswith("-"):
                top.items += 1
            elif (m := _TOP_KEY.match(stripped)) is not None:
                top.child_keys.append(m.group("key").strip("'\"")[:30])
    if not keys:
        return False
    parses = _yaml_parses(text)
    stats["top_level_keys"] = len(keys)
    if len(text) > _YAML_SCAN_CHARS:
        stats["sampled"] = True
    out.add(f"YAML · {len(keys):,} top-level keys · {documents} document{'s' if documents != 1 else ''} · "
            f"{human_bytes(stats['bytes'])}", TITLE)
    if parses is False:
        out.add("note: PyYAML could not parse it; the outline comes from a line scan", KEY)
    if len(text) > _YAML_SCAN_CHARS:
        out.add(f"sampled: keys from the first {_YAML_SCAN_CHARS:,} characters", KEY)
    for top in keys[:80]:
        out.add(f"  L{top.line} {clip(top.key, 60)}: {top.what()}", MAIN)
    if len(keys) > 80:
        out.add(f"  … {len(keys) - 80} more keys", MAIN)
    return True


# -- HTML and XML ------------------------------------------------------------------------

_TAG = re.compile(r"<(/?)([A-Za-z_][\w:.\-]*)([^<>]*?)(/?)>")
_HTML_SIGNS = re.compile(r"<!doctype\s+html|<html[\s>]|<head[\s>]|<body[\s>]|<div[\s>]|<p[\s>]|<span[\s>]", re.IGNORECASE)


def markup_kind(sample: str) -> str | None:
    """"html", "xml" or None, for a text that starts with a tag."""
    head = sample.lstrip()[:4096]
    if not head.startswith("<"):
        return None
    if _HTML_SIGNS.search(head):
        return "html"
    if head.startswith("<?xml") or (("</" in sample or "/>" in sample) and _TAG.match(head)):
        return "xml"
    return None


def _strip_tags(fragment: str) -> str:
    """Visible text: scripts and styles dropped, tags removed (linear: str.find, and a
    tag pattern that cannot run past the next '<')."""
    kept: list[str] = []
    pos = 0
    lower = fragment.lower()
    while True:
        found = [i for i in (lower.find("<script", pos), lower.find("<style", pos)) if i >= 0]
        if not found:
            kept.append(fragment[pos:])
            break
        start = min(found)
        kept.append(fragment[pos:start])
        closer = "</script" if lower.startswith("<script", start) else "</style"
        end = lower.find(closer, start)
        if end < 0:
            break
        pos = lower.find(">", end)
        if pos < 0:
            break
        pos += 1
    text = re.sub(r"<[^<>]*>", " ", " ".join(kept))
    return re.sub(r"\s+", " ", html.unescape(text)).strip()


def explore_html(text: str, out: Outline, stats: dict[str, Any]) -> bool:
    scan = text[:_SCAN_CHARS]
    title = re.search(r"(?is)<title[^>]{0,500}>(.{0,2000}?)</title\s*>", scan[:200_000])
    out.add(f"HTML · {human_bytes(stats['bytes'])} · {stats['lines']:,} lines"
            + (f" · title: {clip(_strip_tags(title.group(1)), 100)}" if title else ""), TITLE)
    if len(text) > _SCAN_CHARS:
        stats["sampled"] = True
        out.add(f"sampled: tags from the first {_SCAN_CHARS:,} characters", KEY)
    counts = Counter(m.group(1).lower() for m in re.finditer(r"<([A-Za-z][\w-]*)", scan))
    common = ", ".join(f"{t} {n:,}" for t, n in counts.most_common(12))
    out.add(f"elements: {common}", KEY)
    notable = {t: counts[t] for t in ("a", "img", "table", "form", "script", "iframe", "video") if counts[t]}
    if notable:
        out.add("contains: " + ", ".join(f"{n:,} {t}" for t, n in notable.items()), MAIN)
    headings = [(m.group(1), _strip_tags(m.group(2)))
                for m in re.finditer(r"(?is)<h([1-3])[^>]{0,300}>(.{0,300}?)</h\1\s*>", scan[:_HEADINGS_CHARS])]
    if headings:
        out.add("headings:", MAIN)
        for level, heading in headings[:30]:
            out.add(f"  {'  ' * (int(level) - 1)}h{level} {clip(heading, 100)}", DETAIL)
    body = _strip_tags(scan[:200_000])
    if body:
        out.add(f"text: {clip(body, 400)}", SAMPLE)
    return True


def explore_xml(text: str, out: Outline, stats: dict[str, Any]) -> bool:
    scan = text[:_SCAN_CHARS]
    depth = 0
    root: str | None = None
    root_attrs = ""
    children: Counter[str] = Counter()
    tags: Counter[str] = Counter()
    max_depth = 0
    for m in _TAG.finditer(scan):
        closing, name, attrs = m.group(1), m.group(2), m.group(3)
        self_closing = bool(m.group(4)) or attrs.endswith("/")
        if closing:
            depth = max(0, depth - 1)
            continue
        tags[name] += 1
        if root is None:
            root, root_attrs = name, attrs.strip()
        elif depth == 1:
            children[name] += 1
        if not self_closing:
            depth += 1
            max_depth = max(max_depth, depth)
    if root is None:
        return False
    if len(text) > _SCAN_CHARS:
        stats["sampled"] = True
    stats["root"] = root
    out.add(f"XML · root <{root}> · {sum(tags.values()):,} elements · depth {max_depth} · {human_bytes(stats['bytes'])}", TITLE)
    if root_attrs:
        out.add(f"root attributes: {clip(root_attrs, 160)}", MAIN)
    if len(text) > _SCAN_CHARS:
        out.add(f"sampled: elements counted in the first {_SCAN_CHARS:,} characters", KEY)
    if children:
        out.add("children of the root: " + ", ".join(f"<{t}> ×{n:,}" for t, n in children.most_common(15)), KEY)
    out.add("element names: " + ", ".join(f"{t} {n:,}" for t, n in tags.most_common(20)), MAIN)
    first_child = re.search(r"<" + re.escape(root) + r"\b[^>]*>(.*)", scan[:50_000], re.DOTALL)
    if first_child:
        out.add(f"start: {clip(first_child.group(1).strip(), 240)}", SAMPLE)
    return True
