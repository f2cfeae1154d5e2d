"""The background worker (issue: nothing waits): writes return before compaction and
embedding, the worker catches up with the DAG intact, close() is bounded and leaves the
backlog for the next open, SIGKILL mid-compaction loses nothing, workers in several
processes share a store without writing a summary twice, the circuit breaker opens on
an outage and a good probe closes it, and what fell back is redone by the model later."""

from __future__ import annotations

import itertools
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lossless
from lossless.cli.main import main
from lossless.cli.progress import WorkProgress
from lossless.compaction.worker import Worker
from lossless.summarize.base import SummaryRequest, SummaryResult
from lossless.summarize.guards import CircuitBreaker
from lossless.summarize.openai_chat import OpenAISummarizer
from lossless.testing import HashEmbedder
from tests.conftest import T0, StoreTarget, chat
from tests.fake_openai import FakeOpenAIServer, fake_openai

__all__ = ["fake_openai"]  # the fixture, imported for pytest to find


class GatedSummarizer:
    """Writes a short digest, but only once the test opens the gate (counts its calls)."""

    name = "gated"

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.called = threading.Event()
        self.calls = 0

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        self.calls += 1
        self.called.set()
        if not self.gate.wait(30):
            raise TimeoutError("the test never opened the gate")
        return SummaryResult(f"Span #{request.items[0].first_seq}-#{request.items[-1].last_seq}: checks.")


def _partitioned(conv: lossless.Conversation) -> None:
    expect = 1
    for node in conv.frontier():
        assert node.first_seq == expect
        expect = node.last_seq + 1
    assert expect - 1 <= len(conv.messages())
    assert conv.memory.verify(conv.id) == []


# -- writes do not wait -------------------------------------------------------------------


def test_a_write_returns_while_its_compaction_is_still_running(store_target: StoreTarget, tmp_path: Path) -> None:
    gated = GatedSummarizer()
    mem = lossless.open(store_target("w"), embedder=None, summarizer=gated, context_window=2048)
    conv = mem.conversation("c")
    conv.add_many(chat(200, words=30))  # far over the trigger: the worker compacts ...
    assert gated.called.wait(10)  # ... and is inside the summarizer, which will not answer yet
    stored = conv.add("user", "still answered at once")  # no compaction on this path to wait for
    assert stored.seq == 201 and conv.state == "COMPACTING"
    assert conv.search("answered")[0].id == stored.id  # found by keyword search at once
    ctx = conv.assemble(budget_tokens=1500, query="service-3 port")  # assembly does not wait either
    assert ctx.tokens <= 1500 and ctx.lag is not None and ctx.lag.raw_messages == 201
    text = str(ctx.messages)
    assert "still answered at once" in text and "Not summarized yet" in text  # the backlog is pointed to
    assert any(i.tier == "recall" and i.first_seq < 20 for i in ctx.items)  # and recalled from
    gated.gate.set()
    assert mem.wait_idle(30)
    assert conv.summaries() and conv.assemble(budget_tokens=600).lag is None
    _partitioned(conv)
    mem.close()


def test_inline_mode_compacts_on_the_callers_path(store_target: StoreTarget, tmp_path: Path) -> None:
    mem = lossless.open(store_target("i"), embedder=None, context_window=2048, compaction="inline")
    conv = mem.conversation("c")
    conv.add_many(chat(80, words=30))
    assert conv.summaries() and mem.scheduler.thread_worker is None  # done before add_many returned; no thread
    assert mem.stats().backlog.conversations == 0  # no embedder: nothing more owed
    mem.close()


def test_wait_idle_sees_a_row_finished_while_it_looked(store_target: StoreTarget, monkeypatch: pytest.MonkeyPatch
                                                      ) -> None:
    # a worker can finish the last row between wait_idle's two reads of the backlog (seen
    # on PostgreSQL under load): that is idle, not "only failures left"
    mem = lossless.open(store_target("w"), embedder=None, context_window=2048, compaction="deferred")
    conv = mem.conversation("c")
    conv.add_many(chat(30, words=20))
    assert mem.backlog.pending(["c"]) == ["c"]
    due = mem.backlog.due
    calls = []

    def finished_meanwhile(ids: list[str]) -> list[str]:
        calls.append(ids)
        if len(calls) == 1:
            mem.store._query("DELETE FROM backlog")  # the other worker's finish lands now
            return []
        return due(ids)

    monkeypatch.setattr(mem.backlog, "due", finished_meanwhile)
    assert mem.wait_idle(10) is True and calls
    mem.close()


