"""Text saved by a CJK Windows in its "ANSI" code page (GBK, Big5, Shift_JIS, EUC-KR): which
one a run of bytes that is not UTF-8 is in. The importers name it when they refuse such a
file; the file index decodes a workspace file from it (a GBK source file's Chinese comments
read as written, not as U+FFFD)."""

from __future__ import annotations

import codecs
from typing import Final

__all__ = ["decoded", "legacy_cjk"]


def decoded(head: bytes, encoding: str) -> str | None:
    """The head decoded from ``encoding`` (its last character may be cut), None when it is not."""
    try:
        return codecs.getincrementaldecoder(encoding)().decode(head, final=False)
    except UnicodeDecodeError:
        return None


def _usual_gb(ch: str) -> bool:
    try:
        lead = ch.encode("gb2312")[0]
    except UnicodeEncodeError:
        return False
    return 0xB0 <= lead <= 0xD7 or lead in (0xA1, 0xA3)  # GB2312's level-1 hanzi, its punctuation


def _usual_big5(ch: str) -> bool:
    try:
        lead = ch.encode("big5")[0]
    except UnicodeEncodeError:
        return False
    return 0xA1 <= lead <= 0xA3 or 0xA4 <= lead <= 0xC6  # punctuation, Big5's frequent hanzi


def _usual_japanese(ch: str) -> bool:
    if "\u3000" <= ch <= "\u30ff" or "\uff01" <= ch <= "\uff5e":  # kana, CJK and full-width punctuation
        return True
    try:
        lead = ch.encode("shift_jis")[0]
    except UnicodeEncodeError:
        return False
    return "\u4e00" <= ch <= "\u9fff" and lead <= 0x9F  # JIS level-1 kanji


def _usual_korean(ch: str) -> bool:
    return "\uac00" <= ch <= "\ud7a3" or "\u3000" <= ch <= "\u303f" or "\uff01" <= ch <= "\uff5e"


# the legacy encodings a CJK Windows saves "ANSI" text in, each with the characters its text is
# mostly made of. Most byte strings decode as more than one of them (Big5, Shift_JIS and EUC-KR
# text all read as GB18030, as rare or private-use characters): the one whose reading is made of
# usual characters is the one it was saved in. Korean first: a text whose every character reads
# as a hangul syllable is Korean, though its bytes read as common hanzi in GB18030 as well
_LEGACY: Final = (
    ("cp949", "EUC-KR/CP949, what Korean Windows saves text in", _usual_korean),
    ("gb18030", "GB18030/GBK, what Chinese Windows saves text in", _usual_gb),
    ("big5", "Big5, what Traditional Chinese Windows (Taiwan, Hong Kong) saves text in", _usual_big5),
    ("shift_jis", "Shift_JIS, what Japanese Windows saves text in", _usual_japanese),
)


def legacy_cjk(head: bytes) -> tuple[float, str, str, str] | None:
    """(share of its non-ASCII characters that are usual ones, encoding, what it is, the first
    line that is not ASCII as it reads) of the legacy CJK encoding the head reads best as,
    None when it reads as none of them."""
    best: tuple[float, str, str, str] | None = None
    for encoding, what, usual in _LEGACY:
        text = decoded(head, encoding)
        if text is None:
            continue
        wide = [ch for ch in text if not ch.isascii()]
        share = sum(map(usual, wide)) / len(wide) if wide else 0.0
        if best is None or share > best[0]:
            sample = next((line.strip() for line in text.splitlines() if not line.isascii()), "")
            best = (share, encoding, what, sample[:40] + ("…" if len(sample) > 40 else ""))
    return best
