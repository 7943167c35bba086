"""Where a decoder-only language model lives while it runs layer by layer.

A :class:`Placement` says where the model computes (``device``) and whether its decoder layers
are *offloaded*: kept in host memory (``home``) and moved to the device one at a time, as
SparseGPT's and Wanda's ``*_sequential`` functions do to prune a 70B model on one 80 GB GPU.
Everything outside the decoder layers (token and position embeddings, the final norm, the
output head: a few percent of the weights) stays on the device. Without offloading the whole
model is on the device and :meth:`Placement.fetch` / :meth:`Placement.release` do nothing.

A model's placement is looked up by the model (:func:`placement_of`), so that the layer-by-layer
prune, the evaluation and the MAC count find it without being handed it. Modules move with
``Module.to``, which keeps every ``Parameter`` object (masks and optimizers holding them stay
valid).
"""

from __future__ import annotations

import weakref
from typing import Any

import torch
from torch import nn

# Where the decoder layers of the supported families live (OPT; Llama, Mistral, Qwen, Gemma,
# Phi-3; GPT-2).
LAYER_PATHS = ("model.decoder.layers", "model.layers", "transformer.h")


def layers_owner(model: nn.Module) -> tuple[nn.Module, str, nn.ModuleList]:
    """The module holding the decoder layers, the attribute they are under, and the layers."""
    for path in LAYER_PATHS:
        *parents, leaf = path.split(".")
        node: Any = model
        for part in parents:
            node = getattr(node, part, None)
        layers = getattr(node, leaf, None) if node is not None else None
        if isinstance(layers, nn.ModuleList):
            return node, leaf, layers
    raise ValueError(f"{type(model).__name__} has no decoder layers at any of {LAYER_PATHS}")


def decoder_layers(model: nn.Module) -> nn.ModuleList:
    """The decoder layers of an OPT, Llama-family or GPT-2 model."""
    return layers_owner(model)[2]


def module_bytes(module: nn.Module) -> int:
    """The bytes of a module's parameters and buffers (shared tensors counted once)."""
    seen: dict[int, int] = {}
    for t in [*module.parameters(), *module.buffers()]:
        seen[id(t)] = t.numel() * t.element_size()
    return sum(seen.values())


class Placement:
    """The compute device of a model and whether its decoder layers wait in host memory."""

    def __init__(
        self, device: torch.device | str, offload: bool, home: torch.device | str = "cpu"
    ) -> None:
        self.device = torch.device(device)
        self.offload = offload
        self.home = torch.device(home)
        # Whether the run was offloaded at some point (retraining ends it).
        self.offload_used = offload

    def place(self, model: nn.Module) -> None:
        """Put ``model`` where this placement says: whole on the device, or (offloaded) its
        decoder layers at home and everything else on the device."""
        if not self.offload:
            model.to(self.device)
            return
        owner, name, layers = layers_owner(model)
        layers.to(self.home)
        # Move the rest without the layers passing through the device: detach them meanwhile.
        setattr(owner, name, nn.ModuleList())
        try:
            model.to(self.device)
        finally:
            setattr(owner, name, layers)

    def fetch(self, layer: nn.Module) -> None:
        """Move one decoder layer to the device before it computes (offloaded only)."""
        if self.offload:
            layer.to(self.device)

    def release(self, layer: nn.Module) -> None:
        """Move a decoder layer back home after it computed (offloaded only)."""
        if self.offload:
            layer.to(self.home)

    def to_home(self, tensor: torch.Tensor) -> torch.Tensor:
        """A per-layer result (a mask) where the layers wait: host memory when offloaded."""
        return tensor.to(self.home) if self.offload else tensor

    def end_offload(self, model: nn.Module) -> None:
        """Move the whole model to the device (retraining needs every layer there)."""
        self.offload = False
        model.to(self.device)


# Each model's placement, by the model object (gone with the model).
_PLACEMENTS: weakref.WeakKeyDictionary[nn.Module, Placement] = weakref.WeakKeyDictionary()


def set_placement(model: nn.Module, placement: Placement) -> None:
    """Place ``model`` and remember where (see :func:`placement_of`)."""
    placement.place(model)
    _PLACEMENTS[model] = placement


def placement_of(model: nn.Module) -> Placement | None:
    """The placement :func:`set_placement` gave ``model``, if any."""
    return _PLACEMENTS.get(model)


def is_offloaded(model: nn.Module) -> bool:
    """Whether ``model``'s decoder layers wait in host memory between uses."""
    placement = placement_of(model)
    return placement is not None and placement.offload
