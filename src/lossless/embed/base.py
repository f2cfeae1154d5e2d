"""The Embedder plug point: texts in, unit-length float32 vectors out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from lossless.core.errors import EmbedderError

__all__ = ["Embedder", "Vectors", "Warmable", "embed_checked", "normalize"]

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
