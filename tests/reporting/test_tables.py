"""Selection, aggregation and rendering of tables, on small synthetic stores (no training)."""

from __future__ import annotations

import io
import math

import numpy as np
import pandas as pd
import pytest

from benchmark.bench.tables import synthetic_plan, synthetic_store
from benchmark.core.errors import ConfigError
from benchmark.experiments.base import PLAN_COLUMNS, Block, TableLayout
from benchmark.experiments.paper_numbers import MISSING_NOTE, load_paper_table
from benchmark.reporting.render import render_csv, render_latex, render_markdown, table_frame
from benchmark.reporting.selection import aggregate
from benchmark.reporting.tables import TableRules, build_table


def _plan(rows: list[tuple]) -> pd.DataFrame:
    """(run_id, section, row, goal, budget, tuned, seed) tuples -> a plan frame."""
    full = [
        (rid, sec, row, goal, bud, 0.0, tuned, seed, "m")
        for rid, sec, row, goal, bud, tuned, seed in rows
    ]
    return pd.DataFrame(full, columns=PLAN_COLUMNS)


def _store(records: dict[str, tuple[float, float, float]]) -> pd.DataFrame:
    """run id -> (val top-1, test top-1, achieved sparsity), all finished."""
    return pd.DataFrame(
        [
            {
                "run_id": rid,
                "status": "finished",
                "val.top1": val,
                "test.top1": test,
                "sparsity": sparsity,
                "speedup": 10.0,
                "images_per_s": 1000.0,
            }
            for rid, (val, test, sparsity) in records.items()
        ]
    )


def test_selection_picks_best_mean_validation_and_reports_its_test_mean_and_sample_std():
    # Config "a" has the best single validation run, "b" the best mean over seeds: b wins.
    plan = _plan(
        [
            ("a0", "s", "A", 90.0, "", "a", 0),
            ("a1", "s", "A", 90.0, "", "a", 1),
            ("b0", "s", "A", 90.0, "", "b", 0),
            ("b1", "s", "A", 90.0, "", "b", 1),
        ]
    )
    store = _store(
        {
            "a0": (0.99, 0.50, 0.9),
            "a1": (0.50, 0.50, 0.9),
            "b0": (0.80, 0.90, 0.9),
            "b1": (0.80, 0.80, 0.9),
        }
    )
    best, counts = aggregate(plan, store)
    assert len(best) == 1
    row = best.iloc[0]
    assert row["tuned"] == "b"
    assert row["accuracy"] == pytest.approx(85.0)
    assert row["accuracy_std"] == pytest.approx(5.0 * math.sqrt(2))  # ddof = 1 by default
    assert (row["accuracy_min"], row["accuracy_max"]) == pytest.approx((80.0, 90.0))
    assert counts.iloc[0][["planned", "missing"]].tolist() == [4, 0]


def test_unspecified_sparsity_lands_in_the_column_within_a_quarter_percent():
    plan = _plan(
        [
            ("c0", "s", "CS", math.nan, "", "near90", 0),
            ("c1", "s", "CS", math.nan, "", "off", 0),
            ("c2", "s", "CS", math.nan, "", "near95", 0),
        ]
    )
    store = _store({"c0": (0.9, 0.9, 0.9022), "c1": (0.99, 0.99, 0.92), "c2": (0.8, 0.7, 0.9476)})
    best, _ = aggregate(plan, store, {"s": (90.0, 95.0)})
    assert dict(zip(best["goal"], best["tuned"], strict=True)) == {90.0: "near90", 95.0: "near95"}

    layout = TableLayout(blocks=(Block((90.0, 93.0, 95.0), (("s", ("CS",)),)),))
    strict = TableRules(max_distance=0)
    table = build_table("t", "smoke", layout, plan, store, rules=strict)
    cells = [v.status for v in table.blocks[0].groups[0][0].values]
    assert cells == ["ok", "none", "ok"]  # 93%: no configuration lands there -> "---"
    assert "| CS | **90.00**¹ | --- | **70.00**¹ |" in render_markdown(table)  # one seed: no std
    # By default the closest configuration (92%) fills the 93% column: 1 point away, in no
    # other column's interval.
    table = build_table("t", "smoke", layout, plan, store)
    assert [v.mean for v in table.blocks[0].groups[0][0].values] == [90.0, 99.0, 70.0]


def _two_row_table(
    missing: set[str] = frozenset(),
) -> tuple[pd.DataFrame, pd.DataFrame, TableLayout]:
    plan = _plan(
        [(f"{r}{s}", "translation", r, 90.0, "5%", "t", s) for r in "ABCD" for s in (0, 1)]
        + [("T0", "tuned", "T", 90.0, "5%", "t", 0)]
    )
    accs = {"A": 0.9, "B": 0.8, "C": 0.8, "D": 0.7, "T": 0.99}
    store = _store(
        {rid: (accs[rid[0]], accs[rid[0]], 0.9) for rid in plan["run_id"] if rid not in missing}
    )
    layout = TableLayout(
        blocks=(Block((90.0,), (("translation", tuple("ABCD")), ("tuned", ("T",)))),),
        budgets=("5%",),
        ranked_sections=("translation",),
    )
    return plan, store, layout


