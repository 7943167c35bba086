"""``prunebench table GRID.toml``: a user's own grid as a table, method x goal sparsity."""

from __future__ import annotations

import io
from pathlib import Path

import pandas as pd
import pytest
from fake_runs import finish
from helpers import ROOT

from benchmark.cli import main

SMOKE_GRID = ROOT / "slurm" / "grids" / "smoke.toml"


def _runs(store: Path) -> list:
    from benchmark.launch import prepare
    from benchmark.launch.grid import load_grid

    return prepare(load_grid(SMOKE_GRID), store).runs


def _csv(argv: list[str], capsys: pytest.CaptureFixture) -> pd.DataFrame:
    assert main([*argv, "--format", "csv"]) == 0
    return pd.read_csv(io.StringIO(capsys.readouterr().out))


def test_a_grid_file_is_tabulated_by_method_and_goal_sparsity_selecting_by_validation(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    store = tmp_path / "runs"
    runs = _runs(store)
    for run in runs:
        # BIMP's (T0, J) = (3, 1) validates better but tests worse: validation decides.
        better = run.values.get("budget.initial_epochs") == 3
        val, test = (0.9, 0.7) if better else (0.8, 0.95)
        finish(store, run.cfg, val=val, test=test, sparsity=run.cfg.method.sparsity or 0.0)
    frame = _csv(["table", str(SMOKE_GRID), "--store", str(store)], capsys)
    acc = frame[frame["metric"].eq("accuracy") & frame["mean"].notna()]
    cells = {(r["row"], r["sparsity"]): r["mean"] for r in acc.to_dict("records")}
    assert set(cells) == {("dense", 0.0), ("bimp", 80.0), ("bimp", 90.0), ("imp", 80.0),
                          ("imp", 90.0)}  # fmt: skip
    assert cells[("bimp", 80.0)] == pytest.approx(70.0)  # the configuration validation chose
    # --by splits a swept key into rows instead of selecting over it.
    by = _csv(["table", str(SMOKE_GRID), "--store", str(store), "--by", "budget.cycles"], capsys)
    assert {"bimp (cycles=1)", "bimp (cycles=2)"} <= set(by["row"])


def test_runs_a_grid_store_lacks_are_missing_and_the_grid_s_output_dir_is_its_store(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    store = tmp_path / "runs"
    grid = tmp_path / "grid.toml"
    grid.write_text(SMOKE_GRID.read_text().replace("[base]\n", f'[base]\noutput.dir = "{store}"\n'))
    dense = next(r for r in _runs(store) if r.method == "dense")
    finish(store, dense.cfg, val=0.9, test=0.9, sparsity=0.0)
    assert main(["table", str(grid)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("### smoke (grid ")
    assert "1 of 7 planned runs found" in out and "| bimp |" in out and "missing (2/2)" in out


def test_a_grid_table_refuses_paper_values_and_unknown_keys(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    argv = ["table", str(SMOKE_GRID), "--store", str(tmp_path)]
    assert main([*argv, "--paper"]) == 2
    assert "--paper = True is invalid" in capsys.readouterr().err
    assert main([*argv, "--by", "optim.momentum"]) == 2
    assert "--by = 'optim.momentum' is invalid; allowed: keys the grid sweeps" in (
        capsys.readouterr().err
    )
    assert main(["table", str(tmp_path / "none.toml")]) == 2
