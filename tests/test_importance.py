from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lossless.core.errors import ValidationError
from lossless.core.importance import (
    DEFAULT_CATEGORIES,
    Category,
    DuplicateTracker,
    Importance,
    KeywordScorer,
    Reason,
    Scorer,
    score,
    score_message,
)
from lossless.core.types import Message

NEUTRAL = "The meeting notes are in the shared folder and cover what the team talked about today."


def labels(imp: Importance) -> list[str]:
    return [r.label for r in imp.reasons]


def message(role: str, content: Any, **kw: Any) -> Message:
    return Message(id="msg_1", conversation_id="c", seq=1, role=role, content=content,
                   created_at=datetime(2025, 1, 1, tzinfo=UTC), token_count=10, **kw)


def test_neutral_message_is_baseline() -> None:
    imp = score(NEUTRAL, role="user")
    assert imp.reasons == ()
    assert imp.value == pytest.approx(0.2)
    assert "baseline" in imp.explain()


@pytest.mark.parametrize(
    ("text", "label", "evidence"),
    [
        ("Traceback (most recent call last):\n  File app.py", "error", "Traceback"),
        ("the nightly export failed again", "error", "failed"),
        ("raise ValueError('bad shard')", "error", "ValueError"),
        ("the server returned 503 on every retry", "error", "returned 503"),
        ("the job exited with code 2 after the migration", "error", "exited with code 2"),
        ("这个error怎么解决", "error", "error"),
        ("部署的时候报错了，连接被拒绝", "error", "报错"),
        ("We decided to keep Postgres for the ledger.", "decision", "decided"),
        ("Let's go with the blue-green rollout", "decision", "Let's go with"),
        ("Let’s go with the blue-green rollout", "decision", "Let’s go with"),
        ("我们决定采用方案B", "decision", "决定"),
        ("You must not touch the prod database.", "constraint", "must not"),
        ("The budget is at most 200 dollars a month.", "constraint", "budget"),
        ("必须在周五之前完成上线", "constraint", "必须"),
        ("永远不要在周五部署。", "constraint", "永远不要"),
        ("千万别把密钥提交到仓库里", "constraint", "千万别"),
        ("数据库一律只用 PostgreSQL", "constraint", "一律"),
        ("以后请用中文回答我", "memory", "以后请"),
        ("那就这么定了，下周一上线", "decision", "就这么定"),
        ("No, I meant the staging cluster.", "correction", "No,"),
        ("That's wrong, the port is different.", "correction", "That's wrong"),
        ("不对，应该是另一个端口", "correction", "不对"),
        ("Please remember that the API key rotates monthly.", "memory", "remember"),
        ("请记住这个客户的时区", "memory", "记住"),
        ("I prefer tabs over spaces in this repo.", "preference", "I prefer"),
        ("我更喜欢用 pytest 而不是 unittest", "preference", "更喜欢"),
        ("The config lives at /etc/app/config.yaml on the host.", "identifier", "/etc/app/"),
        ("See https://example.com/docs for the details of it.", "identifier", "https://example.com/docs"),
        ("The billing service moved to port 5432 yesterday.", "identifier", "5432"),
        # an English file name or status code touching Chinese (\b saw no edge there)
        ("请看一下main.py文件里的配置", "identifier", ".py"),
        ("接口返回status 500了", "error", "status 500"),
        ("进程exit code 1了", "error", "exit code 1"),
    ],
)
def test_category_raises_score_with_evidence(text: str, label: str, evidence: str) -> None:
    imp = score(text, role="user")
    assert label in labels(imp), imp.explain()
    reason = next(r for r in imp.reasons if r.label == label)
    assert reason.weight > 0
    assert evidence in reason.evidence
    assert evidence in imp.explain()
    assert imp.value > score(NEUTRAL, role="user").value


def test_high_categories_outrank_identifiers() -> None:
    ident = score("The billing service moved to port 5432 yesterday.").value
    for text in ("the deploy failed with a timeout", "we decided to ship on monday",
                 "you must never force-push to main", "remember the staging password rotates"):
        assert score(text).value > ident


def test_more_evidence_scores_higher() -> None:
    one = score("the export failed last night", role="user").value
    two = score("the export failed last night; we decided to retry at most 3 times", role="user").value
    assert two > one


