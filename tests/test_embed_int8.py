"""The local model in int8 (``LocalEmbedder(quantize="int8")``): SmoothQuant, then
onnxruntime's dynamic quantization. Its vectors stay within a cosine of 0.99 of fp32 on
texts it was not calibrated on, it refuses a graph that drifts further, its vectors keep
an index of their own, and a store recalls with it on SQLite and PostgreSQL alike."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import lossless
from lossless.core.errors import EmbedderError, ValidationError

from .backends import StoreTarget
from .test_embed_local import TEXTS

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[object, object]]:
    from lossless.embed.local import LocalEmbedder

    cache = tmp_path_factory.mktemp("onnx")
    fp32, int8 = LocalEmbedder(onnx_cache=cache), LocalEmbedder(onnx_cache=cache, quantize="int8")
    fp32.warm()
    int8.warm()
    yield fp32, int8


def test_int8_vectors_stay_within_a_cosine_of_099_of_fp32(models: tuple[object, object]) -> None:
    from lossless.embed.bert import CALIBRATION
    from lossless.embed.local import LocalEmbedder

    fp32, int8 = models
    assert isinstance(fp32, LocalEmbedder) and isinstance(int8, LocalEmbedder)
    assert int8.backend == "onnxruntime" and int8.model == "all-MiniLM-L6-v2-int8" and fp32.model == "all-MiniLM-L6-v2"
    held_out = [t for t in TEXTS if t not in CALIBRATION]  # the tests' texts, not the calibration's
    assert len(held_out) >= 50
    cosine = (fp32.embed(held_out) * int8.embed(held_out)).sum(axis=1)
    assert cosine.min() >= 0.99, [held_out[int(i)][:30] for i in np.argsort(cosine)[:3]]
    # and the nearest neighbours agree: a paraphrase still beats an unrelated text
    a, b, c = int8.embed(["The car would not start this morning.", "My automobile broke down today.",
                          "Bananas are rich in potassium."])
    assert float(a @ b) > float(a @ c) + 0.2


def test_int8_quantizes_the_products_it_says_and_no_others(models: tuple[object, object], tmp_path: Path) -> None:
    import onnx

    from lossless.embed.local import LocalEmbedder

    _, int8 = models
    assert isinstance(int8, LocalEmbedder)
    bert = int8._bert
    assert bert is not None
    graph = onnx.load(str(int8._graph_path(bert.folder, bert.max_seq_length)))
    ops = [n.op_type for n in graph.graph.node]
    quantized = sum(op in ("MatMulInteger", "DynamicQuantizeMatMul") for op in ops)
    assert quantized == 5 * bert.layers  # q, k, v, attention output, feed-forward input
    assert ops.count("MatMul") == 3 * bert.layers  # q·k, attention·v and the feed-forward output stay fp32


def test_a_graph_that_drifts_past_the_bound_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import lossless.embed.bert as bert_module
    from lossless.embed.local import LocalEmbedder

    monkeypatch.setattr(bert_module, "INT8_MIN_COSINE", 1.0001)  # no int8 graph can meet it
    emb = LocalEmbedder(onnx_cache=tmp_path, quantize="int8")
    with pytest.raises(EmbedderError, match=r"int8 graph .* drifts from fp32: cosine 0\.9\d+ < 1\.0001.*quantize=None"):
        emb.embed(["x"])
    # a store with that embedder still recalls, by keywords
    with lossless.open(str(tmp_path / "drift.db"), embedder=emb, compaction="inline") as mem:
        conv = mem.conversation("c")
        conv.add("user", "the staging password rotates every Monday")
        conv.add("assistant", "noted")
        for i in range(60):
            conv.add("user", f"filler message number {i} about the weather and what we had for lunch")
        ctx = conv.assemble(400, query="when does the staging password rotate?")
        assert "rotates every Monday" in " ".join(str(m["content"]) for m in ctx.messages)


def test_bad_quantize_arguments_say_what_was_wrong(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from lossless.embed.local import LocalEmbedder

    with pytest.raises(ValidationError, match=r"quantize must be None, 'none' or 'int8'; got 'fp16'"):
        LocalEmbedder(quantize="fp16")
    with pytest.raises(ValidationError, match=r"int8.*ONNX Runtime.*onnx=False"):
        LocalEmbedder(quantize="int8", onnx=False)
    monkeypatch.setenv("LOSSLESS_EMBEDDER_QUANTIZE", "int4")
    with pytest.raises(ValidationError, match=r"LOSSLESS_EMBEDDER_QUANTIZE must be none or int8; got 'int4'"):
        lossless.open(str(tmp_path / "bad.db"))
    assert not (tmp_path / "bad.db").exists()


def test_int8_vectors_keep_an_index_of_their_own_and_recall(store_target: StoreTarget,
                                                            monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A store embedded in fp32 owes its conversations again to an int8 embedder (never
    mixing the two in one index), and recall by meaning works with int8."""
    monkeypatch.setenv("LOSSLESS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("LOSSLESS_EMBEDDER", "local")
    monkeypatch.setenv("LOSSLESS_EMBEDDER_QUANTIZE", "none")
    store_url = store_target("int8")
    with lossless.open(store_url, compaction="inline") as mem:
        assert mem.recaller.embedder is not None and mem.recaller.embedder.model == "all-MiniLM-L6-v2"
        conv = mem.conversation("trip")
        conv.add("user", "My automobile broke down on the highway to Denver.")
        conv.add("assistant", "That sounds stressful.")
        for i in range(30):
            conv.add("user", f"filler message number {i} about the weather and lunch")
        assert conv.backlog().units_not_embedded == 0
        fp32_index = mem.recaller.index_name()
    monkeypatch.setenv("LOSSLESS_EMBEDDER_QUANTIZE", "int8")
    with lossless.open(store_url, compaction="inline") as mem:
        assert mem.recaller.embedder is not None and mem.recaller.embedder.model == "all-MiniLM-L6-v2-int8"
        assert mem.recaller.index_name() != fp32_index
        hits = mem.conversation("trip").search("car trouble on a road trip", mode="semantic", limit=3)
        assert hits and "automobile broke down" in hits[0].snippet and hits[0].matched == "vector"
        assert mem.conversation("trip").backlog().units_not_embedded == 0  # the search caught the index up

