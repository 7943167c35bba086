"""The baseline of Renda et al. (2020): prune 20% of the remaining weights per cycle and retrain
T_orig epochs with LRW each cycle, until the goal sparsity is reached (``renda``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from benchmark.config.run import RunConfig, check
from benchmark.pruning import CRITERIA
from methods.base import MethodInfo, dense_parent, register_method
from methods.bimp import CyclePlan, PruneRetrain, validate_parent


@dataclass
class RendaParams:
    """Hyperparameters of the Renda et al. baseline.

    Attributes:
        criterion: which weights each cycle prunes (as IMP's criterion)
        prune_fraction: fraction of the remaining weights each cycle prunes, until the goal
        parent_epochs: epochs of the dense parent; also the retraining epochs of every cycle
            (LRW rewinds to the parent's schedule)
        parent_weight_decay: weight decay of the dense parent; unset: the run's
            optim.weight_decay
        cycles: the number of prune-retrain cycles; 0 (default): as many as pruning
            prune_fraction per cycle needs, ceil(log(1 - s) / log(1 - prune_fraction)). With
            fewer, the last cycle prunes what is left to reach s (the paper's 10 cycles at 90%)
    """

    criterion: str = "global"
    prune_fraction: float = 0.2
    parent_epochs: int = 10
    parent_weight_decay: float | None = None
    cycles: int = 0


def derived_cycles(sparsity: float, fraction: float) -> int:
    """The cycles pruning ``fraction`` of the remaining weights each needs to reach ``sparsity``:
    ceil(log(1 - s) / log(1 - fraction)), at least 1."""
    return max(1, math.ceil(math.log(1 - sparsity) / math.log(1 - fraction) - 1e-9))


@register_method
class Renda(PruneRetrain):
    """Renda et al. (2020): prune 20% of what remains per cycle, retrain T_orig epochs (LRW).

    The number of cycles follows from the goal sparsity (``budget.epochs`` and ``budget.cycles``
    are not used): J = ceil(log(1 - s) / log(1 - prune_fraction)), or ``method.cycles`` when
    set (at most that J, so that every cycle prunes); the last cycle prunes what is left to
    reach exactly s.
    """

    name = "renda"
    Params = RendaParams
    info = MethodInfo(
        sparsity_specifiable=True,
        pruning_stable=False,
        sparsity_agnostic=True,
        extra_hyperparameters=0,
        summary="Renda et al. baseline: prune 20% per cycle, retrain T_orig epochs with LRW",
    )
    budget_fields: frozenset[str] = frozenset()

    @classmethod
    def validate(cls, cfg: RunConfig) -> None:
        p = cfg.method.params
        check(0 < p.prune_fraction < 1, "method.prune_fraction", p.prune_fraction, "(0, 1)")
        validate_parent(cfg)
        check(cfg.method.sparsity > 0, "method.sparsity", cfg.method.sparsity, "(0, 1) for renda")
        CRITERIA.get(p.criterion, "method.criterion")
        derived = derived_cycles(cfg.method.sparsity, p.prune_fraction)
        whole = isinstance(p.cycles, int) and not isinstance(p.cycles, bool)
        check(
            whole and 0 <= p.cycles <= derived,
            "method.cycles",
            p.cycles,
            f"an integer in [1, {derived}] (more would leave a cycle without pruning at "
            f"method.sparsity = {cfg.method.sparsity}), or 0 for {derived}",
        )

    def make_plan(self) -> CyclePlan:
        s, f = self.cfg.method.sparsity, self.params.prune_fraction
        cycles = self.params.cycles or derived_cycles(s, f)
        targets = [min(1 - (1 - f) ** (j + 1), s) for j in range(cycles)]
        targets[-1] = s
        return CyclePlan(0, [self.params.parent_epochs] * cycles, targets)

    def schedule_kind(self) -> str:
        return "LRW"

    def original_epochs(self) -> int:
        return self.params.parent_epochs

    def parent_config(self) -> RunConfig | None:
        return dense_parent(self.cfg, self.params.parent_epochs, self.params.parent_weight_decay)
