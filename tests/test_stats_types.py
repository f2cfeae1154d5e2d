"""Typed results where callers branch (issue 28): ``Conversation.backlog()``,
``Conversation.stats()`` and ``Memory.stats()`` are frozen dataclasses with typed fields,
and each ``to_dict()`` is exactly the JSON the CLI (``--json``) and the HTTP API give."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, get_type_hints

import httpx
import pytest

import lossless
from lossless.cli.main import main
from lossless.core.stats import BacklogSummary, SummarizerUsage, WorkerCounters
from tests.conftest import StoreTarget, chat
from tests.server_support import served

# The wire shapes as they were when these were dicts: the contract the JSON keeps
CONVERSATION_KEYS = [
    "conversation", "messages", "message_tokens", "summaries", "max_depth", "frontier_summaries",
    "frontier_tokens", "raw_tail_messages", "raw_tail_tokens", "active_tokens", "context_window",
    "summarizer_calls", "summarizer_input_tokens", "summarizer_output_tokens", "summarizer_seconds",
    "summaries_by_summarizer", "summaries_by_fallback", "summarizer_cost_ratio", "backlog",
]
BACKLOG_KEYS = ["queued", "queued_seconds", "in_progress", "messages_not_indexed", "units_not_embedded",
                "compaction_due", "failed_attempts", "last_error"]
MEMORY_KEYS = ["compaction", "backlog", "worker", "workers", "breaker"]
BACKLOG_SUMMARY_KEYS = ["conversations", "oldest_seconds", "in_progress", "failing", "errors"]
COMPRESSION_KEYS = {"raw_tokens", "active_context_tokens", "compression_ratio", "summaries_per_depth",
                    "summary_tokens_per_depth"}  # what ``lossless stats CONV`` adds


def _filled(target: str) -> lossless.Memory:
    """A store with one compacted conversation and nothing owed; its window saved, so the
    CLI opens it with the same config."""
    mem = lossless.open(target, context_window=2048, embedder=None)
    mem.save_settings(context_window=2048)
    mem.conversation("c").add_many(chat(120, words=30))
    assert mem.wait_idle(60)
    return mem


def test_backlog_fields_are_typed(store_target: StoreTarget) -> None:
    with _filled(store_target("typed")) as mem:
        owed = mem.conversation("c").backlog()
    assert isinstance(owed, lossless.ConversationBacklog)
    assert type(owed.units_not_embedded) is int and type(owed.messages_not_indexed) is int
    assert type(owed.failed_attempts) is int and type(owed.queued_seconds) is float
    assert owed.queued is False and owed.in_progress is False and owed.compaction_due is None
    assert list(owed.to_dict()) == BACKLOG_KEYS
    with pytest.raises(dataclasses.FrozenInstanceError):
        owed.queued = True  # type: ignore[misc]
    with pytest.raises(TypeError):
        owed["queued"]  # type: ignore[index]  # no dict pretence: one name for each thing


def test_stats_fields_are_typed(store_target: StoreTarget) -> None:
    with _filled(store_target("typed")) as mem:
        stats = mem.conversation("c").stats()
        store = mem.stats()
    assert isinstance(stats, lossless.ConversationStats)
    assert stats.conversation == "c" and stats.messages == 120 and stats.summaries > 0 and stats.max_depth >= 0
    assert all(type(getattr(stats, f)) is int for f in ("messages", "message_tokens", "summaries", "max_depth",
                                                         "frontier_tokens", "raw_tail_tokens", "active_tokens"))
    assert isinstance(stats.usage, SummarizerUsage) and stats.usage.summaries_by_summarizer
    assert isinstance(stats.backlog, lossless.ConversationBacklog)
    assert list(stats.to_dict()) == CONVERSATION_KEYS
    assert list(stats.to_dict()["backlog"]) == BACKLOG_KEYS

    assert isinstance(store, lossless.MemoryStats) and isinstance(store.backlog, BacklogSummary)
    assert store.compaction == "background" and store.backlog.conversations == 0 and store.breaker is None
    assert set(store.worker) == set(get_type_hints(WorkerCounters))
    assert list(store.to_dict()) == MEMORY_KEYS and list(store.to_dict()["backlog"]) == BACKLOG_SUMMARY_KEYS
    json.dumps(stats.to_dict())
    json.dumps(store.to_dict())


def _cli_json(target: str, capsys: pytest.CaptureFixture[str], *args: str) -> Any:
    capsys.readouterr()
    assert main(["--db", target, "--json", *args]) == 0
    return json.loads(capsys.readouterr().out)


def test_conversation_stats_to_dict_is_the_cli_json(store_target: StoreTarget,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    target = store_target("cli")
    with _filled(target) as mem:
        expected = mem.conversation("c").stats().to_dict()
        owed = mem.stats().backlog.to_dict()
    shown = _cli_json(target, capsys, "stats", "c")
    assert {k: v for k, v in shown.items() if k not in COMPRESSION_KEYS} == expected
    assert list(shown)[: len(expected)] == list(expected)  # the same keys, in the same order
    totals = _cli_json(target, capsys, "stats")
    assert totals["backlog"] == owed  # Memory.stats().backlog, as ``lossless stats`` gives it


def test_stats_to_dict_is_the_http_json(backend_target: str, tmp_path: Path) -> None:
    with _filled(backend_target) as mem, served(mem) as server, httpx.Client(base_url=server.url) as api:
        shown = api.get("/v1/lossless/conversations/c/stats").json()
        assert shown == mem.conversation("c").stats().to_dict()
        health = api.get("/v1/lossless/health").json()
        store = mem.stats().to_dict()
    # the operator's health: the backlog is counted over the tenant, the rest is Memory.stats()
    assert health["compaction"] == store["compaction"] and health["breaker"] == store["breaker"]
    assert set(health["worker"]) == set(store["worker"])
    assert [w["owner"] for w in health["workers"]] == [w["owner"] for w in store["workers"]]
    assert set(health["backlog"]) == set(store["backlog"]) - {"errors"}
