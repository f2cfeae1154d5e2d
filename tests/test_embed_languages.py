"""Language-aware vectors (issue 27, item 2): an embedder says which languages it reads;
units and queries in other languages are neither embedded nor fused.

* The script detector (:mod:`lossless.embed.languages`) and what a model folder says.
* On both stores: an English-only model is never asked to embed Chinese units or a
  Chinese query (the double at the plug point records every text it is given), while
  English still is; the units it passes over are not owed (stats, doctor, the worker's
  look, a search's catch-up); vectors an earlier version made of Chinese text are not
  fused.
* A multilingual model folder (tiny BERT and XLM-RoBERTa models built in the test, with
  random weights) runs without torch, gives sentence-transformers' vectors, and embeds
  Chinese units when it reads Chinese.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lossless
from lossless.compaction.worker import owed_parts
from lossless.core.errors import ValidationError
from lossless.embed.languages import (
    ANY,
    UNREAD_ABOVE,
    ScriptReader,
    folder_languages,
    parse_languages,
    script_counts,
)
from lossless.store.base import SearchSpec
from lossless.testing import HashEmbedder

from .backends import StoreTarget
from .tiny_models import CHINESE, LATIN, tiny_model

ENGLISH = ScriptReader(frozenset({"en"}))
PARK_ZH = "我上次跟你说我去了哪个公园？在那里看到了一只白鹭。"
COFFEE_ZH = "今天和医生一起喝咖啡，很开心。"
HERON = "I went to the park by the lake and saw a heron."
MIXED = "Lisa 今天很开心，我们一起看了电影 Minions。"  # mostly Chinese, two Latin names


# -- the detector ------------------------------------------------------------------------


def test_scripts_are_counted_by_words() -> None:
    assert script_counts("I saw a heron") == {"Latn": 4}
    assert script_counts("我去了公园") == {"Hani": 5}
    assert script_counts("東京へ行きました") == {"Hani": 3, "Kana": 5}
    assert script_counts("서울은 한국의 수도입니다") == {"Hang": 3}
    assert script_counts("Привет, как дела?") == {"Cyrl": 3}
    assert script_counts("2024-03-05 🎉 !!!") == {}


def test_an_english_model_reads_latin_text_and_not_chinese() -> None:
    assert ENGLISH.reads(HERON) and ENGLISH.reads("naïve café résumé") and ENGLISH.reads("🎉 2024")
    assert not ENGLISH.reads(PARK_ZH) and not ENGLISH.reads(MIXED) and not ENGLISH.reads("東京へ行きました")
    assert ENGLISH.reads("we had 火锅 last night, so good")  # an English sentence quoting a dish
    assert not ENGLISH.reads("Привет, как дела?")
    # a unit's speaker label is not a word of its text
    assert not ENGLISH.reads("Lisa (user): 好的", labels=True) and ENGLISH.reads("Lisa (user): 好的")
    assert not ENGLISH.reads("user: 嗯\nassistant: 好的。", labels=True)
    assert ScriptReader(ANY).reads(PARK_ZH) and ScriptReader(ANY).reads_everything
    chinese = ScriptReader(frozenset({"zh"}))
    assert chinese.reads(PARK_ZH) and not chinese.reads(HERON) and not chinese.reads("東京へ行きました")
    assert ScriptReader(frozenset({"ja"})).reads("東京へ行きました")
    assert ScriptReader(frozenset({"en", "zh"})).reads(MIXED)


def test_symbols_alone_are_read_by_no_model_that_declares_its_languages() -> None:
    """A word-piece model turns every emoji into its one unknown token, so 🎉 and 👋 had
    one vector; text of symbols alone is left to keyword search. A number or a date is
    read, with or without symbols around it."""
    for reader in (ENGLISH, ScriptReader(frozenset({"zh"}))):
        assert not reader.reads("🎉") and not reader.reads("👍👍 →") and not reader.reads("user: 👋", labels=True)
        assert reader.reads("🎉 2024") and reader.reads("€120") and reader.reads("2024-03-05")
    assert ENGLISH.reads("!!!") and ENGLISH.reads("great launch 🎉")  # plain ASCII; a word beside the emoji
    assert ScriptReader(ANY).reads("🎉")  # a model that reads everything is given everything


def test_an_emoji_query_matches_no_emoji_by_vector(store_target: StoreTarget) -> None:
    emb = HashEmbedder(languages=["en"])
    with lossless.open(store_target("emoji"), embedder=emb, compaction="deferred") as mem:
        conv = mem.conversation("c")
        party = conv.add(role="user", content="🎉").id
        wave = conv.add(role="user", content="👋").id
        conv.add(role="user", content="The launch went well 🎉")
        conv.index()
        assert all("👋" not in t and t.strip() != "user: 🎉" for t in emb.texts)  # no vector for symbols alone
        hits = conv.search("👋", mode="hybrid")
        assert [h.id for h in hits] == [wave] and hits[0].matched == "keyword"
        assert party not in [h.id for h in conv.search("🎉", mode="semantic") if h.matched == "vector"]


_HAN = st.text(st.sampled_from(CHINESE), min_size=1, max_size=1)
_WORD = st.sampled_from(LATIN)


@settings(max_examples=200)
@given(st.lists(st.one_of(_HAN, _WORD), max_size=40), st.sampled_from(["", "user: ", "Ann (assistant): "]))
def test_a_text_is_read_unless_most_of_it_is_in_an_unread_script(pieces: list[str], label: str) -> None:
    """Property: an English model reads a text of Han characters and Latin words exactly
    when the Han characters are at most UNREAD_ABOVE of the words (the label aside); a
    multilingual one reads every text, a Chinese one the mirror image."""
    text = label + " ".join(pieces)
    han = sum(1 for p in pieces if p in CHINESE)
    latin = len(pieces) - han
    assert ENGLISH.reads(text, labels=True) == (han <= UNREAD_ABOVE * (han + latin))
    assert ScriptReader(frozenset({"zh"})).reads(text, labels=True) == (latin <= UNREAD_ABOVE * (han + latin))
    assert ScriptReader(ANY).reads(text)


@settings(max_examples=100)
@given(st.text(max_size=60), st.lists(_WORD, min_size=1, max_size=5))
def test_more_english_never_makes_a_text_unread(text: str, words: list[str]) -> None:
    if ENGLISH.reads(text):
        assert ENGLISH.reads(text + " " + " ".join(words))


def test_languages_are_parsed_or_refused_with_a_clear_error() -> None:
    assert parse_languages("en") == frozenset({"en"}) and parse_languages("en,zh-CN") == frozenset({"en", "zh"})
    assert parse_languages(["EN", "zh_TW"]) == frozenset({"en", "zh"})
    assert parse_languages("multilingual") == ANY and parse_languages(["en", "any"]) == ANY
    for bad, says in ((42, "must be 'any' or language codes"), ([], "is empty"), (["english!"], "not an ISO 639"),
                      ([3], "must be a string"), ({"en": 1}, "must be 'any'")):
        with pytest.raises(ValidationError, match=says):
            parse_languages(bad)
    with pytest.raises(ValidationError, match=r"_Declared\.languages: .english!. is not an ISO 639"):
        lossless.open(":memory:", embedder=_Declared("english!"))
    with pytest.raises(ValidationError, match="OpenAIEmbedder: languages is empty"):
        from lossless.embed.openai import OpenAIEmbedder

        OpenAIEmbedder("m", base_url="http://127.0.0.1:9", languages=[])


class _Declared(HashEmbedder):
    """A third-party embedder whose ``languages`` is whatever it was given."""

    def __init__(self, languages: object) -> None:
        super().__init__()
        self.languages = languages  # type: ignore[assignment]


def test_what_a_model_folder_says_it_reads(tmp_path: Path) -> None:
    def card(name: str, front: str | None) -> Path:
        folder = tmp_path / name
        folder.mkdir()
        if front is not None:
            (folder / "README.md").write_text(f"---\n{front}\n---\n# {name}\n")
        return folder

    assert folder_languages(card("all-MiniLM-L6-v2", "language: en\nlicense: apache-2.0")) == frozenset({"en"})
    assert folder_languages(card("m1", "language:\n- multilingual\n- ar\n- zh")) == ANY
    assert folder_languages(card("m2", "language: [de, fr]")) == frozenset({"de", "fr"})
    assert folder_languages(card("m3", "tags:\n- multilingual\nlanguage: en")) == ANY
    assert folder_languages(card("paraphrase-multilingual-MiniLM-L12-v2", None)) == ANY
    assert folder_languages(card("bge-m3", "license: mit")) == ANY
    assert folder_languages(card("LaBSE", None)) == ANY
    assert folder_languages(card("some-model", None), "xlm-roberta") == ANY
    assert folder_languages(card("multi-qa-MiniLM-L6-cos-v1", None)) == frozenset({"en"})  # English, says nothing
    assert folder_languages(card("odd", "language: 42!")) == frozenset({"en"})
    assert folder_languages(tmp_path / "missing") == frozenset({"en"})


def test_each_embedder_says_what_it_reads(tmp_path: Path) -> None:
    from lossless.embed.local import LocalEmbedder
    from lossless.embed.openai import OpenAIEmbedder
    from lossless.embed.sbert import SentenceTransformerEmbedder

    assert LocalEmbedder().languages == frozenset({"en"})  # all-MiniLM-L6-v2's card: language: en
    assert SentenceTransformerEmbedder().languages == frozenset({"en"})
    folder = tiny_model(tmp_path / "tiny", card="multilingual")
    assert LocalEmbedder(folder).languages == ANY
    assert LocalEmbedder(folder, languages=["en"]).languages == frozenset({"en"})
    assert SentenceTransformerEmbedder(folder, languages="zh").languages == frozenset({"zh"})
    assert OpenAIEmbedder("m", base_url="http://127.0.0.1:9").languages == ANY
    assert OpenAIEmbedder("m", base_url="http://127.0.0.1:9", languages=["en"]).languages == frozenset({"en"})
    with pytest.raises(ValidationError, match="not an ISO 639"):
        LocalEmbedder(folder, languages=["??"])


# -- what a store sends an English-only model -------------------------------------------------


def _chat(conv: lossless.Conversation) -> dict[str, str]:
    ids = {}
    for key, role, text in (("heron", "user", HERON), ("reply", "assistant", "Herons stand still in shallow water."),
                            ("park", "user", PARK_ZH), ("noted", "assistant", "好的，我记住了。"),
                            ("coffee", "user", COFFEE_ZH), ("mixed", "assistant", MIXED),
                            ("dish", "user", "we had 火锅 last night, so good")):
        ids[key] = conv.add(role=role, content=text).id
    return ids


def _han_heavy(texts: list[str]) -> list[str]:
    return [t for t in texts if not ENGLISH.reads(t, labels=True)]


def test_an_english_only_model_is_never_given_chinese(store_target: StoreTarget) -> None:
    """The double records every text it is asked to embed: after indexing and every kind
    of search with Chinese queries, none is mostly Chinese; English units and queries
    still are embedded, and their vectors found."""
    emb = HashEmbedder(languages=["en"])
    with lossless.open(store_target("en"), embedder=emb, compaction="deferred") as mem:
        conv = mem.conversation("c")
        ids = _chat(conv)
        mem.recaller.cut_units("c")
        passed = mem.recaller.embed_units("c")
        assert passed.units > passed.vectors > 0 and passed.keyword_only == passed.units - passed.vectors
        assert emb.texts and not _han_heavy(emb.texts)
        assert any("heron" in t for t in emb.texts) and any("火锅" in t for t in emb.texts)
        seen = len(emb.texts)
        for query in ("白鹭", "我去了哪个公园？", "医生 咖啡"):
            for mode in ("hybrid", "semantic"):
                hits = conv.search(query, mode=mode)
                assert all(h.matched == "keyword" for h in hits), (query, mode)
            mem.search(query, mode="semantic")
            conv.assemble(budget_tokens=400, query=query)
        assert len(emb.texts) == seen, emb.texts[seen:]  # no query, no unit
        hits = conv.search("heron in the park", mode="semantic")
        assert ids["heron"] in [h.id for h in hits if h.matched == "vector"]
        assert emb.texts[seen:] == ["heron in the park"]
        assert ids["park"] in [h.id for h in conv.search("公园", mode="hybrid")]  # found by keywords


def test_units_the_model_does_not_read_are_not_owed(store_target: StoreTarget) -> None:
    """Chinese units passed over count as done: backlog, stats, the worker's look and a
    search's catch-up find nothing owed, and a reopen does not look again."""
    target = store_target("owed")
    emb = HashEmbedder(languages=["en"])
    with lossless.open(target, embedder=emb) as mem:
        conv = mem.conversation("zh")
        for text in (PARK_ZH, "好的，我记住了。", COFFEE_ZH, "嗯。"):
            conv.add(role="user", content=text)
        assert mem.wait_idle(timeout=60)
        assert emb.texts == []
        assert (conv.backlog().messages_not_indexed, conv.backlog().units_not_embedded) == (0, 0)
        assert mem.recaller.count_unembedded() == {"conversations": 0, "messages": 0, "units": 0}
        assert mem.recaller.not_embedded(None) == {} and mem.recaller.catch_up(None) == {}
        assert mem.recaller.queue_unembedded() == []
    with lossless.open(target, embedder=HashEmbedder(languages=["en"])) as mem:
        assert not mem.recaller.unembedded_unchecked() and not mem.worker.running
        assert mem.conversation("zh").assemble(budget_tokens=300, query="公园").lag is None


