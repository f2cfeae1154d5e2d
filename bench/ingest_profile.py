"""Where bulk ingest time goes: from bench_scale's reference (one table, one contentless
FTS5 index) to lossless's ``add_many``, one layer at a time, on the same rows in batches
of 1,000, in one run.

  reference        rowid table + contentless FTS5 (bench_scale's Reference)
  + indexes        lossless's message columns and its three other b-trees: id (unique),
                   (conversation, seq) (unique), (conversation, created_ts)
  + fts options    the unicode61 tokenizer with remove_diacritics 2 and contentless_delete=1
                   (so a row can be deleted), as lossless's messages_fts is made
  + trigram all    a trigram FTS5 row for every message (what lossless wrote before it kept
                   trigram rows for CJK text only)
  store only       SQLiteStore.append_messages on messages validated and counted beforehand
  add_many         Conversation.add_many as a caller uses it (validation, token counts, the
                   backlog row; compaction and embedding left to the worker)

    python bench/ingest_profile.py --messages 50000 --json out.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import apsw

sys.path.insert(0, str(Path(__file__).parent))
import synth

import lossless
from lossless.core.render import content_text
from lossless.core.validate import validate_message
from lossless.store.sqlite.store import message_hash, message_id

BATCH = 1000

_SCHEMA = {
    "reference": [
        "CREATE TABLE m (rowid INTEGER PRIMARY KEY, conv TEXT, seq INT, role TEXT, content TEXT, ts TEXT)",
        "CREATE VIRTUAL TABLE m_fts USING fts5(text, content='')",
    ],
    "indexes": [
        "CREATE TABLE m (rowid INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, conv TEXT NOT NULL, seq INT NOT NULL, "
        "role TEXT NOT NULL, name TEXT, content TEXT, content_is_json INT, tool_calls TEXT, tool_call_id TEXT, "
        "created_at TEXT, created_ts REAL, token_count INT, metadata TEXT, external_id TEXT, content_hash TEXT, "
        "UNIQUE (conv, seq))",
        "CREATE INDEX m_time ON m (conv, created_ts)",
        "CREATE VIRTUAL TABLE m_fts USING fts5(text, content='')",
    ],
}
_SCHEMA["fts_options"] = [*_SCHEMA["indexes"][:2],
                          "CREATE VIRTUAL TABLE m_fts USING fts5(text, content='', contentless_delete=1, "
                          "tokenize='unicode61 remove_diacritics 2')"]
_SCHEMA["trigram_all"] = [*_SCHEMA["fts_options"],
                          "CREATE VIRTUAL TABLE m_tri USING fts5(text, content='', contentless_delete=1, "
                          "tokenize='trigram')"]


def bare(path: Path, layer: str, rows: list[dict[str, Any]]) -> float:
    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL")
    for sql in _SCHEMA[layer]:
        conn.execute(sql)
    wide = layer != "reference"
    t0 = time.perf_counter()
    n = 0
    for i in range(0, len(rows), BATCH):
        conn.execute("BEGIN IMMEDIATE")
        for r in rows[i:i + BATCH]:
            n += 1
            text = content_text(r["content"], r.get("tool_calls"))
            if wide:
                conn.execute("INSERT INTO m VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                             (n, message_id("c", n), "c", n, r["role"], None, text, 0, None, None,
                              r["created_at"].isoformat(), r["created_at"].timestamp(), len(text) // 4, "{}", None,
                              message_hash(r["role"], text, None, (), None)))
            else:
                conn.execute("INSERT INTO m VALUES (?, ?, ?, ?, ?, ?)",
                             (n, "c", n, r["role"], text, r["created_at"].isoformat()))
            conn.execute("INSERT INTO m_fts (rowid, text) VALUES (?, ?)", (n, text))
            if layer == "trigram_all":
                conn.execute("INSERT INTO m_tri (rowid, text) VALUES (?, ?)", (n, text))
        conn.execute("COMMIT")
    seconds = time.perf_counter() - t0
    conn.close()
    return seconds


def store_only(path: Path, rows: list[dict[str, Any]]) -> float:
    mem = lossless.open(path, embedder=None, compaction="deferred")
    mem.conversation("c")
    counter = mem.counter
    validated = [validate_message(r, max_bytes=mem.config.max_message_bytes) for r in rows]
    counts = [counter.count(content_text(m.content, m.tool_calls)) for m in validated]
    t0 = time.perf_counter()
    for i in range(0, len(rows), BATCH):
        mem.store.append_messages("c", validated[i:i + BATCH], counts[i:i + BATCH])
    seconds = time.perf_counter() - t0
    mem.close()
    return seconds


def add_many(path: Path, rows: list[dict[str, Any]]) -> float:
    mem = lossless.open(path, embedder=None, compaction="deferred")
    conv = mem.conversation("c")
    t0 = time.perf_counter()
    for i in range(0, len(rows), BATCH):
        conv.add_many(rows[i:i + BATCH])
    seconds = time.perf_counter() - t0
    mem.close()
    return seconds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=50_000)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    rows = list(synth.messages(args.messages, seed=5))
    out: dict[str, Any] = {"messages": args.messages}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for layer in ("reference", "indexes", "fts_options", "trigram_all"):
            out[layer] = round(args.messages / bare(folder / f"{layer}.db", layer, rows))
        out["store_only"] = round(args.messages / store_only(folder / "store.db", rows))
        out["add_many"] = round(args.messages / add_many(folder / "add.db", rows))
    ref = out["reference"]
    print(f"{'layer':<14}{'msg/s':>10}{'share':>8}")
    for key in ("reference", "indexes", "fts_options", "trigram_all", "store_only", "add_many"):
        print(f"{key:<14}{out[key]:>10,}{out[key] / ref:>8.2f}")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
