"""Continuous Sparsification (CS; Savarese et al. 2020).

Every prunable weight w gets a trainable mask logit m, initialised to s0 = ``method.mask_init``.
The layer uses the weight w sigmoid(beta m) / sigmoid(s0), so training starts from the unmasked
network, and the loss adds lambda sum(sigmoid(beta m)) over all of P (lambda = ``method.l1``).
The temperature beta grows exponentially from 1 to beta_final = ``method.temperature`` over all
T training iterations: after t iterations beta = beta_final^(t / T) (the forward pass of the
(t+1)-th iteration uses it, and so does the evaluation after an epoch of t iterations, as in the
paper's code). After training the mask is [m > 0] and the weights become
w sigmoid(beta_final m) / sigmoid(s0) [m > 0], as in the paper's code (ZIB-IOL/BIMP,
``CS.deregister_masks``: the soft-masked weight under the binary mask), with exact zeros where
m <= 0; the test accuracy right before (soft mask at beta_final) and after that step is recorded
as the pruning stability.

The sparsity is not specified: it emerges from s0, lambda and the temperature, so
``method.sparsity`` is ignored (``info.sparsity_specifiable`` is False). The per-epoch fraction
of logits <= 0 is recorded as ``emergent_sparsity``.

Weight decay (``method.decay``):

- ``reference`` (default, the paper's code ``CS.before_backward``): the loss adds
  1/2 wd sum(w^2) over P while SGD's weight decay also acts on every parameter, so the weights
  of P are decayed with 2 wd, the mask logits and the other parameters with wd.
- ``once``: every model parameter is decayed once with wd and the mask logits not at all (their
  only regulariser is the lambda term). A correction of the doubled decay, which looks like an
  accident of porting the original code (whose optimizer had no weight decay of its own).

Differences from Savarese et al. (the task description is followed): the temperature grows
every iteration instead of every epoch, there is a single round (no rewinding of the weights
between rounds as in their lottery-ticket experiments), and the logits use the run's learning
rate schedule.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from benchmark.config.run import RunConfig, check
from methods._batched import FlatLayout
from methods._reparam import ReparamMethod, WeightReparam, validate_decay
from methods.base import MethodInfo, TrainContext, register_method


@dataclass
class CSParams:
    """Hyperparameters of CS: s0 (``mask_init``), beta_final (``temperature``), lambda (``l1``).

    ``decay``: ``reference`` (P decayed twice, logits once) or ``once`` (see the module).

    Attributes:
        mask_init: s0, the initial mask logit of every prunable weight (lower prunes more)
        temperature: beta_final, the temperature the mask sigmoid reaches at the last iteration
            (it grows exponentially from 1)
        l1: lambda, the weight of the mask penalty sum(sigmoid(beta m)) over the prunable set
        decay: reference (the weights of P decayed twice, the logits once, as the paper's code)
            or once (every model parameter once, the logits not at all)
    """

    mask_init: float = 0.0
    temperature: float = 300.0
    l1: float = 1e-8
    decay: str = "reference"


def temperature_at(step: int, total: int, final: float) -> float:
    """beta after ``step`` of ``total`` iterations: final^(step / total), from 1 to ``final``."""
    return float(final ** (step / total))


class SoftMask(WeightReparam):
    """w sigmoid(beta m) / sigmoid(s0) with one trainable logit m per weight."""

    def __init__(self, mask_init: float, beta: Tensor, like: Tensor) -> None:
        super().__init__()
        self.logits = nn.Parameter(torch.full_like(like, mask_init))
        # 1 / sigmoid(s0) = 1 + exp(-s0): the unmasked network at the start (m = s0, beta = 1).
        self.scale = 1.0 + math.exp(-mask_init)
        # Shared with the method, which sets it once per iteration (not state of this module).
        self.beta = beta
        self.gate_sum: Tensor | None = None

    def weight_of(self, weight: Tensor) -> Tensor:
        """The softly masked weight; times the hard mask [m > 0] once ``final`` is set."""
        gate = torch.sigmoid(self.beta * self.logits)
        if self.final:
            return weight * (gate * self.scale) * (self.logits > 0).to(weight.dtype)
        if torch.is_grad_enabled():
            # The L1 term reuses this forward's sigmoid instead of computing it again.
            self.gate_sum = gate.sum()
        return weight * (gate * self.scale)

    def __getstate__(self) -> dict[str, Any]:
        # The last forward's gate sum is a non-leaf tensor of that forward's graph: a copy of the
        # model (an evaluation copy, a checkpoint's) cannot take it and has no use for it.
        state = dict(super().__getstate__())
        state["gate_sum"] = None
        return state

    def penalty(self) -> Tensor:
        """sum(sigmoid(beta m)) of the last training forward pass (recomputed if there was none)."""
        value = self.gate_sum
        self.gate_sum = None
        return value if value is not None else torch.sigmoid(self.beta * self.logits).sum()

    def keep_mask(self, weight: Tensor) -> Tensor:
        return self.logits > 0


CS_INFO = MethodInfo(
    sparsity_specifiable=False,
    pruning_stable=True,
    sparsity_agnostic=False,
    extra_hyperparameters=3,
    summary="continuous sparsification: a sigmoid mask per weight with growing temperature",
)

S0_CIFAR10 = [-0.3, -0.25, -0.2, -0.1, -0.05, 0.0, 0.05, 0.1, 0.2, 0.25, 0.3]
S0_CIFAR100 = [-0.3, -0.25, -0.2, -0.1, -0.05, -0.03, -0.01, -0.005, -0.003, -0.001, 0.0]


@register_method
class CS(ReparamMethod):
    """Continuous sparsification: trainable soft masks, hardened by a growing temperature."""

    name = "cs"
    Params = CSParams
    info = CS_INFO
    decay_extra = False
    graph_safe = True
    # The paper's grids (Appendix B.3). On CIFAR-10 CS keeps the original learning rate; on
    # CIFAR-100 every method tunes it and adds a linear schedule. The paper could not tune CS on
    # ImageNet and reports no grid: "imagenet" is the CIFAR-10 grid at ImageNet's weight decay.
    presets: dict[str, dict[str, Any]] = {
        "cifar10": {
            "temperature": [300.0],
            "mask_init": S0_CIFAR10,
            "l1": [1e-8, 1e-7],
            "optim.weight_decay": [1e-4, 5e-4, 1e-3, 5e-3],
        },
        "cifar100": {
            "temperature": [500.0],
            "mask_init": S0_CIFAR100,
            "l1": [1e-9, 1e-8, 1e-7],
            "optim.weight_decay": [1e-4, 2e-4, 5e-4],
            "schedule.lr": [0.05, 0.1, 0.15],
            "schedule.name": ["stepped", "linear"],
        },
        "imagenet": {
            "temperature": [300.0],
            "mask_init": S0_CIFAR10,
            "l1": [1e-8, 1e-7],
            "optim.weight_decay": [1e-4],
        },
    }

    def __init__(self, cfg: RunConfig) -> None:
        super().__init__(cfg)
        self.beta = torch.ones(())
        self.total_iters = 0
        self._gate_sum: Tensor | None = None

    @classmethod
    def validate(cls, cfg: RunConfig) -> None:
        p = cfg.method.params
        check(math.isfinite(p.mask_init), "method.mask_init", p.mask_init, "a finite number (s0)")
        check(
            math.isfinite(p.temperature) and p.temperature >= 1,
            "method.temperature",
            p.temperature,
            "a finite number >= 1 (the final temperature beta; beta starts at 1)",
        )
        check(math.isfinite(p.l1) and p.l1 >= 0, "method.l1", p.l1, "a finite number >= 0")
        validate_decay(cfg)

    def setup(self, ctx: TrainContext, parent_state: dict[str, torch.Tensor] | None) -> None:
        self.beta = torch.ones((), device=ctx.device)
        self.total_iters = self.total_epochs() * ctx.iters_per_epoch
        super().setup(ctx, parent_state)

    def make_reparam(self, weight: nn.Parameter) -> WeightReparam:
        return SoftMask(float(self.params.mask_init), self.beta, weight)

    def set_temperature(self, step: int) -> None:
        """Set beta to its value after ``step`` iterations (a device fill, no host sync)."""
        self.beta.fill_(temperature_at(step, self.total_iters, self.params.temperature))

    def on_iteration_start(self, step: int) -> None:
        # Outside the captured step: beta is a device tensor the captured forward reads.
        self.set_temperature(step)
        # A sum kept from a forward that no loss consumed (one outside training with gradients
        # on) would keep its autograd graph alive into the next step: on CUDA the graph's
        # accumulation nodes then tie the capturing stream to the default one, and capture fails.
        self._gate_sum = None
        for mask in self.reparams_of(SoftMask):
            mask.gate_sum = None

    def on_epoch_end(self, epoch: int) -> bool:
        # The paper's code raises beta after every iteration (CS.after_training_iteration), so
        # the evaluation after an epoch sees beta after its last iteration, not the one that
        # iteration's forward used; the next iteration starts with this value anyway.
        assert self.ctx is not None
        self.set_temperature((epoch + 1) * self.ctx.iters_per_epoch)
        return super().on_epoch_end(epoch)

    def extra_loss(self, step: int) -> Tensor | None:
        # The forward summed the gates already: the batched pass all at once, else each layer.
        total, self._gate_sum = self._gate_sum, None
        masks = self.reparams_of(SoftMask)
        if total is None and masks:
            total = torch.stack([m.penalty() for m in masks]).sum()
        if self.params.l1 == 0 or total is None:
            return None
        return self.params.l1 * total

    def batched_weights(self, layout: FlatLayout, weights: list[Tensor]) -> list[Tensor]:
        masks = self.reparams_of(SoftMask)
        gate = torch.sigmoid(self.beta * layout.flatten([m.logits for m in masks]))
        if torch.is_grad_enabled():
            self._gate_sum = gate.sum()
        return layout.unflatten(layout.flatten(weights) * (gate * masks[0].scale))

    def before_final(self) -> None:
        self.set_temperature(self.total_iters)

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        state["beta"] = float(self.beta)
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.beta.fill_(state["beta"])