def test_a_mixed_conversation_fuses_vectors_for_english_queries_only(store_target: StoreTarget) -> None:
    emb = HashEmbedder(languages=["en"])
    with lossless.open(store_target("mixed"), embedder=emb, compaction="deferred") as mem:
        conv = mem.conversation("m")
        ids = _chat(conv)
        conv.index()
        hits = conv.search("herons standing in the water", mode="hybrid", limit=20)
        by_vector = {h.id for h in hits if h.matched in ("vector", "both")}
        assert ids["reply"] in by_vector and not by_vector & {ids["park"], ids["noted"], ids["coffee"], ids["mixed"]}
        zh = conv.search("咖啡", mode="hybrid")
        assert [h.id for h in zh][:1] == [ids["coffee"]] and {h.matched for h in zh} == {"keyword"}


def test_vectors_made_before_of_text_the_model_does_not_read_are_left_out(store_target: StoreTarget) -> None:
    """A store embedded by a version that did not tell languages apart holds vectors of
    Chinese units from the same model: they are not fused into an English query's hits."""
    target = store_target("old")
    with lossless.open(target, embedder=HashEmbedder(), compaction="deferred") as mem:  # reads "any"
        conv = mem.conversation("o")
        ids = _chat(conv)
        conv.add(role="user", content="公园 heron heron heron")  # mostly English by words: still read
        conv.index()
        before = {h.id for h in conv.search("heron", mode="semantic", limit=20)}
        assert ids["park"] in before  # the "any" model found the Chinese message by its vector
    with lossless.open(target, embedder=HashEmbedder(languages=["en"]), compaction="deferred") as mem:
        conv = mem.conversation("o")
        chinese = {ids["park"], ids["noted"], ids["coffee"], ids["mixed"]}
        hits = conv.search("heron", mode="semantic", limit=20)
        assert {h.id for h in hits} & chinese == set()
        assert ids["heron"] in {h.id for h in hits}
        for _ in range(2):  # as assembly searches: without snippets (the texts are read once, then known)
            spec = SearchSpec(query="heron", conversation_ids=("o",), kinds=("message",), mode="semantic",
                              snippets=False, limit=20)
            found = {m for h in mem.recaller.search(spec) if h.vector_rank is not None for m in h.message_ids}
            assert ids["heron"] in found and not found & chinese


