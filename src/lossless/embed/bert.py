"""A BERT encoder without torch: the weights from ``model.safetensors``, the tokenizer from
``tokenizer.json`` (the ``tokenizers`` package), and the forward pass either in numpy or
as an ONNX graph built from the same weights with ``onnx.helper`` and run by ONNX Runtime.

XLM-RoBERTa (multilingual-e5, bge-m3, ...) is the same encoder with two differences, both
here: positions count from ``pad_token_id + 1`` and padding takes position
``pad_token_id``, and its tokenizer is a SentencePiece (Unigram) ``tokenizer.json``, which
``tokenizers`` runs as it runs WordPiece. Pooling is the mean over the tokens or the
first token (``[CLS]`` / ``<s>``), as the folder's ``1_Pooling/config.json`` says.

This is what sentence-transformers runs for all-MiniLM-L6-v2 (a ``BertModel`` followed by
mean pooling and L2 normalisation), written out: token, position and segment embeddings
and a layer norm, then per layer self-attention (masked at padding), a residual and a
layer norm, a GELU feed-forward, a residual and a layer norm. Only what the two paths
need is here; :class:`~lossless.embed.local.LocalEmbedder` puts them behind the
``Embedder`` protocol."""

from __future__ import annotations

import contextlib
import json
import logging
import math
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from lossless.core.errors import MissingDependencyError, ValidationError

__all__ = ["BertModel", "Encoded", "build_int8", "build_onnx", "cls_pool", "load_bert", "mean_pool", "smoothing"]

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]
_NEG = np.float32(-1e9)  # added to attention scores at padding: exp() of it is exactly 0


@dataclass(frozen=True)
class Encoded:
    """A padded batch: token ids, the attention mask (1 = token, 0 = padding)."""

    ids: I64
    mask: I64


