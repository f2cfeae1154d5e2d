"""The embedder as the retention benchmarks use it: timed, and with a cache file, kept on
disk so a re-run does not embed the same texts again."""

from __future__ import annotations

import hashlib
import sqlite3
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["TimedEmbedder", "load_embedder"]


class TimedEmbedder:
    """Wraps an Embedder (same provider/model, same vectors) to time its work, and with
    ``cache`` set, keeps vectors in a SQLite file keyed by (provider, model, sha256(text))
    so a re-run of the benchmark does not embed the same texts again."""

    def __init__(self, inner: Any, cache: Path | None = None) -> None:
        self.inner = inner
        self.provider: str = inner.provider
        self.model: str = inner.model
        # what the model reads (lossless.embed.languages): a wrapper that did not say would
        # be taken to read everything, and the benchmark would fuse MiniLM's Chinese vectors
        self.languages: Any = getattr(inner, "languages", "any")
        self.seconds = 0.0
        self.texts = 0
        self.cache_hits = 0
        self._db: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        if cache is not None:
            cache.parent.mkdir(parents=True, exist_ok=True)
            # the library embeds queries on a worker thread (Recaller.prefetch): one
            # connection shared across threads, its use serialised by the lock
            self._db = sqlite3.connect(cache, check_same_thread=False)
            self._db.execute("CREATE TABLE IF NOT EXISTS vectors (provider TEXT, model TEXT, sha TEXT, vec BLOB, "
                             "PRIMARY KEY (provider, model, sha))")

    @property
    def dim(self) -> int:
        return int(self.inner.dim)

    def embed(self, texts: Sequence[str]) -> Any:
        with self._lock:
            return self._embed(texts)

    def _embed(self, texts: Sequence[str]) -> Any:
        t0 = time.perf_counter()
        shas = [hashlib.sha256(t.encode("utf-8")).hexdigest() for t in texts]
        found: dict[str, Any] = {}
        if self._db is not None and texts:
            for i in range(0, len(shas), 500):
                chunk = shas[i : i + 500]
                rows = self._db.execute(
                    f"SELECT sha, vec FROM vectors WHERE provider = ? AND model = ? AND sha IN ({','.join('?' * len(chunk))})",
                    [self.provider, self.model, *chunk]).fetchall()
                found.update((sha, np.frombuffer(vec, dtype=np.float32)) for sha, vec in rows)
        todo = [i for i, sha in enumerate(shas) if sha not in found]
        if todo:
            fresh = self.inner.embed([texts[i] for i in todo])
            for row, i in zip(fresh, todo, strict=True):
                found[shas[i]] = np.asarray(row, dtype=np.float32)
            if self._db is not None:
                self._db.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?, ?, ?)",
                                     [(self.provider, self.model, shas[i], found[shas[i]].tobytes()) for i in todo])
                self._db.commit()
        self.texts += len(todo)
        self.cache_hits += len(texts) - len(todo)
        self.seconds += time.perf_counter() - t0
        if not texts:
            return self.inner.embed(texts)
        return np.stack([found[sha] for sha in shas]).astype(np.float32)

    def close(self) -> None:
        if self._db is not None:
            self._db.close()


def load_embedder(cache: Path | None, model: str = "fp32") -> TimedEmbedder:
    """The local model (``fp32``, ``int8``) or the static one distilled from it
    (``static``, bench/static_embedder.py), timed and cached."""
    try:
        from lossless.embed.local import LocalEmbedder  # type: ignore[import-not-found,unused-ignore]
    except ImportError as exc:
        raise SystemExit(f"the local embedder is not available ({exc}); run with --no-vectors") from None
    local: Any
    if model == "static":
        from static_embedder import StaticEmbedder

        local = StaticEmbedder()
    else:
        local = LocalEmbedder(quantize="int8" if model == "int8" else None)
    local.embed(["warm-up"])  # load the model now, so ingest times do not include it
    return TimedEmbedder(local, cache)

