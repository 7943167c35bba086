"""Decoder-only language models through Hugging Face ``transformers``; nothing is downloaded.

* ``causal_lm``: the model of a local ``save_pretrained`` folder (``model.pretrained``), of the
  class its ``config.json`` names (OPT, Llama-family, ...), loaded with ``from_pretrained``.
* ``opt_tiny`` and ``llama_tiny``: ``OPTForCausalLM`` and ``LlamaForCausalLM`` with 2 layers,
  width 64 and 4 heads, randomly initialised from a configuration (the embedded default, tests,
  smoke scale). ``num_classes`` is the vocabulary size of the dataset's tokenizer (256 bytes).

Their linear maps are ``nn.Linear`` (prunable). GPT-2's ``Conv1D`` layers are not, so a GPT-2
folder leaves nothing to prune and is refused before any compute. The checks here read only
``config.json``: a missing folder, a sequence length beyond the model's positions and an N:M
group that does not divide a layer's input width are named before anything is loaded.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NamedTuple

from torch import nn

from benchmark.core.errors import ConfigError
from benchmark.models.pretrained import HF, hf_cache, hf_repo, require_available
from benchmark.models.registry import DATASET_MODELS, FOLDER_MODELS, MODEL_DATASETS, MODELS

# The tiny models' positions: enough for every smoke window, small enough to stay tiny.
TINY_POSITIONS = 512
TINY: dict[str, dict[str, Any]] = {
    "opt_tiny": {
        "hidden_size": 64,
        "ffn_dim": 256,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "max_position_embeddings": TINY_POSITIONS,
        "word_embed_proj_dim": 64,
        "dropout": 0.0,
    },
    "llama_tiny": {
        "hidden_size": 64,
        "intermediate_size": 192,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "max_position_embeddings": TINY_POSITIONS,
        "tie_word_embeddings": False,
    },
}
LM_MODELS = ("causal_lm", *TINY)
LM_DATASETS = ("wikitext2", "pydoc")


@MODELS.register("opt_tiny")
def opt_tiny(num_classes: int, input_shape: tuple[int, int, int]) -> nn.Module:
    """A 2-layer, 64-wide OPT with ``num_classes`` tokens, randomly initialised."""
    from transformers import OPTConfig, OPTForCausalLM

    return OPTForCausalLM(OPTConfig(vocab_size=num_classes, **TINY["opt_tiny"]))


@MODELS.register("llama_tiny")
def llama_tiny(num_classes: int, input_shape: tuple[int, int, int]) -> nn.Module:
    """A 2-layer, 64-wide Llama with ``num_classes`` tokens, randomly initialised."""
    from transformers import LlamaConfig, LlamaForCausalLM

    return LlamaForCausalLM(LlamaConfig(vocab_size=num_classes, **TINY["llama_tiny"]))


@MODELS.register("causal_lm")
def causal_lm(num_classes: int, input_shape: tuple[int, int, int]) -> nn.Module:
    """Never built from scratch: ``model.pretrained`` names the folder (see FOLDER_MODELS)."""
    raise ConfigError(
        "model.pretrained", "", "a save_pretrained folder for model.name = 'causal_lm'"
    )


def load_folder(folder: str, dtype: str = "float32") -> nn.Module:
    """The causal language model saved in ``folder`` (offline), loaded in ``dtype``."""
    from transformers import AutoModelForCausalLM

    if folder.startswith(HF):
        require_available(folder)  # names the missing cache folder and how to fill it
        folder = str(hub_snapshot(folder))
    read_config(folder)  # the error naming the folder, before transformers' own
    try:
        return AutoModelForCausalLM.from_pretrained(folder, local_files_only=True, dtype=dtype)
    except (OSError, ValueError) as err:
        raise ConfigError(
            "model.pretrained", folder, f"a causal LM folder transformers can load ({err})"
        ) from None


FOLDER_MODELS["causal_lm"] = load_folder
for _name in LM_MODELS:
    MODEL_DATASETS[_name] = LM_DATASETS
for _data in LM_DATASETS:
    DATASET_MODELS[_data] = LM_MODELS


def read_config(folder: str) -> dict[str, Any]:
    """The ``config.json`` of a ``save_pretrained`` folder; a missing folder or file is an error
    naming ``model.pretrained`` and the folder."""
    path = Path(folder) / "config.json"
    if not folder or not Path(folder).is_dir():
        raise ConfigError(
            "model.pretrained",
            folder,
            "an existing save_pretrained folder of a causal LM (model.name = 'causal_lm'); "
            f"the folder {folder!r} does not exist",
        )
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise ConfigError(
            "model.pretrained", folder, f"a folder with a readable config.json ({err})"
        ) from None


def hub_snapshot(name: str) -> Path | None:
    """The local Hub cache's snapshot folder of an ``hf:`` name, None when it is not there."""
    folder = hf_cache() / f"models--{hf_repo(name).replace('/', '--')}" / "snapshots"
    snapshots = sorted(folder.iterdir()) if folder.is_dir() else []
    return snapshots[-1] if snapshots else None


