"""Tiny sentence-transformers model folders built here, with random weights (a fixed seed),
for tests of the torch-free embedder on architectures and tokenizers no wheel ships: a
BERT with a WordPiece vocabulary of Latin words and Chinese characters (as multilingual
MiniLM / BERT models are), and an XLM-RoBERTa with a SentencePiece (Unigram) tokenizer
(as multilingual-e5 and bge-m3 are). Only numpy, ``tokenizers`` and ``safetensors``: the
folders are what ``SentenceTransformer(folder)`` loads, so a torch test compares them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

__all__ = ["CHINESE", "LATIN", "tiny_model"]

LATIN = ["the", "park", "bird", "water", "lake", "heron", "coffee", "doctor", "movie", "i", "went", "to", "saw",
         "a", "and", "in", "python", "script", "lisa", "today", "yesterday", "good", "very", "happy"]
CHINESE = list("我上次跟你说去了哪个公园在那里看到什么白鹭湖边的鸟咖啡医生电影今天很开心和一起玩")
HIDDEN, HEADS, LAYERS, INNER, POSITIONS = 32, 4, 2, 64, 64


def _wordpiece(folder: Path) -> int:
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab = {t: i for i, t in enumerate([*specials, *LATIN, *[f"##{w}" for w in ("s", "ed", "ing")], *CHINESE, ",",
                                         ".", "?", "!", "。", "，", "？"])}
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])])
    tok.decoder = decoders.WordPiece()
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": POSITIONS, "pad_token": "[PAD]",
        "unk_token": "[UNK]", "cls_token": "[CLS]", "sep_token": "[SEP]", "mask_token": "[MASK]"}))
    return len(vocab)


def _unigram(folder: Path) -> int:
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

    pieces = [("<s>", 0.0), ("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0), ("▁", -3.0)]
    pieces += [(f"▁{w}", -2.0 - i / 100) for i, w in enumerate(LATIN)]
    pieces += [(w, -4.0 - i / 100) for i, w in enumerate(LATIN)]
    pieces += [(c, -5.0 - i / 100) for i, c in enumerate(CHINESE)]
    pieces += [(f"▁{c}", -5.5 - i / 100) for i, c in enumerate(CHINESE[:10])]
    pieces += [(p, -6.0) for p in (",", ".", "?", "!", "。", "，", "？", *"abcdefghijklmnopqrstuvwxyz")]
    tok = Tokenizer(models.Unigram(pieces, unk_id=3, byte_fallback=False))
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>", special_tokens=[("<s>", 0), ("</s>", 2)])
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": POSITIONS, "pad_token": "<pad>",
        "unk_token": "<unk>", "bos_token": "<s>", "eos_token": "</s>", "cls_token": "<s>", "sep_token": "</s>",
        "model_input_names": ["input_ids", "attention_mask"]}))
    return len(pieces)


def _weights(vocab: int, positions: int, types: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)

    def normal(*shape: int, scale: float = 0.3) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    def norm(prefix: str) -> dict[str, np.ndarray]:
        return {f"{prefix}.weight": (1 + normal(HIDDEN, scale=0.1)), f"{prefix}.bias": normal(HIDDEN, scale=0.1)}

    w = {"embeddings.word_embeddings.weight": normal(vocab, HIDDEN),
         "embeddings.position_embeddings.weight": normal(positions, HIDDEN),
         "embeddings.token_type_embeddings.weight": normal(types, HIDDEN), **norm("embeddings.LayerNorm"),
         "pooler.dense.weight": normal(HIDDEN, HIDDEN), "pooler.dense.bias": normal(HIDDEN)}
    for i in range(LAYERS):
        p = f"encoder.layer.{i}."
        for name in ("query", "key", "value"):
            w[f"{p}attention.self.{name}.weight"] = normal(HIDDEN, HIDDEN)
            w[f"{p}attention.self.{name}.bias"] = normal(HIDDEN, scale=0.1)
        w[f"{p}attention.output.dense.weight"] = normal(HIDDEN, HIDDEN)
        w[f"{p}attention.output.dense.bias"] = normal(HIDDEN, scale=0.1)
        w |= norm(f"{p}attention.output.LayerNorm")
        w[f"{p}intermediate.dense.weight"] = normal(INNER, HIDDEN)
        w[f"{p}intermediate.dense.bias"] = normal(INNER, scale=0.1)
        w[f"{p}output.dense.weight"] = normal(HIDDEN, INNER)
        w[f"{p}output.dense.bias"] = normal(HIDDEN, scale=0.1)
        w |= norm(f"{p}output.LayerNorm")
    return w


def tiny_model(folder: Path, kind: str = "bert", *, pooling: str = "mean", card: str | None = "multilingual",
               seed: int = 7, max_seq_length: int = 48, unigram: bool | None = None) -> Path:
    """Write a tiny sentence-transformers folder: ``kind`` ``bert`` or ``xlm-roberta``
    (positions from pad + 1), its tokenizer WordPiece or, with ``unigram`` (the default
    for XLM-RoBERTa), SentencePiece Unigram (a BERT with one is how
    paraphrase-multilingual-MiniLM is built), ``pooling`` ``mean`` or ``cls``, and a model
    card whose ``language:`` is ``card`` (a comma-separated list; None: no card at all).
    Returns ``folder``."""
    from safetensors.numpy import save_file

    folder.mkdir(parents=True, exist_ok=True)
    roberta = kind == "xlm-roberta"
    vocab = _unigram(folder) if (roberta if unigram is None else unigram) else _wordpiece(folder)
    positions = POSITIONS + 2 if roberta else POSITIONS
    config = {"architectures": ["XLMRobertaModel" if roberta else "BertModel"], "model_type": kind,
              "hidden_size": HIDDEN, "num_attention_heads": HEADS, "num_hidden_layers": LAYERS,
              "intermediate_size": INNER, "max_position_embeddings": positions, "type_vocab_size": 1 if roberta else 2,
              "vocab_size": vocab, "hidden_act": "gelu", "layer_norm_eps": 1e-5 if roberta else 1e-12,
              "pad_token_id": 1 if roberta else 0, "position_embedding_type": "absolute",
              "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
    if roberta:
        config |= {"bos_token_id": 0, "eos_token_id": 2}
    (folder / "config.json").write_text(json.dumps(config))
    save_file(_weights(vocab, positions, 1 if roberta else 2, seed), str(folder / "model.safetensors"))
    (folder / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}]))
    (folder / "1_Pooling").mkdir(exist_ok=True)
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({
        "word_embedding_dimension": HIDDEN, "pooling_mode_cls_token": pooling == "cls",
        "pooling_mode_mean_tokens": pooling == "mean", "pooling_mode_max_tokens": False,
        "pooling_mode_mean_sqrt_len_tokens": False}))
    (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": max_seq_length,
                                                                  "do_lower_case": False}))
    if card is not None:
        languages = "\n".join(f"- {code.strip()}" for code in card.split(","))
        (folder / "README.md").write_text(f"---\nlanguage:\n{languages}\nlibrary_name: sentence-transformers\n"
                                          "tags:\n- sentence-transformers\n---\n\n# A tiny test model\n")
    return folder
