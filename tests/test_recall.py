"""Recall: units, the embedding cache, both vector backends, hybrid search, P3 in assembly."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lossless
from lossless.core.config import Config
from lossless.core.tokens import count_chat_tokens, get_counter
from lossless.embed.base import Vectors
from lossless.recall.hybrid import Recaller, RecallHit
from lossless.recall.units import message_units, qa_pairs, window_units
from lossless.store.base import SearchSpec
from lossless.testing import HashEmbedder

from .conftest import T0, StoreTarget, chat
from .fake_openai import fake_openai

__all__ = ["HashEmbedder", "fake_openai"]  # HashEmbedder: its old home, still importable


def _mem(path: Path | str, emb: HashEmbedder, **cfg: object) -> lossless.Memory:
    return lossless.open(path, embedder=emb, context_window=2048, **cfg)  # type: ignore[arg-type]


def test_units_passages_and_windows(store_target: StoreTarget) -> None:
    mem = lossless.open(store_target("u"), embedder=None)
    conv = mem.conversation("u")
    msgs = conv.add_many([*chat(12), {"role": "assistant", "content": "Long. " + "word " * 2000}])
    units = message_units(msgs, get_counter())
    long_parts = [u for u in units if u.first_seq == 13]
    assert len(long_parts) > 1 and all(mem.counter.count(u.text) < 260 for u in long_parts)
    pairs = qa_pairs(msgs)
    assert all(p[0].role == "user" for p in pairs)
    windows, _ = window_units(msgs, closed=True)
    # 3 pairs a window, stride 2: windows start at pairs 0, 2, 4, … while 3 pairs remain
    assert len(pairs) == 6
    assert [w.first_seq for w in windows] == [pairs[i][0].seq for i in (0, 2)]
    assert all(len({m for m in w.message_ids}) == w.last_seq - w.first_seq + 1 for w in windows)


def test_same_text_is_never_embedded_twice(backend_target: str) -> None:
    emb = HashEmbedder()
    mem = _mem(backend_target, emb)
    a = mem.conversation("a")
    a.add_many(chat(30))
    a.index()
    first = len(emb.texts)
    assert first > 0 and len(set(emb.texts)) == first
    b = mem.conversation("b")  # the same texts in another conversation: all cache hits
    b.add_many(chat(30))
    b.index()
    assert len(emb.texts) == first
    mem.close()
    emb2 = HashEmbedder()
    again = _mem(backend_target, emb2)  # and across restarts
    again.conversation("c").add_many(chat(30))
    again.conversation("c").index()
    assert emb2.texts == []
    a_hits = again.conversation("a").search("service-4 port", mode="semantic")
    assert a_hits
    assert emb2.texts == ["service-4 port"]  # only the query, once
    again.conversation("a").search("service-4 port", mode="semantic")
    assert emb2.texts == ["service-4 port"]


def test_semantic_search_stays_in_its_conversation(backend_target: str) -> None:
    emb = HashEmbedder()
    mem = _mem(backend_target, emb)
    mem.conversation("alice").add_many([{"role": "user", "content": "My cat Miso likes salmon."}] * 2)
    mem.conversation("bob").add_many([{"role": "user", "content": "Bob's cat Miso likes salmon too."}])
    assert mem.wait_idle(30)  # the worker made the vectors
    for mode in ("semantic", "hybrid"):
        hits = mem.conversation("alice").search("cat salmon", mode=mode)  # type: ignore[arg-type]
        assert hits and {h.conversation_id for h in hits} == {"alice"}
    everywhere = mem.search("cat salmon", mode="semantic")
    assert {h.conversation_id for h in everywhere} == {"alice", "bob"}
    mem.conversation("carol", metadata={"user": "carol"}).add(role="user", content="carol's cat eats salmon")
    assert mem.wait_idle(30)
    scoped = mem.search("cat salmon", mode="hybrid", where={"user": "carol"})
    assert scoped and {h.conversation_id for h in scoped} == {"carol"}
    mem.close()


@pytest.mark.sqlite_only(reason="compares the SQLite store's two vector backends")
def test_sqlite_vec_and_numpy_agree(tmp_path: Path) -> None:
    results = {}
    for backend in ("sqlite-vec", "numpy"):
        emb = HashEmbedder()
        mem = _mem(tmp_path / f"{backend}.db", emb, vector_backend=backend)
        assert mem.recaller.index_store.backend == backend
        conv = mem.conversation("v")
        conv.add_many(chat(120, tools_every=7))
        conv.index()
        results[backend] = [
            [(h.kind, h.first_seq) for h in conv.search(q, mode="semantic", limit=10)]
            for q in ("service-41 port 5041", "latency fine decided", "run_tests passed")
        ]
    assert results["sqlite-vec"] == results["numpy"]
    assert all(results["numpy"])


@pytest.mark.sqlite_only(reason="sqlite-vec's vec0 tables are the SQLite store's")
def test_vec0_tables_take_little_room_and_old_ones_are_rebuilt(tmp_path: Path) -> None:
    """vec0's default chunk reserves 1,024 vectors per partition (1.6 MB for a conversation
    of two messages); indexes are made in chunks of 64, and an index made before is rebuilt
    once, every vector kept, by the next one to write vectors to it (the worker), never by
    a query: searches read the old table meanwhile."""
    from lossless.store.sqlite.recall import VEC_CHUNK

    def sql_of(mem: lossless.Memory, name: str) -> str:
        return str(mem.store._query("SELECT sql FROM sqlite_master WHERE name = ?", (name,))[0][0])

    mem = _mem(tmp_path / "v.db", HashEmbedder(), vector_backend="sqlite-vec")
    for i in range(40):
        conv = mem.conversation(f"c{i}")
        conv.add_many([{"role": "user", "content": f"where did I park the car on day {i}?"},
                       {"role": "assistant", "content": f"level {i % 5} of the garage by the lift"}])
        conv.index()
    name = mem.recaller.index_name()
    assert name is not None and f"chunk_size={VEC_CHUNK}" in sql_of(mem, name)
    before = {q: [(h.conversation_id, h.first_seq) for h in mem.search(q, mode="semantic", limit=5)]
              for q in ("park the car day 7", "garage lift level 3")}
    vectors = mem.store._query(f"SELECT rowid, embedding FROM {name} ORDER BY rowid")
    # the index as sqlite-vec's default made it before
    with mem.store.transaction() as conn:
        conn.execute(f"DROP TABLE {name}")
        conn.execute(f"CREATE VIRTUAL TABLE {name} USING vec0(conversation_id text partition key, kind text, "
                     "embedding float[64] distance_metric=cosine)")
        conn.executemany(f"INSERT INTO {name} (rowid, conversation_id, kind, embedding) "
                         "SELECT rowid, conversation_id, kind, ? FROM recall_units WHERE rowid = ?",
                         [(v, r) for r, v in vectors])
    mem.close()
    old_size = (tmp_path / "v.db").stat().st_size
    assert old_size > 40 * 1024 * 64 * 4  # a 1,024-vector chunk per conversation
    # inline: no worker thread that could write (and so rebuild) before the query below
    mem = _mem(tmp_path / "v.db", HashEmbedder(), vector_backend="sqlite-vec", compaction="inline")
    assert mem.recaller.index_name() == name
    # a query reads the old table as it is (nothing to embed: no rebuild)
    assert {q: [(h.conversation_id, h.first_seq) for h in mem.search(q, mode="semantic", limit=5)]
            for q in before} == before
    assert f"chunk_size={VEC_CHUNK}" not in sql_of(mem, name)
    # the next vectors written rebuild it first
    conv = mem.conversation("c40")
    conv.add_many([{"role": "user", "content": "where did I leave the umbrella?"}])
    conv.index()
    assert f"chunk_size={VEC_CHUNK}" in sql_of(mem, name)
    assert mem.store._query(f"SELECT rowid, embedding FROM {name} ORDER BY rowid")[: len(vectors)] == vectors
    after = {q: [(h.conversation_id, h.first_seq) for h in mem.search(q, mode="semantic", limit=5)] for q in before}
    assert after == before and all(after.values())
    mem.close()
    mem = _mem(tmp_path / "v.db", HashEmbedder(), vector_backend="sqlite-vec")  # rebuilt once: nothing to do now
    assert mem.recaller.index_name() == name and f"chunk_size={VEC_CHUNK}" in sql_of(mem, name)
    mem.close()


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=st.lists(st.integers(1, 40), min_size=1, max_size=6))
@pytest.mark.sqlite_only(reason="the SQLite store's numpy vector matrix")
def test_the_numpy_matrix_catches_up_with_appended_units(tmp_path_factory: pytest.TempPathFactory,
                                                         batches: list[int]) -> None:
    """An agent adds turns between assemblies: the in-memory matrix grows by the new units
    only, and after every step holds exactly what a matrix read afresh from the file holds."""
    from lossless.store.sqlite.recall import SQLiteRecall

    emb = HashEmbedder()
    mem = _mem(tmp_path_factory.mktemp("grow") / "g.db", emb, vector_backend="numpy")
    conv = mem.conversation("g")
    live = mem.recaller.index_store
    assert isinstance(live, SQLiteRecall)
    index = mem.recaller.index_name()
    assert index is not None
    start = 1
    for size in batches:
        conv.add_many(chat(size, start=T0 + timedelta(minutes=start)))
        start += size
        conv.index()
        ids, mat, kinds = live._matrix(index, emb.provider, emb.model, "g")
        fresh = SQLiteRecall(mem.store, backend="numpy")._matrix(index, emb.provider, emb.model, "g")
        assert ids.tolist() == fresh[0].tolist() and kinds.tolist() == fresh[2].tolist()
        assert np.array_equal(mat, fresh[1])
        query = emb.embed(["service port latency"])
        assert (live.knn(index, emb.provider, emb.model, ["g"], query, 5)
                == SQLiteRecall(mem.store, backend="numpy").knn(index, emb.provider, emb.model, ["g"], query, 5))
    mem.close()


@pytest.mark.sqlite_only(reason="the SQLite store's numpy vector matrix")
def test_the_numpy_matrix_stays_exact_under_concurrent_readers(tmp_path: Path) -> None:
    """Readers on several threads take the matrix while turns are added and indexed: each
    view they get is a prefix of the rows in rowid order, and the final matrix is exactly
    what a fresh read gives."""
    import threading

    from lossless.store.sqlite.recall import SQLiteRecall

    emb = HashEmbedder()
    mem = _mem(tmp_path / "c.db", emb, vector_backend="numpy")
    conv = mem.conversation("c")
    live = mem.recaller.index_store
    assert isinstance(live, SQLiteRecall)
    index = mem.recaller.index_name()
    assert index is not None
    conv.add_many(chat(30))
    conv.index()
    stop = threading.Event()
    problems: list[str] = []

    def read() -> None:
        for _ in range(2_000):  # bounded
            if stop.is_set():
                return
            ids, mat, kinds = live._matrix(index, emb.provider, emb.model, "c")
            if len(ids) != mat.shape[1] or len(ids) != len(kinds) or ids.tolist() != sorted(set(ids.tolist())):
                problems.append(f"torn view: {len(ids)} ids, {mat.shape[1]} vectors")

    readers = [threading.Thread(target=read) for _ in range(3)]
    for t in readers:
        t.start()
    for turn in range(15):
        conv.add_many(chat(4, start=T0 + timedelta(hours=turn + 1)))
        conv.index()
    stop.set()
    for t in readers:
        t.join(timeout=60)
    assert not problems
    ids, mat, kinds = live._matrix(index, emb.provider, emb.model, "c")
    fresh = SQLiteRecall(mem.store, backend="numpy")._matrix(index, emb.provider, emb.model, "c")
    assert ids.tolist() == fresh[0].tolist() and kinds.tolist() == fresh[2].tolist()
    assert np.array_equal(mat, fresh[1])
    mem.close()


def test_a_thread_bound_embedder_still_serves_recall(store_target: StoreTarget, caplog: pytest.LogCaptureFixture) -> None:
    """The query is embedded ahead on a worker thread; an embedder that only works on the
    thread that made it (a sqlite3 cache, say) fails there, and the query is embedded
    again on the caller's thread: recall keeps its vectors instead of falling back."""
    import threading

    class ThreadBound(HashEmbedder):
        def __init__(self) -> None:
            super().__init__()
            self.home = threading.get_ident()
            self.refused = 0

        def embed(self, texts: Sequence[str]) -> Vectors:
            if threading.get_ident() != self.home:
                self.refused += 1
                raise RuntimeError("objects created in a thread can only be used in that same thread")
            return super().embed(texts)

    emb = ThreadBound()
    # deferred: no worker thread (it could not use this embedder either); the work is done here
    mem = _mem(store_target("t"), emb, fresh_tail_count=8, compaction="deferred")
    conv = mem.conversation("t")
    conv.add(role="user", content="The staging database moved to port 6543 on the db-west host.", created_at=T0)
    conv.add_many(chat(200, start=T0 + timedelta(hours=1)))
    assert mem.wait_idle(60)
    with caplog.at_level("WARNING", logger="lossless"):
        ctx = conv.assemble(budget_tokens=600, query="Where does the staging database live now?")
    assert emb.refused == 1  # the worker tried and failed
    assert "Where does the staging database live now?" in emb.texts  # then this thread embedded it
    assert not [r for r in caplog.records if "falls back" in r.getMessage()]
    assert "6543" in str(ctx.messages)
    mem.close()