def lm_config(model: str, pretrained: str) -> dict[str, Any]:
    """The configuration of a language model by name (a folder's ``config.json`` for
    ``causal_lm``; an ``hf:`` name not in the local cache yet: {}, checked when it loads)."""
    if model != "causal_lm":
        return TINY[model]
    if pretrained.startswith(HF):
        snapshot = hub_snapshot(pretrained)
        return {} if snapshot is None else read_config(str(snapshot))
    return read_config(pretrained)


def max_positions(config: dict[str, Any]) -> int | None:
    """The longest sequence the model's position embeddings take (None: not bounded)."""
    for key in ("max_position_embeddings", "n_positions"):
        if isinstance(config.get(key), int):
            return int(config[key])
    return None


def input_widths(config: dict[str, Any]) -> tuple[int, ...]:
    """The input widths of the decoder layers' linear maps (the axis N:M groups run along)."""
    hidden = config.get("hidden_size", config.get("n_embd"))
    ffn = config.get("intermediate_size", config.get("ffn_dim", config.get("n_inner")))
    return tuple(int(w) for w in (hidden, ffn) if isinstance(w, int))


BYTES = "bytes"


def validate_lm(model: str, pretrained: str, max_length: int, tokenizer: str) -> None:
    """Refuse a missing folder, a GPT-2 folder, a sequence length beyond the positions and a
    pretrained model without its tokenizer (bytes would give meaningless perplexities)."""
    if model not in LM_MODELS:
        return
    if model == "causal_lm" and not tokenizer:
        raise ConfigError(
            "data.tokenizer",
            tokenizer,
            f"the tokenizer of model.pretrained = {pretrained!r}: its folder (usually the same "
            f"as the model's; for 'hf:<repo>' the same name), or {BYTES!r} for a model trained "
            "on bytes; '' (bytes) is for the tiny models only",
        )
    if model != "causal_lm" and pretrained and not pretrained.startswith(HF):
        read_config(pretrained)  # a folder of the tiny model's own class
    config = lm_config(model, pretrained)
    if config.get("model_type") == "gpt2":
        raise ConfigError(
            "model.pretrained",
            pretrained,
            "a model with nn.Linear layers (OPT, Llama-family); GPT-2's Conv1D is not prunable",
        )
    limit = max_positions(config)
    if limit is not None and max_length > limit:
        raise ConfigError(
            "data.max_length", max_length, f"at most {limit} tokens (the positions of {model})"
        )


class LMShape(NamedTuple):
    """The sizes a language model's memory follows from."""

    params: float
    hidden: int
    ffn: int
    layers: int
    vocab: int

    @property
    def outside(self) -> float:
        """Parameters outside the decoder layers: token embedding and output head."""
        return 2.0 * self.vocab * self.hidden

    @property
    def layer(self) -> float:
        """Parameters of one decoder layer."""
        return max(self.params - self.outside, 0.0) / max(self.layers, 1)


# The papers' Hub models (their config.json): parameters, width, feed-forward width, layers,
# vocabulary.
HUB_SHAPES: dict[str, LMShape] = {
    "meta-llama/llama-2-7b-hf": LMShape(6.74e9, 4096, 11008, 32, 32000),
    "meta-llama/llama-2-13b-hf": LMShape(13.02e9, 5120, 13824, 40, 32000),
    "meta-llama/llama-2-70b-hf": LMShape(68.98e9, 8192, 28672, 80, 32000),
    "facebook/opt-2.7b": LMShape(2.65e9, 2560, 10240, 32, 50272),
    "facebook/opt-6.7b": LMShape(6.66e9, 4096, 16384, 32, 50272),
    "facebook/opt-13b": LMShape(12.85e9, 5120, 20480, 40, 50272),
}


def lm_shape(model: str, pretrained: str) -> LMShape | None:
    """The sizes of a language model, from the table of the papers' Hub models or a
    configuration (parameters then counted as a Llama's); None if unknown without files."""
    if model == "causal_lm" and pretrained.startswith(HF):
        known = HUB_SHAPES.get(hf_repo(pretrained).lower())
        if known is not None:
            return known
    config = lm_config(model, pretrained)
    widths = input_widths(config)
    layers, vocab = config.get("num_hidden_layers"), config.get("vocab_size", 256)
    if len(widths) != 2 or not isinstance(layers, int) or not isinstance(vocab, int):
        return None
    h, ffn = widths
    return LMShape(float(layers * (4 * h * h + 3 * h * ffn) + 2 * vocab * h), h, ffn, layers, vocab)