def test_what_a_user_is_told_is_owed_counts_only_text_the_model_reads(store_target: StoreTarget) -> None:
    """Before the worker has looked (messages not cut into units) and after the cut (units
    not embedded), the figures of progress lines and ``stats`` count only the text the
    model will be given: a Chinese conversation owes an English model nothing, a mixed
    one its English messages; the worker's own bookkeeping still counts every message."""
    emb = HashEmbedder(languages=["en"])
    with lossless.open(store_target("told"), embedder=emb, compaction="deferred") as mem:
        _chat(mem.conversation("c"))  # 7 messages: 3 the model reads (heron, reply, dish)
        zh = mem.conversation("zh")
        for text in (PARK_ZH, COFFEE_ZH, "好的，我记住了。"):
            zh.add(role="user", content=text)
        r = mem.recaller
        assert (r.uncut("c"), r.uncut("zh")) == (7, 3)
        assert (r.owed_units("c"), r.owed_units("zh")) == (3, 0)
        assert [owed_parts(mem, cid)[0] for cid in ("c", "zh")] == [3, 0]
        assert r.count_unembedded() == {"conversations": 1, "messages": 3, "units": 0}
        r.cut_units("c")
        r.cut_units("zh")
        assert (r.unembedded("c"), r.unembedded("zh")) == (7, 3)  # cut, not passed yet
        assert (r.owed_units("c"), r.owed_units("zh")) == (3, 0)
        assert r.count_unembedded() == {"conversations": 1, "messages": 3, "units": 3}
        zh.add(role="user", content="I also saw a heron there.")  # one more the model reads
        assert r.owed_units("zh") == 1
        r.embed_units("c")
        r.embed_units("zh")
        assert len(emb.texts) == 3 and not _han_heavy(emb.texts)
        assert r.owed_units("zh") == 1  # the new message is not cut yet
        r.cut_units("zh")
        r.embed_units("zh")
        assert len(emb.texts) == 4 and "I also saw a heron there." in emb.texts[3]
        assert (r.owed_units("c"), r.owed_units("zh")) == (0, 0)
        assert r.count_unembedded() == {"conversations": 0, "messages": 0, "units": 0}


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from([HERON, PARK_ZH, COFFEE_ZH, MIXED, "ok", "嗯", "we had 火锅 last night", "🎉"]),
                min_size=1, max_size=12))
