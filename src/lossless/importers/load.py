"""Run an importer into a store: :func:`import_file`.

Records are checked one by one as they stream in (a bad one is reported with its line and
skipped; the rest go on), then stored in per-conversation batches through
``Conversation.add_many``: each batch is one transaction, so an interrupted import leaves
whole batches, and importing again completes it (external ids make stored messages count
as already there).

Records without an external id (OpenAI lines usually have none) are recognised by where
they stand: while a conversation's messages in the file repeat, from its first, the very
messages stored at the same positions (same role, content, name, tool fields, and time
when the file gives one; where a message was erased, the one it was), they count as already
stored — importing the same file again,
or a longer copy of it, adds only what is new. From the first message that differs on,
everything is stored. No id is made up, so an export still round-trips exactly.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lossless.core._canonical import message_hash
from lossless.core.erasure import ERASED, erased_hash, erased_tool_calls
from lossless.core.errors import LosslessError, ValidationError
from lossless.core.types import Message
from lossless.core.validate import NewMessage, check_conversation_id, validate_message
from lossless.engine import Memory
from lossless.importers.base import (
    HEAD_BYTES,
    ByteStream,
    Ignored,
    Meta,
    Problem,
    Record,
    Source,
    is_json_lines,
)
from lossless.importers.detect import FORMATS, detect, reader_for
from lossless.importers.encoding import Recoded, check_encoding_name, source_encoding
from lossless.importers.openai_messages import is_document
from lossless.store.erase import tombstones

__all__ = ["BATCH_SIZE", "ImportInterrupted", "ImportReport", "check_source", "file_size", "import_file",
           "import_stream"]

BATCH_SIZE = 500


@dataclass
class ImportReport:
    """What one import did. ``skipped`` are problems (each names its line); ``ignored``
    counts lines that are not messages by design, by kind."""

    source: str = ""
    format: str = ""
    added: Counter[str] = field(default_factory=Counter)  # conversation → messages newly stored
    already_stored: int = 0
    lines: int = 0
    records: int = 0  # messages, problems and ignored items read
    document: bool = False  # one JSON document (not JSON lines): counted in records, not lines
    skipped: list[Problem] = field(default_factory=list)
    ignored: Counter[str] = field(default_factory=Counter)
    stopped_at: int | None = None  # strict: the line that stopped the import
    interrupted: bool = False  # stopped by Ctrl-C (ImportInterrupted): the batches written stay

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "format": self.format,
            "conversations": dict(self.added),
            "added": sum(self.added.values()),
            "already_stored": self.already_stored,
            "lines": self.lines,
            "records": self.records,
            "document": self.document,
            "skipped": [{"line": p.line, "reason": p.reason, "conversation": p.conversation} for p in self.skipped],
            "ignored": dict(self.ignored.most_common()),
            "stopped_at": self.stopped_at,
            "interrupted": self.interrupted,
        }

    def line(self) -> str:
        """The one-line summary: conversations, messages, skipped with reasons."""
        added = sum(self.added.values())
        convs = sum(1 for n in self.added.values() if n)
        source = f"{self.lines:,} line{'s' if self.lines != 1 else ''}"
        if self.document:  # a (pretty-printed) JSON document: its lines say nothing of its size
            source = f"{self.records:,} record{'s' if self.records != 1 else ''} of a JSON document"
        named = [c for c, n in self.added.items() if n]
        text = (f"imported {added:,} message{'s' if added != 1 else ''} into {convs} "
                f"conversation{'s' if convs != 1 else ''}"
                + (f" ({named[0]!r})" if convs == 1 else "")  # its id, which the file does not show
                + f" from {source}")
        if self.format:
            text += f" ({self.format})"
        if self.already_stored:
            text += f"; {self.already_stored:,} already stored"
        if self.skipped:
            kinds = Counter(p.reason.split(":", 1)[0] for p in self.skipped)
            detail = ", ".join(f"{n} {kind}" for kind, n in kinds.most_common())
            text += f"; skipped {len(self.skipped)} line{'s' if len(self.skipped) != 1 else ''} ({detail})"
        if self.ignored:
            total = sum(self.ignored.values())
            detail = ", ".join(f"{n:,} {_plural(what, n)}" for what, n in self.ignored.most_common(4))
            more = len(self.ignored) - 4
            text += f"; ignored {total:,} non-message item{'s' if total != 1 else ''} ({detail}" + (
                f", {more} more kinds)" if more > 0 else ")")
        if self.stopped_at is not None:
            text += f"; stopped at line {self.stopped_at} (strict)"
        if self.interrupted:
            text += "; interrupted: run the same command again to import the rest (what is stored is skipped)"
        return text



# the nouns an ignored kind ends with ("codex event_msg line"): "3 codex event_msg lines"
_COUNTED_NOUNS = ("line", "item", "message", "recap")


def _plural(what: str, n: int) -> str:
    return what + "s" if n != 1 and what.endswith(_COUNTED_NOUNS) else what

class ImportInterrupted(KeyboardInterrupt):
    """Ctrl-C (SIGINT) stopped an import: ``report`` says what was stored before it (whole
    batches: the one being written was rolled back). Importing the same file again adds
    the rest, as what is stored is recognised. A KeyboardInterrupt, so a caller that does
    not look for it stops as on any Ctrl-C."""

    def __init__(self, report: ImportReport) -> None:
        super().__init__()
        self.report = report


class _Input:
    """The stream an importer reads: replays the sniffed head first, counts bytes and lines."""

    def __init__(self, stream: ByteStream, head: bytes) -> None:
        self.stream = stream
        self.head = head
        self.done = 0
        self.newlines = 0
        self.open_line = False  # the last byte read is not a newline: a line begun and not ended

    @property
    def lines(self) -> int:
        """Lines read so far, a last one without its newline included."""
        return self.newlines + self.open_line

    def _count(self, data: bytes) -> None:
        self.done += len(data)
        if data:
            self.newlines += data.count(b"\n")
            self.open_line = not data.endswith(b"\n")

    def read(self, size: int = -1, /) -> bytes:
        if self.head:
            if size is None or size < 0:
                data = self.head + self.stream.read()
                self.head = b""
            else:
                data, self.head = self.head[:size], self.head[size:]
        else:
            data = self.stream.read(size)
        self._count(data)
        return data

    def readline(self, size: int = -1, /) -> bytes:
        if not self.head:
            data = self.stream.readline(size)
        else:
            bounded = size is not None and size >= 0
            limit = min(size, len(self.head)) if bounded else len(self.head)
            newline = self.head.find(b"\n", 0, limit)
            if newline >= 0:
                data, self.head = self.head[: newline + 1], self.head[newline + 1:]
            elif bounded and size <= len(self.head):
                data, self.head = self.head[:size], self.head[size:]
            else:  # the line goes on past the head, in the stream
                data, self.head = self.head, b""
                data += self.stream.readline(size - len(data) if bounded else -1)
        self._count(data)
        return data


class _Batches:
    def __init__(self, memory: Memory, report: ImportReport, batch_size: int) -> None:
        self.memory = memory
        self.report = report
        self.batch_size = batch_size
        self.pending: dict[str, list[dict[str, Any]]] = {}
        self.metadata: dict[str, dict[str, Any]] = {}
        self.touched: set[str] = set()
        self.first_seq: dict[str, int] = {}  # each conversation's last seq before this import wrote to it
        self.created: set[str] = set()  # conversations this import created
        self.position: Counter[str] = Counter()  # the file's messages per conversation so far
        self.diverged: set[str] = set()  # conversations whose file messages left the stored ones
        self._page: dict[str, dict[int, Message]] = {}
        self._erased: dict[str, set[str]] = {}  # conversation → ids of its erased messages
        # the last reply stored before this import, for Record.resume; None once this import
        # stored something after it (a reply stored in part can only be the last one)
        self._last_reply: dict[str, Message | None] = {}

    _PAGE = 500

    def _stored(self, conversation: str, seq: int) -> Message | None:
        page = self._page.get(conversation)
        if page is None or seq not in page:
            if page is not None and seq <= max(page, default=0):
                return None
            got = self.memory.store.get_messages(conversation, seq, seq + self._PAGE - 1)
            self._page[conversation] = page = {m.seq: m for m in got}
        return page.get(seq)

    def _same_as_stored(self, conversation: str, position: int, message: dict[str, Any], new: NewMessage) -> bool:
        """Whether the file's ``position``-th message of the conversation is the one stored
        there (only asked while every earlier one was)."""
        if new.external_id is not None:
            return False  # an external id settles it in the store
        stored = self._stored(conversation, position)
        if stored is None or stored.external_id is not None:
            return False
        if "created_at" in message and new.created_at != stored.created_at:
            return False
        stored_hash = message_hash(stored.role, stored.content, stored.name, stored.tool_calls, stored.tool_call_id)
        if stored.content == ERASED and self._is_erased(conversation, stored):
            # erased for privacy: its place, role, time and tool call ids stay, so the file's message
            # there is the one it was (else it was stored again, and every message after it twice)
            return stored_hash == erased_hash(new.role, None, erased_tool_calls(new.tool_calls), new.tool_call_id)
        return message_hash(new.role, new.content, new.name, new.tool_calls, new.tool_call_id) == stored_hash

    def _is_erased(self, conversation: str, stored: Message) -> bool:
        if conversation not in self._erased:
            self._erased[conversation] = {t.message_id for t in tombstones(self.memory.store, conversation)}
        return stored.id in self._erased[conversation]

    def resumed(self, conversation: str, record: Record) -> Record:
        """``record``, or in its place the rest of a reply an earlier import stored from
        its first lines only (see :attr:`Record.resume`)."""
        if record.resume is None:
            return record
        if conversation not in self._last_reply:
            self._last_reply[conversation] = self._read_last_reply(conversation)
        last = self._last_reply[conversation]
        rest = record.resume(last) if last is not None else None
        if rest is None:
            return record
        self._last_reply[conversation] = None
        return record._replace(message=rest, resume=None)

    def _read_last_reply(self, conversation: str) -> Message | None:
        """The conversation's last stored message that is not a tool result."""
        last = self.memory.store.last_seq(conversation)
        for message in reversed(self.memory.store.get_messages(conversation, max(1, last - 63), last) if last else []):
            if message.role != "tool":
                return message
        return None

    def add(self, conversation: str, message: dict[str, Any], checked: NewMessage) -> None:
        position = self.position[conversation] = self.position[conversation] + 1
        if conversation not in self.diverged:
            if self._same_as_stored(conversation, position, message, checked):
                self.report.already_stored += 1
                return
            self.diverged.add(conversation)
        batch = self.pending.setdefault(conversation, [])
        batch.append(message)
        if len(batch) >= self.batch_size:
            self.flush(conversation)

    def meta(self, conversation: str, metadata: dict[str, Any]) -> None:
        self.metadata.setdefault(conversation, {}).update(metadata)

    def flush(self, conversation: str) -> None:
        batch = self.pending.pop(conversation, [])
        if not batch:
            return
        if conversation not in self.first_seq and self.memory.store.get_conversation(conversation) is None:
            self.created.add(conversation)
        conv = self.memory.conversation(conversation, metadata=self.metadata.pop(conversation, None) or None)
        self.touched.add(conversation)
        before = self.memory.store.last_seq(conversation)
        self.first_seq.setdefault(conversation, before)
        stored = conv.add_many(batch)
        new = sum(1 for m in stored if m.seq > before)
        self.report.added[conversation] += new
        if new:
            self._last_reply[conversation] = None
        self.report.already_stored += len(stored) - new

    def settle(self) -> None:
        """After Ctrl-C: the report says what the store holds (a batch committed just before
        the interrupt was not counted yet), and a conversation this import created whose
        first batch was rolled back is not left behind empty."""
        store = self.memory.store
        for conversation, before in self.first_seq.items():
            self.report.added[conversation] = max(0, store.last_seq(conversation) - before)
        for conversation in self.created:
            if not self.report.added[conversation] and store.drop_if_empty(conversation):
                del self.report.added[conversation]
                self.touched.discard(conversation)

    def finish(self) -> None:
        for conversation in list(self.pending):
            self.flush(conversation)
        for conversation in self.touched & set(self.metadata):  # metadata that came after the last batch
            self.memory.conversation(conversation, metadata=self.metadata.pop(conversation))


