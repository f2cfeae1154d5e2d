from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from lossless.core._cjk_single import SINGLE_TOKEN_CJK
from lossless.core.tokens import EstimatingCounter, TiktokenCounter, count_chat_tokens, get_counter


def test_the_single_token_cjk_characters_are_one_token_each() -> None:
    counter = TiktokenCounter("cl100k_base")
    assert [ch for ch in SINGLE_TOKEN_CJK if counter.count(ch) != 1] == []


def test_cl100k_is_exact_on_known_ids() -> None:
    counter = TiktokenCounter("cl100k_base")
    # token ids published for cl100k_base ("hello world" -> 15339, 1917)
    assert counter.encode("hello world") == [15339, 1917]
    assert counter.count("hello world") == 2
    assert counter.decode(counter.encode("数据库 🚀 tabs\t")) == "数据库 🚀 tabs\t"


@given(st.text(max_size=300))
def test_estimator_over_counts_cjk_and_latin(text: str) -> None:
    est = EstimatingCounter().count(text)
    exact = get_counter("cl100k_base").count(text)
    assert est >= 0
    if text and all("\u4e00" <= ch <= "\u9fff" for ch in text):
        assert est >= exact


@given(st.lists(st.one_of(st.sampled_from(sorted(SINGLE_TOKEN_CJK)),
                         st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF),
                         st.characters(min_codepoint=0xAC00, max_codepoint=0xD7AF)), max_size=200))
def test_estimator_never_under_counts_mixed_common_and_rare_cjk(chars: list[str]) -> None:
    text = "".join(chars)
    assert EstimatingCounter().count(text) >= get_counter("cl100k_base").count(text)


def test_estimator_stays_close_on_everyday_chinese() -> None:
    text = "我们决定使用新的数据库，因为旧的经常崩溃。下一步是迁移数据，然后通知客户。"
    est, exact = EstimatingCounter().count(text), get_counter("cl100k_base").count(text)
    assert exact <= est <= 2 * exact


def test_chat_overhead_counted() -> None:
    counter = get_counter()
    msgs = [{"role": "user", "content": "hi", "name": "Ann"}, {"role": "assistant", "content": "hello"}]
    assert count_chat_tokens(counter, msgs) == 3 + (3 + 1 + 1 + 1) + (3 + 1)
