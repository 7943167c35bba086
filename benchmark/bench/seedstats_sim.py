"""Simulate the seed statistics on accuracies that count test images (seeded; a few seconds).

``python -m benchmark.bench.seedstats_sim [--tables N]`` prints

* the false-alarm rate of the ``↓`` marks: the share of columns of 8 truly equal methods in
  which some cell is marked below the best, at 2 and 3 seeds, with accuracies quantised to a
  test split of 360 images (the smoke scale's digits) and of 10,000 (CIFAR). Each row's seed
  noise is given in test images, since ties of whole images are what used to fire falsely;
* the coverage of the printed 95% interval of a cell whose configuration was picked, among 48
  truly equal ones, by the largest validation mean over the same seeds (what a table prints),
  for validation/test correlations of the run effect from 0 to 1.
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from benchmark.reporting.seedstats import WORSE, significance_marks, summarize

ROWS = 8
SEED_EFFECT = 0.7  # the seed's shared effect (one dense parent per seed), in row-noise sds
CONFIGS = 48
BASE_ACCURACY = 0.9


def quantised(fraction: np.ndarray, test_size: int) -> np.ndarray:
    """Accuracies in % of ``test_size`` images, as runs record them (k/N * 100)."""
    return np.round(np.clip(fraction, 0, 1) * test_size) / test_size * 100


def false_alarm_rate(
    rng: np.random.Generator, seeds: int, test_size: int, noise_images: float, tables: int
) -> float:
    """Share of columns of :data:`ROWS` equal methods with any false ``↓`` (whole images)."""
    sd = noise_images / test_size
    shape = (tables, ROWS, seeds)
    shared = rng.normal(0, SEED_EFFECT * sd, (tables, 1, seeds))
    acc = quantised(BASE_ACCURACY + shared + rng.normal(0, sd, shape), test_size)
    resolution = 100 / test_size
    wrong = 0
    for table in acc:
        marks = significance_marks([dict(enumerate(row)) for row in table], 0.95, resolution)
        wrong += any(m.mark == WORSE for m in marks)
    return wrong / tables


def selected_coverage(
    rng: np.random.Generator, seeds: int, correlation: float, reps: int, test_size: int = 10_000
) -> float:
    """How often the 95% t interval of the test accuracy of the configuration with the best
    validation mean (of :data:`CONFIGS` equal ones, same seeds) covers the true accuracy."""
    sd = 20 / test_size  # 20 images of run-to-run noise
    run = rng.normal(0, sd, (reps, CONFIGS, seeds))
    own = math.sqrt(1 - correlation**2)
    val = correlation * run + own * rng.normal(0, sd, run.shape)
    test = quantised(BASE_ACCURACY + run, test_size)
    chosen = val.mean(2).argmax(1)
    truth = BASE_ACCURACY * 100
    hits = 0
    for picked, values in zip(chosen, test, strict=True):
        s = summarize(list(values[picked]), 0.95)
        hits += s.spread and s.low <= truth <= s.high
    return hits / reps


def main(argv: list[str] | None = None) -> None:
    """Print the false-alarm rates and the selected interval's coverage."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=2000, help="simulated columns per setting")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(35)
    se = math.sqrt(0.05 * 0.95 / args.tables)
    print(f"false '↓' among {ROWS} equal methods (target <= 5%; +-{100 * se:.1f} points s.e.):")
    print("test images | row noise (images) | 2 seeds | 3 seeds")
    for test_size, noise in ((360, 1.0), (360, 3.0), (10_000, 5.0), (10_000, 20.0)):
        rates = [false_alarm_rate(rng, n, test_size, noise, args.tables) for n in (2, 3)]
        print(f"{test_size:>11,} | {noise:>18g} | {rates[0]:>6.1%} | {rates[1]:>6.1%}")
    print(f"\ncoverage of the printed 95% interval, best of {CONFIGS} equal configurations:")
    print("val/test correlation | 2 seeds | 3 seeds")
    for correlation in (0.0, 0.5, 0.9, 1.0):
        cover = [selected_coverage(rng, n, correlation, args.tables) for n in (2, 3)]
        print(f"{correlation:>20g} | {cover[0]:>6.1%} | {cover[1]:>6.1%}")


if __name__ == "__main__":
    main()
