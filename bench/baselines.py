"""Retrieval baselines for the retention benchmark, independent of lossless's own search.

Each ranks the chat's whole messages for a question; ``pack`` then adds them in rank
order while they fit the budget (one that does not fit is skipped) and shows them in time
order, as the other ranked baselines of ``bench/retention.py`` do.

  bm25    Okapi BM25 (k1 = 1.2, b = 0.75) over whole messages. Tokenizer: lower-case, then
          runs of letters/digits (``\\w+``, so ``caroline's`` → ``caroline``, ``s`` and
          ``5km`` stays one token); a run of CJK characters (kana, ideographs, hangul) inside
          one is cut out and becomes its overlapping character bigrams (``去了人民公园`` →
          ``去了 了人 人民 民公 公园``; a lone character stays itself), so a two-character
          Chinese word matches wherever it occurs; stopwords are kept (BM25's idf already
          weighs them down). IDF is the Lucene form ``ln(1 + (N - df + 0.5) / (df + 0.5))``,
          never negative.
  vector  cosine similarity between the question's embedding and each whole message's,
          from the same embedder lossless is given (the local MiniLM).
  hybrid  reciprocal-rank fusion of the two: ``sum 1 / (60 + rank)``, rank from 1; a
          message in only one ranking gets only that term.

A message is indexed as the text a reader sees: ``"Name: content"`` when the message
names its speaker (the generated set does, BEAM does not), else its content.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["BM25", "RRF_K", "MessageIndex", "indexed_text", "pack", "rrf", "tokenize"]

K1 = 1.2
B = 0.75
RRF_K = 60
_WORD = re.compile(r"\w+")
# the library's CJK ranges (store/fts.py): kana, CJK ideographs (+ extension A and the
# compatibility block), hangul syllables
_CJK_RUN = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+")


def tokenize(text: str) -> list[str]:
    """Lower-case ``\\w+`` words; a CJK run as its character bigrams (one character: itself)."""
    out: list[str] = []
    for word in _WORD.findall(text.lower()):
        if _CJK_RUN.search(word) is None:
            out.append(word)
            continue
        pos = 0
        for m in _CJK_RUN.finditer(word):
            if m.start() > pos:
                out.append(word[pos : m.start()])
            run = m.group()
            out.extend([run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)])
            pos = m.end()
        if pos < len(word):
            out.append(word[pos:])
    return out


def indexed_text(content: str, name: str | None) -> str:
    return f"{name}: {content}" if name else content


class BM25:
    """Okapi BM25 over a fixed list of documents (positions 0..n-1)."""

    def __init__(self, docs: Sequence[str]) -> None:
        self.n = len(docs)
        self.lengths = [0] * self.n
        self.postings: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for i, doc in enumerate(docs):
            counts = Counter(tokenize(doc))
            self.lengths[i] = sum(counts.values())
            for term, tf in counts.items():
                self.postings[term].append((i, tf))
        self.avgdl = (sum(self.lengths) / self.n) if self.n else 0.0

    def idf(self, term: str) -> float:
        df = len(self.postings.get(term, ()))
        return math.log(1 + (self.n - df + 0.5) / (df + 0.5))

    def scores(self, query: str) -> dict[int, float]:
        out: dict[int, float] = defaultdict(float)
        for term in set(tokenize(query)):
            postings = self.postings.get(term)
            if not postings:
                continue
            idf = self.idf(term)
            for i, tf in postings:
                norm = K1 * (1 - B + B * self.lengths[i] / self.avgdl) if self.avgdl else K1
                out[i] += idf * tf * (K1 + 1) / (tf + norm)
        return out

    def rank(self, query: str) -> list[int]:
        """Positions of the documents sharing a term with the query, best first (ties:
        earlier document first, so the order is deterministic)."""
        s = self.scores(query)
        return sorted(s, key=lambda i: (-s[i], i))


def rrf(*rankings: Sequence[int], k: int = RRF_K) -> list[int]:
    """Reciprocal-rank fusion of rankings of the same positions."""
    fused: dict[int, float] = defaultdict(float)
    for ranking in rankings:
        for rank, i in enumerate(ranking, 1):
            fused[i] += 1.0 / (k + rank)
    return sorted(fused, key=lambda i: (-fused[i], i))


@dataclass
class MessageIndex:
    """BM25 and (with an embedder) message vectors over one chat's whole messages."""

    texts: list[str]
    bm25: BM25
    embedder: Any = None
    vectors: Any = None  # (n, dim) float32, rows L2-normalised
    _query_vectors: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def build(cls, texts: Sequence[str], embedder: Any = None, batch: int = 256) -> MessageIndex:
        vectors = None
        if embedder is not None and texts:
            parts = [np.asarray(embedder.embed(list(texts[i : i + batch])), dtype=np.float32)
                     for i in range(0, len(texts), batch)]
            vectors = _unit_rows(np.concatenate(parts))
        return cls(list(texts), BM25(texts), embedder, vectors)

    def rank_bm25(self, question: str) -> list[int]:
        return self.bm25.rank(question)

    def rank_vector(self, question: str) -> list[int]:
        if self.vectors is None:
            raise RuntimeError("the vector baseline needs an embedder")
        q = _unit_rows(np.asarray(self.embedder.embed([question]), dtype=np.float32))[0]
        sims = self.vectors @ q
        # stable sort on -similarity: ties keep time order
        return [int(i) for i in np.argsort(-sims, kind="stable")]

    def rank_hybrid(self, question: str) -> list[int]:
        return rrf(self.rank_bm25(question), self.rank_vector(question))


def _unit_rows(m: Any) -> Any:
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    return m / np.where(norms == 0, 1.0, norms)


def pack(ranking: Sequence[int], cost: Callable[[int], int], budget: int, start: int) -> tuple[list[int], int]:
    """Greedy packing: positions taken in rank order while ``start`` + their costs fit
    ``budget`` (one that does not fit is skipped, smaller ones after it may still go in);
    returned in position (time) order with the total."""
    picked: list[int] = []
    total = start
    for i in ranking:
        c = cost(i)
        if total + c <= budget:
            picked.append(i)
            total += c
    return sorted(picked), total
