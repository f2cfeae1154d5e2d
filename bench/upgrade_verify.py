"""A store written by an earlier version, opened by this one: migrated, verified, and read back.

The earlier version (``--old-rev``, a commit of this repository) is checked out in a
temporary git worktree; a subprocess running its code writes a SQLite file (or, with
``--postgres URL``, a PostgreSQL schema) the way a user's would be: conversations added
turn by turn and compacted, a long-term memory, a workspace file index and, with the
embeddings extra, vectors. Then this checkout's code opens it (its migrations run), runs
``lossless verify`` on it, and checks that every message reads back as the old code
stored it, that the DAG, the memory and the file chunk are there, and that an assembly
with a question works.

    python3 bench/upgrade_verify.py --old-rev 786c365 [--postgres URL|pgserver] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

WRITE = textwrap.dedent("""
    import json, sys
    from datetime import datetime, timedelta, timezone
    import lossless
    target, folder = sys.argv[1], sys.argv[2]
    mem = lossless.open(target, context_window=2048, compaction="inline")
    t0 = datetime(2024, 3, 1, 9, 0, tzinfo=timezone.utc)
    for c in range(3):
        conv = mem.conversation(f"upgrade-{c}", metadata={"user": "ada"})
        for i in range(120):
            conv.add(role="user" if i % 2 == 0 else "assistant",
                     content=f"turn {i} of chat {c}: the build on host-{i % 7} took {i * 3} seconds; 天气很好 {i}",
                     created_at=t0 + timedelta(minutes=i))
        conv.index()
    mem.memories.add("Ada prefers the staging cluster in Lisbon", kind="preference", user="ada")
    mem.files.index([folder])
    out = {c: [[m.seq, m.role, m.content, m.created_at.isoformat()] for m in mem.conversation(c).messages()]
           for c in (f"upgrade-{k}" for k in range(3))}
    print(json.dumps({"messages": out, "summaries": {c: len(mem.store.summaries(c)) for c in out}}))
    mem.close()
""")


def _old_checkout(rev: str, where: Path) -> Path:
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-f", str(where), rev],
                   check=True, capture_output=True)
    return where


def _run_old(src: Path, target: str, folder: Path) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run([sys.executable, "-c", WRITE, target, str(folder)], env=env, capture_output=True,
                          text=True, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"the old code failed to write the store:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _check_new(target: str, old: dict[str, Any]) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    verify = subprocess.run([sys.executable, "-m", "lossless", "verify", "--db", target, "--json"], env=env,
                            capture_output=True, text=True, timeout=600)
    sys.path.insert(0, str(ROOT / "src"))
    import lossless

    mem = lossless.open(target, context_window=2048, compaction="inline")
    try:
        same = all([[m.seq, m.role, m.content, m.created_at.isoformat()] for m in mem.conversation(c).messages()]
                   == rows for c, rows in old["messages"].items())
        summaries = {c: len(mem.store.summaries(c)) for c in old["messages"]}
        ctx = mem.conversation("upgrade-1").assemble(budget_tokens=600, query="how long did host-3 take?")
        memory = [r.content for r in mem.memories.search("staging cluster", user="ada")]
        files = mem.files.search("retention policy") if mem.files is not None else []
    finally:
        mem.close()
    return {"verify_exit": verify.returncode, "verify": verify.stdout.strip()[-2000:] or verify.stderr[-2000:],
            "messages_identical": same, "summaries_kept": summaries == old["summaries"],
            "assembly_tokens": ctx.tokens, "memory_found": bool(memory), "file_chunk_found": bool(files)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--old-rev", required=True, help="the commit whose code writes the store")
    ap.add_argument("--postgres", metavar="URL",
                    help="write to this PostgreSQL database instead of a SQLite file (pgserver: start one here)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="lossless-upgrade-") as tmp:
        base = Path(tmp)
        folder = base / "docs"
        folder.mkdir()
        (folder / "policy.md").write_text("# Retention policy\n\nLogs are kept for 30 days, then archived.\n")
        old_src = _old_checkout(args.old_rev, base / "old") / "src"
        server = None
        try:
            target = args.postgres or str(base / "store.db")
            if target == "pgserver":
                import pgserver

                server = pgserver.get_server(base / "pg", cleanup_mode="delete")
                target = server.get_uri()
            old = _run_old(old_src, target, folder)
            result = {"old_rev": args.old_rev, "store": "postgresql" if args.postgres else "sqlite",
                      **_check_new(target, old)}
        finally:
            if server is not None:
                server.cleanup()
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base / "old")],
                           capture_output=True)
    ok = (result["verify_exit"] == 0 and result["messages_identical"] and result["summaries_kept"]
          and result["memory_found"] and result["file_chunk_found"])
    result["ok"] = ok
    print(json.dumps(result, indent=1) if args.json else "\n".join(f"{k}: {v}" for k, v in result.items()))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
