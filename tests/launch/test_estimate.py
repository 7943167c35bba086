"""What a plan costs before any compute: passes, device-hours from measured throughput only."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
from fake_runs import finish
from helpers import ROOT

from benchmark.cli import main
from benchmark.experiments import get_experiment

SPEC = "appendix-cifar10-results"
SMOKE_GRID = str(ROOT / "slurm" / "grids" / "smoke.toml")
# CIFAR-10's 50,000 training images less the 10% validation split.
CIFAR10_PASS = 45_000
DIGITS_PASS = 1_293


def _grid_runs(store: Path) -> list:
    from benchmark.launch import grid_nodes, prepare
    from benchmark.launch.grid import load_grid

    return grid_nodes(prepare(load_grid(SMOKE_GRID), store))


def _groups(store: Path) -> dict[str, list]:
    """The smoke grid's runs by method, as (run id, config)."""
    groups: dict[str, list] = {}
    for n in _grid_runs(store):
        if n.in_grid:
            groups.setdefault(n.cfg.method.name, []).append((n.run_id, n.cfg))
    return groups


def _cost(store: Path, device: str | None = None):
    from benchmark.cli.costs import cost_text
    from benchmark.store.results import Store

    groups = _groups(store)
    finished = {
        rid for pairs in groups.values() for rid, _ in pairs if Store(store).is_finished(rid)
    }
    return cost_text(groups, finished, str(store), device=device)


def _calibrated_on_cpu(store: Path) -> None:
    """A CPU calibration of the smoke grid's model (5,000 images/s, no peak memory)."""
    from benchmark.store.calibration import Calibration, write_calibrations

    write_calibrations(store, [Calibration("cnn_small", "digits", "fp32", "cpu", 5000.0, 128, 50)])


def test_passes_count_each_method_s_epochs_fine_tuning_and_dense_parents_once() -> None:
    from benchmark.training.passes import parent_of, run_passes

    runs = get_experiment(SPEC).runs("paper", "results/runs")
    bimp = next(r.cfg for r in runs if r.cfg.method.name == "bimp")
    gmp = next(r.cfg for r in runs if r.cfg.method.name == "gmp")
    assert run_passes(bimp) == 200  # T0 + cycles = T, no post-training FT
    assert run_passes(gmp) == 200 + 30  # the method's T, then 30 epochs of FT (Section 4.3)
    parents = {p.run_id for r in runs if (p := parent_of(r.cfg)) is not None}
    # LC/GSM from pretrained: a dense parent per seed and weight decay (the paper's code's rule).
    assert len(parents) == 8


