"""Ctrl-C in an import, at the two moments a process test hits only by luck: just after a
batch committed (the report must count it) and inside the first batch of a conversation
the import created (no empty conversation left behind). Both stores."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import lossless
from lossless.conversation import Conversation
from lossless.importers.load import ImportInterrupted, import_file
from tests.conftest import StoreTarget


def _file(tmp_path: Path, counts: dict[str, int]) -> Path:
    path = tmp_path / "chats.jsonl"
    with path.open("w", encoding="utf-8") as f:
        for conv, n in counts.items():
            for i in range(n):
                f.write(json.dumps({"conversation": conv, "role": "user" if i % 2 == 0 else "assistant",
                                    "content": f"第{i}条：周末去公园还是咖啡馆？"}, ensure_ascii=False) + "\n")
    return path


def _interrupt(monkeypatch: pytest.MonkeyPatch, when: Callable[[int, str], str | None]) -> None:
    """Conversation.add_many raising Ctrl-C on the call ``when`` names: "before" it writes
    (the batch is never stored) or "after" it committed (not yet counted)."""
    plain = Conversation.add_many
    calls = [0]

    def add_many(self: Conversation, *args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        moment = when(calls[0], self.id)
        if moment == "before":
            raise KeyboardInterrupt
        out = plain(self, *args, **kwargs)
        if moment == "after":
            raise KeyboardInterrupt
        return out

    monkeypatch.setattr(Conversation, "add_many", add_many)


def _stored(mem: lossless.Memory) -> dict[str, int]:
    return {c.id: c.message_count for c in mem.conversations()}


def test_a_batch_committed_just_before_ctrl_c_is_reported(store_target: StoreTarget, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    path = _file(tmp_path, {"会话一": 25, "会话二": 25})
    # batches of 10 as the file is read: 会话一 10, 10, 会话二 10, 10 (the 4th), then the rest
    _interrupt(monkeypatch, lambda n, _: "after" if n == 4 else None)
    with lossless.open(store_target("interrupt-count"), embedder=None) as mem:
        with pytest.raises(ImportInterrupted) as caught:
            import_file(mem, path, batch_size=10)
        report = caught.value.report
        assert report.interrupted
        stored = _stored(mem)
        assert stored == {"会话一": 20, "会话二": 20}
        assert {c: n for c, n in report.added.items() if n} == stored  # it said 30 before
        assert sum(report.added.values()) == 40


def test_ctrl_c_in_a_new_conversation_s_first_batch_leaves_no_empty_conversation(
        store_target: StoreTarget, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _file(tmp_path, {"旧的": 12, "新的": 12})
    target = store_target("interrupt-empty")
    with lossless.open(target, embedder=None) as mem:  # 旧的 holds messages already, and stays
        mem.conversation("旧的").add("user", "之前的消息")
    _interrupt(monkeypatch, lambda _, conv: "before" if conv == "新的" else None)
    with lossless.open(target, embedder=None) as mem:
        with pytest.raises(ImportInterrupted) as caught:
            import_file(mem, path, batch_size=10)
        assert _stored(mem) == {"旧的": 11}  # 新的 was created for its first batch, rolled back: gone
        assert mem.get_conversation("新的") is None
        assert {c: n for c, n in caught.value.report.added.items() if n} == {"旧的": 10}
    monkeypatch.undo()
    with lossless.open(target, embedder=None) as mem:  # the same command again completes it
        import_file(mem, path, batch_size=10)
        assert _stored(mem)["新的"] == 12
        assert mem.verify() == []


def test_a_conversation_with_messages_is_never_dropped(store_target: StoreTarget) -> None:
    with lossless.open(store_target("drop-if-empty"), embedder=None) as mem:
        mem.conversation("有消息").add("user", "你好")
        mem.conversation("空的")
        assert not mem.store.drop_if_empty("有消息") and mem.get_conversation("有消息") is not None
        assert mem.store.drop_if_empty("空的") and mem.get_conversation("空的") is None
        assert not mem.store.drop_if_empty("空的")  # (gone already)