@pytest.mark.postgres
def test_finishing_a_row_never_drops_an_append_in_flight(pg_url: str) -> None:
    # an append locks its conversation, adds messages, finds the row queued (nothing to
    # write) and commits; a worker finishing the row meanwhile must see those messages
    mem = lossless.open(pg_url, embedder=None, context_window=2048, compaction="deferred")
    conv = mem.conversation("c")
    conv.add_many(chat(10, words=10))
    claim = mem.backlog.claim("w", limit=1)[0]
    locked, finished = threading.Event(), []

    def worker_finishes() -> None:
        locked.wait(10)
        finished.append(mem.backlog.finish(claim, "w"))

    thread = threading.Thread(target=worker_finishes)
    thread.start()
    with mem.store.transaction() as conn:  # the append, as append_messages does it
        conn.execute("SELECT last_seq FROM conversations WHERE id = 'c' FOR UPDATE")
        conn.execute("UPDATE conversations SET last_seq = last_seq + 1 WHERE id = 'c'")
        conn.execute("INSERT INTO backlog (conversation_id, queued_seq, queued_ts, due_ts) VALUES ('c', 11, 0, 0) "
                     "ON CONFLICT (conversation_id) DO NOTHING")
        locked.set()
        time.sleep(0.5)  # the finish runs now, before this commits
    thread.join(10)
    assert finished == [False]  # it saw the new message: the row stays, due again
    assert mem.backlog.pending() == ["c"]
    mem.close()


def test_wait_idle_waits_for_a_row_put_back_for_a_moment(store_target: StoreTarget) -> None:
    # a turn that found another process compacting puts the row back a second later,
    # without a failure: wait_idle waits for it instead of calling it failed
    mem = lossless.open(store_target("w"), embedder=None, context_window=2048, fresh_tail_count=4,
                        compaction="deferred")
    conv = mem.conversation("c")
    conv.add_many(chat(60, words=25))
    claim = mem.backlog.claim("someone", limit=1)[0]
    mem.backlog.release(claim.conversation_id, "someone", delay=0.5)
    assert not mem.backlog.due(["c"]) and not mem.backlog.failing(["c"])
    assert mem.wait_idle(20) is True
    assert conv.summaries() and mem.backlog.pending() == []
    mem.close()


@pytest.mark.slow
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=st.lists(st.integers(min_value=1, max_value=60), min_size=1, max_size=12),
       window=st.sampled_from([512, 1024, 4096]), tools=st.sampled_from([0, 3, 5]))
def test_the_worker_catches_up_and_the_dag_holds(scratch_store: Callable[[], str], batches: list[int], window: int,
                                                 tools: int) -> None:
    emb = HashEmbedder()
    with lossless.open(scratch_store(), embedder=emb, context_window=window, fresh_tail_count=6) as mem:
        convs = [mem.conversation("a"), mem.conversation("b")]
        sent = 0
        for i, size in enumerate(batches):
            conv = convs[i % 2]
            conv.add_many(chat(size, words=25, tools_every=tools, start=T0 + timedelta(hours=i)))
            sent += size
            _partitioned(conv)  # at every moment, whatever the worker is doing
        assert mem.wait_idle(120)
        assert mem.stats().backlog.conversations == 0
        assert sum(len(c.messages()) for c in convs) == sent
        for conv in convs:
            _partitioned(conv)
            owed = conv.backlog()
            assert not owed.queued and owed.units_not_embedded == 0 and owed.messages_not_indexed == 0
            assert owed.compaction_due is None
            if conv.active_tokens() > mem.config.trigger_tokens:  # only a protected tail can stay over
                assert not conv.compact(force=True).leaves


# -- close, crash, resume -----------------------------------------------------------------


def test_close_waits_for_the_step_in_hand_only_and_the_next_open_resumes(store_target: StoreTarget, tmp_path: Path) -> None:
    db = store_target("c")
    gated = GatedSummarizer()
    mem = lossless.open(db, embedder=None, summarizer=gated, context_window=2048)
    mem.conversation("c").add_many(chat(200, words=30))
    assert gated.called.wait(10)
    threading.Timer(0.3, gated.gate.set).start()  # the summary in hand finishes a little later
    mem.close(timeout=10)
    assert not mem.worker.running  # it stopped after that one step, not after the backlog
    again = lossless.open(db, embedder=None, context_window=2048)  # offline: resumes where it was
    conv = again.conversation("c")
    assert again.verify() == []
    assert again.backlog.pending() == ["c"]  # still owed
    assert again.wait_idle(60)
    assert len(conv.messages()) == 200 and conv.summaries()
    _partitioned(conv)
    again.close()


