"""Which languages an embedder reads, and whether it reads a given text.

An embedder may say which languages it reads with a ``languages`` attribute: ``"any"``
or a collection of ISO 639-1 codes (``{"en"}``, ``{"en", "zh", "ja"}``; a region suffix
such as ``zh-cn`` is ignored). Text in another language is neither embedded nor fused:
such a retrieval unit stays keyword-only and costs no model time, and such a query is
searched by keywords alone, as without an embedder.

An embedder that does not say is taken to read every language. That keeps what a
plug-in did before this attribute existed, and the embedders people plug in are mostly
hosted APIs, which are multilingual today; the local embedders of this package always say
(:func:`folder_languages` reads a model folder's card, and a folder that says nothing is
taken as English).

Languages are told apart by script, cheaply (no model, no dependency): the letters of a
text are counted by Unicode script (a word of a script that spaces its words counts once,
each Han character or kana once, as each is about one word piece), labels such as
``user:`` at the start of a line are left out, and the text is read unless more than
:data:`UNREAD_ABOVE` of what is counted is in scripts the embedder's languages do not
write. Two languages of one script (English and French) are not told apart: a model
declared ``{"en"}`` reads every Latin-script text. Text without letters is read by every
embedder when it holds a digit (a number, a date) or is plain ASCII; symbols alone (🎉, 👋,
→) are read by none that declares its languages: a word-piece model turns each emoji into
the one unknown token, so every emoji-only text had the same vector and an emoji-only
query matched them all at a cosine of 1.0. Keyword search finds them as written.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Final, Literal, Protocol, runtime_checkable

__all__ = ["ANY", "UNREAD_ABOVE", "LanguageAware", "Languages", "ScriptReader", "declared_languages",
           "folder_languages", "parse_languages", "script_counts"]

ANY: Final = "any"
Languages = Literal["any"] | frozenset[str]

# The share of a text's words in scripts the model does not read above which the text is
# not embedded. Measured on the dev sets (bench/README.md, "Language-aware vectors"): of the
# English sets' 15,581 messages none has more than 0.50 of its words in another script (a
# chit-chat line "今天好累 lol, work was nonstop" is the most), of MADial's 342 Chinese
# messages none has less than 0.77 (a film's English title in a Chinese sentence); 0.6
# lies between, so an English sentence quoting a Chinese phrase is embedded and a Chinese
# one naming a brand in Latin letters is not.
UNREAD_ABOVE = 0.6


@runtime_checkable
class LanguageAware(Protocol):
    """An embedder that says which languages it reads (optional: see the module doc)."""

    @property
    def languages(self) -> Languages: ...


# ISO 15924 script codes. Scripts that space their words count a run of letters as one
# word; the others (Han, kana, Thai, ...) count each character.
_SPACED: Final[Mapping[str, str]] = {
    "Latn": "A-Za-z\u00aa\u00b5\u00ba\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u024f\u1e00-\u1eff",
    "Cyrl": "\u0400-\u052f",
    "Grek": "\u0370-\u03ff\u1f00-\u1fff",
    "Armn": "\u0530-\u058f",
    "Hebr": "\u0590-\u05ff",
    "Arab": "\u0600-\u06ff\u0750-\u077f\u08a0-\u08ff",
    "Deva": "\u0900-\u097f",
    "Beng": "\u0980-\u09ff",
    "Guru": "\u0a00-\u0a7f",
    "Gujr": "\u0a80-\u0aff",
    "Taml": "\u0b80-\u0bff",
    "Telu": "\u0c00-\u0c7f",
    "Knda": "\u0c80-\u0cff",
    "Mlym": "\u0d00-\u0d7f",
    "Sinh": "\u0d80-\u0dff",
    "Geor": "\u10a0-\u10ff",
    "Ethi": "\u1200-\u139f",
    "Hang": "\u1100-\u11ff\u3130-\u318f\uac00-\ud7af",
}
_UNSPACED: Final[Mapping[str, str]] = {
    "Hani": "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f",
    "Kana": "\u3040-\u30ff\u31f0-\u31ff\uff66-\uff9f",
    "Thai": "\u0e00-\u0e7f",
    "Laoo": "\u0e80-\u0eff",
    "Tibt": "\u0f00-\u0fff",
    "Mymr": "\u1000-\u109f",
    "Khmr": "\u1780-\u17ff",
}
_PATTERNS: Final = tuple((code, re.compile(f"[{chars}]+")) for code, chars in _SPACED.items()) + tuple(
    (code, re.compile(f"[{chars}]")) for code, chars in _UNSPACED.items())
_LATIN_WORD: Final = re.compile(r"[A-Za-z]+")
_DIGIT: Final = re.compile(r"\d")
_LABEL: Final = re.compile(r"(?m)^[^\S\n]*[^\n:]{1,60}:[^\S\n]")  # "user: ", "Ann (user): " opening a line

# Languages written in a script other than Latin (a language not listed writes Latin).
_SCRIPTS: Final[Mapping[str, frozenset[str]]] = {
    **dict.fromkeys(("zh", "yue", "wuu", "lzh"), frozenset({"Hani"})),
    "ja": frozenset({"Hani", "Kana"}),
    "ko": frozenset({"Hang", "Hani"}),
    **dict.fromkeys(("ru", "uk", "be", "bg", "mk", "kk", "ky", "mn", "tg", "tt", "ba", "cv", "ce", "os"),
                    frozenset({"Cyrl"})),
    "sr": frozenset({"Cyrl", "Latn"}),
    "el": frozenset({"Grek"}),
    "hy": frozenset({"Armn"}),
    **dict.fromkeys(("he", "yi"), frozenset({"Hebr"})),
    **dict.fromkeys(("ar", "fa", "ur", "ps", "ug", "sd", "ckb", "arz"), frozenset({"Arab"})),
    **dict.fromkeys(("hi", "mr", "ne", "sa", "mai", "bho"), frozenset({"Deva"})),
    **dict.fromkeys(("bn", "as"), frozenset({"Beng"})),
    "pa": frozenset({"Guru"}),
    "gu": frozenset({"Gujr"}),
    "ta": frozenset({"Taml"}),
    "te": frozenset({"Telu"}),
    "kn": frozenset({"Knda"}),
    "ml": frozenset({"Mlym"}),
    "si": frozenset({"Sinh"}),
    "ka": frozenset({"Geor"}),
    **dict.fromkeys(("am", "ti"), frozenset({"Ethi"})),
    "th": frozenset({"Thai"}),
    "lo": frozenset({"Laoo"}),
    "bo": frozenset({"Tibt"}),
    "my": frozenset({"Mymr"}),
    "km": frozenset({"Khmr"}),
}
_CODE: Final = re.compile(r"[a-z]{2,3}")


def parse_languages(value: object, what: str = "languages") -> Languages:
    """``"any"`` (also ``"multilingual"`` and ``"*"``), one code, a comma-separated list
    of codes or a collection of them, as a :data:`Languages` value; anything else raises
    :class:`~lossless.core.errors.ValidationError` naming ``what``."""
    from lossless.core.errors import ValidationError

    if isinstance(value, str):
        if value.strip().lower() in (ANY, "multilingual", "*"):
            return ANY
        items: list[object] = [v for v in value.split(",") if v.strip()]
    elif isinstance(value, Collection) and not isinstance(value, bytes | Mapping):
        items = list(value)
    else:
        raise ValidationError(f"{what} must be 'any' or language codes such as ['en', 'zh']; got {value!r}")
    codes: set[str] = set()
    for item in items:
        if not isinstance(item, str):
            raise ValidationError(f"{what}: a language code must be a string; got {item!r}")
        code = item.strip().lower().replace("_", "-").split("-")[0]
        if code in (ANY, "multilingual", "*"):
            return ANY
        if not _CODE.fullmatch(code):
            raise ValidationError(f"{what}: {item!r} is not an ISO 639 language code (such as 'en' or 'zh')")
        codes.add(code)
    if not codes:
        raise ValidationError(f"{what} is empty: give 'any' or at least one language code")
    return frozenset(codes)


def declared_languages(embedder: object) -> Languages:
    """What ``embedder`` says it reads; ``"any"`` when it does not say."""
    if not isinstance(embedder, LanguageAware):
        return ANY
    return parse_languages(embedder.languages, f"{type(embedder).__name__}.languages")


def script_counts(text: str) -> dict[str, int]:
    """The words of ``text`` by script (each Han character or kana a word; scripts not
    listed and characters that are no letters are not counted)."""
    if text.isascii():
        n = len(_LATIN_WORD.findall(text))
        return {"Latn": n} if n else {}
    counts: dict[str, int] = {}
    for code, pattern in _PATTERNS:
        n = len(pattern.findall(text))
        if n:
            counts[code] = n
    return counts


class ScriptReader:
    """Tells whether a model of ``languages`` reads a text. Cheap: an ASCII text takes one
    regular-expression scan, other text one per script; ``"any"`` takes none."""

    def __init__(self, languages: Languages) -> None:
        self.languages = languages
        self.scripts: frozenset[str] | None = None if languages == ANY else frozenset().union(
            *(_SCRIPTS.get(code, frozenset({"Latn"})) for code in languages))

    @property
    def reads_everything(self) -> bool:
        return self.scripts is None

    def reads(self, text: str, *, labels: bool = False) -> bool:
        """Whether the model reads ``text``. ``labels``: the text is a retrieval unit whose
        lines may open with a speaker label (``user: ``), left out of the count."""
        scripts = self.scripts
        if scripts is None:
            return True
        if text.isascii():
            return "Latn" in scripts or not _LATIN_WORD.search(_LABEL.sub("", text) if labels else text)
        body = _LABEL.sub("", text) if labels else text
        counts = script_counts(body)
        total = sum(counts.values())
        if not total:  # no letters: a number is read, symbols alone (emoji) are not
            return _DIGIT.search(body) is not None
        unread = sum(n for code, n in counts.items() if code not in scripts)
        return unread <= UNREAD_ABOVE * total


# -- a model folder's own word ---------------------------------------------------------------

_FRONT: Final = re.compile(r"\A---\s*\n(.*?)\n---\s*(?:\n|\Z)", re.S)
_KEY: Final = re.compile(r"(?m)^(language|languages|tags):[ \t]*(.*)$")
_MULTILINGUAL_NAME: Final = re.compile(r"multilingual|xlm|labse|bge-m3", re.IGNORECASE)
_MULTILINGUAL_TYPES: Final = frozenset({"xlm-roberta", "xlm", "mt5", "bloom"})


def _front_list(front: str, key: str) -> list[str]:
    """The values of ``key`` in YAML front matter: ``key: en``, ``key: [en, zh]`` or a
    block list of ``- en`` lines (all a model card needs; no YAML parser is loaded)."""
    out: list[str] = []
    lines = front.splitlines()
    for i, line in enumerate(lines):
        match = _KEY.match(line)
        if match is None or match.group(1) != key:
            continue
        rest = match.group(2).strip()
        if rest:
            out += [v.strip().strip("'\"") for v in rest.strip("[]").split(",") if v.strip()]
            continue
        for item in lines[i + 1:]:
            stripped = item.strip()
            if not stripped.startswith("- "):
                break
            out.append(stripped[2:].strip().strip("'\""))
    return out


def folder_languages(folder: Path, model_type: str | None = None) -> Languages:
    """What a sentence-transformers model folder says it reads: the ``language:`` list of
    its model card (README.md front matter, as the Hugging Face hub writes it), ``"any"``
    when the card or the folder's name says multilingual (``multilingual`` among the
    languages or tags, or a name such as ``paraphrase-multilingual-...``, ``LaBSE``,
    ``bge-m3``) or the architecture is multilingual by construction (XLM-RoBERTa);
    otherwise English: most small local sentence models are, and a wrong "English" costs
    vectors for other text, which keyword search still finds, while a wrong "any" fuses
    noise into every search of that text (on Chinese chats recall fell below keywords
    alone). Pass ``languages=`` to the embedder to say otherwise."""
    try:
        card = (folder / "README.md").read_text(encoding="utf-8", errors="replace")
    except OSError:
        card = ""
    front = _FRONT.match(card)
    if front is not None:
        tags = [t.lower() for t in _front_list(front.group(1), "tags")]
        langs = _front_list(front.group(1), "language") or _front_list(front.group(1), "languages")
        if "multilingual" in tags or any(v.lower() == "multilingual" for v in langs):
            return ANY
        try:
            parsed = parse_languages(langs) if langs else None
        except Exception:  # a card with something else under language: decide by the name
            parsed = None
        if parsed is not None:
            return parsed
    if _MULTILINGUAL_NAME.search(folder.resolve().name) or (model_type or "") in _MULTILINGUAL_TYPES:
        return ANY
    return frozenset({"en"})