@dataclass(frozen=True)
class BertModel:
    """A BERT encoder's configuration, weights (float32, by their Hugging Face names) and
    tokenizer (truncating at ``max_seq_length`` and padding to the batch's longest)."""

    folder: Path
    hidden: int
    heads: int
    layers: int
    eps: float
    max_seq_length: int
    weights: dict[str, F32]
    tokenizer: Any
    # XLM-RoBERTa: positions count from pad_id + 1 (padding sits at pad_id); None: BERT's 0, 1, ...
    position_pad: int | None = None
    pooling: str = "mean"  # or "cls": the first token's hidden state
    _transposed: dict[str, F32] = field(default_factory=dict, repr=False)

    def t(self, name: str) -> F32:
        """``weights[name].T``, contiguous (``x @ W.T`` is how a linear layer applies it),
        laid out on first use."""
        if name not in self._transposed:
            self._transposed[name] = np.ascontiguousarray(self.weights[name].T)
        return self._transposed[name]

    def encode(self, texts: list[str]) -> Encoded:
        batch = self.tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in batch], dtype=np.int64)
        mask = np.array([e.attention_mask for e in batch], dtype=np.int64)
        return Encoded(ids, mask)

    def encode_each(self, texts: list[str]) -> Encoded:
        """:meth:`encode`, one text at a time on the calling thread: ``encode_batch`` runs
        on the tokenizers library's own thread pool, whose threads took the cores from a
        query on another thread while the worker embedded (bench_assemble_catchup: 1.8-2.0x
        against 1.5-1.7x at 10k, with the same catch-up time)."""
        done = [self.tokenizer.encode(t) for t in texts]
        width = max((len(e.ids) for e in done), default=0)
        pad = int((self.tokenizer.padding or {}).get("pad_id", 0))
        ids = np.full((len(done), width), pad, dtype=np.int64)
        mask = np.zeros((len(done), width), dtype=np.int64)
        for row, e in enumerate(done):
            ids[row, :len(e.ids)] = e.ids
            mask[row, :len(e.ids)] = e.attention_mask
        return Encoded(ids, mask)

    def positions(self, ids: I64) -> I64:
        """Position ids: 0, 1, ... (BERT), or XLM-RoBERTa's, counted over the tokens that
        are not padding from ``pad + 1``, with ``pad`` at padding (transformers'
        ``create_position_ids_from_input_ids``)."""
        if self.position_pad is None:
            return np.broadcast_to(np.arange(ids.shape[1], dtype=np.int64), ids.shape)
        real = (ids != self.position_pad).astype(np.int64)
        out: I64 = np.cumsum(real, axis=1) * real + self.position_pad
        return out

    def pool(self, hidden: F32, mask: I64) -> F32:
        """The sentence vector before normalisation, as the folder's pooling says."""
        return cls_pool(hidden) if self.pooling == "cls" else mean_pool(hidden, mask)

    def forward(self, enc: Encoded, record: dict[str, F32] | None = None) -> F32:
        """The last hidden state, ``(batch, tokens, hidden)``, computed in numpy.
        ``record``: when given, each linear layer's input keeps there the largest absolute
        value seen per input channel, over real tokens (what :func:`build_int8` smooths by)."""
        with _one_blas_thread():
            return self._forward(enc, record)

    def _forward(self, enc: Encoded, record: dict[str, F32] | None = None) -> F32:
        w = self.weights
        tokens = enc.ids.shape[1]
        x = w["embeddings.word_embeddings.weight"][enc.ids]
        pos = (w["embeddings.position_embeddings.weight"][:tokens] if self.position_pad is None
               else w["embeddings.position_embeddings.weight"][self.positions(enc.ids)])
        x = x + pos + w["embeddings.token_type_embeddings.weight"][0]
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], self.eps)
        bias = ((1 - enc.mask[:, None, None, :]) * _NEG).astype(np.float32)  # (batch, 1, 1, tokens)
        real = enc.mask.astype(bool)
        for i in range(self.layers):
            x = self._layer(x, bias, f"encoder.layer.{i}.", None if record is None else (record, real))
        return x

    def _layer(self, x: F32, bias: F32, p: str, record: tuple[dict[str, F32], Any] | None = None) -> F32:
        w = self.weights
        batch, tokens, _ = x.shape
        size = self.hidden // self.heads

        def seen(name: str, value: F32) -> None:
            if record is not None:
                table, real = record
                top = np.abs(value[real]).max(axis=0) if real.any() else np.zeros(value.shape[-1], np.float32)
                table[name] = np.maximum(table[name], top) if name in table else top

        def heads(name: str) -> F32:
            y = x @ self.t(f"{p}attention.self.{name}.weight") + w[f"{p}attention.self.{name}.bias"]
            return y.reshape(batch, tokens, self.heads, size).transpose(0, 2, 1, 3)

        seen(f"{p}attention.self", x)
        q, k, v = heads("query"), heads("key"), heads("value")
        scores = (q @ k.transpose(0, 1, 3, 2)) * np.float32(1 / math.sqrt(size)) + bias
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        scores /= scores.sum(axis=-1, keepdims=True)
        ctx = (scores @ v).transpose(0, 2, 1, 3).reshape(batch, tokens, self.hidden)
        seen(f"{p}attention.output.dense", ctx)
        attn = ctx @ self.t(f"{p}attention.output.dense.weight") + w[f"{p}attention.output.dense.bias"]
        x = _layer_norm(x + attn, w[f"{p}attention.output.LayerNorm.weight"],
                        w[f"{p}attention.output.LayerNorm.bias"], self.eps)
        seen(f"{p}intermediate.dense", x)
        inner = _gelu(x @ self.t(f"{p}intermediate.dense.weight") + w[f"{p}intermediate.dense.bias"])
        out = inner @ self.t(f"{p}output.dense.weight") + w[f"{p}output.dense.bias"]
        return _layer_norm(x + out, w[f"{p}output.LayerNorm.weight"], w[f"{p}output.LayerNorm.bias"], self.eps)


_blas_lock = threading.Lock()
_blas: list[Any] = []  # threadpoolctl's controller, found once; [None] without threadpoolctl