@pytest.mark.slow
def test_the_paper_dry_run_prints_passes_per_method_and_unknown_hours_with_the_command(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    args = ["reproduce", SPEC, "--scale", "paper", "--store", str(tmp_path), "--dry-run"]
    assert main(args) == 0
    err = capsys.readouterr().err
    assert re.search(r"\n  BIMP\s+1,728\s+1,728\s+345,600\s+345,600\s+unknown", err)
    assert re.search(r"\n  dense parents\s+8\s+8\s+1,600\s+1,600\s+unknown", err)
    assert re.search(r"\n  total\s+6,504\s+6,504\s+1,036,800\s+1,036,800\s+unknown", err)
    command = f"prunebench calibrate --device cuda --models resnet56:cifar10 --store {tmp_path}"
    assert command in err
    assert list(tmp_path.iterdir()) == []  # a dry run writes nothing

    # A calibration on the CPU (ResNet-56, tiny batch) makes every figure a number.
    cal = ["calibrate", "--device", "cpu", "--models", "resnet56", "--batch", "4"]
    assert main([*cal, "--steps", "2", "--threads", "1", "--store", str(tmp_path)]) == 0
    entry = json.loads((tmp_path / "calibration" / "throughput.json").read_text())["entries"][0]
    assert (entry["model"], entry["dataset"], entry["device"]) == ("resnet56", "cifar10", "cpu")
    capsys.readouterr()
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "unknown" not in err and "calibration" in err and "on cpu" in err
    # BIMP priced at the dense harness's calibrated rate: at least that many hours.
    found = re.search(r"\n  BIMP(?:\s+[\d,]+){4}\s+≥ ([\d,.]+)", err)
    hours = float(found.group(1).replace(",", ""))
    expected = 1_728 * 200 * CIFAR10_PASS / entry["images_per_s"] / 3600
    assert hours == pytest.approx(expected, rel=0.01, abs=1.0)


def test_a_cpu_calibration_of_a_tiny_model_turns_unknown_into_runs_epochs_images_over_rate(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    _, before = _cost(tmp_path)
    assert not before.total.known and before.device is None
    cal = ["calibrate", "--device", "cpu", "--models", "cnn_small", "--steps", "3"]
    assert main([*cal, "--threads", "1", "--store", str(tmp_path)]) == 0
    assert "cnn_small/digits (fp32) on cpu" in capsys.readouterr().out
    rate = json.loads((tmp_path / "calibration" / "throughput.json").read_text())["entries"][0]
    text, est = _cost(tmp_path)
    assert est.total.known and est.device == "cpu"
    # The smoke grid: dense 3 epochs, 4 BIMP runs of 4, 2 IMP runs of 2 (from the dense run).
    epochs = 3 + 4 * 4 + 2 * 2
    assert est.total.passes == epochs
    assert est.total.all_hours == pytest.approx(epochs * DIGITS_PASS / rate["images_per_s"] / 3600)
    assert "images/s of cnn_small/digits (fp32): calibration" in text


def test_finished_runs_in_the_store_come_before_the_calibration_and_name_peak_memory(
    tmp_path: Path,
) -> None:
    from benchmark.store.calibration import Calibration, write_calibrations

    nodes = _grid_runs(tmp_path)
    gpu = {"device": "cuda:0", "device_name": "NVIDIA H200"}
    write_calibrations(
        tmp_path, [Calibration("cnn_small", "digits", "fp32", "cpu", 5000.0, 128, 50)]
    )
    dense = next(n.cfg for n in nodes if n.cfg.method.name == "dense")
    # A dense run timed on a GPU: its images/s, images per epoch and peak memory are used.
    finish(tmp_path, dense, val=0.9, test=0.9, images_per_s=2000.0, environment=gpu,
           train_images_per_epoch=1000, peak_memory_bytes=3 * 2**30)  # fmt: skip
    text, est = _cost(tmp_path, device="H200")
    assert est.device == "cuda (NVIDIA H200)"
    assert "median of 1 finished dense run(s) in the store" in text
    # Every other run of the grid is priced at the dense run's rate (no run of its own method).
    missing = 4 * 4 + 2 * 2
    assert est.total.hours == pytest.approx(missing * 1000 / 2000.0 / 3600)
    assert re.search(r"\n  total .* 3\.0 GiB", text)
    # On the CPU only the calibration measured it (images per epoch: as the run recorded).
    _, cpu = _cost(tmp_path, device="cpu")
    assert cpu.device == "cpu" and cpu.total.all_hours == pytest.approx(23 * 1000 / 5000 / 3600)


def test_submit_dry_run_prints_the_cost_per_method_and_a_device_nothing_measured_is_unknown(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    argv = ["submit", SMOKE_GRID, "--store", str(tmp_path), "--dry-run"]
    assert main([*argv, "--estimate-device", "H100"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"\n  bimp\s+4\s+4\s+16\s+16\s+unknown", out)
    assert "H100 (not measured)" in out and "prunebench calibrate --device cuda" in out


def test_a_run_records_its_images_per_epoch_for_later_estimates(tmp_path: Path) -> None:
    from helpers import tiny_config

    from benchmark.training.device import resolve_device
    from benchmark.training.runner import execute

    cfg = tiny_config(tmp_path, "method.name=dense", "budget.epochs=1")
    metrics = execute(cfg)["metrics"]
    assert metrics["train_images_per_epoch"] == DIGITS_PASS
    # Measured on a GPU only (tiny_config trains on the GPU where there is one).
    if resolve_device(cfg.runtime.device).type == "cuda":
        assert metrics["peak_memory_bytes"] > 0
    else:
        assert "peak_memory_bytes" not in metrics


def test_calibrate_refuses_bad_flags_before_timing_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    base = ["calibrate", "--store", str(tmp_path)]
    assert main([*base, "--models", "nope"]) == 2
    assert "--models = 'nope' is invalid; allowed: models of prunebench" in capsys.readouterr().err
    assert main([*base, "--models", "resnet56:coco"]) == 2
    assert "image-classification dataset" in capsys.readouterr().err
    assert main([*base, "--models", "resnet56", "--precision", "fp8"]) == 2
    assert "--precision = 'fp8' is invalid; allowed: comma-separated fp32, bf16, fp16" in (
        capsys.readouterr().err
    )
    assert not tmp_path.joinpath("calibration").exists()


@pytest.mark.parametrize("content", ["garbage{", '{"entries": [{"x": 1}]}', "[]"])
def test_a_damaged_calibration_file_is_one_line_naming_it(
    content: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    from benchmark.cli import main
    from benchmark.store.calibration import calibration_path

    path = calibration_path(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text(content)
    args = ["reproduce", "appendix-cifar10-results", "--scale", "paper", "--dry-run"]
    assert main([*args, "--store", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert f"prunebench: {path}:" in err and "prunebench calibrate" in err
    assert "Traceback" not in err


def test_hours_at_a_dense_calibration_say_at_least_and_a_cpu_price_of_a_gpu_plan_says_so(
    tmp_path: Path,
) -> None:
    from benchmark.cli.costs import cost_text

    _calibrated_on_cpu(tmp_path)
    text, est = _cost(tmp_path)
    # The smoke grid's BIMP and IMP runs are priced at the dense harness's rate: lower bounds.
    assert est.total.at_dense_rate == {"bimp", "imp"}
    assert re.search(r"\n  bimp(?:\s+[\d,]+){4}\s+≥ [\d.]+", text)
    assert re.search(r"\n  dense(?:\s+[\d,]+){4}\s+[\d.]+", text)  # dense is its own rate
    assert re.search(r"the whole plan: \d+ passes, at least [\d.e-]+ h", text)
    # A plan that runs on GPUs (a GPU profile, slurm, paper scale) priced from a CPU calibration.
    groups = _groups(tmp_path)
    gpu_text, _ = cost_text(groups, set(), str(tmp_path), suggest="cuda")
    assert "priced on cpu, the only device measured, although this plan runs on GPUs" in gpu_text
    assert "CPU hours, not GPU hours" in gpu_text
    cpu_text, _ = cost_text(groups, set(), str(tmp_path), suggest="cpu")
    assert "priced on cpu" not in cpu_text


def test_peak_memory_says_what_is_not_measured_and_the_total_is_a_lower_bound(
    tmp_path: Path,
) -> None:
    _calibrated_on_cpu(tmp_path)
    text, _ = _cost(tmp_path)
    assert "peak mem - = not measured for cnn_small/digits (fp32)" in text
    assert "measured on CUDA devices only; a CPU run or calibration records none" in text
    # A GPU run measured one workload's peak; another workload of the plan has none.
    nodes = _grid_runs(tmp_path)
    dense = next(n.cfg for n in nodes if n.cfg.method.name == "dense")
    gpu = {"device": "cuda:0", "device_name": "NVIDIA H200"}
    finish(tmp_path, dense, val=0.9, test=0.9, images_per_s=2000.0, environment=gpu,
           peak_memory_bytes=3 * 2**30)  # fmt: skip
    from benchmark.cli.costs import cost_text
    from benchmark.config.parse import replace_section

    other = replace_section(dense, model=dataclasses.replace(dense.model, name="cnn_wide"))
    groups = {"dense": [(dense.run_id, dense)], "wide": [(other.run_id, other)]}
    text, _ = cost_text(groups, set(), str(tmp_path), device="H200")
    assert re.search(r"\n  total .* ≥ 3\.0 GiB", text)
    assert "the largest measured is 3.0 GiB; unknown for cnn_wide/digits (fp32)" in text


def test_calibrate_records_its_threads_and_repeated_timings_with_their_spread(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    from benchmark.launch.settings import available_cores
    from benchmark.store.calibration import read_calibrations

    cal = ["calibrate", "--device", "cpu", "--models", "cnn_small", "--steps", "2"]
    assert main([*cal, "--repeats", "3", "--store", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    (entry,) = read_calibrations(tmp_path)
    # No --threads: the launcher's rule for one local run, as plain `run` follows.
    assert entry.threads == available_cores()
    assert len(entry.timings) == 3 and entry.images_per_s == sorted(entry.timings)[1]
    assert f"{entry.threads} thread" in out and "median of 3 timings" in out
    text, _ = _cost(tmp_path)
    assert re.search(
        rf"{entry.threads} threads?, median of 3 timings, [\d,]+-[\d,]+ images/s", text
    )


def test_plain_run_follows_the_launchers_thread_rule(tmp_path: Path) -> None:
    import json as json_

    from benchmark.launch.settings import available_cores

    argv = ["run", "--set", f"output.dir='{tmp_path}'", "--set", "logging.progress=false",
            "--set", "budget.epochs=1", "--set", "method.name=dense", "--json"]  # fmt: skip
    import contextlib
    import io

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        assert main(argv) == 0
    record = json_.loads(buffer.getvalue())
    assert record["config"]["runtime"]["threads"] == available_cores()


def test_array_measurements_choose_a_device_and_runs_of_arrays_price_no_single_run(
    tmp_path: Path,
) -> None:
    """A store whose only measurement is an array calibration still has a device to price on
    (the dry run then uses the array rate), and a run trained in an array, whose recorded rate
    is the array's over K, is no measurement of a run alone."""
    from benchmark.launch.estimate import Throughputs, Workload
    from benchmark.store.calibration import Calibration, write_calibrations

    w = Workload("cnn_small", "digits", "fp32")
    array = Calibration("cnn_small", "digits", "fp32", "cuda (H100)", 9e4, 128, 50, array=4)
    write_calibrations(tmp_path, [array])
    found = Throughputs.of_store(str(tmp_path), records=[])
    assert found.choose_device([w], None) == "cuda (H100)"
    assert found.lookup(w, "cuda (H100)", array=4).images_per_s == 9e4
    config = {"model": {"name": "cnn_small"}, "data": {"name": "digits"}}
    config["method"] = {"name": "dense"}
    record = {"status": "finished", "config": config, "environment": {"device": "cpu"}}
    alone = {**record, "metrics": {"images_per_s": 1000.0}}
    arrayed = {**record, "metrics": {"images_per_s": 250.0, "array": {"size": 4}}}
    found = Throughputs.of_store(str(tmp_path), records=[alone, arrayed])
    assert found.runs[(w, "cpu", "")] == [1000.0]
