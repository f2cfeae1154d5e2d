"""Loading the BEAM dev set for the benchmarks. Where it is: ``$LOSSLESS_BEAM_DATA``, else
the first ``shared/data/beam-128k`` found beside the repository or one of its parent
folders (a checkout at ``X/main`` or a worktree at ``X/wt/name`` finds ``X/shared/data``);
the benchmarks also take ``--data``. See :func:`default_data`.

A chat is ``N/chat.json``: batches → turns → messages ``{id, role, content, time_anchor?}``
(a generated set may add ``name``, the speaker, and ``created_at``, an ISO timestamp).
Its questions are ``N/probing_questions.json``: ``{ability: [question, ...]}`` where a
question may carry ``source_chat_ids`` (the ``id`` of the evidence messages) as a list, an
int, or a dict of lists/ints under sub-keys (``original_info``/``updated_info``, …).

Everything here is plain data handling, identical for every chat: no chat, question or
ability is treated specially.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

__all__ = [
    "DEFAULT_DATA",
    "BeamChat",
    "BeamMessage",
    "BeamQuestion",
    "chat_numbers",
    "default_data",
    "flatten_ids",
    "load_chat",
    "parse_anchor",
    "reference_texts",
]

DATA_ENV = "LOSSLESS_BEAM_DATA"
_SET = Path("shared") / "data" / "beam-128k"


def default_data(start: Path | None = None) -> Path:
    """The BEAM dev set folder: ``$LOSSLESS_BEAM_DATA`` when set, else the nearest
    ``shared/data/beam-128k`` in ``start``'s parent folders (default: this repository's),
    else where it would be beside the repository (a missing folder: callers check)."""
    given = os.environ.get(DATA_ENV)
    if given:
        return Path(given).expanduser()
    repo = (start or Path(__file__)).resolve().parent.parent
    for folder in (repo, *repo.parents):
        if (folder / _SET).is_dir():
            return folder / _SET
    return repo.parent / _SET


DEFAULT_DATA = default_data()

# the first message of a batch is dated at this hour of its anchor day
DAY_START = timedelta(hours=9)
# time between two consecutive messages of the chat
MESSAGE_STEP = timedelta(minutes=3)
# the date the first batch starts on when a chat carries no anchor at all
FALLBACK_START = datetime(2024, 1, 1, tzinfo=UTC)

# rubric items are written "LLM response should state: X"; the framing is not the answer
_RUBRIC_FRAME = re.compile(r"^\s*(?:the\s+)?llm\s+response\s+should\s+(?:not\s+)?[a-z ]{1,30}?:\s*", re.I)
# answer fields in order of preference (each ability uses one of them)
ANSWER_KEYS = ("answer", "ideal_answer", "ideal_response", "ideal_summary")


@dataclass(frozen=True, slots=True)
class BeamMessage:
    id: int
    role: str
    content: str
    created_at: datetime
    batch: int
    name: str | None = None  # the speaker, when the set names them (BEAM does not)


@dataclass(frozen=True, slots=True)
class BeamQuestion:
    chat: int
    ability: str
    index: int  # position inside its ability's list
    question: str
    evidence_ids: tuple[int, ...]  # flattened, de-duplicated, in order of appearance
    reference: tuple[str, ...]  # the answer text and the rubric items (framing stripped)
    raw: dict[str, Any] = field(repr=False, compare=False, default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.chat}/{self.ability}/{self.index}"


@dataclass(frozen=True, slots=True)
class BeamChat:
    number: int
    messages: tuple[BeamMessage, ...]
    turns: tuple[tuple[int, ...], ...]  # message ids per turn, in chat order
    questions: tuple[BeamQuestion, ...]
    topic: str = ""
    # ids of the live dialogue (MADial: the turns before the one being answered): in the
    # conversation, but the query's own text, so the baselines do not rank them and the
    # metrics cut them out of a context
    live: tuple[int, ...] = ()

    def by_id(self) -> dict[int, BeamMessage]:
        return {m.id: m for m in self.messages}


def chat_numbers(root: Path = DEFAULT_DATA) -> list[int]:
    """The chat folders present, in numeric order."""
    return sorted(int(p.name) for p in root.iterdir() if p.is_dir() and p.name.isdigit())


def parse_anchor(text: str) -> datetime:
    """``"March-15-2024"`` (also ``"March 15, 2024"``) → midnight UTC of that day."""
    cleaned = re.sub(r"[\s,]+", "-", text.strip())
    for fmt in ("%B-%d-%Y", "%b-%d-%Y"):
        try:
            return datetime.strptime(cleaned, fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
    raise ValueError(f"unparseable time anchor {text!r}")


def flatten_ids(value: Any) -> list[int]:
    """Every integer in ``source_chat_ids``, whatever its nesting (list, int, dict of
    either, numeric strings), in order of appearance, without duplicates."""
    out: dict[int, None] = {}

    def walk(v: Any) -> None:
        if isinstance(v, bool) or v is None:
            return
        if isinstance(v, int):
            out.setdefault(v, None)
        elif isinstance(v, str) and v.strip().isdigit():
            out.setdefault(int(v.strip()), None)
        elif isinstance(v, list | tuple):
            for x in v:
                walk(x)
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)

    walk(value)
    return list(out)


def reference_texts(q: dict[str, Any]) -> list[str]:
    """The reference an answer is judged against: the first answer field present, then
    each rubric item with its "LLM response should …:" framing removed."""
    out: list[str] = []
    for key in ANSWER_KEYS:
        val = q.get(key)
        if isinstance(val, str) and val.strip():
            out.append(val)
            break
    rubric = q.get("rubric") or []
    if isinstance(rubric, str):
        rubric = [rubric]
    for item in rubric:
        if isinstance(item, str) and item.strip():
            out.append(_RUBRIC_FRAME.sub("", item))
    return out


def _iter_messages(batches: list[dict[str, Any]]) -> Iterator[tuple[int, dict[str, Any], int]]:
    """(batch number, message, turn index) in chat order."""
    turn = 0
    for b_i, batch in enumerate(batches):
        number = int(batch.get("batch_number", b_i + 1))
        for t in batch.get("turns", []):
            msgs = t if isinstance(t, list) else [t]
            for m in msgs:
                yield number, m, turn
            turn += 1


def _batch_anchor(batch: dict[str, Any]) -> datetime | None:
    """The batch's own ``time_anchor``, else the first one carried by its messages."""
    if batch.get("time_anchor"):
        return parse_anchor(str(batch["time_anchor"]))
    for t in batch.get("turns", []):
        for m in t if isinstance(t, list) else [t]:
            if m.get("time_anchor"):
                return parse_anchor(str(m["time_anchor"]))
    return None


