"""Nothing embedded twice (issue 29 item 3).

A text embedded once is not embedded again: the embedding cache is keyed by (provider,
model, sha256(text)) and shared by every conversation of a store, so the same message in
two conversations, or a chat imported again, costs the model nothing new. An erase still
takes the erased text's cached vectors with it.

One assembly embeds its question once. Recall's look-ahead embedded it on a thread while
the long-term memory search and the file search looked it up in the cache (where the
look-ahead had not written it yet) and embedded it again: two or three model calls for
one question. :class:`lossless.recall.queries.QueryVectors` now hands every search of
the same question the one vector.

The store tests run on SQLite and, with ``--store=postgres``, on PostgreSQL.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lossless
from lossless.core.errors import EmbedderError
from lossless.embed.base import Vectors
from lossless.importers import import_file
from lossless.recall.queries import QueryVectors
from lossless.recall.units import text_sha256
from lossless.testing import HashEmbedder

from .backends import StoreTarget, raw_query

QUESTION = "What does Ann's sister do for work?"


def _chat(n: int, tag: str = "") -> list[dict[str, Any]]:
    topics = ["the weather", "lunch", "the train", "a film", "the weekend", "coffee", "work", "a book"]
    return [{"role": "user" if i % 2 == 0 else "assistant",
             "content": f"Turn {i}{tag}: just thinking about {topics[i % len(topics)]} and Ann's sister again."}
            for i in range(n)]


def _unit_sha(row: dict[str, Any]) -> str:
    """The embedding cache's key of a message's text as recall embeds it (its writer first)."""
    return text_sha256(f"{row['role']}: {row['content']}")


def _asked(emb: HashEmbedder, text: str) -> int:
    return emb.texts.count(text)


def test_the_same_text_in_two_conversations_is_embedded_once(store_target: StoreTarget) -> None:
    target = store_target("two")
    emb = HashEmbedder()
    with lossless.open(target, embedder=emb) as mem:
        mem.conversation("a").add_many(_chat(30))
        assert mem.wait_idle(timeout=120)
        first = len(emb.texts)
        assert first == 30
        mem.conversation("b").add_many(_chat(30))
        assert mem.wait_idle(timeout=120)
        assert len(emb.texts) == first, "the second conversation's texts were embedded again"
        assert mem.conversation("b").backlog().units_not_embedded == 0
        hits = mem.conversation("b").search("weather Ann", mode="semantic", limit=5)
        assert hits and all(h.conversation_id == "b" for h in hits)
    # each conversation has its own vectors, made from the one cached embedding per text
    # (and the search's question has one)
    assert int(raw_query(target, "SELECT count(*) FROM embedding_cache")[0][0]) == 30 + 1


def _write_jsonl(path: Path, rows: Sequence[dict[str, Any]], *, ids: bool) -> None:
    with path.open("w", encoding="utf-8") as f:
        for i, r in enumerate(rows):
            line = {"conversation": "chat", **r, **({"external_id": f"m{i}"} if ids else {})}
            f.write(json.dumps(line) + "\n")


def test_a_reimport_embeds_nothing_new(store_target: StoreTarget, tmp_path: Path) -> None:
    """The same chat imported again, in the same process or a later one, with external ids
    (nothing stored twice) or without (stored again, its texts found in the cache)."""
    target = store_target("import")
    rows = _chat(60)
    with_ids, without = tmp_path / "ids.jsonl", tmp_path / "plain.jsonl"
    _write_jsonl(with_ids, rows, ids=True)
    _write_jsonl(without, rows, ids=False)
    emb = HashEmbedder()
    with lossless.open(target, embedder=emb) as mem:
        assert sum(import_file(mem, with_ids).added.values()) == 60
        assert mem.wait_idle(timeout=120)
        assert len(emb.texts) == 60
    for path, conversation in ((with_ids, None), (without, None), (without, "again")):
        later = HashEmbedder()  # a later run: a new process's embedder, the same model
        with lossless.open(target, embedder=later) as mem:
            import_file(mem, path, conversation=conversation)
            assert mem.wait_idle(timeout=120)
            assert later.texts == [], f"{path.name} -> {conversation}: embedded again"
            assert mem.recaller.count_unembedded() == {"conversations": 0, "messages": 0, "units": 0}


def _open_with_everything(target: str, emb: HashEmbedder, tmp_path: Path) -> lossless.Memory:
    """A store with a chat, a long-term memory in the chat's scope and an indexed file."""
    doc = tmp_path / "api.md"
    doc.write_text("# API doc\n\nThe endpoint /v1/items returns items. Auth uses a bearer token.\n" * 10)
    mem = lossless.open(target, embedder=emb, context_window=4096)
    mem.memories.add("Ann's sister is a nurse in Porto", user="u1")
    mem.files.index([doc])
    conv = mem.conversation("c", metadata={"user": "u1"})
    conv.add_many(_chat(60))
    assert mem.wait_idle(timeout=120)
    return mem


