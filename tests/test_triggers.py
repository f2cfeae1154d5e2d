"""Compaction policy: each trigger fires and records its reason; one compaction per
conversation at a time across threads and processes; the cooldown; /compact; the tools
waiting for a running compaction."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

import lossless
from lossless.summarize.base import SummaryRequest, SummaryResult
from tests.conftest import StoreTarget, chat


class SlowSummarizer:
    """Writes a short digest, slowly, and says when it started (to line up a race)."""

    name = "slow"

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.started = threading.Event()

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        self.started.set()
        time.sleep(self.seconds)
        return SummaryResult(f"Span #{request.items[0].first_seq}-#{request.items[-1].last_seq}.")


def test_token_trigger_records_its_reason(store_target: StoreTarget, tmp_path: Path) -> None:
    mem = lossless.open(store_target("t"), embedder=None, context_window=2048)
    conv = mem.conversation("c")
    conv.add_many(chat(80, words=20))
    assert mem.wait_idle(30)
    log = conv.compaction_log()
    assert log and log[-1]["reason"].startswith("tokens over threshold")
    assert log[-1]["tokens_before"] > mem.config.trigger_tokens
    assert all(s.metadata["trigger"].startswith("tokens over threshold") for s in conv.summaries())


def test_message_count_trigger(store_target: StoreTarget, tmp_path: Path) -> None:
    mem = lossless.open(store_target("m"), embedder=None, context_window=128_000, compact_after_messages=40,
                        fresh_tail_count=8)
    conv = mem.conversation("c")
    for msg in chat(41, words=5):
        conv.add_many([msg])
    assert mem.wait_idle(30)
    log = conv.compaction_log()
    assert len(log) == 1 and log[0]["reason"] == "message count over limit (41 raw > 40)"
    assert conv.summaries() and conv.active_tokens() < 128_000 * 0.75
    assert mem.store.last_seq("c") - mem.store.covered_seq("c") <= 8


def test_interval_trigger(store_target: StoreTarget, tmp_path: Path) -> None:
    mem = lossless.open(store_target("i"), embedder=None, compact_interval_seconds=3, fresh_tail_count=4)
    conv = mem.conversation("c")
    # the interval counts on the store's clock, from when the conversation was stored: the
    # messages' own times (from last year) do not make it overdue
    conv.add_many(chat(10, words=5))
    assert mem.wait_idle(30)
    assert conv.compaction_log() == []
    time.sleep(3.1)
    conv.add("user", "three seconds later")
    assert mem.wait_idle(30)
    log = conv.compaction_log()
    assert log and log[0]["reason"].startswith("interval elapsed")
    # the next message is within the interval of that compaction: no new run
    conv.add("user", "one more")
    assert mem.wait_idle(30)
    assert len(conv.compaction_log()) == 1


def test_seed_trigger_defaults() -> None:
    """Seed 003: token count, 500 messages and one hour since the last compaction."""
    cfg = lossless.Config()
    assert (cfg.compact_after_messages, cfg.compact_interval_seconds) == (500, 3600.0)


def test_worker_fires_the_interval_on_a_timer(store_target: StoreTarget) -> None:
    """A conversation that got messages and went quiet is compacted by the worker once the
    interval has passed, without another write."""
    from datetime import UTC, datetime

    mem = lossless.open(store_target("q"), embedder=None, context_window=128_000, compact_after_messages=None,
                        compact_interval_seconds=2, fresh_tail_count=4, leaf_target_tokens=100)
    conv = mem.conversation("quiet")
    conv.add_many(chat(30, words=40, start=datetime.now(UTC)))  # written now: the interval runs from here
    assert mem.wait_idle(30)
    assert conv.compaction_log() == []  # under every trigger when the messages arrived
    assert "quiet" in mem.backlog.timers()
    deadline = time.monotonic() + 20
    while not conv.compaction_log() and time.monotonic() < deadline:
        time.sleep(0.2)  # no write: only the worker's timer can start it
    log = conv.compaction_log()
    assert log and log[0]["reason"].startswith("interval elapsed")
    assert conv.summaries() and mem.verify() == []
    mem.close()


def test_manual_and_chat_command_triggers(store_target: StoreTarget, tmp_path: Path) -> None:
    mem = lossless.open(store_target("c"), embedder=None, fresh_tail_count=4)
    conv = mem.conversation("c")
    conv.add_many(chat(20, words=5))
    assert mem.wait_idle(30)
    assert conv.compaction_log() == []  # far under every trigger
    conv.add("user", "/compact")  # asks the worker for a compaction, trigger or not
    assert mem.wait_idle(30)
    assert conv.compaction_log()[0]["reason"] == "/compact command"
    assert conv.messages()[-1].content == "/compact"  # the command is kept like any message
    conv.add_many(chat(20, words=5))
    conv.compact()
    assert conv.compaction_log()[0]["reason"] == "manual"
    conv.compact(reason="nightly job")
    assert conv.compaction_log()[0]["reason"] == "nightly job"


def test_chat_commands_can_be_switched_off(store_target: StoreTarget, tmp_path: Path) -> None:
    mem = lossless.open(store_target("off"), embedder=None, chat_commands=False)
    conv = mem.conversation("c")
    conv.add_many(chat(20, words=5))
    conv.add("user", "/compact")
    assert mem.wait_idle(30)
    assert conv.compaction_log() == []


def test_cooldown_stops_a_storm_but_new_material_rearms(store_target: StoreTarget, tmp_path: Path) -> None:
    # a window so small the protected tail alone is over the trigger: compaction cannot help
    mem = lossless.open(store_target("s"), embedder=None, context_window=256, compaction_cooldown_seconds=3600)
    conv = mem.conversation("c")
    conv.add("user", "word " * 400)
    assert mem.wait_idle(30)
    runs = len(conv.compaction_log())
    for _ in range(5):
        conv.add("user", "ok")  # tiny messages: no storm of fruitless runs
        assert mem.wait_idle(30)
    assert len(conv.compaction_log()) == runs
    conv.add("assistant", "detail " * 400)  # a leaf's worth of new text re-arms it
    assert mem.wait_idle(30)
    assert len(conv.compaction_log()) > runs


def test_two_threads_never_compact_one_conversation_at_once(store_target: StoreTarget, tmp_path: Path) -> None:
    slow = SlowSummarizer(0.3)
    mem = lossless.open(store_target("r"), embedder=None, summarizer=slow, auto_compact=False)
    conv = mem.conversation("c")
    conv.add_many(chat(120, words=40))
    reports: list[lossless.CompactionReport] = []
    first = threading.Thread(target=lambda: reports.append(conv.compact()))
    first.start()
    assert slow.started.wait(10)
    assert conv.state == "COMPACTING"
    second = mem.compactor.compact("c", force=True)  # no wait: refused at once, nothing changed
    assert second.busy and second.skipped and "another compaction" in second.skipped and not second.created
    first.join(30)
    assert conv.state == "ACTIVE"
    assert reports[0].created and mem.verify() == []
    assert len(conv.compaction_log()) == 1


_HOLDER = """
import sys, time
import lossless
from lossless.summarize.base import SummaryResult

