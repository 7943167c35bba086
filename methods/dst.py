"""Dynamic Sparse Training (DST; Liu et al. 2020).

Every output channel (convolution filter, linear unit) of every prunable layer gets a trainable
threshold t, initialised to 0. The layer uses the weight w * step(|w| - t), with step(x) = 1 for
x > 0 and 0 otherwise; its derivative is estimated (straight through) by the long-tailed

    step'(x) = 2 - 4|x| for |x| <= 0.4,   0.4 for 0.4 < |x| <= 1,   0 for |x| > 1,

so gradients reach both the weights and the thresholds. The loss adds alpha sum(exp(-t)) over
all thresholds (alpha = ``method.alpha``), which pushes the thresholds up. A layer whose
density falls to 1% or below has all its thresholds reset to 0; as in the authors' code the
check runs at every use of the weight (every forward pass, before the mask is computed), so
the collapsed mask is never used. Resets are counted (``threshold_resets`` in the record).

The sparsity is not specified: it emerges from alpha, so ``method.sparsity`` is ignored
(``info.sparsity_specifiable`` is False). The forward pass already uses the hard mask, so the
final step changes nothing (pruning stable); the per-epoch sparsity is recorded as
``emergent_sparsity``.

Weight decay (``method.decay``):

- ``reference`` (default, the paper's code ``DST.before_backward``): the loss adds
  1/2 wd sum(w^2) over P while SGD's weight decay also acts on every parameter, thresholds
  included, so the weights of P are decayed with 2 wd, the thresholds and the other parameters
  with wd.
- ``once``: every model parameter is decayed once with wd and the thresholds not at all (the
  alpha term is their regulariser); a correction of the doubled decay.

Reference behaviour followed otherwise (ZIB-IOL/BIMP ``DST``): zero-initialised per-channel
thresholds, the long-tailed step derivative, the reset of a layer at <= 1% density.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from benchmark.config.run import RunConfig, check
from methods._batched import FlatLayout, expand, segment_sum
from methods._reparam import ReparamMethod, WeightReparam, validate_decay
from methods.base import MethodInfo, register_method

# A layer keeping at most this percentage of its entries has its thresholds reset.
COLLAPSE_PERCENT = 1


class LongTailStep(torch.autograd.Function):
    """step(x) = [x > 0] forward; the long-tailed straight-through derivative backward."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return (x > 0).to(x.dtype)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return step_derivative(x).mul_(grad)


def step_derivative(x: Tensor) -> Tensor:
    """2 - 4|x| for |x| <= 0.4, 0.4 for 0.4 < |x| <= 1, 0 beyond."""
    a = x.abs()
    # 2 - 4|x| >= 0.4 exactly when |x| <= 0.4, so the clamp gives the two inner pieces at once;
    # in-place ops on the fresh tensor save allocations in every backward pass.
    return a.mul(-4.0).add_(2.0).clamp_(min=0.4).masked_fill_(a > 1, 0.0)


def hard_masked(weight: Tensor, magnitude: Tensor, threshold: Tensor) -> Tensor:
    """w step(|w| - t) with the long-tailed derivative; ``threshold`` broadcast against w."""
    return weight * LongTailStep.apply(magnitude - threshold)


class ChannelThreshold(WeightReparam):
    """w * step(|w| - t) with one trainable threshold t per output channel."""

    def __init__(self, like: Tensor) -> None:
        super().__init__()
        self.threshold = nn.Parameter(
            torch.zeros(like.shape[0], dtype=like.dtype, device=like.device)
        )
        self.register_buffer("resets", torch.zeros((), dtype=torch.long, device=like.device))
        self.shape = (-1,) + (1,) * (like.dim() - 1)
        # density <= 1% means kept * 100 <= numel, i.e. kept <= floor(numel / 100) (integers).
        self.collapse_at = COLLAPSE_PERCENT * like.numel() // 100

    def reset_if_collapsed(self, magnitude: Tensor) -> None:
        """Set the thresholds to 0 where the layer keeps <= 1% of its entries (no host sync)."""
        with torch.no_grad():
            kept = (magnitude > self.threshold.view(self.shape)).sum()
            collapsed = kept <= self.collapse_at
            self.threshold.masked_fill_(collapsed, 0.0)
            self.resets += collapsed

    def weight_of(self, weight: Tensor) -> Tensor:
        """The hard-masked weight (also the final weight)."""
        magnitude = weight.abs()
        self.reset_if_collapsed(magnitude)
        return hard_masked(weight, magnitude, self.threshold.view(self.shape))

    def keep_mask(self, weight: Tensor) -> Tensor:
        return weight.abs() > self.threshold.view(self.shape)


DST_INFO = MethodInfo(
    sparsity_specifiable=False,
    pruning_stable=True,
    sparsity_agnostic=False,
    extra_hyperparameters=1,
    summary="dynamic sparse training: trainable per-channel thresholds, straight-through step",
)


@dataclass
class DSTParams:
    """Hyperparameters of DST: ``alpha`` weighs the threshold penalty sum(exp(-t)).

    ``decay``: ``reference`` (P decayed twice, thresholds once) or ``once`` (see the module).

    Attributes:
        alpha: weight of the threshold penalty sum(exp(-t)); larger prunes more
        decay: reference (the weights of P decayed twice, the thresholds once, as the paper's
            code) or once (every model parameter once, the thresholds not at all)
    """

    alpha: float = 5e-5
    decay: str = "reference"