@pytest.mark.parametrize(
    "text",
    ["no errors found in the whole run", "3 passed, 0 failed in 1.2s", "it finished without errors today",
     "a reign of terror and some mustard"],
)
def test_negated_or_embedded_words_are_not_errors(text: str) -> None:
    assert "error" not in labels(score(text))


def test_corrections_and_preferences_count_only_for_users() -> None:
    text = "Actually, I prefer the second option instead."
    assert {"correction", "preference"} <= set(labels(score(text, role="user")))
    assert {"correction", "preference"} <= set(labels(score(text)))  # role unknown
    assert not {"correction", "preference"} & set(labels(score(text, role="assistant")))


def test_tool_calls_and_results() -> None:
    call = score("→ tool_call run_query({\"shard\": 3})", role="assistant", has_tool_calls=True)
    assert "tool_call" in labels(call)
    assert "run_query" in call.explain()
    result = score('{"rows": 12, "elapsed_ms": 40}', role="tool")
    assert "tool_result" in labels(result)
    assert score('{"rows": 12}', is_tool_result=True).value == score('{"rows": 12}', role="tool").value
    assert call.value > score(NEUTRAL).value


@pytest.mark.parametrize("text", ["ok", "thanks!", "ok thanks 👍", "lol", "hi", "Hahaha", "谢谢", "好的", "哈哈哈", "👍",
                                  "sounds good, thanks!"])
def test_chitchat_is_low(text: str) -> None:
    imp = score(text, role="user")
    assert labels(imp) == ["chitchat"]
    assert imp.value < 0.1
    assert "chit-chat" in imp.explain()


def test_chitchat_inside_real_content_is_not_penalised() -> None:
    imp = score("thanks, now fix the failing test in src/app.py", role="user")
    assert "chitchat" not in labels(imp)
    assert "error" in labels(imp)


def test_very_short_is_low_unless_it_says_something() -> None:
    imp = score("why?", role="user")
    assert labels(imp) == ["short"]
    assert imp.value < score(NEUTRAL).value
    assert "short" not in labels(score("No, port 5432", role="user"))


def test_duplicate_scores_low() -> None:
    seen = DuplicateTracker()
    text = "The nightly export failed because the disk on db-2 is full."
    first = score(text, seen=seen)
    again = score("the nightly export   FAILED because the disk on db-2 is full.", seen=seen)
    assert "duplicate" not in labels(first)
    assert labels(again)[-1] == "duplicate"
    assert again.value < 0.2 < first.value
    assert "duplicate of an earlier message" in again.explain()
    assert len(seen) == 1


def test_duplicate_tracker_ignores_short_texts_and_is_bounded() -> None:
    seen = DuplicateTracker(max_entries=2)
    assert not seen.observe("yes") and not seen.observe("yes")  # two answers, not a repeat
    assert len(seen) == 0
    for text in ("first message text here", "second message text here", "third message text here"):
        assert not seen.observe(text)
    assert len(seen) == 2
    assert "first message text here" not in seen  # the oldest went first
    assert "third message text here" in seen
    seen.clear()
    assert len(seen) == 0


def test_explain_lists_every_reason() -> None:
    imp = score("We decided the deploy must not run on Fridays because it failed twice.", role="user")
    text = imp.explain()
    assert text.startswith(f"importance {imp.value:.2f}")
    for reason in imp.reasons:
        assert reason.evidence in text
    assert "decision or choice" in text and "+0.55" in text


def test_reasons_unpack_as_triples() -> None:
    label, weight, evidence = score("the build failed").reasons[0]
    assert (label, weight) == ("error", 0.7)
    assert "failed" in evidence


def test_score_message_reads_role_and_tool_calls() -> None:
    call = message("assistant", "", tool_calls=({"id": "c1", "type": "function",
                                                   "function": {"name": "run_tests", "arguments": "{}"}},))
    assert labels(score_message(call)) == ["tool_call"]
    assert "run_tests" in score_message(call).explain()
    result = message("tool", "exit status 1: 2 failed", tool_call_id="c1")
    assert {"error", "tool_result"} <= set(labels(score_message(result)))
    anthropic = message("user", [{"type": "tool_result", "content": "done"}])
    assert "tool_result" in labels(score_message(anthropic))
    parts = message("user", [{"type": "text", "text": "I prefer dark mode everywhere."}])
    assert "preference" in labels(score_message(parts))


