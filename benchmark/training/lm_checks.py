"""The checks of a language-model run that read its files, before any compute: the model
folder's ``config.json``, that its architecture's decoder layers and their linear maps can be
found (:func:`check_decoder_layers`), the tokenizer folder's files (and the slow tokenizer when
asked for), and that the tokenizer's ids fit the model's vocabulary (a larger tokenizer would
index past the embedding at the first window).

:func:`check_lm_files` is what ``prunebench run`` calls before it loads anything; a planner
that checks many runs calls it once per distinct (model, tokenizer) pair (it caches).
:func:`check_vocab_fits` repeats the vocabulary check on the loaded model and data.
"""

from __future__ import annotations

import functools

from torch import nn

from benchmark.config.run import RunConfig
from benchmark.core.errors import ConfigError
from benchmark.models.causal_lm import BYTES, LM_MODELS, hub_snapshot, read_config
from benchmark.models.pretrained import HF, require_available
from benchmark.pruning.offload import LAYER_PATHS, decoder_layers


def check_lm_files(cfg: RunConfig, loads_model: bool = True) -> None:
    """Raise ConfigError, naming the field, for a language-model run whose model folder lacks a
    readable ``config.json``, whose tokenizer folder lacks tokenizer files, or whose tokenizer
    has more ids than the model's vocabulary. ``loads_model``: the run loads
    ``model.pretrained`` (not a child, which starts from its dense parent's weights)."""
    if cfg.model.name not in LM_MODELS:
        return
    model_vocab = None
    if loads_model and cfg.model.pretrained:
        model_vocab = _model_vocab(cfg.model.pretrained)
        if cfg.model.name == "causal_lm":
            check_decoder_layers(cfg.model.pretrained)
    tokens = _tokenizer_vocab(cfg.data.tokenizer, cfg.data.slow_tokenizer)
    _check_fit(cfg.data.tokenizer, tokens, cfg.model.pretrained, model_vocab)


@functools.cache
def _model_vocab(pretrained: str) -> int | None:
    """The vocabulary size in the model's ``config.json`` (a missing folder or file is a
    ConfigError naming ``model.pretrained``)."""
    folder = pretrained
    if pretrained.startswith(HF):
        require_available(pretrained)
        folder = str(hub_snapshot(pretrained))
    vocab = read_config(folder).get("vocab_size")
    return int(vocab) if isinstance(vocab, int) else None


@functools.cache
def _tokenizer_vocab(name: str, slow: bool = False) -> int:
    """The number of ids of ``data.tokenizer`` ``name`` (bytes: 256; ``slow``: of the slow
    tokenizer, which may not be had: an error naming ``data.slow_tokenizer``)."""
    from benchmark.data.lm_tokenizer import load_tokenizer

    return load_tokenizer(name, slow)[1]


@functools.cache
def check_decoder_layers(pretrained: str) -> None:
    """Refuse, naming the architecture, a model whose decoder layers or their ``nn.Linear`` maps
    cannot be found (one-shot pruning goes layer by layer over them): its skeleton is built from
    ``config.json`` on the meta device (no weights read, no memory taken)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    folder = str(hub_snapshot(pretrained)) if pretrained.startswith(HF) else pretrained
    kind = read_config(folder).get("model_type", "?")
    try:
        config = AutoConfig.from_pretrained(folder, local_files_only=True)
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config)
    except (OSError, ValueError, KeyError) as err:
        raise ConfigError(
            "model.pretrained",
            pretrained,
            f"a causal LM class transformers knows; model_type {kind!r}: {err}",
        ) from None
    arch = f"{type(model).__name__} (model_type {kind!r})"
    try:
        layers = decoder_layers(model)
    except ValueError:
        raise ConfigError(
            "model.pretrained",
            pretrained,
            f"a model whose decoder layers are at one of {', '.join(LAYER_PATHS)}; {arch} has "
            "none there, so its linear layers cannot be pruned layer by layer",
        ) from None
    if not any(isinstance(m, nn.Linear) for m in layers[0].modules()):
        raise ConfigError(
            "model.pretrained",
            pretrained,
            f"a model whose decoder layers compute with nn.Linear maps; {arch}'s have none",
        )


def _check_fit(tokenizer: str, tokens: int, pretrained: str, vocab: int | None) -> None:
    if vocab is not None and tokens > vocab:
        raise ConfigError(
            "data.tokenizer",
            tokenizer or BYTES,
            f"a tokenizer whose ids fit the model's vocabulary: it has {tokens} ids, the model "
            f"(model.pretrained = {pretrained!r}) has vocab_size {vocab}; use the model's own "
            "tokenizer",
        )


def check_vocab_fits(cfg: RunConfig, model: nn.Module, tokens: int) -> None:
    """The same check on a loaded model (``config.vocab_size``) and the data's ``tokens`` ids."""
    config = getattr(model, "config", None)
    vocab = getattr(config, "vocab_size", None)
    _check_fit(cfg.data.tokenizer, tokens, cfg.model.pretrained, vocab)
