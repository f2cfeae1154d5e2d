"""The bounded search paths that only large stores reach, exercised on small ones by
lowering their thresholds: common words dropped for rarer ones, all-common queries ranked
by recency, and a small conversation in a big store searched by reading its own rows."""

from __future__ import annotations

from pathlib import Path

import pytest

import lossless
from lossless.store.sqlite import grep as sqlite_search
from tests.conftest import StoreTarget


def _fill(mem: lossless.Memory, cid: str, n: int, secret: str) -> None:
    conv = mem.conversation(cid)
    rows = [{"role": "user" if i % 2 == 0 else "assistant",
             "content": f"the billing service uses port {8000 + i} for traffic"} for i in range(n)]
    rows[n // 3] = {"role": "user", "content": f"the billing service keeps the {secret} token in vault"}
    conv.add_many(rows)


@pytest.fixture
def mem(store_target: StoreTarget, tmp_path: Path) -> lossless.Memory:
    m = lossless.open(store_target("s"), embedder=None, auto_compact=False)
    _fill(m, "big", 300, "zebra-77")
    for i in range(20):
        _fill(m, f"small{i}", 12, f"secret{i}")
    return m


def test_common_words_are_dropped_for_rare_ones(mem: lossless.Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite_search, "WORK_CAP", 20)
    monkeypatch.setattr(sqlite_search, "SCAN_MAX", 0)  # keep to the index paths
    hits = mem.conversation("big").search("billing service zebra-77 token")
    assert hits and "zebra-77" in hits[0].snippet


def test_all_common_words_rank_the_newest(mem: lossless.Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite_search, "WORK_CAP", 20)
    monkeypatch.setattr(sqlite_search, "SCAN_MAX", 0)
    hits = mem.conversation("big").search("billing service traffic", limit=5)
    seqs = [h.first_seq for h in hits]
    assert len(hits) == 5 and seqs == sorted(seqs, reverse=True) and seqs[0] == 300
    assert all(h.conversation_id == "big" for h in hits)


@pytest.mark.sqlite_only(reason="the SQLite store's memo of words too common to weigh")
def test_a_word_found_too_common_is_not_counted_again(mem: lossless.Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite_search, "WORK_CAP", 20)
    monkeypatch.setattr(sqlite_search, "SCAN_MAX", 0)
    counted: list[str] = []
    real = sqlite_search._capped_count

    def spy(store: object, index: str, query: str, cap: int) -> int:
        counted.append(query)
        return real(store, index, query, cap)  # type: ignore[arg-type]

    monkeypatch.setattr(sqlite_search, "_capped_count", spy)
    conv = mem.conversation("big")
    first = conv.search("billing service zebra-77 token")
    first_counts = list(counted)
    counted.clear()
    again = conv.search("billing service zebra-77 token")
    assert [(h.id, h.score) for h in again] == [(h.id, h.score) for h in first]
    assert '"billing"' in first_counts and '"billing"' not in counted  # remembered as common
    assert len(counted) < len(first_counts)
    # an erasure forgets what was remembered: a word may be in fewer messages now
    assert mem.store.common_terms
    victim = next(m for m in conv.messages() if "zebra-77" not in (m.content or ""))
    conv.erase([victim.id], reason="test", by="tester")
    assert not mem.store.common_terms


@pytest.mark.sqlite_only(reason="spies on the SQLite store's direct scan of a small conversation (sqlite_search)")
def test_a_small_conversation_is_read_directly(mem: lossless.Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real = sqlite_search._scan

    def spy(*args: object, **kwargs: object) -> list[tuple[int, float]]:
        calls.append("scan")
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(sqlite_search, "_scan", spy)
    conv = mem.conversation("small7")
    hits = conv.search("secret7 token")
    assert calls and hits and "secret7" in hits[0].snippet
    assert all(h.conversation_id == "small7" for h in hits)
    assert not conv.search("zebra-77")  # another conversation's secret stays there
    # whole words only, as the index would: "port" does not find "ports" or "sport"
    assert all("port" in h.snippet for h in conv.search("port"))
    # the same answers as the index gives
    monkeypatch.setattr(sqlite_search, "SCAN_MAX", 0)
    indexed = conv.search("secret7 token")
    assert indexed[0].id == hits[0].id


def test_scan_handles_chinese(store_target: StoreTarget, tmp_path: Path) -> None:
    m = lossless.open(store_target("zh"), embedder=None, auto_compact=False)
    m.conversation("filler").add_many([{"role": "user", "content": f"message {i}"} for i in range(200)])
    conv = m.conversation("zh")
    conv.add_many([{"role": "user", "content": "我们决定把数据库迁移到新集群"},
                   {"role": "assistant", "content": "好的，迁移计划已经确认"},
                   {"role": "user", "content": "测试覆盖率是多少"}])
    hits = conv.search("迁移到新集群")
    assert hits and "新集群" in hits[0].snippet
    assert conv.search("覆盖")  # a two-character term


@pytest.mark.sqlite_only(reason="regexes run in Python beside SQLite, guarded; PostgreSQL runs its own regex engine")
def test_a_catastrophic_regex_is_stopped(store_target: StoreTarget, tmp_path: Path) -> None:
    m = lossless.open(store_target("rx"), embedder=None)
    conv = m.conversation("c")
    conv.add("user", "a" * 40 + "!")
    with pytest.raises(lossless.QueryError, match="nests a repetition"):
        conv.search("(a+)+$", mode="regex")
    with pytest.raises(lossless.QueryError, match="took longer"):
        conv.search("(a|aa){2,}b", mode="regex")
    assert conv.search("a{3}!", mode="regex")