@contextlib.contextmanager
def _one_blas_thread() -> Iterator[None]:
    """Run numpy's BLAS on one thread while a forward pass runs. The pass is many small
    products; OpenBLAS's threads spin between them and, on a machine with other work,
    one pass took 2 s instead of 40 ms. Without threadpoolctl, BLAS is left as it is."""
    with _blas_lock:
        if not _blas:
            try:
                from threadpoolctl import ThreadpoolController
            except ImportError:
                _blas.append(None)
            else:
                _blas.append(ThreadpoolController())
    if _blas[0] is None:
        yield
        return
    with _blas[0].limit(limits=1, user_api="blas"):
        yield


def mean_pool(hidden: F32, mask: I64) -> F32:
    """The mean of the hidden states over the real tokens (sentence-transformers' pooling)."""
    m = mask[..., None].astype(np.float32)
    pooled: F32 = ((hidden * m).sum(axis=1) / np.maximum(m.sum(axis=1), np.float32(1e-9))).astype(np.float32)
    return pooled


def cls_pool(hidden: F32) -> F32:
    """The first token's hidden state (sentence-transformers' ``cls`` pooling)."""
    out: F32 = np.ascontiguousarray(hidden[:, 0]).astype(np.float32)
    return out


def _layer_norm(x: F32, weight: F32, bias: F32, eps: float) -> F32:
    mean = x.mean(axis=-1, keepdims=True)
    centred = x - mean
    var = (centred * centred).mean(axis=-1, keepdims=True)
    out: F32 = centred / np.sqrt(var + np.float32(eps)) * weight + bias
    return out


def _gelu(x: F32) -> F32:
    """BERT's exact GELU, ``x·Φ(x)``, with erf from Abramowitz & Stegun 7.1.26 (absolute
    error under 1.5e-7; numpy has no erf)."""
    z = np.abs(x) * np.float32(1 / math.sqrt(2))
    t = np.float32(1) / (np.float32(1) + np.float32(0.3275911) * z)
    poly = t * (np.float32(0.254829592) + t * (np.float32(-0.284496736) + t * (
        np.float32(1.421413741) + t * (np.float32(-1.453152027) + t * np.float32(1.061405429)))))
    erf = np.sign(x) * (np.float32(1) - poly * np.exp(-z * z))
    out: F32 = np.float32(0.5) * x * (np.float32(1) + erf)
    return out


# -- loading ---------------------------------------------------------------------------------


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise ValidationError(f"cannot read {path}: {exc}") from exc
    return data if isinstance(data, dict) else {}


_ENCODERS = ("bert", "xlm-roberta")
_MODULES = ("Transformer", "Pooling", "Normalize")  # what this module runs (Normalize: always done)


def _pooling(folder: Path) -> str:
    """``mean`` or ``cls``, from the folder's Pooling module (mean when it has none)."""
    modules = _read_json_list(folder / "modules.json")
    for module in modules:
        kind = str(module.get("type", "")).rsplit(".", 1)[-1]
        if kind not in _MODULES:
            raise ValidationError(f"{folder} has a {kind} module after the encoder, which the torch-free "
                                  "embedder does not run; use lossless.embed.sbert.SentenceTransformerEmbedder "
                                  "(pip install 'lossless[torch]')")
    for module in modules:
        if str(module.get("type", "")).endswith("Pooling"):
            pooling = _read_json(folder / str(module.get("path", "")) / "config.json")
            on = sorted(k.removeprefix("pooling_mode_").removesuffix("_token").removesuffix("_tokens")
                        for k, v in pooling.items() if k.startswith("pooling_mode_") and v is True)
            if isinstance(pooling.get("pooling_mode"), str):
                on = [str(pooling["pooling_mode"])]
            if on not in (["mean"], ["cls"]):
                raise ValidationError(f"{folder} pools by {on}; the torch-free embedder pools by the mean "
                                      "or the first token only")
            return on[0]
    return "mean"


