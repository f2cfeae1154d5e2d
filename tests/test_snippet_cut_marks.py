"""A search snippet cut from a longer text says so at each end it was cut (…), in every
mode: keyword snippets did, regex and vector ones ended mid-sentence without a mark, read
as if the text stopped there."""

from __future__ import annotations

import lossless
from lossless.testing import HashEmbedder
from tests.conftest import StoreTarget

LONG = "今天天气很好，我们讨论了很多事情。" * 30 + "关键是数据库迁移要在周五完成。" + "其他的内容都不重要。" * 30


def test_a_regex_snippet_cut_at_its_end_ends_with_an_ellipsis(store_target: StoreTarget) -> None:
    with lossless.open(store_target("regex_snippet"), embedder=None) as mem:
        conv = mem.conversation("c")
        conv.add(role="user", content=LONG)
        conv.add(role="user", content="数据库迁移完成。")
        hits = {h["first_seq"]: h["snippet"] for h in conv.grep("数据库迁移", mode="regex")["hits"]}
    assert hits[1].startswith("…") and hits[1].endswith("…") and "数据库迁移" in hits[1]
    assert hits[2] == "数据库迁移完成。"  # whole: no mark


def test_a_vector_snippet_cut_at_its_end_ends_with_an_ellipsis() -> None:
    with lossless.open(":memory:", embedder=HashEmbedder()) as mem:
        conv = mem.conversation("c")
        conv.add(role="user", content="deploy 失败 " * 60)
        conv.add(role="user", content="deploy 成功")
        hits = conv.grep("deploy", mode="semantic")["hits"]
    snippets = {h["first_seq"]: h["snippet"] for h in hits if h.get("matched") == "vector"}
    assert snippets[1].endswith("…") and len(snippets[1]) == 161
    assert not snippets[2].endswith("…")
