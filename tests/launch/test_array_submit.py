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
    # The smoke grid: the dense parent (3 epochs) and 4 BIMP runs (4 epochs) in one job form
    # an array of 4 slots (the parent takes the first that frees: 19 passes in 4 x 7 slot
    # epochs), the 2 IMP runs (2 epochs, after the parent) another of 2.
    assert "arrays (--array 4): 2 arrays of 7 runs in all (6 slots, 72% full); 0 runs" in out
    assert "dataset passes in arrays: 23 of 23 (100.0%)" in out


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
    assert "training 5 runs as one array (loop layout, 4 slots" in out
    assert "takes slot" in out and "training 2 runs as one array" in out
    records = {r["run_id"]: r for r in Store(tmp_path).records()}
    assert len(records) == 7 and all(r["status"] == "finished" for r in records.values())
    sizes = sorted(r["metrics"].get("array", {}).get("size", 1) for r in records.values())
    assert sizes == [2, 2, 4, 4, 4, 4, 4]
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
    assert (
        "cnn_small/digits (fp32, 2 runs as one array, loop layout) on cpu"
        in capsys.readouterr().out
    )
    entries = json.loads((tmp_path / "calibration" / "throughput.json").read_text())["entries"]
    rate = {e.get("array", 1): e["images_per_s"] for e in entries}
    assert sorted(rate) == [1, 2]
    # One line per run: each priced alone, or at the array rate where it forms an array.
    nodes = grid_nodes(prepare(load_grid(GRID), tmp_path))
    groups = {n.run_id: [(n.run_id, n.cfg)] for n in nodes}
    _, alone = cost_text(groups, set(), str(tmp_path))
    text, arrayed = cost_text(groups, set(), str(tmp_path), array=4)
    sizes = array_sizes([n.cfg for n in nodes], 4)
    # Over the whole plan, the smoke grid's 7 runs form one array of 4 slots, 23 passes in
    # 4 x 7 slot epochs (an empty slot costs what a full one does).
    fill = 23 / 28
    assert len(sizes) == 7 and all(k == 4 and f == pytest.approx(fill) for k, f in sizes.values())
    for one, many in zip(alone.lines, arrayed.lines, strict=True):
        ratio = rate[1] / rate[2] / fill
        assert many.all_hours == pytest.approx(one.all_hours * ratio), one.label
    assert "arrays of 2 runs" in text


def test_calibrate_refuses_an_array_below_one(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    args = ["calibrate", "--device", "cpu", "--models", "cnn_small", "--array", "0"]
    assert main([*args, "--store", str(tmp_path)]) == 2
    assert "--array = 0 is invalid; allowed: an integer >= 1" in capsys.readouterr().err


def _grid(tmp_path: Path, model: str, data: str, epochs: int = 2) -> Path:
    """A grid of two dense runs (seeds 0 and 1) of ``model`` on ``data``."""
    path = tmp_path / f"{model}.toml"
    path.write_text(
        f'name = "{model}"\nseeds = [0, 1]\n\n[base]\ndata.name = "{data}"\n'
        f'data.batch_size = 128\nmodel.name = "{model}"\nbudget.epochs = {epochs}\n'
        "logging.progress = false\n\n[methods.dense]\n"
    )
    return path


def test_a_dry_run_counts_as_arrays_only_runs_that_train_as_arrays(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """WRN-28-10 draws random numbers (dropout): its runs are packed, and the dry run says so
    (and asks for no array rate, which no run would use)."""
    grid = _grid(tmp_path, "wrn28_10", "cifar10")
    assert main(["submit", str(grid), "--store", str(tmp_path), "--array", "4", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "arrays (--array 4): 0 arrays of 0 runs in all (0 slots); 2 runs packed" in out
    assert "2 packed: the model draws random numbers in its forward (Dropout)" in out
    assert "no array rate" not in out


def test_a_dry_run_with_arrays_says_when_no_array_rate_is_measured(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """--array K is never silently priced at a run's own rate: the dry run says no array rate
    was measured and names the calibrate command that measures one; reproduce's dry run says
    how its jobs form arrays, as submit's does."""
    from benchmark.store.calibration import Calibration, write_calibrations

    single = Calibration("cnn_small", "digits", "fp32", "cpu", 5000.0, 128, 50)
    write_calibrations(tmp_path, [single])
    assert _submit(tmp_path, "--array", "4", "--dry-run") == 0
    out = capsys.readouterr().out
    assert "--array 4: no array rate measured for cnn_small/digits (fp32) on cpu" in out
    assert f"calibrate --device cpu --models cnn_small:digits --array 4 --store {tmp_path}" in out
    # Measured for another layout: still none for the CPU's default (loop).
    vmap = Calibration("cnn_small", "digits", "fp32", "cpu", 9e3, 128, 50, array=2, layout="vmap")
    write_calibrations(tmp_path, [vmap])
    assert _submit(tmp_path, "--array", "4", "--dry-run") == 0
    assert "no array rate measured" in capsys.readouterr().out
    assert _submit(tmp_path, "--array", "4", "--array-layout", "vmap", "--dry-run") == 0
    assert "no array rate measured" not in capsys.readouterr().out
    args = ["reproduce", "cifar10-envelope", "--dry-run", "--store", str(tmp_path)]
    assert main([*args, "--array", "4"]) == 0
    err = capsys.readouterr().err
    # Its two jobs (the 8 dense parents, then the 256 runs that start from them).
    assert "arrays (--array 4): 2 arrays of 264 runs in all (8 slots, 100% full); 0 runs" in err
    assert "dataset passes in arrays: 11,472 of 11,472 (100.0%)" in err
    assert "no array rate measured for cnn_small/digits (fp32) on cpu" in err


def test_the_array_layout_option_trains_the_grouped_layout_and_is_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    grid = str(_grid(tmp_path, "cnn_small", "digits", epochs=1))
    args = ["submit", grid, "--executor", "debug", "--store", str(tmp_path), "--threads", "1"]
    assert main([*args, "--array", "2", "--array-layout", "grouped"]) == 0
    assert "training 2 runs as one array (grouped layout)" in capsys.readouterr().out
    records = list(Store(tmp_path).records())
    assert [r["metrics"]["array"]["layout"] for r in records] == ["grouped", "grouped"]
    assert main([*args, "--array", "2", "--array-layout", "wide"]) == 2
    assert "--array-layout = 'wide' is invalid; allowed: one of vmap, loop, grouped" in (
        capsys.readouterr().err
    )
    assert main([*args, "--array-layout", "loop"]) == 2
    assert "together with --array K > 1 only" in capsys.readouterr().err


def test_the_job_log_says_an_array_trains_only_once_it_is_not_packed(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from benchmark.training.array import fit

    monkeypatch.setattr(fit, "why_not_together", lambda trainers: "a reason found at run time")
    grid = str(_grid(tmp_path, "cnn_small", "digits", epochs=1))
    args = ["submit", grid, "--executor", "debug", "--store", str(tmp_path), "--threads", "1"]
    assert main([*args, "--array", "2"]) == 0
    out = capsys.readouterr().out
    assert "training 2 runs packed, not as an array: a reason found at run time" in out
    assert "as one array" not in out