def _check(record: Record, conversation: str | None, max_bytes: int) -> Problem | NewMessage:
    """Why a record cannot be stored, or the message it makes, checked before it joins a
    batch so one bad record never fails the batch it would have been written with."""
    if conversation is None:
        return Problem(record.line, "no conversation: give --conversation or a 'conversation' field on the line")
    try:
        check_conversation_id(conversation)
        return validate_message(record.message, max_bytes=max_bytes)
    except LosslessError as exc:
        return Problem(record.line, f"invalid message: {exc}", conversation)


def import_stream(
    memory: Memory,
    stream: ByteStream,
    *,
    name: str = "<stdin>",
    format: str | None = None,
    conversation: str | None = None,
    strict: bool = False,
    batch_size: int = BATCH_SIZE,
    on_problem: Callable[[Problem], None] | None = None,
    progress: Callable[[int], None] | None = None,
    encoding: str | None = None,
) -> ImportReport:
    """Import from an open binary stream; see :func:`import_file`."""
    if conversation is not None:
        check_conversation_id(conversation)
    head = stream.read(HEAD_BYTES)
    refuse_non_text(head, name)
    decoding = source_encoding(head, name, encoding)  # refuses text that is not UTF-8 before anything is read
    recoded = None
    if decoding is not None:  # the importers read UTF-8: decode as the file is read
        stream = recoded = Recoded(_Input(stream, head), decoding, name)
        head = stream.read(HEAD_BYTES)
    fmt = format or detect(head, name=None if name == "<stdin>" else name)
    reader = reader_for(fmt)
    stem = Path(name).stem if name != "<stdin>" else "stdin"
    max_bytes = memory.config.max_message_bytes
    source = Source(name=name, stem=stem, head=head, max_message_bytes=max_bytes)
    counted = _Input(stream, head)

    def done() -> int:  # bytes of the file read so far (a decoded file's own, not the UTF-8 made of them)
        return recoded.consumed if recoded is not None else counted.done

    report = ImportReport(source=name, format=fmt, document=is_document(head))
    batches = _Batches(memory, report, batch_size)
    tick = time.monotonic()
    try:
        for n, item in enumerate(reader(counted, source)):
            if progress is not None and not n % 256 and time.monotonic() - tick > 0.1:
                tick = time.monotonic()
                progress(done())
            if isinstance(item, Record | Problem | Ignored):
                report.records += 1
            if isinstance(item, Record):
                report.lines = max(report.lines, item.line)
                conv = conversation if conversation is not None else item.conversation
                if conv is not None:
                    item = batches.resumed(conv, item)
                checked = _check(item, conv, max_bytes)
                if not isinstance(checked, Problem):
                    assert conv is not None  # (_check refuses a record without one)
                    batches.add(conv, item.message, checked)
                    continue
                item = checked
            if isinstance(item, Problem):
                report.lines = max(report.lines, item.line)
                if strict:
                    report.stopped_at = item.line
                    report.skipped.append(item)
                    batches.pending.clear()
                    break
                report.skipped.append(item)
                if on_problem is not None:
                    on_problem(item)
            elif isinstance(item, Ignored):
                report.lines = max(report.lines, item.line)
                report.ignored[item.what] += 1
            elif isinstance(item, Meta):
                batches.meta(conversation if conversation is not None else item.conversation, item.metadata)
        else:
            batches.finish()
            # every line of the file, not only up to where its last message began: a text
            # transcript's last message goes on over lines, a Claude Code reply over several
            report.lines = max(report.lines, counted.lines)
    except KeyboardInterrupt:  # Ctrl-C: the batches written stay, the one being written was rolled back
        report.interrupted = True
        batches.settle()
        raise ImportInterrupted(report) from None
    if progress is not None:
        progress(done())
    return report