@pytest.mark.parametrize("layout", ["budgeted", "stable"])
def test_one_assembly_embeds_its_question_once(store_target: StoreTarget, tmp_path: Path, layout: str) -> None:
    """Recall, the long-term memories and the file chunks all search the question; the
    model reads it once, and not again when it is asked again."""
    emb = HashEmbedder()
    with _open_with_everything(store_target("ask"), emb, tmp_path) as mem:
        before = len(emb.texts)
        ctx = mem.assembler.assemble("c", 3000, QUESTION, layout=layout)  # type: ignore[arg-type]
        assert "nurse in Porto" in json.dumps(ctx.messages), "the memory search did not run"
        assert emb.texts[before:] == [QUESTION]
        mem.assembler.assemble("c", 3000, QUESTION, layout=layout)  # type: ignore[arg-type]
        question = "Which endpoint returns items, in the API doc?"
        mem.assembler.assemble("c", 3000, question, layout=layout)  # type: ignore[arg-type]
        assert _asked(emb, QUESTION) == 1 and _asked(emb, question) == 1


def test_a_search_embeds_its_question_once(store_target: StoreTarget, tmp_path: Path) -> None:
    emb = HashEmbedder()
    with _open_with_everything(store_target("search"), emb, tmp_path) as mem:
        for _ in range(3):
            mem.conversation("c").search(QUESTION, mode="hybrid", limit=5)
            mem.search(QUESTION, mode="semantic", limit=5)
            mem.memories.search(QUESTION, user="u1")
        assert _asked(emb, QUESTION) == 1


def test_a_question_embedded_in_another_process_is_not_embedded_again(store_target: StoreTarget,
                                                                       tmp_path: Path) -> None:
    target = store_target("later")
    emb = HashEmbedder()
    _open_with_everything(target, emb, tmp_path).close()
    with lossless.open(target, embedder=emb) as mem:
        mem.conversation("c").assemble(budget_tokens=3000, query=QUESTION)
    later = HashEmbedder()
    with lossless.open(target, embedder=later) as mem:
        mem.conversation("c").assemble(budget_tokens=3000, query=QUESTION)
        assert later.texts == []


def test_an_erase_still_scrubs_the_cached_vectors(store_target: StoreTarget) -> None:
    """The cache holds vectors, and a vector is the text in another form: erasing a
    conversation removes its texts' cached vectors (even those another conversation's
    messages were also embedded from), and the erased text, added again, is embedded anew."""
    target = store_target("erase")
    emb = HashEmbedder()
    secret = "My locker code is 4417 and the spare key is under the blue pot."
    with lossless.open(target, embedder=emb) as mem:
        gone = mem.conversation("gone")
        gone.add_many([*_chat(10, " gone"), {"role": "user", "content": secret}])
        kept = mem.conversation("kept")
        kept.add_many(_chat(10, " kept"))
        assert mem.wait_idle(timeout=120)
        gone.assemble(budget_tokens=2000, query="what is the locker code?")
        mem.erase_conversation("gone", reason="user asked", by="test")
        assert mem.wait_idle(timeout=120)
    erased = {_unit_sha(r) for r in [*_chat(10, " gone"), {"role": "user", "content": secret}]}
    cached = {str(r[0]) for r in raw_query(target, "SELECT text_sha256 FROM embedding_cache")}
    assert not cached & erased
    assert {_unit_sha(r) for r in _chat(10, " kept")} <= cached
    again = HashEmbedder()
    with lossless.open(target, embedder=again) as mem:
        mem.conversation("new").add(role="user", content=secret)
        assert mem.wait_idle(timeout=120)
        assert again.texts == [f"user: {secret}"]


# -- QueryVectors on its own -------------------------------------------------------------


