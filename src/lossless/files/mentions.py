"""Spotting files named in a chat message, the ``/context`` command, and phrases that
refer to earlier documents without naming one.

A message names a file with a path (``src/app.py``, ``./docs/setup.md``, an absolute
path) or a bare file name with an extension (``server.ts``), in plain text, quotes or
backticks, in English or Chinese ("打开 `server.ts` 文件"). These are only candidates:
:meth:`lossless.files.Files.mentioned` keeps the ones that name an indexed file.

A message may also point at documents without a path (seed 004: "参考之前的 API 文档"):
:func:`document_reference` spots that with a small set of patterns, each a document
noun tied to a reference, so that a document word alone ("can you document this?") or a
time word alone ("as I said before") does not count:

- a document someone shared: "the API doc I shared", "the spec you sent me",
  "我发给你的文档", "你给我的那份资料";
- a document from earlier: "the spec from before", "the doc mentioned earlier", "the
  previous report", "之前的 API 文档", "上次那份设计稿";
- a document consulted: "according to the docs", "as per the spec", "check the
  README", "参考 API 文档", "按照规范".
"""

from __future__ import annotations

import re

__all__ = ["DOCUMENT_PATTERNS", "context_request", "document_reference", "path_candidates"]

# Path characters: ASCII and Latin letters, digits and ._-/~+@ (a backslash is read as
# "/"). CJK is left out, so a path written against Chinese text without spaces is cut
# cleanly ("打开server.ts文件" → "server.ts").
_RUN = re.compile(r"[A-Za-z0-9_.\-/\\~+@\u00c0-\u024f]+")
_NAME_WITH_EXT = re.compile(r"[^/]*[A-Za-z0-9_\-]\.[A-Za-z][A-Za-z0-9_+\-]{0,11}")
_CONTEXT = re.compile(r"^[ \t]*/context(?:[ \t]+([^\n]*?))?[ \t]*$", re.MULTILINE)
_MAX_CANDIDATES = 64


def path_candidates(text: str) -> list[str]:
    """Tokens of ``text`` that look like file paths or file names, in order, once each."""
    out: dict[str, None] = {}
    for match in _RUN.finditer(text):
        token = match.group(0).replace("\\", "/").rstrip(".-/")
        while token.startswith("./"):
            token = token[2:]
        if not token or not any(ch.isalnum() for ch in token):
            continue
        if token.startswith("@") and "/" not in token:  # a mention, not a file
            continue
        last = token.rsplit("/", 1)[-1]
        if "/" in token.strip("/") or _NAME_WITH_EXT.fullmatch(last) or token.startswith(("/", "~/")):
            out.setdefault(token, None)
        if len(out) >= _MAX_CANDIDATES:
            break
    return list(out)


def context_request(text: str) -> str | None:
    """The argument of a ``/context`` command on a line of its own (``/context project
    layout`` → ``"project layout"``; a bare ``/context`` → ``""``), or None when the
    message has none."""
    if not isinstance(text, str):
        return None
    match = _CONTEXT.search(text)
    if match is None:
        return None
    return (match.group(1) or "").strip()


# -- phrases that refer to earlier documents --------------------------------------------

_DOC = (r"(?:docs?|documents?|documentation|specs?|specifications?|files?|readme|notes|guides?|manuals?"
        r"|write-?ups?|papers?|reports?|pdfs?|slides|snippets?|schemas?|scripts?|rfcs?|proposals?"
        r"|requirements|runbooks?|playbooks?|articles?|code)")
_DET = r"(?:the|that|this|those|these|my|your|our|his|her|their)"
_GAP = r"(?:[\w.'/-]+\s+){0,3}?"  # up to three words between the article and the noun ("the new API doc")
_WHO = r"(?:I|you|we|they|he|she)(?:'ve|'d)?"
_SHARED = (r"(?:shared|sent|uploaded|attached|pasted|gave|provided|linked|forwarded|posted|indexed|mentioned"
           r"|showed|added|dropped|referenced|discussed)")
_WHEN = (r"(?:before|earlier|previously|above|last\s+(?:time|week|session)|yesterday"
         r"|the\s+(?:other\s+day|last\s+session|previous\s+(?:session|chat|conversation)))")
_CN_DOC = r"(?:文档|文件(?!夹)|资料|规范|手册|说明书|说明文档|接口文档|设计稿|设计文档|需求文档|报告|笔记|代码|README|readme|API|api|spec|PDF|pdf)"
_CN_WHEN = r"(?:之前|先前|以前|此前|早先|刚才|刚刚|上次|前面|上面|早些时候)"
_CN_STOP = r"[^，。！？；,.!?;\n]"  # within one clause

