"""``submit --runs-per-gpu K``: each job trains K runs at once and stores what each trains alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import ROOT

from benchmark.cli import main
from benchmark.store.results import Store
from benchmark.training.contract import comparable

GRID = ROOT / "slurm" / "grids" / "smoke.toml"


def _submit(store: Path, *flags: str, grid: Path = GRID) -> int:
    args = ["submit", str(grid), "--executor", "debug", "--store", str(store), "--threads", "1"]
    return main([*args, *flags])


def _results(store: Path) -> dict[str, dict]:
    return {r["run_id"]: r for r in Store(store).records()}


@pytest.mark.slow
def test_a_packed_grid_stores_what_the_grid_stores_unpacked(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    # Deterministic kernels: on a GPU, autotuned ones round differently from run to run.
    grid = tmp_path / "smoke.toml"
    grid.write_text(GRID.read_text().replace("[base]\n", "[base]\nruntime.deterministic = true\n"))
    assert "deterministic" in grid.read_text()
    assert _submit(tmp_path / "one", grid=grid) == 0
    assert _submit(tmp_path / "packed", "--runs-per-gpu", "3", grid=grid) == 0
    out = capsys.readouterr().out
    assert "each job trains up to 3 runs at once on its device" in out
    assert "training 3 runs at once" in out  # the debug executor's job ran in this process
    one, packed = _results(tmp_path / "one"), _results(tmp_path / "packed")
    assert sorted(one) == sorted(packed) and len(one) == 7
    for rid, record in one.items():
        assert record["status"] == packed[rid]["status"] == "finished"
        assert comparable(record["metrics"]) == comparable(packed[rid]["metrics"])
        assert json.dumps(record["history"]) == json.dumps(packed[rid]["history"])


def test_runs_per_gpu_is_refused_below_one_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    assert _submit(tmp_path, "--runs-per-gpu", "0") == 2
    assert "--runs-per-gpu = 0 is invalid; allowed: an integer >= 1" in capsys.readouterr().err
    assert not (tmp_path / "grids").exists() and not list(tmp_path.glob("*.json"))


def test_a_slurm_task_holds_at_least_the_runs_it_trains_at_once() -> None:
    from benchmark.launch import LaunchSettings

    assert LaunchSettings(runs_per_task=1, runs_per_gpu=4).task_runs() == 4
    assert LaunchSettings(runs_per_task=8, runs_per_gpu=4).task_runs() == 8
