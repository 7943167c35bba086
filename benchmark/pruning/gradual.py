"""The gradual sparsity schedule of Zhu and Gupta (2017), shared by GMP and DPF.

A run of T epochs prunes at the ends of the epochs e = I, 2I, ..., P_s I (1-based epoch counts,
i.e. after e epochs of training) and targets the sparsity

    s(e) = s_f * (1 - (1 - e / (P_s I))^3),

so the goal s_f is reached at epoch P_s I and at least I epochs train with the final mask.
The schedule is given by the pruning interval I, with P_s = floor(T / I) - 1, as in the paper's
code (ZIB-IOL/BIMP, ``GMP.pruning_interval``). The paper's grids name the number of "equally
distributed pruning steps" instead ({20, 100} for T = 200, {5, 9, 18, 45} for T = 90); that label
is T / I, so ``steps`` = n means I = floor(T / n): 100 steps in 200 epochs prune every 2 epochs
and reach the goal at epoch 198 (99 pruning steps), 45 steps in 90 epochs at epoch 88. This
module is pure: no torch, no state.
"""

from __future__ import annotations

from dataclasses import dataclass

from benchmark.core.errors import ConfigError

# The interval used when neither the number of steps nor the interval is given.
DEFAULT_INTERVAL = 1


@dataclass(frozen=True)
class GradualSchedule:
    """Pruning epochs and target sparsities of a cubic gradual pruning schedule."""

    final_sparsity: float
    interval: int
    steps: int

    @property
    def epochs(self) -> list[int]:
        """The pruning epochs I, 2I, ..., P_s I (pruning happens at the end of each)."""
        return [k * self.interval for k in range(1, self.steps + 1)]

    @property
    def final_epoch(self) -> int:
        """The epoch P_s I at whose end the goal sparsity is reached."""
        return self.steps * self.interval

    def target(self, epoch: int) -> float:
        """s(epoch): the cubic schedule after ``epoch`` epochs, clipped to [0, P_s I]."""
        if epoch >= self.final_epoch:
            return self.final_sparsity
        if epoch <= 0:
            return 0.0
        return self.final_sparsity * (1.0 - (1.0 - epoch / self.final_epoch) ** 3)

    def current_target(self, epochs_done: int) -> float:
        """The target of the last pruning epoch at or before ``epochs_done`` (0 before any)."""
        passed = min(epochs_done // self.interval, self.steps)
        return self.target(passed * self.interval) if passed > 0 else 0.0

    def is_pruning_epoch(self, epochs_done: int) -> bool:
        """Whether the schedule prunes at the end of the ``epochs_done``-th epoch."""
        return epochs_done in self.epochs


def steps_for_interval(total_epochs: int, interval: int) -> int:
    """P_s = floor(T / I) - 1: the number of steps that leave at least I final epochs."""
    return total_epochs // interval - 1


def interval_for_steps(total_epochs: int, steps: int) -> int:
    """I = floor(T / n) for the paper's step label n = T / I (the reference's interval)."""
    return total_epochs // steps


def gradual_schedule(
    total_epochs: int, final_sparsity: float, *, steps: int = 0, interval: int = 0
) -> GradualSchedule:
    """Build and validate the schedule for a T-epoch run; raise ConfigError naming the field.

    ``steps`` > 0 is the paper's step label T / I (the interval is floor(T / steps)),
    ``interval`` > 0 the epochs between pruning steps; at most one may be given, and neither
    means interval = DEFAULT_INTERVAL.
    """
    if steps < 0:
        raise ConfigError("method.steps", steps, "an integer >= 0 (0: derive from the interval)")
    if interval < 0:
        raise ConfigError("method.interval", interval, "an integer >= 0 (0: derive from steps)")
    if steps > 0 and interval > 0:
        raise ConfigError(
            "method.steps", steps, "0 when method.interval is set (give steps or interval)"
        )
    if steps > 0:
        if not 2 <= steps <= total_epochs:
            raise ConfigError(
                "method.steps",
                steps,
                f"an integer in [2, budget.epochs = {total_epochs}] (the paper's label T / I: "
                "the pruning interval is floor(budget.epochs / steps) epochs, and at least one "
                "pruning step must fit before the final interval)",
            )
        interval = interval_for_steps(total_epochs, steps)
    interval = interval or DEFAULT_INTERVAL
    derived_steps = steps_for_interval(total_epochs, interval)
    if derived_steps < 1:
        raise ConfigError(
            "method.interval",
            interval,
            f"at most budget.epochs / 2 = {total_epochs // 2}, so that at least one pruning "
            "step fits before the final interval",
        )
    return GradualSchedule(final_sparsity, interval, derived_steps)