class Slow:
    name = "slow"
    def summarize(self, request):
        print("started", flush=True)
        time.sleep(float(sys.argv[2]))
        return SummaryResult(f"Span #{request.items[0].first_seq}-#{request.items[-1].last_seq}.")

mem = lossless.open(sys.argv[1], embedder=None, summarizer=Slow(), auto_compact=False)
report = mem.conversation("c").compact()
print("done", len(report.created), flush=True)
"""


def test_another_process_holding_the_lease_blocks_compaction_and_tools(store_target: StoreTarget, tmp_path: Path) -> None:
    db = store_target("p")
    mem = lossless.open(db, embedder=None, auto_compact=False, tool_wait_seconds=0.2)
    conv = mem.conversation("c")
    conv.add_many(chat(120, words=40))
    before = [m.content for m in conv.messages()]
    script = tmp_path / "holder.py"
    script.write_text(textwrap.dedent(_HOLDER))
    proc = subprocess.Popen([sys.executable, str(script), str(db), "0.4"], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "started"
        assert conv.state == "COMPACTING"
        refused = mem.compactor.compact("c", force=True)
        assert refused.busy and refused.skipped and "another compaction" in refused.skipped
        result = conv.tools.dispatch({"id": "call_1", "type": "function",
                                      "function": {"name": "lcm_grep", "arguments": json.dumps({"query": "service"})}})
        assert "being compacted" in result["content"]
        waited = mem.compactor.compact("c", force=True, wait=60)  # waits for the other process
        out, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert out.strip().startswith("done") and int(out.split()[-1]) > 0
    assert waited.skipped is None and not waited.busy
    assert conv.state == "ACTIVE"
    assert [m.content for m in conv.messages()] == before and mem.verify() == []
    reasons = [e["reason"] for e in conv.compaction_log()]
    assert reasons == ["manual", "manual"]


def test_a_dead_holders_lease_is_taken_over(store_target: StoreTarget, tmp_path: Path) -> None:
    mem = lossless.open(store_target("d"), embedder=None, auto_compact=False)
    conv = mem.conversation("c")
    conv.add_many(chat(60, words=30))
    assert mem.store.acquire_lease("c", "host:1:1:dead", "manual", stale_after=0.05)
    assert conv.state == "COMPACTING"
    time.sleep(0.1)  # the holder never heart-beats again
    assert conv.state == "ACTIVE"
    assert conv.compact().created


def test_bad_policy_values_are_refused() -> None:
    with pytest.raises(lossless.ValidationError, match="compact_after_messages"):
        lossless.open(":memory:", embedder=None, compact_after_messages=0)
    with pytest.raises(lossless.ValidationError, match="compact_interval_seconds"):
        lossless.open(":memory:", embedder=None, compact_interval_seconds=-5)
    with pytest.raises(lossless.ValidationError, match="compaction_cooldown_seconds"):
        lossless.open(":memory:", embedder=None, compaction_cooldown_seconds=-1)


def test_a_compaction_with_nothing_to_do_is_skipped_but_not_busy(tmp_path: Path) -> None:
    """Callers tell "another compaction holds it" (retry later, HTTP 409) from every other
    skip by ``report.busy``, not by the wording of ``skipped``."""
    with lossless.open(str(tmp_path / "idle.db"), embedder=None) as mem:
        conv = mem.conversation("c")
        conv.add("user", "hello")
        report = mem.compactor.compact("c")  # under every trigger: nothing to do
        assert report.skipped and not report.busy and not report.created
