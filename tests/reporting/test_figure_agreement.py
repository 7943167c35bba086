"""Whether a figure shows the paper's shape: an envelope's Spearman over budgets and its gap to
Renda et al., a schedule comparison's agreement with the paper's table, and no claim at all for a
figure without the paper's numbers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from benchmark.bench.tables import synthetic_store
from benchmark.experiments import get_experiment
from benchmark.experiments.figure_specs import RENDA_ROW
from benchmark.reporting.criteria_agreement import collapse_verdicts, on_par_verdicts
from benchmark.reporting.figure_agreement import (
    NO_CLAIM,
    envelope_verdicts,
    figure_agreement,
    schedule_verdicts,
)

BUDGETS = [1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 10.0, 12.0, 20.0, 30.0]


def _envelope(means: list[float], renda: tuple[float, float] | None, goal: float = 90.0):
    """The selected points of one envelope panel (``aggregate``'s columns), and Renda et al.'s
    (mean, lowest seed)."""
    rows = [
        {"goal": goal, "row": "ALLR", "section": "ALLR", "x": x, "accuracy": m, "accuracy_min": m}
        for x, m in zip(BUDGETS, means, strict=True)
    ]
    if renda is not None:
        rows.append(
            {"goal": goal, "row": RENDA_ROW, "section": "reference", "x": 0.0,
             "accuracy": renda[0], "accuracy_min": renda[1]}
        )  # fmt: skip
    return pd.DataFrame(rows)


def test_a_rising_envelope_that_meets_renda_shows_the_shape():
    rising = list(np.linspace(80.0, 97.5, len(BUDGETS)))
    (verdict,) = envelope_verdicts(_envelope(rising, (97.8, 97.2)), images=360)
    assert verdict.rho == pytest.approx(1.0) and verdict.rises
    assert verdict.meets_renda and verdict.shows_shape
    # 97.5 - 97.8 = -0.3 points = -1.1 of 360 test images
    assert "-0.30 points (-1.1 test images) vs Renda et al." in verdict.text()
    assert verdict.text().endswith(": shows the paper's shape")


def test_a_flat_envelope_does_not_show_the_shape_even_when_it_meets_renda():
    noisy = [98.9, 99.0, 98.8, 98.8, 99.0, 98.9, 98.8, 99.0, 98.9, 98.8]
    (verdict,) = envelope_verdicts(_envelope(noisy, (98.9, 98.6)))
    assert abs(verdict.rho) < 0.8 and not verdict.rises and verdict.meets_renda
    assert not verdict.shows_shape and "does not rise: below 0.8" in verdict.text()
    (constant,) = envelope_verdicts(_envelope([98.0] * len(BUDGETS), None))
    assert np.isnan(constant.rho) and not constant.shows_shape
    assert constant.meets_renda is None and "n/a (flat)" in constant.text()


def test_a_rising_envelope_below_renda_s_lowest_seed_falls_short():
    rising = list(np.linspace(60.0, 90.0, len(BUDGETS)))
    (verdict,) = envelope_verdicts(_envelope(rising, (97.0, 96.0)), images=360)
    assert verdict.rises and verdict.meets_renda is False and not verdict.shows_shape
    assert "falls short of its seeds' spread" in verdict.text()


def _schedules(goal: float, means: dict[str, float]) -> pd.DataFrame:
    """Two budgets per schedule; the smaller (x = 1) holds ``means``."""
    return pd.DataFrame(
        [
            {"goal": goal, "row": r, "section": r, "x": x, "accuracy": m + (x - 1)}
            for r, m in means.items()
            for x in (1.0, 2.0)
        ]
    )


def test_a_schedule_comparison_is_ranked_against_the_papers_column():
    paper = pd.DataFrame(
        {"row": ["FT", "LRW", "LLR", "ALLR"], "sparsity": 90, "budget": "2.22%",
         "metric": "accuracy", "mean": [56.75, 56.75, 68.90, 69.56]}
    )  # fmt: skip
    same = _schedules(90.0, {"FT": 85.0, "LRW": 85.5, "LLR": 89.0, "ALLR": 92.0})
    (verdict,) = schedule_verdicts(same, paper, "2.22%", images=360)
    assert verdict.best == "ALLR" and verdict.rank == 1 and verdict.shows_shape
    assert verdict.worst == "FT" and verdict.lead == pytest.approx(7.0)
    assert verdict.paper_lead == pytest.approx(69.56 - 56.75) and verdict.tau > 0.8
    assert "+7.00 points (+25.2 test images) above FT" in verdict.text()
    reverse = _schedules(90.0, {"FT": 92.0, "LRW": 91.0, "LLR": 89.0, "ALLR": 85.0})
    (against,) = schedule_verdicts(reverse, paper, "2.22%")
    assert against.rank == 4 and against.lead < 0 and not against.shows_shape
    assert "does NOT show it" in against.text()
    # A sparsity the paper's table does not have claims nothing.
    assert schedule_verdicts(_schedules(50.0, {"FT": 1.0, "ALLR": 2.0}), paper, "2.22%") == []


@pytest.mark.parametrize(
    "name", ["appendix-cifar10-budgeted-initial-ALLR", "appendix-cifar10-budgeted-initial-LLR"]
)
def test_a_figure_without_the_papers_numbers_claims_nothing(name, tmp_path):
    experiment = get_experiment(name)
    plan = experiment.plan("smoke", tmp_path)
    lines = figure_agreement(experiment, plan, synthetic_store(plan))
    assert lines == [NO_CLAIM]
    assert "shows the paper's shape" not in NO_CLAIM and "NOT" not in NO_CLAIM


@pytest.mark.parametrize(
    ("name", "head", "panels"),
    [
        ("cifar10-envelope", "Spearman >= 0.8", 2),
        ("imagenet-IMP-envelope", "appendix-schedule-comparison-imagenet", 2),
    ],
)
def test_the_envelopes_say_per_sparsity_whether_they_show_the_shape(name, head, panels, tmp_path):
    experiment = get_experiment(name)
    plan = experiment.plan("smoke", tmp_path)
    lines = figure_agreement(experiment, plan, synthetic_store(plan))
    assert head in lines[0] and len(lines) == panels + 2
    assert all(line.startswith("- sparsity ") for line in lines[1:-1])
    assert lines[-1].startswith("Overall: the paper's shape in ")
    assert figure_agreement(experiment, plan, synthetic_store(plan).iloc[:0]) == []


def _criteria(section: str, goal: float, points: dict[str, tuple[float, float, float]]):
    """A criteria panel's selected points: row -> (mean, lowest seed, highest seed)."""
    return [
        {"section": section, "row": r, "goal": goal, "x": 0.0, "accuracy": m,
         "accuracy_min": lo, "accuracy_max": hi}
        for r, (m, lo, hi) in points.items()
    ]  # fmt: skip


def test_global_is_on_par_when_within_the_best_s_spread_or_two_test_images():
    rows = _criteria("FT", 80.0, {"global": (98.0, 97.5, 98.5), "erk": (98.5, 98.3, 98.7)})
    rows += _criteria("FT", 90.0, {"global": (97.15, 96.0, 98.0), "lamp": (97.2, 97.1, 97.3)})
    # SLR: global 5 test images below the best's mean and below its lowest seed at 90%.
    rows += _criteria("SLR", 90.0, {"global": (95.0, 94.0, 96.0), "erk": (96.4, 96.2, 96.6)})
    ft, slr = on_par_verdicts(pd.DataFrame(rows), images=360)
    assert (ft.goals, ft.on_par) == (2, 2) and ft.shows_shape
    assert ft.gap == pytest.approx(-0.5) and ft.gap_goal == 80.0
    assert (slr.goals, slr.on_par) == (1, 0) and not slr.shows_shape
    assert "-1.40 points (-5.0 test images) at 90%: does NOT show it" in slr.text()
    # Without the split's size only the spread counts: at 80% global is below erk's lowest seed.
    unknown, _ = on_par_verdicts(pd.DataFrame(rows))
    assert unknown.on_par == 1 and not unknown.shows_shape


def test_layer_collapse_is_avoided_when_every_iterative_seed_ends_above_one_shot():
    rows = []
    for schedule, iterative in (("SLR", (80.0, 70.0, 90.0)), ("FT", (10.5, 10.0, 11.0))):
        for goal, one_shot in ((98.0, (90.0, 89.0, 91.0)), (99.5, (10.0, 9.7, 10.3))):
            rows += _criteria(f"One Shot, {schedule}", goal, {"global": one_shot})
            rows += _criteria(f"Iterative (3 cycles), {schedule}", goal, {"global": iterative})
    slr, ft = collapse_verdicts(pd.DataFrame(rows), images=360)
    assert slr.goal == 99.5 and slr.one_shot == 10.0 and slr.iterative_min == 70.0
    assert slr.shows_shape and "+70.00 points (+252.0 test images)" in slr.text()
    assert ft.schedule == "FT" and not ft.shows_shape and "does NOT show it" in ft.text()


@pytest.mark.parametrize(
    ("name", "panels"),
    [("appendix-confidence-cifar10-oneshot", 2), ("appendix-distribution-layer-collapse", 2)],
)
def test_the_criteria_figures_state_their_finding_per_schedule(name, panels, tmp_path):
    experiment = get_experiment(name)
    plan = experiment.plan("smoke", tmp_path)
    lines = figure_agreement(experiment, plan, synthetic_store(plan))
    assert lines[0].startswith("Agreement with the paper's finding") and len(lines) == panels + 2
    assert lines[-1].startswith("Overall: the paper's finding in ")
