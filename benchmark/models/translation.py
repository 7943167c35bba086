"""Translation networks: Hugging Face transformers' T5, randomly initialised from a configuration.

* ``t5_small``: ``T5ForConditionalGeneration`` with the configuration of ``t5-small`` (Raffel et
  al. 2020: 6+6 layers, d_model 512, 8 heads, ReLU feed-forward 2048, output projection tied to the
  shared embedding). With T5's 32,128-entry vocabulary it has 60.5M distinct weights; the paper's
  "77 Mio" is that count plus the output projection counted a second time (76.96M, what an untied
  head would have), so the tied ``t5-small`` itself is what we build.
* ``t5_tiny``: the same class with 2+2 layers, d_model 32, 2 heads, feed-forward 64 (tests and
  smoke-scale runs).

``num_classes`` is the vocabulary size the dataset's tokenizer needs (see
:func:`benchmark.data.translation.model_vocab_size`). Nothing is downloaded; a local
``save_pretrained`` folder is loaded through ``model.pretrained``.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from benchmark.models.registry import DATASET_MODELS, MODEL_DATASETS, MODELS, InputShape

# t5-small's published configuration (its config.json), minus the vocabulary size.
T5_SMALL: dict[str, Any] = {
    "d_model": 512,
    "d_kv": 64,
    "d_ff": 2048,
    "num_layers": 6,
    "num_decoder_layers": 6,
    "num_heads": 8,
    "relative_attention_num_buckets": 32,
    "relative_attention_max_distance": 128,
    "dropout_rate": 0.1,
    "layer_norm_epsilon": 1e-6,
    "feed_forward_proj": "relu",
    "tie_word_embeddings": True,
}
T5_TINY: dict[str, Any] = T5_SMALL | {
    "d_model": 32,
    "d_kv": 16,
    "d_ff": 64,
    "num_layers": 2,
    "num_decoder_layers": 2,
    "num_heads": 2,
}
# T5's special token ids (its SentencePiece model): padding (also the decoder start) and EOS.
PAD_ID, EOS_ID = 0, 1


def build_t5(vocab_size: int, config: dict[str, Any]) -> nn.Module:
    """A randomly initialised ``T5ForConditionalGeneration`` of ``config`` and ``vocab_size``."""
    from transformers import T5Config, T5ForConditionalGeneration

    cfg = T5Config(
        vocab_size=vocab_size,
        pad_token_id=PAD_ID,
        eos_token_id=EOS_ID,
        decoder_start_token_id=PAD_ID,
        **config,
    )
    return T5ForConditionalGeneration(cfg)


@MODELS.register("t5_small")
def t5_small(num_classes: int, input_shape: InputShape) -> nn.Module:
    """Build T5-small (60.5M weights with the 32,128-token vocabulary)."""
    return build_t5(num_classes, T5_SMALL)


@MODELS.register("t5_tiny")
def t5_tiny(num_classes: int, input_shape: InputShape) -> nn.Module:
    """Build a 2+2-layer, 32-wide T5 of the same class (tests, smoke runs)."""
    return build_t5(num_classes, T5_TINY)


TRANSLATION_MODELS = ("t5_small", "t5_tiny")
for _name in TRANSLATION_MODELS:
    MODEL_DATASETS[_name] = ("wmt16",)
DATASET_MODELS["wmt16"] = TRANSLATION_MODELS