def test_exactly_the_units_the_model_reads_are_embedded(scratch_store: Callable[[], str], texts: list[str]) -> None:
    """Property: after an index pass, the model was given exactly the units it reads, and
    nothing is owed."""
    emb = HashEmbedder(languages=["en"])
    with lossless.open(scratch_store(), embedder=emb, compaction="deferred") as mem:
        conv = mem.conversation("p")
        conv.add_many([{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(texts)])
        # what a user is told is owed: the messages, then the units, the model will read
        assert mem.recaller.owed_units("p") == sum(ENGLISH.reads(t) for t in texts)
        mem.recaller.cut_units("p")
        assert mem.recaller.owed_units("p") == sum(ENGLISH.reads(t) for t in texts)
        conv.index()
        index = mem.recaller.index_name()
        assert index is not None
        units = mem.recaller.index_store.units(list(range(1, 10_000)))
        read = {u.text for u in units.values() if u.conversation_id == "p" and ENGLISH.reads(u.text, labels=True)}
        assert set(emb.texts) == read
        assert mem.recaller.unembedded("p") == 0 and mem.recaller.not_embedded(["p"]) == {}
        assert mem.recaller.owed_units("p") == 0


# -- the CLI ---------------------------------------------------------------------------------


@pytest.mark.model
def test_cli_embed_stats_and_doctor_with_a_chinese_conversation(store_target: StoreTarget, tmp_path: Path) -> None:
    db = str(store_target("cli"))
    env = {**os.environ, "LOSSLESS_HOME": str(tmp_path / "home"), "LOSSLESS_EMBEDDER": "local"}

    def cli(embedder: str, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "lossless", "--db", db, *args], capture_output=True, text=True,
                              env={**env, "LOSSLESS_EMBEDDER": embedder}, timeout=300, check=False)

    for text in (PARK_ZH, HERON, COFFEE_ZH):
        assert cli("none", "add", "c", "--role", "user", "--content", text).returncode == 0
    done = cli("local", "--json", "embed", "c")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"embedded": {"c": 1}, "keyword_only": {"c": 2}}
    stats = json.loads(cli("local", "stats", "--json").stdout)
    assert stats["not_embedded"] == {"conversations": 0, "messages": 0, "units": 0}
    doctor = json.loads(cli("local", "doctor", "--quick", "--json").stdout)
    assert not [c for c in doctor["checks"] if c["name"] == "vectors"]
    said = [c["detail"] for c in doctor["checks"] if c["name"] == "embedder"]
    assert len(said) == 1 and "reads en (text in other languages: keyword recall only)" in said[0]
    text = cli("local", "embed", "c")
    assert text.returncode == 0 and "0 retrieval units embedded" in text.stdout
    found = json.loads(cli("local", "search", "c", "公园", "--mode", "semantic", "--json").stdout)
    assert found["count"] >= 1 and {h["matched"] for h in found["hits"]} == {"keyword"}



