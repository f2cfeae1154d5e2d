"""The LongMemEval-S sample as a retention dev set (``bench/retention.py --set longmemeval``).

``shared/data/longmemeval-s-smoke/longmemeval-s-smoke.yaml`` (found as ``beam.py`` finds
BEAM, or ``$LOSSLESS_LONGMEMEVAL_DATA``): 30 questions, 5 per category, each with its own
6 sessions of real user–assistant chats (most of them distractors), a ``query`` and an
``expected_answer``. Each question becomes one ``beam.BeamChat``:

* its sessions in their order, turn by turn (a turn: a user message and the replies up to
  the next user message; a session that opens with the assistant starts with a turn of its
  own); a session without turns is skipped;
* dates: the data has none. Session k is dated ``START + (k - 1)`` days at 09:00 UTC and its
  messages ``beam.MESSAGE_STEP`` (3 minutes) apart, so a session is one day and the order
  is the data's. The temporal questions ("how many days passed between …") therefore have
  no date to find: they are kept, scored on their answer words like the others;
* one question (``ability`` = the category, key = the item's id), no evidence ids (the
  sample has none): only answer_recall is measured;
* the reference is ``expected_answer`` without LongMemEval's framing: the lead-in "The user
  would prefer (responses that suggest | suggestions of | suggestions related to)", the
  sentences that say what the user would *not* want ("They may not prefer …") and those
  that give an alternative answer ("8 days (including the last day) is also acceptable").
  The rest is scored as BEAM's answers are (content words, numbers kept). A question whose
  reference is a bare small count ("3", "2") has no word a context could hold (the count
  is computed over sessions, and such a number is in almost any context): ``retention.py``
  skips it and says so (4 of the 30; "$400,000" is kept).
"""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import beam

__all__ = ["DEFAULT_DATA", "START", "clean_reference", "load"]

DATA_ENV = "LOSSLESS_LONGMEMEVAL_DATA"
FILE = Path("longmemeval-s-smoke") / "longmemeval-s-smoke.yaml"
START = datetime(2024, 1, 1, tzinfo=UTC)

_LEAD_IN = re.compile(r"^\s*the user would prefer\s+(?:responses that suggest|suggestions(?: of| related to)?)?\s*",
                      re.I)
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_NOT_WANTED = re.compile(r"^\s*they\b.*\bnot\b", re.I)
_ALTERNATIVE = re.compile(r"\bis also acceptable\b", re.I)


def default_data() -> Path:
    given = os.environ.get(DATA_ENV)
    if given:
        return Path(given).expanduser()
    return beam.default_data().parent / FILE


DEFAULT_DATA = default_data()


def clean_reference(answer: str) -> str:
    """``expected_answer`` without the preference lead-in, the "not wanted" sentences and
    the alternative answers."""
    kept = [s for s in _SENTENCE.split(_LEAD_IN.sub("", answer.strip()))
            if s and not _NOT_WANTED.search(s) and not _ALTERNATIVE.search(s)]
    return " ".join(kept)


def _chat(number: int, item: dict[str, Any]) -> beam.BeamChat:
    messages: list[beam.BeamMessage] = []
    turns: list[tuple[int, ...]] = []
    for day, session in enumerate(sorted(item["conversations"], key=lambda s: int(s["session"]))):
        stamp = START + timedelta(days=day) + beam.DAY_START
        current: list[int] = []
        for t in session.get("turns") or []:
            role, content = str(t["role"]), str(t.get("content") or "")
            if role == "user" and current:
                turns.append(tuple(current))
                current = []
            mid = len(messages)
            messages.append(beam.BeamMessage(mid, role, content, stamp, int(session["session"])))
            current.append(mid)
            stamp += beam.MESSAGE_STEP
        if current:
            turns.append(tuple(current))
    question = beam.BeamQuestion(
        chat=number, ability=str(item["category"]), index=0, question=str(item["query"]), evidence_ids=(),
        reference=(clean_reference(str(item["expected_answer"])),),
        raw={"id": item["id"], "answer_only": True, "expected_answer": item["expected_answer"]})
    return beam.BeamChat(number, tuple(messages), tuple(turns), (question,), topic=str(item["id"]))


def load(path: Path = DEFAULT_DATA, numbers: list[int] | None = None) -> list[beam.BeamChat]:
    """The sample's questions as chats numbered 1..30 in file order (``numbers``: only those)."""
    import yaml

    if not path.is_file():
        raise SystemExit(f"the LongMemEval sample is not at {path} (set ${DATA_ENV} or pass --data)")
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    items = yaml.load(path.read_text(encoding="utf-8"), Loader=loader)
    return [_chat(n, item) for n, item in enumerate(items, 1) if not numbers or n in numbers]
