"""IMP and Budgeted IMP (BIMP): hard prune-retrain cycles (the Renda et al. baseline, built on
the same cycles, is in :mod:`methods.renda`).

- ``imp``: starts from a trained dense parent (a ``dense`` run in the store, trained once and
  shared by every child with the same parent config) and runs J prune-retrain cycles over
  ``budget.epochs`` retraining epochs. One Shot is J = 1.
- ``bimp``: trains from scratch for T0 = ``budget.initial_epochs`` epochs with a linear decay from
  eta_1 to zero, then runs J cycles over the remaining T - T0 epochs; ALLR by default.

Cycle j (1-based) prunes to the sparsity 1 - (1 - s)^(j / J), i.e. a fraction
q = 1 - (1 - s)^(1/J) of the remaining weights.

Reference behaviour followed (ZIB-IOL/BIMP, ``pretrainedStrategies.IMP`` and
``baseRunner.after_pruning_callback``): BIMP's first cycle starts with a fresh optimizer state
(the reference trains T0 epochs and runs the cycles as a second run), and after the last prune
one train-mode pass over the training split recomputes BatchNorm's running statistics before
the accuracy after pruning is recorded (retraining overwrites them anyway; the pass of the
earlier cycles, which changes nothing that is recorded, is left out).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from benchmark.config.run import RunConfig, check
from benchmark.core.errors import ConfigError
from benchmark.pruning import CRITERIA, compute_masks, filter_masks
from benchmark.schedules.original import linear_decay, original_warmup_iters
from benchmark.schedules.retraining import (
    RETRAIN_SCHEDULES,
    acc_allr_d1,
    allr_d1,
    allr_d2,
    allr_scale,
    retrain_lrs,
)
from methods.base import Method, MethodInfo, TrainContext, dense_parent, register_method


@dataclass
class BIMPParams:
    """Hyperparameters of BIMP (initial training is part of the run), shared with IMP.

    Attributes:
        schedule: retraining learning-rate schedule of each cycle: FT LRW SLR CLR LLR ALLR
            AccALLR ALLR-d1 ALLR-d2 tuned-{constant,stepped,cosine,linear}
        criterion: which weights each cycle prunes: global, uniform, uniform+, erk, lamp, random
        structured: true prunes whole conv filters by L2 norm (Li et al.) instead of weights
        filter_multiple: structured only: kept filters per layer are rounded to a multiple of
            this (8: hardware-friendly); 1 keeps exact counts
        retrain_epochs: retraining epochs of each cycle; empty splits the retraining budget
            evenly over the cycles
        initial_lr: initial retraining learning rate of the tuned-* schedules (> 0 for them)
        warmup_fraction: tuned-* schedules only: fraction of each cycle warmed up (0 or 0.1)
    """

    schedule: str = "ALLR"
    criterion: str = "global"
    structured: bool = False
    filter_multiple: int = 1
    retrain_epochs: list[int] = field(default_factory=list)
    initial_lr: float = 0.0
    warmup_fraction: float = 0.0


@dataclass
class IMPParams(BIMPParams):
    """Hyperparameters of IMP: BIMP's, plus the epochs of the trained dense parent.

    Attributes:
        parent_epochs: epochs of the dense parent (an ordinary dense run, trained once and
            shared by every child with the same parent config); budget.epochs is the
            retraining budget
        parent_weight_decay: weight decay of the dense parent; unset: the run's
            optim.weight_decay (setting it lets a retraining weight-decay grid share one parent)
    """

    parent_epochs: int = 10
    parent_weight_decay: float | None = None


@dataclass
class CyclePlan:
    """When each prune-retrain cycle starts and which sparsity it prunes to."""

    initial_epochs: int
    cycle_epochs: list[int]
    targets: list[float]

    @property
    def starts(self) -> list[int]:
        """The epoch (0-based) at which each cycle prunes."""
        out, at = [], self.initial_epochs
        for e in self.cycle_epochs:
            out.append(at)
            at += e
        return out

    @property
    def total_epochs(self) -> int:
        """Initial plus retraining epochs."""
        return self.initial_epochs + sum(self.cycle_epochs)


def split_epochs(total: int, cycles: int) -> list[int]:
    """floor(total / cycles) epochs per cycle, the remainder to the last cycle."""
    base = total // cycles
    return [base] * (cycles - 1) + [total - base * (cycles - 1)]


def cycle_targets(sparsity: float, cycles: int) -> list[float]:
    """Sparsity after each cycle when every cycle prunes the same fraction of what remains."""
    return [1 - (1 - sparsity) ** ((j + 1) / cycles) for j in range(cycles)]


IMP_INFO = MethodInfo(
    sparsity_specifiable=True,
    pruning_stable=False,
    sparsity_agnostic=True,
    extra_hyperparameters=0,
    summary="iterative magnitude pruning: hard prune, then retrain; J cycles",
)


class PruneRetrain(Method):
    """Shared machinery of IMP, BIMP and the Renda baseline."""

    info = IMP_INFO
    graph_safe = True

    def __init__(self, cfg: RunConfig) -> None:
        super().__init__(cfg)
        self.plan = self.make_plan()
        self.initial_lrs: np.ndarray | None = None
        self.cycle_lrs: list[np.ndarray] = []
        self.cycle_records: list[dict[str, Any]] = []
        self.filter_current: dict[str, torch.Tensor] | None = None

    # ---------------------------------------------------------------- what subclasses define
    def make_plan(self) -> CyclePlan:
        """The cycle plan of this run."""
        raise NotImplementedError

    def schedule_kind(self) -> str:
        """The retraining schedule name."""
        return self.params.schedule

    def translation_source(self, ctx: TrainContext) -> tuple[np.ndarray, int]:
        """The per-iteration schedule the retraining schedules translate, and its warm-up."""
        return ctx.original_lrs, original_warmup_iters(self.cfg.schedule, ctx.iters_per_epoch)

    # ---------------------------------------------------------------- hooks
    def total_epochs(self) -> int:
        return self.plan.total_epochs

    def setup(self, ctx: TrainContext, parent_state: dict[str, torch.Tensor] | None) -> None:
        super().setup(ctx, parent_state)
        if self.plan.initial_epochs > 0:
            n = self.plan.initial_epochs * ctx.iters_per_epoch
            self.initial_lrs = linear_decay(self.cfg.schedule.lr, n)

    def lr(self, step: int) -> float:
        assert self.ctx is not None
        ipe = self.ctx.iters_per_epoch
        epoch = step // ipe
        if epoch < self.plan.initial_epochs:
            assert self.initial_lrs is not None
            return float(self.initial_lrs[step])
        starts = self.plan.starts
        j = max(i for i, s in enumerate(starts) if s <= epoch)
        return float(self.cycle_lrs[j][step - starts[j] * ipe])

    def on_epoch_start(self, epoch: int) -> None:
        starts = self.plan.starts
        if epoch in starts and len(self.cycle_lrs) == starts.index(epoch):
            self.prune_cycle(starts.index(epoch))

    def on_epoch_end(self, epoch: int) -> bool:
        return (epoch + 1) in [
            s + e for s, e in zip(self.plan.starts, self.plan.cycle_epochs, strict=True)
        ]

    # ---------------------------------------------------------------- one cycle
    def prune_cycle(self, j: int) -> None:
        """Prune for cycle ``j`` (0-based) and build that cycle's learning-rate schedule."""
        ctx = self.ctx
        assert ctx is not None
        kind = self.schedule_kind()
        needs_acc = kind == "AccALLR"
        acc_before = ctx.evaluate("train")["top1"] if needs_acc else None
        norm_before = _global_norm(ctx)
        remaining_before = _remaining(ctx)
        last = j == len(self.plan.targets) - 1
        if j == 0 and self.plan.initial_epochs > 0:
            # The paper's code runs BIMP's T0 training and its cycles as two runs: the first
            # cycle starts with a fresh optimizer (no momentum).
            assert ctx.optimizer is not None
            ctx.optimizer.state.clear()
        new_masks, extra = self.next_masks(j)
        pruned_distance = _pruned_distance(ctx, new_masks)
        if last:
            # As the reference's after_pruning_callback: BatchNorm statistics of the pruned
            # network before the accuracy after pruning is measured.
            self.final_prune_with_stability(new_masks, extra, recompute_bn=True)
        else:
            self.hard_prune(new_masks, extra)
        remaining_after = _remaining(ctx)
        q = (remaining_before - remaining_after) / max(remaining_before, 1)
        record: dict[str, Any] = {
            "cycle": j + 1,
            "epoch": self.plan.starts[j],
            "retrain_epochs": self.plan.cycle_epochs[j],
            "target_sparsity": self.plan.targets[j],
            "sparsity": ctx.masks.sparsity(),
            "fraction_pruned": q,
            "relative_norm_drop": pruned_distance / norm_before if norm_before > 0 else 0.0,
        }
        d1 = allr_d1(pruned_distance, norm_before, q) if q > 0 else 0.0
        d2 = allr_d2(self.plan.cycle_epochs[j], self.original_epochs())
        scale = 1.0
        if kind == "ALLR":
            scale = allr_scale(d1, d2)
        elif kind == "ALLR-d1":
            scale = allr_scale(d1, None)
        elif kind == "ALLR-d2":
            scale = allr_scale(None, d2)
        elif needs_acc:
            acc_after = ctx.evaluate("train")["top1"]
            d1 = acc_allr_d1(acc_before, acc_after)
            record["train_acc_before"], record["train_acc_after"] = acc_before, acc_after
            scale = allr_scale(d1, d2)
        record.update({"d1": d1, "d2": d2, "scale": scale})
        original, warm = self.translation_source(ctx)
        n = self.plan.cycle_epochs[j] * ctx.iters_per_epoch
        initial = self.params.initial_lr if getattr(self.params, "initial_lr", 0.0) > 0 else None
        self.cycle_lrs.append(
            retrain_lrs(
                kind,
                n,
                original,
                original_warmup=warm,
                scale=scale,
                initial_lr=initial,
                warmup_fraction=getattr(self.params, "warmup_fraction", 0.0),
            )
        )
        self.cycle_records.append(record)
        ctx.record["cycles"] = self.cycle_records

    def next_masks(self, j: int) -> tuple[list[torch.Tensor], dict[str, torch.Tensor] | None]:
        """Masks over P for cycle ``j``'s target sparsity, plus masks of filters' BN/bias.

        Unstructured pruning uses the configured selection criterion; structured pruning removes
        the same fraction of whole filters per convolution (Li et al. 2016).
        """
        ctx = self.ctx
        assert ctx is not None
        target = self.plan.targets[j]
        if getattr(self.params, "structured", False):
            named = filter_masks(
                ctx.model,
                target,
                current=self.filter_current,
                exclude=self.cfg.method.exclude,
                multiple=getattr(self.params, "filter_multiple", 1),
            )
            self.filter_current = {k: v for k, v in named.items() if k in ctx.masks.names}
            masks = [named.get(name, torch.ones_like(p)) for name, p in ctx.prunable]
            return masks, named
        gen = torch.Generator().manual_seed(self.cfg.seed * 7919 + j)
        masks = compute_masks(
            self.params.criterion, ctx.prunable, target, current=ctx.masks.masks, generator=gen
        )
        return masks, None

    # ---------------------------------------------------------------- checkpointing
    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        state.update(
            {
                "cycle_lrs": [torch.from_numpy(a) for a in self.cycle_lrs],
                "cycle_records": self.cycle_records,
                "filter_current": self.filter_current,
            }
        )
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.cycle_lrs = [t.cpu().numpy() for t in state["cycle_lrs"]]
        self.cycle_records = list(state["cycle_records"])
        self.filter_current = state["filter_current"]


