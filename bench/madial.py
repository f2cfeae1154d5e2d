"""MADial-Bench (Chinese) as a retention dev set (``bench/retention.py --set madial``).

``shared/data/madial-zh`` (found as ``beam.py`` finds BEAM, or ``$LOSSLESS_MADIAL_DATA``):
171 dated memory events of two users and 160 dialogues, each with ``test-turn`` (where the
assistant should recall a memory) and ``relevant-id`` (the memories that fit, the first
the one the reference reply recalls).

How a live agent would meet it, and how it is built here:

* **The history.** Per user, one conversation of every memory event in date order (ties:
  by id): the user tells the assistant about it on its date — the event text verbatim as
  the user's message (20:00 UTC of the event's day, a minute per further event that day)
  and ``REPLY`` as the assistant's answer a minute later, a short neutral reply with no
  content of its own. That is 166–176 messages, about 5–6k tokens per user. The events
  span 2012–2024, not the ten days of the issue's hidden set, and MADial has two users.
* **The dialogue.** By default, as in the other sets (whose questions are not added to
  the conversation), the dialogue before its first test turn is only the query: every
  system sees the same history, and the user's chat carries one question per dialogue
  (``user_chat``), all answered from one store. With ``--madial-live``, each dialogue gets
  a copy of its user's history (the same store state a fresh ingest gives) to which those
  turns are appended (dated the day after the user's last event, a minute apart), as a
  live agent's conversation holds them (``dialogue_chat``). They are *live*: the baselines
  do not rank them (they are the query the caller holds), so lossless alone pays for
  showing them, which is why this is not the default.
  In both, every metric cuts the dialogue's text out of a context first, and a key phrase
  or answer word the dialogue holds is not counted: the dialogue never counts as recalled
  memory.
* **The query.** ``dialogue`` (default): the turns before the test turn, one a line, as the
  data's README suggests; ``last`` (``--madial-query last``): only the last user turn, what
  lossless's proxy and agent loop pass as the query.
* **The question.** One per dialogue, at its first test turn (so the dialogue does not yet
  hold the recall); ``ability`` is the gold memory's scene (activity, preference, emotion,
  object, other). The reference answer is the assistant's reply at the test turn.

Metrics (``retention_text``):

  memory_recall  for each relevant memory, the share of its *key phrases* present verbatim
                 in the context, averaged over the relevant memories. Key phrases: the
                 event text cut at every Chinese/Latin punctuation mark into clauses of >= 4
                 characters, without the clauses that also occur in another event of the
                 same user ("感到非常开心" is in dozens) or in the dialogue so far (the
                 caller has those already); an event left without any keeps its whole text.
  gold_recall    the same for the first relevant memory only (the one the reply recalls).
  evidence_hit / evidence_full  as for the other sets, on the relevant memories' messages
                 (sentences cut at 。！？； as well).
  answer_recall  the reference reply's content words (CJK bigrams, Latin words) that are not
                 already in the dialogue so far, found in the context.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import beam
from retention_text import clauses, content_words, normalize

__all__ = ["DEFAULT_DATA", "QUERY_MODES", "REPLY", "Dialogue", "Event", "dialogue_chat", "history_chat",
           "key_phrases", "load", "query_of", "user_chat"]

DATA_ENV = "LOSSLESS_MADIAL_DATA"
REPLY = "嗯，好的。"
QUERY_MODES = ("dialogue", "last")
EVENT_HOUR = timedelta(hours=20)
DIALOGUE_HOUR = timedelta(hours=10)
STEP = timedelta(minutes=1)
SCENES = {"活动类": "activity", "喜好类": "preference", "情绪类": "emotion", "物品类": "object", "其他类": "other"}
_TURN = re.compile(r"^<([^>]+)>\s*[:：]?\s*(.*)$", re.S)


def default_data() -> Path:
    given = os.environ.get(DATA_ENV)
    if given:
        return Path(given).expanduser()
    return beam.default_data().parent / "madial-zh"


DEFAULT_DATA = default_data()


@dataclass(frozen=True, slots=True)
class Event:
    id: int
    user: int
    day: datetime
    scene: str
    text: str


@dataclass(frozen=True, slots=True)
class Dialogue:
    id: int
    user: int
    turns: tuple[tuple[str, str], ...]  # (role, text), the data's list without <BOD>/<EOD>
    test_turn: int  # the first test turn, as an index into ``turns``
    relevant: tuple[int, ...]


def _turn(line: str) -> tuple[str, str] | None:
    m = _TURN.match(line.strip())
    if m is None or m.group(1) in ("BOD", "EOD"):
        return None
    text = m.group(2).strip().lstrip(":：").strip().strip('"“”').strip()
    return ("assistant" if m.group(1) == "Assistant" else "user", text)


def load(root: Path = DEFAULT_DATA) -> tuple[dict[int, Event], list[Dialogue]]:
    mem_path, dia_path = root / "MADial-Bench-zh-memory.json", root / "MADial-Bench-zh-dialogue.json"
    if not mem_path.is_file() or not dia_path.is_file():
        raise SystemExit(f"MADial-Bench-zh is not at {root} (set ${DATA_ENV} or pass --data)")
    events: dict[int, Event] = {}
    for line in mem_path.read_text(encoding="utf-8").splitlines():
        for key, v in json.loads(line).items() if line.strip() else ():
            day = datetime.fromisoformat(str(v["time"])).replace(tzinfo=UTC)
            events[int(key)] = Event(int(key), int(v["user-id"]), day, str(v["scene"]), str(v["event"]).strip())
    dialogues: list[Dialogue] = []
    for line in dia_path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        d = json.loads(line)
        raw = list(d["dialogue"])
        first = min(int(t) for t in d["test-turn"])
        # test-turn indexes the raw list, whose item 0 is <BOD>
        turns = [t for t in (_turn(x) for x in raw) if t is not None]
        before = sum(1 for x in raw[:first] if _turn(x) is not None)
        dialogues.append(Dialogue(int(d["id"]), int(d["user-id"]), tuple(turns), before,
                                  tuple(int(r) for r in d["relevant-id"])))
    return events, dialogues


def user_events(events: dict[int, Event], user: int) -> list[Event]:
    return sorted((e for e in events.values() if e.user == user), key=lambda e: (e.day, e.id))


def history_chat(events: dict[int, Event], user: int) -> beam.BeamChat:
    """The user's memory events as a chat: event i is message 2i (user) and 2i+1 (reply)."""
    messages: list[beam.BeamMessage] = []
    last_day: datetime | None = None
    stamp = datetime.min.replace(tzinfo=UTC)
    for n, e in enumerate(user_events(events, user)):
        stamp = e.day + EVENT_HOUR if e.day != last_day else stamp + STEP
        last_day = e.day
        messages.append(beam.BeamMessage(2 * n, "user", e.text, stamp, n + 1))
        stamp += STEP
        messages.append(beam.BeamMessage(2 * n + 1, "assistant", REPLY, stamp, n + 1))
    turns = tuple((m.id, m.id + 1) for m in messages if m.role == "user")
    return beam.BeamChat(user, tuple(messages), turns, (), topic=f"user {user}")