def test_recall_brings_back_an_evicted_detail(backend_target: str) -> None:
    emb = HashEmbedder()
    mem = _mem(backend_target, emb, fresh_tail_count=8, compaction="deferred")
    conv = mem.conversation("r")
    conv.add(role="user", content="The staging database moved to port 6543 on the db-west host.", created_at=T0)
    conv.add_many(chat(200, start=T0 + timedelta(hours=1)))
    assert mem.wait_idle(60)
    assert conv.frontier() and conv.frontier()[0].first_seq == 1  # evicted into summaries
    ctx = conv.assemble(budget_tokens=600, query="Which port is the staging database on?")
    recalled = [i for i in ctx.items if i.tier == "recall"]
    assert any(i.first_seq == 1 for i in recalled)
    assert "6543" in str(ctx.messages) and ctx.tokens <= 600
    mem.close()


def test_recall_packs_short_matches_whole_and_cuts_long_ones(backend_target: str) -> None:
    """Two passes: a long best match does not crowd out the short ones (they come whole,
    in time order); it comes second, as an excerpt that keeps the sentence with the
    query's words, and the whole context stays within the budget."""
    emb = HashEmbedder()
    # deferred, then the work done in one go: the DAG (and so what is left to recall) does
    # not depend on when a worker thread happened to run
    # (the packing is under test, not the ranking: PostgreSQL's ts_rank has no idf, so at
    # an even fusion weight the filler's "service port" outranks the rarer "billing"
    # there; the hash embedder's vectors keep the short notes on top at 0.7)
    mem = _mem(backend_target, emb, fresh_tail_count=6, compaction="deferred", vector_weight=0.7)
    conv = mem.conversation("p")
    filler = " ".join(f"Paragraph {i} rambles about scheduling and lunch menus." for i in range(120))
    conv.add(role="assistant", content=f"{filler} The billing service port is 7311. {filler}", created_at=T0)
    shorts = [f"Note {k}: billing retries {k + 2} times." for k in range(3)]
    for k, text in enumerate(shorts):
        conv.add(role="user", content=text, created_at=T0 + timedelta(minutes=k + 1))
    conv.add_many(chat(120, start=T0 + timedelta(hours=1)))
    assert mem.wait_idle(60)
    ctx = conv.assemble(budget_tokens=900, query="billing service port?")
    recalled = [i for i in ctx.items if i.tier == "recall"]
    text = str(ctx.messages)
    assert all(s in text for s in shorts)  # whole
    assert "port is 7311" in text and filler not in text  # the long one cut to its matching sentence
    assert [i.first_seq for i in recalled] == sorted(i.first_seq for i in recalled)
    assert {1, 2, 3, 4} <= {i.first_seq for i in recalled}
    assert ctx.tokens <= 900
    mem.close()


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(budget=st.integers(min_value=1, max_value=2500), query=st.text(min_size=0, max_size=80),
       n=st.integers(min_value=1, max_value=150))