def _read_json_list(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValidationError(f"cannot read {path}: {exc}") from exc
    return [m for m in data if isinstance(m, dict)] if isinstance(data, list) else []


def check_sentence_model(folder: Path) -> str:
    """Raise :class:`ValidationError` unless ``folder`` holds what this module runs: a
    BERT or XLM-RoBERTa (``config.json``) followed by mean or first-token pooling, as
    sentence-transformers saves one. Returns the pooling (``mean`` or ``cls``)."""
    config = _read_json(folder / "config.json")
    kind = config.get("model_type")
    if kind not in _ENCODERS or config.get("position_embedding_type", "absolute") != "absolute" \
            or config.get("hidden_act", "gelu") != "gelu":
        raise ValidationError(
            f"{folder} is not a BERT or XLM-RoBERTa model with absolute positions and GELU (model_type={kind!r}); "
            "run other models with lossless.embed.sbert.SentenceTransformerEmbedder "
            "(pip install 'lossless[torch]')")
    for name in ("model.safetensors", "tokenizer.json"):
        if not (folder / name).is_file():
            raise ValidationError(f"{folder} has no {name}: the torch-free embedder needs the weights as "
                                  "safetensors and a fast-tokenizer tokenizer.json")
    return _pooling(folder)


def _pad_token(folder: Path, tokenizer: Any, config: dict[str, Any]) -> tuple[int, str]:
    """The id and text the tokenizer pads with: its own setting, else the folder's
    special-tokens files, else ``[PAD]`` / ``<pad>``, else the config's ``pad_token_id``."""
    padding = tokenizer.padding
    if padding and padding.get("pad_token") and tokenizer.token_to_id(padding["pad_token"]) is not None:
        return int(padding["pad_id"]), str(padding["pad_token"])
    names: list[str] = []
    for file in ("special_tokens_map.json", "tokenizer_config.json"):
        pad = _read_json(folder / file).get("pad_token")
        name = pad.get("content") if isinstance(pad, dict) else pad
        if isinstance(name, str):
            names.append(name)
    for name in (*names, "[PAD]", "<pad>"):
        found = tokenizer.token_to_id(name)
        if found is not None:
            return int(found), name
    pad_id = int(config.get("pad_token_id") or 0)
    return pad_id, str(tokenizer.id_to_token(pad_id) or "[PAD]")


def load_bert(folder: Path, max_seq_length: int | None = None) -> BertModel:
    """Load a sentence-transformers BERT or XLM-RoBERTa folder: weights, tokenizer, pooling
    and the sequence limit (``max_seq_length`` from ``sentence_bert_config.json`` unless
    given)."""
    pooling = check_sentence_model(folder)
    try:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer
    except ImportError as exc:
        raise MissingDependencyError(
            f"the local embedder needs tokenizers and safetensors: pip install 'lossless[embeddings]' ({exc})"
        ) from exc
    config = _read_json(folder / "config.json")
    roberta = config.get("model_type") == "xlm-roberta"
    position_pad = int(config.get("pad_token_id", 1)) if roberta else None
    # XLM-RoBERTa's first position is pad + 1: a 514-position table holds 512 tokens
    positions = int(config.get("max_position_embeddings", 512)) - (position_pad + 1 if position_pad is not None else 0)
    limit = int(max_seq_length or _read_json(folder / "sentence_bert_config.json").get("max_seq_length")
                or positions)
    if not 2 <= limit <= positions:
        raise ValidationError(f"max_seq_length must be between 2 and the model's {positions} positions; got {limit}")
    raw = load_file(str(folder / "model.safetensors"))
    # copy=False: float32 weights are used as read (a copy of ~90 MB cost ~0.3 s of CPU per load)
    weights = {k.removeprefix("bert.").removeprefix("roberta.").removeprefix("model."): v.astype(np.float32, copy=False)
               for k, v in raw.items() if v.dtype.kind == "f"}
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    pad_id, pad_token = _pad_token(folder, tokenizer, config)
    # sentence-transformers truncates at max_seq_length (the file says 128) and pads a
    # batch to its longest text (the file pads to a fixed 128)
    tokenizer.enable_truncation(max_length=limit)
    tokenizer.enable_padding(pad_id=pad_id, pad_token=pad_token)
    return BertModel(folder=folder, hidden=int(config["hidden_size"]), heads=int(config["num_attention_heads"]),
                     layers=int(config["num_hidden_layers"]), eps=float(config.get("layer_norm_eps", 1e-12)),
                     max_seq_length=limit, weights=weights, tokenizer=tokenizer, position_pad=position_pad,
                     pooling=pooling)


# -- the same forward pass as an ONNX graph ----------------------------------------------------


def build_onnx(model: BertModel, smooth: dict[str, F32] | None = None) -> bytes:
    """The forward pass as a serialised ONNX model (opset 17): inputs ``input_ids`` and
    ``attention_mask`` (int64, ``(batch, tokens)``), output ``last_hidden_state``.
    ``smooth``: per linear layer (by weight name), input-channel scales ``s``; the layer
    then computes ``(x / s) @ (s · W)``, the same product with the input's outlier
    channels moved into the weights (SmoothQuant), which int8 then quantizes well."""
    try:
        from onnx import TensorProto, helper, numpy_helper
    except ImportError as exc:
        raise MissingDependencyError(f"the ONNX path needs onnx: pip install onnx ({exc})") from exc
    g = _Graph(model, helper, numpy_helper, smooth or {})
    w = model.weights
    pos = g.const("pos_table", w["embeddings.position_embeddings.weight"] + w["embeddings.token_type_embeddings.weight"][0])
    word = g.node("Gather", [g.const("word", w["embeddings.word_embeddings.weight"]), "input_ids"])
    if model.position_pad is None:  # 0, 1, ..., tokens - 1
        tokens = g.node("Slice", [g.node("Shape", ["input_ids"]), g.ints("one", [1]), g.ints("two", [2])])
        ids = g.node("Range", [g.ints("zero_s", 0), g.node("Squeeze", [tokens]), g.ints("one_s", 1)])
    else:  # XLM-RoBERTa: cumsum(real) * real + pad, real = ids != pad (BertModel.positions)
        pad = g.ints("pad_id", model.position_pad)
        real = g.node("Cast", [g.node("Not", [g.node("Equal", ["input_ids", pad])])], to=TensorProto.INT64)
        ids = g.node("Add", [g.node("Mul", [g.node("CumSum", [real, g.ints("one_s", 1)]), real]), pad])
    positions = g.node("Gather", [pos, ids])
    x = g.layer_norm(g.node("Add", [word, positions]), "embeddings.LayerNorm")
    maskf = g.node("Cast", ["attention_mask"], to=TensorProto.FLOAT)
    keep = g.node("Unsqueeze", [maskf, g.ints("axes12", [1, 2])])  # (batch, 1, 1, tokens)
    bias = g.node("Mul", [g.node("Sub", [g.const("one_f", np.float32(1)), keep]), g.const("neg", _NEG)])
    for i in range(model.layers):
        x = g.encoder_layer(x, bias, f"encoder.layer.{i}.")
    g.nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"]))
    dims = ["batch", "tokens"]
    graph = helper.make_graph(
        g.nodes, "bert",
        [helper.make_tensor_value_info(n, TensorProto.INT64, dims) for n in ("input_ids", "attention_mask")],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, [*dims, model.hidden])],
        g.initializers)
    onnx_model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="lossless")
    onnx_model.ir_version = 8  # readable by every onnxruntime >= 1.11
    data: bytes = onnx_model.SerializeToString()
    return data


