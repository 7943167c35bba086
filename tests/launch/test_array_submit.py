"""``submit --array K``: each job trains its compatible runs as array models, packs the rest."""

from __future__ import annotations

from collections import Counter
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


def test_calibrate_measures_arrays_and_the_dry_run_prices_runs_that_fit_one_at_its_rate(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    import json

    from benchmark.cli.costs import cost_text
    from benchmark.launch import grid_nodes, prepare
    from benchmark.launch.estimate import array_sizes
    from benchmark.launch.grid import load_grid

    cal = ["calibrate", "--device", "cpu", "--models", "cnn_small", "--steps", "3", "--threads"]
    for flags in ([], ["--array", "2"]):
        assert main([*cal, "1", "--store", str(tmp_path), *flags]) == 0
    assert "cnn_small/digits (fp32, 2 runs as one array) on cpu" in capsys.readouterr().out
    entries = json.loads((tmp_path / "calibration" / "throughput.json").read_text())["entries"]
    rate = {e.get("array", 1): e["images_per_s"] for e in entries}
    assert sorted(rate) == [1, 2]
    # One line per run: each priced alone, or at the array rate where it forms an array.
    nodes = grid_nodes(prepare(load_grid(GRID), tmp_path))
    groups = {n.run_id: [(n.run_id, n.cfg)] for n in nodes}
    _, alone = cost_text(groups, set(), str(tmp_path))
    text, arrayed = cost_text(groups, set(), str(tmp_path), array=4)
    sizes = array_sizes([n.cfg for n in nodes], 4)
    # The smoke grid forms arrays of 4 and 2 runs and leaves one run to pack (see above).
    assert sorted(Counter(sizes.values()).items()) == [(2, 2), (4, 4)] and len(nodes) == 7
    for one, many in zip(alone.lines, arrayed.lines, strict=True):
        ratio = rate[1] / rate[2] if one.label in sizes else 1.0  # the packed run: its own rate
        assert many.all_hours == pytest.approx(one.all_hours * ratio), one.label
    assert "arrays of 2 runs" in text


def test_calibrate_refuses_an_array_below_one(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    args = ["calibrate", "--device", "cpu", "--models", "cnn_small", "--array", "0"]
    assert main([*args, "--store", str(tmp_path)]) == 2
    assert "--array = 0 is invalid; allowed: an integer >= 1" in capsys.readouterr().err
