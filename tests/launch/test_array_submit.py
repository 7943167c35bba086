"""``submit --array K``: each job trains its compatible runs as array models, packs the rest."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import ROOT

from benchmark.cli import main
from benchmark.store.results import Store

GRID = ROOT / "slurm" / "grids" / "smoke.toml"


def _submit(store: Path, *flags: str) -> int:
    args = ["submit", str(GRID), "--executor", "debug", "--store", str(store), "--threads", "1"]
    return main([*args, *flags])


def test_a_dry_run_says_how_many_arrays_and_packs_it_forms(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    assert _submit(tmp_path, "--array", "4", "--dry-run") == 0
    out = capsys.readouterr().out
    # The smoke grid: the dense parent alone in its job; its 4 BIMP runs (4 epochs) form one
    # array, the 2 IMP runs (2 epochs, after the parent) another.
    assert "arrays (--array 4): 2 arrays of 6 runs in all; 1 run packed instead" in out
    assert "1 packed: no other run of the grid fits its array" in out


def test_array_is_refused_below_one_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    assert _submit(tmp_path, "--array", "0") == 2
    assert "--array = 0 is invalid; allowed: an integer >= 1" in capsys.readouterr().err
    assert not list(tmp_path.glob("*.json"))


@pytest.mark.slow
def test_an_arrayed_grid_stores_every_run_as_its_own(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    assert _submit(tmp_path, "--array", "4") == 0
    out = capsys.readouterr().out
    assert "training 4 runs as one array" in out and "training 2 runs as one array" in out
    records = {r["run_id"]: r for r in Store(tmp_path).records()}
    assert len(records) == 7 and all(r["status"] == "finished" for r in records.values())
    sizes = sorted(r["metrics"].get("array", {}).get("size", 1) for r in records.values())
    assert sizes == [1, 2, 2, 4, 4, 4, 4]
    for record in records.values():
        if "array" in record["metrics"]:
            assert record["run_id"] in record["metrics"]["array"]["runs"]
