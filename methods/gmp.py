"""Gradual Magnitude Pruning (GMP; Zhu and Gupta 2017, Gale et al. 2019).

GMP trains from scratch for T = ``budget.epochs`` epochs and prunes at the ends of the epochs
I, 2I, ..., P_s I to the cubic schedule s(e) = s_f (1 - (1 - e / (P_s I))^3) of
:mod:`benchmark.pruning.gradual`, with P_s = floor(T / I) - 1; the last I or more epochs train
with the final mask. ``method.interval`` is I; ``method.steps`` is the paper's label "n equally
distributed pruning steps", which its code (ZIB-IOL/BIMP, ``GMP.pruning_interval``) ran as
I = floor(T / n): 100 steps in 200 epochs prune every 2 epochs and reach the goal at epoch 198.

Variants (``method.variant``):

- ``soft`` (default, the paper's GMP: "BIMP 'hard' prunes while GMP 'soft' prunes"): each step
  recomputes the mask from all weights, so a pruned weight whose magnitude beats a kept one
  comes back. As in the reference (torch's pruning reparametrization with ``weight_orig``), the
  pruned values stay in the background and keep moving between steps under the optimizer's
  weight decay and momentum (their gradient is zero: the forward pass uses the masked weights),
  so they shrink towards zero; a revived weight comes back with its decayed value and keeps its
  momentum. Every pruning step zeroes the momentum of all entries it leaves pruned.
- ``hard``: each step prunes on top of the existing mask; a pruned weight never returns (the
  paper's GMP-versus-BIMP ablation).

The momentum of newly pruned entries is zeroed. Learning-rate schedules (``method.lr_schedule``),
the variants of the paper's GMP-versus-BIMP tables:

- ``original``: the run's original schedule (the dataset's stepped one in the paper's setup),
- ``linear``: a linear decay from ``schedule.lr`` to zero over T,
- ``cyclic``: a linear decay from ``schedule.lr`` to zero, restarted at each pruning step.

Differences from Zhu and Gupta (the paper's code is followed): pruning happens at epoch
boundaries instead of every few iterations and the selection criterion is global magnitude by
default (the paper found it better than uniform+). The final pruning step records the pruning
stability: test accuracy of the model before that step and right after it.

Implementation of ``soft``: the model holds the masked weights (so evaluation and checkpoints
see the sparse network) and ``background``/``background_momentum`` the pruned entries' values
and momentum. After every optimizer step the background takes the SGD step those entries take
in the reference (gradient zero, weight decay and momentum of the parameter's group, Nesterov
if set): two or three fused ops, none when the weight decay is zero.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from benchmark.config.run import RunConfig, check
from benchmark.measure.metrics import pruning_stability
from benchmark.pruning import CRITERIA, compute_masks
from benchmark.pruning.flat import validate_counting
from benchmark.pruning.gradual import GradualSchedule, gradual_schedule
from benchmark.schedules.original import linear_decay
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

    ``interval`` (I, in epochs) or ``steps`` (the paper's label T / I, so I = floor(T / steps))
    fixes the pruning schedule; give at most one, and both 0 means I = 1 (prune after every
    epoch). ``variant`` is ``soft`` (the paper's GMP) or ``hard``.

    Attributes:
        steps: the paper's label T / I for the pruning schedule (I = floor(T / steps));
            0: use interval
        interval: I, epochs between pruning steps; 0: derived from steps (both 0: I = 1)
        criterion: which weights each step prunes: global, uniform, uniform+, erk, lamp, random
        variant: soft (the paper's GMP: each step re-selects from all weights, so pruned ones
            can come back) or hard (a pruned weight never returns)
        lr_schedule: original (the run's schedule), linear (decay to zero over T) or cyclic
            (a linear decay restarted at each pruning step)
        counting: hard variant: reference (each step prunes round(q n) of the n weights still
            alive, q = 1 - (1 - s_t) / (1 - s_prev) from the schedule's targets, as the paper's
            code) or exact (each step ends at exactly round(s_t N_P) pruned); soft counts
            round(s_t N_P) either way
    """

    steps: int = 0
    interval: int = 0
    criterion: str = "global"
    variant: str = "soft"
    lr_schedule: str = "original"
    counting: str = "reference"


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
    graph_safe = True
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
        # Soft variant: the values and momentum of the pruned entries (zero where the mask keeps).
        self.background: list[torch.Tensor] | None = None
        self.background_momentum: list[torch.Tensor] | None = None
        # (optimizer, its group holding the pruned weights), found once per optimizer.
        self._group: tuple[torch.optim.Optimizer, dict[str, Any]] | None = None

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
        validate_counting(p.counting)

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
            self.background_momentum = [torch.zeros_like(p) for p in ctx.masks.params]

    def lr(self, step: int) -> float:
        if self.lrs is None:
            return super().lr(step)
        return float(self.lrs[step])

    def after_step(self, step: int) -> None:
        super().after_step(step)
        if self.background is not None and self.masks_active:
            self._decay_background()

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
                self.params.criterion,
                ctx.prunable,
                target,
                current=ctx.masks.masks,
                generator=gen,
                keep=self.hard_keep(epochs_done),
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
            self.background = self.background_momentum = None

    def hard_keep(self, epochs_done: int) -> int | None:
        """The weights a hard step after ``epochs_done`` epochs keeps with ``counting =
        "reference"`` (None: exact counting, round(s_t N_P) pruned).

        As the paper's code (``GMP.pruning_scheduler`` with torch's ``global_unstructured``): the
        step prunes the fraction q = 1 - (1 - s_t) / (1 - s_prev) of the n weights still alive,
        s_prev being the previous step's *target* (0 before the first), i.e. round(q n) weights
        (torch's ``_compute_nparams_toprune``, Python's round). Counts drift from round(s_t N_P)
        by at most one weight per step.
        """
        if self.params.counting != "reference":
            return None
        assert self.ctx is not None
        previous = self.schedule.current_target(epochs_done - 1)
        fraction = 1.0 - (1 - self.schedule.target(epochs_done)) / (1 - previous)
        alive = sum(int(m.count_nonzero()) for m in self.ctx.masks.masks)
        return alive - round(fraction * alive)

    def _soft_prune(self, target: float, gen: torch.Generator) -> int:
        """Recompute the mask from kept and background weights; return how many entries revived."""
        ctx = self.ctx
        assert ctx is not None and self.background is not None
        assert self.background_momentum is not None
        params = ctx.masks.params
        old = [m.detach().clone() for m in ctx.masks.masks]
        with torch.no_grad():
            # Pruned entries are exactly zero in the model and kept ones zero in the background.
            full = torch._foreach_add([p.detach() for p in params], self.background)
        names = ctx.masks.names
        masks = compute_masks(
            self.params.criterion, list(zip(names, full, strict=True)), target, generator=gen
        )
        # One momentum buffer for kept and pruned entries alike, as in the reference: the
        # optimizer's buffer where the old mask kept, the background's where it pruned. The new
        # mask then zeroes it wherever it prunes, so a revived entry keeps its momentum.
        self._merge_momentum(old)
        with torch.no_grad():
            torch._foreach_copy_(params, full)
        self.hard_prune(masks)
        with torch.no_grad():
            self.background = torch._foreach_sub(full, [p.detach() for p in params])
            self.background_momentum = [torch.zeros_like(p) for p in params]
        new = ctx.masks.masks
        return int(sum(int(((n != 0) & (o == 0)).sum()) for n, o in zip(new, old, strict=True)))

    def _merge_momentum(self, old_masks: list[torch.Tensor]) -> None:
        """Optimizer momentum := its kept part under ``old_masks`` plus the background's."""
        ctx = self.ctx
        assert ctx is not None and ctx.optimizer is not None
        assert self.background_momentum is not None
        with torch.no_grad():
            for p, m, b in zip(ctx.masks.params, old_masks, self.background_momentum, strict=True):
                buf = ctx.optimizer.state.get(p, {}).get("momentum_buffer")
                if buf is not None:
                    buf.mul_(m).add_(b)

    def _decay_background(self) -> None:
        """The SGD step of the pruned entries: zero gradient, weight decay and momentum."""
        ctx = self.ctx
        assert ctx is not None and ctx.optimizer is not None
        assert self.background is not None and self.background_momentum is not None
        # Looked up once per optimizer, not every step: a search through all its parameters.
        if self._group is None or self._group[0] is not ctx.optimizer:
            self._group = (ctx.optimizer, _group_of(ctx.optimizer, ctx.masks.params[0]))
        group = self._group[1]
        wd, mu, lr = group["weight_decay"], group["momentum"], group["lr"]
        if wd == 0:
            return  # nothing moves a pruned entry (its momentum stays zero as well)
        bg, buf = self.background, self.background_momentum
        with torch.no_grad():
            if mu == 0:
                torch._foreach_mul_(bg, 1.0 - lr * wd)
                return
            # buf = mu buf + (1 - dampening) wd w;  w -= lr (wd w + mu buf) (Nesterov) or lr buf.
            torch._foreach_mul_(buf, mu)
            torch._foreach_add_(buf, bg, alpha=wd * (1.0 - group.get("dampening", 0.0)))
            if group.get("nesterov", False):
                torch._foreach_mul_(bg, 1.0 - lr * wd)
                _add_scaled_(bg, buf, -lr * mu)
            else:
                _add_scaled_(bg, buf, -lr)

    # ---------------------------------------------------------------- checkpointing
    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        state["background"] = self.background
        state["background_momentum"] = self.background_momentum
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.background = self._like_params(state.get("background"))
        self.background_momentum = self._like_params(state.get("background_momentum"))

    def _like_params(self, tensors: list[torch.Tensor] | None) -> list[torch.Tensor] | None:
        """Checkpointed per-parameter tensors on the parameters' device and dtype."""
        if tensors is None:
            return None
        assert self.ctx is not None
        return [
            t.to(device=p.device, dtype=p.dtype).clone()
            for t, p in zip(tensors, self.ctx.masks.params, strict=True)
        ]


def _group_of(optimizer: torch.optim.Optimizer, param: torch.Tensor) -> dict[str, Any]:
    """The optimizer's parameter group that holds ``param``."""
    for group in optimizer.param_groups:
        if any(p is param for p in group["params"]):
            return group
    raise ValueError("the parameter is not in the optimizer")


def _add_scaled_(
    xs: list[torch.Tensor], ys: list[torch.Tensor], coeff: float | torch.Tensor
) -> None:
    """xs += coeff * ys; ``coeff`` may be a device tensor (the learning rate of a captured step,
    which a Python alpha would freeze at capture)."""
    if isinstance(coeff, torch.Tensor):
        torch._foreach_add_(xs, torch._foreach_mul(ys, coeff))
    else:
        torch._foreach_add_(xs, ys, alpha=coeff)
