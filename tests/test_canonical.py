"""Snapshot tests of the id and content-hash scheme (``lossless.core._canonical``).

Treat any edit as a migration: every message id, summary id and content hash ever
stored was computed by this scheme. If one of these literals has to change, the change
breaks every existing database (ids no longer match, ``verify`` reports every message as
altered) and needs a migration that rewrites them, not an updated literal.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from lossless.core._canonical import canonical_json, message_hash, message_id, summary_id
from lossless.core.types import SourceRef

CALL = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}


def test_message_ids_are_pinned() -> None:
    assert message_id("conv-1", 1) == "msg_9878730bc286d08dc48e"
    assert message_id("conv-1", 2) == "msg_5dbdb6145d957588f8a1"
    assert message_id("", 0) == "msg_db3426e878068d28d269"
    assert message_id("日本語", 42) == "msg_9092b69bbcb1637263f0"


def test_message_hashes_are_pinned() -> None:
    assert message_hash("user", "hello", None, None, None) == (
        "133913acb6257cd6cc7707b2443d132576da6ff5e875d20a2b19435b2f7a3c23")
    assert message_hash("assistant", [{"type": "text", "text": "héllo"}], "bot", [CALL], None) == (
        "dc503691894ca59692ce2923c1763fe104885448c0c780c22d2ae65456172e65")
    assert message_hash("tool", "ok", None, None, "c1") == (
        "72fc74891b09960aeb5fc16875d67cfb7359063f91462e435ca8f0d5eb28795d")


def test_summary_ids_are_pinned() -> None:
    leaf = (SourceRef(kind="message", id="msg_a"), SourceRef(kind="message", id="msg_b"))
    assert summary_id("conv-1", 0, leaf, "a summary") == "sum_61771fd225583a984221"
    assert summary_id("conv-1", 1, (SourceRef(kind="summary", id="sum_a"),), "") == "sum_1417b8e10d34c814e0f1"


def test_canonical_json_is_pinned() -> None:
    assert canonical_json({"b": 1, "a": [1, "é"]}) == '{"a":[1,"é"],"b":1}'


def test_the_old_import_path_gives_the_same_functions() -> None:
    from lossless.store import sqlite

    assert sqlite.message_id is message_id
    assert sqlite.message_hash is message_hash
    assert sqlite.summary_id is summary_id


# -- properties ----------------------------------------------------------------------------

texts = st.text(max_size=30)
seqs = st.integers(min_value=0, max_value=2**40)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | texts,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=12,
)
refs = st.lists(st.builds(SourceRef, kind=st.sampled_from(["message", "summary"]),
                          id=st.text(alphabet="abcdef0123456789_", min_size=1, max_size=12)),
                min_size=1, max_size=5)


@given(texts, seqs)
def test_message_ids_are_deterministic_and_shaped(conversation: str, seq: int) -> None:
    mid = message_id(conversation, seq)
    assert mid == message_id(conversation, seq)
    assert mid.startswith("msg_") and len(mid) == 24 and int(mid[4:], 16) >= 0


@given(texts, seqs, seqs)
def test_different_seqs_give_different_message_ids(conversation: str, a: int, b: int) -> None:
    assert (message_id(conversation, a) == message_id(conversation, b)) == (a == b)


@given(st.sampled_from(["user", "assistant", "tool", "system"]), json_values, st.none() | texts,
       st.none() | texts)
def test_message_hash_ignores_none_versus_no_tool_calls(role: str, content: object, name: str | None,
                                                       call_id: str | None) -> None:
    digest = message_hash(role, content, name, None, call_id)
    assert digest == message_hash(role, content, name, (), call_id) == message_hash(role, content, name, [], call_id)
    assert len(digest) == 64 and int(digest, 16) >= 0


@given(st.dictionaries(texts, json_values, min_size=2, max_size=5))
def test_message_hash_ignores_key_order(content: dict[str, object]) -> None:
    reordered = dict(reversed(list(content.items())))
    assert message_hash("user", [content], None, None, None) == message_hash("user", [reordered], None, None, None)


@given(texts, texts)
def test_message_hash_depends_on_the_content(a: str, b: str) -> None:
    assert (message_hash("user", a, None, None, None) == message_hash("user", b, None, None, None)) == (a == b)


@given(texts, st.integers(0, 5), refs, texts)
def test_summary_ids_are_deterministic_and_shaped(conversation: str, depth: int, sources: list[SourceRef],
                                                  content: str) -> None:
    sid = summary_id(conversation, depth, sources, content)
    assert sid == summary_id(conversation, depth, tuple(sources), content)
    assert sid.startswith("sum_") and len(sid) == 24


@given(texts, refs, texts)
def test_summary_ids_are_order_sensitive(conversation: str, sources: list[SourceRef], content: str) -> None:
    flipped = list(reversed(sources))
    same = [s.id for s in flipped] == [s.id for s in sources]
    assert (summary_id(conversation, 0, sources, content) == summary_id(conversation, 0, flipped, content)) == same


@given(texts, refs, texts, texts)
def test_summary_ids_depend_on_text_and_depth(conversation: str, sources: list[SourceRef], a: str, b: str) -> None:
    assert (summary_id(conversation, 0, sources, a) == summary_id(conversation, 0, sources, b)) == (a == b)
    assert summary_id(conversation, 0, sources, a) != summary_id(conversation, 1, sources, a)


@given(json_values)
def test_canonical_json_is_a_fixed_point(value: object) -> None:
    import json

    once = canonical_json(value)
    assert canonical_json(json.loads(once)) == once