@pytest.mark.model
@pytest.mark.parametrize("mode", ["semantic", "hybrid"])
def test_cli_search_in_a_language_the_model_does_not_read_says_why(store_target: StoreTarget, tmp_path: Path,
                                                                  mode: str) -> None:
    """``lossless search c 公园 --mode semantic`` (and the default, hybrid) with the English
    model: every hit is found by keywords because the model does not read the query, not
    because the messages are "not embedded yet" (they are: the English one has its vector,
    the Chinese one never will); the hits and the note on stderr say so, as docs/cli.md
    does (the default mode said nothing, though its ``--json`` had ``"matched": "keyword"``)."""
    db = str(store_target(f"cli-unread-{mode}"))
    env = {**os.environ, "LOSSLESS_HOME": str(tmp_path / "home"), "LOSSLESS_EMBEDDER": "local"}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "lossless", "--db", db, *args], capture_output=True, text=True,
                              env=env, timeout=300, check=False)

    for text in (PARK_ZH, "I drank a coffee in the park, 公园 in Chinese."):
        assert cli("add", "c", "--role", "user", "--content", text).returncode == 0
    found = cli("search", "c", "公园", "--mode", mode)
    assert found.returncode == 0, found.stderr
    out, err = " ".join(found.stdout.split()), " ".join(found.stderr.split())  # unwrapped
    assert "not embedded yet" not in out + err
    assert out.count("by keywords (the embedder does not read the query's language)") == 2, out
    assert "does not read the language of this query" in err
    english = cli("search", "c", "coffee in the park", "--mode", mode)
    assert english.returncode == 0 and "by keywords" not in english.stdout and not english.stderr.strip()
    keywords = cli("search", "c", "公园", "--mode", "fts")  # keywords asked for: nothing to say
    assert keywords.returncode == 0 and "by keywords" not in keywords.stdout and not keywords.stderr.strip()