def test_recall_never_breaks_the_budget(scratch_store: Callable[[], str], budget: int, query: str, n: int) -> None:
    emb = HashEmbedder()
    mem = _mem(scratch_store(), emb, fresh_tail_count=6)
    conv = mem.conversation("b")
    conv.add_many(chat(n, tools_every=4))
    ctx = conv.assemble(budget_tokens=budget, query=query or None)
    assert ctx.tokens <= budget
    assert ctx.tokens == count_chat_tokens(get_counter(), ctx.messages)


def test_hybrid_without_an_embedder_is_keyword_search(store_target: StoreTarget) -> None:
    mem = lossless.open(store_target("k"), embedder=None)
    conv = mem.conversation("k")
    conv.add_many(chat(10))
    assert conv.search("service-4", mode="hybrid")
    with pytest.raises(lossless.QueryError, match="needs an embedder"):
        conv.search("service-4", mode="semantic")


@pytest.mark.model
@pytest.mark.slow  # the first test to load the model pays for it
def test_local_model_loads_offline_and_understands_meaning(monkeypatch: pytest.MonkeyPatch) -> None:
    from lossless.embed.local import LocalEmbedder, local_embedder_available

    assert local_embedder_available(), "CI installs the embeddings extra"
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    emb = LocalEmbedder()
    vecs = emb.embed(["The car would not start this morning.", "My automobile broke down today.",
                      "Bananas are rich in potassium."])
    assert vecs.shape == (3, 384) and emb.dim == 384
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    assert vecs[0] @ vecs[1] > vecs[0] @ vecs[2] + 0.2


