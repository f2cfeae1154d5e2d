"""Cutting a file's text into retrievable chunks of about ``chunk_tokens`` tokens, by lines.

Each chunk knows its 1-based line range. Consecutive chunks overlap by about
``overlap_tokens`` tokens of whole lines, so a passage cut at a boundary is still found
whole in one of them. Where to cut is a preference, scored per line boundary:

* markdown: before a heading (``#``; higher levels preferred), then a blank line; never
  inside a fenced code block when the block fits in one chunk;
* code: before a top-level ``def``/``class``/``function``/``fn``/``func`` (and the
  decorators and comments right above it), then nested definitions, blank lines, a
  return to column 0;
* text and data: blank lines (paragraphs), then a return to column 0.

Among the boundaries that keep a chunk within the cap, the best score wins, with a bonus
for fuller chunks so the index is not a heap of tiny pieces. A single line longer than
the cap (minified code, a log line) is cut by tokens into pieces of its own.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from lossless.core.errors import ValidationError
from lossless.core.tokens import TokenCounter

__all__ = ["CHUNK_TOKENS", "FILE_KINDS", "OVERLAP_TOKENS", "Chunk", "FileKind", "kind_of", "split_text"]

FileKind = Literal["code", "markdown", "text", "data"]
FILE_KINDS: tuple[FileKind, ...] = ("code", "markdown", "text", "data")
CHUNK_TOKENS = 400
OVERLAP_TOKENS = 80

_MARKDOWN = frozenset({".md", ".markdown", ".mdx", ".mdown", ".mkd"})
_DATA = frozenset({".json", ".jsonl", ".ndjson", ".yaml", ".yml", ".toml", ".csv", ".tsv", ".xml", ".ini",
                   ".cfg", ".conf", ".properties", ".lock", ".plist", ".env.example", ".proto", ".graphql"})
_CODE = frozenset({
    ".py", ".pyi", ".pyx", ".js", ".mjs", ".cjs", ".jsx", ".ts", ".tsx", ".go", ".rs", ".java", ".kt", ".kts",
    ".scala", ".c", ".h", ".cc", ".cpp", ".cxx", ".hpp", ".hh", ".cs", ".fs", ".rb", ".php", ".swift", ".m",
    ".mm", ".lua", ".pl", ".pm", ".r", ".jl", ".dart", ".ex", ".exs", ".erl", ".hs", ".ml", ".clj", ".el",
    ".sh", ".bash", ".zsh", ".fish", ".ps1", ".sql", ".html", ".htm", ".css", ".scss", ".sass", ".less",
    ".vue", ".svelte", ".zig", ".nim", ".v", ".sol", ".tf", ".gradle", ".cmake",
})
_CODE_NAMES = frozenset({"makefile", "dockerfile", "rakefile", "gemfile", "justfile", "cmakelists.txt"})

_HEADING = re.compile(r"#{1,6}(?=\s|$)")
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
# A definition: optional visibility/export words, then the keyword and a name.
_DEFINITION = re.compile(
    r"(?:export\s+(?:default\s+)?|pub(?:\([^)]*\))?\s+|public\s+|private\s+|protected\s+|static\s+|"
    r"abstract\s+|final\s+|async\s+)*(?:def|class|function\*?|fn|func)\s"
)
# Lines that belong to the definition below them: decorators, attributes, doc comments.
_PREAMBLE = re.compile(r"\s*(?:@\w|#\[|#(?!!)|//|/\*|\*|--|;)")


def kind_of(path: str | os.PathLike[str]) -> FileKind:
    """What sort of text a file holds, from its name: ``code``, ``markdown``, ``data``
    (JSON, YAML, TOML, CSV …) or ``text`` (everything else)."""
    name = os.path.basename(os.fspath(path)).lower()
    suffix = os.path.splitext(name)[1]
    if suffix in _MARKDOWN:
        return "markdown"
    if suffix in _CODE or name in _CODE_NAMES:
        return "code"
    if suffix in _DATA or name.endswith(".env.example"):
        return "data"
    return "text"


@dataclass(frozen=True, slots=True)
class Chunk:
    """One piece of a file: lines ``start_line``..``end_line`` (1-based, inclusive).
    Pieces of one over-long line share its line number."""

    ordinal: int
    start_line: int
    end_line: int
    text: str
    token_count: int


def _lines(text: str) -> list[str]:
    """Lines as editors number them: split at ``\\n`` only (a stray form feed or
    ``\\u2028`` does not start a line), ``\\r`` of CRLF dropped, no empty last line."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def _blank(line: str) -> bool:
    return not line.strip()


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _scores(lines: Sequence[str], kind: FileKind) -> tuple[list[float], list[bool]]:
    """(preference for a cut before line i, whether that cut is inside a fenced block)."""
    n = len(lines)
    score = [0.0] * (n + 1)
    fenced = [False] * (n + 1)
    for i in range(1, n):
        line, prev = lines[i], lines[i - 1]
        if _blank(prev) and not _blank(line):
            score[i] = 2.0
        elif not _blank(line) and _indent(line) == 0 and not _blank(prev) and _indent(prev) > 0:
            score[i] = 1.0
    if kind == "code":
        for i in range(1, n):
            stripped = lines[i].lstrip()
            if not _DEFINITION.match(stripped):
                continue
            j = i  # take the decorators and comments right above the definition with it
            while j > 0 and not _blank(lines[j - 1]) and _PREAMBLE.match(lines[j - 1]):
                j -= 1
            if j > 0:
                score[j] = max(score[j], 4.0 if _indent(lines[i]) == 0 else 2.5)
    elif kind == "markdown":
        fence: str | None = None
        for i in range(n):
            line = lines[i]
            if fence is not None:
                fenced[i] = True
                if line.strip().startswith(fence) and not line.strip().strip(fence[0]):
                    fence = None
                continue
            opening = _FENCE.match(line)
            if opening is not None:
                fence = opening.group(1)
                score[i] = max(score[i], 2.5)
                continue
            heading = _HEADING.match(line)
            if heading is not None:
                score[i] = max(score[i], 4.0 + (6 - len(heading.group(0))) / 10)
    score[0] = score[n] = 0.0
    return score, fenced


