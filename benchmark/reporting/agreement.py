"""How far a reproduced table agrees with the paper's, per column: Kendall's tau between the
reproduced means and the published ones, and whether the paper's best row is within the
reproduction's top two.

A smoke-scale table (digits, a small CNN) cannot match the paper's numbers, only its ranking of
the rows; these lines say at once what it does and does not show. A tie in the reproduction counts
against the paper's best row (a column where every row prints the same would otherwise put it in
the top two for nothing), and the test split's size turns points into test images, the unit in
which a small test split resolves differences.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

ORDINALS = {1: "1st", 2: "2nd", 3: "3rd"}


@dataclass(frozen=True)
class ColumnAgreement:
    """One column's agreement with the paper.

    ``rows``: the rows with both a reproduced and a published mean (the ones compared).
    ``tau``, ``p``: Kendall's tau-b between the two sets of means and its two-sided p-value
    (``scipy.stats.kendalltau``); NaN with fewer than two rows or when either side is constant.
    ``best``: the paper's best row (higher is better; among rows the paper ties at the top, the
    one reproduced best). ``above`` / ``tied``: how many other compared rows the reproduction puts
    strictly above it / level with it. ``where`` names the column in text; ``key`` is its
    (section, goal sparsity, budget).
    """

    where: str
    rows: int
    tau: float
    p: float
    best: str
    above: int
    tied: int
    key: tuple[str, float | None, str] = ("", None, "")

    @property
    def top_two(self) -> bool:
        """The paper's best row is in the reproduction's top two, no tie doing the work."""
        return self.above + self.tied <= 1

    @property
    def top_two_by_ties(self) -> bool:
        """It is in the top two only if the rows level with it are ranked below it."""
        return not self.top_two and self.above <= 1

    def text(self) -> str:
        """``"sparsity 90%, budget 5%: tau +0.83 (p 0.02, 6 rows); the paper's best, ALLR, is
        1st here: in the top two"``."""
        tau = "n/a" if math.isnan(self.tau) else f"{self.tau:+.2f}"
        p = "" if math.isnan(self.p) else f"p {self.p:.2g}, "
        rank = ORDINALS.get(self.above + 1, f"{self.above + 1}th")
        tie = f", level with {self.tied} other row{'s' * (self.tied > 1)}" if self.tied else ""
        if self.top_two:
            verdict = "in the top two"
        elif self.top_two_by_ties:
            verdict = "in the top two only through a tie"
        else:
            verdict = "not in the top two"
        return (
            f"{self.where}: tau {tau} ({p}{self.rows} rows); the paper's best, {self.best}, is "
            f"{rank} here{tie}: {verdict}"
        )


def column_agreement(
    where: str,
    labels: Sequence[str],
    means: Sequence[float],
    paper: Sequence[float],
    key: tuple[str, float | None, str] = ("", None, ""),
) -> ColumnAgreement | None:
    """The agreement of one column whose rows ``labels`` have reproduced ``means`` and published
    ``paper`` means (NaN: not reported; such rows are left out); None when no row has both."""
    from scipy.stats import kendalltau

    pairs = [
        (label, float(m), float(q))
        for label, m, q in zip(labels, means, paper, strict=True)
        if not (math.isnan(m) or math.isnan(q))
    ]
    if not pairs:
        return None
    names, ours, theirs = zip(*pairs, strict=True)
    tau, p = (math.nan, math.nan)
    if len(pairs) >= 2 and len(set(ours)) > 1 and len(set(theirs)) > 1:
        result = kendalltau(ours, theirs)
        tau, p = float(result.statistic), float(result.pvalue)
    top = max(theirs)
    # Rows the paper ties at the top: the one reproduced best speaks for them.
    best = max((i for i, q in enumerate(theirs) if q == top), key=lambda i: ours[i])
    others = [m for i, m in enumerate(ours) if i != best]
    above = sum(m > ours[best] for m in others)
    tied = sum(m == ours[best] for m in others)
    return ColumnAgreement(where, len(pairs), tau, p, names[best], above, tied, key)


def split_size(plan: pd.DataFrame, store: pd.DataFrame) -> int | None:
    """The test-set size of the plan's finished runs (records keep ``test.n``), if they agree."""
    if "test.n" not in store or "run_id" not in store or "run_id" not in plan:
        return None
    sizes = store.loc[store["run_id"].isin(plan["run_id"]), "test.n"].dropna().unique()
    return int(sizes[0]) if len(sizes) == 1 else None


def signed_points(points: float, images: int | None) -> str:
    """``"+1.25 points (+4.5 test images)"``; points alone when the split's size is unknown."""
    text = f"{points:+.2f} points"
    return f"{text} ({points * images / 100:+.1f} test images)" if images else text


def top_two_text(column: ColumnAgreement) -> str:
    """ "yes", "tie" (only through a tie) or "no": the paper's best row in the top two."""
    return "yes" if column.top_two else "tie" if column.top_two_by_ties else "no"


def agreement_lines(columns: Sequence[ColumnAgreement], images: int | None) -> list[str]:
    """The lines printed under a table shown with the paper's numbers: a heading, one line per
    column, then the mean tau and the top-two count."""
    if not columns:
        return []
    unit = ""
    if images:
        unit = (
            f"; one point is {images / 100:.3g} test images ({images} in the test split, one "
            f"image {100 / images:.2g} points)"
        )
    lines = [
        "Agreement with the paper, per column: Kendall's tau-b between the means here and the "
        "paper's, and the rank here of the paper's best row (a tie counts against it)" + unit + ":"
    ]
    lines += [f"- {c.text()}" for c in columns]
    taus = [c.tau for c in columns if not math.isnan(c.tau)]
    mean = f"mean tau {sum(taus) / len(taus):+.2f} over {len(taus)} columns" if taus else "no tau"
    top = sum(c.top_two for c in columns)
    ties = sum(c.top_two_by_ties for c in columns)
    tie_text = f" (and {ties} more only through a tie)" if ties else ""
    lines.append(
        f"Overall: {mean}; the paper's best row in the top two in {top} of {len(columns)} "
        f"columns{tie_text}."
    )
    return lines


# A table ranks its rows like the paper when the columns agree on average (mean tau at least
# this) and the paper's best row is in the top two here in at least half of the columns.
RANKS_LIKE_TAU = 0.5


def verdict_lines(columns: Sequence[ColumnAgreement], scale: str) -> list[str]:
    """One line closing the agreement lines: whether the table ranks its rows like the paper
    (mean tau >= RANKS_LIKE_TAU and the paper's best row in the top two in half the columns)."""
    if not columns:
        return []
    taus = [c.tau for c in columns if not math.isnan(c.tau)]
    mean = sum(taus) / len(taus) if taus else math.nan
    top = sum(c.top_two for c in columns)
    if taus and mean >= RANKS_LIKE_TAU and 2 * top >= len(columns):
        return [
            f"Verdict: ranks rows like the paper (mean tau {mean:+.2f} >= {RANKS_LIKE_TAU}, "
            f"the paper's best in the top two in {top} of {len(columns)} columns)."
        ]
    advice = ": use --scale paper" if scale == "smoke" else ""
    return [
        f"Verdict: does not rank rows like the paper at this scale{advice} (needs mean tau >= "
        f"{RANKS_LIKE_TAU} and the paper's best in the top two in at least half the columns)."
    ]