def _global_norm(ctx: TrainContext) -> float:
    """L2 norm over all model parameters (weights, biases, batch norm)."""
    with torch.no_grad():
        sq = sum(torch.sum(p.detach().float() ** 2) for p in ctx.model.parameters())
    return float(torch.sqrt(torch.as_tensor(sq)))


def _remaining(ctx: TrainContext) -> int:
    return int(sum(int(m.count_nonzero()) for m in ctx.masks.masks))


def _pruned_distance(ctx: TrainContext, new_masks: list[torch.Tensor]) -> float:
    """||theta - theta_pruned||_2: the norm of the weights the new masks remove."""
    with torch.no_grad():
        sq = sum(
            torch.sum((p.detach().float() * (1 - m.float())) ** 2)
            for p, m in zip(ctx.masks.params, new_masks, strict=True)
        )
    return float(torch.sqrt(torch.as_tensor(sq)))


def validate_parent(cfg: RunConfig) -> None:
    p = cfg.method.params
    check(p.parent_epochs > 0, "method.parent_epochs", p.parent_epochs, "an integer > 0")
    wd = p.parent_weight_decay
    check(wd is None or wd >= 0, "method.parent_weight_decay", wd, "a number >= 0, or unset")


def _validate_common(cfg: RunConfig, retrain_total: int) -> None:
    p = cfg.method.params
    RETRAIN_SCHEDULES.get(p.schedule, "method.schedule")
    CRITERIA.get(p.criterion, "method.criterion")
    multiple = getattr(p, "filter_multiple", 1)
    check(
        isinstance(multiple, int) and not isinstance(multiple, bool) and multiple >= 1,
        "method.filter_multiple",
        multiple,
        "an integer >= 1 (8 rounds kept filters to multiples of 8)",
    )
    check(
        multiple == 1 or p.structured,
        "method.filter_multiple",
        multiple,
        "1 unless method.structured = true (it rounds kept filters, which only filter pruning has)",
    )
    if p.schedule.startswith("tuned-"):
        check(p.initial_lr > 0, "method.initial_lr", p.initial_lr, f"> 0 for {p.schedule}")
    check(
        p.warmup_fraction in (0.0, 0.1),
        "method.warmup_fraction",
        p.warmup_fraction,
        "0 or 0.1",
    )
    cycles = cfg.budget.cycles
    if p.retrain_epochs:
        check(
            len(p.retrain_epochs) == cycles,
            "method.retrain_epochs",
            p.retrain_epochs,
            f"a list of budget.cycles = {cycles} positive integers",
        )
        check(
            all(e > 0 for e in p.retrain_epochs) and sum(p.retrain_epochs) == retrain_total,
            "method.retrain_epochs",
            p.retrain_epochs,
            f"positive integers summing to the retraining budget {retrain_total}",
        )
    elif cycles > retrain_total:
        raise ConfigError(
            "budget.cycles",
            cycles,
            f"at most the retraining epochs of the budget ({retrain_total}), "
            "so that every cycle retrains at least one epoch",
        )


