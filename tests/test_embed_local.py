"""The torch-free local embedder (lossless.embed.local): the same vectors as
sentence-transformers, ONNX Runtime or numpy, loaded only when something is embedded."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lossless
from lossless.core.errors import MissingDependencyError, ValidationError

SRC = str(Path(lossless.__file__).resolve().parents[1])  # the subprocesses run this same copy

# >= 50 varied texts: short, long (past 256 tokens, so truncated), CJK, emoji, RTL, code,
# whitespace-only and empty
TEXTS: list[str] = [
    "", " ", "\n\t ", "x", "?", "ok", "42", "!!!", "...", "a",
    "The car would not start this morning.", "My automobile broke down today.",
    "Bananas are rich in potassium.", "Which port did the billing API move to?",
    "The billing API moved to port 5433 on Friday.", "Deploy key lives in vault at secret/deploy.",
    "连接池太小, 测试覆盖率 2024-03-05", "数据库迁移在周五完成", "我们明天再讨论这个问题。",
    "東京の天気は晴れです", "カタカナとひらがなの混在テキスト", "서울은 한국의 수도입니다",
    "🎉🎉🎉", "party time 🎉🥳 with friends 👩‍👩‍👧", "🙂", "👍🏽 looks good to me",
    "مرحبا بالعالم", "שלום עולם", "Привет, как дела?", "Ελληνικά γράμματα",
    "naïve café résumé façade", "Zürich Straße Ångström", "e\u0301 combining accent",
    "def f(x):\n    return x * 2\n", "SELECT id FROM messages WHERE seq > 10 ORDER BY seq;",
    "https://example.com/path?q=1&r=two#frag", "user@example.com wrote: see ticket #1234",
    "CamelCaseIdentifiersAndsnake_case_names", "ALL CAPS SHOUTING TEXT", "mIxEd CaSe TeXt",
    "   leading and trailing spaces   ", "tabs\tand\nnewlines\r\nmixed",
    "1234567890 " * 3, "the " * 40, "[CLS] [SEP] [PAD] [MASK] [UNK]",
    "a long message that runs far past the model's limit " * 60,
    "长文本测试，" * 300,
    "word " * 255, "word " * 254, "word " * 253,
    "def handler(event, context):\n    return {'status': 200, 'body': event}\n" * 40,
    "🎉 " * 400,
    " ".join(f"token{i}" for i in range(500)),
]


@pytest.fixture(scope="module")
def onnx_model(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    from lossless.embed.local import LocalEmbedder

    emb = LocalEmbedder(onnx_cache=tmp_path_factory.mktemp("onnx"))
    emb.warm()
    yield emb


@pytest.fixture(scope="module")
def numpy_model() -> object:
    from lossless.embed.local import LocalEmbedder

    return LocalEmbedder(onnx=False)


@pytest.mark.model
@pytest.mark.torch
def test_vectors_match_sentence_transformers(onnx_model: object, numpy_model: object) -> None:
    """cosine >= 0.9999 against sentence-transformers on every text, on both backends,
    long texts truncated at 256 tokens the same way."""
    from sentence_transformers import SentenceTransformer

    from lossless.embed.local import LocalEmbedder, packaged_model

    assert len(TEXTS) >= 50
    reference = SentenceTransformer(str(packaged_model()), device="cpu").encode(
        TEXTS, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
    for emb in (onnx_model, numpy_model):
        assert isinstance(emb, LocalEmbedder)
        got = emb.embed(TEXTS)
        cos = (got * reference).sum(axis=1)
        worst = int(np.argmin(cos))
        assert cos.min() >= 0.9999, f"{emb.backend}: text {worst} {TEXTS[worst][:40]!r} cosine {cos[worst]}"
    assert {onnx_model.backend, numpy_model.backend} == {"onnxruntime", "numpy"}  # type: ignore[attr-defined]


@pytest.mark.model
def test_onnx_and_numpy_agree_and_keep_the_order(onnx_model: object, numpy_model: object) -> None:
    from lossless.embed.local import LocalEmbedder

    assert isinstance(onnx_model, LocalEmbedder) and isinstance(numpy_model, LocalEmbedder)
    fast = onnx_model.embed(TEXTS)
    assert fast.shape == (len(TEXTS), 384) and fast.dtype == np.float32
    assert np.allclose(np.linalg.norm(fast, axis=1), 1.0, atol=1e-5)
    assert np.abs(fast - numpy_model.embed(TEXTS)).max() < 1e-5
    small = LocalEmbedder(batch_size=3, onnx_cache=onnx_model.onnx_cache)
    assert np.abs(small.embed(TEXTS) - fast).max() < 1e-5  # batching and padding change nothing
    car, auto, banana = fast[10], fast[11], fast[12]
    assert car @ auto > car @ banana + 0.2


@pytest.mark.model
@settings(max_examples=25)
@given(st.lists(st.text(max_size=80), min_size=1, max_size=6))
def test_a_text_embeds_the_same_alone_or_in_any_batch(onnx_model: object, texts: list[str]) -> None:
    from lossless.embed.local import LocalEmbedder

    assert isinstance(onnx_model, LocalEmbedder)
    together = onnx_model.embed(texts)
    alone = np.vstack([onnx_model.embed([t]) for t in texts])
    assert np.abs(together - alone).max() < 1e-5
    assert np.abs(onnx_model.embed(texts[::-1])[::-1] - together).max() < 1e-5


@pytest.mark.model
def test_the_onnx_graph_is_built_once_and_rebuilt_when_damaged(tmp_path: Path, numpy_model: object) -> None:
    from lossless.embed.local import LocalEmbedder

    assert isinstance(numpy_model, LocalEmbedder)
    expected = numpy_model.embed(TEXTS[10:20])
    first = LocalEmbedder(onnx_cache=tmp_path)
    assert np.abs(first.embed(TEXTS[10:20]) - expected).max() < 1e-5 and first.backend == "onnxruntime"
    graphs = list(tmp_path.glob("*.onnx"))
    assert len(graphs) == 1 and not list(tmp_path.glob(".*tmp"))
    again = LocalEmbedder(onnx_cache=tmp_path)
    again._write_graph = None  # type: ignore[assignment,method-assign]  # would fail if called
    assert np.abs(again.embed(TEXTS[10:20]) - expected).max() < 1e-5 and again.backend == "onnxruntime"
    graphs[0].write_bytes(b"not a model")
    healed = LocalEmbedder(onnx_cache=tmp_path)
    assert np.abs(healed.embed(TEXTS[10:20]) - expected).max() < 1e-5 and healed.backend == "onnxruntime"
    assert graphs[0].stat().st_size > 1_000_000


@pytest.mark.model
def test_without_onnxruntime_numpy_runs_the_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    from lossless.embed.local import LocalEmbedder

    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import fails
    emb = LocalEmbedder(onnx_cache=tmp_path)
    with caplog.at_level("INFO", logger="lossless"):
        vec = emb.embed(["Which port did the billing API move to?"])
    assert vec.shape == (1, 384) and emb.backend == "numpy"
    assert any("runs on numpy" in r.getMessage() and "onnxruntime" in r.getMessage() for r in caplog.records)
    assert not list(tmp_path.glob("*.onnx"))
    with pytest.raises(MissingDependencyError, match="onnxruntime"):
        LocalEmbedder(onnx=True, onnx_cache=tmp_path).embed(["x"])


def test_bad_arguments_say_what_was_wrong(tmp_path: Path) -> None:
    from lossless.embed.local import LocalEmbedder

    with pytest.raises(ValidationError, match=r"CPU only.*cuda.*lossless\[torch\]"):
        LocalEmbedder(device="cuda")
    with pytest.raises(ValidationError, match="batch_size must be a positive integer; got 0"):
        LocalEmbedder(batch_size=0)
    with pytest.raises(ValidationError, match="threads must be"):
        LocalEmbedder(threads=-1)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "deberta-v2"}))
    with pytest.raises(ValidationError, match=r"not a BERT or XLM-RoBERTa.*deberta-v2.*SentenceTransformerEmbedder"):
        LocalEmbedder(tmp_path).embed(["x"])
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert"}))
    with pytest.raises(ValidationError, match=r"has no model\.safetensors"):
        LocalEmbedder(tmp_path).embed(["x"])
    with pytest.raises(MissingDependencyError, match="no model folder"):
        LocalEmbedder(tmp_path / "missing").embed(["x"])


@pytest.mark.model
def test_bad_texts_and_limits_say_what_was_wrong(onnx_model: object) -> None:
    from lossless.embed.local import LocalEmbedder

    assert isinstance(onnx_model, LocalEmbedder)
    with pytest.raises(ValidationError, match=r"texts\[1\] must be a str; got int"):
        onnx_model.embed(["fine", 3])  # type: ignore[list-item]
    with pytest.raises(ValidationError, match="max_seq_length must be between 2 and the model's 512"):
        LocalEmbedder(max_seq_length=1000).embed(["x"])
    assert onnx_model.embed([]).shape == (0, 384)


def _run(code: str, **env: str) -> dict[str, object]:
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": SRC, **env}, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.model
def test_a_paraphrase_is_found_offline_without_torch(tmp_path: Path) -> None:
    """A fresh process where torch cannot be imported, offline: the default embedder is
    the local model, and semantic search finds a paraphrase."""
    result = _run(f"""
        import json, sys
        sys.modules["torch"] = None  # any import of torch fails
        sys.modules["sentence_transformers"] = None
        import lossless
        with lossless.open({str(tmp_path / "m.db")!r}, compaction="inline") as mem:
            conv = mem.conversation("c")
            conv.add(role="user", content="My automobile broke down on the motorway today.")
            conv.add(role="user", content="Bananas are rich in potassium.")
            conv.add(role="user", content="The quarterly report is due on Friday.")
            conv.index()
            hits = conv.search("the car would not start", mode="semantic", limit=1, kinds=("message",))
            print(json.dumps({{"embedder": type(mem.embedder).__name__, "top": hits[0].first_seq,
                              "backend": mem.embedder.backend}}))
    """, HF_HUB_OFFLINE="1", LOSSLESS_EMBEDDER="auto", LOSSLESS_CACHE_DIR=str(tmp_path / "cache"))
    assert result == {"embedder": "LocalEmbedder", "top": 1, "backend": "onnxruntime"}


@pytest.mark.model
def test_open_and_close_import_no_model_and_embedding_imports_no_torch(tmp_path: Path) -> None:
    """Opening and closing a Memory imports neither the tokenizer nor ONNX Runtime (nor
    torch); embedding imports them, and still no torch."""
    heavy = ("torch", "sentence_transformers", "transformers", "onnxruntime", "tokenizers", "onnx")
    result = _run(f"""
        import json, sys
        import lossless
        heavy = {heavy!r}
        with lossless.open({str(tmp_path / "m.db")!r}) as mem:
            assert type(mem.embedder).__name__ == "LocalEmbedder"
        after_close = sorted(m for m in heavy if m in sys.modules)
        with lossless.open({str(tmp_path / "m.db")!r}, compaction="inline") as mem:
            mem.conversation("c").add(role="user", content="embed me")
            mem.conversation("c").index()
        print(json.dumps({{"after_close": after_close, "after_embed": sorted(m for m in heavy if m in sys.modules)}}))
    """, LOSSLESS_EMBEDDER="auto", LOSSLESS_CACHE_DIR=str(tmp_path / "cache"))
    # onnx builds the graph the first time (the cache folder is new); later runs only read it
    assert result == {"after_close": [], "after_embed": ["onnx", "onnxruntime", "tokenizers"]}


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=512), max_size=200), st.integers(min_value=1, max_value=64))
def test_length_batches_cover_every_text_once_and_pad_little(lengths: list[int], most: int) -> None:
    from lossless.embed.local import length_batches

    lengths = sorted(lengths, reverse=True)
    batches = length_batches(np.asarray(lengths, dtype=np.int64), most)
    covered = [i for b in batches for i in range(len(lengths))[b]]
    assert covered == list(range(len(lengths)))  # in order, each once, none left out
    for b in batches:
        part = lengths[b]
        assert 1 <= len(part) <= most
        assert part[0] - part[-1] <= max(4, part[0] // 4)  # padding bounded
    # a batch ends early only at the size limit or where the next text is much shorter
    for b, nxt in itertools.pairwise(batches):
        assert b.stop - b.start == most or lengths[b.start] - lengths[nxt.start] > max(4, lengths[b.start] // 4)
