"""The demo conversations: about three weeks of a team and its assistant, drawn from a seed,
in English or in Chinese (``lang="zh"``).

The prose lives in ``scenes/*.txt`` and ``scenes/zh/*.txt`` (package data, read through
:mod:`importlib.resources`); :mod:`lossless.demo.conversation` turns it into messages and
questions, with :mod:`lossless.demo.script` playing the scenes.
"""

from lossless.demo.conversation import LANGUAGES, DemoQuestion, demo_conversation, demo_questions

__all__ = ["LANGUAGES", "DemoQuestion", "demo_conversation", "demo_questions"]
