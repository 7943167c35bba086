"""Seed statistics: summaries and tests match scipy; tables mark cells shown below the best;
degenerate columns (NaN, one seed, no spread) and the bootstrap at few seeds are handled."""

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
from benchmark.reporting.seedstats import (
    BEST_ONE_SEED,
    NAN_VALUE,
    NO_SPREAD,
    UNTESTABLE,
    WORSE,
    caption,
    holm,
    p_value,
    significance_marks,
    summarize,
)
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


TEN = [91.2, 90.4, 92.0, 91.5, 90.9, 91.1, 90.2, 91.8, 91.4, 90.7]


def test_bootstrap_interval_is_seeded_and_inside_the_data_range():
    a = summarize(TEN, method="bootstrap", seed=3)
    b = summarize(TEN, method="bootstrap", seed=3)
    assert (a.low, a.high) == (b.low, b.high)
    assert min(TEN) <= a.low < a.mean < a.high <= max(TEN)


@pytest.mark.parametrize("n", [2, 3, 9])
def test_bootstrap_is_refused_below_ten_seeds(n: int):
    """At n = 2 the percentile bootstrap is [min, max]: it covers the mean about half the time."""
    with pytest.raises(ConfigError, match="--ci.*at least 10 seeds"):
        summarize(TEN[:n], method="bootstrap")


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


def test_marks_cells_shown_below_the_best_and_leaves_the_others_unmarked():
    best = {0: 91.0, 1: 92.0, 2: 91.5}
    overlapping = {0: 91.2, 1: 91.4, 2: 91.7}
    separated = {0: 80.0, 1: 80.5, 2: 80.2}
    marks = significance_marks([best, overlapping, separated])
    assert [m.mark for m in marks] == ["", "", WORSE]
    assert marks[2].test == "paired" and marks[2].p_holm <= 0.05 < marks[1].p_holm


def test_holm_adjusts_step_down_and_keeps_the_order():
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.5, 0.001]) == pytest.approx([0.5, 0.002])


def test_every_pair_of_the_column_is_in_the_family_not_only_the_best_s():
    """The best is chosen after looking at the means, so Holm over its pairs alone is not a
    valid family: here it would mark c (p = 0.021, 2 x 0.021 <= 0.05); over all three pairs of
    the column it may not (3 x 0.021 > 0.05)."""
    a = {0: 10.0, 1: 11.0, 2: 12.0}
    b = {3: 9.5, 4: 10.8, 5: 11.9}
    c = {6: 7.2, 7: 8.3, 8: 8.9}
    p_ab, p_ac, p_bc = p_value(a, b)[0], p_value(a, c)[0], p_value(b, c)[0]
    assert min(holm([p_ab, p_ac])) <= 0.05 < min(holm([p_ab, p_ac, p_bc]))
    marks = significance_marks([a, b, c])
    assert [m.mark for m in marks] == ["", "", ""]
    assert marks[2].p == pytest.approx(p_ac)
    assert marks[2].p_holm == pytest.approx(holm([p_ab, p_ac, p_bc])[1])


def test_a_nan_mean_is_never_the_best():
    """np.argmax picked the first NaN as the best, and every other cell was compared to it."""
    nan = {0: float("nan"), 1: 95.0, 2: 96.0}
    good = {0: 91.0, 1: 92.0, 2: 91.5}
    poor = {0: 70.0, 1: 70.2, 2: 70.1}
    marks = significance_marks([nan, good, poor])
    assert (marks[0].mark, marks[0].untestable) == (UNTESTABLE, NAN_VALUE)
    assert marks[1].mark == "" and math.isnan(marks[1].p)  # the best
    assert marks[2].mark == WORSE


def test_a_best_with_one_seed_does_not_make_every_other_cell_untestable():
    single = {0: 99.0}
    good = {0: 91.0, 1: 92.0, 2: 91.5}
    poor = {0: 70.0, 1: 70.2, 2: 70.1}
    marks = significance_marks([single, good, poor])
    assert (marks[0].mark, marks[0].untestable) == (UNTESTABLE, BEST_ONE_SEED)
    assert [m.mark for m in marks[1:]] == ["", WORSE]


def test_two_equal_seeds_are_not_significant_and_have_no_interval():
    """p was 0 ("significant") and the interval [m, m] from two equal values."""
    assert math.isnan(p_value({0: 90.0, 1: 90.0}, {2: 80.0, 3: 80.0})[0])
    assert math.isnan(p_value({0: 90.0, 1: 91.0}, {0: 89.0, 1: 90.0})[0])  # constant difference
    s = summarize([90.0, 90.0])
    assert not s.spread and math.isnan(s.low) and math.isnan(s.high)
    marks = significance_marks([{0: 90.0, 1: 91.0}, {0: 89.0, 1: 90.0}])
    assert (marks[1].mark, marks[1].untestable) == (UNTESTABLE, NO_SPREAD)
    # Unpaired, one side without spread would count as an exact mean: not tested either.
    spread = {0: 91.5, 1: 92.0, 2: 92.4, 3: 91.9, 4: 92.2}
    assert math.isnan(p_value(spread, {5: 80.0, 6: 80.0})[0])
    marks = significance_marks([spread, {5: 80.0, 6: 80.0}])
    assert (marks[1].mark, marks[1].untestable) == (UNTESTABLE, NO_SPREAD)