def test_score_message_with_custom_scorer_and_duplicates() -> None:
    class Constant:
        def score(self, text: str, *, role: str | None = None, has_tool_calls: bool = False,
                  is_tool_result: bool = False) -> Importance:
            return Importance(0.5, (Reason("constant", 0.5, text[:10]),))

    scorer: Scorer = Constant()
    seen = DuplicateTracker()
    msg = message("user", "a long enough message to be tracked")
    assert score_message(msg, scorer, seen=seen).value == 0.5
    again = score_message(msg, scorer, seen=seen)
    assert again.value == pytest.approx(0.5 * 0.15)
    assert [r.label for r in again.reasons] == ["constant", "duplicate"]


def test_keyword_scorer_is_configurable() -> None:
    scorer = KeywordScorer(weights={"error": 0.1}, extra_keywords={"decision": ["ship it", "定稿"]})
    assert scorer.score("the build failed").value == pytest.approx(1 - 0.8 * 0.9)
    assert "decision" in labels(scorer.score("Looks fine to me, ship it."))
    assert "decision" in labels(scorer.score("这个版本定稿"))
    custom = KeywordScorer([Category("billing", 0.9, ("invoice",), (r"inv-\d+",))])
    assert labels(custom.score("Please resend the invoice today, Sam.")) == ["billing"]
    assert labels(custom.score("Look up inv-2041 for me please.")) == ["billing"]
    assert "error" not in labels(custom.score("the build failed"))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"weights": {"nope": 0.5}},
        {"weights": {"error": 1.5}},
        {"extra_keywords": {"nope": ["x"]}},
        {"extra_keywords": {"tool_call": ["x"]}},
        {"extra_keywords": {"decision": [" "]}},
        {"base": -0.1},
        {"short_tokens": -1},
        {"categories": [Category("x", 0.5, ("a",)), Category("x", 0.5, ("b",))]},
        {"categories": [Category("x", 0.5)]},
        {"categories": [Category("x", 0.5, (), ("(unclosed",))]},
    ],
)
def test_bad_scorer_config(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        KeywordScorer(**kwargs)


def test_bad_inputs() -> None:
    with pytest.raises(ValidationError):
        score(None)  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        Importance(1.5)
    with pytest.raises(ValidationError):
        Importance(0.5).penalised("x", 2.0, "")
    with pytest.raises(ValidationError):
        DuplicateTracker(min_chars=0)


def test_default_categories_are_exported() -> None:
    assert [c.label for c in DEFAULT_CATEGORIES] == [
        "error", "decision", "constraint", "correction", "memory", "preference", "identifier"]


def test_deterministic() -> None:
    text = "We decided the deploy must not run on Fridays because it failed twice at /srv/app/run.sh."
    first = score(text, role="user")
    for _ in range(3):
        assert score(text, role="user") == first
    assert KeywordScorer().score(text, role="user") == first


@given(st.text(max_size=400), st.sampled_from([None, "user", "assistant", "tool", "system"]),
       st.booleans(), st.booleans())
def test_value_always_in_unit_interval(text: str, role: str | None, calls: bool, result: bool) -> None:
    imp = score(text, role=role, has_tool_calls=calls, is_tool_result=result)
    assert 0.0 <= imp.value <= 1.0
    assert imp.explain()
    assert all(-1.0 <= r.weight <= 1.0 for r in imp.reasons)
    assert all(r.evidence.strip("…") in " ".join(text.split()) for r in imp.reasons)


@given(st.lists(st.sampled_from(["error", "decided", "must", "remember", "I prefer", "5432", "决定", "不对",
                                 "hello", "the", "thanks", "\n", "’", "İ"]), max_size=30).map(" ".join))
def test_value_in_unit_interval_on_keyword_soup(text: str) -> None:
    seen = DuplicateTracker()
    for _ in range(2):
        imp = score(text, role="user", seen=seen)
        assert 0.0 <= imp.value <= 1.0
        for reason in imp.reasons:  # evidence is always a piece of the text
            assert reason.evidence.strip("…") in " ".join(text.split())
