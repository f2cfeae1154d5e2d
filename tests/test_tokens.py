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


# one everyday sentence per script; the estimator once counted every non-CJK letter as a
# Latin one (~4 a token), and came out at a third of cl100k's count on Hindi, Thai, Greek
SENTENCES = {
    "ru": "Быстрая коричневая лиса прыгает через ленивую собаку у реки сегодня.",
    "el": "Η γρήγορη καφέ αλεπού πηδά πάνω από τον τεμπέλη σκύλο σήμερα.",
    "ar": "الثعلب البني السريع يقفز فوق الكلب الكسول بالقرب من النهر اليوم.",
    "he": "השועל החום המהיר קופץ מעל הכלב העצלן ליד הנהר היום.",
    "hi": "तेज़ भूरी लोमड़ी आज नदी के किनारे आलसी कुत्ते के ऊपर कूदती है।",
    "th": "สุนัขจิ้งจอกสีน้ำตาลกระโดดข้ามสุนัขขี้เกียจใกล้แม่น้ำวันนี้",
    "vi": "Con cáo nâu nhanh nhẹn nhảy qua con chó lười biếng gần bờ sông hôm nay.",
    "fr": "Le renard brun rapide saute par-dessus le chien paresseux près de la rivière.",
    "de": "Die schnelle braune Füchsin springt über den faulen Hund am Fluss.",
    "zh": "我们决定使用新的数据库，因为旧的经常崩溃。下一步是迁移数据，然后通知客户！",
    "ko": "빠른 갈색 여우가 오늘 강가에서 게으른 개를 뛰어넘습니다.",
    "emoji": "🎉🎉 done 👍🏽 👨‍👩‍👧 ❤️ 🇨🇳 ✨ ∑∫√∞≈ → “quoted” — ‘really’…",
}


def test_estimator_errs_high_on_every_script_and_stays_within_about_twice() -> None:
    exact_counter = get_counter("cl100k_base")
    for lang, text in SENTENCES.items():
        est, exact = EstimatingCounter().count(text), exact_counter.count(text)
        assert exact <= est <= 2.2 * exact, (lang, est, exact)


@given(st.lists(st.sampled_from(sorted(SENTENCES.values())), min_size=1, max_size=12), st.sampled_from([" ", "\n", ""]))
def test_property_estimator_never_under_counts_sentences_of_any_script_in_any_mix(picked: list[str], sep: str) -> None:
    """Messages made of those sentences, in any order and mix. (Word salad is not held to
    it: a lone short word of a script cl100k knows little, 「קופץ」 or "nhanh", can take a
    token more than its letters' rate gives.)"""
    text = sep.join(picked)
    assert EstimatingCounter().count(text) >= get_counter("cl100k_base").count(text)