def test_close_gives_up_on_a_stuck_summarizer_and_loses_nothing(store_target: StoreTarget, tmp_path: Path) -> None:
    db = store_target("s")
    gated = GatedSummarizer()  # never opened: the summarizer hangs
    mem = lossless.open(db, embedder=None, summarizer=gated, context_window=2048)
    mem.conversation("c").add_many(chat(120, words=30))
    assert gated.called.wait(10)
    mem.close(timeout=0.5)  # bounded: it does not wait for the hanging call
    gated.gate.set()
    again = lossless.open(db, embedder=None, context_window=2048)
    assert len(again.conversation("c").messages()) == 120 and again.verify() == []
    assert again.wait_idle(60) and again.conversation("c").summaries()
    again.close()


_KILLED = """
import sys, time
import lossless
from lossless.summarize.base import SummaryResult

class Slow:
    name = "slow"
    def summarize(self, request):
        print("summarizing", flush=True)
        time.sleep(0.2)
        return SummaryResult(f"Span #{request.items[0].first_seq}-#{request.items[-1].last_seq}: checks.")

mem = lossless.open(sys.argv[1], embedder=None, summarizer=Slow(), context_window=2048)
conv = mem.conversation("c")
conv.add_many([{"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}: " + "detail " * 40}
               for i in range(300)])
print("stored", flush=True)
time.sleep(60)
"""


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_sigkill_during_background_compaction_loses_nothing(store_target: StoreTarget, tmp_path: Path) -> None:
    db = store_target("k")
    script = tmp_path / "killed.py"
    script.write_text(textwrap.dedent(_KILLED))
    proc = subprocess.Popen([sys.executable, str(script), str(db)], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "LOSSLESS_EMBEDDER": "none"})
    try:
        assert proc.stdout is not None
        seen = [proc.stdout.readline().strip() for _ in range(4)]  # stored, then a few summaries under way
        assert "stored" in seen and seen.count("summarizing") >= 2
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()
    mem = lossless.open(db, embedder=None, context_window=2048)
    conv = mem.conversation("c")
    assert [m.seq for m in conv.messages()] == list(range(1, 301))
    assert mem.verify() == []  # no half-written summary
    assert mem.backlog.pending() == ["c"]  # the work is still owed ...
    assert mem.wait_idle(60)  # ... and done by the next open, at once (the dead claim is taken over)
    _partitioned(conv)
    assert mem.store.lease("c") is None
    mem.close()


# -- several workers, several processes ---------------------------------------------------


def _writer_with_a_worker(db: str, conversations: list[str], count: int) -> None:
    with lossless.open(db, embedder=None, context_window=2048, fresh_tail_count=6) as mem:
        for cid in conversations:
            conv = mem.conversation(cid)
            for start in range(0, count, 10):
                conv.add_many([{"role": "user" if j % 2 == 0 else "assistant",
                                "content": f"{cid} message {j}: " + "detail " * 30} for j in range(start, start + 10)])
        mem.wait_idle(120)


def _summaries_written_once(mem: lossless.Memory, conversations: list[str]) -> None:
    assert mem.verify() == []  # every source has one parent: no summary was written twice
    for cid in conversations:
        conv = mem.conversation(cid)
        _partitioned(conv)
        # a root may cover exactly what a condensed node of its depth later covers: only
        # the DAG's own nodes must be unique by span
        spans = [(s.depth, s.first_seq, s.last_seq) for s in conv.summaries() if not s.root]
        assert len(spans) == len(set(spans))
        runs = sorted((e["started_ts"], e["finished_ts"]) for e in conv.compaction_log(1000))
        assert all(a[1] <= b[0] for a, b in itertools.pairwise(runs))  # one compaction at a time


def test_two_processes_with_workers_share_one_sqlite_file(store_target: StoreTarget, tmp_path: Path) -> None:
    db = str(store_target("shared"))
    lossless.open(db, embedder=None).close()
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer_with_a_worker, args=(db, ["shared", f"own-{i}"], 120)) for i in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(240)
        assert p.exitcode == 0
    with lossless.open(db, embedder=None, context_window=2048, fresh_tail_count=6) as mem:
        assert mem.wait_idle(60)
        assert len(mem.conversation("shared").messages()) == 240
        _summaries_written_once(mem, ["shared", "own-0", "own-1"])


def _run_worker(url: str, out: Any, start: Any) -> None:
    mem = lossless.open(url, embedder=None, context_window=2048, fresh_tail_count=6, compaction="deferred")
    worker = Worker(mem, slice_seconds=0.3)
    start.wait(120)  # both begin together: on a loaded machine one process's start-up took longer than all the work
    worker.run(until_idle=True, kind="process")
    out.put(worker.stats.as_dict()["turns"])
    mem.close()


