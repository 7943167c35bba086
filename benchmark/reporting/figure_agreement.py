"""Whether a figure shows the paper's shape, in one number per panel and a plain verdict.

- An envelope against Renda et al. (``cifar10-envelope`` and its appendix twins): per sparsity,
  Spearman's rho between the total retraining budget and the mean test accuracy of the selected
  configuration (it shows the paper's shape when rho >= :data:`RISING_RHO`), and the gap between
  the envelope at its largest budget and Renda et al., in test images; the envelope meets the
  baseline when it ends at or above the lowest of Renda et al.'s seeds.
- A comparison of retraining schedules whose paper figure has a table behind it
  (:data:`PAPER_COLUMNS`): per sparsity, at the smallest budget, Kendall's tau between the
  schedules' means here and the table's, the rank here of the paper's best schedule, and that
  schedule's lead over the paper's worst, here and in the paper.
- A selection-criteria figure: its stated finding
  (:mod:`benchmark.reporting.criteria_agreement`).
- Any other figure claims nothing: no line says it shows (or misses) the paper's shape.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from benchmark.experiments.base import Experiment
from benchmark.experiments.figure_specs import DENSE_ROW, RENDA_ROW
from benchmark.reporting.agreement import column_agreement, signed_points, split_size
from benchmark.reporting.criteria_agreement import criteria_lines
from benchmark.reporting.selection import aggregate

# Spearman's rho over the budgets from which an envelope counts as rising with the budget.
RISING_RHO = 0.8
# Figures whose paper version has an appendix table behind it: figure id -> (the table, the
# budget label of the smallest One Shot budget the figure draws). ResNet-50/ImageNet's envelope
# draws the runs of the One Shot and iterative ImageNet tables; its smallest budget is 2.22%.
PAPER_COLUMNS: dict[str, tuple[str, str]] = {
    "imagenet-IMP-envelope": ("appendix-schedule-comparison-imagenet", "2.22%"),
}
NO_CLAIM = (
    "Agreement with the paper: not computed (the paper prints no numbers for this figure and no "
    "check of its stated finding is implemented), so this figure claims neither way."
)


@dataclass(frozen=True)
class EnvelopeVerdict:
    """One panel of an envelope: does accuracy rise with the budget, does it reach Renda et al.

    ``rho``: Spearman's rho of budget and mean accuracy over ``budgets`` points (NaN when either
    is constant: a flat envelope). ``gap``: the envelope's mean at its largest budget minus
    Renda et al.'s mean, in points (None without a Renda et al. point); ``renda_min``: the
    lowest of Renda et al.'s seeds. ``images``: the test split's size (None: unknown).
    """

    goal: float
    budgets: int
    rho: float
    last: float
    gap: float | None = None
    renda_min: float | None = None
    images: int | None = None

    @property
    def rises(self) -> bool:
        """Accuracy rises with the budget (rho at least :data:`RISING_RHO`)."""
        return not math.isnan(self.rho) and self.rho >= RISING_RHO

    @property
    def meets_renda(self) -> bool | None:
        """The envelope ends at or above the lowest of Renda et al.'s seeds (None: no baseline)."""
        if self.gap is None or self.renda_min is None:
            return None
        return self.last >= self.renda_min

    @property
    def shows_shape(self) -> bool:
        """Rising, and meeting Renda et al. where the figure has the baseline."""
        return self.rises and self.meets_renda is not False

    def text(self) -> str:
        """``"sparsity 90%: Spearman(budget, accuracy) +0.95 over 10 budgets (rises); ..."``."""
        rho = "n/a (flat)" if math.isnan(self.rho) else f"{self.rho:+.2f}"
        rise = "rises" if self.rises else f"does not rise: below {RISING_RHO}"
        out = f"sparsity {self.goal:g}%: Spearman(budget, accuracy) {rho} over {self.budgets} "
        out += f"budgets ({rise})"
        if self.gap is not None:
            reach = "meets" if self.meets_renda else "falls short of"
            out += (
                f"; at the largest budget {signed_points(self.gap, self.images)} vs {RENDA_ROW} "
                f"({reach} its seeds' spread)"
            )
        verdict = "shows the paper's shape" if self.shows_shape else "does NOT show it"
        return f"{out}: {verdict}"


