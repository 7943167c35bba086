"""Slices: reproduce, table and plot a part of a spec; everything outside it is shown missing."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest
from fake_runs import finish_all

from benchmark.cli import main
from benchmark.core.errors import ConfigError
from benchmark.experiments import get_experiment
from benchmark.experiments.base import PLAN_COLUMNS

SPEC = "appendix-cifar10-results"


def _plan() -> pd.DataFrame:
    rows = [
        ("b90s0", "s", "BIMP", 90.0, "", 0.0, "", 0, "bimp"),
        ("b90s1", "s", "BIMP", 90.0, "", 0.0, "", 1, "bimp"),
        ("b95s0", "s", "BIMP", 95.0, "", 0.0, "", 0, "bimp"),
        ("g90s0", "s", "GMP", 90.0, "", 0.0, "", 0, "gmp"),
        ("cs0", "s", "CS", float("nan"), "", 0.0, "", 0, "cs"),
    ]
    return pd.DataFrame(rows, columns=PLAN_COLUMNS)


def test_a_slice_keeps_its_methods_sparsities_and_seeds_and_every_unplaced_run() -> None:
    from benchmark.experiments.slices import Slice, parse_slice

    plan = _plan()
    assert list(parse_slice("bimp", "90", "0").apply(plan)["run_id"]) == ["b90s0"]
    # CS has no goal sparsity: its runs are placed after training, so a sparsity keeps them.
    assert list(parse_slice(sparsities="95").apply(plan)["run_id"]) == ["b95s0", "cs0"]
    assert Slice().everything and len(Slice().apply(plan)) == len(plan)
    within = parse_slice("bimp", "90")
    assert within.outside("s", ["gmp"], 90.0) and within.outside("s", ["bimp"], 95.0)
    assert not within.outside("s", ["bimp"], 90.0) and not within.outside("s", ["bimp"], None)
    assert within.label() == "methods bimp; sparsities 90%"


@pytest.mark.parametrize(
    ("flags", "flag", "allowed"),
    [
        (("nope", None, None, None), "--methods", "bimp, gmp, cs"),
        ((None, "97", None, None), "--sparsities", "90, 95"),
        ((None, None, "4", None), "--seeds", "0, 1"),
        ((None, None, None, "ImageNet"), "--section", "s"),
    ],
)
def test_a_value_the_spec_lacks_names_the_flag_and_the_values_it_has(
    flags: tuple, flag: str, allowed: str
) -> None:
    from benchmark.experiments.slices import parse_slice

    with pytest.raises(ConfigError, match=re.escape(flag) + ".*" + re.escape(allowed)):
        parse_slice(*flags).check(_plan(), "the spec")


def test_a_flag_that_is_not_a_number_is_refused_while_parsing() -> None:
    from benchmark.experiments.slices import parse_slice

    with pytest.raises(ConfigError, match="--sparsities = 'ninety'.*percent"):
        parse_slice(sparsities="ninety")
    with pytest.raises(ConfigError, match="--seeds = 'x'.*integers"):
        parse_slice(seeds="x")


def test_bad_slice_flags_stop_reproduce_before_anything_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    store = tmp_path / "runs"
    assert main(["reproduce", SPEC, "--store", str(store), "--methods", "bimp,nope"]) == 2
    err = capsys.readouterr().err
    assert "--methods = 'nope' is invalid" in err and "bimp, gmp" in err
    assert main(["reproduce", SPEC, "--store", str(store), "--sparsities", "97"]) == 2
    assert "--sparsities = '97' is invalid; allowed: values of" in capsys.readouterr().err
    assert not store.exists()


@pytest.mark.slow
def test_a_slice_of_the_paper_table_plans_at_most_a_tenth_of_it(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    args = ["reproduce", SPEC, "--scale", "paper", "--store", str(tmp_path), "--dry-run"]
    assert main([*args, "--methods", "bimp", "--sparsities", "90"]) == 0
    err = capsys.readouterr().err
    sliced, full = map(int, re.search(r": (\d+) runs of the spec's (\d+)", err).groups())
    assert full == 6496 and 0 < sliced <= full / 10
    # The cost lines cover the slice only: one row (BIMP), its 200-epoch runs.
    assert re.search(rf"\n  BIMP\s+{sliced:,}\s+{sliced:,}\s+{200 * sliced:,}\s", err)
    assert "GMP" not in err and list(tmp_path.iterdir()) == []


def _table(store: Path, *flags: str, capsys: pytest.CaptureFixture) -> str:
    assert main(["table", SPEC, "--store", str(store), "--scale", "smoke", *flags]) == 0
    return capsys.readouterr().out


def test_the_table_of_a_slice_marks_every_cell_outside_it_apart_from_missing_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    store = tmp_path / "runs"
    finish_all(store, [r.cfg for r in get_experiment(SPEC).runs("smoke", store)])
    full = _table(store, capsys=capsys)
    assert "missing" not in full.split("¹ ²")[0]
    out = _table(store, "--methods", "bimp", "--sparsities", "90", capsys=capsys)
    assert "slice: methods bimp; sparsities 90%" in out.splitlines()[0]
    body = [line for line in out.splitlines() if line.startswith("| ") and "---" not in line]
    cells = {line.split("|")[1].strip(): line.split("|")[2:-1] for line in body[1:]}
    bimp = [c.strip() for c in cells.pop("BIMP")]
    # img/s and the three sub-columns at 90% have values; 95% is outside the slice.
    assert all("outside" not in c for c in bimp[:4])
    assert all(c.startswith("outside slice (") for c in bimp[4:])
    assert all(c.strip().startswith("outside slice") for row in cells.values() for c in row)
    # Issue 35: a cell outside the slice reads differently from a not-yet-run cell inside it,
    # and the legend says what (n/m) counts.
    assert "missing" not in out.split("¹ ²")[0]
    assert "outside slice (m/m): the cell's m planned runs are not part of this slice" in out
    assert "missing: 0 inside the slice, 192 outside it" in out
    store.joinpath("x").mkdir()  # a store where BIMP at 90% has not run: missing, inside
    inside = _table(store / "x", "--methods", "bimp", "--sparsities", "90", capsys=capsys)
    assert "| missing (8/8) |" in inside and "missing (n/m): n of the cell's m planned" in inside
    # BIMP at 90% on its 8 seeds, of the smoke grid's 200 runs (issue 30).
    assert "8 of 200 planned runs found" in out


def test_a_seed_slice_reports_the_other_seeds_missing_and_plot_takes_the_flags(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    store = tmp_path / "runs"
    finish_all(store, [r.cfg for r in get_experiment(SPEC).runs("smoke", store)])
    out = _table(store, "--seeds", "0", "--format", "csv", capsys=capsys)
    frame = pd.read_csv(__import__("io").StringIO(out))
    goals = frame[frame["sparsity"].notna() & frame["row"].eq("BIMP")]
    assert set(goals["note"]) == {"partial"} and set(goals["missing"]) == {7}  # seeds 1-7
    assert set(frame["built"]) == {"slice: seeds 0"}
    figures = tmp_path / "figures"
    argv = ["plot", SPEC, "--store", str(store), "--methods", "gmp", "--out", str(figures)]
    assert main(argv) == 0
    assert (figures / f"{SPEC}.png").exists()