@register_method
class IMP(PruneRetrain):
    """IMP from a trained dense parent: J prune-retrain cycles over ``budget.epochs`` epochs."""

    name = "imp"
    Params = IMPParams

    budget_fields = frozenset({"epochs", "cycles"})

    @classmethod
    def validate(cls, cfg: RunConfig) -> None:
        validate_parent(cfg)
        _validate_common(cfg, cfg.budget.epochs)

    def make_plan(self) -> CyclePlan:
        b = self.cfg.budget
        epochs = list(self.params.retrain_epochs) or split_epochs(b.epochs, b.cycles)
        return CyclePlan(0, epochs, cycle_targets(self.cfg.method.sparsity, b.cycles))

    def original_epochs(self) -> int:
        return self.params.parent_epochs

    def parent_config(self) -> RunConfig | None:
        return dense_parent(self.cfg, self.params.parent_epochs, self.params.parent_weight_decay)


@register_method
class BIMP(PruneRetrain):
    """Budgeted IMP: T0 epochs of linear-decay training, then J cycles in T - T0 epochs."""

    name = "bimp"
    Params = BIMPParams
    budget_fields = frozenset({"epochs", "initial_epochs", "cycles"})
    # The paper's grids (Appendix B.3): T0 and the number of equal-length cycles, plus the
    # weight decay and initial learning rate tuned for every method.
    presets = {
        "cifar10": {
            "budget.initial_epochs": [20, 60, 100],
            "budget.cycles": [1, 2, 3],
            "optim.weight_decay": [1e-4, 5e-4, 1e-3, 5e-3],
            "schedule.lr": [0.05, 0.1, 0.15, 0.2],
        },
        "cifar100": {
            "budget.initial_epochs": [20, 60, 100],
            "budget.cycles": [1, 2, 3, 4],
            "optim.weight_decay": [1e-4, 2e-4, 5e-4],
            "schedule.lr": [0.05, 0.1, 0.15],
        },
        "imagenet": {
            "budget.initial_epochs": [60, 75],
            "budget.cycles": [1, 2, 3],
        },
    }
    # As in the paper's overview table: T0 is its one extra hyperparameter, and as one budgeted
    # run it is listed as pruning stable and not sparsity agnostic.
    info = MethodInfo(
        sparsity_specifiable=True,
        pruning_stable=True,
        sparsity_agnostic=False,
        extra_hyperparameters=1,
        summary="budgeted IMP: T0 epochs linear-decay training, then J prune-retrain cycles",
    )

    @classmethod
    def validate(cls, cfg: RunConfig) -> None:
        b = cfg.budget
        check(
            0 < b.initial_epochs < b.epochs,
            "budget.initial_epochs",
            b.initial_epochs,
            f"an integer in [1, budget.epochs) = [1, {b.epochs}) for bimp (T0 < T)",
        )
        _validate_common(cfg, b.epochs - b.initial_epochs)

    def make_plan(self) -> CyclePlan:
        b = self.cfg.budget
        retrain = b.epochs - b.initial_epochs
        epochs = list(self.params.retrain_epochs) or split_epochs(retrain, b.cycles)
        return CyclePlan(
            b.initial_epochs, epochs, cycle_targets(self.cfg.method.sparsity, b.cycles)
        )

    def original_epochs(self) -> int:
        return self.cfg.budget.initial_epochs

    def translation_source(self, ctx: TrainContext) -> tuple[np.ndarray, int]:
        # BIMP's "original" schedule is its own initial linear decay.
        assert self.initial_lrs is not None
        return self.initial_lrs, 0
