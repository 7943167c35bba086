"""Latency measurement and the measured speedup of stored runs (tiny repeats; no speed asserts)."""

from __future__ import annotations

import pytest
import torch

from benchmark.cli import main
from benchmark.core.errors import ConfigError
from benchmark.measure.latency import compare, measure
from benchmark.measure.run_latency import UNSTRUCTURED_NOTE, measure_run
from benchmark.models.registry import build_model
from benchmark.store.results import Store
from benchmark.training.runner import execute
from tests.helpers import tiny_config


def test_measure_reports_median_between_percentiles_and_throughput():
    model = build_model("cnn_small", 10, (1, 8, 8))
    t = measure(model, (1, 8, 8), batch=4, warmup=1, repeats=5)
    assert t.p10_ms <= t.median_ms <= t.p90_ms
    assert t.images_per_s == pytest.approx(4 / t.median_ms * 1000)
    assert (t.batch, t.repeats, t.warmup) == (4, 5, 1)


def test_bad_batch_and_repeats_name_the_field():
    model = build_model("cnn_small", 10, (1, 8, 8))
    with pytest.raises(ConfigError, match="batch"):
        measure(model, (1, 8, 8), batch=0)
    with pytest.raises(ConfigError, match="repeats"):
        measure(model, (1, 8, 8), batch=1, repeats=0)


def test_compare_records_speedup_per_batch_device_threads_and_versions():
    dense = build_model("cnn_small", 10, (1, 8, 8))
    result = compare(dense, dense, (1, 8, 8), batches=(1, 8), warmup=0, repeats=3)
    assert set(result["per_batch"]) == {"1", "8"}
    assert result["measured_batch"] == 8
    assert result["measured_speedup"] == result["per_batch"]["8"]["measured_speedup"] > 0
    assert result["threads"] == torch.get_num_threads()
    assert result["device"] == "cpu" and "torch_pruning" in result["versions"]


@pytest.mark.slow
def test_latency_of_stored_runs_filter_pruned_measured_unstructured_theoretical(tmp_path):
    common = ("budget.epochs=3", "budget.initial_epochs=2", "budget.cycles=1")
    structured = execute(
        tiny_config(tmp_path, *common, "method.sparsity=0.5", "method.structured=true")
    )
    unstructured = execute(tiny_config(tmp_path, *common, "method.sparsity=0.5"))
    result = measure_run(structured["run_id"], str(tmp_path), device="cpu", warmup=0, repeats=2)
    assert result["kind"] == "filter" and result["measured_speedup"] > 0
    assert result["params_kept"] < 0.8
    stored = Store(tmp_path).read(structured["run_id"])["metrics"]
    assert stored["measured_speedup"] == result["measured_speedup"]
    assert stored["speedup"] > 1  # the theoretical one is kept beside it
    code = main(["latency", unstructured["run_id"], "--store", str(tmp_path), "--device", "cpu",
                 "--repeats", "2"])  # fmt: skip
    assert code == 0
    stored = Store(tmp_path).read(unstructured["run_id"])["metrics"]
    assert stored["measured_speedup"] is None
    assert stored["latency"]["note"] == UNSTRUCTURED_NOTE


def test_latency_cli_refuses_bad_input_before_measuring(tmp_path, capsys):
    assert main(["latency", "nope", "--store", str(tmp_path), "--batches", "1,x"]) == 2
    assert "--batches" in capsys.readouterr().err
    assert main(["latency", "nope", "--store", str(tmp_path), "--device", "cpu"]) == 2
    assert "RUN_ID" in capsys.readouterr().err


def test_interleaved_timing_takes_all_repeats_of_every_model():
    from benchmark.measure.latency import interleaved

    a, b = build_model("cnn_small", 10, (1, 8, 8)).eval(), build_model("cnn_small", 10, (1, 8, 8))
    times = interleaved([a, b.eval()], torch.zeros(2, 1, 8, 8), warmup=0, repeats=7, rounds=3)
    assert [len(t) for t in times] == [7, 7]
    assert all(t > 0 for ts in times for t in ts)


def _latency_grid(name: str, latency: dict | None) -> object:
    from benchmark.launch.grid import grid_from_dict

    data = {
        "name": name,
        "base": {
            "data": {"name": "digits", "batch_size": 128},
            "budget": {"epochs": 2, "initial_epochs": 1, "cycles": 1},
            "method": {"name": "bimp", "sparsity": 0.5},
            "logging": {"progress": False},
        },
        "axes": {"method.structured": [True, False]},
    }
    return grid_from_dict(data | ({"latency": latency} if latency is not None else {}))


