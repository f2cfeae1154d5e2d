"""The demo conversation: about three weeks of a team and its assistant, drawn from a seed.

The prose lives in ``scenes/*.txt`` (package data, read through :mod:`importlib.resources`);
:mod:`lossless.demo.conversation` turns it into messages and questions.
"""

from lossless.demo.conversation import DemoQuestion, demo_conversation, demo_questions

__all__ = ["DemoQuestion", "demo_conversation", "demo_questions"]
