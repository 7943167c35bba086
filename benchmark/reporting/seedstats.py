"""Statistics over seeds: mean, sample std, confidence intervals and significance vs the best.

Per cell (the configuration a table selected) the seeds' values give

* ``mean``, ``std`` (sample standard deviation, ddof = 1; NaN for one seed) and ``n``;
* a confidence interval for the mean at ``level`` (default 95%): Student's t by default,
  ``mean +- t_{(1+level)/2, n-1} * std / sqrt(n)``, or a percentile bootstrap of the mean
  (``scipy.stats.bootstrap``, seeded); with one seed there is no interval (NaN);
* a p-value against the best cell of its column (largest mean): a paired t-test
  (``scipy.stats.ttest_rel``) when both cells ran the same seeds, Welch's t-test
  (``scipy.stats.ttest_ind(equal_var=False)``) otherwise. Cells whose difference from the best
  is not significant at ``alpha = 1 - level`` get the mark ``≈``; cells that cannot be tested
  (fewer than two seeds) get ``?``.

With two seeds the t quantile is 12.7 (95%), so the intervals are very wide: that is what two
seeds can say, and the table shows it rather than hiding it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd
from scipy import stats

from benchmark.core.errors import ConfigError

CiMethod = Literal["t", "bootstrap"]
CI_METHODS: tuple[str, ...] = ("t", "bootstrap")
NOT_SIGNIFICANT = "≈"
UNTESTABLE = "?"
BOOTSTRAP_RESAMPLES = 9999


@dataclass(frozen=True)
class Summary:
    """Mean, sample std (ddof = 1), seed count and a confidence interval of the mean."""

    mean: float
    std: float
    n: int
    low: float
    high: float
    level: float
    method: str


def check_level(level: float, field: str = "--level") -> float:
    """Return ``level`` if it is a number strictly between 0 and 1, else raise ConfigError."""
    if not isinstance(level, int | float) or isinstance(level, bool) or not 0 < level < 1:
        raise ConfigError(field, level, "a number strictly between 0 and 1 (e.g. 0.95)")
    return float(level)


def summarize(
    values: Sequence[float], level: float = 0.95, method: CiMethod = "t", seed: int = 0
) -> Summary:
    """Mean, sample std, n and a ``level`` confidence interval (t or seeded bootstrap)."""
    check_level(level)
    if method not in CI_METHODS:
        raise ConfigError("--ci", method, f"one of {', '.join(CI_METHODS)}")
    x = np.asarray(values, dtype=float)
    n = len(x)
    if n == 0:
        raise ValueError("summarize() needs at least one value")
    mean = float(x.mean())
    if n < 2:
        return Summary(mean, math.nan, n, math.nan, math.nan, level, method)
    std = float(x.std(ddof=1))
    if std == 0:
        low = high = mean
    elif method == "t":
        low, high = stats.t.interval(level, n - 1, loc=mean, scale=std / math.sqrt(n))
    else:
        result = stats.bootstrap(
            (x,),
            np.mean,
            confidence_level=level,
            n_resamples=BOOTSTRAP_RESAMPLES,
            method="percentile",
            rng=np.random.default_rng(seed),
        )
        low, high = result.confidence_interval
    return Summary(mean, std, n, float(low), float(high), level, method)


def p_value(a: Mapping[int, float], b: Mapping[int, float]) -> tuple[float, str]:
    """Two-sided p-value of equal means of seed->value samples ``a`` and ``b``, and the test.

    Paired t-test when both hold the same seeds (at least two), Welch's t-test otherwise;
    NaN when either sample has fewer than two values. Samples without any spread compare
    exactly: p = 1 for equal means, 0 otherwise (scipy would return NaN).
    """
    paired = set(a) == set(b) and len(a) >= 2
    if paired:
        seeds = sorted(a)
        x = np.array([a[s] for s in seeds], dtype=float)
        y = np.array([b[s] for s in seeds], dtype=float)
        if np.all(x - y == (x - y)[0]):
            return (1.0 if x[0] == y[0] else 0.0), "paired"
        return float(stats.ttest_rel(x, y).pvalue), "paired"
    x = np.array(list(a.values()), dtype=float)
    y = np.array(list(b.values()), dtype=float)
    if len(x) < 2 or len(y) < 2:
        return math.nan, "none"
    if x.std() == 0 and y.std() == 0:
        return (1.0 if x[0] == y[0] else 0.0), "welch"
    return float(stats.ttest_ind(x, y, equal_var=False).pvalue), "welch"


def significance_marks(
    samples: Sequence[Mapping[int, float]], level: float = 0.95
) -> list[tuple[str, float]]:
    """Per sample: (mark, p-value vs the sample with the largest mean); the best gets ("", NaN).

    Mark ``≈``: not significantly different from the best at ``alpha = 1 - level``; ``?``:
    not testable (fewer than two seeds); "" otherwise (significantly worse).
    """
    check_level(level)
    if not samples:
        return []
    means = [float(np.mean(list(s.values()))) if s else -math.inf for s in samples]
    best = int(np.argmax(means))
    out: list[tuple[str, float]] = []
    for i, sample in enumerate(samples):
        if i == best:
            out.append(("", math.nan))
            continue
        p, _ = p_value(samples[best], sample)
        if math.isnan(p):
            out.append((UNTESTABLE, p))
        else:
            out.append((NOT_SIGNIFICANT if p >= 1 - level else "", p))
    return out


def caption(level: float, method: str) -> str:
    """The note a table with statistics carries: what the numbers and marks mean."""
    interval = (
        "Student-t interval"
        if method == "t"
        else f"percentile bootstrap interval ({BOOTSTRAP_RESAMPLES} resamples)"
    )
    pct = f"{100 * level:g}%"
    return (
        f"statistics: [low, high] is the {pct} {interval} of the mean over n seeds (sample std, "
        f"ddof = 1); {NOT_SIGNIFICANT} marks a value not significantly different from the best "
        f"of its column (two-sided t-test at alpha = {1 - level:.3g}: paired when both cells "
        f"ran the same seeds, else Welch's); {UNTESTABLE}: fewer than two seeds, not testable. "
        "With two seeds the t quantile is 12.7, so intervals are wide."
    )


def cell_samples(plan: pd.DataFrame, store: pd.DataFrame, best: pd.DataFrame, metric: str) -> dict:
    """Per selected configuration of ``best``: {seed: value of ``metric``} over its runs.

    Keys are (section, row, goal, budget) with the goal of ``best`` (methods without a goal
    sparsity take the column they were placed in).
    """
    from benchmark.reporting.selection import METRICS, join_store

    column, scale = METRICS[metric]
    joined = join_store(plan, store)
    done = joined[joined["done"]]
    groups = {
        key: frame
        for key, frame in done.groupby(
            ["section", "row", "budget", "x", "tuned"], dropna=False, sort=False
        )
    }
    out: dict[tuple, dict[int, float]] = {}
    for r in best.to_dict("records"):
        frame = groups.get((r["section"], r["row"], r["budget"], r["x"], r["tuned"]))
        if frame is None:
            continue
        goal = frame["goal"]
        frame = frame[goal.isna() | np.isclose(goal.fillna(-1.0), r["goal"])]
        values = (frame[column] * scale).to_numpy(dtype=float)
        key = (r["section"], r["row"], float(r["goal"]), r["budget"])
        out[key] = dict(zip(frame["seed"].astype(int), values, strict=True))
    return out
