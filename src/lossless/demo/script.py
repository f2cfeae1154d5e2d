"""The machinery that turns a demo story's hand-written scenes into timed chat messages.

A story (the English one in :mod:`lossless.demo.conversation`, the Chinese one in
:mod:`lossless.demo.zh`) supplies its scenes, its cast and the details drawn from a seed; this
module knows no story. It parses the scene scripts (their format: :mod:`lossless.demo.text`),
draws the optional scenes and the morning check-ins, and plays them with one seeded
``random.Random``: the same story and seed always give the same messages.
"""

from __future__ import annotations

import json
import random
import re
import string
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

__all__ = ["Block", "Cast", "DemoQuestion", "Details", "Scene", "Story", "build", "ids", "parse", "render"]


@dataclass(frozen=True, slots=True)
class DemoQuestion:
    """A question about the demo conversation, its answer, and where the answer is stated.

    ``evidence`` is a short verbatim substring of the one message that states the answer.
    ``keyword`` is the word the demo searches for; empty, it is taken from the words the
    question shares with the evidence (which needs spaces between words: Chinese sets it).
    """

    question: str
    answer: str
    evidence: str
    keyword: str = ""


@dataclass(frozen=True, slots=True)
class Details:
    """Every seed-drawn fact of a story, as the strings its text substitutes for ``<<key>>``."""

    values: dict[str, str]
    start: date  # the first day (day 0), a Monday
    utc_offset: int  # hours: the scenes' clock times are local
    flow_seed: int  # seeds the rng that plays the scenes


@dataclass(frozen=True, slots=True)
class Block:
    kind: str
    arg: str
    body: str


@dataclass(frozen=True, slots=True)
class Scene:
    day: int
    minute: int
    optional: float
    blocks: tuple[Block, ...]
    days: tuple[int, ...] = ()  # for routines: the days it may be played on
    routine: bool = False


@dataclass(frozen=True, slots=True)
class Cast:
    """Who speaks: each ``%% kind`` block's (role, name), and the lead, who says the acks."""

    speakers: Mapping[str, tuple[str, str]]
    lead: str
    acks: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Story:
    """One language's demo: its cast, system prompt and scenes, and when check-ins happen."""

    cast: Cast
    system_prompt: str
    scenes: tuple[Scene, ...]  # in time order
    early_routines: tuple[Scene, ...]
    late_routines: tuple[Scene, ...]
    early_days: tuple[int, ...]
    late_days: tuple[int, ...]
    # the details that differ per check-in (run ids, today's date, spend), drawn as it is played
    routine_values: Callable[[random.Random, Details, int], dict[str, str]]


_ALNUM = string.ascii_letters + string.digits


def ids(rng: random.Random, prefix: str, n: int, alphabet: str = "0123456789ABCDEFGHJKMNPQRSTVWXYZ") -> str:
    """``prefix`` and ``n`` characters drawn from ``alphabet``."""
    return prefix + "".join(rng.choice(alphabet) for _ in range(n))


# --------------------------------------------------------------------------- script parsing

def parse(text: str) -> tuple[Scene, ...]:
    """The scenes of a script, in the order written."""
    scenes: list[Scene] = []
    for chunk in text.split("\n%%% ")[1:]:
        header, _, rest = chunk.partition("\n")
        attrs = dict(item.split("=", 1) for item in header.split() if "=" in item)
        hh, mm = attrs.get("at", "08:00").split(":")
        blocks = []
        for part in ("\n" + rest).split("\n%% ")[1:]:
            head, _, body = part.partition("\n")
            kind, _, arg = head.strip().partition(" ")
            blocks.append(Block(kind, arg.strip(), body.strip("\n")))
        days = tuple(int(d) for d in attrs["days"].split(",")) if "days" in attrs else ()
        scenes.append(Scene(int(attrs.get("day", -1)), int(hh) * 60 + int(mm),
                            float(attrs.get("opt", 1)), tuple(blocks), days))
    return tuple(scenes)


_CHOICE = re.compile(r"\{\{([^{}]*\|[^{}]*)\}\}")
_FIELD = re.compile(r"<<([a-z_0-9]+)>>")


def render(text: str, values: dict[str, str], rng: random.Random) -> str:
    """``text`` with each ``{{a|b}}`` drawn and each ``<<key>>`` replaced by its detail."""
    text = _CHOICE.sub(lambda m: rng.choice(m.group(1).split("|")), text)

    def field(m: re.Match[str]) -> str:
        try:
            return values[m.group(1)]
        except KeyError:
            raise KeyError(f"demo text uses unknown detail <<{m.group(1)}>>") from None

    return _FIELD.sub(field, text)


# --------------------------------------------------------------------------- building

