"""The :class:`~lossless.embed.base.Embedder` contract, run over every implementation: the
fake :class:`~lossless.testing.HashEmbedder`, the local all-MiniLM-L6-v2 model from disk
(offline, as the recall tests load it) and the OpenAI-compatible client against the fake
server on 127.0.0.1.

What ``embed/base.py`` promises: ``provider``, ``model`` and ``dim`` (the first two key the
embedding cache, so the same embedder gives the same vector for the same text); ``embed``
returns one float32, L2-normalised row of ``dim`` values per text, in the order given, for
any text (empty, CJK, far past the model's limit) and for no texts at all, so
:func:`~lossless.embed.base.embed_checked` accepts it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from lossless.embed.base import Embedder, embed_checked
from lossless.testing import HashEmbedder
from tests.fake_openai import FakeOpenAIServer, fake_openai

__all__ = ["fake_openai"]  # the fixture, imported for pytest to find

TEXTS = ["The billing API moved to port 5433.", "", "数据库迁移在周五完成", "x",
         "a long message that runs far past the model's limit " * 200]


@pytest.fixture(scope="session")
def local_model() -> Iterator[Any]:
    """The local model, loaded once, offline (CI installs the embeddings extra)."""
    from lossless.embed.local import LocalEmbedder, local_embedder_available

    assert local_embedder_available(), "CI installs the embeddings extra"
    offline = os.environ.get("HF_HUB_OFFLINE")
    os.environ["HF_HUB_OFFLINE"] = "1"
    try:
        yield LocalEmbedder()
    finally:
        if offline is None:
            os.environ.pop("HF_HUB_OFFLINE", None)
        else:
            os.environ["HF_HUB_OFFLINE"] = offline


@pytest.fixture(params=["hash", pytest.param("local", marks=pytest.mark.model), "openai"])
def embedder(request: pytest.FixtureRequest) -> Iterator[Embedder]:
    kind = str(request.param)
    if kind == "hash":
        yield HashEmbedder()
    elif kind == "local":
        yield request.getfixturevalue("local_model")
    else:
        from lossless.embed.openai import OpenAIEmbedder

        server: FakeOpenAIServer = request.getfixturevalue("fake_openai")
        client = OpenAIEmbedder("fake-embed", base_url=server.base_url, api_key="k", max_retries=0, timeout=5)
        yield client
        client.close()


def _tolerance(embedder: Embedder) -> float:
    # the local model embeds short batches through ONNX Runtime and long ones through torch:
    # the same vectors, to float32 rounding
    return 1e-4 if embedder.provider not in ("test",) else 0.0


def test_it_is_an_embedder_with_a_cache_key(embedder: Embedder) -> None:
    assert isinstance(embedder, Embedder)
    assert isinstance(embedder.provider, str) and embedder.provider
    assert isinstance(embedder.model, str) and embedder.model
    assert isinstance(embedder.dim, int) and embedder.dim > 0


def test_one_unit_float32_row_per_text(embedder: Embedder) -> None:
    vectors = embedder.embed(TEXTS)
    assert isinstance(vectors, np.ndarray) and vectors.dtype == np.float32
    assert vectors.shape == (len(TEXTS), embedder.dim)
    assert np.isfinite(vectors).all()
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert embed_checked(embedder, TEXTS).shape == vectors.shape


def test_no_texts_no_rows(embedder: Embedder) -> None:
    empty = embedder.embed([])
    # the OpenAI-compatible client learns its width from its first answer and asks no
    # server about nothing, so before that its empty matrix is 0 wide (as it documents)
    assert empty.shape[0] == 0 and empty.shape[1] in (0, embedder.dim)
    assert embedder.embed([]).shape == (0, embedder.dim)  # the width known now


def test_rows_keep_the_order_of_the_texts(embedder: Embedder) -> None:
    forward = embedder.embed(TEXTS[:4])
    backward = embedder.embed(TEXTS[:4][::-1])
    one_by_one = np.vstack([embedder.embed([t]) for t in TEXTS[:4]])
    atol = _tolerance(embedder)
    assert np.allclose(forward, backward[::-1], atol=atol)
    assert np.allclose(forward, one_by_one, atol=atol)


def test_the_same_text_gets_the_same_vector(embedder: Embedder) -> None:
    """What the embedding cache relies on: (provider, model, text) names one vector."""
    twice = embedder.embed([TEXTS[0], TEXTS[2], TEXTS[0]])
    assert np.allclose(twice[0], twice[2], atol=_tolerance(embedder))
    assert np.allclose(embedder.embed([TEXTS[2]])[0], twice[1], atol=_tolerance(embedder))


def test_different_texts_get_different_vectors(embedder: Embedder) -> None:
    a, b = embedder.embed(["The billing API moved to port 5433.", "Bananas are rich in potassium."])
    assert not np.allclose(a, b, atol=1e-3)