def test_highlights_rank_translation_rows_only_and_ties_share_a_colour():
    plan, store, layout = _two_row_table()
    table = build_table("t", "smoke", layout, plan, store)
    translation, tuned = table.blocks[0].groups
    assert [line.values[0].highlight for line in translation] == [
        "first",
        "second",
        "second",
        "third",
    ]
    assert tuned[0].values[0].highlight == ""  # the tuned schedules are not ranked


def test_missing_runs_are_counted_and_marked_never_dropped():
    plan, store, layout = _two_row_table(missing={"A1", "B0", "B1"})
    table = build_table("t", "smoke", layout, plan, store)
    values = {line.label: line.values[0] for g in table.blocks[0].groups for line in g}
    assert (values["A"].status, values["A"].missing, values["A"].planned) == ("partial", 1, 2)
    assert values["B"].status == "missing"
    assert (table.planned, table.missing) == (9, 3)
    md = render_markdown(table)
    assert "missing (2/2)" in md
    assert "†" in md
    assert "6 of 9 planned runs found" in md and "missing: 3" in md


def test_latex_uses_booktabs_and_the_papers_colour_macros():
    plan, store, layout = _two_row_table()
    tex = render_latex(build_table("t", "smoke", layout, plan, store), preamble=True)
    for needle in (r"\toprule", r"\midrule", r"\bottomrule", r"\cmidrule(lr){2-2}"):
        assert needle in tex
    assert r"\newcommand{\first}[1]{\textbf{\color[HTML]{e55352}{#1}}}" in tex
    assert r"\first{90.00 {\small\textpm 0.00}}" in tex
    assert r"\second{80.00 {\small\textpm 0.00}}" in tex
    assert "Budget: & 5\\%" in tex
    assert r"Model sparsity 90\%" in tex


def test_paper_side_by_side_shows_published_value_and_difference():
    plan, store, layout = _two_row_table()
    paper = pd.DataFrame(
        [
            {"section": "translation", "row": "A", "sparsity": 90.0, "budget": "5%",
             "metric": "accuracy", "mean": 89.5, "std": 0.2, "note": ""},
            {"section": "translation", "row": "B", "sparsity": 90.0, "budget": "5%",
             "metric": "accuracy", "mean": np.nan, "std": np.nan, "note": MISSING_NOTE},
        ]
    )  # fmt: skip
    table = build_table("t", "smoke", layout, plan, store, paper=paper)
    md = render_markdown(table)
    assert "**90.00 ± 0.00**¹ (paper 89.50 ± 0.20, Δ +0.50)" in md
    assert "(paper ---)" in md and "(paper n/a)" in md
    frame = pd.read_csv(io.StringIO(render_csv(table)))
    a = frame[frame["row"] == "A"].iloc[0]
    assert (a["paper_mean"], a["diff"]) == pytest.approx((89.5, 0.5))
    paper_columns = ["table", "section", "row", "sparsity", "budget", "metric", "mean", "std"]
    assert list(frame.columns[:8]) == paper_columns


def test_per_row_images_per_second_is_the_mean_over_the_rows_runs():
    plan, store, _ = _two_row_table()
    store.loc[store["run_id"] == "A0", "images_per_s"] = 3000.0
    layout = TableLayout(
        blocks=(Block((90.0,), (("translation", ("A",)),)),),
        budgets=("5%",),
        metrics=("accuracy", "speedup", "sparsity"),
        per_row=("img_per_s",),
    )
    frame = table_frame(build_table("t", "smoke", layout, plan, store))
    assert frame["metric"].tolist() == ["img_per_s", "accuracy", "speedup", "sparsity"]
    assert frame["mean"].iloc[0] == pytest.approx(2000.0)


def test_ten_thousand_synthetic_runs_aggregate_into_one_table():
    """The benchmark's synthetic store is a valid input (its timing is bench_tables' job)."""
    plan, layout = synthetic_plan(10_000)
    assert len(plan) == 10_000
    table = build_table("t", "paper", layout, plan, synthetic_store(plan, missing=0.01))
    assert table.planned == 10_000 and 0 < table.missing < 300


def _seed_pair_store() -> tuple[pd.DataFrame, pd.DataFrame]:
    plan = _plan([("a0", "s", "A", 90.0, "", "a", 0), ("a1", "s", "A", 90.0, "", "a", 1)])
    return plan, _store({"a0": (0.8, 0.80, 0.9), "a1": (0.8, 0.90, 0.9)})


