"""Known models' context windows, and how much history to keep for a window of a size.

``context_window("anthropic/claude-3-5-sonnet-20241022")`` answers 200000: a lookup
forgives case, provider prefixes (``openai/``, ``models/``, Bedrock's
``us.anthropic.``), Ollama tags (``llama3.1:8b``), dated or versioned suffixes
(``gpt-4o-2024-08-06``) and dots written as dashes (``claude-3.5-sonnet``). Names are
compared as sequences of letter and digit runs, so ``llama3.1`` is ``llama-3.1`` and a
known name matches only a whole-run prefix: ``gpt-4.1`` does not swallow
``gpt-4-1106-preview``.

Overrides, strongest first: :func:`register_model`, then the environment variable
``LOSSLESS_MODEL_WINDOWS`` (``"name=tokens,name2=tokens"``), then the built-in table.

The table reports the window a model was trained and published with. A runtime may serve
less: Ollama runs every model with its own ``num_ctx`` (a few thousand tokens unless you
raise it), and hosted Llama 4 endpoints cap Scout far below 10M. Pass the window you are
actually served as ``context_window=``.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from functools import cache, lru_cache

from lossless.core import environ
from lossless.core.errors import ValidationError

__all__ = [
    "ENV_VAR",
    "HistoryLimits",
    "ModelInfo",
    "context_window",
    "find_model",
    "history_limits",
    "known_models",
    "register_model",
    "unregister_model",
]

ENV_VAR = "LOSSLESS_MODEL_WINDOWS"


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """One model's published limits. ``max_output`` is None where no figure is published
    (or it is the whole window); ``note`` says what the plain number leaves out."""

    name: str
    context_window: int
    max_output: int | None
    family: str
    note: str = ""


# Published figures as of 2025–2026, from each vendor's model documentation; a vendor
# can change them, so every entry is overridable (register_model, LOSSLESS_MODEL_WINDOWS).
# "128K" models are given as the vendor writes the number (OpenAI 128000, Meta and Qwen
# 131072). Rows: name, window, max output, family, note, aliases.
_Row = tuple[str, int, int | None, str, str, tuple[str, ...]]
_BUILTIN: tuple[_Row, ...] = (
    # OpenAI
    ("gpt-5", 400_000, 128_000, "openai", "input at most 272,000", ()),
    ("gpt-5-mini", 400_000, 128_000, "openai", "input at most 272,000", ()),
    ("gpt-5-nano", 400_000, 128_000, "openai", "input at most 272,000", ()),
    ("gpt-5-chat", 128_000, 16_384, "openai", "", ()),
    ("gpt-4.1", 1_047_576, 32_768, "openai", "", ()),
    ("gpt-4.1-mini", 1_047_576, 32_768, "openai", "", ()),
    ("gpt-4.1-nano", 1_047_576, 32_768, "openai", "", ()),
    ("gpt-4.5", 128_000, 16_384, "openai", "", ()),
    ("gpt-4o", 128_000, 16_384, "openai", "", ("chatgpt-4o",)),
    ("gpt-4o-mini", 128_000, 16_384, "openai", "", ()),
    ("o1", 200_000, 100_000, "openai", "", ()),
    ("o1-mini", 128_000, 65_536, "openai", "", ()),
    ("o1-preview", 128_000, 32_768, "openai", "", ()),
    ("o3", 200_000, 100_000, "openai", "", ()),
    ("o3-mini", 200_000, 100_000, "openai", "", ()),
    ("o3-pro", 200_000, 100_000, "openai", "", ()),
    ("o4-mini", 200_000, 100_000, "openai", "", ()),
    ("gpt-oss-120b", 131_072, None, "openai", "", ()),
    ("gpt-oss-20b", 131_072, None, "openai", "", ()),
    ("gpt-4-turbo", 128_000, 4_096, "openai", "", ("gpt-4-1106-preview", "gpt-4-0125-preview",
                                                   "gpt-4-vision-preview")),
    ("gpt-4", 8_192, 8_192, "openai", "", ()),
    ("gpt-4-32k", 32_768, 8_192, "openai", "", ()),
    ("gpt-3.5-turbo", 16_385, 4_096, "openai", "", ()),
    ("gpt-3.5-turbo-instruct", 4_096, 4_096, "openai", "", ()),
    # Anthropic (every window is 200K; max output grew by generation)
    ("claude-3-haiku", 200_000, 4_096, "anthropic", "", ()),
    ("claude-3-sonnet", 200_000, 4_096, "anthropic", "", ()),
    ("claude-3-opus", 200_000, 4_096, "anthropic", "", ()),
    ("claude-3-5-haiku", 200_000, 8_192, "anthropic", "", ()),
    ("claude-3-5-sonnet", 200_000, 8_192, "anthropic", "", ()),
    ("claude-3-7-sonnet", 200_000, 64_000, "anthropic", "", ()),
    ("claude-sonnet-4", 200_000, 64_000, "anthropic", "1,000,000 with the context-1m beta",
     ("claude-4-sonnet",)),
    ("claude-opus-4", 200_000, 32_000, "anthropic", "", ("claude-4-opus",)),
    ("claude-opus-4-1", 200_000, 32_000, "anthropic", "", ()),
    ("claude-sonnet-4-5", 200_000, 64_000, "anthropic", "1,000,000 with the context-1m beta",
     ("claude-4-5-sonnet",)),
    ("claude-haiku-4-5", 200_000, 64_000, "anthropic", "", ()),
    ("claude-opus-4-5", 200_000, 64_000, "anthropic", "", ()),
    ("claude-2", 100_000, 4_096, "anthropic", "", ()),
    ("claude-2.1", 200_000, 4_096, "anthropic", "", ()),
    # Google
    ("gemini-1.0-pro", 32_760, 8_192, "google", "", ("gemini-pro",)),
    ("gemini-1.5-pro", 2_097_152, 8_192, "google", "", ()),
    ("gemini-1.5-flash", 1_048_576, 8_192, "google", "", ()),
    ("gemini-2.0-flash", 1_048_576, 8_192, "google", "", ()),
    ("gemini-2.0-pro", 2_097_152, 8_192, "google", "", ()),
    ("gemini-2.5-flash", 1_048_576, 65_536, "google", "", ()),
    ("gemini-2.5-pro", 1_048_576, 65_536, "google", "", ()),
    ("gemini-3-pro", 1_048_576, 65_536, "google", "", ()),
    ("gemma-2", 8_192, None, "google", "", ()),
    ("gemma-3", 131_072, None, "google", "", ()),
    ("gemma-3-1b", 32_768, None, "google", "", ()),
    # Qwen (open weights: 131,072 for 7B and up with YaRN enabled, 32,768 for the small ones)
    ("qwen2.5", 131_072, 8_192, "qwen", "32,768 without YaRN rope scaling", ()),
    ("qwen2.5-0.5b", 32_768, 8_192, "qwen", "", ()),
    ("qwen2.5-1.5b", 32_768, 8_192, "qwen", "", ()),
    ("qwen2.5-3b", 32_768, 8_192, "qwen", "", ()),
    ("qwen2.5-coder", 131_072, 8_192, "qwen", "32,768 without YaRN rope scaling", ()),
    ("qwen2.5-coder-0.5b", 32_768, 8_192, "qwen", "", ()),
    ("qwen2.5-coder-1.5b", 32_768, 8_192, "qwen", "", ()),
    ("qwen2.5-coder-3b", 32_768, 8_192, "qwen", "", ()),
    ("qwen3", 131_072, None, "qwen", "32,768 natively, 131,072 with YaRN", ()),
    ("qwen3-0.6b", 32_768, None, "qwen", "", ()),
    ("qwen3-1.7b", 32_768, None, "qwen", "", ()),
    ("qwen3-4b", 32_768, None, "qwen", "", ()),
    ("qwen3-coder", 262_144, 65_536, "qwen", "", ()),
    ("qwq", 131_072, None, "qwen", "", ()),
    ("qwen3-max", 262_144, None, "qwen", "", ()),
    ("qwen-max", 32_768, 8_192, "qwen", "", ()),
    ("qwen-plus", 131_072, 8_192, "qwen", "", ()),
    ("qwen-turbo", 1_000_000, 8_192, "qwen", "", ()),
    ("qwen-long", 10_000_000, 8_192, "qwen", "", ()),
    # DeepSeek (the API served 64K until V3.1, 128K since)
    ("deepseek-chat", 128_000, 8_192, "deepseek", "64K before V3.1", ()),
    ("deepseek-reasoner", 128_000, 65_536, "deepseek", "64K before V3.1", ()),
    ("deepseek-v3", 128_000, None, "deepseek", "", ()),
    ("deepseek-r1", 128_000, None, "deepseek", "", ()),
    ("deepseek-coder", 16_384, None, "deepseek", "", ()),
    ("deepseek-coder-v2", 128_000, None, "deepseek", "", ()),
    # Llama
    ("llama-2", 4_096, None, "llama", "", ()),
    ("codellama", 16_384, None, "llama", "", ("code-llama",)),
    ("llama-3", 8_192, None, "llama", "", ()),
    ("llama-3.1", 131_072, None, "llama", "", ()),
    ("llama-3.2", 131_072, None, "llama", "", ()),
    ("llama-3.3", 131_072, None, "llama", "", ()),
    ("llama-4-scout", 10_000_000, None, "llama", "hosted endpoints serve far less", ()),
    ("llama-4-maverick", 1_000_000, None, "llama", "hosted endpoints often serve less", ()),
    # Mistral
    ("mistral", 32_768, None, "mistral", "", ()),
    ("mistral-7b", 32_768, None, "mistral", "", ("mistral-tiny",)),
    ("mistral-large", 131_072, None, "mistral", "", ()),
    ("mistral-medium", 131_072, None, "mistral", "", ()),
    ("mistral-small", 131_072, None, "mistral", "", ()),
    ("mistral-small-2501", 32_768, None, "mistral", "", ()),
    ("mistral-nemo", 131_072, None, "mistral", "", ()),
    ("ministral", 131_072, None, "mistral", "", ()),
    ("mixtral", 32_768, None, "mistral", "", ()),
    ("mixtral-8x22b", 65_536, None, "mistral", "", ()),
    ("codestral", 262_144, None, "mistral", "", ()),
    ("devstral", 131_072, None, "mistral", "", ()),
    ("pixtral", 131_072, None, "mistral", "", ()),
)

Key = tuple[str, ...]

_RUN = re.compile(r"[a-z]+|\d+")
# Bedrock ids: an optional cross-region prefix, then the vendor, then the model
_BEDROCK = re.compile(r"^(?:(?:us|eu|apac|global)\.)?(?:anthropic|meta|mistral|openai|deepseek|qwen|google)\.")
# Leading runs that name a vendor or a catalogue, never a model ("meta-llama-3.1-8b",
# "open-mistral-nemo"); dropped only when what remains is known.
_VENDOR_RUNS = frozenset({"meta", "open", "openai", "anthropic", "google", "mistralai", "models"})

_overrides: dict[Key, ModelInfo] = {}


def _key(name: str) -> Key:
    """The name as runs of letters and of digits: case, dashes, dots and colons vanish."""
    return tuple(_RUN.findall(name.lower()))


def _normalise(name: str) -> Key:
    """The key of a model id with its provider path, Bedrock prefix and Vertex version
    taken off: ``openai/gpt-4o``, ``us.anthropic.claude-…``, ``claude-…@20241022``."""
    name = name.strip().lower().rsplit("/", 1)[-1]
    return _key(_BEDROCK.sub("", name).split("@", 1)[0])


@cache
def _builtin() -> dict[Key, ModelInfo]:
    index: dict[Key, ModelInfo] = {}
    for name, window, max_output, family, note, aliases in _BUILTIN:
        info = ModelInfo(name, window, max_output, family, note)
        for spelling in (name, *aliases):
            index[_key(spelling)] = info
    return index


@lru_cache(maxsize=4)
def _from_env(value: str) -> dict[Key, ModelInfo]:
    index: dict[Key, ModelInfo] = {}
    for entry in value.split(","):
        if not entry.strip():
            continue
        name, sep, tokens = entry.partition("=")
        try:
            window = int(tokens.strip())
        except ValueError:
            window = 0
        if not sep or not _normalise(name) or window < 1:
            raise ValidationError(
                f"{ENV_VAR} entry {entry.strip()!r} is not name=tokens with a positive integer "
                f"(expected e.g. {ENV_VAR}='my-model=32768,other=8192')"
            )
        index[_normalise(name)] = _info(name.strip(), window, None)
    return index


def _info(name: str, window: int, max_output: int | None) -> ModelInfo:
    known = _match(_normalise(name), (_builtin(),))
    return ModelInfo(name, window, max_output, known.family if known else "custom")


def _layers() -> tuple[dict[Key, ModelInfo], ...]:
    return (_overrides, _from_env(environ.read(ENV_VAR, "") or ""), _builtin())


def _match(key: Key, layers: tuple[dict[Key, ModelInfo], ...]) -> ModelInfo | None:
    """The longest known whole-run prefix of ``key``; an equal prefix in a stronger
    layer wins."""
    for n in range(len(key), 0, -1):
        prefix = key[:n]
        for layer in layers:
            info = layer.get(prefix)
            if info is not None:
                return info
    return None


def find_model(model: str) -> ModelInfo | None:
    """The registry entry for ``model``, or None when nothing known matches it."""
    if not isinstance(model, str) or not model.strip():
        raise ValidationError(f"model must be a non-empty string, got {model!r}")
    key = _normalise(model)
    layers = _layers()
    found = _match(key, layers)
    while found is None and len(key) > 1 and key[0] in _VENDOR_RUNS:
        key = key[1:]
        found = _match(key, layers)
    return found


def context_window(model: str, default: int | None = None) -> int:
    """The context window of ``model`` in tokens.

    Unknown models return ``default`` when it is given, and otherwise raise
    :class:`~lossless.core.errors.ValidationError` saying how to declare the window.
    """
    if default is not None and (isinstance(default, bool) or not isinstance(default, int) or default < 1):
        raise ValidationError(f"default must be a positive integer or None, got {default!r}")
    info = find_model(model)
    if info is not None:
        return info.context_window
    if default is not None:
        return default
    names = sorted({i.name for layer in _layers() for i in layer.values()})
    close = difflib.get_close_matches(model.strip().lower(), names, n=3, cutoff=0.6)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    raise ValidationError(
        f"unknown model {model!r}: no context window is known for it.{hint} Pass "
        f"context_window= explicitly, call lossless.core.models.register_model({model.strip()!r}, "
        f"<tokens>), or set {ENV_VAR}='{model.strip()}=<tokens>'."
    )


def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValidationError(f"{name} must be a positive integer, got {value!r}")
    return value


def register_model(name: str, context_window: int, max_output: int | None = None) -> None:
    """Declare or override a model's window; it wins over the environment and the table,
    and matches the same forgiving spellings a built-in name does."""
    if not isinstance(name, str) or not _normalise(name):
        raise ValidationError(f"model name must contain a letter or digit, got {name!r}")
    window = _positive_int("context_window", context_window)
    if max_output is not None and _positive_int("max_output", max_output) > window:
        raise ValidationError(f"max_output ({max_output}) cannot exceed context_window ({window})")
    _overrides[_normalise(name)] = _info(name.strip(), window, max_output)


def unregister_model(name: str) -> bool:
    """Drop a :func:`register_model` override; True if there was one."""
    if not isinstance(name, str):
        raise ValidationError(f"model name must be a string, got {name!r}")
    return _overrides.pop(_normalise(name), None) is not None


def known_models() -> dict[str, ModelInfo]:
    """Every known model by name (no aliases), overrides applied, sorted by name."""
    by_key: dict[Key, ModelInfo] = {}
    for layer in reversed(_layers()):  # weakest first, so stronger layers overwrite
        for key, info in layer.items():
            if _normalise(info.name) == key:  # an alias shares its canonical entry
                by_key[key] = info
    return {info.name: info for _, info in sorted(by_key.items(), key=lambda kv: kv[1].name.lower())}


# ---------------------------------------------------------------- history limits

# (smallest window of the band, messages kept) from the adaptive table in the design
# notes: < 16K: 20, 16K–64K: 50, 64K–128K: 100, > 128K: 200.
_BANDS: tuple[tuple[int, int], ...] = ((0, 20), (16_384, 50), (65_536, 100), (131_073, 200))
_TRIGGER_RATIO = 0.8
_RESERVE_CAP = 16_384
_MIN_WINDOW = 512


@dataclass(frozen=True, slots=True)
class HistoryLimits:
    """How much history to keep for a model window; see :func:`history_limits`."""

    window: int
    max_history_messages: int
    fresh_tail_count: int
    reserve_output_tokens: int
    trigger_ratio: float

    @property
    def budget_tokens(self) -> int:
        """What the context may use: the window less the room kept for the reply."""
        return self.window - self.reserve_output_tokens

    @property
    def trigger_tokens(self) -> int:
        """Context size above which to compact."""
        return int(self.budget_tokens * self.trigger_ratio)

    @property
    def turns_per_compaction(self) -> int:
        """About how many user/assistant turns (two messages each) pass between
        compactions once the message cap binds: what compaction frees, halved."""
        return (self.max_history_messages - self.fresh_tail_count) // 2

    def config_kwargs(self) -> dict[str, int | float]:
        """Keyword arguments for :class:`lossless.Config` / :func:`lossless.open`.

        ``context_window`` is the budget, not the raw window: the engine assembles up to
        its ``context_window``, so the reply's room is taken off first.
        """
        return {
            "context_window": self.budget_tokens,
            "context_threshold": self.trigger_ratio,
            "fresh_tail_count": self.fresh_tail_count,
        }


def history_limits(window: int) -> HistoryLimits:
    """History limits for a model with a ``window``-token context.

    Bands (window in tokens → ``max_history_messages``), from the adaptive table in the
    design notes, with the boundaries read as powers of two so every "128K" model
    (128,000 and 131,072 alike) lands in the same band:

    ======================  ========  =====================================================
    window                  messages  why
    ======================  ========  =====================================================
    < 16,384                20        8K-class models: a handful of turns already fills them
    16,384 – 65,535         50        gpt-3.5-turbo 16K, 32K models
    65,536 – 131,072        100       64K and 128K models (gpt-4o, Llama 3.1, DeepSeek)
    > 131,072               200       200K and up (Claude, Gemini, GPT-4.1/5)
    ======================  ========  =====================================================

    ``fresh_tail_count`` (the newest messages compaction never folds) is a fifth of the
    cap: 4, 10, 20, 40. So when the cap binds, compaction folds four fifths of it, and
    ``turns_per_compaction`` comes out at 8, 20, 40 and 80 turns, which reproduces the
    table's compaction-frequency column (every 5–10 turns, 20–30, about 50, rarely: at
    200K+ the token trigger comes first).

    ``trigger_ratio`` is 0.8, the design notes' 80 % of the window. It applies to
    ``budget_tokens``, which already leaves ``reserve_output_tokens`` for the reply: an
    eighth of the window, at most 16,384 (gpt-4o's whole output limit), so a small model
    keeps room to answer and a huge one does not waste a useful slice. The reserve grows
    smoothly rather than by band so that no field ever shrinks as the window grows.

    Raises :class:`~lossless.core.errors.ValidationError` for a window below 512 tokens (no
    chat model has one, and the engine needs 256 tokens after the reserve).
    """
    if isinstance(window, bool) or not isinstance(window, int) or window < _MIN_WINDOW:
        raise ValidationError(f"window must be an integer >= {_MIN_WINDOW}, got {window!r}")
    messages = next(cap for start, cap in reversed(_BANDS) if window >= start)
    return HistoryLimits(
        window=window,
        max_history_messages=messages,
        fresh_tail_count=messages // 5,
        reserve_output_tokens=min(window // 8, _RESERVE_CAP),
        trigger_ratio=_TRIGGER_RATIO,
    )