class _Builder:
    def __init__(self, rng: random.Random, day0: datetime) -> None:
        self.rng = rng
        self.day0 = day0
        self.now = day0
        self.messages: list[dict[str, Any]] = []

    def start_scene(self, day: int, minute: int) -> None:
        nominal = self.day0 + timedelta(days=day, minutes=minute + self.rng.randint(-12, 12))
        self.now = max(nominal, self.now + timedelta(minutes=self.rng.randint(3, 9)))

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=max(1, round(seconds)))

    def add(self, role: str, content: str, **extra: Any) -> dict[str, Any]:
        msg: dict[str, Any] = {"role": role, "content": content}
        msg.update(extra)
        msg["created_at"] = self.now
        self.messages.append(msg)
        return msg

    def call_id(self) -> str:
        return "call_" + "".join(self.rng.choice(_ALNUM) for _ in range(24))


def _typing_seconds(rng: random.Random, text: str, read: str, first: bool) -> float:
    """How long a person takes to read the last message and type ``text``."""
    if first:
        return 0
    return rng.uniform(20, 150) + min(len(read) / 30, 420) + min(len(text) / 14, 240)


def _play(b: _Builder, scene: Scene, values: dict[str, str], cast: Cast) -> None:
    rng = b.rng
    blocks = list(scene.blocks)
    first = True
    last_user = ""
    lead_role, lead_name = cast.speakers[cast.lead]
    i = 0
    while i < len(blocks):
        blk = blocks[i]
        if blk.kind in cast.speakers or blk.kind == "ack":
            text = rng.choice(cast.acks) if blk.kind == "ack" else render(blk.body, values, rng)
            role, name = cast.speakers.get(blk.kind, (lead_role, lead_name))
            b.advance(_typing_seconds(rng, text, b.messages[-1]["content"], first))
            b.add(role, text, name=name)
            last_user = name
        elif blk.kind == "gap":
            b.advance(60 * float(blk.arg) * rng.uniform(0.8, 1.25))
        elif blk.kind in ("ai", "call"):
            text = ""
            if blk.kind == "ai":
                text = render(blk.body, values, rng)
                if i + 1 >= len(blocks) or blocks[i + 1].kind != "call":
                    b.advance(rng.uniform(4, 18) + len(text) / 110)
                    b.add("assistant", text)
                    i += 1
                    first = False
                    continue
                i += 1
            calls: list[dict[str, Any]] = []
            while i < len(blocks) and blocks[i].kind == "call":
                fname, _, args = blocks[i].arg.partition(" ")
                arguments = json.dumps(json.loads(render(args, values, rng)), ensure_ascii=False)
                calls.append({"id": b.call_id(), "type": "function",
                              "function": {"name": fname, "arguments": arguments}})
                i += 1
            b.advance(rng.uniform(3, 12) + len(text) / 110)
            b.add("assistant", text, tool_calls=calls)
            for call in calls:
                res = blocks[i]
                if res.kind != "result":
                    raise ValueError(f"tool call without result in scene on day {scene.day}")
                b.advance(float(render(res.arg, values, rng)) if res.arg else rng.uniform(0.4, 6))
                b.add("tool", render(res.body, values, rng), tool_call_id=call["id"],
                      name=call["function"]["name"])
                i += 1
            first = False
            continue
        else:
            raise ValueError(f"unknown block kind {blk.kind!r} in scene on day {scene.day}")
        first = False
        i += 1
    last = b.messages[-1]
    if last["role"] == "assistant" and not last.get("tool_calls") and last_user == lead_name and rng.random() < 0.3:
        b.advance(rng.uniform(20, 120))
        b.add(lead_role, rng.choice(cast.acks), name=lead_name)


def _schedule(rng: random.Random, story: Story) -> list[Scene]:
    """The story's scenes (optional ones drawn) plus a morning check-in on most working days."""
    chosen = [sc for sc in story.scenes if sc.optional >= 1 or rng.random() < sc.optional]
    for days, pool in ((story.early_days, list(story.early_routines)), (story.late_days, list(story.late_routines))):
        for day in days:
            fits = [r for r in pool if day in r.days]
            if fits and rng.random() < 0.85:
                routine = rng.choice(fits)
                pool.remove(routine)
                chosen.append(Scene(day, 8 * 60 + rng.randint(0, 20), 1.0, routine.blocks, routine=True))
    chosen.sort(key=lambda sc: (sc.day, sc.minute))
    return chosen


def build(story: Story, det: Details) -> list[dict[str, Any]]:
    """The messages of ``story`` with the details ``det``: each has ``role``, ``content``,
    ``created_at`` (UTC, non-decreasing) and, where it applies, ``name``, ``tool_calls``
    (OpenAI shape) or ``tool_call_id``."""
    rng = random.Random(det.flow_seed)
    day0 = datetime(det.start.year, det.start.month, det.start.day, tzinfo=UTC) - timedelta(hours=det.utc_offset)
    b = _Builder(rng, day0)
    b.start_scene(0, 8 * 60 + 40)
    b.add("system", render(story.system_prompt, det.values, rng))
    for scene in _schedule(rng, story):
        b.start_scene(scene.day, scene.minute)
        values = det.values
        if scene.routine:
            values = {**det.values, **story.routine_values(rng, det, scene.day)}
        _play(b, scene, values, story.cast)
    return b.messages
