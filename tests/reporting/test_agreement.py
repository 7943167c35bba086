"""Agreement with the paper under a table shown with ``--paper``: Kendall's tau per column and
whether the paper's best row is in the top two (a tie counting against it), in test images."""

from __future__ import annotations

import dataclasses
import io
import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import kendalltau

from benchmark.experiments.base import PLAN_COLUMNS, Block, TableLayout
from benchmark.reporting.agreement import agreement_lines, column_agreement, split_size
from benchmark.reporting.render import render_csv, render_latex, render_markdown
from benchmark.reporting.tables import build_table

ROWS = ["FT", "LRW", "SLR", "LLR", "ALLR"]


def test_tau_is_scipys_kendall_tau_b_and_rows_without_both_means_are_left_out():
    rng = np.random.default_rng(0)
    ours, paper = rng.normal(size=5).round(1), rng.normal(size=5).round(1)
    found = column_agreement("c", [*ROWS, "CLR"], [*ours, 1.0], [*paper, math.nan])
    expected = kendalltau(ours, paper)
    assert found is not None and found.rows == 5
    assert (found.tau, found.p) == pytest.approx((expected.statistic, expected.pvalue))
    assert column_agreement("c", ["A"], [math.nan], [1.0]) is None


def test_the_same_order_is_tau_one_and_the_reverse_minus_one():
    same = column_agreement("c", ROWS, [1, 2, 3, 4, 5], [10, 20, 30, 40, 50])
    reverse = column_agreement("c", ROWS, [5, 4, 3, 2, 1], [10, 20, 30, 40, 50])
    assert same is not None and reverse is not None
    assert same.tau == pytest.approx(1.0) and same.best == "ALLR" and same.top_two
    assert reverse.tau == pytest.approx(-1.0) and (reverse.above, reverse.tied) == (4, 0)
    assert not reverse.top_two and not reverse.top_two_by_ties
    assert "the paper's best, ALLR, is 5th here: not in the top two" in reverse.text()


def test_a_tie_counts_against_the_papers_best_row():
    # Every row the same (a saturated smoke column): no tau, and the paper's best is not in the
    # top two, only "through a tie".
    flat = column_agreement("c", ROWS, [99.0] * 5, [1, 2, 3, 4, 5])
    assert flat is not None and math.isnan(flat.tau) and (flat.above, flat.tied) == (0, 4)
    assert not flat.top_two and flat.top_two_by_ties
    assert "1st here, level with 4 other rows: in the top two only through a tie" in flat.text()
    # Second, level with nobody: in the top two; second level with a third row: not.
    second = column_agreement("c", ROWS, [1, 2, 3, 5, 4], [1, 2, 3, 4, 5])
    shared = column_agreement("c", ROWS, [1, 2, 4, 5, 4], [1, 2, 3, 4, 5])
    assert second is not None and second.top_two
    assert shared is not None and not shared.top_two and shared.top_two_by_ties


def test_rows_the_paper_ties_at_the_top_are_represented_by_the_one_reproduced_best():
    found = column_agreement("c", ["FT", "LRW", "ALLR"], [80.0, 90.0, 85.0], [87.6, 87.6, 87.0])
    assert found is not None and found.best == "LRW" and found.top_two


def test_lines_give_each_column_the_mean_tau_the_count_and_the_test_images():
    cols = [
        column_agreement("sparsity 90%", ROWS, [1, 2, 3, 4, 5], [1, 2, 3, 4, 5]),
        column_agreement("sparsity 95%", ROWS, [5, 4, 3, 2, 1], [1, 2, 3, 4, 5]),
        column_agreement("sparsity 99%", ROWS, [1, 1, 1, 1, 1], [1, 2, 3, 4, 5]),
    ]
    lines = agreement_lines([c for c in cols if c is not None], 360)
    assert "one point is 3.6 test images (360 in the test split, one image 0.28 points)" in lines[0]
    assert lines[1].startswith("- sparsity 90%: tau +1.00 (p ")
    assert "- sparsity 99%: tau n/a (5 rows)" in lines[3]
    assert lines[-1] == (
        "Overall: mean tau +0.00 over 2 columns; the paper's best row in the top two in 1 of 3 "
        "columns (and 1 more only through a tie)."
    )
    assert agreement_lines([], 360) == []
    assert "test images" not in agreement_lines([c for c in cols if c is not None], None)[0]


def _table(with_test_n: bool = True):
    """Three rows, two seeds, two columns (90%: as the paper orders them; 95%: B and C level)."""
    accs = {("A", 90): 0.97, ("B", 90): 0.98, ("C", 90): 0.99}
    accs |= {("A", 95): 0.90, ("B", 95): 0.95, ("C", 95): 0.95}
    plan = pd.DataFrame(
        [
            (f"{r}{g}{s}", "translation", r, float(g), "5%", 0.0, "t", s, "m")
            for (r, g) in accs
            for s in (0, 1)
        ],
        columns=PLAN_COLUMNS,
    )
    store = pd.DataFrame(
        [
            {
                "run_id": rid,
                "status": "finished",
                "val.top1": accs[(rid[0], int(rid[1:3]))],
                "test.top1": accs[(rid[0], int(rid[1:3]))],
                "sparsity": 0.9,
                "speedup": 10.0,
                "images_per_s": 1.0,
                **({"test.n": 360} if with_test_n else {}),
            }
            for rid in plan["run_id"]
        ]
    )
    paper = pd.DataFrame(
        [
            {"section": "translation", "row": r, "sparsity": float(g), "budget": "5%",
             "metric": "accuracy", "mean": m, "std": 0.1, "note": ""}
            for (r, g), m in {
                ("A", 90): 91.0, ("B", 90): 92.0, ("C", 90): 93.0,
                ("A", 95): 90.0, ("B", 95): 91.0, ("C", 95): 92.0,
            }.items()
        ]
    )  # fmt: skip
    layout = TableLayout(blocks=(Block((90.0, 95.0), (("translation", ("A", "B", "C")),)),),
                         budgets=("5%",))  # fmt: skip
    return plan, store, layout, paper