@dataclass(frozen=True)
class ScheduleVerdict:
    """One panel of a schedule comparison at its smallest budget, against the paper's table.

    ``tau``/``best``/``rank``: Kendall's tau with the paper's means, the paper's best schedule
    and its rank here (1 = best). ``lead``/``paper_lead``: the paper's best minus the paper's
    worst schedule (``worst``), here and in the paper, in points.
    """

    goal: float
    budget: float
    paper_where: str
    tau: float
    best: str
    rank: int
    worst: str
    lead: float
    paper_lead: float
    images: int | None = None

    @property
    def shows_shape(self) -> bool:
        """The paper's best schedule is in the top two here and leads its worst one."""
        return self.rank <= 2 and self.lead > 0

    def text(self) -> str:
        """``"sparsity 90%, 1 epoch vs the paper's 90%, 2.22%: tau +0.60; ..."``."""
        tau = "n/a" if math.isnan(self.tau) else f"{self.tau:+.2f}"
        verdict = "shows the paper's shape" if self.shows_shape else "does NOT show it"
        return (
            f"sparsity {self.goal:g}%, smallest budget ({self.budget:g} "
            f"epoch{'s' * (self.budget != 1)}) vs the paper's "
            f"{self.paper_where}: tau {tau}; the paper's best, {self.best}, is #{self.rank} here "
            f"and {signed_points(self.lead, self.images)} above {self.worst} (paper: "
            f"{self.paper_lead:+.2f} points): {verdict}"
        )


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rho of ``x`` and ``y`` (NaN with fewer than 3 points or a constant side)."""
    from scipy.stats import spearmanr

    if len(x) < 3 or len(set(x)) < 2 or len(set(y)) < 2:
        return math.nan
    return float(spearmanr(x, y).statistic)


def envelope_verdicts(best: pd.DataFrame, images: int | None = None) -> list[EnvelopeVerdict]:
    """One verdict per goal sparsity of an envelope's selected points (``aggregate``'s frame:
    ``goal``, ``row``, ``x``, ``accuracy``, ``accuracy_min``); Renda et al.'s is the baseline."""
    out = []
    for goal, at in best.groupby("goal", sort=True):
        curve = at[~at["row"].isin([RENDA_ROW, DENSE_ROW])].groupby("x")["accuracy"].max()
        if curve.empty:
            continue
        renda = at[at["row"] == RENDA_ROW]
        gap = renda_min = None
        if len(renda):
            gap = float(curve.iloc[-1] - renda["accuracy"].iloc[0])
            renda_min = float(renda["accuracy_min"].iloc[0])
        rho = spearman(list(curve.index), list(curve.values))
        last = float(curve.iloc[-1])
        out.append(EnvelopeVerdict(float(goal), len(curve), rho, last, gap, renda_min, images))
    return out


def schedule_verdicts(
    best: pd.DataFrame, paper: pd.DataFrame, budget: str, images: int | None = None
) -> list[ScheduleVerdict]:
    """Per goal sparsity, the schedules at the smallest budget (``x``) against the paper's
    column at that sparsity and ``budget`` (a long table of ``load_paper_table``); sparsities
    the paper's table lacks claim nothing."""
    out = []
    ours = best[best["section"] != "reference"]
    for goal, at in ours.groupby("goal", sort=True):
        smallest = at[at["x"] == at["x"].min()].set_index("row")["accuracy"]
        column = paper[
            (paper["sparsity"].astype(float) == float(goal))
            & (paper["budget"] == budget)
            & (paper["metric"] == "accuracy")
        ].set_index("row")["mean"]
        rows = [r for r in smallest.index if r in column.index and not math.isnan(column[r])]
        if len(rows) < 2:
            continue
        means = [float(smallest[r]) for r in rows]
        published = [float(column[r]) for r in rows]
        agree = column_agreement(f"{goal:g}%", rows, means, published)
        if agree is None:
            continue
        worst = min(rows, key=lambda r: (column[r], smallest[r]))
        out.append(
            ScheduleVerdict(
                float(goal),
                float(at["x"].min()),
                f"{goal:g}%, {budget}",
                agree.tau,
                agree.best,
                agree.above + agree.tied + 1,
                worst,
                float(smallest[agree.best] - smallest[worst]),
                float(column[agree.best] - column[worst]),
                images,
            )
        )
    return out


def figure_agreement(experiment: Experiment, plan: pd.DataFrame, store: pd.DataFrame) -> list[str]:
    """The lines saying whether ``experiment``'s figure from ``store`` shows the paper's shape
    (:data:`NO_CLAIM` alone for a figure without a check; none before any run finished)."""
    if experiment.plot not in ("envelope", "criteria"):
        return [NO_CLAIM]
    best, _ = aggregate(plan, store)
    if best.empty:
        return []
    images = split_size(plan, store)
    if experiment.plot == "criteria":
        return criteria_lines(experiment.id, best, images) or [NO_CLAIM]
    if experiment.id in PAPER_COLUMNS:
        from benchmark.experiments.paper_numbers import load_paper_table

        table, budget = PAPER_COLUMNS[experiment.id]
        verdicts: Sequence[EnvelopeVerdict | ScheduleVerdict] = schedule_verdicts(
            best, load_paper_table(table), budget, images
        )
        head = f"Agreement with the paper (its table {table}, smallest budget):"
    elif (plan["row"] == RENDA_ROW).any():
        verdicts = envelope_verdicts(best, images)
        head = (
            f"Agreement with the paper's shape (accuracy rises with the budget: Spearman >= "
            f"{RISING_RHO}; the envelope meets {RENDA_ROW}):"
        )
    else:
        return [NO_CLAIM]
    if not verdicts:
        return [NO_CLAIM]
    shown = sum(v.shows_shape for v in verdicts)
    lines = [head, *(f"- {v.text()}" for v in verdicts)]
    panels = f"{len(verdicts)} panel{'s' * (len(verdicts) != 1)}"
    lines.append(f"Overall: the paper's shape in {shown} of {panels}.")
    return lines
