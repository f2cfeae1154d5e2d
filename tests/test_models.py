from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lossless.core.config import Config
from lossless.core.errors import ValidationError
from lossless.core.models import (
    ENV_VAR,
    ModelInfo,
    context_window,
    find_model,
    history_limits,
    known_models,
    register_model,
    unregister_model,
)


@pytest.fixture(autouse=True)
def _clean_registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No override leaks between tests, and the user's environment does not leak in."""
    monkeypatch.delenv(ENV_VAR, raising=False)
    before = set(known_models())
    yield
    monkeypatch.delenv(ENV_VAR, raising=False)
    for name in set(known_models()) - before:
        unregister_model(name)
    for name in ("gpt-4o", "claude-3-5-sonnet"):
        unregister_model(name)


@pytest.mark.parametrize(
    ("model", "window"),
    [
        ("gpt-4o", 128_000),
        ("gpt-4o-mini", 128_000),
        ("gpt-4.1", 1_047_576),
        ("gpt-4.1-nano", 1_047_576),
        ("gpt-5", 400_000),
        ("o3-mini", 200_000),
        ("gpt-3.5-turbo", 16_385),
        ("claude-3-opus", 200_000),
        ("claude-sonnet-4", 200_000),
        ("gemini-1.5-pro", 2_097_152),
        ("gemini-2.5-flash", 1_048_576),
        ("llama-3", 8_192),
        ("llama-3.1", 131_072),
        ("llama-4-scout", 10_000_000),
        ("qwen-long", 10_000_000),
        ("deepseek-chat", 128_000),
        ("mistral-large", 131_072),
    ],
)
def test_exact_names(model: str, window: int) -> None:
    assert context_window(model) == window
    info = find_model(model)
    assert info is not None and info.name == model


@pytest.mark.parametrize(
    ("model", "canonical"),
    [
        # provider prefixes
        ("openai/gpt-4o", "gpt-4o"),
        ("anthropic/claude-3.5-sonnet", "claude-3-5-sonnet"),
        ("models/gemini-1.5-flash", "gemini-1.5-flash"),
        ("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1"),
        ("Meta-Llama-3.1-70B-Instruct", "llama-3.1"),
        ("us.anthropic.claude-3-5-sonnet-20241022-v2:0", "claude-3-5-sonnet"),
        ("claude-3-5-sonnet-v2@20241022", "claude-3-5-sonnet"),
        # dated and versioned suffixes
        ("claude-3-5-sonnet-20241022", "claude-3-5-sonnet"),
        ("gpt-4o-2024-08-06", "gpt-4o"),
        ("gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
        ("claude-opus-4-1-20250805", "claude-opus-4-1"),
        ("gemini-1.5-pro-002", "gemini-1.5-pro"),
        ("mistral-large-latest", "mistral-large"),
        # ollama tags: the size tag still picks the small Qwen windows
        ("llama3.1:8b", "llama-3.1"),
        ("llama3:latest", "llama-3"),
        ("qwen2.5:7b", "qwen2.5"),
        ("qwen2.5:1.5b", "qwen2.5-1.5b"),
        ("deepseek-r1:7b", "deepseek-r1"),
        ("mistral:7b", "mistral-7b"),
        # case
        ("GPT-4O", "gpt-4o"),
        ("Claude-3-Haiku", "claude-3-haiku"),
    ],
)
def test_forgiving_lookup(model: str, canonical: str) -> None:
    info = find_model(model)
    assert info is not None, model
    assert info.name == canonical


def test_prefix_match_respects_whole_runs() -> None:
    # gpt-4.1 is (gpt, 4, 1): it must not swallow gpt-4-1106-preview, a GPT-4 Turbo
    assert context_window("gpt-4-1106-preview") == 128_000
    assert context_window("gpt-4-0613") == 8_192
    # the longest known prefix wins
    assert find_model("gpt-4o-mini-audio-preview") == find_model("gpt-4o-mini")
    assert find_model("qwen3:4b") != find_model("qwen3:14b")


def test_model_info_fields() -> None:
    info = find_model("claude-sonnet-4-20250514")
    assert info == ModelInfo("claude-sonnet-4", 200_000, 64_000, "anthropic", info.note if info else "")
    assert info is not None and "1,000,000" in info.note  # the 1M beta is noted
    assert find_model("gpt-4.1") == ModelInfo("gpt-4.1", 1_047_576, 32_768, "openai")


def test_unknown_model_error_names_model_and_remedies() -> None:
    with pytest.raises(ValidationError) as err:
        context_window("acme-brain-7")
    msg = str(err.value)
    assert "acme-brain-7" in msg
    assert "register_model" in msg
    assert "context_window=" in msg
    assert ENV_VAR in msg
    assert find_model("acme-brain-7") is None


def test_unknown_model_suggests_close_names() -> None:
    with pytest.raises(ValidationError, match="Did you mean"):
        context_window("claud-opus")


def test_default_for_unknown_model() -> None:
    assert context_window("acme-brain-7", default=4096) == 4096
    assert context_window("gpt-4o", default=4096) == 128_000



def test_an_unknown_model_with_its_window_given_opens(tmp_path: Path) -> None:
    """The unknown-model error says "Pass context_window= explicitly", but
    ``lossless.open(model="通义千问", context_window=32000)`` raised the same error: the
    model's defaults were looked up whatever was given. With the window given, an unknown
    model now opens with that window and the usual defaults; a known one keeps its band."""
    import lossless

    with lossless.open(str(tmp_path / "a.db"), model="通义千问", context_window=32_000) as mem:
        assert (mem.config.context_window, mem.config.model) == (32_000, "通义千问")
        assert mem.config.fresh_tail_count == Config().fresh_tail_count
    with lossless.open(str(tmp_path / "b.db"), model="gpt-4o", context_window=32_000) as mem:
        assert mem.config.context_window == 32_000
        assert mem.config.fresh_tail_count == history_limits(128_000).fresh_tail_count
    with pytest.raises(ValidationError, match="unknown model '通义千问'"):
        lossless.open(str(tmp_path / "c.db"), model="通义千问")

def test_register_overrides_and_is_forgiving() -> None:
    register_model("gpt-4o", 64_000, max_output=4_096)
    assert context_window("gpt-4o") == 64_000
    assert context_window("openai/gpt-4o-2024-08-06") == 64_000
    assert context_window("gpt-4o-mini") == 128_000  # a longer built-in name still wins
    info = find_model("gpt-4o")
    assert info is not None and info.family == "openai" and info.max_output == 4_096
    assert unregister_model("gpt-4o") is True
    assert unregister_model("gpt-4o") is False
    assert context_window("gpt-4o") == 128_000


def test_register_new_model() -> None:
    register_model("acme-brain-7", 32_768)
    assert context_window("ACME-Brain-7:q4") == 32_768
    assert known_models()["acme-brain-7"] == ModelInfo("acme-brain-7", 32_768, None, "custom")


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (("", 1000), "letter or digit"),
        (("x", 0), "positive integer"),
        (("x", -5), "positive integer"),
        (("x", 1.5), "positive integer"),
        (("x", True), "positive integer"),
        (("x", 1000, 0), "positive integer"),
        (("x", 1000, 2000), "cannot exceed"),
    ],
)
def test_register_rejects_bad_input(args: tuple[object, ...], match: str) -> None:
    with pytest.raises(ValidationError, match=match):
        register_model(*args)  # type: ignore[arg-type]


