"""Seed statistics: summaries and tests match scipy; tables mark overlapping methods."""

from __future__ import annotations

import io
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from benchmark.core.errors import ConfigError
from benchmark.experiments.base import PLAN_COLUMNS, Block, TableLayout
from benchmark.reporting.render import render_csv, render_latex, render_markdown
from benchmark.reporting.seedstats import NOT_SIGNIFICANT, p_value, significance_marks, summarize
from benchmark.reporting.table_stats import annotate
from benchmark.reporting.tables import build_table

SAMPLE = [91.2, 90.4, 92.0, 91.5]


def test_summary_matches_scipy_t_interval_and_sample_std():
    s = summarize(SAMPLE, level=0.95)
    mean, sem = np.mean(SAMPLE), stats.sem(SAMPLE)
    low, high = stats.t.interval(0.95, len(SAMPLE) - 1, loc=mean, scale=sem)
    assert (s.mean, s.std, s.n) == pytest.approx((mean, np.std(SAMPLE, ddof=1), 4))
    assert (s.low, s.high) == pytest.approx((low, high))


def test_two_seeds_give_the_honest_wide_interval_and_one_seed_none():
    s = summarize([90.0, 91.0])
    # t_{0.975, 1} = 12.706: the half-width is 12.7 * 0.5 for a spread of one point.
    assert s.high - s.mean == pytest.approx(12.7062 * 0.5, rel=1e-4)
    one = summarize([90.0])
    assert math.isnan(one.std) and math.isnan(one.low)


def test_bootstrap_interval_is_seeded_and_inside_the_data_range():
    a = summarize(SAMPLE, method="bootstrap", seed=3)
    b = summarize(SAMPLE, method="bootstrap", seed=3)
    assert (a.low, a.high) == (b.low, b.high)
    assert min(SAMPLE) <= a.low < a.mean < a.high <= max(SAMPLE)


def test_bad_level_and_method_name_the_field():
    with pytest.raises(ConfigError, match="--level"):
        summarize(SAMPLE, level=95)
    with pytest.raises(ConfigError, match="--ci"):
        summarize(SAMPLE, method="normal")  # type: ignore[arg-type]


def test_p_values_match_scipy_paired_and_welch():
    a = {0: 91.0, 1: 92.5, 2: 90.8}
    b = {0: 90.1, 1: 91.9, 2: 90.5}
    p, test = p_value(a, b)
    assert test == "paired"
    assert p == pytest.approx(stats.ttest_rel(list(a.values()), list(b.values())).pvalue)
    c = {3: 90.1, 4: 91.9, 5: 89.0}
    p, test = p_value(a, c)
    expected = stats.ttest_ind(list(a.values()), list(c.values()), equal_var=False).pvalue
    assert test == "welch" and p == pytest.approx(expected)
    assert math.isnan(p_value({0: 1.0}, {0: 2.0})[0])


def test_marks_overlapping_but_not_separated_samples():
    best = {0: 91.0, 1: 92.0, 2: 91.5}
    overlapping = {0: 91.2, 1: 91.4, 2: 91.7}
    separated = {0: 80.0, 1: 80.5, 2: 80.2}
    marks = significance_marks([best, overlapping, separated])
    assert [m for m, _ in marks] == ["", NOT_SIGNIFICANT, ""]


def _plan_and_store(gap: float) -> tuple[pd.DataFrame, pd.DataFrame, TableLayout]:
    """Two methods, three shared seeds; B's accuracies are A's minus ``gap`` plus noise."""
    rng = np.random.default_rng(0)
    rows, records = [], []
    for row, shift in (("A", 0.0), ("B", gap)):
        for seed in range(3):
            rid = f"{row}{seed}"
            rows.append((rid, "s", row, 90.0, "", 0.0, "t", seed, "m"))
            acc = 0.9 - shift + rng.normal(0, 0.005)
            records.append(
                {"run_id": rid, "status": "finished", "val.top1": acc, "test.top1": acc,
                 "sparsity": 0.9, "speedup": 10.0, "images_per_s": 1.0}
            )  # fmt: skip
    layout = TableLayout(blocks=(Block((90.0,), (("s", ("A", "B")),)),))
    return pd.DataFrame(rows, columns=PLAN_COLUMNS), pd.DataFrame(records), layout


@pytest.mark.parametrize(("gap", "marked"), [(0.001, True), (0.1, False)])
def test_table_marks_methods_whose_seeds_overlap(gap: float, marked: bool):
    plan, store, layout = _plan_and_store(gap)
    table = annotate(build_table("t", "smoke", layout, plan, store), layout, plan, store)
    a, b = (line.values[0] for line in table.blocks[0].groups[0])
    assert a.highlight == "first" and NOT_SIGNIFICANT not in a.annotation
    assert (NOT_SIGNIFICANT in b.annotation) is marked
    md = render_markdown(table)
    assert "n=3" in md and "Note: statistics:" in md
    assert (r"$\approx$" in render_latex(table)) is marked
    frame = pd.read_csv(io.StringIO(render_csv(table)))
    b_row = frame[frame["row"] == "B"].iloc[0]
    assert b_row["n"] == 3 and b_row["ci_low"] < b_row["mean"] < b_row["ci_high"]
    assert bool(b_row["p_vs_best"] >= 0.05) is marked


def test_table_command_adds_statistics_and_refuses_a_bad_level(tmp_path, capsys):
    from benchmark.cli import main

    table = ["table", "appendix-schedule-comparison-cifar10-oneshot", "--store", str(tmp_path)]
    assert main([*table, "--scale", "smoke", "--stats", "--ci", "bootstrap"]) == 0
    assert "percentile bootstrap interval" in capsys.readouterr().out
    assert main([*table, "--stats", "--level", "95"]) == 2
    assert "--level" in capsys.readouterr().err
