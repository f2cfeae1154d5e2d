"""Hand-written text for the demo conversation (see :mod:`lossless.demo.conversation`).

Original content written for this project. Each scene is a small script:

* ``%%% day=N at=HH:MM [opt=P]`` starts a scene on day ``N`` (0 = the first Monday) at about
  ``HH:MM`` UTC; ``opt`` is the probability that an optional scene is included.
* ``%% maya`` / ``%% liwei`` / ``%% hana`` start a user message from that person,
  ``%% ai`` an assistant message, ``%% ack`` a short acknowledgement from Maya,
  ``%% gap M`` a pause of about ``M`` minutes.
* ``%% call NAME {json}`` is a tool call (consecutive calls share one assistant message; an
  ``%% ai`` block right before them becomes that message's text) and ``%% result`` the
  tool's answer, one per call, in order.

In the text, ``<<key>>`` is a seed-drawn detail and ``{{a|b|c}}`` picks one variant.

The scenes are package data (``scenes/*.txt``), not Python: this module reads them once. The
Chinese story (:mod:`lossless.demo.zh`) has the same format in ``scenes/zh/``, with its own
speakers (``%% lin``, ``%% su``, ``%% chen``; ``%% ack`` is 林远's).
"""

from __future__ import annotations

from functools import cache
from importlib import resources

__all__ = ["ACKS", "EXTRA", "EXTRA2", "ROUTINES_EARLY", "ROUTINES_LATE", "SYSTEM_PROMPT",
           "WEEK1", "WEEK2", "WEEK3", "scene"]


@cache
def scene(name: str) -> str:
    """The text of ``scenes/<name>.txt`` exactly as written (UTF-8, no newline translation).
    Another language's scenes are in a folder of their own: ``scene("zh/week1")``."""
    *folders, stem = name.split("/")
    path = resources.files("lossless.demo").joinpath("scenes", *folders, f"{stem}.txt")
    return path.read_bytes().decode("utf-8")


SYSTEM_PROMPT = scene("system_prompt")
ACKS: tuple[str, ...] = tuple(scene("acks").splitlines())
WEEK1 = scene("week1")
WEEK2 = scene("week2")
WEEK3 = scene("week3")
ROUTINES_EARLY = scene("routines_early")
ROUTINES_LATE = scene("routines_late")
EXTRA = scene("extra")
EXTRA2 = scene("extra2")
