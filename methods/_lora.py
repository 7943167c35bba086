"""Low-rank adapters on pruned linear maps that merge back without destroying sparsity (PERP,
Zimmer et al., arXiv 2312.15230; its ``peft_methods.py``/``customLayers.py``):

* ``lora``: ``W + s B A`` (B zero, A Kaiming-uniform at the start, ``s = alpha / r``); the merge
  multiplies by the pruned mask afterwards (PERP's ``lora_prune``), so it keeps the mask too but
  the merged model differs from the one trained;
* ``masklora``: ``W + s (B A) * M`` with M the pruned mask, in the forward pass and the merge:
  the merged weight is the trained one and has exactly the mask M;
* ``scalelora``: ``W * (B A)`` with A and B all ``1/sqrt(r)`` at the start (so ``B A = 1``): a
  low-rank elementwise rescaling that cannot revive a zero.

The base weight is frozen; :func:`wrap` replaces the linear maps, :func:`merge` puts them back.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

ADAPTERS = ("lora", "masklora", "scalelora")


class SparseAdapter(nn.Module):
    """A frozen (pruned) linear map plus a trainable low-rank adapter of one variant."""

    def __init__(
        self, base: nn.Linear, mask: Tensor, variant: str, rank: int, alpha: float
    ) -> None:
        super().__init__()
        if variant not in ADAPTERS:
            raise ValueError(f"adapter must be one of {ADAPTERS}, got {variant!r}")
        self.base = base
        self.variant = variant
        self.scaling = alpha / rank
        base.weight.requires_grad_(False)
        w = base.weight
        self.register_buffer("mask", mask.to(dtype=w.dtype, device=w.device), persistent=False)
        self.lora_A = nn.Parameter(
            torch.empty(rank, base.in_features, device=w.device, dtype=w.dtype)
        )
        self.lora_B = nn.Parameter(
            torch.empty(base.out_features, rank, device=w.device, dtype=w.dtype)
        )
        if variant == "scalelora":
            nn.init.constant_(self.lora_A, 1 / math.sqrt(rank))
            nn.init.constant_(self.lora_B, 1 / math.sqrt(rank))
        else:
            nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
            nn.init.zeros_(self.lora_B)

    def effective_weight(self) -> Tensor:
        """The weight the forward pass uses (for ``lora``: before the merge's masking)."""
        w = self.base.weight
        update = self.lora_B @ self.lora_A
        if self.variant == "scalelora":
            return w * update
        if self.variant == "masklora":
            update = update * self.mask
        return w + self.scaling * update

    def forward(self, x: Tensor) -> Tensor:
        """The adapted linear map."""
        return F.linear(x, self.effective_weight(), self.base.bias)

    @torch.no_grad()
    def merged(self) -> nn.Linear:
        """The base linear map with the adapter merged in, masked by the pruned mask."""
        self.base.weight.copy_(self.effective_weight() * self.mask)
        self.base.weight.requires_grad_(True)
        return self.base


def _parent(model: nn.Module, name: str) -> tuple[nn.Module, str]:
    parent, _, child = name.rpartition(".")
    return (model.get_submodule(parent) if parent else model), child


def wrap(
    model: nn.Module, masks: dict[str, Tensor], variant: str, rank: int, alpha: float
) -> list[SparseAdapter]:
    """Replace each linear map named in ``masks`` (module name -> keep mask) by an adapter."""
    adapters = []
    for name, mask in masks.items():
        parent, child = _parent(model, name)
        base = getattr(parent, child)
        if not isinstance(base, nn.Linear):
            raise TypeError(f"{name} is a {type(base).__name__}, not an nn.Linear")
        adapter = SparseAdapter(base, mask, variant, rank, alpha)
        setattr(parent, child, adapter)
        adapters.append(adapter)
    return adapters


def merge(model: nn.Module) -> int:
    """Merge every adapter of ``model`` back into its linear map; returns how many there were."""
    names = [n for n, m in model.named_modules() if isinstance(m, SparseAdapter)]
    for name in names:
        parent, child = _parent(model, name)
        setattr(parent, child, getattr(parent, child).merged())
    return len(names)
