"""Sequential, layer-by-layer one-shot pruning of a decoder-only transformer, as SparseGPT's and
Wanda's ``prune_*`` functions do it: the calibration windows' inputs to the first decoder layer
are caught once; then, for every layer in order, its linear maps' input statistics are gathered
over those inputs, its linear maps are pruned, and the pruned layer's outputs become the next
layer's inputs. Only one layer's statistics are held at a time, which is what lets a 7B model's
pass fit on one 80 GB GPU; with an offloaded model (:mod:`benchmark.pruning.offload`) only one
layer's weights are on the device too, as the references prune 70B models.

:func:`layerwise_logits` runs an offloaded model's forward pass the same way (every window
through one layer before the next, as the references' ``*_eval`` functions), then the model's
own head on each chunk's final hidden states.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import Tensor, nn

from benchmark.pruning.offload import Placement, decoder_layers, placement_of
from benchmark.pruning.oneshot import InputStats

# prune(module name, linear, its input statistics or None) -> keep mask (the linear's weight
# may be updated in place, as SparseGPT does).
PruneLinear = Callable[[str, nn.Linear, InputStats | None], Tensor]


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


def _run(
    layer: nn.Module, inputs: list[tuple[Tensor, dict[str, Any]]], shape: list[bool] | None = None
) -> list[Tensor]:
    """The layer's hidden-state output on each of ``inputs`` (``shape`` gets whether the layer
    returns a tuple, as older decoder layers do, or the tensor alone)."""
    outs = []
    for hidden, kwargs in inputs:
        out = layer(hidden, **kwargs)
        if shape is not None:
            shape[:] = [isinstance(out, tuple)]
        outs.append(out[0] if isinstance(out, tuple) else out)
    return outs


def _resident() -> Placement:
    """The placement of a model that is wholly where it computes (nothing moves)."""
    return Placement("cpu", offload=False)


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
    ``id(weight)`` (in host memory when the model is offloaded)."""
    layers = decoder_layers(model)
    placement = placement_of(model) or _resident()
    was_training = model.training
    model.eval()
    masks: dict[int, Tensor] = {}
    try:
        inputs = catch_layer_inputs(model, layers[0], ids, chunk)
        for layer in layers:
            placement.fetch(layer)
            done = set(masks)
            try:
                inputs = _prune_layer(layer, inputs, prunable, prune, hessian, masks)
            finally:
                placement.release(layer)
            for key in set(masks) - done:  # this layer's masks wait with it, off the device
                masks[key] = placement.to_home(masks[key])
    finally:
        model.train(was_training)
    return masks


def _prune_layer(
    layer: nn.Module,
    inputs: list[tuple[Tensor, dict[str, Any]]],
    prunable: set[int],
    prune: PruneLinear,
    hessian: bool,
    masks: dict[int, Tensor],
) -> list[tuple[Tensor, dict[str, Any]]]:
    """Gather the statistics of one layer's prunable linear maps over ``inputs``, prune them
    (their keep masks into ``masks``) and return the pruned layer's outputs as the next inputs."""
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
    return [(out, kwargs) for out, (_, kwargs) in zip(outputs, inputs, strict=True)]


@torch.no_grad()
def final_hidden_states(
    model: nn.Module, ids: Tensor, chunk: int, placement: Placement
) -> tuple[list[Tensor], bool]:
    """The last decoder layer's outputs on ``ids`` (per chunk of ``chunk`` windows), computed
    one layer at a time over every window, and whether the layers return tuples."""
    layers = decoder_layers(model)
    inputs = catch_layer_inputs(model, layers[0], ids, chunk)
    shape = [False]
    for layer in layers:
        placement.fetch(layer)
        try:
            outputs = _run(layer, inputs, shape)
        finally:
            placement.release(layer)
        inputs = [(out, kwargs) for out, (_, kwargs) in zip(outputs, inputs, strict=True)]
    return [hidden for hidden, _ in inputs], shape[0]


@torch.no_grad()
def layerwise_logits(
    model: nn.Module, ids: Tensor, chunk: int, placement: Placement
) -> Iterator[tuple[Tensor, Tensor]]:
    """``(windows, logits)`` per chunk of ``chunk`` windows of ``ids``, the decoder layers run
    one at a time over every window; the head is the model's own forward pass with each
    decoder layer standing in for the cached final hidden states (so the final norm, any
    projection and the output head are whatever the model's class applies)."""
    finals, as_tuple = final_hidden_states(model, ids, chunk, placement)
    layers = decoder_layers(model)
    for start, hidden in zip(range(0, len(ids), chunk), finals, strict=True):
        out = (hidden,) if as_tuple else hidden
        for layer in layers:
            layer.forward = lambda *_a, _o=out, **_k: _o  # an instance attribute, removed below
        try:
            logits = model(input_ids=ids[start : start + chunk], use_cache=False).logits
        finally:
            for layer in layers:
                del layer.forward
        yield ids[start : start + chunk], logits
