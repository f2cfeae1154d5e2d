"""Fakes for testing code that uses lossless: deterministic, offline, and honest about
what they were asked.

* :class:`HashEmbedder`: bag-of-words vectors from word hashes, so texts that share words
  are close; no model, no network, the same vectors on every machine.
* :class:`FakeSummarizer`: answers with the outputs (or raises the exceptions) you
  :meth:`~FakeSummarizer.enqueue`, else a short digest of its input; records every request.
* :class:`ScriptedSummarizer`: answers each call by a function of the call's number and
  request, for a summarizer that misbehaves on cue.

They satisfy the :class:`~lossless.embed.base.Embedder` and
:class:`~lossless.summarize.base.Summarizer` protocols, so they plug in wherever the real
ones do: ``lossless.open(path, embedder=HashEmbedder(), summarizer=FakeSummarizer())``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from lossless.embed.base import Vectors, normalize
from lossless.embed.languages import parse_languages
from lossless.summarize.base import SummaryRequest, SummaryResult

__all__ = ["FakeSummarizer", "HashEmbedder", "ScriptedSummarizer"]

_WORD = re.compile(r"\w+")


class HashEmbedder:
    """Deterministic bag-of-words vectors: each word adds one to the coordinate its SHA-256
    picks, then rows are L2-normalised. Texts sharing words are close; a text with no words
    still gets a unit vector (a small constant in the first coordinate). Records the texts
    it embedded, so a test can tell what was embedded and what came from the cache.
    ``languages`` (default ``"any"``) is what it says it reads (``["en"]``: an English-only
    model's double, to see what a store sends it)."""

    provider = "test"
    model = "hash-64"  # a subclass that gives other vectors names another model (the cache key)
    dim = 64

    def __init__(self, dim: int | None = None, *, provider: str | None = None, model: str | None = None,
                 languages: str | Sequence[str] = "any") -> None:
        if dim is not None:
            self.dim = dim
            self.model = f"hash-{dim}"
        if model is not None:
            self.model = model
        if provider is not None:
            self.provider = provider
        self.texts: list[str] = []
        self.languages = parse_languages(languages)

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.texts.extend(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in _WORD.findall(text.lower()):
                out[i, int(hashlib.sha256(word.encode()).hexdigest()[:8], 16) % self.dim] += 1.0
            out[i, 0] += 0.01
        return normalize(out)


class FakeSummarizer:
    """A summarizer you can enqueue outputs (or exceptions) into; it records its calls.
    With nothing queued it answers with a short deterministic digest of its input."""

    name = "fake"

    def __init__(self) -> None:
        self.queue: list[str | BaseException] = []
        self.calls: list[SummaryRequest] = []

    def enqueue(self, *outputs: str | BaseException) -> None:
        self.queue.extend(outputs)

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        self.calls.append(request)
        if self.queue:
            out = self.queue.pop(0)
            if isinstance(out, BaseException):
                raise out
            return SummaryResult(out, model="fake-1")
        first, last = request.items[0].first_seq, request.items[-1].last_seq
        return SummaryResult(f"Span #{first}-#{last}: {len(request.items)} items.", model="fake-1")


class ScriptedSummarizer:
    """Answers each call by ``behave(call_number, request)`` (numbered from 1), which may
    return a :class:`~lossless.summarize.base.SummaryResult`, anything else (to test how
    a malformed answer is handled) or raise; counts its calls."""

    name = "scripted"

    def __init__(self, behave: Callable[[int, SummaryRequest], Any]) -> None:
        self.behave = behave
        self.calls = 0

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        self.calls += 1
        answer: SummaryResult = self.behave(self.calls, request)  # malformed on purpose, at times
        return answer
