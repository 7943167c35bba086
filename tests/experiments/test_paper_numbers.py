"""The transcribed paper tables (benchmark/experiments/paper/*.csv) checked against the
paper's LaTeX."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pandas as pd
import pytest

from benchmark.experiments.paper_numbers import (
    LONG_COLUMNS,
    MISSING_NOTE,
    PAPER_DIR,
    UNLABELLED_TABLES,
    WIDE_TABLES,
    ParsedCell,
    compare_table,
    expected_frame,
    extract_tables,
    list_paper_tables,
    load_paper_table,
    parse_latex_tables,
    parse_value_cell,
    table_id_from_label,
)

FIXTURE = Path(__file__).parents[1] / "fixtures" / "paper.tex"
SHARED_PAPER = Path("/work/shared/paper/paper.tex")

# Cells per table, counted by hand from the PDF layout: blocks x rows x value columns
# (for the two wide tables: the number of CSV rows).  Independent of the parser.
EXPECTED_CELLS: dict[str, int] = {
    "schedule-comparison-imagenet": 6 * 9,
    "stable-unstable-results": 9 * 10 + 8 * 10,  # CIFAR-10 has a CS row, ImageNet not
    "appendix-schedule-comparison-cifar10-oneshot": 2 * 10 * 8,
    "appendix-schedule-comparison-cifar10-iterative": 3 * 10 * 6,
    "appendix-schedule-comparison-resnet18": 2 * 10 * 6,
    "appendix-schedule-comparison-cifar100": 3 * 10 * 3,
    "appendix-schedule-comparison-imagenet": 4 * 6 * 4,
    "appendix-schedule-comparison-imagenet-iterative": 3 * 6 * 6,
    "appendix-schedule-comparison-imagenet-maxvit": 4 * 6 * 4,
    "appendix-schedule-comparison-imagenet-iterative-maxvit": 4 * 6 * 4,
    "appendix-schedule-comparison-coco-deeplab": 4 * 6 * 3,
    "appendix-schedule-comparison-coco-deeplab-iterative": 4 * 6 * 4,
    "appendix-schedule-comparison-cityscapes-pspnet": 4 * 6 * 4,
    "appendix-schedule-comparison-cityscapes-pspnet-iterative": 4 * 6 * 4,
    "appendix-schedule-comparison-wmt-t5": 3 * 6 * 6,
    "appendix-schedule-comparison-structured-c10": 4 * 6 * 3,
    "appendix-schedule-comparison-imagenet-filter": 3 * 6 * 3,
    "appendix-schedule-comparison-imagenet-iterative-filter": 3 * 6 * 4,
    "appendix-schedule-comparison-imagenet-maxvit-filter": 5 * 6 * 4,
    "appendix-schedule-comparison-imagenet-iterative-maxvit-filter": 5 * 6 * 4,
    "appendix-cifar10-results": 3 * 9 * 7,
    "appendix-cifar100-results": 2 * 9 * 7,
    "appendix-ALLR-AccALLR-Comparison": 3 * 2 * 3,
    "appendix-ALLR-AccALLR-Comparison-Imagenet": 2 * 2 * 4,
    "appendix-ALLR-d1d2-Comparison": 3 * 4 * 3,
    "gmp-vs-bimp-cifar100": 7 * 6,
    "gmp-vs-bimp-imagenet": 4 * 9,
    "methods": 10,
    "problem_config": 9,  # CIFAR-10 lists three networks in one LaTeX row
}
LONG_TABLES = sorted(set(EXPECTED_CELLS) - set(WIDE_TABLES))

# Values read off the paper by hand: (table, section, row, sparsity, budget, metric) ->
# (mean, std, highlight).
SPOT_VALUES: dict[tuple[str, str, str, float, str, str], tuple[float, float, str]] = {
    ("schedule-comparison-imagenet", "translation", "ALLR", 70, "2.22%", "accuracy"): (
        73.69,
        0.03,
        "first",
    ),
    ("stable-unstable-results", "CIFAR-10", "BIMP", 99, "", "accuracy"): (87.17, 0.59, "first"),
    ("stable-unstable-results", "ImageNet", "STR", 70, "", "sparsity"): (75.34, 0.01, ""),
    ("appendix-cifar10-results", "comparison", "DNW", 98, "", "accuracy"): (34.87, 43.08, ""),
    ("appendix-cifar10-results", "comparison", "DPF", 98, "", "speedup"): (29, 1.2, ""),
    ("appendix-schedule-comparison-cifar10-oneshot", "tuned", "linear", 99, "25%", "accuracy"): (
        82.12,
        0.08,
        "",
    ),
    (
        "appendix-schedule-comparison-cifar10-iterative",
        "translation",
        "CLR",
        99,
        "2x2.5%",
        "accuracy",
    ): (
        81.41,
        0.18,
        "first",
    ),
    ("appendix-schedule-comparison-wmt-t5", "translation", "ALLR", 70, "60%", "bleu"): (
        23.99,
        0.14,
        "",
    ),
    (
        "appendix-schedule-comparison-cityscapes-pspnet-iterative",
        "translation",
        "ALLR",
        90,
        "2x1.66%",
        "iou",
    ): (
        57.40,
        0.27,
        "first",
    ),
    ("gmp-vs-bimp-cifar100", "comparison", "GMP (linear, soft)", 90, "", "accuracy"): (
        75.52,
        0.05,
        "second",
    ),
    ("appendix-ALLR-d1d2-Comparison", "translation", "ALLRd2", 98, "2%", "accuracy"): (
        70.05,
        0.31,
        "",
    ),
}


@pytest.fixture(scope="module")
def tex() -> str:
    return FIXTURE.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def parsed(tex: str) -> dict[str, list[ParsedCell]]:
    """Table id -> cells, from an independent parse of the LaTeX fixture."""
    return {table_id_from_label(label): cells for label, cells in parse_latex_tables(tex).items()}


@pytest.fixture(scope="module")
def bodies(tex: str) -> dict[str, str]:
    """Table id -> raw tabular body."""
    return {table.table_id: table.body for table in extract_tables(tex)}


# --------------------------------------------------------------------------- coverage


def test_every_latex_table_has_a_csv_and_no_csv_is_extra(parsed: dict) -> None:
    assert sorted(parsed) == list_paper_tables()


def test_all_expected_tables_are_transcribed() -> None:
    assert sorted(EXPECTED_CELLS) == list_paper_tables()


def test_unlabelled_tables_get_the_documented_names(tex: str, parsed: dict) -> None:
    labels = {m.group(1) for m in re.finditer(r"\\label\{((?:tab|table):[^}]*)\}", tex)}
    derived = {table_id_from_label(label) for label in UNLABELLED_TABLES.values()}
    assert derived <= set(parsed)
    assert not derived & {table_id_from_label(label) for label in labels}
    readme = (PAPER_DIR / "README.md").read_text(encoding="utf-8")
    for table_id in list_paper_tables():
        assert f"{table_id}.csv" in readme


def test_fixture_is_a_copy_of_the_paper() -> None:
    if not SHARED_PAPER.exists():
        pytest.skip("shared paper source not available")
    assert FIXTURE.read_bytes() == SHARED_PAPER.read_bytes()


# --------------------------------------------------------------------------- the cells


@pytest.mark.parametrize("table_id", sorted(EXPECTED_CELLS))
def test_csv_matches_latex(table_id: str, parsed: dict) -> None:
    actual = load_paper_table(table_id)
    expected = expected_frame(table_id, parsed[table_id])
    assert compare_table(table_id, actual, expected) == []


def test_cell_counts(parsed: dict) -> None:
    for table_id, count in EXPECTED_CELLS.items():
        assert len(load_paper_table(table_id)) == count, table_id
        assert len(expected_frame(table_id, parsed[table_id])) == count, table_id
    total = sum(EXPECTED_CELLS[t] for t in LONG_TABLES)
    assert total == 2539


@pytest.mark.parametrize("table_id", LONG_TABLES)
def test_markup_counts_match_raw_latex(table_id: str, bodies: dict) -> None:
    """Count ±, --- and highlight macros in the raw source, without splitting cells."""
    body = bodies[table_id]
    frame = load_paper_table(table_id)
    assert frame["std"].notna().sum() == body.count("\\textpm")
    assert (frame["note"] == MISSING_NOTE).sum() == body.count("---")
    for rank in ("first", "second", "third"):
        in_latex = len(re.findall(rf"\\(?:appendix)?{rank}\{{", body))
        assert (frame["highlight"] == rank).sum() == in_latex, rank


def test_spot_values_read_by_hand() -> None:
    for (table_id, section, row, sparsity, budget, metric), want in SPOT_VALUES.items():
        frame = load_paper_table(table_id)
        hit = frame[
            (frame["section"] == section)
            & (frame["row"] == row)
            & (frame["sparsity"] == sparsity)
            & (frame["budget"] == budget)
            & (frame["metric"] == metric)
        ]
        assert len(hit) == 1, (table_id, row, sparsity, budget, metric)
        mean, std, highlight = want
        assert hit["mean"].iloc[0] == pytest.approx(mean)
        assert hit["std"].iloc[0] == pytest.approx(std)
        assert hit["highlight"].iloc[0] == highlight


def test_wide_tables_spot_values() -> None:
    methods = load_paper_table("methods").set_index("method")
    assert not bool(methods.loc["CS", "sparsity_specifiable"])
    assert int(methods.loc["CS", "additional_hyperparameters"]) == 3
    assert bool(methods.loc["IMP", "sparsity_agnostic_training"])
    assert not bool(methods.loc["IMP", "pruning_stable"])
    assert methods["pruning_stable"].sum() == 9
    config = load_paper_table("problem_config")
    maxvit = config[config["network"] == "MaxViT"].iloc[0]
    assert (maxvit["dataset"], maxvit["epochs"], maxvit["batch_size"]) == ("ImageNet", 200, 256)
    assert (maxvit["unpruned_mean"], maxvit["unpruned_std"]) == (78.0, 0.02)
    assert maxvit["lr_schedule"].startswith("0.2 t/20 for t in [1, 20]; 0.2 for t in [20, 60]")
    assert list(config["metric"]).count("iou") == 2


# --------------------------------------------------------------------------- schema


@pytest.mark.parametrize("table_id", LONG_TABLES)
def test_long_schema(table_id: str) -> None:
    frame = load_paper_table(table_id)
    assert tuple(frame.columns) == LONG_COLUMNS
    assert set(frame["table"]) == {table_id}
    assert set(frame["highlight"]) <= {"", "first", "second", "third"}
    assert set(frame["metric"]) <= {"accuracy", "iou", "bleu", "speedup", "sparsity", "img_per_s"}
    assert frame["mean"].dtype == float and frame["std"].dtype == float
    assert not frame.duplicated(["block", "row", "col"]).any()
    # A cell without a mean is exactly a "---" cell.
    assert (frame["mean"].isna() == (frame["note"] == MISSING_NOTE)).all()
    assert not frame["row"].str.contains(r"\\|ours|[{}]").any()


def test_unknown_table_is_a_value_error_listing_known_ids() -> None:
    with pytest.raises(ValueError, match="appendix-cifar10-results") as info:
        load_paper_table("no-such-table")
    assert "no-such-table" in str(info.value)


def test_labels_are_accepted_as_ids() -> None:
    by_label = load_paper_table("table:gmp-vs-bimp-cifar100")
    pd.testing.assert_frame_equal(by_label, load_paper_table("gmp-vs-bimp-cifar100"))


# --------------------------------------------------------------------------- the checker


def _cifar10(parsed: dict) -> tuple[pd.DataFrame, pd.DataFrame]:
    table_id = "appendix-cifar10-results"
    return load_paper_table(table_id).copy(), expected_frame(table_id, parsed[table_id])


def test_checker_reports_a_corrupted_mean(parsed: dict) -> None:
    actual, expected = _cifar10(parsed)
    actual.loc[5, "mean"] += 0.01
    problems = compare_table("appendix-cifar10-results", actual, expected)
    assert len(problems) == 1 and " mean: " in problems[0]


def test_checker_reports_std_highlight_and_position_errors(parsed: dict) -> None:
    actual, expected = _cifar10(parsed)
    actual.loc[1, "highlight"] = "second"  # BIMP 90% accuracy is printed as first
    actual.loc[2, "std"] = math.nan
    actual.loc[3, "col"] = 99
    problems = compare_table("appendix-cifar10-results", actual, expected)
    assert any(" highlight: " in p for p in problems)
    assert any(" std: " in p for p in problems)
    assert any("missing from csv" in p for p in problems)
    assert any("not in latex" in p for p in problems)


def test_checker_reports_dropped_rows_and_wide_table_errors(parsed: dict) -> None:
    actual, expected = _cifar10(parsed)
    problems = compare_table("appendix-cifar10-results", actual.drop(index=[0]), expected)
    assert problems and "missing from csv" in problems[0]
    methods = load_paper_table("methods").copy()
    methods.loc[0, "pruning_stable"] = True
    problems = compare_table("methods", methods, expected_frame("methods", parsed["methods"]))
    assert problems == ["methods: cell {'method': 'IMP'} pruning_stable: csv='True' latex='False'"]


# --------------------------------------------------------------------------- the parser


@pytest.mark.parametrize(
    ("latex", "mean", "std", "highlight"),
    [
        (r"\appendixfirst{93.42 \small{\textpm 0.33}}", 93.42, 0.33, "first"),
        (r"\third{92.84 \small{\textpm 0.42}}", 92.84, 0.42, "third"),
        (r"93.40  \small{\textpm 0.36}", 93.40, 0.36, ""),
        (r"11 \textpm 2.5", 11, 2.5, ""),
        (r"29 \small{\textpm} 1.2", 29, 1.2, ""),
        ("3638", 3638, None, ""),
        (r"\cmark", 1, None, ""),
    ],
)
def test_parse_value_cell_markup_variants(
    latex: str, mean: float, std: float | None, highlight: str
) -> None:
    value = parse_value_cell(latex)
    assert value is not None
    assert (value.mean, value.std, value.highlight) == (mean, std, highlight)


def test_parse_value_cell_missing_and_text() -> None:
    missing = parse_value_cell(" --- ")
    assert missing is not None and missing.mean is None and missing.note == MISSING_NOTE
    assert parse_value_cell(r"\textbf{Budget:}") is None
    assert parse_value_cell(r"2.5\%") is None
