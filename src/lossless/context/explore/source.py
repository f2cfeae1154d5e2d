"""Source code: the language, its imports and its top-level definitions with signatures.

Python up to ``AST_CHARS`` is read with :mod:`ast` (exact signatures, methods per class);
everything else with per-language line patterns. Every pattern is anchored at a line
start and uses bounded or newline-free repeats, so a 10 MB file is one linear pass.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from typing import Any

from lossless.context.explore.base import DETAIL, KEY, MAIN, TITLE, Outline, clip, human_bytes

__all__ = ["EXTENSIONS", "explore_code", "guess_language"]

AST_CHARS = 200_000  # ast.parse costs ~2 s a megabyte; above this the line patterns do
_MAX_DEFS = 400

EXTENSIONS: dict[str, str] = {
    "py": "python", "pyi": "python", "js": "javascript", "mjs": "javascript", "cjs": "javascript",
    "jsx": "javascript", "ts": "typescript", "tsx": "typescript", "go": "go", "rs": "rust",
    "java": "java", "kt": "java", "scala": "java", "cs": "csharp", "c": "c", "h": "c", "cc": "cpp",
    "cpp": "cpp", "cxx": "cpp", "hpp": "cpp", "rb": "ruby", "php": "php", "sh": "shell", "bash": "shell",
    "zsh": "shell", "sql": "sql", "swift": "swift",
}

# Signals: lines that are typical of a language, counted over a sample.
_SIGNALS: dict[str, re.Pattern[str]] = {name: re.compile(pattern, re.MULTILINE) for name, pattern in {
    "python": r"^[ \t]*(?:async[ \t]+)?def[ \t]+\w+[ \t]*\(.*\)[^\n]*:[ \t]*$|^[ \t]*class[ \t]+\w+[^\n]*:[ \t]*$"
              r"|^(?:from[ \t]+[\w.]+[ \t]+)?import[ \t]+[\w., \t]+$|^if __name__ == |^[ \t]*@\w[\w.]*",
    "javascript": r"^[ \t]*(?:export[ \t]+)?(?:async[ \t]+)?function\*?[ \t]*\w*[ \t]*\(|^[ \t]*(?:const|let|var)[ \t]+\w+[ \t]*="
                  r"|^[ \t]*import[^\n]{0,200}from[ \t]+['\"]|require\(['\"]|console\.log\(|module\.exports",
    "typescript": r"^[ \t]*(?:export[ \t]+)?(?:interface|enum)[ \t]+\w+|^[ \t]*(?:export[ \t]+)?type[ \t]+\w+[ \t]*="
                  r"|:[ \t]*(?:string|number|boolean|void|any)\b",
    "go": r"^package[ \t]+\w+|^func[ \t]|^import[ \t]+\($|:=|\bfmt\.\w|\berr[ \t]*!=[ \t]*nil",
    "rust": r"^[ \t]*(?:pub[ \t]+)?fn[ \t]+\w+|\blet[ \t]+mut\b|^use[ \t]+[\w:]+|^[ \t]*impl\b|\b\w+!\(",
    "java": r"^[ \t]*(?:public|private|protected)[ \t]+(?:static[ \t]+)?(?:final[ \t]+)?(?:class|interface|enum|[\w<>\[\], ]{1,60}[ \t]+\w+[ \t]*\()"
            r"|^import[ \t]+java\.|System\.out\.",
    "csharp": r"^[ \t]*using[ \t]+System|^[ \t]*namespace[ \t]+[\w.]+|\bpublic[ \t]+(?:class|void|static|async)\b",
    "c": r"^#include[ \t]*[<\"]|^#define[ \t]|\bprintf\(|\bmalloc\(|^(?:static[ \t]+)?(?:int|void|char|unsigned|struct)[ \t][^;\n]{0,120}\)[ \t]*\{?$",
    "cpp": r"\bstd::|^[ \t]*template[ \t]*<|^[ \t]*namespace[ \t]+\w+|^#include[ \t]*<\w+>$",
    "ruby": r"^[ \t]*def[ \t]+\w+[!?]?(?:\(.*\))?[ \t]*$|^[ \t]*end[ \t]*$|^require[ \t]+['\"]|\bputs[ \t]",
    "php": r"<\?php|\$this->|^[ \t]*(?:public|private)?[ \t]*function[ \t]+\w+[ \t]*\(\$?",
    "shell": r"^#!/(?:usr/)?bin/(?:env[ \t]+)?(?:ba|z)?sh|^[ \t]*(?:fi|done|esac|then)[ \t]*$|^[ \t]*echo[ \t]|^[ \t]*export[ \t]+\w+=",
    "sql": r"(?i)^[ \t]*(?:select|insert[ \t]+into|create[ \t]+(?:table|view|index)|update[ \t]+\w+[ \t]+set|alter[ \t]+table)\b",
}.items()}

_IMPORTS: dict[str, str] = {
    "python": r"^(?:from[ \t]+[\w.]+[ \t]+import[ \t][^\n]*|import[ \t][^\n]*)",
    "javascript": r"^import[ \t][^\n]*|^(?:const|let|var)[ \t][^\n]{0,120}require\([^\n]*",
    "go": r"^import[ \t]+\"[^\"\n]+\"|^import[ \t]+\w+[ \t]+\"[^\"\n]+\"|^\t(?:\w+[ \t]+)?\"[\w./\-]+\"$",
    "rust": r"^(?:pub[ \t]+)?use[ \t][^\n]*|^extern[ \t]+crate[^\n]*",
    "java": r"^import[ \t][^\n]*",
    "csharp": r"^using[ \t][\w.= \t]+;",
    "c": r"^#include[^\n]*",
    "ruby": r"^require(?:_relative)?[ \t][^\n]*",
    "php": r"^(?:use|require|require_once|include|include_once)[ \t(][^\n]*",
    "shell": r"^(?:source|\.)[ \t][^\n]*",
}
_IMPORTS["typescript"] = _IMPORTS["javascript"]
_IMPORTS["cpp"] = _IMPORTS["c"]

_DEFS: dict[str, str] = {
    "python": r"^(?:    )?(?:async[ \t]+)?def[ \t]+\w+[^\n]*|^class[ \t]+\w+[^\n]*|^[A-Z][A-Z0-9_]{2,}[ \t]*(?::[^\n=]{1,60})?=[^\n]*",
    "javascript": r"^(?:export[ \t]+)?(?:default[ \t]+)?(?:async[ \t]+)?function\*?[ \t]*\w*[ \t]*\([^\n]*"
                  r"|^(?:export[ \t]+)?(?:default[ \t]+)?(?:abstract[ \t]+)?class[ \t]+\w+[^\n]*"
                  r"|^(?:export[ \t]+)?(?:const|let|var)[ \t]+\w+[ \t]*(?::[^\n=]{1,80})?=[ \t]*(?:async[ \t]+)?(?:function\b|\([^\n]{0,200}\)[ \t]*(?::[^\n=]{1,60})?=>|\w+[ \t]*=>)[^\n]*"
                  r"|^(?:export[ \t]+)?(?:declare[ \t]+)?(?:interface|type|enum)[ \t]+\w+[^\n]*",
    "go": r"^func[ \t][^\n]*|^type[ \t]+\w+[^\n]*|^(?:const|var)[ \t]+\w+[^\n]*",
    "rust": r"^[ \t]{0,4}(?:pub(?:\([\w:]+\))?[ \t]+)?(?:async[ \t]+)?(?:unsafe[ \t]+)?(?:fn|struct|enum|trait|impl|mod|const|static|type|macro_rules!)[ \t<][^\n]*",
    "java": r"^[ \t]{0,4}(?:(?:public|private|protected|static|final|abstract|sealed|synchronized|default)[ \t]+)+[^\n;=]{1,160}\([^\n]*"
            r"|^[ \t]{0,4}(?:(?:public|private|protected|static|final|abstract|sealed)[ \t]+)*(?:class|interface|enum|record)[ \t]+\w+[^\n]*",
    "csharp": r"^[ \t]{0,8}(?:(?:public|private|protected|internal|static|async|override|virtual|sealed|partial|abstract)[ \t]+)+[^\n;=]{1,160}\([^\n]*"
              r"|^[ \t]{0,8}(?:(?:public|private|protected|internal|static|sealed|partial|abstract)[ \t]+)*(?:class|interface|enum|struct|record)[ \t]+\w+[^\n]*",
    "c": r"^(?:static[ \t]+|inline[ \t]+|extern[ \t]+|const[ \t]+|unsigned[ \t]+)*[A-Za-z_][\w \t*&:<>,]{0,80}?[ \t*&]\w+[ \t]*\([^;\n]*$"
         r"|^(?:typedef[ \t]+)?(?:struct|union|enum|class|namespace)[ \t]+\w+[^;\n]*$|^#define[ \t]+\w+[^\n]*",
    "ruby": r"^[ \t]{0,2}(?:def|class|module)[ \t][^\n]*",
    "php": r"^[ \t]{0,4}(?:(?:public|private|protected|static|abstract|final)[ \t]+)*(?:function|class|interface|trait)[ \t]+\w+[^\n]*",
    "shell": r"^(?:function[ \t]+)?[\w\-]+[ \t]*\(\)[^\n]*|^function[ \t]+\w+[^\n]*",
    "sql": r"(?i)^[ \t]*(?:create|alter)[ \t]+(?:or[ \t]+replace[ \t]+)?(?:temporary[ \t]+)?(?:table|view|index|function|procedure|trigger)\b[^\n]*",
    "swift": r"^[ \t]{0,4}(?:(?:public|private|internal|open|static|final)[ \t]+)*(?:func|class|struct|enum|protocol|extension)[ \t]+\w+[^\n]*",
}
_DEFS["typescript"] = _DEFS["javascript"]
_DEFS["cpp"] = _DEFS["c"]
_DEFS_RE = {k: re.compile(v, re.MULTILINE) for k, v in _DEFS.items()}
_IMPORTS_RE = {k: re.compile(v, re.MULTILINE) for k, v in _IMPORTS.items()}
_CONTROL = re.compile(r"(?:if|for|while|switch|return|else|catch|do)\b")


def guess_language(sample: str, ext_language: str | None = None) -> tuple[str | None, int]:
    """(language, how many sample lines look like it); the hint wins when given."""
    scores = Counter({name: len(pattern.findall(sample)) for name, pattern in _SIGNALS.items()})
    if ext_language:
        return ext_language, scores.get(ext_language, 0)
    if scores["typescript"] and scores["javascript"]:
        scores["typescript"] += scores["javascript"]
    if scores["cpp"] and scores["c"]:
        scores["cpp"] += scores["c"] // 2
    best, score = scores.most_common(1)[0]
    return (best, score) if score else (None, 0)


def looks_like_code(sample: str) -> str | None:
    """The language when enough of the sample reads as code, else None."""
    language, score = guess_language(sample)
    lines = sum(1 for ln in sample.split("\n") if ln.strip())
    if language is None or lines == 0:
        return None
    # braces and semicolons at line ends back up weak signals in C-like languages
    endings = len(re.findall(r"[{};)][ \t]*$", sample, re.MULTILINE))
    if score >= max(3, 0.08 * lines) or (score >= 2 and endings >= 0.3 * lines):
        return language
    return None


def _python_ast(text: str, out: Outline, stats: dict[str, Any]) -> bool:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    imports: list[str] = []
    defs: list[tuple[int, str, int]] = []
    for node in tree.body:
        if isinstance(node, ast.Import):
            imports += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            imports.append("." * node.level + (node.module or "") + ": " + ", ".join(a.name for a in node.names))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            defs.append((node.lineno, _signature(node), MAIN))
        elif isinstance(node, ast.ClassDef):
            bases = ", ".join(ast.unparse(b) for b in node.bases)
            methods = [n for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
            defs.append((node.lineno, f"class {node.name}" + (f"({bases})" if bases else ""), MAIN))
            for method in methods[:30]:
                defs.append((method.lineno, "  " + _signature(method), DETAIL))
            if len(methods) > 30:
                defs.append((methods[30].lineno, f"  … {len(methods) - 30} more methods", DETAIL))
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [t.id for t in targets if isinstance(t, ast.Name) and t.id.isupper()]
            if names:
                defs.append((node.lineno, f"{names[0]} = {clip(ast.unparse(node.value), 60)}"
                             if node.value is not None else names[0], DETAIL))
    stats["parsed"] = "ast"
    _write(out, stats, "python", imports, defs[:_MAX_DEFS], how="parsed with ast")
    return True


def _signature(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    prefix = "async def" if isinstance(node, ast.AsyncFunctionDef) else "def"
    returns = f" -> {ast.unparse(node.returns)}" if node.returns is not None else ""
    return f"{prefix} {node.name}({ast.unparse(node.args)}){returns}"


def _write(out: Outline, stats: dict[str, Any], language: str, imports: list[str],
           defs: list[tuple[int, str, int]], *, how: str) -> None:
    stats["language"] = language
    stats["definitions"] = len(defs)
    out.add(f"Code · {language} · {stats['lines']:,} lines · {human_bytes(stats['bytes'])} · {how}", TITLE)
    if imports:
        unique = list(dict.fromkeys(imports))
        out.add(f"imports ({len(unique)}): " + "; ".join(clip(i, 60) for i in unique[:40])
                + (" …" if len(unique) > 40 else ""), KEY)
    if defs:
        out.add(f"top-level definitions ({len(defs):,}{'+' if len(defs) >= _MAX_DEFS else ''}):", KEY)
        for line, text, priority in defs:
            out.add(f"  L{line} {clip(text, 160)}", priority)
    else:
        out.add("no top-level definitions found", KEY)


def explore_code(text: str, out: Outline, stats: dict[str, Any], *, language: str | None = None) -> bool:
    """Outline source code; False when no language can be named (nothing written)."""
    sample = text[:64_000]
    if language is None:
        language = looks_like_code(sample)
        if language is None:
            return False
    if language == "python" and len(text) <= AST_CHARS and _python_ast(text, out, stats):
        return True
    imports: list[str] = []
    pattern = _IMPORTS_RE.get(language)
    if pattern is not None:
        for m in pattern.finditer(text):
            imports.append(m.group(0).strip().rstrip(";"))
            if len(imports) >= 200:
                break
    defs: list[tuple[int, str, int]] = []
    lineno, last = 1, 0
    for m in _DEFS_RE.get(language, _DEFS_RE["c"]).finditer(text):
        line = m.group(0).rstrip(" \t{:").strip()
        if _CONTROL.match(line):
            continue
        lineno += text.count("\n", last, m.start())
        last = m.start()
        nested = m.group(0)[:1] in " \t"
        defs.append((lineno, line, DETAIL if nested else MAIN))
        if len(defs) >= _MAX_DEFS:
            break
    _write(out, stats, language, imports, defs, how="definitions found by line patterns")
    return True