@pytest.mark.postgres
def test_two_workers_on_postgresql_share_the_backlog(pg_url: str) -> None:
    conversations = [f"c{i}" for i in range(6)]
    with lossless.open(pg_url, embedder=None, context_window=2048, fresh_tail_count=6,
                       compaction="deferred") as mem:
        for cid in conversations:
            mem.conversation(cid).add_many(chat(160, words=30))
        assert sorted(mem.backlog.pending()) == conversations
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    start = ctx.Barrier(2)
    procs = [ctx.Process(target=_run_worker, args=(pg_url, out, start)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(240)
        assert p.exitcode == 0
    turns = [out.get(timeout=10) for _ in procs]
    assert all(t > 0 for t in turns)  # both took part
    with lossless.open(pg_url, embedder=None, context_window=2048, fresh_tail_count=6,
                       compaction="deferred") as mem:
        assert mem.backlog.pending() == []
        _summaries_written_once(mem, conversations)


# -- the circuit breaker and redoing fallbacks --------------------------------------------


def test_the_breaker_opens_on_unavailable_and_a_good_probe_closes_it() -> None:
    now = [0.0]
    breaker = CircuitBreaker(failure_threshold=3, failure_cooldown=30, clock=lambda: now[0])
    for _ in range(2):
        breaker.check(key="m")
        breaker.record_failure("m", "status 500")
    assert breaker.state == "closed" and breaker.failing("m")  # counting, not open yet
    breaker.record_failure("m", "status 503")
    assert breaker.state == "open" and breaker.blocked("m") and breaker.blocked("other") is None
    with pytest.raises(lossless.SummarizerError, match="circuit breaker open"):
        breaker.check(key="m")
    now[0] = 31.0
    assert breaker.state == "half-open"
    breaker.check(key="m")  # this caller is the probe ...
    with pytest.raises(lossless.SummarizerError, match="probe"):
        breaker.check(key="m")  # ... and nobody else meanwhile
    breaker.record_failure("m", "status 500")  # a failed probe: open again
    assert breaker.state == "open"
    now[0] = 62.0
    breaker.check(key="m")
    breaker.record_success("m")  # a good probe closes it
    assert breaker.state == "closed" and not breaker.failing("m") and breaker.snapshot() == {}


def test_an_outage_costs_little_and_its_fallbacks_are_redone_later(store_target: StoreTarget, tmp_path: Path,
                                                                   fake_openai: FakeOpenAIServer) -> None:
    llm = OpenAISummarizer("gpt-test", base_url=fake_openai.base_url, max_retries=2, timeout=5,
                           breaker=CircuitBreaker(failure_cooldown=0.5))
    fake_openai.fail_next(10**6, status=500)
    mem = lossless.open(store_target("o"), embedder=None, summarizer=llm, context_window=2048)
    conv = mem.conversation("c")
    conv.add_many(chat(150, words=30))
    assert mem.wait_idle(60)
    during = [s for s in conv.summaries() if s.summarizer != "frontier"]  # (a root copying the frontier)
    assert during and {s.fallback_level for s in during} == {2}
    asked = len(fake_openai.chat_requests())
    assert asked <= 3 + 2  # three failures open the breaker (the first with the SDK's two retries)
    skipped = [s for s in during if s.metadata["fallback_reason"].startswith("not asked")]
    assert skipped and all("circuit breaker open" in s.metadata["fallback_reason"] for s in skipped)
    breaker = mem.stats().breaker
    assert breaker is not None and breaker["state"] in ("open", "half-open")
    early = conv.redo_fallbacks()  # the provider is still down: it stops, and says why in a type
    assert early.stopped_by == "provider_down" and early.skipped and early.found == len(during)
    assert list(early.to_dict()) == ["conversation_id", "found", "redone", "failed", "skipped", "seconds"]
    # the provider is back; after the cool-down one probe decides, and the model redoes them
    with fake_openai._lock:
        fake_openai._failures.clear()
    time.sleep(0.6)
    report = conv.redo_fallbacks()
    assert report.found == len(during) and report.redone and not report.failed and report.skipped is None
    assert report.stopped_by is None
    after = {s.id: s for s in conv.summaries() if s.summarizer != "frontier"}
    assert set(after) == {s.id for s in during}  # same ids, same places in the DAG
    breaker = mem.stats().breaker
    assert {s.fallback_level for s in after.values()} == {0} and breaker is not None and breaker["state"] == "closed"
    first = during[0]
    assert mem.store.summary_revisions(first.id)[0]["content"] == first.content  # the earlier text is kept
    assert after[first.id].metadata["redone"]["fallback_reason"] == first.metadata["fallback_reason"]
    assert conv.grep(after[first.id].content.split()[2])["count"] >= 1  # the new text is searchable
    _partitioned(conv)
    mem.close()


def test_redo_fallbacks_needs_a_model(store_target: StoreTarget) -> None:
    mem = lossless.open(store_target("r"), embedder=None, context_window=2048)
    conv = mem.conversation("c")
    conv.add_many(chat(80, words=30))
    assert mem.wait_idle(30)
    report = conv.redo_fallbacks()
    assert report.found == 0 and report.redone == []  # the offline summarizer never falls back
    mem.close()


# -- what the user sees -------------------------------------------------------------------


def _cli(db: Path, *args: str) -> int:
    return main(["--db", str(db), *args])


@pytest.mark.parametrize("value", ["0", "-1", "3601", "nan"])
def test_cli_worker_seconds_out_of_range_say_the_range_they_miss(value: str, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """--poll 0 was refused as "expected seconds between 0 and 3600", which 0 is."""
    assert _cli(tmp_path / "w.db", "worker", "--once", f"--poll={value}") == 2
    err = capsys.readouterr().err
    assert f"expected seconds above 0 and at most 3600, got {value!r}" in err and "between 0 and" not in err


def test_cli_no_wait_leaves_the_work_to_lossless_worker(store_target: StoreTarget, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = store_target("cli")
    source = tmp_path / "chat.jsonl"
    source.write_text("".join(json.dumps({**m, "created_at": m["created_at"].isoformat(), "conversation": "x"}) + "\n"
                              for m in chat(400, words=30)))
    assert _cli(db, "--window", "2048", "import", str(source), "--no-wait") == 0
    capsys.readouterr()
    assert _cli(db, "--json", "stats") == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["summaries"] == 0 and stats["backlog"]["conversations"] == 1
    assert _cli(db, "--json", "stats", "x") == 0
    owed = json.loads(capsys.readouterr().out)["backlog"]
    assert owed["queued"] and owed["compaction_due"].startswith("tokens over threshold")
    assert _cli(db, "--json", "worker", "--once") == 0
    done = json.loads(capsys.readouterr().out)
    assert done["worker"]["summaries_written"] > 0 and done["backlog"]["conversations"] == 0
    assert _cli(db, "--json", "stats") == 0
    assert json.loads(capsys.readouterr().out)["summaries"] > 0
    # without --no-wait the command does the work itself before it returns
    assert _cli(db, "add", "y", "--role", "user", "--content", "hello") == 0
    capsys.readouterr()
    assert _cli(db, "--json", "stats") == 0
    assert json.loads(capsys.readouterr().out)["backlog"]["conversations"] == 0


def test_cli_redo_fallbacks_says_what_it_needs(store_target: StoreTarget, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = store_target("r")
    assert _cli(db, "add", "c", "--role", "user", "--content", "hello") == 0
    assert _cli(db, "compact", "c", "--redo-fallbacks") == 0
    assert "no fallback summaries" in capsys.readouterr().out
    assert _cli(db, "compact", "--all") == 2  # --all only with --redo-fallbacks


def test_progress_prints_lines_off_a_terminal() -> None:
    from io import StringIO

    from rich.console import Console

    sink = StringIO()
    console = Console(file=sink, force_terminal=False, width=200)
    with WorkProgress(console, "embedding", unit="units", every=0, quiet_seconds=0) as bar:
        bar.update(0, 40)
        bar.update(10, 40)
        bar.update(40, 40)
    lines = sink.getvalue().splitlines()
    assert any(line.startswith("embedding: 0/40 units (0%)") for line in lines)
    assert any("10/40 units (25%)" in line and "left" in line for line in lines)
    assert lines[-1].startswith("embedding: 40/40 units (100%)")
    assert sum(line.startswith("embedding: 40/40") for line in lines) == 1  # the end said once
    assert len(lines) <= 5  # no line repeated while nothing moved


def test_stats_and_health_show_the_worker(store_target: StoreTarget, tmp_path: Path) -> None:
    mem = lossless.open(store_target("h"), embedder=None, context_window=2048)
    conv = mem.conversation("c")
    conv.add_many(chat(100, words=30))
    assert mem.wait_idle(30)
    stats = mem.stats()
    assert stats.compaction == "background" and stats.backlog.conversations == 0
    assert stats.worker["summaries_written"] == len(conv.summaries()) and stats.worker["errors"] == 0
    assert stats.worker["state"] in ("idle", "working")
    mem.close()
