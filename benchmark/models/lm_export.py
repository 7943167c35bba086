"""A language-model run's final weights as the model transformers builds from its configuration,
ready for ``save_pretrained`` (``prunebench export-model``).

The model is the run's class: for ``causal_lm`` the one the folder's ``config.json`` names
(built on the meta device, so the weights are never held twice nor initialised at random), for
the tiny models their configuration with the stored vocabulary. The stored tensors are assigned
as they are (the masked, merged weights in ``model.dtype``), and the configuration records that
precision, so that ``from_pretrained`` loads them in it.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from benchmark.models.causal_lm import TINY, hub_snapshot, read_config
from benchmark.models.pretrained import HF, require_available

TINY_CONFIGS = {"opt_tiny": "OPTConfig", "llama_tiny": "LlamaConfig"}


def model_folder(pretrained: str) -> str:
    """The folder of ``model.pretrained`` (an ``hf:`` name: its Hub cache snapshot); a missing
    folder or ``config.json`` is a ConfigError naming the field."""
    folder = pretrained
    if pretrained.startswith(HF):
        require_available(pretrained)  # names the missing cache folder
        folder = str(hub_snapshot(pretrained))
    read_config(folder)
    return folder


def hf_config(model: str, pretrained: str, vocab: int) -> Any:
    """The transformers configuration of a run's model: its folder's, or a tiny model's with
    ``vocab`` tokens."""
    import transformers

    if model == "causal_lm":
        return transformers.AutoConfig.from_pretrained(
            model_folder(pretrained), local_files_only=True
        )
    return getattr(transformers, TINY_CONFIGS[model])(vocab_size=vocab, **TINY[model])


def vocab_of(state: dict[str, torch.Tensor]) -> int:
    """The vocabulary of a stored causal LM: the rows of its token embedding."""
    (key,) = [k for k in state if k.endswith("embed_tokens.weight")]
    return int(state[key].shape[0])


def lm_from_state(model: str, pretrained: str, state: dict[str, torch.Tensor]) -> nn.Module:
    """The run's model holding ``state`` (its final weights, on the CPU), in their dtype."""
    from transformers import AutoModelForCausalLM

    config = hf_config(model, pretrained, vocab_of(state))
    dtypes = {t.dtype for t in state.values() if t.is_floating_point()}
    dtype = max(dtypes, key=lambda d: torch.finfo(d).bits) if dtypes else torch.float32
    config.dtype = dtype
    with torch.device("meta"):
        built = AutoModelForCausalLM.from_config(config, dtype=dtype)
    built.load_state_dict(state, strict=True, assign=True)
    built.tie_weights()  # a tied head is the embedding again, saved once
    return built.eval()
