"""Gradual Magnitude Pruning (GMP; Zhu and Gupta 2017, Gale et al. 2019).

GMP trains from scratch for T = ``budget.epochs`` epochs and prunes at the ends of the epochs
I, 2I, ..., P_s I to the cubic schedule s(e) = s_f (1 - (1 - e / (P_s I))^3) of
:mod:`benchmark.gradual`; the last I or more epochs train with the final mask.

Variants (``method.variant``):

- ``hard``: each step prunes on top of the existing mask; a pruned weight never returns.
- ``soft``: the values of pruned weights are kept in the background (frozen: the forward pass
  uses the masked weights, so they get no gradient) and each step recomputes the mask from all
  weights, so a pruned weight whose magnitude beats a kept one comes back with its old value
  and zero momentum.

The momentum of newly pruned entries is zeroed. Learning-rate schedules (``method.lr_schedule``),
the variants of the paper's GMP-versus-BIMP tables:

- ``original``: the run's original schedule (the dataset's stepped one in the paper's setup),
- ``linear``: a linear decay from ``schedule.lr`` to zero over T,
- ``cyclic``: a linear decay from ``schedule.lr`` to zero, restarted at each pruning step.

Differences from Zhu and Gupta (the task description is followed): pruning happens at epoch
boundaries instead of every few iterations, the selection criterion is global magnitude by
default (the paper found it better than uniform+), and ``hard`` is the default variant (the
paper's ImageNet GMP results use hard pruning). The final pruning step records the pruning
stability: test accuracy of the model before that step and right after it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from benchmark.config import RunConfig, check
from benchmark.gradual import GradualSchedule, gradual_schedule
from benchmark.metrics import pruning_stability
from benchmark.pruning import CRITERIA, compute_masks
from benchmark.schedules import linear_decay
from methods.base import Method, MethodInfo, TrainContext, register_method

VARIANTS = ("hard", "soft")
LR_SCHEDULES = ("original", "linear", "cyclic")

GMP_INFO = MethodInfo(
    sparsity_specifiable=True,
    pruning_stable=True,
    sparsity_agnostic=False,
    extra_hyperparameters=1,
    summary="gradual magnitude pruning: cubic sparsity schedule over training",
)


@dataclass
class GMPParams:
    """Hyperparameters of GMP.

    ``steps`` (P_s) or ``interval`` (I, in epochs) fixes the pruning schedule; give at most one,
    0 means "derive from the other", and both 0 means I = 1 (prune after every epoch).

    Attributes:
        steps: P_s, the number of pruning steps of the cubic schedule; 0: derived from interval
        interval: I, epochs between pruning steps; 0: derived from steps (both 0: I = 1)
        criterion: which weights each step prunes: global, uniform, uniform+, erk, lamp, random
        variant: hard (a pruned weight never returns) or soft (each step re-selects from all
            weights, so pruned ones can come back)
        lr_schedule: original (the run's schedule), linear (decay to zero over T) or cyclic
            (a linear decay restarted at each pruning step)
    """

    steps: int = 0
    interval: int = 0
    criterion: str = "global"
    variant: str = "hard"
    lr_schedule: str = "original"


def schedule_of(cfg: RunConfig) -> GradualSchedule:
    """The gradual pruning schedule of a GMP or DPF run (raises ConfigError on bad fields)."""
    p = cfg.method.params
    return gradual_schedule(
        cfg.budget.epochs, cfg.method.sparsity, steps=p.steps, interval=p.interval
    )


def gmp_lrs(kind: str, lr: float, schedule: GradualSchedule, epochs: int, ipe: int) -> np.ndarray:
    """Per-iteration learning rates of the ``linear`` or ``cyclic`` GMP schedule over T epochs."""
    if kind == "linear":
        return linear_decay(lr, epochs * ipe)
    bounds = [0, *schedule.epochs, epochs]
    cycles = zip(bounds[:-1], bounds[1:], strict=True)
    return np.concatenate([linear_decay(lr, (end - start) * ipe) for start, end in cycles])


# Grids of the paper, Appendix B.3. "schedule.lr" is the initial value of the original schedule;
# on CIFAR-100 and ImageNet the paper adds a linear schedule (initial value 0.1) to the grid.
_CIFAR10_GRID: dict[str, list[Any]] = {
    "steps": [20, 100],
    "optim.weight_decay": [1e-4, 5e-4, 1e-3, 5e-3],
    "schedule.lr": [0.05, 0.1, 0.15, 0.2],
}
_CIFAR100_GRID: dict[str, list[Any]] = {
    "steps": [20, 100],
    "optim.weight_decay": [1e-4, 2e-4, 5e-4],
    "schedule.lr": [0.05, 0.1, 0.15],
}


@register_method
class GMP(Method):
    """Gradual magnitude pruning with a cubic schedule; hard or soft; three LR schedules."""

    name = "gmp"
    Params = GMPParams
    info = GMP_INFO
    presets = {
        "cifar10": _CIFAR10_GRID,
        "cifar100": {**_CIFAR100_GRID, "lr_schedule": ["original", "linear"]},
        "imagenet": {
            "steps": [5, 9, 18, 45],
            "optim.weight_decay": [1e-4],
            "lr_schedule": ["original", "linear"],
        },
        # The GMP-versus-BIMP ablations (Appendix, table:gmp-vs-bimp-*): wd 1e-4, lr 0.1.
        "cifar100-gmp-vs-bimp": {
            "interval": [5, 10],
            "lr_schedule": ["original", "linear", "cyclic"],
            "variant": ["hard", "soft"],
            "optim.weight_decay": [1e-4],
            "schedule.lr": [0.1],
        },
        "imagenet-gmp-vs-bimp": {
            "interval": [5, 10],
            "lr_schedule": ["original", "linear", "cyclic"],
            "variant": ["hard"],
            "optim.weight_decay": [1e-4],
            "schedule.lr": [0.1],
        },
    }

    def __init__(self, cfg: RunConfig) -> None:
        super().__init__(cfg)
        self.schedule = schedule_of(cfg)
        self.lrs: np.ndarray | None = None
        # Soft variant: the values of the pruned entries (zero where the mask keeps).
        self.background: list[torch.Tensor] | None = None

    @classmethod
    def validate(cls, cfg: RunConfig) -> None:
        p = cfg.method.params
        schedule_of(cfg)
        CRITERIA.get(p.criterion, "method.criterion")
        check(p.variant in VARIANTS, "method.variant", p.variant, "one of 'hard', 'soft'")
        check(
            p.lr_schedule in LR_SCHEDULES,
            "method.lr_schedule",
            p.lr_schedule,
            "one of 'original', 'linear', 'cyclic'",
        )

    # ---------------------------------------------------------------- hooks
    def setup(self, ctx: TrainContext, parent_state: dict[str, torch.Tensor] | None) -> None:
        super().setup(ctx, parent_state)
        kind = self.params.lr_schedule
        if kind != "original":
            epochs = self.cfg.budget.epochs
            self.lrs = gmp_lrs(
                kind, self.cfg.schedule.lr, self.schedule, epochs, ctx.iters_per_epoch
            )
        if self.params.variant == "soft":
            self.background = [torch.zeros_like(p) for p in ctx.masks.params]

    def lr(self, step: int) -> float:
        if self.lrs is None:
            return super().lr(step)
        return float(self.lrs[step])

    def on_epoch_end(self, epoch: int) -> bool:
        if self.schedule.is_pruning_epoch(epoch + 1):
            self.prune_step(epoch + 1)
        return False

    # ---------------------------------------------------------------- one pruning step
    def prune_step(self, epochs_done: int) -> None:
        """Prune to the schedule's target after ``epochs_done`` epochs (a pruning epoch)."""
        ctx = self.ctx
        assert ctx is not None
        target = self.schedule.target(epochs_done)
        last = epochs_done == self.schedule.final_epoch
        before = ctx.evaluate("test")["top1"] if last else None
        gen = torch.Generator().manual_seed(self.cfg.seed * 7919 + epochs_done)
        revived = 0
        if self.background is None:
            masks = compute_masks(
                self.params.criterion, ctx.prunable, target, current=ctx.masks.masks, generator=gen
            )
            self.hard_prune(masks)
        else:
            revived = self._soft_prune(target, gen)
        step: dict[str, Any] = {
            "epoch": epochs_done,
            "target_sparsity": target,
            "sparsity": ctx.masks.sparsity(),
        }
        if self.background is not None:
            step["revived"] = revived
        ctx.record.setdefault("pruning_steps", []).append(step)
        if last:
            assert before is not None
            after = ctx.evaluate("test")["top1"]
            ctx.record["stability"] = {
                "acc_before": before,
                "acc_after": after,
                "pruning_stability": pruning_stability(before, after),
            }
            # The final mask holds from now on: nothing can come back, so drop the copy.
            self.background = None

    def _soft_prune(self, target: float, gen: torch.Generator) -> int:
        """Recompute the mask from kept and background weights; return how many entries revived."""
        ctx = self.ctx
        assert ctx is not None and self.background is not None
        params = ctx.masks.params
        old = [m.detach().clone() for m in ctx.masks.masks]
        with torch.no_grad():
            # Pruned entries are exactly zero in the model and kept ones zero in the background.
            full = torch._foreach_add([p.detach() for p in params], self.background)
        names = ctx.masks.names
        masks = compute_masks(
            self.params.criterion, list(zip(names, full, strict=True)), target, generator=gen
        )
        # Revived entries collected gradients into momentum while pruned: start them from zero.
        ctx.masks.update(old, ctx.optimizer)
        with torch.no_grad():
            torch._foreach_copy_(params, full)
        self.hard_prune(masks)
        with torch.no_grad():
            self.background = torch._foreach_sub(full, [p.detach() for p in params])
        new = ctx.masks.masks
        return int(sum(int(((n != 0) & (o == 0)).sum()) for n, o in zip(new, old, strict=True)))

    # ---------------------------------------------------------------- checkpointing
    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        state["background"] = self.background
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        background = state.get("background")
        if background is None:
            self.background = None
            return
        assert self.ctx is not None
        self.background = [
            b.to(device=p.device, dtype=p.dtype).clone()
            for b, p in zip(background, self.ctx.masks.params, strict=True)
        ]