# -- a multilingual model folder, without torch ----------------------------------------------

_TEXTS = ["我上次跟你说我去了哪个公园？", "I went to the park and saw a heron", "Lisa 今天很开心, python script", "",
          "白鹭 湖边的鸟 " * 12, "zzqx unknown words", "?"]
_KINDS = [("bert", "mean", False), ("bert", "cls", False), ("bert", "mean", True), ("xlm-roberta", "mean", True),
          ("xlm-roberta", "cls", True)]


@pytest.mark.parametrize(("kind", "pooling", "unigram"), _KINDS)
def test_numpy_and_onnx_agree_on_tiny_multilingual_models(tmp_path: Path, kind: str, pooling: str,
                                                          unigram: bool) -> None:
    from lossless.embed.local import LocalEmbedder

    folder = tiny_model(tmp_path / "m", kind, pooling=pooling, unigram=unigram)
    numpy_vectors = LocalEmbedder(folder, onnx=False).embed(_TEXTS)
    onnx = LocalEmbedder(folder, onnx=True, onnx_cache=tmp_path / "onnx")
    assert np.abs(onnx.embed(_TEXTS) - numpy_vectors).max() < 1e-5 and onnx.backend == "onnxruntime"
    for i, text in enumerate(_TEXTS):  # alone as in a batch (padding changes nothing)
        assert np.abs(LocalEmbedder(folder, onnx=False).embed([text])[0] - numpy_vectors[i]).max() < 1e-5


