"""Plain-text and Markdown transcripts.

A line that starts with a speaker — ``User:``, ``Human:``, ``Assistant:``, ``AI:``,
``System:`` (also ``Claude:``, ``ChatGPT:``, ``Bot:``, and the Chinese, Japanese and Korean
labels ``用户``/``用戶``/``人类``, ``助手``/``助理``/``AI助手``, ``系统``/``系統``, ``ユーザー``,
``アシスタント``, ``システム``, ``사용자``, ``어시스턴트``, ``시스템``), with an ASCII or a
full-width colon (``用户：``), bare or in Markdown bold (``**User**:`` / ``**User:**``), any
case, after spaces or the full-width spaces of a Chinese indent — starts a message. A file
whose first speaker line is a question-and-answer label (``问``/``問``, ``答``; ``Q``, ``A``)
is read with those labels as user and assistant, and only such a file (elsewhere an answer's
``Q: …`` line is its text); the lines after it, up to the next speaker line, belong to that
message (blank lines around it are trimmed, the rest is kept as written). Text before the
first speaker line is counted and skipped; a file with no speaker line at all is a problem
(line 1), not an import of nothing.

Conversation ``text:<file name without its extension>``; there are no ids or times in the file, so each
message's external id hashes the conversation, its position and its text (re-importing the
same file adds nothing; editing an earlier message and re-importing adds the changed tail
again), and its time is the time of the import.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from lossless.importers.base import ByteStream, Ignored, Item, Problem, Record, Source, derived_id

__all__ = ["FORMAT", "SPEAKER", "read"]

FORMAT = "text"
_ROLES = {"user": "user", "human": "user", "assistant": "assistant", "ai": "assistant", "claude": "assistant",
          "chatgpt": "assistant", "bot": "assistant", "system": "system",
          # the same labels in Chinese (simplified and traditional), Japanese and Korean
          "用户": "user", "用戶": "user", "人类": "user", "人類": "user", "ユーザー": "user", "사용자": "user",
          "ai助手": "assistant", "助手": "assistant", "助理": "assistant", "アシスタント": "assistant",
          "어시스턴트": "assistant", "系统": "system", "系統": "system", "システム": "system", "시스템": "system"}
# question-and-answer labels: a file whose first speaker line is one labels its turns so
# (问：/答：, Q:/A:), and only there are they speakers (elsewhere an answer's "Q: …" is text)
_QA_ROLES = {"问": "user", "問": "user", "答": "assistant", "q": "user", "a": "assistant"}


def _speaker(labels: dict[str, str]) -> re.Pattern[str]:
    # a colon, ASCII or full-width (CJK text writes "用户："), after spaces, tabs or the
    # full-width spaces a Chinese paragraph is indented with ("　　用户：")
    return re.compile(r"^[ \t\u3000]*(?:[*_]{1,2}[ \t]*)?(" + "|".join(labels) + r")[ \t]*(?:[*_]{1,2})?[ \t]*[:：]"
                      r"(?:[ \t]*[*_]{1,2})?[ \t\u3000]?(.*)$", re.IGNORECASE)


SPEAKER = _speaker(_ROLES)
QA_SPEAKER = _speaker(_QA_ROLES)


class _Transcript:
    def __init__(self, source: Source) -> None:
        self.source = source
        self.conversation = f"{FORMAT}:{source.stem}"
        self.role: str | None = None
        self.start = 0
        self.lines: list[str] = []
        self.size = 0
        self.position = 0

    def begin(self, role: str, first: str, line: int) -> Iterator[Item]:
        yield from self.end()
        self.role, self.start, self.lines, self.size = role, line, [first], len(first)

    def add(self, text: str) -> None:
        self.size += len(text) + 1
        if self.size <= self.source.max_message_bytes:
            self.lines.append(text)

    def end(self) -> Iterator[Item]:
        if self.role is None:
            return
        role, self.role = self.role, None
        if self.size > self.source.max_message_bytes:
            yield Problem(self.start, f"invalid message: message is over {self.source.max_message_bytes:,} "
                                      "characters; the limit is that many bytes (config max_message_bytes)",
                          self.conversation)
            return
        content = "\n".join(self.lines).strip()
        if not content:
            yield Problem(self.start, f"empty message: the {role} line has no text", self.conversation)
            return
        ext = derived_id(FORMAT, self.conversation, self.position, role, content)
        self.position += 1
        yield Record(self.conversation, {"role": role, "content": content, "external_id": ext}, self.start)


def read(stream: ByteStream, source: Source) -> Iterator[Item]:
    """Records from a plain-text or Markdown transcript."""
    transcript = _Transcript(source)
    preamble = 0
    lineno = 0
    at_start = True  # this read begins a line (a huge line arrives in bounded pieces)
    qa: bool | None = None  # the file labels its turns 问/答 (Q/A): decided by its first speaker line
    while raw := stream.readline(source.line_limit):
        piece_of_line = not at_start
        lineno += at_start
        at_start = raw.endswith(b"\n")
        try:
            text = raw.decode("utf-8-sig" if lineno == 1 else "utf-8").rstrip("\r\n")
        except UnicodeDecodeError as exc:
            yield Problem(lineno, f"not UTF-8: undecodable byte at column {exc.start + 1}")
            continue
        speaker = None
        if not piece_of_line:
            if not qa:
                speaker = SPEAKER.match(text)
                if speaker and qa is None:
                    qa = False
            if speaker is None and qa is not False:
                speaker = QA_SPEAKER.match(text)
                if speaker:
                    qa = True
        if speaker:
            role = (_QA_ROLES if qa else _ROLES)[speaker.group(1).lower()]
            yield from transcript.begin(role, speaker.group(2), lineno)
        elif transcript.role is not None:
            transcript.add(text)
        elif text.strip():
            preamble = preamble or lineno
    spoke = transcript.role is not None  # a speaker line began a message (end() forgets it)
    yield from transcript.end()
    if preamble and not spoke:
        # text and no speaker at all: not a transcript this reader can split (我：/它：, 甲：/乙：…),
        # which imported nothing and said only "ignored 1 non-message item"
        yield Problem(preamble, "no speaker lines: a message starts with a speaker and a colon at the start of "
                                "its line (User: / Assistant: / System:, Human: / AI:, 用户：/ 助手：/ 系统："
                                "…, or 问：/ 答：, Q: / A:); no line of the file does")
    elif preamble:
        yield Ignored(preamble, "text before the first speaker line")
