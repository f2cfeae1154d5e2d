"""An erased message reads ``[erased]``: a vector of that marker would be a near match for
any short question, so a semantic search answered erased messages ahead of real ones. An
erased message gets no retrieval unit (nothing of it is left to find by meaning), whether
it was cut before the erase or after; keyword search still lists it by its marker."""

from __future__ import annotations

import lossless
from lossless.core.erasure import ERASED
from lossless.store.runner import sql_runner
from lossless.testing import HashEmbedder

from .backends import StoreTarget

TEXTS = ["the billing service moved to port 7311", "我们下周去杭州开会", "my sister lives in Ghent now",
         "部署脚本在周五晚上失败了三次", "the cat knocked the plant over"]


def _units(mem: lossless.Memory, cid: str) -> list[str]:
    return [r[0] for r in sql_runner(mem.store).query(
        "SELECT text FROM recall_units WHERE conversation_id = ? AND kind = 'message'", (cid,))]


def test_an_erased_message_is_no_semantic_hit(store_target: StoreTarget) -> None:
    with lossless.open(store_target("e"), embedder=HashEmbedder(), auto_compact=False) as mem:
        conv = mem.conversation("c")
        added = conv.add_many([{"role": "user", "content": t} for t in TEXTS])
        conv.index()  # cut and embedded before the erase
        conv.erase([added[2].id], reason="asked to", by="test")
        later = conv.add(role="user", content="a secret I regret: the safe code is 0451")
        conv.erase([later.id], reason="asked to", by="test")  # erased before it was ever cut
        assert mem.wait_idle(timeout=60)
        conv.index()
        hits = conv.search("where does she live", mode="semantic", kinds=("message",), limit=20)
        assert hits and {h.id for h in hits} & {added[2].id, later.id} == set()
        assert not any(text.endswith(ERASED) for text in _units(mem, "c"))
        assert conv.backlog().units_not_embedded == 0
        # by keywords the marker still finds them
        assert {h.id for h in conv.search("erased", kinds=("message",))} == {added[2].id, later.id}