def import_file(
    memory: Memory,
    path: str | os.PathLike[str],
    *,
    format: str | None = None,
    conversation: str | None = None,
    strict: bool = False,
    batch_size: int = BATCH_SIZE,
    on_problem: Callable[[Problem], None] | None = None,
    progress: Callable[[int], None] | None = None,
    encoding: str | None = None,
) -> ImportReport:
    """Import a file (``"-"``: standard input) into ``memory``.

    ``format`` is one of :data:`~lossless.importers.FORMATS` (None: :func:`detect` it).
    Without ``conversation`` each source conversation keeps its own id (``claude-code:…``,
    ``chatgpt:…`` — see each importer); with it, everything goes there. A bad record is
    reported to ``on_problem`` and skipped; ``strict`` stops at the first one instead,
    dropping the batches not yet written. ``progress(bytes_read)`` is called now and then.
    The file is read as UTF-8, or as UTF-16/32 when a byte-order mark says so; ``encoding``
    (``"gb18030"``, ``"big5"`` …) decodes a file saved in another (one that is not UTF-8 is
    otherwise refused: :mod:`~lossless.importers.encoding`).
    """
    if format is not None and format not in FORMATS:
        reader_for(format)  # raises with the list of formats
    check_source(path, encoding=encoding)
    if str(path) == "-":
        return import_stream(memory, sys.stdin.buffer, format=format, conversation=conversation, strict=strict,
                             batch_size=batch_size, on_problem=on_problem, progress=progress, encoding=encoding)
    target = Path(path)
    with target.open("rb") as f:
        return import_stream(memory, f, name=str(target), format=format, conversation=conversation, strict=strict,
                             batch_size=batch_size, on_problem=on_problem, progress=progress, encoding=encoding)