def key_phrases(event: Event, others: Sequence[Event], dialogue_text: str) -> tuple[str, ...]:
    """The event's clauses that no other event of the user and not the dialogue so far holds;
    its whole text when none is left."""
    kept = [c for c in clauses(event.text)
            if c not in dialogue_text and not any(c in o.text for o in others if o.id != event.id)]
    return tuple(kept) if kept else (normalize(event.text).rstrip("。！？!?."),)


def query_of(dialogue: Dialogue, mode: str) -> str:
    before = dialogue.turns[: dialogue.test_turn]
    if mode == "last":
        users = [text for role, text in before if role == "user"]
        return users[-1] if users else before[-1][1]
    return "\n".join(text for _, text in before)


def _question(events: dict[int, Event], dialogue: Dialogue, mode: str, chat: int,
              live_text: str) -> beam.BeamQuestion:
    """The dialogue's one question: evidence = the relevant events' messages; ``raw`` carries
    the key phrases, the dialogue's turns (cut out of every context) and the reference reply's
    words that the dialogue does not hold."""
    order = user_events(events, dialogue.user)
    msg_of_event = {e.id: 2 * n for n, e in enumerate(order)}
    relevant = [r for r in dialogue.relevant if r in msg_of_event]
    reply = dialogue.turns[dialogue.test_turn][1]
    gold = events[relevant[0]] if relevant else None
    return beam.BeamQuestion(
        chat=chat, ability=SCENES.get(gold.scene, "other") if gold else "other", index=dialogue.id,
        question=query_of(dialogue, mode), evidence_ids=tuple(msg_of_event[r] for r in relevant),
        reference=(reply,),
        raw={"dialogue": dialogue.id, "user": dialogue.user, "relevant": relevant,
             "phrases": [key_phrases(events[r], order, live_text) for r in relevant],
             "live": [normalize(text) for _, text in dialogue.turns[: dialogue.test_turn]],
             "answer_words": sorted(content_words([reply]) - content_words([live_text]))})


def _before(dialogue: Dialogue) -> str:
    return "\n".join(text for _, text in dialogue.turns[: dialogue.test_turn])


def user_chat(history: beam.BeamChat, events: dict[int, Event], dialogues: Sequence[Dialogue],
              mode: str = "dialogue") -> beam.BeamChat:
    """The user's history with one question per dialogue (of this user): the dialogue so
    far is only the query, as the other sets' questions are."""
    questions = tuple(_question(events, d, mode, history.number, _before(d)) for d in dialogues
                      if d.user == history.number)
    return beam.BeamChat(history.number, history.messages, history.turns, questions, topic=history.topic)


def dialogue_chat(history: beam.BeamChat, events: dict[int, Event], dialogue: Dialogue,
                  mode: str = "dialogue") -> beam.BeamChat:
    """(``--madial-live``) The history with the dialogue's turns before its test turn
    appended as the live dialogue, and its one question; numbered dialogue id + 1."""
    stamp = user_events(events, dialogue.user)[-1].day + timedelta(days=1) + DIALOGUE_HOUR
    live: list[beam.BeamMessage] = []
    for role, text in dialogue.turns[: dialogue.test_turn]:
        live.append(beam.BeamMessage(len(history.messages) + len(live), role, text, stamp, len(history.turns) + 1))
        stamp += STEP
    turns: list[tuple[int, ...]] = []
    for m in live:
        if m.role == "user" or not turns:
            turns.append((m.id,))
        else:
            turns[-1] = (*turns[-1], m.id)
    question = _question(events, dialogue, mode, dialogue.id + 1, _before(dialogue))
    return beam.BeamChat(dialogue.id + 1, (*history.messages, *live), (*history.turns, *turns), (question,),
                         topic=f"dialogue {dialogue.id} (user {dialogue.user})",
                         live=tuple(m.id for m in live))