def test_bad_lookup_input() -> None:
    with pytest.raises(ValidationError):
        context_window("   ")
    with pytest.raises(ValidationError):
        context_window(None)  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        context_window("gpt-4o", default=0)


def test_env_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_VAR, "gpt-4o=50000, acme-brain-7=9000")
    assert context_window("openai/gpt-4o") == 50_000
    assert context_window("acme-brain-7") == 9_000
    assert known_models()["acme-brain-7"].context_window == 9_000
    # register_model is stronger than the environment
    register_model("gpt-4o", 60_000)
    assert context_window("gpt-4o") == 60_000


@pytest.mark.parametrize("value", ["gpt-4o", "gpt-4o=", "gpt-4o=lots", "=1000", "gpt-4o=-3"])
def test_bad_env_override(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(ENV_VAR, value)
    with pytest.raises(ValidationError, match=ENV_VAR):
        context_window("gpt-4o")


def test_known_models_lists_canonical_names_once() -> None:
    models = known_models()
    assert "gpt-4o" in models and "chatgpt-4o" not in models  # aliases are not listed
    assert all(name == info.name for name, info in models.items())
    assert {"openai", "anthropic", "google", "qwen", "deepseek", "llama", "mistral"} <= {
        i.family for i in models.values()
    }
    for info in models.values():
        assert info.context_window > 0
        assert info.max_output is None or 0 < info.max_output <= info.context_window


# ------------------------------------------------------------------ history limits


@pytest.mark.parametrize(
    ("window", "messages"),
    [(8_192, 20), (16_383, 20), (16_384, 50), (32_768, 50), (65_536, 100), (128_000, 100),
     (131_072, 100), (200_000, 200), (2_097_152, 200)],
)
def test_history_bands_follow_the_table(window: int, messages: int) -> None:
    assert history_limits(window).max_history_messages == messages


def test_history_limits_configure_the_engine() -> None:
    limits = history_limits(128_000)
    assert limits.fresh_tail_count == 20
    assert limits.trigger_ratio == 0.8
    assert limits.reserve_output_tokens == 16_000
    assert limits.budget_tokens == 112_000
    config = Config(**limits.config_kwargs())
    assert config.context_window == limits.budget_tokens
    assert config.trigger_tokens == limits.trigger_tokens
    # the seed's compaction-frequency column: 5–10, 20–30, ~50 turns, rarely
    assert [history_limits(w).turns_per_compaction for w in (8_192, 32_768, 128_000, 200_000)] == [8, 20, 40, 80]


def test_smallest_window_still_makes_a_valid_config() -> None:
    limits = history_limits(512)
    config = Config(**limits.config_kwargs())
    assert config.context_window == limits.budget_tokens >= 256
    assert config.trigger_tokens == limits.trigger_tokens <= config.context_window
    assert 0 < config.fresh_tail_count == limits.fresh_tail_count < limits.max_history_messages


@pytest.mark.parametrize("window", [0, 511, -1, 1.5, True, "8192"])
def test_history_limits_rejects_bad_windows(window: object) -> None:
    with pytest.raises(ValidationError):
        history_limits(window)  # type: ignore[arg-type]


@given(st.integers(512, 20_000_000), st.integers(512, 20_000_000))
def test_history_limits_monotone_in_window(a: int, b: int) -> None:
    small, big = history_limits(min(a, b)), history_limits(max(a, b))
    for name in ("max_history_messages", "fresh_tail_count", "reserve_output_tokens",
                 "budget_tokens", "trigger_tokens", "turns_per_compaction"):
        assert getattr(small, name) <= getattr(big, name), name
    assert 0 < big.fresh_tail_count < big.max_history_messages
    assert big.budget_tokens >= 256