def test_std_over_seeds_is_the_sample_std_unless_ddof_0_is_asked_for():
    plan, store = _seed_pair_store()
    sample, _ = aggregate(plan, store)
    population, _ = aggregate(plan, store, rules=TableRules(ddof=0))
    # Two seeds, 80 and 90: pandas' (and the W&B export's) std is 7.07, numpy's default 5.
    assert sample.iloc[0]["accuracy_std"] == pytest.approx(pd.Series([80.0, 90.0]).std())
    assert population.iloc[0]["accuracy_std"] == pytest.approx(5.0)
    with pytest.raises(ConfigError, match="ddof"):
        TableRules(ddof=2)


def test_a_single_seed_prints_its_mean_without_an_undefined_sample_std():
    plan, store = _seed_pair_store()
    layout = TableLayout(blocks=(Block((90.0,), (("s", ("A",)),)),))
    table = build_table("t", "smoke", layout, plan[plan["seed"] == 0], store)
    assert table.blocks[0].groups[0][0].values[0].std is None
    assert "| A | **80.00**¹ |" in render_markdown(table)


def test_table_cli_takes_the_std_ddof(tmp_path, capsys):
    from benchmark.cli import main

    args = ["table", "appendix-ALLR-AccALLR-Comparison", "--store", str(tmp_path)]
    assert main([*args, "--scale", "smoke", "--ddof", "0", "--max-distance", "0"]) == 0
    with pytest.raises(SystemExit):
        main([*args, "--ddof", "3"])
    assert "--ddof" in capsys.readouterr().err


def test_highlights_rank_unrounded_means_so_values_printing_the_same_differ():
    plan = _plan([(r, "s", r, 90.0, "", "t", 0) for r in "ABCD"])
    # A and B both print 93.35, C and D both 93.00: the paper gives each its own colour.
    store = _store(
        {r: (a, a, 0.9) for r, a in zip("ABCD", (0.93351, 0.93349, 0.93001, 0.92999), strict=True)}
    )
    layout = TableLayout(blocks=(Block((90.0,), (("s", tuple("ABCD")),)),))
    line = build_table("t", "smoke", layout, plan, store).blocks[0].groups[0]
    assert [ln.values[0].highlight for ln in line] == ["first", "second", "third", ""]


PLACED_TABLES = ("stable-unstable-results", "appendix-cifar10-results", "appendix-cifar100-results")


def _paper_placement(table_id: str) -> tuple[pd.DataFrame, pd.DataFrame, dict, pd.DataFrame]:
    """One configuration per sparsity the paper prints for CS, STR and DST (no goal), a plan and
    a store holding them, the goal columns per section, and the paper's own cells."""
    paper = load_paper_table(table_id)
    cells = paper[(paper["metric"] == "sparsity") & paper["row"].isin(["CS", "STR", "DST"])]
    printed = cells[cells["mean"].notna()]
    rows, records = [], {}
    for i, c in enumerate(printed.itertuples()):
        rid = f"{c.section}-{c.row}-{i}"
        rows.append((rid, c.section, c.row, math.nan, "", f"cfg{i}", 0))
        records[rid] = (0.5, 0.5, float(c.mean) / 100)
    goals = {
        section: tuple(sorted(group["sparsity"].dropna().unique()))
        for section, group in paper.groupby("section")
    }
    return _plan(rows), _store(records), goals, cells


@pytest.mark.parametrize("table_id", PLACED_TABLES)
def test_methods_without_a_goal_sparsity_are_placed_where_the_paper_prints_them(table_id):
    plan, store, goals, cells = _paper_placement(table_id)
    best, _ = aggregate(plan, store, goals)
    placed = {
        (r["section"], r["row"], r["goal"]): round(r["sparsity"], 2) for _, r in best.iterrows()
    }
    expected = {
        (c.section, c.row, float(c.sparsity)): float(c.mean)
        for c in cells.itertuples()
        if not (isinstance(c.note, str) and c.note)
    }
    assert placed == pytest.approx(expected)  # every printed cell, and no "---" cell, is filled


def test_the_papers_seventeen_out_of_interval_cells_need_the_closest_configuration_fallback():
    outside, dashes = 0, 0
    for table_id in PLACED_TABLES:
        plan, store, goals, cells = _paper_placement(table_id)
        strict, _ = aggregate(plan, store, goals, TableRules(max_distance=0))
        fallback, _ = aggregate(plan, store, goals)
        outside += len(fallback) - len(strict)
        assert (abs(strict["sparsity"] - strict["goal"]) <= 0.25 + 1e-9).all()
        dashes += cells["note"].fillna("").astype(bool).sum()
    assert (outside, dashes) == (17, 3)
    # The farthest the paper placed: STR at 75.34% in the 70% ImageNet column. A smaller
    # max_distance leaves it "---".
    plan, store, goals, _ = _paper_placement("stable-unstable-results")
    near, _ = aggregate(plan, store, goals, TableRules(max_distance=5.0))
    assert not ((near["row"] == "STR") & (near["goal"] == 70.0)).any()
