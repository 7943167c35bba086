"""Whether a selection-criteria figure shows the paper's stated finding (its appendix "Pruning
selection criteria" prints no numbers for these figures, only findings):

- the selection-criteria figures: "the simple global selection criterion performs at least on
  par with the best out of all tested methods at any sparsity level". Per schedule (panel) and
  sparsity, global is on par when its mean is at or above the lowest seed of the best criterion
  there, or at most :data:`ON_PAR_IMAGES` test images below the best's mean (a difference the
  test split does not resolve: with two seeds, the lowest seed is often the mean);
- the layer-collapse figure (:data:`LAYER_COLLAPSE`): "layer collapse is clearly occurring [...]
  for the global selection criterion at sparsity levels above 99% in the One Shot setting, but
  disappears entirely when pruning iteratively". Per schedule, at the figure's highest sparsity,
  iterative global pruning avoids the collapse when every iterative seed ends above every One
  Shot seed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from benchmark.reporting.agreement import signed_points as signed

GLOBAL = "global"
ONE_SHOT = "One Shot"
# Test images by which global may trail the best criterion's mean and still count as on par: the
# issue 38 threshold for a difference that counts ("by more than two test images").
ON_PAR_IMAGES = 2.0
# The figures whose stated finding is the layer collapse (One Shot against iterative).
LAYER_COLLAPSE = ("appendix-distribution-layer-collapse",)


@dataclass(frozen=True)
class OnParVerdict:
    """One panel (a retraining schedule): at how many of its ``goals`` sparsities global is on par
    with the best criterion, and global minus the best where it trails most (``gap`` points, at
    ``gap_goal``; 0 where global is the best everywhere)."""

    section: str
    goals: int
    on_par: int
    gap: float
    gap_goal: float
    images: int | None = None

    @property
    def shows_shape(self) -> bool:
        """Global is on par with the best criterion at every sparsity of the panel."""
        return self.goals > 0 and self.on_par == self.goals

    def text(self) -> str:
        """``"FT: global on par with the best criterion at 3 of 3 sparsities ..."``."""
        verdict = "shows the paper's finding" if self.shows_shape else "does NOT show it"
        return (
            f"{self.section}: global on par with the best criterion (at or above the best's "
            f"lowest seed, or at most {ON_PAR_IMAGES:g} test images below its mean) at "
            f"{self.on_par} of {self.goals} sparsities; largest shortfall "
            f"{signed(self.gap, self.images)} at {self.gap_goal:g}%: {verdict}"
        )


@dataclass(frozen=True)
class CollapseVerdict:
    """One schedule at the figure's highest sparsity ``goal``: global's One Shot and iterative
    means and seed ranges (points), ``setting`` naming the iterative one."""

    schedule: str
    goal: float
    setting: str
    one_shot: float
    one_shot_max: float
    iterative: float
    iterative_min: float
    images: int | None = None

    @property
    def shows_shape(self) -> bool:
        """Every iterative seed ends above every One Shot seed: iterating avoids the loss."""
        return self.iterative_min > self.one_shot_max

    def text(self) -> str:
        """``"SLR at 99.5%: global One Shot 10.00%, Iterative (3 cycles) 82.92% ..."``."""
        verdict = "shows the paper's finding" if self.shows_shape else "does NOT show it"
        gain = signed(self.iterative - self.one_shot, self.images)
        return (
            f"{self.schedule} at {self.goal:g}%: global One Shot {self.one_shot:.2f}%, "
            f"{self.setting} {self.iterative:.2f}% ({gain}"
            f"; iterative's lowest seed {self.iterative_min:.2f}% vs One Shot's highest "
            f"{self.one_shot_max:.2f}%): {verdict}"
        )


def on_par_verdicts(best: pd.DataFrame, images: int | None = None) -> list[OnParVerdict]:
    """Per section of a criteria figure's selected points (``aggregate``'s frame: ``section``,
    ``row``, ``goal``, ``accuracy``, ``accuracy_min``): is global on par with the best criterion
    at each sparsity; sections without a global point claim nothing."""
    out = []
    for section, panel in best.groupby("section", sort=False):
        on_par, goals, gaps = 0, 0, []
        for goal, at in panel.groupby("goal", sort=True):
            mine = at[at["row"] == GLOBAL]
            if mine.empty or len(at) < 2:
                continue
            top = at.loc[at["accuracy"].idxmax()]
            gap = float(mine["accuracy"].iloc[0] - top["accuracy"])
            close = images is not None and -gap * images / 100 <= ON_PAR_IMAGES
            goals += 1
            on_par += bool(close or mine["accuracy"].iloc[0] >= top["accuracy_min"])
            gaps.append((gap, float(goal)))
        if goals:
            gap, goal = min(gaps)
            out.append(OnParVerdict(str(section), goals, on_par, gap, goal, images))
    return out


def collapse_verdicts(best: pd.DataFrame, images: int | None = None) -> list[CollapseVerdict]:
    """Per schedule of a layer-collapse figure (sections ``"<setting>, <schedule>"``): global One
    Shot against global iterative at the highest sparsity both reach."""
    mine = best[best["row"] == GLOBAL]
    parts = mine["section"].str.split(", ", n=1, expand=True)
    if mine.empty or parts.shape[1] < 2:
        return []
    mine = mine.assign(setting=parts[0], schedule=parts[1])
    out = []
    for schedule, at in mine.groupby("schedule", sort=False):
        shot = at[at["setting"] == ONE_SHOT].set_index("goal")
        iterated = at[at["setting"] != ONE_SHOT].set_index("goal")
        common = sorted(set(shot.index) & set(iterated.index))
        if not common:
            continue
        goal = common[-1]
        a, b = shot.loc[goal], iterated.loc[goal]
        out.append(
            CollapseVerdict(
                str(schedule),
                float(goal),
                str(b["setting"]),
                float(a["accuracy"]),
                float(a["accuracy_max"]),
                float(b["accuracy"]),
                float(b["accuracy_min"]),
                images,
            )
        )
    return out


def criteria_lines(experiment_id: str, best: pd.DataFrame, images: int | None) -> list[str]:
    """The agreement lines of a criteria figure (empty when nothing can be compared)."""
    verdicts: Sequence[OnParVerdict | CollapseVerdict]
    if experiment_id in LAYER_COLLAPSE:
        verdicts = collapse_verdicts(best, images)
        head = (
            "Agreement with the paper's finding (global pruning collapses One Shot at the highest "
            "sparsity, not iteratively):"
        )
    else:
        verdicts = on_par_verdicts(best, images)
        head = (
            "Agreement with the paper's finding (global is at least on par with the best "
            "criterion at every sparsity):"
        )
    if not verdicts:
        return []
    shown = sum(v.shows_shape for v in verdicts)
    panels = f"{len(verdicts)} panel{'s' * (len(verdicts) != 1)}"
    lines = [head, *(f"- {v.text()}" for v in verdicts)]
    return [*lines, f"Overall: the paper's finding in {shown} of {panels}."]