class _Counts:
    """Token counts of lines, each with its newline, memoised (code repeats lines)."""

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self.memo: dict[str, int] = {}

    def line(self, line: str) -> int:
        hit = self.memo.get(line)
        if hit is None:
            hit = self.memo[line] = self.counter.count(line + "\n")
        return hit


def _pieces(line: str, counter: TokenCounter, cap: int) -> list[str]:
    """An over-long line cut into pieces of at most ``cap`` tokens (at a space or
    punctuation near the limit when there is one). About two counts per piece: a guess
    from the line's characters per token, widened until it overflows, then bisected to
    within 5%."""
    per_token = max(1.0, len(line) / max(1, counter.count(line)))
    out: list[str] = []
    i = 0
    while i < len(line):
        good, bad = i, 0  # line[i:good] fits; line[i:bad] does not (0: not found yet)
        guess = min(len(line), i + max(1, int(cap * per_token * 0.95)))
        while not bad:
            if counter.count(line[i:guess]) <= cap:
                good = guess
                if guess == len(line):
                    break
                guess = min(len(line), i + int((guess - i) * 1.1) + 1)
            else:
                bad = guess
        while bad and bad - good > max(8, (good - i) // 20):
            mid = (good + bad) // 2
            if counter.count(line[i:mid]) <= cap:
                good = mid
            else:
                bad = mid
        if good == i:  # the cap is below one character's tokens: take one character anyway
            good = i + 1
        if good < len(line):
            window = line[max(i + 1, good - 80) : good]
            cut = max(window.rfind(" "), window.rfind(","), window.rfind(";"))
            if cut >= 0:
                good = max(i + 1, good - 80) + cut + 1
        out.append(line[i:good])
        i = good
    return out


def split_text(text: str, kind: FileKind, counter: TokenCounter, *, chunk_tokens: int = CHUNK_TOKENS,
               overlap_tokens: int = OVERLAP_TOKENS) -> list[Chunk]:
    """Cut ``text`` into chunks of at most ``chunk_tokens`` tokens (a single longer line
    is cut by tokens), consecutive chunks sharing about ``overlap_tokens`` tokens of lines."""
    if isinstance(chunk_tokens, bool) or not isinstance(chunk_tokens, int) or chunk_tokens < 16:
        raise ValidationError(f"chunk_tokens must be an integer >= 16, got {chunk_tokens!r}")
    if isinstance(overlap_tokens, bool) or not isinstance(overlap_tokens, int) or not (
            0 <= overlap_tokens <= chunk_tokens // 2):
        raise ValidationError(f"overlap_tokens must be an integer in 0..chunk_tokens/2, got {overlap_tokens!r}")
    lines = _lines(text)
    n = len(lines)
    if n == 0:
        return []
    counts = _Counts(counter)
    cost = [counts.line(line) for line in lines]
    prefix = [0] * (n + 1)
    for i, c in enumerate(cost):
        prefix[i + 1] = prefix[i] + c
    score, fenced = _scores(lines, kind)
    cap = chunk_tokens
    out: list[Chunk] = []

    def emit(start: int, end: int) -> int:
        """Add lines[start:end] as a chunk; returns the end actually used. Lines are
        counted one by one, and merges across lines can (rarely) make the whole count
        higher: then lines go back from the end (never the first new one) or the start."""
        while True:
            body = "\n".join(lines[start:end])
            tokens = counter.count(body)
            if tokens <= cap or end - start == 1:
                break
            if end - 1 > new:
                end -= 1
            else:
                start += 1
        out.append(Chunk(len(out), start + 1, end, body, tokens))
        return end

    def reach(start: int) -> int:
        end = start
        while end < n and prefix[end + 1] - prefix[start] <= cap:
            end += 1
        return end

    start = new = 0  # this chunk starts at `start`; lines before `new` are overlap
    while new < n:
        if cost[new] > cap:  # an over-long line becomes pieces of its own
            for piece in _pieces(lines[new], counter, cap):
                out.append(Chunk(len(out), new + 1, new + 1, piece, counter.count(piece)))
            start = new = new + 1
            continue
        while start < new and prefix[new + 1] - prefix[start] > cap:
            start += 1  # the overlap must leave room for at least one new line
        end = reach(start)
        cut: int | None = n if end == n else _choose(start, new, end, score, fenced, prefix, cap)
        if cut is None and start < new:  # every cut splits a fence: try without the overlap
            start = new
            end = reach(start)
            cut = n if end == n else _choose(start, new, end, score, fenced, prefix, cap)
        if cut is None:  # the fence is longer than a chunk: cut it where it is best
            cut = _choose(start, new, end, score, [False] * (n + 1), prefix, cap)
            assert cut is not None
        cut = emit(start, cut)
        new = cut
        back = cut  # overlap: whole lines before the cut, up to overlap_tokens
        while back - 1 > start and prefix[cut] - prefix[back - 1] <= overlap_tokens:
            back -= 1
        start = back
    return out


def _choose(start: int, new: int, end: int, score: Sequence[float], fenced: Sequence[bool],
            prefix: Sequence[int], cap: int) -> int | None:
    """The best place to end a chunk that starts at ``start``: a line index in
    ``new+1..end`` (at least one new line, at most what fits), or None when every such
    cut would split a fenced block."""
    legal = [c for c in range(max(new, start) + 1, end + 1) if not fenced[c]]
    if not legal:
        return None
    # A chunk is meant to carry at least a quarter of the cap in new lines when it can.
    full = [c for c in legal if prefix[c] - prefix[new] >= cap // 4] or legal
    return max(full, key=lambda c: (score[c] + 2.0 * (prefix[c] - prefix[start]) / cap, c))
