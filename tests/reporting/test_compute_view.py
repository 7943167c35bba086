"""Equal-compute view: cost includes dense parents, Pareto fronts, devices never pooled silently."""

from __future__ import annotations

import pandas as pd
import pytest

from benchmark.cli import main
from benchmark.experiments import get_experiment
from benchmark.reporting.compute_view import cost_frame, devices_note, pareto_front, run_cost
from benchmark.store.results import Store

EXPERIMENT = "appendix-cifar10-results"


def test_pareto_front_keeps_only_undominated_points():
    points = pd.DataFrame(
        {"cost": [1.0, 2.0, 3.0, 2.5, 1.0], "accuracy": [80.0, 85.0, 84.0, 90.0, 79.0]}
    )
    assert sorted(pareto_front(points)) == [0, 1, 3]


def test_run_cost_adds_the_dense_parents_wall_time(tmp_path):
    store = Store(tmp_path)
    store.write({"run_id": "parent", "status": "finished", "metrics": {"wall_seconds": 3600.0}})
    record = {"parent_run_id": "parent", "metrics": {"wall_seconds": 1800.0},
              "environment": {"devices": 2}}  # fmt: skip
    assert run_cost(record, store) == pytest.approx((3600 + 1800) * 2 / 3600)
    assert run_cost({"metrics": {}}, store) is None


def _fake_runs(tmp_path, devices: tuple[str, ...]) -> None:
    plan = get_experiment(EXPERIMENT).plan("smoke", tmp_path)
    store = Store(tmp_path)
    for i, run_id in enumerate(plan["run_id"].unique()):
        device = devices[i % len(devices)]
        store.write(
            {
                "run_id": run_id,
                "status": "finished",
                "metrics": {"test": {"top1": 0.5 + (i % 7) / 100}, "wall_seconds": 10.0 + i},
                "environment": {"device": device, "device_name": f"card-{device}"},
            }
        )


def test_one_device_gives_a_front_per_method_and_a_cpu_hours_table(tmp_path, capsys):
    _fake_runs(tmp_path, ("cpu",))
    points = cost_frame(get_experiment(EXPERIMENT), "smoke", tmp_path)
    assert len(points) and points["pareto"].any()
    assert devices_note(points) == ""
    for _, group in points.groupby(["section", "row", "goal"], dropna=False):
        assert group["pareto"].sum() >= 1
    figure = tmp_path / "cost.png"
    args = ["cost", EXPERIMENT, "--store", str(tmp_path), "--scale", "smoke"]
    assert main([*args, "--figure", str(figure)]) == 0
    out = capsys.readouterr().out
    assert "CPU-hours" in out and "smoke scale: digits" in out
    assert figure.stat().st_size > 0


def test_runs_on_two_devices_are_split_and_the_note_says_so(tmp_path):
    _fake_runs(tmp_path, ("cpu", "cuda:0"))
    points = cost_frame(get_experiment(EXPERIMENT), "smoke", tmp_path)
    assert set(points["device"]) == {"cpu (card-cpu)", "cuda (card-cuda:0)"}
    assert "2 devices" in devices_note(points) and "not pooled" in devices_note(points)
