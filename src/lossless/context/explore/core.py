"""``explore()``: what a large text is, told in a few hundred tokens.

Detection looks at the content (a 64 KB sample from the start) and, when given, a hint
such as a file name, a tool name or a tool call's arguments (``read_file
{"path": "data.csv"}``). A hinted kind is tried first and kept only if the content
agrees. Every explorer is linear in the text and samples rather than parses when the
text is huge; any failure on odd input falls back to the plain-text outline.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from typing import Any

from lossless.context.explore.base import Exploration, Kind, Outline, fit
from lossless.context.explore.json_shape import explore_json, explore_jsonl
from lossless.context.explore.logs import explore_log, looks_like_log
from lossless.context.explore.markup import (
    explore_html,
    explore_xml,
    explore_yaml,
    looks_like_yaml,
    markup_kind,
)
from lossless.context.explore.prose import explore_text
from lossless.context.explore.source import EXTENSIONS, explore_code, looks_like_code
from lossless.context.explore.tabular import explore_table
from lossless.core.errors import ValidationError
from lossless.core.tokens import TokenCounter, default_counter

__all__ = ["TOKEN_STATS_CHARS", "detect_kind", "explore", "hinted"]

TOKEN_STATS_CHARS = 200_000  # count tokens for stats only up to this size
_SAMPLE_CHARS = 64_000

_HINT_KINDS: dict[str, str] = {
    "json": "json", "jsonl": "json", "ndjson": "json", "geojson": "json", "ipynb": "json",
    "csv": "csv", "tsv": "tsv", "tab": "tsv", "yaml": "yaml", "yml": "yaml", "log": "log", "out": "log",
    "html": "html", "htm": "html", "xhtml": "html", "xml": "xml", "svg": "xml", "plist": "xml", "pom": "xml",
    "md": "text", "markdown": "text", "txt": "text", "rst": "text",
    **dict.fromkeys(EXTENSIONS, "code"),
}
_HINT_WORDS: dict[str, str] = {"logs": "log", "log": "log", "journalctl": "log", "csv": "csv", "json": "json",
                               "yaml": "yaml", "html": "html", "xml": "xml"}
_EXT = re.compile(r"\.([A-Za-z][A-Za-z0-9]{0,9})\b")


def hinted(hint: str | None) -> tuple[str | None, str | None]:
    """(kind, extension) named by a hint: the last file extension in it that means
    something, else a telling word ("logs", "csv"); (None, None) otherwise."""
    if not hint:
        return None, None
    hint = hint[:2000]
    for ext in reversed(_EXT.findall(hint)):
        kind = _HINT_KINDS.get(ext.lower())
        if kind:
            return kind, ext.lower()
    for word in re.findall(r"[a-z]+", hint.lower()):
        if word in _HINT_WORDS:
            return _HINT_WORDS[word], None
    return None, None


def _base_stats(text: str) -> dict[str, Any]:
    lines = text.count("\n") + (1 if text and not text.endswith("\n") else 0)
    stats: dict[str, Any] = {"bytes": len(text.encode("utf-8", "replace")), "chars": len(text), "lines": lines}
    return stats


Explorer = Callable[[str, Outline, dict[str, Any]], bool]


def _explorers(kind: str, ext: str | None) -> list[tuple[Kind, Explorer]]:
    """The explorers to try for a hinted kind, best first."""
    if kind == "json":
        return [("json", explore_jsonl), ("json", explore_json)]
    if kind in ("csv", "tsv"):
        delim = "\t" if kind == "tsv" else ","
        return [("tsv" if kind == "tsv" else "csv",
                 lambda t, o, s: explore_table(t, o, s, preferred=delim))]
    if kind == "code":
        language = EXTENSIONS.get(ext or "")
        return [("code", lambda t, o, s: explore_code(t, o, s, language=language))]
    if kind == "yaml":
        return [("yaml", explore_yaml)]
    if kind == "log":
        return [("log", explore_log)]
    if kind == "html":
        return [("html", explore_html)]
    if kind == "xml":
        return [("xml", explore_xml)]
    if kind == "text":
        markdown = ext in ("md", "markdown")
        return [("text", lambda t, o, s: explore_text(t, o, s, markdown=markdown or None))]
    return []


def _detected(sample: str) -> list[tuple[Kind, Explorer]]:
    """The explorers the content itself points to, in order of trust."""
    first = sample.lstrip()[:1]
    out: list[tuple[Kind, Explorer]] = []
    if first in ("{", "["):
        out += _explorers("json", None)
    if first == "<":
        kind = markup_kind(sample)
        if kind:
            out += _explorers(kind, None)
    if looks_like_log(sample):
        out.append(("log", explore_log))
    out.append(("csv", explore_table))
    language = looks_like_code(sample)
    if language:
        out.append(("code", lambda t, o, s: explore_code(t, o, s, language=language)))
    if looks_like_yaml(sample):
        out.append(("yaml", explore_yaml))
    return out


def _sample(text: str) -> str:
    if len(text) <= _SAMPLE_CHARS:
        return text
    cut = text.rfind("\n", 0, _SAMPLE_CHARS)
    return text[: cut if cut > _SAMPLE_CHARS // 2 else _SAMPLE_CHARS]


def detect_kind(text: str, hint: str | None = None) -> Kind:
    """The kind :func:`explore` would report, without writing the summary."""
    return explore(text, max_tokens=50, hint=hint, counter=_CharCounter()).kind


class _CharCounter:
    """A free stand-in counter for :func:`detect_kind` (4 characters a token)."""

    name = "chars/4"

    def count(self, text: str) -> int:
        return (len(text) + 3) // 4


def explore(text: str, *, max_tokens: int = 600, counter: TokenCounter | None = None,
            hint: str | None = None) -> Exploration:
    """Describe ``text`` in at most ``max_tokens`` tokens (by ``counter``; default
    cl100k_base, or the estimator when its data is missing) so a model can decide
    whether and where to read it.

    ``hint`` is anything that names the content: a file name, a tool name, a tool
    call's arguments. Never raises on odd input (unparseable, binary-looking, empty):
    what cannot be read as its apparent kind is outlined as text.
    """
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise ValidationError(f"max_tokens must be a positive integer; got {max_tokens!r}")
    counter = counter or default_counter()
    if not isinstance(text, str):
        text = str(text)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: tokenizers and the store refuse them
        text = text.encode("utf-8", "replace").decode("utf-8")
    body = text[1:] if text.startswith("\ufeff") else text
    stats = _base_stats(text)
    kind, outline = _run(body, stats, hint)
    try:
        summary = fit(outline, max_tokens, counter)
    except Exception:  # a counter that chokes on some line: fall back to the first line, cut
        summary = fit(_first_line(body, stats), max_tokens, counter)
    if stats["chars"] <= TOKEN_STATS_CHARS:
        with contextlib.suppress(Exception):  # stats are a courtesy; the summary is what matters
            stats["tokens"] = counter.count(text)
    return Exploration(kind=kind, summary=summary, stats=stats)


def _first_line(text: str, stats: dict[str, Any]) -> Outline:
    outline = Outline()
    outline.add(f"Text · {stats['lines']:,} lines · {stats['chars']:,} characters", 9)
    return outline


def _run(text: str, stats: dict[str, Any], hint: str | None) -> tuple[Kind, Outline]:
    if not text.strip():
        outline = Outline()
        outline.add(f"Empty text · {stats['chars']:,} whitespace characters", 9)
        return "text", outline
    sample = _sample(text)
    hint_kind, ext = hinted(hint)
    candidates = _explorers(hint_kind, ext) if hint_kind and hint_kind != "text" else []
    candidates += _detected(sample)
    if hint_kind == "text":  # a .txt or .md may still hold JSON; nothing weaker overrides the hint
        candidates = [c for c in _detected(sample) if c[0] == "json"] + _explorers("text", ext)
    tried: set[int] = set()
    for kind, explorer in candidates:
        if id(explorer) in tried:
            continue
        tried.add(id(explorer))
        outline = Outline()
        attempt = dict(stats)
        try:
            if explorer(text, outline, attempt):
                stats.clear()
                stats.update(attempt)
                if kind == "csv" and attempt.get("delimiter") == "\t":
                    kind = "tsv"
                return kind, outline
        except Exception:  # odd input must not stop the exploration: try the next kind
            continue
    outline = Outline()
    try:
        explore_text(text, outline, stats)
    except Exception:
        outline = _first_line(text, stats)
    return "text", outline
