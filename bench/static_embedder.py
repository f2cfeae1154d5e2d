"""A static (per-token) embedder distilled from the installed model, measured as an option
for very large imports (issue 29 item 2). Not part of lossless: a measurement.

Distillation, as Model2Vec does it in its simplest form: every token of the model's
vocabulary is run through the model alone (``[CLS] token [SEP]``) and its mean-pooled
output kept as that token's vector; a text's vector is then the mean of its tokens'
vectors, normalised. No network, no training: one pass over the vocabulary (30,522
tokens for all-MiniLM-L6-v2), cached in ``--table``.

Reported: the distillation's time, embedding speed on the 419 chat turns against the
model (fp32, same run), cosine to the model's vectors, and nearest-neighbour agreement
(the share of turns whose nearest other turn is the same by both). Its retention is
``python bench/retention.py --set all --model static --embed-cache FILE``.

    python3 bench/static_embedder.py [--table /tmp/static-minilm.npy] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import chitchat

DEFAULT_TABLE = Path("/tmp/static-minilm.npy")


class StaticEmbedder:
    """Mean of per-token vectors distilled from the local model (the Embedder protocol)."""

    provider = "lossless-bench"
    model = "all-MiniLM-L6-v2-static"

    def __init__(self, table: Path = DEFAULT_TABLE) -> None:
        from lossless.embed.local import LocalEmbedder

        self._local = LocalEmbedder()
        self.languages = self._local.languages
        self.distill_seconds = 0.0
        if table.exists():
            self.table = np.load(table)
        else:
            t0 = time.perf_counter()
            self.table = distill(self._local)
            self.distill_seconds = time.perf_counter() - t0
            table.parent.mkdir(parents=True, exist_ok=True)
            np.save(table, self.table)
        self.dim = int(self.table.shape[1])
        bert = self._local._load()
        self._tokenizer = bert.tokenizer
        self._special = {bert.tokenizer.token_to_id(t) for t in ("[CLS]", "[SEP]", "[PAD]")} - {None}

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, enc in enumerate(self._tokenizer.encode_batch(list(texts))):
            ids = [t for t, m in zip(enc.ids, enc.attention_mask, strict=True) if m and t not in self._special]
            if ids:
                out[i] = self.table[ids].mean(axis=0)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(norms, 1e-12)


def distill(local: Any) -> np.ndarray:
    """Each vocabulary token's mean-pooled output, run alone through the model."""
    bert = local._load()
    vocab = bert.tokenizer.get_vocab_size()
    cls, sep = bert.tokenizer.token_to_id("[CLS]"), bert.tokenizer.token_to_id("[SEP]")
    table = np.zeros((vocab, bert.hidden), dtype=np.float32)
    from lossless.embed.bert import Encoded

    for start in range(0, vocab, 512):
        ids = np.array([[cls, t, sep] for t in range(start, min(vocab, start + 512))], dtype=np.int64)
        enc = Encoded(ids, np.ones_like(ids))
        hidden = local._run(local._session, enc) if local._session is not None else bert.forward(enc)
        table[start:start + len(ids)] = bert.pool(hidden, enc.mask)
    return table


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--table", type=Path, default=DEFAULT_TABLE)
    ap.add_argument("--turns", type=int, default=419)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    from lossless.embed.local import LocalEmbedder

    static = StaticEmbedder(args.table)
    model = LocalEmbedder()
    texts = [str(r["content"]) for r in chitchat.turn_rows(args.turns)]
    model.embed(["warm-up"])
    static.embed(["warm-up"])
    times: dict[str, list[float]] = {"model": [], "static": []}
    vectors: dict[str, np.ndarray] = {}
    for _ in range(3):
        for name, emb in (("model", model), ("static", static)):
            t0 = time.perf_counter()
            vectors[name] = emb.embed(texts)
            times[name].append(round(time.perf_counter() - t0, 3))
    cosine = (vectors["model"] * vectors["static"]).sum(axis=1)
    nearest = {}
    for name, v in vectors.items():
        sims = v @ v.T
        np.fill_diagonal(sims, -2)
        nearest[name] = sims.argmax(axis=1)
    out = {"vocabulary": int(static.table.shape[0]), "distill_seconds": round(static.distill_seconds, 1),
           "texts": len(texts), "seconds": times, "best": {k: min(v) for k, v in times.items()},
           "cosine_to_model": {"min": round(float(cosine.min()), 3), "mean": round(float(cosine.mean()), 3)},
           "same_nearest_turn": round(float((nearest["model"] == nearest["static"]).mean()), 3)}
    print(json.dumps(out, indent=2) if args.json else out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
