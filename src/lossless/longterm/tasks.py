"""Task records (seed 003, "长期记忆粒度：任务级"): one long-term record per task, with its
type, status, result, patterns and errors, written when a task ends and merged into when
the same task is written again.

A conversation's *current task* is every message after the last task that ended (the
``task_bounds`` table). It is written three ways: the turn loop's ``end_task=True`` and
``conv.end()`` end it (status ``completed`` unless the model said otherwise), and the memory
flush before compaction writes what it knows so far (status ``in_progress``), so a task
compacted away mid-way is not lost. Its id is ``task_`` + a hash of the conversation and
the task's first seq: every write of the same task names the same record, and
:meth:`lossless.longterm.Memories.record_task` merges into it.

Offline the fields are extractive: the type from the task's first user request (a small
rule table, English and Chinese), the content that request, the result the last
assistant message, the errors the tool errors among the task's messages, the patterns
the decisions and error → fix pairs the sentence rules find. An LLM summarizer (through
the Summarizer protocol, the instruction as the first item, as distillation does) may
name the type, status, result, patterns and errors better; whatever it answers that is
not usable falls back to the extractive fields.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from lossless.core.render import message_text
from lossless.longterm import extract as rules
from lossless.longterm.records import TASK_STATUSES

if TYPE_CHECKING:
    from lossless.core.tokens import TokenCounter
    from lossless.core.types import Message
    from lossless.summarize.base import Summarizer

__all__ = ["MAX_LIST", "TASK_INSTRUCTION", "TaskDraft", "draft", "llm_draft", "merge_lists", "task_id_for",
           "task_type"]

log = logging.getLogger("lossless")

MAX_LIST = 20  # patterns / errors kept per task record (the newest, after merging)
_REQUEST_CHARS = 300
_RESULT_CHARS = 600

TASK_INSTRUCTION = (
    "Below is one task of an agent session, from the user's request to its end. Describe the "
    "task as one JSON object and nothing else: "
    '{"task_type": "a short snake_case label such as code_review, debugging, deployment", '
    f'"status": one of {" | ".join(json.dumps(s) for s in TASK_STATUSES)}, '
    '"result": "what came of it, one or two sentences", '
    '"patterns": ["a reusable lesson or decision, one self-contained sentence each"], '
    '"errors": ["each error met, with its fix if there was one"]}.'
)

# The type of a task by its first request; the first rule that matches wins.
_TYPES: tuple[tuple[str, re.Pattern[str]], ...] = tuple((name, rules._rx(en, zh)) for name, en, zh in (
    ("code_review", r"review|pull request|PR|code review", "审查|评审|代码审核"),
    ("deployment", r"deploy|deployment|release|roll ?out|ship", "部署|发布|上线"),
    ("debugging", r"debug|bug|fix|broken|error|errors|fails?|failing|crash(?:es|ed)?|traceback|exception",
     "报错|修复|错误|调试|崩溃|失败"),
    ("testing", r"tests?|testing|pytest|unit tests?|coverage", "测试|单测"),
    ("research", r"research|investigate|find out|look up|compare|evaluate", "调研|研究|对比|查一下"),
    ("analysis", r"analy[sz]e|analysis|report|statistics|metrics|data", "分析|统计|报表|数据"),
    ("writing", r"write|draft|document|docs|documentation|email|summari[sz]e|translate", "写|文档|邮件|总结|翻译"),
    ("implementation", r"implement|add|build|create|refactor|migrate|set up|setup|configure",
     "实现|添加|开发|重构|迁移|配置|搭建"),
))
_QUESTION = re.compile(r"[?？]\s*$|^\s*(?:what|why|how|when|where|who|which|is|are|can|does|do)\b|吗|什么|为什么|怎么",
                       re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class TaskDraft:
    """What one write knows about a task, before it is merged into its record."""

    task_type: str
    request: str  # the record's content: the task's first user request (clipped)
    status: str
    result: str | None
    patterns: tuple[str, ...]
    errors: tuple[str, ...]
    source_message_ids: tuple[str, ...]
    created_at: datetime | None
    first_seq: int
    last_seq: int
    extracted: str = "rules"  # or "llm"

    def task(self, task_id: str) -> dict[str, Any]:
        """The ``task`` dict :meth:`~lossless.longterm.Memories.add` takes."""
        return {"task_id": task_id, "task_type": self.task_type, "status": self.status, "result": self.result,
                "patterns": list(self.patterns), "errors": list(self.errors)}


def task_id_for(conversation_id: str, first_seq: int) -> str:
    """The id of the task of ``conversation_id`` that begins at ``first_seq``."""
    digest = hashlib.sha256(json.dumps([conversation_id, first_seq]).encode()).hexdigest()
    return f"task_{digest[:20]}"


def task_type(request: str) -> str:
    """A short label for a task, by rule from its request (``request`` when none fits)."""
    for name, rx in _TYPES:
        if rx.search(request):
            return name
    return "question" if _QUESTION.search(request) else "request"


def merge_lists(old: Sequence[str], new: Sequence[str]) -> tuple[str, ...]:
    """``old`` then ``new``, each item once (case- and whitespace-insensitively), the
    newest :data:`MAX_LIST` kept."""
    seen: dict[str, str] = {}
    for item in [*old, *new]:
        key = " ".join(item.casefold().split())
        if key and key not in seen:
            seen[key] = item
    return tuple(seen.values())[-MAX_LIST:]


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _tool_error(msg: Message) -> str | None:
    """The error a tool result reports: ``{"error": …}`` (as the turn loop and the lossless
    tools answer a failure), else its first line that reads like an error."""
    text = message_text(msg)
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("error"), str) and data["error"].strip():
        return _clip(data["error"], rules.MAX_SENTENCE_CHARS)
    for line in text.splitlines():
        if rules._ERROR.search(line):
            return _clip(line, rules.MAX_SENTENCE_CHARS)
    return None


def _same(text: str) -> str:
    return " ".join(text.split()).casefold()


def draft(messages: Sequence[Message], status: str) -> TaskDraft | None:
    """The extractive draft of a task from its messages. None when there are none, or when
    the user only stated facts, preferences or decisions (each a record of its own through
    distillation) and nothing else happened worth a task record: no request, no error, no
    decision or fix but the user's own."""
    msgs = [m for m in messages if m.role != "system"]
    if not msgs:
        return None
    found = rules.extract(msgs)
    # a user message that is one stated fact or preference is not the task's request: the
    # rules keep it as that fact, and the request as well would store it twice
    stated = {_same(c.content) for c in found if c.kind in ("fact", "preference")}
    users = [m for m in msgs if m.role == "user" and message_text(m).strip()]
    asks = [m for m in users if _same(message_text(m)) not in stated]
    request = _clip(message_text(asks[0]), _REQUEST_CHARS) if asks else ""
    replies = [m for m in msgs if m.role == "assistant" and isinstance(m.content, str) and m.content.strip()]
    errors = [e for e in (_tool_error(m) for m in msgs if m.role == "tool") if e]
    lessons = [c for c in found if c.metadata.get("category") in ("decision", "fix", "error_fix", "remember")]
    patterns = [c.content for c in lessons]
    # what the user stated (a decision, "remember that …") is already its own record: only
    # a lesson from the rest of the task makes one worth a record when nothing was asked
    said = {m.id for m in users}
    learned = any(not set(c.source_message_ids) <= said for c in lessons)
    if users and not asks and not errors and not learned:
        return None
    opening = msgs[0] if not users else None  # no user message at all: what began the task
    return TaskDraft(
        task_type=task_type(request) if request else "request",
        request=request or (_clip(message_text(opening), _REQUEST_CHARS) if opening else "")
        or f"task of {len(msgs)} messages",
        status=status, result=_clip(str(replies[-1].content), _RESULT_CHARS) if replies else None,
        patterns=merge_lists([], patterns), errors=merge_lists([], errors),
        source_message_ids=tuple(m.id for m in ([asks[0]] if asks else []) + ([replies[-1]] if replies else [])),
        created_at=msgs[0].created_at, first_seq=msgs[0].seq, last_seq=msgs[-1].seq,
    )