# The paper's grids (Appendix B.3); CIFAR-100 and ImageNet add a linear schedule to the stepped
# original one, as for every method.
_ALPHA_CIFAR = [5e-6, 1e-5, 5e-5, 1e-4, 5e-4]


@register_method
class DST(ReparamMethod):
    """DST: hard masks from trainable per-channel thresholds, trained through a long-tailed STE."""

    name = "dst"
    Params = DSTParams
    info = DST_INFO
    graph_safe = True
    decay_extra = False
    presets: dict[str, dict[str, Any]] = {
        "cifar10": {
            "alpha": _ALPHA_CIFAR,
            "optim.weight_decay": [1e-4, 5e-4, 1e-3, 5e-3],
            "schedule.lr": [0.05, 0.1, 0.15, 0.2],
        },
        "cifar10-extended": {
            "alpha": [1e-7, 5e-7, 1e-6],
            "optim.weight_decay": [0.0, 1e-4],
            "schedule.lr": [0.05, 0.1, 0.15, 0.2],
        },
        "cifar100": {
            "alpha": _ALPHA_CIFAR,
            "optim.weight_decay": [1e-4, 2e-4, 5e-4],
            "schedule.lr": [0.05, 0.1, 0.15],
            "schedule.name": ["stepped", "linear"],
        },
        "cifar100-extended": {
            "alpha": [1e-6, 3e-6, 8e-6, 3e-5, 8e-5, 2e-4, 3e-4, 4e-4]
            + [5e-4, 6e-4, 7e-4, 8e-4, 9e-4, 1e-3],
            "optim.weight_decay": [1e-4, 2e-4, 5e-4],
            "schedule.lr": [0.05, 0.1, 0.15],
            "schedule.name": ["stepped", "linear"],
        },
        "imagenet": {
            "alpha": [1e-7, 5e-7, 1e-6, 2e-6, 5e-6, 8e-6, 1e-5, 1e-4],
            "optim.weight_decay": [1e-4, 1e-5],
            "schedule.name": ["stepped", "linear"],
        },
    }

    def __init__(self, cfg: RunConfig) -> None:
        super().__init__(cfg)
        self.thresholds: list[nn.Parameter] = []
        self._collapse_at: Tensor | None = None
        self._flat_thresholds: Tensor | None = None

    @classmethod
    def validate(cls, cfg: RunConfig) -> None:
        alpha = cfg.method.params.alpha
        check(math.isfinite(alpha) and alpha >= 0, "method.alpha", alpha, "a finite number >= 0")
        validate_decay(cfg)

    def make_reparam(self, weight: nn.Parameter) -> WeightReparam:
        reparam = ChannelThreshold(weight)
        self.thresholds.append(reparam.threshold)
        return reparam

    def extra_loss(self, step: int) -> Tensor | None:
        # The batched forward's thresholds, if it ran: one gradient path into them, not two.
        flat, self._flat_thresholds = self._flat_thresholds, None
        if self.params.alpha == 0 or not self.thresholds:
            return None
        return self.params.alpha * (penalty(self.thresholds) if flat is None else penalty([flat]))

    def batched_weights(self, layout: FlatLayout, weights: list[Tensor]) -> list[Tensor]:
        layers = self.reparams_of(ChannelThreshold)
        flat = layout.flatten(weights)
        magnitude = flat.abs()
        self._reset_collapsed(layout, magnitude, layers)
        thresholds = torch.cat([r.threshold for r in layers])
        if torch.is_grad_enabled():
            self._flat_thresholds = thresholds
        per_entry = expand(thresholds, layout.channel_of_entry, layout.channel_lengths)
        return layout.unflatten(hard_masked(flat, magnitude, per_entry))

    def _reset_collapsed(
        self, layout: FlatLayout, magnitude: Tensor, layers: list[ChannelThreshold]
    ) -> None:
        """``reset_if_collapsed`` of every layer at once (no host sync)."""
        if self._collapse_at is None or self._collapse_at.device != layout.device:
            # Made on the first (eager) forward, never inside a graph capture.
            limits = [float(r.collapse_at) for r in layers]
            self._collapse_at = torch.tensor(limits, dtype=torch.float64, device=layout.device)
        with torch.no_grad():
            thresholds = torch.cat([r.threshold for r in layers])
            above = magnitude > thresholds.index_select(0, layout.channel_of_entry)
            # Segment sums take floats only: counted per channel in float32 (exact up to 2^24
            # entries per channel), then per layer in float64 (exact for any layer).
            per_channel = segment_sum(above.to(torch.float32), layout.channel_lengths)
            kept = segment_sum(per_channel.to(torch.float64), layout.channels_per_layer)
            collapsed = kept <= self._collapse_at
            reset = thresholds.masked_fill(collapsed.index_select(0, layout.layer_of_channel), 0)
            torch._foreach_copy_([r.threshold for r in layers], list(reset.split(layout.channels)))
            torch._foreach_add_([r.resets for r in layers], list(collapsed.long().unbind()))

    def finalize(self) -> None:
        resets = [r.resets for r in self.reparams_of(ChannelThreshold)]
        super().finalize()
        assert self.ctx is not None
        self.ctx.record["threshold_resets"] = int(sum(int(n) for n in resets))
        self.thresholds = []


def penalty(thresholds: list[Tensor]) -> Tensor:
    """sum(exp(-t)) over all thresholds of all layers."""
    return torch.exp(-torch.cat(thresholds)).sum()
