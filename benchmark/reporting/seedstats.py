"""Statistics over seeds: mean, sample std, confidence intervals and "worse than the best" marks.

Per cell (the configuration a table selected) the seeds' values give

* ``mean``, ``std`` (sample standard deviation, ddof = 1; NaN for one seed) and ``n``;
* a confidence interval for the mean at ``level`` (default 95%): Student's t by default,
  ``mean +- t_{(1+level)/2, n-1} * std / sqrt(n)`` (the quantile is 12.71 at n = 2 and 4.30 at
  n = 3 for 95%, 6.31 and 2.92 for 90%), or a percentile bootstrap of the mean
  (``scipy.stats.bootstrap``, seeded), which is refused below :data:`BOOTSTRAP_MIN_SEEDS` seeds
  (at n = 2 it is exactly [min, max] and covers the mean about half the time) and flagged as
  under-covering below :data:`BOOTSTRAP_FLAG_SEEDS`. One seed, or seeds without any spread,
  give no interval;
* the mark :data:`WORSE` when the cell is significantly below the best cell of its column (the
  largest mean among cells with at least two seeds and no NaN value), with the family-wise
  error rate of the whole column at most ``alpha = 1 - level``: two-sided t-tests between
  *every* pair of cells of the column (paired on shared seeds, Welch's otherwise), Holm's
  step-down over all of them, and a cell marked when its pair with the best is rejected.

Why every pair and not only the pairs with the best: the best is chosen after looking at the
means, so its comparisons are not a fixed family. Holm over only those has a family-wise error
of 6-9% with 7-9 truly equal rows and 2-3 seeds (simulated); over every pair it is valid for
whichever cell turns out best, and needs no equal-variance assumption (which the paper's own
columns contradict). The price is power: with 2-3 seeds only very large gaps are marked. An
unmarked cell was *not shown different* with its seeds; it is not shown equivalent.
``?`` marks a cell that cannot be tested, with the reason in the CSV (one seed, no spread, a
NaN value).

Accuracies count test images: k/N * 100 carries float rounding, so two gaps of the same
number of images differ by ~1e-14 and a constant gap would look like a paired sample with a
tiny but nonzero spread (p ~ 1e-16). The marks are therefore decided on whole test images when
the test size is known (``resolution``: the metric's value of one test image, 100/N), and
otherwise with spreads below :data:`FLOAT_TOLERANCE` (relative) counted as none.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Literal

import numpy as np
import pandas as pd

from benchmark.core.errors import ConfigError


def _stats() -> ModuleType:
    """scipy.stats, imported on first use."""
    # scipy.stats costs ~0.5 s to import: only tables with seeds to compare pay for it.
    from scipy import stats

    return stats


CiMethod = Literal["t", "bootstrap"]
CI_METHODS: tuple[str, ...] = ("t", "bootstrap")
WORSE = "↓"
UNTESTABLE = "?"
BOOTSTRAP_RESAMPLES = 9999
# Below 10 seeds the percentile bootstrap is refused: simulated coverage of a nominal 95%
# interval is 50% at n = 2, 75% at n = 3, 83% at n = 5; below 30 it is flagged (91% at n = 10,
# 93% at n = 20; normal data, 4,000 samples each, /tmp/research/sim26.py).
BOOTSTRAP_MIN_SEEDS = 10
# Relative spread below which seeds count as equal when no test size is known: float rounding
# of k/N is ~1e-16 relative, one image of ImageNet's 50,000-image validation set 2e-5.
FLOAT_TOLERANCE = 1e-9
BOOTSTRAP_FLAG_SEEDS = 30

# Why a cell carries ``?`` (the CSV's ``untestable`` column).
ONE_SEED = "one seed"
NO_SPREAD = "no spread between seeds"
NAN_VALUE = "NaN value"
BEST_ONE_SEED = "highest mean, but one seed"


@dataclass(frozen=True)
class Summary:
    """Mean, sample std (ddof = 1), seed count and a confidence interval of the mean.

    ``low``/``high`` are NaN without an interval: one seed, or ``spread`` False (every seed gave
    the same value, so the data say nothing about the seed-to-seed variation).
    """

    mean: float
    std: float
    n: int
    low: float
    high: float
    level: float
    method: str
    spread: bool = True


@dataclass(frozen=True)
class Mark:
    """The statistics of one cell against the best of its column.

    ``mark``: :data:`WORSE`, :data:`UNTESTABLE` or "" (the best, or not shown different);
    ``p``: raw two-sided p-value of its pair with the best; ``p_holm``: Holm-adjusted over all
    pairs of the column; ``test``: "paired", "welch" or "none"; ``untestable``: why ``?``.
    """

    mark: str
    p: float
    p_holm: float
    test: str
    untestable: str = ""


def check_level(level: float, field: str = "--level") -> float:
    """Return ``level`` if it is a number strictly between 0 and 1, else raise ConfigError."""
    if not isinstance(level, int | float) or isinstance(level, bool) or not 0 < level < 1:
        raise ConfigError(field, level, "a number strictly between 0 and 1 (e.g. 0.95)")
    return float(level)


def check_method(method: str, seed_counts: Iterable[int] = ()) -> str:
    """Return ``method`` if it is a CI method usable with cells of ``seed_counts`` seeds.

    Raises ConfigError naming ``--ci`` for an unknown method, or for the bootstrap when any
    cell has fewer than :data:`BOOTSTRAP_MIN_SEEDS` seeds.
    """
    if method not in CI_METHODS:
        raise ConfigError("--ci", method, f"one of {', '.join(CI_METHODS)}")
    counts = [int(n) for n in seed_counts]
    if method == "bootstrap" and counts and min(counts) < BOOTSTRAP_MIN_SEEDS:
        raise ConfigError(
            "--ci",
            method,
            f"t (the default): the percentile bootstrap needs at least {BOOTSTRAP_MIN_SEEDS} "
            f"seeds per cell and a cell here has {min(counts)}; with 2 seeds it is [min, max] "
            "and covers the mean about 50% of the time, 75% with 3 (nominal 95%)",
        )
    return method


def t_quantile(level: float, n: int) -> float:
    """The Student-t quantile of a two-sided ``level`` interval from ``n`` seeds (NaN: n < 2)."""
    return float(_stats().t.ppf((1 + level) / 2, n - 1)) if n >= 2 else math.nan


def summarize(
    values: Sequence[float], level: float = 0.95, method: CiMethod = "t", seed: int = 0
) -> Summary:
    """Mean, sample std, n and a ``level`` confidence interval (t or seeded bootstrap)."""
    check_level(level)
    x = np.asarray(values, dtype=float)
    n = len(x)
    check_method(method, [n] if n else [])
    if n == 0:
        raise ValueError("summarize() needs at least one value")
    mean = float(x.mean())
    if n < 2:
        return Summary(mean, math.nan, n, math.nan, math.nan, level, method)
    std = float(x.std(ddof=1))
    if std == 0:
        # A zero-width interval would claim certainty from two equal values (a metric that
        # counts test images is quantised: equal seeds happen).
        return Summary(mean, std, n, math.nan, math.nan, level, method, spread=False)
    if method == "t":
        half = t_quantile(level, n) * std / math.sqrt(n)
        low, high = mean - half, mean + half
    else:
        result = _stats().bootstrap(
            (x,),
            np.mean,
            confidence_level=level,
            n_resamples=BOOTSTRAP_RESAMPLES,
            method="percentile",
            rng=np.random.default_rng(seed),
        )
        low, high = result.confidence_interval
    return Summary(mean, std, n, float(low), float(high), level, method)


def in_test_images(sample: Mapping[int, float], resolution: float | None) -> dict[int, float]:
    """``sample`` counted in whole test images (``resolution``: the value of one image; None
    keeps the values); NaN stays NaN."""
    if resolution is None:
        return dict(sample)
    if not resolution > 0:
        raise ConfigError("resolution", resolution, "a positive value of one test image")
    return {s: v if math.isnan(v) else float(round(v / resolution)) for s, v in sample.items()}


def _has_spread(var: float, values: Iterable[float]) -> bool:
    """Whether a variance is more than float rounding of ``values`` (False for NaN)."""
    scale = max((abs(v) for v in values), default=0.0)
    return var > (FLOAT_TOLERANCE * max(scale, 1.0)) ** 2


def _t_statistic(a: Mapping[int, float], b: Mapping[int, float]) -> tuple[float, float, str]:
    """(t, degrees of freedom, test) of equal means; t is NaN when the samples cannot be tested
    (fewer than two values, a NaN value, or no spread)."""
    if set(a) == set(b) and len(a) >= 2:
        d = [a[s] - b[s] for s in sorted(a)]
        n = len(d)
        mean = math.fsum(d) / n
        var = math.fsum((v - mean) ** 2 for v in d) / (n - 1)
        if not _has_spread(var, [*a.values(), *b.values()]):
            return math.nan, math.nan, "paired"
        return mean / math.sqrt(var / n), float(n - 1), "paired"
    x, y = list(a.values()), list(b.values())
    if len(x) < 2 or len(y) < 2:
        return math.nan, math.nan, "none"
    mx, my = math.fsum(x) / len(x), math.fsum(y) / len(y)
    vx = math.fsum((v - mx) ** 2 for v in x) / (len(x) - 1) / len(x)
    vy = math.fsum((v - my) ** 2 for v in y) / (len(y) - 1) / len(y)
    if not (_has_spread(vx * len(x), x) and _has_spread(vy * len(y), y)):
        # A side without spread would enter with variance 0, as if its mean were exact: two
        # equal seeds of a quantised metric (one test image is 0.01%) say nothing of that.
        return math.nan, math.nan, "welch"
    se2 = vx + vy
    df = se2**2 / (vx**2 / (len(x) - 1) + vy**2 / (len(y) - 1))  # Welch-Satterthwaite
    return (mx - my) / math.sqrt(se2), df, "welch"


def p_value(
    a: Mapping[int, float], b: Mapping[int, float], resolution: float | None = None
) -> tuple[float, str]:
    """Two-sided p-value of equal means of seed->value samples ``a`` and ``b``, and the test.

    Paired t-test when both hold the same seeds (at least two), Welch's t-test otherwise. NaN
    when it cannot be tested: fewer than two values on a side, a NaN value, or no spread (a
    constant paired difference, or, unpaired, a side whose values are all equal; a t-test from
    no observed variation would give p = 0, i.e. "significant" from two equal seeds). With
    ``resolution`` (the value of one test image) the values are compared in whole images.
    """
    t, df, test = _t_statistic(in_test_images(a, resolution), in_test_images(b, resolution))
    return (math.nan if math.isnan(t) else float(2 * _stats().t.sf(abs(t), df))), test


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-adjusted p-values (step-down; reject where adjusted <= alpha), same order."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [math.nan] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def _untestable_reason(sample: Mapping[int, float]) -> str:
    if any(math.isnan(v) for v in sample.values()):
        return NAN_VALUE
    return ONE_SEED if len(sample) < 2 else ""


def significance_marks(
    samples: Sequence[Mapping[int, float]], level: float = 0.95, resolution: float | None = None
) -> list[Mark]:
    """Per sample (the cells of one column): its :class:`Mark` against the column's best.

    The best is the largest mean among the testable cells (two seeds or more, no NaN); a cell
    with one seed and a larger mean gets ``?`` (:data:`BEST_ONE_SEED`). All pairs of testable
    cells form one Holm family at ``alpha = 1 - level`` (a pair without spread enters it with
    p = 1, which can only make the others harder to reject); a cell is :data:`WORSE` when its
    pair with the best is rejected. ``resolution``: the value of one test image (100/N for an
    accuracy in %), to decide on whole images; None for metrics that are not counts.
    """
    check_level(level)
    samples = [in_test_images(s, resolution) for s in samples]
    alpha = 1 - level
    reasons = [_untestable_reason(s) for s in samples]
    means = [
        math.fsum(s.values()) / len(s) if s and not r else math.nan
        for s, r in zip(samples, reasons, strict=True)
    ]
    testable = [i for i, r in enumerate(reasons) if not r]
    if not testable:
        return [Mark(UNTESTABLE if r else "", math.nan, math.nan, "none", r) for r in reasons]
    best = max(testable, key=lambda i: (means[i], -i))  # first of equal means
    pairs = [(i, j) for x, i in enumerate(testable) for j in testable[x + 1 :]]
    raw = [_t_statistic(samples[i], samples[j]) for i, j in pairs]
    t = np.array([abs(r[0]) for r in raw])
    df = np.array([r[1] for r in raw])
    finite = ~np.isnan(t)
    p = np.ones(len(pairs))
    p[finite] = 2 * _stats().t.sf(t[finite], df[finite])
    adjusted = holm(list(p))
    with_best = {
        (j if i == best else i): (k, raw[k][2]) for k, (i, j) in enumerate(pairs) if best in (i, j)
    }
    out: list[Mark] = []
    for i, sample in enumerate(samples):
        if reasons[i]:
            single_top = reasons[i] == ONE_SEED and sample and _mean(sample) > means[best]
            why = BEST_ONE_SEED if single_top else reasons[i]
            out.append(Mark(UNTESTABLE, math.nan, math.nan, "none", why))
        elif i == best:
            out.append(Mark("", math.nan, math.nan, "none"))
        else:
            k, test = with_best[i]
            if not finite[k]:
                out.append(Mark(UNTESTABLE, math.nan, float(adjusted[k]), test, NO_SPREAD))
            else:
                mark = WORSE if adjusted[k] <= alpha else ""
                out.append(Mark(mark, float(p[k]), float(adjusted[k]), test))
    return out


def _mean(sample: Mapping[int, float]) -> float:
    return math.fsum(sample.values()) / len(sample)


def caption(level: float, method: str, seed_counts: Iterable[int] = ()) -> str:
    """The note a table with statistics carries: what the numbers and marks mean, and what an
    unmarked cell does not mean; ``seed_counts`` (the cells' n) give the t quantiles quoted."""
    pct = f"{100 * level:g}%"
    counts = sorted({int(n) for n in seed_counts if n >= 2})
    if method == "t":
        interval = "Student-t interval"
        quantiles = ", ".join(f"{t_quantile(level, n):.2f} at n={n}" for n in counts)
        width = f" (t quantile {quantiles})" if quantiles else ""
    else:
        interval = f"percentile bootstrap interval ({BOOTSTRAP_RESAMPLES} resamples)"
        low = [n for n in counts if n < BOOTSTRAP_FLAG_SEEDS]
        width = (
            f" (with fewer than {BOOTSTRAP_FLAG_SEEDS} seeds it covers less than {pct}: about "
            "91% at n=10 and 93% at n=20 for a nominal 95%)"
            if low
            else ""
        )
    return (
        f"statistics: [low, high] is the {pct} {interval} of the mean over n seeds{width}; "
        "[no spread]: every seed gave the same value, no interval. "
        f"{WORSE}: significantly below the best of its column (the largest mean among cells "
        "with at least two seeds), by two-sided t-tests between every pair of cells of the "
        "column (paired on shared seeds, else Welch's), Holm-adjusted so that the chance of "
        f"any false {WORSE} in a column is at most {1 - level:.3g}. No mark means not shown "
        "different with these seeds, not equivalent: with 2-3 seeds only large gaps can be "
        f"shown. {UNTESTABLE}: not testable (one seed, no spread between seeds, or a NaN value)."
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
