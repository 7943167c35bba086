"""Dynamic Pruning with Feedback (DPF; Lin et al. 2020).

DPF keeps dense weights and a mask. The forward and backward passes use the masked weights; the
gradient taken at that masked point updates the dense weights (error feedback), so a pruned
weight keeps training and can return when the mask is recomputed. The mask is recomputed from
the dense weights by global magnitude every ``refresh_every`` iterations and at each pruning
epoch of the cubic schedule of :mod:`benchmark.pruning.gradual` (the same as GMP's). Between pruning
points the target is the schedule's value at the last pruning epoch passed; before the first
one the model trains densely. After training, the last mask is applied for good and the
pruning stability (test accuracy of the dense weights versus the pruned model) is recorded.

Implementation: while a mask is installed, the model holds the masked weights between
iterations (so validation, test and checkpoints see the sparse model) and ``self.dense`` the
dense ones. ``before_step`` copies the dense weights back for the optimizer step and
``after_step`` saves them and re-applies the mask: two fused copies and one fused multiply per
iteration. The mask lives in the core's mask store (not marked active), so the per-epoch
sparsity is reported and checkpointed; re-applying it to the stored masked weights on resume is
a no-op.

Differences from Lin et al. (the task description is followed): their target sparsity follows
the cubic schedule continuously at every mask update; here it changes only at the pruning
epochs, as for GMP.

Reference behaviour followed (ZIB-IOL/BIMP, ``DPF``): the same pruning epochs as GMP, where
``method.steps`` is the paper's label T / I ("equally distributed pruning steps"), run as the
interval I = floor(T / steps) (see :mod:`benchmark.pruning.gradual`); a mask refresh every 16
iterations at the last scheduled target; the gradient at the masked weights updates the dense
ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from benchmark.config.run import RunConfig, check
from benchmark.pruning import magnitude_topk_masks
from benchmark.pruning.gradual import GradualSchedule
from methods.base import Method, MethodInfo, TrainContext, register_method
from methods.gmp import schedule_of


@dataclass
class DPFParams:
    """Hyperparameters of DPF.

    ``interval`` (I, in epochs) or ``steps`` (the paper's label T / I) fixes the pruning schedule
    as for GMP (at most one; both 0 means I = 1); ``refresh_every`` is the mask update period in
    iterations.

    Attributes:
        steps: the paper's label T / I for the pruning schedule (I = floor(T / steps));
            0: use interval
        interval: I, epochs between pruning steps; 0: derived from steps (both 0: I = 1)
        refresh_every: iterations between mask recomputations from the dense weights
    """

    steps: int = 0
    interval: int = 0
    refresh_every: int = 16


# Grids of the paper, Appendix B.3 ("schedule.name" adds the linear schedule of CIFAR-100 and
# ImageNet to the stepped original one).
_PRESETS: dict[str, dict[str, list[Any]]] = {
    "cifar10": {
        "steps": [20, 100],
        "optim.weight_decay": [1e-4, 5e-4, 1e-3, 5e-3],
        "schedule.lr": [0.05, 0.1, 0.15, 0.2],
    },
    "cifar100": {
        "steps": [20, 100],
        "optim.weight_decay": [1e-4, 2e-4, 5e-4],
        "schedule.lr": [0.05, 0.1, 0.15],
        "schedule.name": ["stepped", "linear"],
    },
    "imagenet": {
        "steps": [9, 18],
        "optim.weight_decay": [1e-4],
        "schedule.name": ["stepped", "linear"],
    },
}


@register_method
class DPF(Method):
    """Dynamic pruning with feedback: masked forward/backward, dense update, periodic re-masking."""

    name = "dpf"
    graph_safe = True
    Params = DPFParams
    info = MethodInfo(
        sparsity_specifiable=True,
        pruning_stable=True,
        sparsity_agnostic=False,
        extra_hyperparameters=1,
        summary="dynamic pruning with feedback: masked gradient updates the dense weights",
    )
    presets = _PRESETS

    def __init__(self, cfg: RunConfig) -> None:
        super().__init__(cfg)
        self.schedule: GradualSchedule = schedule_of(cfg)
        # The dense weights while a mask is installed (None before the first pruning epoch).
        self.dense: list[torch.Tensor] | None = None
        self.refreshes = 0

    @classmethod
    def validate(cls, cfg: RunConfig) -> None:
        p = cfg.method.params
        schedule_of(cfg)
        check(p.refresh_every >= 1, "method.refresh_every", p.refresh_every, "an integer >= 1")

    # ---------------------------------------------------------------- hooks
    def setup(self, ctx: TrainContext, parent_state: dict[str, torch.Tensor] | None) -> None:
        super().setup(ctx, parent_state)
        self.dense = None
        self.refreshes = 0

    def on_iteration_start(self, step: int) -> None:
        # Eager, outside the captured step: the refresh reads a count back to the host; it
        # writes the masks in place, so the captured steps keep reading the current ones.
        if self.dense is None or step % self.params.refresh_every != 0:
            return
        assert self.ctx is not None
        epoch, offset = divmod(step, self.ctx.iters_per_epoch)
        # The pruning epoch that just ended refreshed the mask already from the same weights.
        if offset == 0 and self.schedule.is_pruning_epoch(epoch):
            return
        self.refresh(self.schedule.current_target(epoch))

    def before_step(self, step: int) -> None:
        if self.dense is not None:
            assert self.ctx is not None
            # The gradient was taken at the masked weights; the optimizer updates the dense ones.
            with torch.no_grad():
                torch._foreach_copy_(self.ctx.masks.params, self.dense)

    def after_step(self, step: int) -> None:
        if self.dense is not None:
            assert self.ctx is not None
            with torch.no_grad():
                torch._foreach_copy_(self.dense, self.ctx.masks.params)
            self.ctx.masks.apply()

    def on_epoch_end(self, epoch: int) -> bool:
        if self.schedule.is_pruning_epoch(epoch + 1):
            self.refresh(self.schedule.target(epoch + 1))
        return False

    def finalize(self) -> None:
        ctx = self.ctx
        assert ctx is not None
        last = [m != 0 for m in ctx.masks.masks]
        if self.dense is not None:
            # Measure stability from the dense weights, then prune them with the last mask.
            with torch.no_grad():
                torch._foreach_copy_(ctx.masks.params, self.dense)
            self.dense = None
        self.final_prune_with_stability(last)
        ctx.record["mask_refreshes"] = self.refreshes

    # ---------------------------------------------------------------- the mask
    def refresh(self, target: float) -> None:
        """Recompute the mask by global magnitude of the dense weights and mask the model."""
        ctx = self.ctx
        assert ctx is not None
        params = ctx.masks.params
        with torch.no_grad():
            if self.dense is None:
                self.dense = [p.detach().clone() for p in params]
            else:
                torch._foreach_copy_(params, self.dense)
            total = ctx.masks.num_prunable()
            keep = total - round(target * total)
            masks = magnitude_topk_masks(torch._foreach_abs(self.dense), keep)
        # assign() also multiplies the (now dense) model weights by the new mask.
        ctx.masks.assign(masks)
        self.refreshes += 1

    # ---------------------------------------------------------------- checkpointing
    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        state.update({"dense": self.dense, "refreshes": self.refreshes})
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.refreshes = int(state["refreshes"])
        dense = state["dense"]
        if dense is None:
            self.dense = None
            return
        assert self.ctx is not None
        self.dense = [
            d.to(device=p.device, dtype=p.dtype).clone()
            for d, p in zip(dense, self.ctx.masks.params, strict=True)
        ]
