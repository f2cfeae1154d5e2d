"""Many writers on one SQLite file: 8 processes and 8 threads add to one shared
conversation and to their own, while others assemble, grep and compact. Nothing is lost
or duplicated, seqs stay gap-free, no "database is locked" reaches a caller, two
compactions of one conversation never overlap, and the store verifies."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import textwrap
import threading
import time
import traceback
from pathlib import Path
from typing import Any

import lossless
from tests.conftest import StoreTarget

PROCESSES = 8
THREADS = 8
PER_WRITER = 30  # logical writes into each of the two conversations
WINDOW = 2048
SHARED = "shared"

# A writer: alternates between the shared conversation and its own, with single adds,
# batches and tool calls, so auto-compaction fires in both; every 10 writes it also
# assembles with a query and greps. Reports what it wrote (content -> conversation) and
# every exception, and never lets one stop the rest of its work.
_WRITER = """
import json, sys, time, traceback
import lossless

def batch(tag, i):
    text = f"{tag} write {i}: deploy service-{i} on port {5000 + i}; " + "detail " * (20 + i % 30)
    if i % 7 == 3:
        cid = f"call-{tag}-{i}"
        return [{"role": "assistant", "content": text, "tool_calls": [
                    {"id": cid, "type": "function", "function": {"name": "run", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": cid, "content": f"{tag} result {i}: ok"}]
    return [{"role": "user" if i % 2 else "assistant", "content": text}]

def work(mem, tag, n, shared, own, errors, written):
    convs = {shared: mem.conversation(shared), own: mem.conversation(own)}
    for i in range(n):
        for cid, conv in convs.items():
            try:
                msgs = batch(f"{tag}@{cid}", i)
                if len(msgs) == 1 and i % 3 == 0:
                    conv.add(**msgs[0])
                else:
                    conv.add_many(msgs)
                written.extend([cid, m["content"]] for m in msgs)
                if i % 10 == 9:
                    conv.assemble(budget_tokens=1500, query=f"service-{i} port")
                    conv.grep(f"service-{i}")
            except Exception as exc:
                errors.append(f"{tag} {cid} #{i}: {type(exc).__name__}: {exc}")

if __name__ == "__main__":
    db, tag, n, window = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    errors, written = [], []
    try:
        mem = lossless.open(db, embedder=None, context_window=window, fresh_tail_count=8,
                            compaction_cooldown_seconds=0)
        work(mem, tag, n, "shared", f"own-{tag}", errors, written)
        mem.close()
    except Exception:
        errors.append(traceback.format_exc())
    print(json.dumps({"errors": errors, "written": written}))
"""


def _load_writer(path: Path) -> Any:
    namespace: dict[str, Any] = {"__name__": "concurrency_writer"}
    exec(compile(textwrap.dedent(_WRITER), str(path), "exec"), namespace)
    return namespace


def test_many_processes_and_threads_lose_nothing(store_target: StoreTarget, tmp_path: Path) -> None:
    db = store_target("many")
    script = tmp_path / "writer.py"
    script.write_text(textwrap.dedent(_WRITER))
    writer = _load_writer(script)
    setup = lossless.open(db, embedder=None, context_window=WINDOW)
    setup.conversation(SHARED)
    setup.close()

    procs = [subprocess.Popen([sys.executable, str(script), str(db), f"P{i}", str(PER_WRITER), str(WINDOW)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(PROCESSES)]
    errors: list[str] = []
    written: list[list[str]] = []
    stop = threading.Event()
    # half the threads share one Memory (one connection, serialised by its lock), half
    # open their own (separate connections competing for the write lock like processes)
    shared_mem = lossless.open(db, embedder=None, context_window=WINDOW, fresh_tail_count=8,
                               compaction_cooldown_seconds=0)
    own_mems: list[lossless.Memory] = []

    def thread_writer(i: int) -> None:
        try:
            if i % 2:
                mem = shared_mem
            else:
                mem = lossless.open(db, embedder=None, context_window=WINDOW, fresh_tail_count=8,
                                    compaction_cooldown_seconds=0)
                own_mems.append(mem)
            writer["work"](mem, f"T{i}", PER_WRITER, SHARED, f"own-T{i}", errors, written)
        except Exception:
            errors.append(traceback.format_exc())

    def reader_and_compactor(i: int) -> None:
        mem = lossless.open(db, embedder=None, context_window=WINDOW, fresh_tail_count=8, tool_wait_seconds=2)
        try:
            conv = mem.conversation(SHARED)
            for k in itertools.count():
                if stop.is_set() or k >= 400:
                    break
                try:
                    if k % 3 == 0:
                        conv.compact(full=k % 2 == 0)
                    elif k % 3 == 1:
                        ctx = conv.assemble(budget_tokens=1200, query="deploy service port")
                        assert ctx.tokens <= 1200
                    else:
                        conv.grep("service", limit=5)
                        conv.tools.dispatch({"id": "c", "type": "function", "function": {
                            "name": "lcm_grep", "arguments": json.dumps({"query": "deploy"})}})
                except Exception as exc:
                    errors.append(f"reader {i}: {type(exc).__name__}: {exc}")
                time.sleep(0.02)
        finally:
            mem.close()

    threads = [threading.Thread(target=thread_writer, args=(i,)) for i in range(THREADS)]
    others = [threading.Thread(target=reader_and_compactor, args=(i,)) for i in range(2)]
    t0 = time.monotonic()
    for t in threads + others:
        t.start()
    for t in threads:
        t.join(timeout=120)
    results = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    stop.set()
    for t in others:
        t.join(timeout=60)
    elapsed = time.monotonic() - t0
    shared_mem.close()
    for m in own_mems:
        m.close()
    for r in results:
        errors.extend(r["errors"])
        written.extend(r["written"])

    assert errors == [], errors[:10]
    assert not any(t.is_alive() for t in threads + others)
    writers = PROCESSES + THREADS
    mem = lossless.open(db, embedder=None, context_window=WINDOW)
    try:
        assert mem.verify() == []
        expected: dict[str, list[str]] = {}
        for cid, content in written:
            expected.setdefault(cid, []).append(content)
        assert len(expected) == writers + 1
        for cid, contents in expected.items():
            stored = mem.get_conversation(cid)
            assert stored is not None
            messages = stored.messages()
            assert [m.seq for m in messages] == list(range(1, len(messages) + 1)), f"{cid}: seq gap"
            got = [str(m.content) for m in messages]
            assert len(got) == len(set(got)), f"{cid}: a message stored twice"
            assert sorted(got) == sorted(contents), f"{cid}: lost or unexpected messages"
            # each writer's messages are in the order it wrote them
            for tag in {c.split("@")[0] for c in contents}:
                mine = [c for c in got if c.startswith(f"{tag}@")]
                assert mine == [c for c in contents if c.startswith(f"{tag}@")]
            _assert_no_overlapping_compactions(stored)
        shared = mem.conversation(SHARED)
        assert len(shared.messages()) >= writers * PER_WRITER
        assert shared.summaries(), "the shared conversation was compacted"
    finally:
        mem.close()
    assert elapsed < 90


def _assert_no_overlapping_compactions(conv: lossless.Conversation) -> None:
    runs = sorted((e["started_ts"], e["finished_ts"], e["owner"]) for e in conv.compaction_log(limit=100_000))
    for (s1, f1, o1), (s2, f2, o2) in itertools.pairwise(runs):
        assert s2 >= f1, f"{conv.id}: compactions overlapped: {o1} {s1:.3f}-{f1:.3f} and {o2} {s2:.3f}-{f2:.3f}"


def test_two_processes_racing_to_compact_never_overlap(store_target: StoreTarget, tmp_path: Path) -> None:
    """Both processes ask to compact the same conversation over and over while the other
    one works; the log's time ranges never overlap and every summary lands once."""
    db = store_target("race")
    mem = lossless.open(db, embedder=None, context_window=WINDOW, auto_compact=False)
    conv = mem.conversation("c")
    conv.add_many([{"role": "user" if i % 2 else "assistant", "content": f"turn {i}: " + "words " * 60}
                   for i in range(200)])
    mem.close()
    script = tmp_path / "compactor.py"
    script.write_text(textwrap.dedent("""
        import sys, lossless
        mem = lossless.open(sys.argv[1], embedder=None, context_window=2048, auto_compact=False,
                            tool_wait_seconds=5)
        conv = mem.conversation("c")
        for k in range(12):
            conv.add("user", f"{sys.argv[2]} adds {k}: " + "more " * 80)
            conv.compact(full=k % 3 == 0)
        print("ok")
    """))
    procs = [subprocess.Popen([sys.executable, str(script), str(db), f"p{i}"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for i in range(2)]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0 and out.strip() == "ok", err
    mem = lossless.open(db, embedder=None, context_window=WINDOW)
    try:
        conv = mem.conversation("c")
        assert len(conv.compaction_log()) >= 2
        _assert_no_overlapping_compactions(conv)
        assert mem.verify() == []
        assert len(conv.messages()) == 224
    finally:
        mem.close()
