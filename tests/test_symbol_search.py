"""A query of symbols alone (🎉, €, ★) finds the messages that hold it, on both stores: the
word index keeps no symbols, so such a query is looked up in the text itself (a literal
substring, newest first), and its snippet opens at the symbol. Punctuation alone (``?``,
``...``) still finds nothing: it would match nearly every message."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import lossless
from lossless.store.fts import symbol_query

from .conftest import StoreTarget

CHAT = [
    ("user", "Great first week live, everyone 🎉"),
    ("assistant", "Thanks! The report is ready."),
    ("user", "大家辛苦了！下周见 👋"),
    ("user", "The hotel costs 120 € a night, breakfast included."),
    ("assistant", "Is that 120 € per person or per room?"),
    ("user", "上线成功 🎉🎉 感谢大家"),
    ("user", "Any questions? ... anyone?"),
] + [("assistant", f"Filler message number {i} about the routing service.") for i in range(40)]


def _chat(target: str) -> lossless.Memory:
    mem = lossless.open(target, embedder=None)
    conv = mem.conversation("c")
    for role, text in CHAT:
        conv.add(role=role, content=text)
    return mem


def test_what_counts_as_a_symbol_query() -> None:
    assert symbol_query(" 🎉 ") == "🎉"
    assert symbol_query("€") == "€"
    assert symbol_query("★★★") == "★★★"
    assert symbol_query("🎉 party") is None  # a word: the index finds it
    assert symbol_query("...") is None and symbol_query("？") is None and symbol_query("   ") is None
    assert symbol_query("🎉" * 64) == "🎉" * 64 and symbol_query("🎉" * 65) is None  # not a regex's length error


def test_an_emoji_or_currency_sign_finds_its_messages(store_target: StoreTarget) -> None:
    with _chat(store_target("sym")) as mem:
        conv = mem.conversation("c")
        party = conv.search("🎉", kinds=("message",))
        assert [h.first_seq for h in party] == [6, 1]  # newest first, both, and only them
        assert all("🎉" in h.snippet for h in party)
        assert [h.first_seq for h in conv.search("👋", kinds=("message",))] == [3]
        assert [h.first_seq for h in conv.search("€", kinds=("message",))] == [5, 4]
        assert conv.search("...", kinds=("message",)) == [] and conv.search("？", kinds=("message",)) == []
        assert conv.search("🎉" * 3000, kinds=("message",)) == []  # a wall of emoji: nothing, and no error
        assert conv.assemble(budget_tokens=500, query="🎉" * 3000).tokens <= 500
        grep = conv.grep("🎉")
        assert {h["first_seq"] for h in grep["hits"]} == {1, 6}
        assert mem.search("🎉", kinds=("message",))[0].first_seq == 6  # every conversation too


def test_a_snippet_opens_at_the_symbol(store_target: StoreTarget) -> None:
    with lossless.open(store_target("snip"), embedder=None) as mem:
        conv = mem.conversation("c")
        conv.add(role="user", content="word " * 80 + "and then the launch 🚀 happened " + "more " * 40)
        hit = conv.search("🚀", kinds=("message",))[0]
        assert "🚀" in hit.snippet and hit.snippet.startswith("…")


def test_the_cli_greps_an_emoji_and_refuses_an_option_it_does_not_have(tmp_path: Path) -> None:
    db = str(tmp_path / "x.db")
    _chat(db).close()

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "lossless", "--db", db, *args], capture_output=True,
                              text=True, timeout=120, check=False,
                              env={"PATH": "/usr/bin:/bin", "LOSSLESS_EMBEDDER": "none", "HOME": str(tmp_path),
                                   # the tree under test, not whichever lossless is installed
                                   "PYTHONPATH": str(Path(lossless.__file__).parents[1])})

    done = cli("grep", "c", "🎉")
    assert done.returncode == 0 and "上线成功" in done.stdout and "2 matches" in done.stdout, done.stdout
    # grep has no --mode: it was taken for --model (an abbreviation) and failed as an unknown model
    done = cli("grep", "c", "🎉", "--mode", "substring")
    assert done.returncode == 2 and "unrecognized arguments: --mode substring" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and "model" not in done.stderr.split("error:")[1]
    done = cli("grep", "c", "🎉", "--lim", "1")
    assert done.returncode == 2 and "unrecognized arguments: --lim 1" in done.stderr