DOCUMENT_PATTERNS: tuple[re.Pattern[str], ...] = tuple(re.compile(p, re.IGNORECASE) for p in (
    # the API doc I shared / the spec you sent me / the files we indexed
    rf"\b{_DET}\s+{_GAP}{_DOC}\s+(?:(?:that|which)\s+)?{_WHO}\s+(?:(?:had|have|just|already|previously|earlier)\s+)*"
    rf"{_SHARED}\b",
    # the spec from before / the doc mentioned earlier / the notes shared above
    rf"\b{_DET}\s+{_GAP}{_DOC}\s+(?:(?:from|in|of)\s+{_WHEN}|(?:{_WHO}\s+)?{_SHARED}\s+{_WHEN})",
    # the previous report / the aforementioned spec / the earlier API doc
    rf"\b{_DET}\s+(?:earlier|previous|prior|aforementioned|above-mentioned|above)\s+(?:[\w.'/-]+\s+){{0,2}}?{_DOC}\b",
    # according to the docs / as per the spec / check the README / see our runbook
    r"\b(?:according\s+to|as\s+per|per|as\s+in|refer(?:ring)?\s+to|based\s+on|check|consult|see|look\s+at|"
    rf"following)\s+{_DET}\s+(?:[\w.'/-]+\s+){{0,2}}?(?:docs?|documentation|specs?|specification|readme|manual|"
    r"runbook|rfc)\b",
    # 之前的 API 文档 / 上次那份设计稿 / 刚才发的文件
    # (a 的/那份 between: "之前我写代码的时候" is about the past, not a document)
    rf"{_CN_WHEN}{_CN_STOP}{{0,6}}?(?:的|那份|那个|那篇|这份|这个)\s*{_CN_STOP}{{0,8}}?{_CN_DOC}",
    # 我发给你的文档 / 你给我的那份资料 / 我上传的文件
    rf"(?:我|你|我们|您|他|她)(?:之前|刚才|上次|已经|刚刚)?(?:发|给|传|分享|上传|贴|提供|转发)(?:给)?(?:你|我|您|你们)?"
    rf"(?:过|了)?的{_CN_STOP}{{0,8}}?{_CN_DOC}",
    # 参考 API 文档 / 按照规范 / 根据说明书
    rf"(?:参考|参照|对照|按照|根据|依据|查阅|查看)(?:一下)?{_CN_STOP}{{0,8}}?"
    r"(?:文档|规范|手册|说明书|README|readme|spec|API\s*文档|api\s*文档)",
))

# Words that only say *that* a document is referred to; left out of the search query so
# the words that say *what* it is about carry it.
_REFERENCE_WORDS = re.compile(
    r"\b(?:shared|sent|uploaded|attached|pasted|gave|provided|linked|forwarded|posted|indexed|mentioned|showed|"
    r"added|dropped|referenced|discussed|before|earlier|previously|previous|prior|aforementioned|above-mentioned|above|"
    r"according|refer|referring|consult|yesterday)\b"
    r"|之前|先前|以前|此前|早先|刚才|刚刚|上次|前面|上面|早些时候|参考|参照|对照|按照|根据|依据|查阅|查看"
    r"|发给你|发给我|给你|给我|分享|上传|转发",
    re.IGNORECASE)
# Chinese question and function words: a CJK query is matched by its bigrams, and
# "怎么做" or "里说的" would count against every chunk that does not happen to say them.
_CN_FUNCTION_WORDS = re.compile(
    r"为什么|怎么样|怎么|怎样|如何|什么|哪些|哪个|哪里|可以|应该|需要|一下|帮我|请问|里面|关于|那份|那个|那篇|这份|这个"
    r"|是否|有没有|说的|写的|提到的|我们|你们|的|了|吗|呢|吧|啊|里|中|请|做|说|讲|写|是|在|有|我|你|您")


_REFERENCE_SCAN = 2000  # characters read at each end of a message


def document_reference(text: str) -> str | None:
    """What to search the file index for when ``text`` refers to earlier documents
    without naming a path (one of :data:`DOCUMENT_PATTERNS` matches): the message with
    the words that only make the reference ("shared", "earlier", "之前", "参考") and
    Chinese question words ("怎么", "吗") left out; None when it makes no such reference.
    Of a long message only the first and last 2,000 characters are read (a pasted log
    does not make every assembly slow)."""
    if not isinstance(text, str):
        return None
    if len(text) > 2 * _REFERENCE_SCAN:  # a long paste: the question is at its start or its end
        text = text[:_REFERENCE_SCAN] + "\n" + text[-_REFERENCE_SCAN:]
    if not any(p.search(text) for p in DOCUMENT_PATTERNS):
        return None
    query = " ".join(_CN_FUNCTION_WORDS.sub(" ", _REFERENCE_WORDS.sub(" ", text)).split())
    return query or None
