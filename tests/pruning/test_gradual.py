"""The cubic gradual sparsity schedule shared by GMP and DPF."""

from __future__ import annotations

import pytest

from benchmark.core.errors import ConfigError
from benchmark.pruning.gradual import GradualSchedule, gradual_schedule


def test_interval_gives_steps_and_hand_computed_targets() -> None:
    # T = 8, I = 2: P_s = floor(8 / 2) - 1 = 3 steps at epochs 2, 4, 6; P_s I = 6.
    sched = gradual_schedule(8, 0.9, interval=2)
    assert (sched.interval, sched.steps, sched.epochs) == (2, 3, [2, 4, 6])
    assert sched.target(2) == pytest.approx(0.9 * (1 - (2 / 3) ** 3))  # 0.9 * 19/27
    assert sched.target(4) == pytest.approx(0.9 * 26 / 27)
    assert sched.target(6) == 0.9
    assert sched.target(0) == 0.0 and sched.target(8) == 0.9


def test_steps_are_the_papers_label_t_over_i() -> None:
    # The reference has only the interval I; the paper's "n pruning steps" is T / I.
    # T = 20, n = 10: I = 2, P_s = 9 steps at epochs 2, ..., 18: the goal at the end of epoch 18.
    sched = gradual_schedule(20, 0.5, steps=10)
    assert (sched.interval, sched.steps, sched.final_epoch) == (2, 9, 18)
    assert sched.epochs == list(range(2, 19, 2))
    assert sched.target(9) == pytest.approx(0.5 * (1 - 0.5**3))
    # The paper's grids: {20, 100} in 200 epochs, {5, 9, 18, 45} in 90 (ImageNet).
    cifar = {n: gradual_schedule(200, 0.9, steps=n) for n in (20, 100)}
    assert {n: (s.interval, s.final_epoch) for n, s in cifar.items()} == {
        20: (10, 190),
        100: (2, 198),
    }
    imagenet = {n: gradual_schedule(90, 0.9, steps=n) for n in (5, 9, 18, 45)}
    assert {n: (s.interval, s.final_epoch) for n, s in imagenet.items()} == {
        5: (18, 72),
        9: (10, 80),
        18: (5, 85),
        45: (2, 88),
    }


def test_default_prunes_after_every_epoch() -> None:
    sched = gradual_schedule(5, 0.8)
    assert (sched.interval, sched.steps, sched.epochs) == (1, 4, [1, 2, 3, 4])


FITTING = [(t, i) for t in (2, 3, 7, 10, 90, 200) for i in (1, 2, 5, 9) if t // i >= 2]


@pytest.mark.parametrize(("total", "interval"), FITTING)
def test_goal_is_reached_with_at_least_one_interval_left(total: int, interval: int) -> None:
    sched = gradual_schedule(total, 0.95, interval=interval)
    assert sched.final_epoch <= total - interval
    assert sched.target(sched.final_epoch) == 0.95
    targets = [sched.target(e) for e in sched.epochs]
    assert all(a < b for a, b in zip(targets, targets[1:], strict=False))


def test_current_target_is_the_last_pruning_epoch_passed() -> None:
    sched = GradualSchedule(final_sparsity=0.9, interval=2, steps=3)
    expected = [0.0, 0.0, sched.target(2), sched.target(2), sched.target(4), sched.target(4)]
    assert [sched.current_target(e) for e in range(6)] == expected
    assert sched.current_target(6) == sched.current_target(7) == 0.9
    assert [e for e in range(9) if sched.is_pruning_epoch(e)] == [2, 4, 6]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"steps": 6}, "method.steps"),  # I = floor(5 / 6) = 0: no step fits
        ({"steps": 1}, "method.steps"),  # I = 5: no step before the final interval
        ({"interval": 3}, "method.interval"),  # P_s = floor(5 / 3) - 1 = 0
        ({"steps": 2, "interval": 1}, "method.steps"),  # only one of the two
        ({"steps": -1}, "method.steps"),
        ({"interval": -2}, "method.interval"),
    ],
)
def test_invalid_schedules_name_the_field(kwargs: dict[str, int], field: str) -> None:
    with pytest.raises(ConfigError) as err:
        gradual_schedule(5, 0.9, **kwargs)
    assert err.value.field == field


def test_one_epoch_budget_cannot_prune_gradually() -> None:
    with pytest.raises(ConfigError, match="method.interval"):
        gradual_schedule(1, 0.9)