_PROBES = ["Which port did the billing API move to?", "连接池太小, 测试覆盖率 2024-03-05",
           "x", "a long message that is cut at the model's limit " * 60]


@pytest.mark.model
@pytest.mark.torch
def test_queries_run_through_onnx_with_the_torch_vectors(tmp_path: Path) -> None:
    """SentenceTransformerEmbedder (the [torch] path): up to 8 texts go through ONNX Runtime (exported once into the cache folder and
    checked), and give the torch model's vectors; bigger batches stay on torch."""
    from lossless.embed.sbert import SentenceTransformerEmbedder as LocalEmbedder

    fast, slow = LocalEmbedder(onnx_cache=tmp_path), LocalEmbedder(onnx=False, onnx_cache=tmp_path / "never")
    for pair in ([_PROBES[0]], [_PROBES[1]], [_PROBES[2], _PROBES[3]], [_PROBES[3]], _PROBES * 2):
        assert np.abs(fast.embed(pair) - slow.embed(pair)).max() < 1e-5
    assert fast._onnx not in (None, False), "onnxruntime is in the embeddings extra"
    exported = list(tmp_path.glob("*.onnx"))
    assert len(exported) == 1 and not (tmp_path / "never").exists()
    # another instance (another process, later) uses the file as it is
    again = LocalEmbedder(onnx_cache=tmp_path)
    again._export_onnx = None  # type: ignore[assignment,method-assign]  # would fail if called
    assert np.abs(again.embed([_PROBES[0]]) - slow.embed([_PROBES[0]])).max() < 1e-5
    assert again._onnx not in (None, False)
    # a damaged file is exported again
    exported[0].write_bytes(b"not a model")
    healed = LocalEmbedder(onnx_cache=tmp_path)
    assert np.abs(healed.embed([_PROBES[1]]) - slow.embed([_PROBES[1]])).max() < 1e-5
    assert healed._onnx not in (None, False) and exported[0].stat().st_size > 1_000_000