class _Cache:
    """An embedding cache in a dict, as the store's recall index keeps one in a table."""

    def __init__(self) -> None:
        self.rows: dict[tuple[str, str, str], np.ndarray] = {}
        self.lock = threading.Lock()

    def cached(self, provider: str, model: str, shas: Sequence[str]) -> dict[str, np.ndarray]:
        with self.lock:
            return {s: self.rows[(provider, model, s)] for s in shas if (provider, model, s) in self.rows}

    def cache_put(self, provider: str, model: str, items: Sequence[tuple[str, np.ndarray]]) -> None:
        with self.lock:
            for sha, vec in items:
                self.rows.setdefault((provider, model, sha), vec)


class _Gated(HashEmbedder):
    """Embeds only once ``gate`` is set, so several threads ask while one computes."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()

    def embed(self, texts: Sequence[str]) -> Vectors:
        assert self.gate.wait(30)
        return super().embed(texts)


class _ThreadBound(HashEmbedder):
    """Fails on any thread but the one that made it (an embedder bound to its thread)."""

    def __init__(self) -> None:
        super().__init__()
        self.home = threading.get_ident()

    def embed(self, texts: Sequence[str]) -> Vectors:
        if threading.get_ident() != self.home:
            raise RuntimeError("wrong thread")
        return super().embed(texts)


def test_questions_asked_at_once_are_embedded_once() -> None:
    emb, cache, queries = _Gated(), _Cache(), QueryVectors()
    queries.start(emb, cache, QUESTION)  # the look-ahead, waiting at the gate
    out: list[np.ndarray] = []
    threads = [threading.Thread(target=lambda: out.append(queries.vector(emb, cache, QUESTION))) for _ in range(4)]
    for t in threads:
        t.start()
    emb.gate.set()
    for t in threads:
        t.join(30)
    queries.close()
    assert len(out) == 4 and all(np.array_equal(v, out[0]) for v in out)
    assert emb.texts == [QUESTION]
    assert list(cache.rows) == [(emb.provider, emb.model, text_sha256(QUESTION))]


def test_a_failed_look_ahead_is_embedded_on_the_asking_thread() -> None:
    emb, cache, queries = _ThreadBound(), _Cache(), QueryVectors()
    queries.start(emb, cache, QUESTION)
    vec = queries.vector(emb, cache, QUESTION)
    queries.close()
    assert np.array_equal(vec, HashEmbedder().embed([QUESTION])[0])
    assert emb.texts == [QUESTION]  # the look-ahead's call failed before the model read it
    assert (emb.provider, emb.model, text_sha256(QUESTION)) in cache.rows


def test_two_models_never_share_a_question_vector() -> None:
    small, large, cache, queries = HashEmbedder(), HashEmbedder(model="hash-other"), _Cache(), QueryVectors()
    queries.vector(small, cache, QUESTION)
    queries.vector(large, cache, QUESTION)
    assert small.texts == [QUESTION] and large.texts == [QUESTION]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(asked=st.lists(st.sampled_from(["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k"]), max_size=40),
       kept=st.integers(1, 4), ahead=st.lists(st.booleans(), min_size=40, max_size=40))
def test_every_question_is_embedded_once_and_gets_its_own_vector(asked: list[str], kept: int,
                                                                  ahead: list[bool]) -> None:
    """Whatever the order, the repeats, the look-aheads and how few are remembered: each
    distinct question is embedded once (the cache keeps what memory forgets), and each
    answer is that question's vector."""
    emb, cache, queries = HashEmbedder(), _Cache(), QueryVectors(kept=kept)
    reference = HashEmbedder()
    try:
        for question, early in zip(asked, ahead, strict=False):
            if early:
                queries.start(emb, cache, question)
            assert np.array_equal(queries.vector(emb, cache, question), reference.embed([question])[0])
    finally:
        queries.close()
    assert sorted(emb.texts) == sorted(set(asked))


def test_an_embedder_error_is_raised_and_not_remembered() -> None:
    class Broken(HashEmbedder):
        fail = True

        def embed(self, texts: Sequence[str]) -> Vectors:
            if self.fail:
                raise RuntimeError("model not loaded")
            return super().embed(texts)

    emb, cache, queries = Broken(), _Cache(), QueryVectors()
    with pytest.raises(EmbedderError, match="model not loaded"):
        queries.vector(emb, cache, QUESTION)
    emb.fail = False
    assert np.array_equal(queries.vector(emb, cache, QUESTION), HashEmbedder().embed([QUESTION])[0])
    assert cache.rows


