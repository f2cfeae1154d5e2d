"""JSON and JSON Lines: the shape of the data (keys, types, sizes, samples), not the data.

Texts up to ``FULL_PARSE_CHARS`` are parsed whole with ``json.loads``. Bigger ones are
walked value by value with ``JSONDecoder.raw_decode`` (C speed per value) until
``SCAN_SECONDS`` run out; the outline then says what share was read and estimates the
rest, so a 10 MB document costs a bounded, predictable time.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from typing import Any

from lossless.context.explore.base import KEY, SAMPLE, TITLE, Outline, human_bytes, short_json

__all__ = ["explore_json", "explore_jsonl", "looks_like_jsonl"]

FULL_PARSE_CHARS = 2_000_000
SCAN_SECONDS = 0.5
UNION_ELEMENTS = 20_000  # arrays of objects: key counts over at most this many elements
_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


def _skip(text: str, pos: int) -> int:
    """The first position at or after ``pos`` that is not JSON whitespace."""
    match = _WS.match(text, pos)
    return match.end() if match else pos


def type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def shape(value: Any, depth: int = 0) -> str:
    """A one-line type of ``value``: ``object{id, name, …}``, ``array[3] of int``."""
    if isinstance(value, dict):
        keys = list(value)[:6]
        more = ", …" if len(value) > 6 else ""
        return f"object{{{', '.join(str(k)[:30] for k in keys)}{more}}}" if value else "object{}"
    if isinstance(value, list):
        return f"array[{len(value):,}]" + (f" of {element_shape(value, depth + 1)}" if value and depth < 2 else "")
    return type_name(value)


def element_shape(items: list[Any], depth: int = 1) -> str:
    sample = items[:20]
    names = Counter(type_name(v) for v in sample)
    if len(names) == 1:
        only = next(iter(names))
        if only == "object":
            keys: Counter[str] = Counter(str(k) for v in sample for k in v)
            top = [k for k, _ in keys.most_common(6)]
            return f"object{{{', '.join(k[:30] for k in top)}{', …' if len(keys) > 6 else ''}}}"
        if only == "array":
            return shape(sample[0], depth)
        return only
    return "mixed(" + ", ".join(n for n, _ in names.most_common()) + ")"


def _key_union(items: list[Any], out: Outline, indent: str, priority: int) -> None:
    """For an array of objects: every key with how many elements have it and its types."""
    objects = [v for v in items[:UNION_ELEMENTS] if isinstance(v, dict)]
    if not objects:
        return
    counts: Counter[str] = Counter()
    types: dict[str, Counter[str]] = {}
    for obj in objects:
        for k, v in obj.items():
            key = str(k)
            counts[key] += 1
            types.setdefault(key, Counter())[type_name(v)] += 1
    scope = f"in all {len(objects):,}" if len(objects) == len(items) else f"in the first {len(objects):,}"
    out.add(f"{indent}keys ({len(counts)}, {scope} objects):", priority)
    for key, n in counts.most_common(40):
        kinds = "|".join(t for t, _ in types[key].most_common(3))
        out.add(f"{indent}  {key}: {kinds} ({n:,})", priority - 1)
    if len(counts) > 40:
        out.add(f"{indent}  … {len(counts) - 40} more keys", priority - 1)


def describe(value: Any, out: Outline, *, depth: int, max_depth: int, indent: str, size: int | None = None) -> None:
    """Lines for the members of an object or the elements of an array, to ``max_depth``."""
    priority = max(KEY - 2 * depth, SAMPLE + 1)
    if isinstance(value, dict):
        limit = (60, 25, 12)[min(depth, 2)]
        for i, (k, v) in enumerate(value.items()):
            if i == limit:
                out.add(f"{indent}… {len(value) - limit:,} more keys", priority)
                break
            out.add(f"{indent}{json.dumps(str(k)[:60], ensure_ascii=False)}: {_member(v)}", priority)
            if isinstance(v, (dict, list)) and v and depth + 1 < max_depth:
                describe(v, out, depth=depth + 1, max_depth=max_depth, indent=indent + "  ")
    elif isinstance(value, list) and value:
        if all(isinstance(v, dict) for v in value[:20]):
            _key_union(value, out, indent, priority)
        out.add(f"{indent}first: {short_json(value[0], 160)}", SAMPLE + (1 if depth == 0 else 0))
        if len(value) > 1:
            out.add(f"{indent}last: {short_json(value[-1], 120)}", SAMPLE)


def _member(v: Any) -> str:
    if isinstance(v, str):
        return f"str({len(v):,}) {short_json(v, 60)}"
    if isinstance(v, dict):
        return f"object({len(v):,} keys) {shape(v)}"
    if isinstance(v, list):
        return shape(v)
    return f"{type_name(v)} {short_json(v, 40)}"


def _scan(text: str, start: int) -> tuple[Any, int, bool, str | None]:
    """Walk a big top-level array or object value by value within the time budget.
    Returns (what was read, characters consumed, complete?, error or None)."""
    deadline = time.monotonic() + SCAN_SECONDS
    opener = text[start]
    pos = start + 1
    items: list[Any] = []
    members: dict[str, Any] = {}
    try:
        while time.monotonic() < deadline:
            pos = _skip(text, pos)
            if pos >= len(text):
                return (items if opener == "[" else members), pos, False, "the text ends inside the value"
            if text[pos] in "]}":
                return (items if opener == "[" else members), pos + 1, True, None
            if text[pos] == ",":
                pos += 1
                continue
            if opener == "[":
                value, pos = _DECODER.raw_decode(text, pos)
                items.append(value)
            else:
                key, pos = _DECODER.raw_decode(text, pos)
                pos = _skip(text, pos)
                if text[pos:pos + 1] != ":":
                    return members, pos, False, f"expected ':' at character {pos:,}"
                pos = _skip(text, pos + 1)
                value, pos = _DECODER.raw_decode(text, pos)
                members[str(key)] = value
    except (json.JSONDecodeError, IndexError, ValueError, RecursionError) as exc:
        return (items if opener == "[" else members), pos, False, f"invalid JSON near character {pos:,}: {exc}"
    return (items if opener == "[" else members), pos, False, None


def explore_json(text: str, out: Outline, stats: dict[str, Any]) -> bool:
    """Outline a JSON document; False when the text is not JSON (nothing written)."""
    start = _skip(text, 0)
    if start >= len(text) or text[start] not in "[{":
        return False
    size = stats["bytes"]
    if len(text) <= FULL_PARSE_CHARS:
        try:
            value = json.loads(text)
        except (json.JSONDecodeError, RecursionError, ValueError):
            return False
        _outline(value, out, size, complete=True, consumed=len(text), total=len(text))
        return True
    value, consumed, complete, error = _scan(text, start)
    if not value and not complete:
        return False
    stats["sampled"] = not complete
    _outline(value, out, size, complete=complete, consumed=consumed, total=len(text), error=error)
    return True


def _outline(value: Any, out: Outline, size: int, *, complete: bool, consumed: int, total: int,
             error: str | None = None) -> None:
    if isinstance(value, list):
        count = f"{len(value):,}"
        if not complete and consumed:
            count = f"≈{int(len(value) * total / consumed):,} (estimated; {len(value):,} read)"
        out.add(f"JSON array · {count} elements · {human_bytes(size)}", TITLE)
        if value:
            out.add(f"elements: {element_shape(value)}", KEY)
    elif isinstance(value, dict):
        out.add(f"JSON object · {len(value):,} keys{'' if complete else ' read'} · {human_bytes(size)}", TITLE)
    else:
        out.add(f"JSON {type_name(value)} · {human_bytes(size)}: {short_json(value, 160)}", TITLE)
        return
    if not complete:
        share = 100 * consumed / total if total else 100
        out.add(f"sampled: read the first {consumed:,} of {total:,} characters ({share:.0f}%)"
                + (f"; {error}" if error else " within the time budget"), KEY)
    describe(value, out, depth=0, max_depth=3, indent="  ")


_JSONL_SECONDS = 0.5
_JSONL_LINE_CHARS = 1_000_000  # longer first lines: a one-line JSON document, not JSON Lines


def looks_like_jsonl(text: str) -> bool:
    """At least two non-empty lines, and the first few each a JSON object or array."""
    lines: list[str] = []
    pos = 0
    while len(lines) < 5 and pos < len(text):
        end = text.find("\n", pos)
        end = len(text) if end < 0 else end
        line = text[pos:end].strip() if end - pos <= _JSONL_LINE_CHARS else "\x00"
        pos = end + 1
        if line:
            lines.append(line)
    if len(lines) < 2:
        return False
    for line in lines:
        if line[0] not in "[{":
            return False
        try:
            json.loads(line)
        except (json.JSONDecodeError, RecursionError, ValueError):
            return False
    return True


def explore_jsonl(text: str, out: Outline, stats: dict[str, Any]) -> bool:
    """Outline JSON Lines (one JSON value per line); False when it is not."""
    if not looks_like_jsonl(text):
        return False
    deadline = time.monotonic() + _JSONL_SECONDS
    records: list[Any] = []
    bad: list[int] = []
    pos, lineno = 0, 0
    while pos < len(text) and len(records) < UNION_ELEMENTS and time.monotonic() < deadline:
        end = text.find("\n", pos)
        end = len(text) if end < 0 else end
        line = text[pos:end]
        pos, lineno = end + 1, lineno + 1
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except (json.JSONDecodeError, RecursionError, ValueError):
            bad.append(lineno)
    complete = pos >= len(text)
    nonblank = len(records) + len(bad)
    if complete:
        total = f"{nonblank:,}"
    else:
        total = f"≈{int(nonblank * len(text) / max(pos, 1)):,} (estimated; {nonblank:,} read)"
        stats["sampled"] = True
    stats["format"] = "jsonl"
    out.add(f"JSON Lines · {total} records · {human_bytes(stats['bytes'])}", TITLE)
    if not complete:
        out.add(f"sampled: read the first {lineno:,} lines ({100 * pos / len(text):.0f}% of the text)", KEY)
    if bad:
        out.add(f"{len(bad):,} line(s) not valid JSON, first at line {bad[0]:,}", KEY)
    if records:
        out.add(f"records: {element_shape(records)}", KEY)
    describe(records, out, depth=0, max_depth=2, indent="  ")
    return True