@pytest.mark.model
@pytest.mark.torch
def test_without_onnxruntime_queries_stay_on_torch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    import sys

    from lossless.core.errors import MissingDependencyError
    from lossless.embed.sbert import SentenceTransformerEmbedder as LocalEmbedder

    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import fails
    emb = LocalEmbedder(onnx_cache=tmp_path)
    with caplog.at_level("INFO", logger="lossless"):
        vec = emb.embed([_PROBES[0]])
    assert vec.shape == (1, 384) and emb._onnx is False
    assert any("embedded by torch" in r.getMessage() and "onnxruntime" in r.getMessage() for r in caplog.records)
    assert not list(tmp_path.glob("*.onnx"))
    with pytest.raises(MissingDependencyError, match="onnxruntime"):
        LocalEmbedder(onnx=True, onnx_cache=tmp_path).embed([_PROBES[0]])


def test_openai_compatible_embedder_end_to_end(store_target: StoreTarget, fake_openai: object) -> None:
    from lossless.embed.openai import OpenAIEmbedder

    emb = OpenAIEmbedder("fake-embed", base_url=fake_openai.base_url, api_key="k")  # type: ignore[attr-defined]
    mem = lossless.open(store_target("o"), embedder=emb, context_window=2048)
    conv = mem.conversation("o")
    conv.add(role="user", content="Our invoice service runs on port 7711.")
    conv.add_many(chat(40))
    hits = conv.search("invoice service port", mode="hybrid")
    assert hits[0].first_seq == 1
    assert fake_openai.embedding_requests()  # type: ignore[attr-defined]
    emb.close()