@pytest.mark.torch
@pytest.mark.parametrize(("kind", "pooling", "unigram"), _KINDS)
def test_tiny_multilingual_models_give_sentence_transformers_vectors(tmp_path: Path, kind: str, pooling: str,
                                                                     unigram: bool) -> None:
    from sentence_transformers import SentenceTransformer

    from lossless.embed.local import LocalEmbedder

    folder = tiny_model(tmp_path / "m", kind, pooling=pooling, unigram=unigram)
    expected = SentenceTransformer(str(folder), device="cpu").encode(_TEXTS, normalize_embeddings=True)
    for onnx in (False, True):
        got = LocalEmbedder(folder, onnx=onnx, onnx_cache=tmp_path / "onnx").embed(_TEXTS)
        assert np.abs(got - expected).max() < 1e-5, (kind, pooling, onnx)


def test_a_folder_with_a_module_the_torch_free_path_does_not_run_is_refused(tmp_path: Path) -> None:
    from lossless.embed.local import LocalEmbedder

    folder = tiny_model(tmp_path / "dense")
    modules = json.loads((folder / "modules.json").read_text())
    modules.insert(2, {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"})
    (folder / "modules.json").write_text(json.dumps(modules))
    with pytest.raises(ValidationError, match=r"has a Dense module.*SentenceTransformerEmbedder"):
        LocalEmbedder(folder).embed(["x"])
    pooling = json.loads((folder / "1_Pooling" / "config.json").read_text())
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({**pooling, "pooling_mode_max_tokens": True}))
    (folder / "modules.json").write_text(json.dumps([m for m in modules if m["path"] != "2_Dense"]))
    with pytest.raises(ValidationError, match=r"pools by \['max', 'mean'\]"):
        LocalEmbedder(folder).embed(["x"])


@pytest.mark.parametrize("kind", ["bert", "xlm-roberta"])
def test_a_multilingual_model_embeds_and_fuses_chinese(store_target: StoreTarget, tmp_path: Path, kind: str) -> None:
    """The user's multilingual folder, pointed at by ``embedder=``: Chinese units get
    vectors and a Chinese query is fused with them; the same folder declared English
    leaves them to keywords."""
    from lossless.embed.local import LocalEmbedder

    folder = tiny_model(tmp_path / "multi", kind, card="multilingual")
    with lossless.open(store_target("multi"), embedder=LocalEmbedder(folder), compaction="deferred") as mem:
        conv = mem.conversation("z")
        ids = _chat(conv)
        mem.recaller.cut_units("z")
        passed = mem.recaller.embed_units("z")
        assert passed.units == passed.vectors > 0
        hits = conv.search("我去了哪个公园", mode="hybrid", limit=20)
        assert {ids["park"], ids["coffee"], ids["noted"]} <= {h.id for h in hits if h.matched in ("vector", "both")}
    english = LocalEmbedder(folder, languages=["en"], model_name="tiny-declared-en")
    with lossless.open(store_target("declared"), embedder=english, compaction="deferred") as mem:
        conv = mem.conversation("z")
        _chat(conv)
        mem.recaller.cut_units("z")
        passed = mem.recaller.embed_units("z")
        assert 0 < passed.vectors < passed.units
        assert {h.matched for h in conv.search("我去了哪个公园", mode="hybrid", limit=20)} <= {"keyword"}


def test_memories_and_file_chunks_the_model_does_not_read_get_no_vector(store_target: StoreTarget,
                                                                         tmp_path: Path) -> None:
    """Long-term memories and indexed files follow the same rule as messages: a Chinese
    record or chunk is not given to an English-only model, nor is a Chinese query; both
    are still found by keywords, and English ones still get vectors."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "runbook.md").write_text("# Rollback\n\nTo roll back a release, redeploy the previous image tag.\n")
    (docs / "值班.md").write_text("# 值班手册\n\n值班的同事每天早上检查数据库备份，发现问题先联系组长。\n")
    emb = HashEmbedder(languages=["en"])
    with lossless.open(store_target("lang-mem"), embedder=emb) as mem:
        mem.memories.add("Maya takes her coffee black", kind="preference")
        mem.memories.add("玛雅每天早上喝一杯黑咖啡，不加糖。", kind="preference")
        mem.files.index([docs])
        assert emb.texts and not _han_heavy(emb.texts)
        assert any("coffee black" in t for t in emb.texts) and any("roll back" in t for t in emb.texts)
        seen = len(emb.texts)
        assert "黑咖啡" in mem.memories.search("黑咖啡")[0].content  # by keywords
        assert mem.files.search("值班 数据库备份", limit=1)[0].path.endswith("值班.md")
        assert len(emb.texts) == seen, emb.texts[seen:]  # no Chinese query went to the model
        assert mem.memories.search("how does Maya take her coffee?")[0].content == "Maya takes her coffee black"
        assert mem.files.search("roll back a release", limit=1)[0].path.endswith("runbook.md")
        assert len(emb.texts) > seen and not _han_heavy(emb.texts)  # English queries did


def test_the_cli_takes_a_model_folder_from_lossless_embedder(store_target: StoreTarget, tmp_path: Path) -> None:
    """A multilingual folder named by LOSSLESS_EMBEDDER serves the CLI (and so serve and
    mcp): Chinese is embedded and found by its vector; LOSSLESS_EMBEDDER_LANGUAGES says
    what a folder without a card reads; a folder that does not exist is a one-line error."""
    db = str(store_target("folder"))
    multi = tiny_model(tmp_path / "multi", card="multilingual")
    bare = tiny_model(tmp_path / "bare", card=None)

    def cli(embedder: str, *args: str, languages: str = "") -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "LOSSLESS_HOME": str(tmp_path / "home"), "LOSSLESS_EMBEDDER": embedder,
               "LOSSLESS_EMBEDDER_LANGUAGES": languages}
        return subprocess.run([sys.executable, "-m", "lossless", "--db", db, *args], capture_output=True,
                              text=True, env=env, timeout=300, check=False)

    assert cli("none", "add", "c", "--role", "user", "--content", PARK_ZH).returncode == 0
    done = cli(str(multi), "--json", "embed", "c")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["embedded"] == {"c": 1}
    found = json.loads(cli(str(multi), "search", "c", PARK_ZH, "--mode", "semantic", "--json").stdout)
    assert "vector" in {h["matched"] for h in found["hits"]} or "both" in {h["matched"] for h in found["hits"]}
    doctor = json.loads(cli(str(bare), "doctor", "--quick", "--json", languages="zh,en").stdout)
    said = [c["detail"] for c in doctor["checks"] if c["name"] == "embedder"]
    assert len(said) == 1 and "reads en, zh" in said[0], said
    missing = cli(str(tmp_path / "nope"), "search", "c", "公园")
    assert missing.returncode != 0 and "Traceback" not in missing.stderr
    assert "LOSSLESS_EMBEDDER must be auto, local, none or a model folder" in missing.stderr