class _Graph:
    """Appends nodes with generated names; constants become initializers."""

    def __init__(self, model: BertModel, helper: Any, numpy_helper: Any, smooth: dict[str, F32] | None = None) -> None:
        self.model, self.helper, self.numpy_helper = model, helper, numpy_helper
        self.smooth = smooth or {}
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self._names: set[str] = set()

    def const(self, name: str, value: Any) -> str:
        if name not in self._names:
            self._names.add(name)
            self.initializers.append(self.numpy_helper.from_array(np.asarray(value), name))
        return name

    def ints(self, name: str, value: Any) -> str:
        return self.const(name, np.asarray(value, dtype=np.int64))

    def node(self, op: str, inputs: list[str], **attrs: Any) -> str:
        out = f"{op.lower()}_{len(self.nodes)}"
        self.nodes.append(self.helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def linear(self, x: str, name: str) -> str:
        w = self.model.weights
        weight = w[f"{name}.weight"].T
        scale = self.smooth.get(name)
        if scale is not None:
            x = self.node("Mul", [x, self.const(f"{name}.smooth", (np.float32(1) / scale).astype(np.float32))])
            weight = weight * scale[:, None]
        return self.node("Add", [self.node("MatMul", [x, self.const(f"{name}.weight_t", np.ascontiguousarray(weight, dtype=np.float32))]),
                                 self.const(f"{name}.bias", w[f"{name}.bias"])])

    def layer_norm(self, x: str, name: str) -> str:
        w = self.model.weights
        return self.node("LayerNormalization", [x, self.const(f"{name}.weight", w[f"{name}.weight"]),
                                                self.const(f"{name}.bias", w[f"{name}.bias"])],
                         axis=-1, epsilon=self.model.eps)

    def encoder_layer(self, x: str, bias: str, p: str) -> str:
        m = self.model
        size = m.hidden // m.heads
        split = self.ints("split_shape", [0, 0, m.heads, size])  # 0: keep that dimension
        merge = self.ints("merge_shape", [0, 0, m.hidden])

        def heads(name: str, perm: list[int]) -> str:
            return self.node("Transpose", [self.node("Reshape", [self.linear(x, f"{p}attention.self.{name}"), split])],
                             perm=perm)

        q, k, v = heads("query", [0, 2, 1, 3]), heads("key", [0, 2, 3, 1]), heads("value", [0, 2, 1, 3])
        scale = self.const("scale", np.float32(1 / math.sqrt(size)))
        scores = self.node("Add", [self.node("Mul", [self.node("MatMul", [q, k]), scale]), bias])
        ctx = self.node("MatMul", [self.node("Softmax", [scores], axis=-1), v])
        ctx = self.node("Reshape", [self.node("Transpose", [ctx], perm=[0, 2, 1, 3]), merge])
        x = self.layer_norm(self.node("Add", [x, self.linear(ctx, f"{p}attention.output.dense")]),
                            f"{p}attention.output.LayerNorm")
        inner = self.linear(x, f"{p}intermediate.dense")
        half, root2 = self.const("half", np.float32(0.5)), self.const("root2", np.float32(math.sqrt(2)))
        gelu = self.node("Mul", [self.node("Mul", [inner, half]), self.node("Add", [
            self.node("Erf", [self.node("Div", [inner, root2])]), self.const("one_f", np.float32(1))])])
        out = self.linear(gelu, f"{p}output.dense")
        return self.layer_norm(self.node("Add", [x, out]), f"{p}output.LayerNorm")


# -- int8: onnxruntime's dynamic quantization of the same weights, smoothed first -------------

#: varied texts whose activations set the smoothing scales (not the texts the tests check by)
CALIBRATION = (
    "hey, are you around this weekend?", "sure, let's grab coffee on Saturday morning",
    "The deployment failed because the database migration timed out after 30 seconds.",
    "I moved to Lisbon in March 2023 and started learning Portuguese.",
    "Can you remind me what my sister's birthday present was last year?",
    "def add(a, b):\n    return a + b", "SELECT name, count(*) FROM orders GROUP BY name;",
    "ok", "thanks!", "lol", "no worries 🙂", "🎉🎉", "...", "???", "42", "3.14159 2.71828",
    "https://docs.example.org/v2/api?key=abc", "ERROR 500: upstream connect timeout",
    "我上周去了植物园，看到了很多樱花。", "明天下午三点开会，记得带电脑。", "東京で友達に会いました",
    "서울에서 친구를 만났어요", "Je suis allé au marché ce matin.", "Ich habe heute keine Zeit.",
    "¿Dónde está la estación de tren?", "Привет! Как прошла поездка?", "مرحبا، كيف حالك؟",
    "My doctor said the knee should heal in six weeks if I keep off the volleyball court.",
    "We adopted a rescue dog named Pepper; she is scared of the vacuum cleaner.",
    "Remember: the staging server is 10.0.3.17 and the password rotates every Monday.",
    "I'm thinking of switching from Python to Rust for the parser, thoughts?",
    "the meeting notes say we agreed on a budget of $12,500 for Q3",
    "ALL HANDS MEETING MOVED TO FRIDAY", "word " * 60, "长文本" * 40,
    "She said: \"don't forget the keys\" — and then left without them.",
    "1. buy milk\n2. call mom\n3. fix the bike\n4. book flights to Osaka",
    "[user] what did I say about the garden? [assistant] you planted tomatoes in May",
)
SMOOTH_ALPHA = 0.7  # how much of an activation outlier moves into the weights (SmoothQuant's α)
INT8_MIN_COSINE = 0.99  # an int8 graph whose vectors drift further from fp32 is not used


def smoothing(model: BertModel, texts: tuple[str, ...] = CALIBRATION) -> dict[str, F32]:
    """Per-input-channel scales for the layers int8 quantizes (queries, keys, values,
    attention output, feed-forward input): ``s = a^α / w^(1-α)``, ``a`` the activation's
    largest absolute value on ``texts``, ``w`` the weight row's. The feed-forward output
    (whose GELU input has outliers smoothing cannot move) stays fp32."""
    seen: dict[str, F32] = {}
    for start in range(0, len(texts), 8):
        model.forward(model.encode(list(texts[start:start + 8])), record=seen)
    out: dict[str, F32] = {}
    for i in range(model.layers):
        for part in _QUANTIZED:
            name = f"encoder.layer.{i}.{part}"
            # queries, keys and values read the same input, recorded under their block's name
            at = name.rsplit(".", 1)[0] if ".attention.self." in name else name
            out[name] = _scale(seen[at], model.weights[f"{name}.weight"])
    return out


_QUANTIZED = ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense",
              "intermediate.dense")  # per layer: the products int8 quantizes


