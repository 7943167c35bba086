"""Low-rank adapters on pruned linear maps that merge back without destroying sparsity (PERP,
Zimmer et al., arXiv 2312.15230; its ``peft_methods.py``/``customLayers.py``):

* ``lora``: ``W + s B A`` (B zero, A Kaiming-uniform at the start, ``s = alpha / r``); the merge
  multiplies by the pruned mask afterwards (PERP's ``lora_prune``), so it keeps the mask too but
  the merged model differs from the one trained;
* ``masklora``: ``W + s (B A) * M`` with M the pruned mask, in the forward pass and the merge:
  the merged weight is the trained one and has exactly the mask M;
* ``scalelora``: ``W * (B A)`` with A and B all ``1/sqrt(r)`` at the start (so ``B A = 1``): a
  low-rank elementwise rescaling that cannot revive a zero.

The base weight is frozen; :func:`wrap` routes the linear maps through adapters, :func:`merge`
writes the adapted weights back.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

ADAPTERS = ("lora", "masklora", "scalelora")


class SparseAdapter(nn.Module):
    """A trainable low-rank adapter of one variant on a frozen (pruned) linear map.

    The linear map stays where it is in the model (the model's state dict keeps its keys, so a
    stored model loads into a fresh one): :func:`wrap` only points its ``forward`` here.
    """

    def __init__(
        self,
        base: nn.Linear,
        mask: Tensor,
        variant: str,
        rank: int,
        alpha: float,
        dtype: torch.dtype | None = None,
    ) -> None:
        """``dtype``: of the adapter's parameters (None: the base weight's; float32 keeps a
        half-precision model's adapters in full precision)."""
        super().__init__()
        if variant not in ADAPTERS:
            raise ValueError(f"adapter must be one of {ADAPTERS}, got {variant!r}")
        self._base = [base]  # a plain reference: the model, not the adapter, holds the layer
        self.variant = variant
        self.scaling = alpha / rank
        base.weight.requires_grad_(False)
        w = base.weight
        dtype = dtype or w.dtype
        # The keep mask as bool (a byte per weight, not a second copy of the weights).
        self.register_buffer("mask", mask.to(dtype=torch.bool, device=w.device), persistent=False)
        shape_a, shape_b = (rank, base.in_features), (base.out_features, rank)
        self.lora_A = nn.Parameter(torch.empty(shape_a, device=w.device, dtype=dtype))
        self.lora_B = nn.Parameter(torch.empty(shape_b, device=w.device, dtype=dtype))
        if variant == "scalelora":
            nn.init.constant_(self.lora_A, 1 / math.sqrt(rank))
            nn.init.constant_(self.lora_B, 1 / math.sqrt(rank))
        else:
            nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
            nn.init.zeros_(self.lora_B)

    @property
    def base(self) -> nn.Linear:
        """The adapted linear map."""
        return self._base[0]

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
    def merge(self) -> None:
        """Write the adapted weight, masked by the pruned mask, into the linear map and detach
        the adapter from it."""
        self.base.weight.copy_((self.effective_weight() * self.mask).to(self.base.weight.dtype))
        self.base.weight.requires_grad_(True)
        del self.base.forward  # back to nn.Linear.forward


def wrap(
    model: nn.Module,
    masks: dict[str, Tensor],
    variant: str,
    rank: int,
    alpha: float,
    dtype: torch.dtype | None = None,
) -> nn.ModuleDict:
    """An adapter on each linear map named in ``masks`` (module name -> keep mask), which now
    computes through it; keyed by the module name with "/" for "." (``dtype``: of the adapters'
    parameters, see :class:`SparseAdapter`)."""
    adapters = nn.ModuleDict()
    for name, mask in masks.items():
        base = model.get_submodule(name)
        if not isinstance(base, nn.Linear):
            raise TypeError(f"{name} is a {type(base).__name__}, not an nn.Linear")
        adapter = SparseAdapter(base, mask, variant, rank, alpha, dtype)
        base.forward = adapter.forward  # an instance attribute: the state dict is unchanged
        adapters[name.replace(".", "/")] = adapter
    return adapters


def merge(adapters: nn.ModuleDict) -> int:
    """Merge every adapter back into its linear map; returns how many there were."""
    for adapter in adapters.values():
        adapter.merge()
    return len(adapters)
