"""The characters of scripts written without spaces between words, as one regular-expression
character class, so every module that tells CJK text apart reads the same letters."""

from __future__ import annotations

__all__ = ["CJK_LETTERS", "HAN_LETTERS"]

# kana, CJK ideographs (extension A, the unified block, compatibility), hangul syllables:
# the body of a character class ("[" + CJK_LETTERS + "]"), as the keyword index reads CJK
CJK_LETTERS = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
# of those, the Han ideographs alone (each a word of meaning; kana and hangul spell sounds)
HAN_LETTERS = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