def _strings(value: object) -> list[str]:
    if not isinstance(value, list):
        return []
    return [_clip(v, rules.MAX_SENTENCE_CHARS) for v in value if isinstance(v, str) and v.strip()]


def _label(value: object) -> str | None:
    if not isinstance(value, str):
        return None
    label = re.sub(r"[^\w]+", "_", value.strip().casefold()).strip("_")
    return label[:40] or None


def parse_task_answer(text: str, base: TaskDraft) -> TaskDraft | None:
    """``base`` with what an LLM's JSON object adds (None when it holds no object)."""
    stripped = text.strip().strip("`")
    start, end = stripped.find("{"), stripped.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        data = json.loads(stripped[start : end + 1])
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    status = data.get("status")
    # a write before the task ended (the flush) stays in_progress, whatever the model says
    if base.status == "in_progress" or status not in TASK_STATUSES or status in ("pending", "in_progress"):
        status = base.status
    result = data.get("result")
    return replace(
        base, task_type=_label(data.get("task_type")) or base.task_type, status=status,
        result=_clip(result, _RESULT_CHARS) if isinstance(result, str) and result.strip() else base.result,
        patterns=merge_lists(base.patterns, _strings(data.get("patterns"))),
        errors=merge_lists(base.errors, _strings(data.get("errors"))), extracted="llm",
    )


def llm_draft(messages: Sequence[Message], base: TaskDraft, summarizer: Summarizer, counter: TokenCounter,
              conversation_id: str = "") -> TaskDraft:
    """``base`` filled in by ``summarizer`` (see the module docstring); ``base`` itself when
    the summarizer fails or answers nothing usable."""
    text = rules.ask(summarizer, TASK_INSTRUCTION, messages, 600, counter, conversation_id, "describing a task")
    if text is None:
        return base
    found = parse_task_answer(text, base)
    if found is None:
        log.info("lossless: %s gave no JSON object for the task; using the rules", summarizer.name)
        return base
    return found