def test_a_table_with_the_papers_numbers_prints_the_agreement_under_it():
    plan, store, layout, paper = _table()
    table = build_table("t", "smoke", layout, plan, store, paper=paper)
    md = render_markdown(table)
    assert (
        "- sparsity 90%, budget 5%: tau +1.00 (p 0.33, 3 rows); the paper's best, C, is 1st" in md
    )
    assert "- sparsity 95%, budget 5%: tau +0.82" in md
    # Level with one row at the top is still the top two (a third one level would not be).
    assert "C, is 1st here, level with 1 other row: in the top two" in md
    assert "one point is 3.6 test images (360 in the test split" in md
    assert "in the top two in 2 of 2 columns." in md
    # Under the table, before the run counts.
    assert md.index("Agreement with the paper") < md.index("planned runs found")
    assert "% Agreement with the paper" in render_latex(table)
    frame = pd.read_csv(io.StringIO(render_csv(table)))
    assert frame["column_tau"].round(2).tolist() == [1.0, 0.82] * 3  # row by row
    assert frame["column_top_two"].tolist() == ["yes"] * 6


def test_without_the_papers_numbers_or_test_sizes_nothing_is_claimed():
    plan, store, layout, paper = _table(with_test_n=False)
    assert "Agreement" not in render_markdown(build_table("t", "smoke", layout, plan, store))
    assert "column_tau" not in render_csv(build_table("t", "smoke", layout, plan, store))
    md = render_markdown(build_table("t", "smoke", layout, plan, store, paper=paper))
    assert "Agreement with the paper" in md and "test images" not in md
    assert split_size(plan, store) is None


def test_the_agreement_lines_close_with_a_one_line_verdict():
    from benchmark.reporting.agreement import verdict_lines

    like = [column_agreement("s 90%", ROWS, [1, 2, 3, 4, 5], [1, 2, 3, 4, 5])]
    unlike = [column_agreement("s 90%", ROWS, [5, 4, 3, 2, 1], [1, 2, 3, 4, 5])]
    assert verdict_lines(like, "paper")[0].startswith("Verdict: ranks rows like the paper")
    (line,) = verdict_lines(unlike, "smoke")
    assert line.startswith("Verdict: does not rank rows like the paper at this scale: use --scale")
    assert "use --scale" not in verdict_lines(unlike, "paper")[0] and verdict_lines([], "x") == []
    plan, store, layout, paper = _table()
    md = render_markdown(build_table("t", "smoke", layout, plan, store, paper=paper))
    # Right after the agreement lines' "Overall" line.
    after = md.split("columns.\n", 1)[1]
    assert after.startswith("Verdict: ranks rows like the paper")
    assert "% Verdict: " in render_latex(
        build_table("t", "smoke", layout, plan, store, paper=paper)
    )


def test_the_paper_difference_is_shown_on_accuracy_like_metrics_only():
    plan, store, layout, paper = _table()
    layout = dataclasses.replace(layout, metrics=("accuracy", "speedup"))
    speedups = paper.assign(metric="speedup", mean=20.0, std=0.0)
    table = build_table("t", "smoke", layout, plan, store, paper=pd.concat([paper, speedups]))
    md = render_markdown(table)
    assert "(paper 93.00 ± 0.10, Δ " in md  # accuracy: reproduced - published
    assert "(paper 20.0 ± 0.0)" in md and "(paper 20.0 ± 0.0, Δ" not in md  # speedup: no Δ
    frame = pd.read_csv(io.StringIO(render_csv(table)))
    assert frame.loc[frame["metric"].eq("speedup"), "diff"].isna().all()
    assert frame.loc[frame["metric"].eq("accuracy"), "diff"].notna().all()


def test_a_wide_markdown_table_is_split_to_the_width_asked():
    plan, store, layout, paper = _table()
    table = build_table("t", "smoke", layout, plan, store, paper=paper)
    whole = render_markdown(table)
    assert max(len(ln) for ln in whole.splitlines() if ln.startswith("|")) > 60
    split = render_markdown(table, width=60)
    pipes = [ln for ln in split.splitlines() if ln.startswith("|")]
    assert max(len(ln) for ln in pipes) <= 60
    assert "*columns 1-1 of 2*" in split and "*columns 2-2 of 2*" in split
    # Every row label in each part, every cell once.
    assert sum(ln.startswith("| C |") for ln in pipes) == 2
    assert render_markdown(table, width=10_000) == whole
