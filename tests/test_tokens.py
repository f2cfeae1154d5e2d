from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from lossless.core.tokens import EstimatingCounter, TiktokenCounter, count_chat_tokens, get_counter


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


def test_chat_overhead_counted() -> None:
    counter = get_counter()
    msgs = [{"role": "user", "content": "hi", "name": "Ann"}, {"role": "assistant", "content": "hello"}]
    assert count_chat_tokens(counter, msgs) == 3 + (3 + 1 + 1 + 1) + (3 + 1)
