"""How long a chat takes to become fully searchable, against the embedding library alone.

A chat of short casual turns (``bench/chitchat.py``, its first ``--turns`` messages) is
stored with ``add_many`` into a fresh SQLite file opened with the default set-up (the
default embedder, the background worker), and ``wait_idle()`` waits until it is compacted
and every retrieval unit is embedded. Three runs alternate, ``--rounds`` times, best kept:

* ``windows``: ``recall_windows=True``: QA-pair windows are cut and embedded too (what
  every store did before issue 29 item 1);
* ``default``: the default config: the messages alone are embedded;
* ``int8``: the default config with the local model in int8 (``LocalEmbedder(quantize="int8")``);
* ``reference``: sentence-transformers (torch) embedding the turn texts once, batch 32
  (skipped when it is not importable).

Each model is loaded before its clock starts (the worker's embedder is warmed with one
text), so the runs compare the work, not the loading. Also reported: the units and the
characters the model read, by kind.

    python3 bench/bench_searchable.py [--turns 419] [--rounds 2] [--json]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import chitchat

import lossless


def read_units(path: Path) -> dict[str, dict[str, int]]:
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT kind, count(*), coalesce(sum(length(text)), 0) FROM recall_units GROUP BY kind")
        return {kind: {"units": int(n), "chars": int(chars)} for kind, n, chars in rows}


def lossless_run(folder: Path, name: str, rows: list[dict[str, Any]], windows: bool,
                 quantize: str | None = None) -> dict[str, Any]:
    from lossless.embed.local import LocalEmbedder

    path = folder / f"{name}.db"
    with lossless.open(str(path), recall_windows=windows, embedder=LocalEmbedder(quantize=quantize)) as mem:
        embedder = mem.recaller.embedder
        if embedder is None:
            raise SystemExit("no default embedder: install the embeddings extra")
        embedder.embed(["warm-up"])  # the model is loaded before the clock starts
        conv = mem.conversation("chat")
        t0 = time.perf_counter()
        conv.add_many(rows)
        if not mem.wait_idle(timeout=1800):
            raise SystemExit(f"{name}: wait_idle timed out or failed: {mem.stats().to_dict()}")
        seconds = time.perf_counter() - t0
        backlog = conv.backlog()
        owed = mem.recaller.count_unembedded()
    return {"seconds": round(seconds, 2), "units": read_units(path),
            "units_not_embedded": backlog.units_not_embedded, "owed": owed}


def reference_run(texts: list[str], model: Any) -> dict[str, Any]:
    t0 = time.perf_counter()
    model.encode(texts, batch_size=32, normalize_embeddings=True)
    return {"seconds": round(time.perf_counter() - t0, 2), "texts": len(texts),
            "chars": sum(len(t) for t in texts)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--turns", type=int, default=419)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = chitchat.turn_rows(args.turns)
    texts = [str(r["content"]) for r in rows]
    model = None
    if importlib.util.find_spec("sentence_transformers") is not None:
        from lossless.embed.local import packaged_model

        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(str(packaged_model()), device="cpu")
        model.encode(["warm-up"])
    runs: dict[str, list[dict[str, Any]]] = {"windows": [], "default": [], "int8": [], "reference": []}
    with tempfile.TemporaryDirectory(prefix="bench-searchable-") as tmp:
        for r in range(args.rounds):
            runs["windows"].append(lossless_run(Path(tmp), f"windows{r}", rows, True))
            runs["default"].append(lossless_run(Path(tmp), f"default{r}", rows, False))
            runs["int8"].append(lossless_run(Path(tmp), f"int8{r}", rows, False, "int8"))
            if model is not None:
                runs["reference"].append(reference_run(texts, model))
            if not args.json:
                print(f"round {r + 1}: " + ", ".join(f"{k} {v[-1]['seconds']} s" for k, v in runs.items() if v),
                      flush=True)
    best = {k: min(v, key=lambda x: float(x["seconds"])) for k, v in runs.items() if v}
    out: dict[str, Any] = {"turns": len(rows), "rounds": args.rounds, "cores": os.cpu_count(),
                           "load_average": os.getloadavg()[0], "best": best,
                           "all_seconds": {k: [x["seconds"] for x in v] for k, v in runs.items()}}
    if "reference" in best:
        ref = float(best["reference"]["seconds"])
        out["ratio_to_reference"] = {k: round(float(best[k]["seconds"]) / ref, 2) for k in ("windows", "default", "int8")}
    if args.json:
        print(json.dumps(out, indent=2))
        return
    for k, v in best.items():
        print(f"{k}: {v['seconds']} s  {json.dumps({x: y for x, y in v.items() if x != 'seconds'})}")
    if "ratio_to_reference" in out:
        print("against the reference: " + ", ".join(f"{k} {x}x" for k, x in out["ratio_to_reference"].items()))


if __name__ == "__main__":
    main()