def test_index_reports_progress_in_batches(backend_target: str) -> None:
    emb = HashEmbedder()
    mem = _mem(backend_target, emb, compaction="deferred")  # nothing embedded before index()
    conv = mem.conversation("p")
    conv.add_many(chat(40))
    seen: list[tuple[int, int]] = []
    done = conv.index(progress=lambda d, t: seen.append((d, t)))
    assert done > 0 and seen and seen[-1][0] == done and seen[-1][1] >= done
    assert conv.index() == 0  # nothing left to embed
    mem.close()


def test_without_the_embeddings_extra_recall_is_keyword_only(store_target: StoreTarget, monkeypatch: pytest.MonkeyPatch,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    import lossless.embed.local as local
    import lossless.engine as engine

    monkeypatch.setenv("LOSSLESS_EMBEDDER", "auto")
    monkeypatch.setattr(local, "local_embedder_available", lambda: False)
    monkeypatch.setattr(engine, "_warned_keyword_only", False)
    with caplog.at_level("WARNING", logger="lossless"):
        first = lossless.open(store_target("first"))
        second = lossless.open(store_target("second"))
    assert first.embedder is None and second.embedder is None
    assert sum("keyword-only" in r.message for r in caplog.records) == 1  # said once
    conv = first.conversation("k")
    conv.add(role="user", content="the deploy key lives in vault at secret/deploy")
    conv.add_many(chat(60))
    assert conv.assemble(budget_tokens=400, query="where is the deploy key?").tokens <= 400


def test_semantic_search_over_many_conversations(store_target: StoreTarget, tmp_path: Path) -> None:
    """Past a couple of hundred conversations (a tenant-wide search) sqlite-vec is asked
    once for all of them, not once each; the answers are those of the listed ones only."""
    emb = HashEmbedder()
    mem = _mem(store_target("wide"), emb, compaction="deferred")
    for i in range(250):
        mem.conversation(f"c{i}").add("user", f"conversation {i} talks about topic{i % 7} and cats")
    assert mem.wait_idle(120)
    listed = [f"c{i}" for i in range(240)]
    hits = mem.search("cats topic3", mode="semantic", conversations=listed, limit=8)
    assert len(hits) == 8 and all(h.conversation_id in listed for h in hits)
    # the same as ranking every listed conversation's message by cosine, by hand
    texts = {cid: f"user: conversation {cid[1:]} talks about topic{int(cid[1:]) % 7} and cats" for cid in listed}
    query = HashEmbedder().embed(["cats topic3"])[0]
    vectors = HashEmbedder().embed(list(texts.values()))
    best = sorted(zip(texts, vectors @ query, strict=True), key=lambda p: -p[1])[:3]
    assert {h.conversation_id for h in hits[:3]} == {cid for cid, _ in best}
    mem.close()


@given(st.lists(st.text(max_size=12), max_size=6))
def test_unit_message_ids_read_back_as_written(ids: list[str]) -> None:
    """The fast reader of a unit's message ids gives what ``json.dumps`` wrote, whatever
    the ids hold (quotes, backslashes, the separator itself)."""
    import json

    from lossless.store.sqlite.recall import _ids

    assert _ids(json.dumps(ids)) == tuple(ids)


@pytest.mark.parametrize(("first", "again", "other"), [
    ("周末我们去西湖公园散步，公园里的荷花开得很好看。", "周末我们去西湖公园散步，公园里的荷花开得真好看！",
     "公园旁边新开了一家电影院，我们看了一场电影。"),
    ("We walked in the park on Sunday, the lotus flowers were lovely.",
     "We walked in the park on Sunday; the lotus flowers were lovely!",
     "A new cinema opened next to the park and we watched a film."),
])
def test_mmr_passes_over_a_near_copy_in_chinese_as_in_english(first: str, again: str, other: str) -> None:
    """``mmr_lambda`` compared snippets by their space-separated tokens: a Chinese sentence
    is one token, so a near copy never overlapped and MMR kept both copies; and "Sunday,"
    was not "Sunday;". It compares the words keyword search reads now (CJK bigrams)."""
    hits = [RecallHit("message", f"msg_{i}", "c", i, i, (f"msg_{i}",), score, snippet=text)
            for i, (score, text) in enumerate(((1.0, first), (0.97, again), (0.9, other)), 1)]
    diverse = Recaller._mmr(SimpleNamespace(config=Config(mmr_lambda=0.5)), hits, 2)  # type: ignore[arg-type]
    assert [h.id for h in diverse[:2]] == ["msg_1", "msg_3"]
    relevance_only = Recaller._mmr(SimpleNamespace(config=Config(mmr_lambda=1.0)), hits, 2)  # type: ignore[arg-type]
    assert [h.id for h in relevance_only[:2]] == ["msg_1", "msg_2"]


def test_mmr_also_diversifies_a_query_the_embedder_does_not_read(store_target: StoreTarget) -> None:
    """A Chinese query with an English model is searched by keywords alone; with
    ``mmr_lambda`` set its hits are diversified too (they were returned as ranked)."""
    texts = ["周末我们去西湖公园散步，公园里的荷花开得很好看。", "周末我们去西湖公园散步，公园里的荷花开得真好看！",
             "公园旁边新开了一家电影院，我们看了一场电影。"]
    for lam, expect_copy in ((0.3, False), (None, True)):
        with lossless.open(store_target(f"mmr{lam}"), embedder=HashEmbedder(languages=["en"]),
                           compaction="deferred", mmr_lambda=lam) as mem:
            conv = mem.conversation("c")
            ids = [conv.add(role="user", content=t).id for t in texts]
            spec = SearchSpec(query="周末西湖公园的荷花", conversation_ids=("c",), mode="hybrid", limit=2,
                              kinds=("message",))
            got = [h.id for h in mem.recaller.search(spec)]
            assert got[0] in ids[:2] and len(got) == 2
            assert (set(ids[:2]) <= set(got)) is expect_copy, (lam, got)