@pytest.mark.slow
def test_a_grid_with_latency_measures_each_run_after_training_with_the_same_run_ids(tmp_path):
    from benchmark.launch import LaunchSettings, prepare, submit_grid
    from benchmark.launch.expansion import expand

    settings = LaunchSettings(executor="debug", threads=1)
    asked = {"measure": True, "device": "cpu", "batches": [1, 4], "warmup": 0, "repeats": 2}
    plain = expand(_latency_grid("plain", None))
    grid = _latency_grid("timed", asked)
    assert [r.run_id for r in expand(grid).runs] == [r.run_id for r in plain.runs]
    exp = prepare(grid, tmp_path / "timed", settings)
    submit_grid(exp, tmp_path / "timed", settings)
    records = {r.cfg.method.params.structured: Store(tmp_path / "timed").read(r.run_id)
               for r in exp.runs}  # fmt: skip
    filtered, unstructured = records[True]["metrics"], records[False]["metrics"]
    assert filtered["latency"]["kind"] == "filter" and filtered["measured_speedup"] > 0
    assert set(filtered["latency"]["per_batch"]) == {"1", "4"}
    assert unstructured["measured_speedup"] is None
    assert unstructured["latency"]["note"] == UNSTRUCTURED_NOTE
    # Without [latency] the same grid trains the same runs and measures nothing.
    exp = prepare(_latency_grid("plain", None), tmp_path / "plain", settings)
    submit_grid(exp, tmp_path / "plain", settings)
    for run in exp.runs:
        metrics = Store(tmp_path / "plain").read(run.run_id)["metrics"]
        assert "latency" not in metrics and "measured_speedup" not in metrics


@pytest.mark.parametrize(
    ("latency", "field"),
    [
        ({"measure": True, "repeats": 0}, "latency.repeats"),
        ({"batches": []}, "latency.batches"),
        ({"device": "tpu"}, "latency.device"),
        ({"every": 2}, "latency.every"),
        ("yes", "latency"),
    ],
)
def test_bad_latency_options_of_a_grid_name_the_field(latency, field):
    from benchmark.launch.expansion import expand

    with pytest.raises(ConfigError, match=field):
        expand(_latency_grid("bad", latency))


def test_latency_measure_refuses_datasets_it_cannot_time(tmp_path):
    from benchmark.measure.run_latency import validate_latency
    from benchmark.training.validation import validate

    cfg = tiny_config(tmp_path, "latency.measure=true")
    validate(cfg)
    cfg.data.name = "cityscapes"
    with pytest.raises(ConfigError, match="latency.measure"):
        validate_latency(cfg)


def test_asking_for_latency_keeps_the_run_id_and_the_original_config(tmp_path):
    from benchmark.measure.run_latency import asking_for_latency

    cfg = tiny_config(tmp_path, "method.name=bimp", "method.structured=true")
    timed = asking_for_latency(cfg)
    assert timed.latency.measure and not cfg.latency.measure
    assert timed.run_id == cfg.run_id


@pytest.mark.slow
def test_a_single_run_asking_for_latency_is_measured_right_after_training(tmp_path):
    """``prunebench run --set latency.measure=true`` times the run too, not only grids do."""
    common = ("budget.epochs=3", "budget.initial_epochs=2", "budget.cycles=1")
    timing = ("latency.measure=true", "latency.device='cpu'", "latency.batches=[1, 4]")
    cfg = tiny_config(
        tmp_path, *common, *timing, "latency.warmup=0", "latency.repeats=2",
        "method.sparsity=0.5", "method.structured=true",
    )  # fmt: skip
    execute(cfg)
    stored = Store(tmp_path).read(cfg.run_id)["metrics"]
    assert stored["measured_speedup"] > 0 and stored["latency"]["kind"] == "filter"


def test_versions_read_torch_pruning_from_its_metadata(monkeypatch: pytest.MonkeyPatch) -> None:
    # torch_pruning 1.6.0 (as a GPU machine's carried wheel) has no __version__ attribute.
    import sys
    from importlib import metadata
    from types import ModuleType

    from benchmark.measure.latency import versions

    monkeypatch.setitem(sys.modules, "torch_pruning", ModuleType("torch_pruning"))
    assert versions()["torch_pruning"] == metadata.version("torch-pruning")
