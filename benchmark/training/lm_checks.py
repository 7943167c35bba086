"""The checks of a language-model run that read its files, before any compute: the model
folder's ``config.json``, the tokenizer folder's files, and that the tokenizer's ids fit the
model's vocabulary (a larger tokenizer would index past the embedding at the first window).

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
    tokens = _tokenizer_vocab(cfg.data.tokenizer)
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
def _tokenizer_vocab(name: str) -> int:
    """The number of ids of ``data.tokenizer`` ``name`` (bytes: 256)."""
    from benchmark.data.language import load_tokenizer

    return load_tokenizer(name)[1]


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
