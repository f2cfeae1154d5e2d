"""The Embedder plug point: texts in, unit-length float32 vectors out."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from lossless.core.errors import EmbedderError

__all__ = ["Embedder", "Vectors", "Warmable", "embed_checked", "normalize", "warm_done", "warm_due", "warm_is_due"]

Vectors = npt.NDArray[np.float32]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors. ``provider`` and ``model`` key the embedding cache, so
    two embedders that would give different vectors must differ in one of them."""

    @property
    def provider(self) -> str: ...
    @property
    def model(self) -> str: ...
    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> Vectors:
        """One row per text, float32, L2-normalised. Must not reorder."""
        ...


@runtime_checkable
class Warmable(Protocol):
    """An embedder with something heavy to load before its first vector (a local model).
    ``warm()`` loads it now (the worker thread does, as it starts); ``warming()`` says
    whether another thread is loading it right now: an assembly then recalls by keywords
    rather than wait for it."""

    def warm(self) -> None: ...

    def warming(self) -> bool: ...


# embedders (by id) a worker thread will warm once its caller's writes pause: for an
# assembly meanwhile the model counts as loading (it recalls by keywords, not load it itself)
_DUE: dict[int, int] = {}
_DUE_GUARD = threading.Lock()


def warm_due(embedder: object) -> None:
    """A thread will call ``embedder.warm()`` soon (undone by :func:`warm_done`)."""
    with _DUE_GUARD:
        _DUE[id(embedder)] = _DUE.get(id(embedder), 0) + 1


def warm_done(embedder: object) -> None:
    """The thread :func:`warm_due` announced has warmed ``embedder`` (or gave up)."""
    with _DUE_GUARD:
        left = _DUE.get(id(embedder), 0) - 1
        if left > 0:
            _DUE[id(embedder)] = left
        else:
            _DUE.pop(id(embedder), None)


def warm_is_due(embedder: object) -> bool:
    """Whether a thread is about to load ``embedder`` (see :func:`warm_due`)."""
    return id(embedder) in _DUE


def embed_checked(embedder: Embedder, texts: Sequence[str]) -> Vectors:
    """``embedder.embed(texts)``, checked: one finite row of ``embedder.dim`` floats per
    text. A failure or a malformed answer (wrong shape, NaN, inf) raises
    :class:`~lossless.core.errors.EmbedderError`, so nothing broken reaches the embedding cache
    or a vector index."""
    who = f"embedder {embedder.provider}/{embedder.model}"
    try:
        vectors = np.asarray(embedder.embed(texts), dtype=np.float32)
    except Exception as exc:
        raise EmbedderError(f"{who} failed: {type(exc).__name__}: {exc}") from exc
    if vectors.shape != (len(texts), embedder.dim):
        raise EmbedderError(f"{who} returned vectors of shape {vectors.shape} for {len(texts)} texts "
                            f"of dimension {embedder.dim}")
    if not np.isfinite(vectors).all():
        raise EmbedderError(f"{who} returned NaN or infinite values")
    return vectors


def normalize(vectors: npt.ArrayLike) -> Vectors:
    arr = np.asarray(vectors, dtype=np.float32)
    if arr.ndim == 1:
        arr = arr[None, :]
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    out: Vectors = (arr / norms).astype(np.float32)
    return out