def assign_times(batches: list[dict[str, Any]]) -> dict[int, datetime]:
    """A timestamp per message id: each batch starts at its anchor day (09:00 UTC),
    messages advance ``MESSAGE_STEP`` each, a later anchor (of a batch or of a message)
    jumps forward, and time never goes backwards."""
    times: dict[int, datetime] = {}
    now: datetime | None = None
    for batch in batches:
        anchor = _batch_anchor(batch)
        if anchor is not None:
            start = anchor + DAY_START
            now = start if now is None else max(now + MESSAGE_STEP, start)
        first_in_batch = True
        for t in batch.get("turns", []):
            for m in t if isinstance(t, list) else [t]:
                if now is None:
                    stamp = FALLBACK_START + DAY_START
                elif first_in_batch and anchor is not None:
                    stamp = now
                else:
                    stamp = now + MESSAGE_STEP
                if m.get("time_anchor"):
                    stamp = max(stamp, parse_anchor(str(m["time_anchor"])) + DAY_START)
                now = stamp
                first_in_batch = False
                times[int(m["id"])] = stamp
    return times


def load_chat(number: int, root: Path = DEFAULT_DATA) -> BeamChat:
    folder = root / str(number)
    batches: list[dict[str, Any]] = json.loads((folder / "chat.json").read_text(encoding="utf-8"))
    times = assign_times(batches)
    messages: list[BeamMessage] = []
    turns: dict[int, list[int]] = {}
    for batch_no, m, turn in _iter_messages(batches):
        mid = int(m["id"])
        content = m.get("content")
        # a set may carry its own timestamps and speaker names (bench/chitchat.py does)
        stamp = datetime.fromisoformat(m["created_at"]) if m.get("created_at") else times[mid]
        messages.append(BeamMessage(mid, str(m["role"]), content if isinstance(content, str) else json.dumps(content),
                                    stamp, batch_no, str(m["name"]) if m.get("name") else None))
        turns.setdefault(turn, []).append(mid)
    questions: list[BeamQuestion] = []
    qpath = folder / "probing_questions.json"
    raw_q: dict[str, list[dict[str, Any]]] = json.loads(qpath.read_text(encoding="utf-8")) if qpath.exists() else {}
    for ability in sorted(raw_q):
        for i, q in enumerate(raw_q[ability]):
            questions.append(BeamQuestion(
                chat=number, ability=ability, index=i, question=str(q.get("question", "")),
                evidence_ids=tuple(flatten_ids(q.get("source_chat_ids"))),
                reference=tuple(reference_texts(q)), raw=q,
            ))
    topic = ""
    tpath = root / "topics.json"
    if tpath.exists():
        for t in json.loads(tpath.read_text(encoding="utf-8")):
            if int(t.get("id", -1)) == number:
                topic = str(t.get("title", ""))
    return BeamChat(number, tuple(messages), tuple(tuple(v) for _, v in sorted(turns.items())), tuple(questions), topic)