# files a chat log is sometimes kept in, which no format reads, by their first bytes
_NOT_TEXT = ((re.compile(rb"\x1f\x8b"), "a gzip-compressed file"), (re.compile(rb"BZh[1-9]1AY&SY"), "a bzip2-compressed file"),
             (re.compile(rb"\xfd7zXZ\x00"), "an xz-compressed file"), (re.compile(rb"\(\xb5/\xfd"), "a zstd-compressed file"),
             (re.compile(rb"7z\xbc\xaf\x27\x1c"), "a 7-Zip archive (compressed)"),
             (re.compile(rb"Rar!\x1a\x07"), "a RAR archive (compressed)"),
             (re.compile(rb"SQLite format 3\x00"), "an SQLite database"), (re.compile(rb"%PDF-"), "a PDF document"))


def refuse_non_text(head: bytes, name: str) -> None:
    """Refuse an archive, a compressed file, a database or a PDF by its first bytes: read as
    text it was refused as "not UTF-8 … import it with --encoding cp1252", which garbles it,
    or as "cannot tell the format: give --format". JSON lines after the first line: that
    line is junk, and the lines after it are read."""
    if is_json_lines(head):
        return
    if head.startswith(b"PK\x03\x04"):
        raise ValidationError(f"{name} is a ZIP archive: unzip it and import the file inside "
                              "(a ChatGPT export: its conversations.json)")
    kind = next((what for magic, what in _NOT_TEXT if magic.match(head)), None)
    if kind is not None:
        raise ValidationError(f"{name} is {kind}, not a chat log: "
                              + ("decompress it and import the file inside" if "compressed" in kind else
                                 "export its conversations first (lossless export, for a lossless store)"
                                 if "SQLite" in kind else "import the conversation as text or JSON"))


def check_source(path: str | os.PathLike[str], *, encoding: str | None = None) -> None:
    """Refuse, before anything is opened or created, a path that is missing or a directory,
    a ZIP archive (a ChatGPT export is downloaded as one) or another file no format reads
    (:func:`refuse_non_text`), or text
    that is not UTF-8 (nor ``encoding``, when given)."""
    if encoding is not None:
        check_encoding_name(encoding)
    if str(path) == "-":
        return
    target = Path(path)
    if target.is_dir():
        raise ValidationError(f"{target} is a directory, not a file to import (import its files one by one)")
    if not target.exists():
        raise ValidationError(f"{target}: no such file")
    try:
        with open(target, "rb") as f:
            head = f.read(HEAD_BYTES)
    except OSError:
        return  # said by the import itself, with the reason
    refuse_non_text(head, str(target))
    source_encoding(head, str(target), encoding)


def file_size(path: str | os.PathLike[str]) -> int | None:
    """The size of a regular file, None for standard input or anything unsized."""
    if str(path) == "-":
        return None
    try:
        return os.stat(path).st_size or None
    except OSError:
        return None