def _scale(activation: F32, weight: F32) -> F32:
    w = np.abs(weight).max(axis=0)  # per input channel (the weight is (out, in))
    s = np.power(np.maximum(activation, 1e-5), SMOOTH_ALPHA) / np.power(np.maximum(w, 1e-5), 1 - SMOOTH_ALPHA)
    out: F32 = np.clip(s, 1e-2, 1e3).astype(np.float32)
    return out


def build_int8(model: BertModel) -> bytes:
    """The smoothed graph (:func:`build_onnx` with :func:`smoothing`) with its weight
    products quantized to int8 by onnxruntime's dynamic quantization, per output channel;
    the feed-forward output and the attention's own products stay fp32."""
    try:
        import onnx
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError as exc:
        raise MissingDependencyError(f"int8 needs onnx and onnxruntime: pip install 'lossless[embeddings]' ({exc})") from exc
    import tempfile

    scales = smoothing(model)
    graph = onnx.load_from_string(build_onnx(model, scales))
    quantized = {f"{name}.weight_t" for name in scales}
    keep = [n.name for n in graph.graph.node if n.op_type == "MatMul" and n.input[1] not in quantized]
    quiet = _QuietQuantizer()  # its advice to pre-process goes to the root logger
    logging.getLogger().addFilter(quiet)
    with tempfile.TemporaryDirectory(prefix="lossless-int8-") as tmp:
        source, target = Path(tmp) / "fp32.onnx", Path(tmp) / "int8.onnx"
        onnx.save(graph, str(source))
        try:
            quantize_dynamic(str(source), str(target), per_channel=True, weight_type=QuantType.QInt8,
                             op_types_to_quantize=["MatMul"], nodes_to_exclude=keep)
        finally:
            logging.getLogger().removeFilter(quiet)
        return target.read_bytes()


class _QuietQuantizer(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "pre-processing before quantization" not in record.getMessage()