DIGITS_TEST = 360  # the smoke scale's test split: one image is 0.28 points


def _in_percent(images: list[int], size: int = DIGITS_TEST) -> dict[int, float]:
    """Seed -> accuracy in % of ``images`` correct test images, as a run records it."""
    return {seed: k / size * 100 for seed, k in enumerate(images)}


@pytest.mark.parametrize("resolution", [100 / DIGITS_TEST, None])
def test_a_constant_gap_of_whole_test_images_is_untestable(resolution: float | None):
    """27 images fewer on both seeds: the differences agree only up to float rounding (7.5 and
    7.500000000000014), which once gave a paired p of ~1e-16 and a false ``↓``."""
    best, other = _in_percent([300, 301]), _in_percent([273, 274])
    gaps = [best[s] - other[s] for s in best]
    assert gaps[0] != gaps[1]  # the float rounding this test is about is really there
    assert math.isnan(p_value(best, other, resolution)[0])
    marks = significance_marks([best, other], 0.95, resolution)
    assert (marks[1].mark, marks[1].untestable) == (UNTESTABLE, NO_SPREAD)
    # One image more on one seed is a spread, and is tested.
    assert not math.isnan(p_value(best, _in_percent([273, 275]), resolution)[0])


def test_a_table_decides_on_whole_test_images():
    """The table's marks use the store's test size: a constant 27-image gap gets ``?``."""
    plan, store, layout = _plan_and_store(0.0)
    correct = {"A0": 300, "A1": 301, "A2": 305, "B0": 273, "B1": 274, "B2": 278}
    store["test.top1"] = store["run_id"].map(correct) / DIGITS_TEST
    store["val.top1"] = store["test.top1"]
    store["test.n"] = DIGITS_TEST
    table = annotate(build_table("t", "smoke", layout, plan, store), layout, plan, store)
    b = table.blocks[0].groups[0][1].values[0]
    assert b.annotation.endswith(UNTESTABLE) and b.stats["untestable"] == NO_SPREAD


@pytest.mark.parametrize(("level", "quantile"), [(0.95, "12.71 at n=2"), (0.9, "6.31 at n=2")])
def test_caption_quotes_the_t_quantile_of_its_level(level: float, quantile: str):
    text = caption(level, "t", [2, 3, 3])
    assert quantile in text and "12.7," not in text.replace("12.71", "")
    assert "not equivalent" in text and "Holm" in text and WORSE in text


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


@pytest.mark.parametrize(("gap", "marked"), [(0.001, False), (0.1, True)])
def test_table_marks_methods_shown_below_the_best(gap: float, marked: bool):
    plan, store, layout = _plan_and_store(gap)
    table = annotate(build_table("t", "smoke", layout, plan, store), layout, plan, store)
    a, b = (line.values[0] for line in table.blocks[0].groups[0])
    assert a.highlight == "first" and WORSE not in a.annotation
    assert (WORSE in b.annotation) is marked
    md = render_markdown(table)
    assert "n=3" in md and "Note: statistics:" in md and "4.30 at n=3" in md
    assert (r"$\downarrow$" in render_latex(table)) is marked
    frame = pd.read_csv(io.StringIO(render_csv(table)))
    b_row = frame[frame["row"] == "B"].iloc[0]
    assert b_row["n"] == 3 and b_row["ci_low"] < b_row["mean"] < b_row["ci_high"]
    assert bool(b_row["p_holm"] <= 0.05) is marked and b_row["test"] == "paired"


def test_table_command_adds_statistics_and_refuses_a_bad_level(tmp_path, capsys):
    from benchmark.cli import main

    table = ["table", "appendix-schedule-comparison-cifar10-oneshot", "--store", str(tmp_path)]
    assert main([*table, "--scale", "smoke", "--stats"]) == 0
    assert "Student-t interval" in capsys.readouterr().out
    assert main([*table, "--stats", "--level", "95"]) == 2
    assert "--level" in capsys.readouterr().err


def test_table_command_refuses_the_bootstrap_for_a_grid_of_few_seeds(tmp_path, capsys):
    from benchmark.cli import main

    table = ["table", "appendix-schedule-comparison-cifar10-oneshot", "--store", str(tmp_path)]
    assert main([*table, "--scale", "smoke", "--stats", "--ci", "bootstrap"]) == 2
    err = capsys.readouterr().err
    assert "--ci" in err and "at least 10 seeds" in err


def test_a_nan_cell_is_neither_highlighted_nor_the_reference_of_its_column():
    plan, store, layout = _plan_and_store(0.05)
    store = store.set_index("run_id")
    store.loc[["A0", "A1", "A2"], "test.top1"] = float("nan")  # A recorded NaN
    store = store.reset_index()
    table = annotate(build_table("t", "smoke", layout, plan, store), layout, plan, store)
    a, b = (line.values[0] for line in table.blocks[0].groups[0])
    assert math.isnan(a.mean) and a.highlight == "" and a.annotation.endswith(UNTESTABLE)
    assert a.stats["untestable"] == NAN_VALUE
    assert b.highlight == "first" and UNTESTABLE not in b.annotation
