"""Nothing embedded twice (issue 29 item 3): what the model reads when a chat is imported
again, and how often one assembly embeds its question.

* ``import``: a chat of short casual turns (``bench/chitchat.py``, its first ``--turns``
  messages) written as an OpenAI JSONL file without external ids, imported with
  ``lossless.importers.import_file`` into a fresh SQLite file opened with the default
  embedder, then ``wait_idle()`` (compaction + every unit embedded); then the same file
  again into the same store (stored a second time: no external ids), and once more into
  a conversation of its own. For each: the texts the model was given (a counting wrapper
  around the embedder passed as ``embedder=``) and the wall time.
* ``cli``: the same through the real command, ``lossless import FILE`` twice into a new
  file (the catch-up runs in the foreground); the texts embedded are read as the rows the
  embedding cache gained (only new vectors are written to it).
* ``assemble``: one store with the chat, a long-term memory in its user's scope and an
  indexed file; per assembly, the texts the model was given, for a question the memory
  search reads, one that names a document without a path ("the API doc I shared"), and
  the first question asked again, and the assembly's wall time (one call each: noisy).

Run it on an earlier commit for the "before" column (``git archive <commit> src | tar -x
-C /tmp/before`` then ``PYTHONPATH=/tmp/before/src python3 bench/bench_embed_once.py``).

    python3 bench/bench_embed_once.py [--turns 419] [--json] [--no-cli]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import chitchat

import lossless
from lossless.importers import import_file


class Counting:
    """The embedder as it is (same provider, model, languages and vectors), counting the
    texts it is given."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.provider: str = inner.provider
        self.model: str = inner.model
        self.languages: Any = getattr(inner, "languages", "any")
        self.texts: list[str] = []

    @property
    def dim(self) -> int:
        return int(self.inner.dim)

    def warm(self) -> None:
        self.inner.warm()

    def warming(self) -> bool:
        return bool(self.inner.warming())

    def embed(self, texts: Sequence[str]) -> Any:
        self.texts.extend(texts)
        return self.inner.embed(texts)


def write_chat(path: Path, turns: int) -> None:
    with path.open("w", encoding="utf-8") as f:
        for row in chitchat.turn_rows(turns):
            f.write(json.dumps({"conversation": "chat", **row, "created_at": row["created_at"].isoformat()},
                               ensure_ascii=False) + "\n")


def default_embedder() -> Any:
    from lossless.embed.local import LocalEmbedder, local_embedder_available

    if not local_embedder_available():
        raise SystemExit("no default embedder: install the embeddings extra")
    e = LocalEmbedder()
    e.embed(["warm-up"])  # the model is loaded before any clock starts
    return e


def import_runs(folder: Path, chat: Path, embedder: Any) -> list[dict[str, Any]]:
    emb = Counting(embedder)
    out: list[dict[str, Any]] = []
    with lossless.open(str(folder / "import.db"), embedder=emb) as mem:
        for name, conversation in (("first", None), ("again", None), ("again, new conversation", "again")):
            before = len(emb.texts)
            t0 = time.perf_counter()
            report = import_file(mem, chat, conversation=conversation)
            if not mem.wait_idle(timeout=1800):
                raise SystemExit(f"{name}: wait_idle timed out or failed")
            out.append({"run": name, "stored": sum(report.added.values()), "texts_embedded": len(emb.texts) - before,
                        "seconds": round(time.perf_counter() - t0, 2)})
    return out


def cli_runs(folder: Path, chat: Path) -> list[dict[str, Any]]:
    db = folder / "cli.db"
    out: list[dict[str, Any]] = []
    env = {**os.environ, "LOSSLESS_EMBEDDER": "local"}
    for name in ("first", "again"):
        cached = _cache_rows(db)
        t0 = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "lossless", "--db", str(db), "import", str(chat)],
                              capture_output=True, text=True, env=env, check=False)
        seconds = time.perf_counter() - t0
        if done.returncode != 0:
            raise SystemExit(f"lossless import failed: {done.stderr.strip()}")
        out.append({"run": name, "texts_embedded": _cache_rows(db) - cached, "seconds": round(seconds, 2)})
    return out


def _cache_rows(db: Path) -> int:
    if not db.exists():
        return 0
    with sqlite3.connect(db) as conn:
        return int(conn.execute("SELECT count(*) FROM embedding_cache").fetchone()[0])


QUESTIONS = (("memory in scope", "What does Ann's sister do for work?"),
             ("names a document", "How does auth work in the API doc I shared?"),
             ("asked again", "What does Ann's sister do for work?"))


def assemble_runs(folder: Path, chat: Path, embedder: Any) -> list[dict[str, Any]]:
    emb = Counting(embedder)
    doc = folder / "api.md"
    doc.write_text("# API doc\n\nThe endpoint /v1/items returns items. Auth uses a bearer token.\n" * 20)
    out: list[dict[str, Any]] = []
    with lossless.open(str(folder / "assemble.db"), embedder=emb) as mem:
        mem.memories.add("Ann's sister is a nurse in Porto", user="u1")
        mem.files.index([doc])
        mem.conversation("c", metadata={"user": "u1"})  # the memory's scope
        import_file(mem, chat, conversation="c")
        if not mem.wait_idle(timeout=1800):
            raise SystemExit("assemble: wait_idle timed out or failed")
        conv = mem.conversation("c")
        for name, question in QUESTIONS:
            before = len(emb.texts)
            t0 = time.perf_counter()
            conv.assemble(budget_tokens=4096, query=question)
            ms = (time.perf_counter() - t0) * 1000
            given = emb.texts[before:]
            out.append({"question": name, "texts_embedded": len(given), "question_embedded": given.count(question),
                        "ms": round(ms, 1)})
    return out


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--turns", type=int, default=419)
    ap.add_argument("--no-cli", action="store_true", help="leave out the `lossless import` runs")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    embedder = default_embedder()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        chat = folder / "chat.jsonl"
        write_chat(chat, args.turns)
        result: dict[str, Any] = {"lossless": lossless.__file__, "turns": args.turns,
                                  "import": import_runs(folder, chat, embedder),
                                  "assemble": assemble_runs(folder, chat, embedder)}
        if not args.no_cli:
            result["cli"] = cli_runs(folder, chat)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"lossless from {result['lossless']}; a chat of {args.turns} turns")
    for r in result["import"]:
        print(f"  import_file, {r['run']:<24} stored {r['stored']:>4}  embedded {r['texts_embedded']:>4} texts"
              f"  {r['seconds']:>6.2f} s")
    for r in result.get("cli", []):
        print(f"  lossless import, {r['run']:<19} embedded {r['texts_embedded']:>4} texts  {r['seconds']:>6.2f} s")
    for r in result["assemble"]:
        print(f"  assemble, {r['question']:<18} {r['texts_embedded']} texts embedded "
              f"({r['question_embedded']} of them the question), {r['ms']:.1f} ms")


if __name__ == "__main__":
    main()
