"""Sequential, layer-by-layer one-shot pruning of a decoder-only transformer, as SparseGPT's and
Wanda's ``prune_*`` functions do it: the calibration windows' inputs to the first decoder layer
are caught once; then, for every layer in order, its linear maps' input statistics are gathered
over those inputs, its linear maps are pruned, and the pruned layer's outputs become the next
layer's inputs. Only one layer's statistics are held at a time, which is what lets a 7B model's
pass fit on one 80 GB GPU.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn

from benchmark.pruning.oneshot import InputStats

# Where the decoder layers of the supported families live.
LAYER_PATHS = ("model.decoder.layers", "model.layers", "transformer.h")

# prune(module name, linear, its input statistics or None) -> keep mask (the linear's weight
# may be updated in place, as SparseGPT does).
PruneLinear = Callable[[str, nn.Linear, InputStats | None], Tensor]


def decoder_layers(model: nn.Module) -> nn.ModuleList:
    """The decoder layers of an OPT, Llama-family or GPT-2 model."""
    for path in LAYER_PATHS:
        node: Any = model
        for part in path.split("."):
            node = getattr(node, part, None)
        if isinstance(node, nn.ModuleList):
            return node
    raise ValueError(f"{type(model).__name__} has no decoder layers at any of {LAYER_PATHS}")


class _Caught(Exception):
    """Stops the forward pass once the first decoder layer's inputs are caught."""


def catch_layer_inputs(
    model: nn.Module, layer: nn.Module, ids: Tensor, chunk: int
) -> list[tuple[Tensor, dict[str, Any]]]:
    """The hidden states and keyword arguments the model passes to ``layer``, per chunk of
    ``chunk`` windows of ``ids``."""
    caught: list[tuple[Tensor, dict[str, Any]]] = []

    def hook(_module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        hidden = args[0] if args else kwargs.pop("hidden_states")
        caught.append((hidden.detach(), {k: v for k, v in kwargs.items() if k != "hidden_states"}))
        raise _Caught

    handle = layer.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        for start in range(0, len(ids), chunk):
            try:
                model(input_ids=ids[start : start + chunk], use_cache=False)
            except _Caught:
                pass
    finally:
        handle.remove()
    return caught


def _run(layer: nn.Module, inputs: list[tuple[Tensor, dict[str, Any]]]) -> list[Tensor]:
    outs = []
    for hidden, kwargs in inputs:
        out = layer(hidden, **kwargs)
        outs.append(out[0] if isinstance(out, tuple) else out)
    return outs


@torch.no_grad()
def prune_layerwise(
    model: nn.Module,
    ids: Tensor,
    prunable: set[int],
    prune: PruneLinear,
    *,
    hessian: bool,
    chunk: int = 8,
) -> dict[int, Tensor]:
    """Prune every linear map of the decoder layers whose weight is in ``prunable`` (ids of
    parameters), layer by layer on the calibration windows ``ids``; returns keep masks by
    ``id(weight)``."""
    layers = decoder_layers(model)
    was_training = model.training
    model.eval()
    masks: dict[int, Tensor] = {}
    try:
        inputs = catch_layer_inputs(model, layers[0], ids, chunk)
        for layer in layers:
            linears = {
                name: mod
                for name, mod in layer.named_modules()
                if isinstance(mod, nn.Linear) and id(mod.weight) in prunable
            }
            stats = {
                name: InputStats(mod.in_features, mod.weight.device, hessian)
                for name, mod in linears.items()
            }
            handles = [
                mod.register_forward_hook(lambda _m, a, _o, s=stats[name]: s.add(a[0]))
                for name, mod in linears.items()
            ]
            try:
                _run(layer, inputs)
            finally:
                for h in handles:
                    h.remove()
            for name, mod in linears.items():
                masks[id(mod.weight)] = prune(name, mod, stats[name])
                mod.weight.mul_(masks[id(mod.weight)])
            del stats
            outputs = _run(layer, inputs)
            inputs = [(out, kwargs) for out, (_, kwargs) in zip(outputs, inputs, strict=True)]
    finally:
        model.train(was_training)
    return masks
