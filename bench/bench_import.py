"""Import speed: messages per second for a generated OpenAI JSONL file and a Claude Code
transcript of the same conversation, each beside a reference measured in the same run.

Reference: reading the file and ``json.loads`` of every line, nothing else — the floor any
JSONL importer pays. ``import`` is ``lossless.importers.import_file`` end to end (detect,
convert, validate, batched ``add_many`` into SQLite + FTS, auto-compaction with the offline
extractive summarizer); ``store only`` is the same with ``auto_compact=False``.

Run:  python bench/bench_import.py [--messages 100000] [--window 32768] [--json]

``--conversations N`` measures instead the catch-up after importing N small conversations
(two messages each, one OpenAI JSONL file), through the real CLI: ``lossless import FILE``
(the import, then compaction and indexing of what it stored, in the foreground) beside
``lossless import --no-wait FILE`` followed by ``lossless worker --once``, the same work in
two commands, in the same run. Keyword recall (``LOSSLESS_EMBEDDER=none``, as on an install
without ``[embeddings]``) unless ``--embedder auto``.

Run:  python bench/bench_import.py --conversations 10000 [--embedder none|auto] [--json]

``--per-conversation M`` gives each conversation M messages of casual chat text (the
generated chit-chat set's turns, numbered) instead of two one-liners, ``--quantize int8``
runs the local model in int8 (``LOSSLESS_EMBEDDER_QUANTIZE``), and ``--import-only`` skips
the ``--no-wait`` + ``worker --once`` pair: a ChatGPT-sized export, 1,000 conversations of
27 messages, made searchable by ``lossless import``:

Run:  python bench/bench_import.py --conversations 1000 --per-conversation 27 --embedder auto --import-only
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
import synth

import lossless
from lossless.importers import import_file


def write_openai(path: Path, rows: list[dict[str, Any]]) -> None:
    with path.open("w", encoding="utf-8") as f:
        for i, r in enumerate(rows):
            line = {"conversation": "bench", **r, "created_at": r["created_at"].isoformat(), "external_id": f"m{i}"}
            f.write(json.dumps(line, ensure_ascii=False) + "\n")


def write_claude_code(path: Path, rows: list[dict[str, Any]]) -> None:
    session = "0b7e3f4a-1c2d-4e5f-8a9b-0c1d2e3f4a5b"
    parent: str | None = None
    with path.open("w", encoding="utf-8") as f:
        for i, r in enumerate(rows):
            me = str(uuid.UUID(int=i + 1))
            base = {"parentUuid": parent, "isSidechain": False, "userType": "external", "cwd": "/home/dev/app",
                    "sessionId": session, "version": "1.0.51", "gitBranch": "main", "uuid": me,
                    "timestamp": r["created_at"].isoformat().replace("+00:00", "Z")}
            if r["role"] == "user":
                line = {**base, "type": "user", "message": {"role": "user", "content": r["content"]}}
            elif r["role"] == "tool":
                line = {**base, "type": "user", "message": {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": r["tool_call_id"], "content": r["content"]}]}}
            elif r.get("tool_calls"):
                call = r["tool_calls"][0]
                line = {**base, "type": "assistant", "message": {
                    "id": f"msg_{i}", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                    "content": [{"type": "tool_use", "id": call["id"], "name": call["function"]["name"],
                                 "input": json.loads(call["function"]["arguments"])}]}}
            else:
                line = {**base, "type": "assistant", "message": {
                    "id": f"msg_{i}", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                    "content": [{"type": "text", "text": r["content"]}]}}
            f.write(json.dumps(line, ensure_ascii=False) + "\n")
            parent = me


def reference(path: Path) -> float:
    t0 = time.perf_counter()
    n = 0
    with path.open("rb") as f:
        for raw in f:
            json.loads(raw)
            n += 1
    return n / (time.perf_counter() - t0)


def run_import(path: Path, db: Path, window: int, compact: bool) -> dict[str, Any]:
    mem = lossless.open(db, embedder=None, context_window=window, auto_compact=compact)
    try:
        mem.counter.count("warm up the tokenizer outside the timing")
        t0 = time.perf_counter()
        report = import_file(mem, path)
        stored = time.perf_counter() - t0
        mem.wait_idle()  # and until the worker has compacted it (store only: nothing to wait for)
        seconds = time.perf_counter() - t0
        added = sum(report.added.values())
        assert not report.skipped, report.skipped[:3]
        return {"added": added, "seconds": round(seconds, 2), "msgs_per_s": round(added / seconds),
                "stored_msgs_per_s": round(added / stored),
                "summaries": sum(len(mem.conversation(c).summaries()) for c in report.added)}
    finally:
        mem.close()


def _cli(folder: Path, embedder: str, *args: str, quantize: str = "none") -> float:
    """Seconds one ``lossless`` command took (it must succeed)."""
    env = {**os.environ, "LOSSLESS_HOME": str(folder / "home"), "LOSSLESS_EMBEDDER": embedder,
           "LOSSLESS_EMBEDDER_QUANTIZE": quantize}
    env.pop("LOSSLESS_DB", None)
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "lossless", *args], capture_output=True, text=True, env=env,
                          check=False)
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"lossless {' '.join(args)} failed ({done.returncode}): {done.stderr[-2000:]}")
    return seconds


def catch_up(conversations: int, embedder: str, per_conversation: int = 2, quantize: str = "none",
             import_only: bool = False) -> dict[str, Any]:
    """``lossless import FILE`` against ``import --no-wait`` + ``worker --once`` over
    ``conversations`` conversations of ``per_conversation`` messages."""
    turns: list[str] = []
    if per_conversation != 2:
        import chitchat

        turns = [m.content for chat in chitchat.generate(conversations=2) for m in chat.messages]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        path = folder / "many.jsonl"
        n = 0
        with path.open("w", encoding="utf-8") as f:
            for i in range(conversations):
                for j in range(per_conversation):
                    role = ("user", "assistant")[j % 2]
                    content = (f"{turns[n % len(turns)]} ({n})" if turns
                               else f"message {j} of conversation {i}, about topic {i % 37}")
                    n += 1
                    f.write(json.dumps({"conversation": f"c{i}", "role": role, "external_id": f"c{i}-{j}",
                                        "content": content}) + "\n")
        foreground = _cli(folder, embedder, "--db", str(folder / "a.db"), "import", str(path), quantize=quantize)
        stored = worker = 0.0
        if not import_only:
            stored = _cli(folder, embedder, "--db", str(folder / "b.db"), "import", "--no-wait", str(path),
                          quantize=quantize)
            worker = _cli(folder, embedder, "--db", str(folder / "b.db"), "worker", "--once", quantize=quantize)
        size = sum(f.stat().st_size for f in folder.glob("a.db*"))
        with lossless.open(str(folder / "a.db"), embedder=None) as mem:
            stats = mem.stats().backlog.to_dict()
    out: dict[str, Any] = {"conversations": conversations, "messages": n, "embedder": embedder, "quantize": quantize,
                           "store_mb": round(size / 1e6, 1), "import_with_catch_up_s": round(foreground, 2),
                           "backlog_after": stats}
    if not import_only:
        out.update({"import_no_wait_s": round(stored, 2), "worker_once_s": round(worker, 2),
                    "no_wait_plus_worker_s": round(stored + worker, 2),
                    "ratio": round(foreground / (stored + worker), 2)})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--window", type=int, default=32_768)
    ap.add_argument("--conversations", type=int, nargs="*", metavar="N",
                    help="measure the catch-up after importing N conversations instead (several N: one run each)")
    ap.add_argument("--embedder", choices=("none", "auto"), default="none",
                    help="with --conversations: LOSSLESS_EMBEDDER for the commands (default: none, keyword recall)")
    ap.add_argument("--per-conversation", type=int, default=2, metavar="M",
                    help="with --conversations: messages per conversation (other than 2: casual chat text)")
    ap.add_argument("--quantize", choices=("none", "int8"), default="none",
                    help="with --conversations: LOSSLESS_EMBEDDER_QUANTIZE for the commands")
    ap.add_argument("--import-only", action="store_true",
                    help="with --conversations: only `lossless import FILE` (no --no-wait + worker --once)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.conversations:
        runs = []
        for n in args.conversations:
            runs.append(catch_up(n, args.embedder, args.per_conversation, args.quantize, args.import_only))
            print(f"catch-up: {runs[-1]}", file=sys.stderr)
        if args.json:
            print(json.dumps({"catch_up": runs}, indent=2))
        else:
            for r in runs:
                print(f"{r['conversations']:>7,} conversations, {r['messages']:,} messages  "
                      f"import {r['import_with_catch_up_s']:>7.1f} s   " + (
                          f"--no-wait + worker --once {r['no_wait_plus_worker_s']:>7.1f} s   ratio {r['ratio']}"
                          if "ratio" in r else f"backlog after: {r['backlog_after']}"))
        return
    rows = list(synth.messages(args.messages, seed=11))
    results: dict[str, Any] = {"messages": len(rows), "window": args.window}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for name, writer in (("openai_jsonl", write_openai), ("claude_code", write_claude_code)):
            path = folder / f"{name}.jsonl"
            writer(path, rows)
            entry: dict[str, Any] = {"bytes": path.stat().st_size, "reference_msgs_per_s": round(reference(path))}
            entry["store_only"] = run_import(path, folder / f"{name}-store.db", args.window, compact=False)
            entry["import"] = run_import(path, folder / f"{name}.db", args.window, compact=True)
            results[name] = entry
            print(f"{name}: {entry}", file=sys.stderr)
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        for name in ("openai_jsonl", "claude_code"):
            e = results[name]
            print(f"{name:13} {e['bytes'] / 1e6:7.1f} MB  reference {e['reference_msgs_per_s']:>9,} msg/s  "
                  f"store only {e['store_only']['msgs_per_s']:>7,} msg/s  "
                  f"import {e['import']['msgs_per_s']:>7,} msg/s ({e['import']['summaries']} summaries)")


if __name__ == "__main__":
    main()
