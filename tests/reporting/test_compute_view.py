"""Equal-compute view: cost includes dense parents, Pareto fronts, devices never pooled silently."""

from __future__ import annotations

import pandas as pd
import pytest

from benchmark.cli import main
from benchmark.experiments import get_experiment
from benchmark.reporting.compute_view import (
    cost_frame,
    devices_note,
    pareto_front,
    render_markdown,
    run_cost,
)
from benchmark.store.results import Store

EXPERIMENT = "appendix-cifar10-results"


def test_pareto_front_keeps_only_undominated_points():
    points = pd.DataFrame(
        {"cost": [1.0, 2.0, 3.0, 2.5, 1.0], "accuracy": [80.0, 85.0, 84.0, 90.0, 79.0]}
    )
    assert sorted(pareto_front(points)) == [0, 1, 3]


def test_run_cost_adds_the_dense_parents_wall_time_times_each_runs_own_devices(tmp_path):
    """Runs record their devices under ``distributed.devices`` (the runner's record); a 4-GPU
    parent costs 4 GPU-hours an hour whatever its child ran on."""
    store = Store(tmp_path)
    store.write({"run_id": "parent", "status": "finished", "metrics": {"wall_seconds": 3600.0},
                 "distributed": {"processes": 4, "devices": 4}})  # fmt: skip
    record = {"parent_run_id": "parent", "metrics": {"wall_seconds": 1800.0},
              "distributed": {"processes": 2, "devices": 2}}  # fmt: skip
    assert run_cost(record, store) == pytest.approx((3600 * 4 + 1800 * 2) / 3600)
    assert run_cost({"metrics": {}}, store) is None
    # Records without the field (older stores) count one device.
    assert run_cost({"metrics": {"wall_seconds": 3600.0}}, store) == pytest.approx(1.0)


def test_a_cpu_is_labelled_by_its_model_not_the_kernel():
    from benchmark.reporting.compute_view import device_label
    from benchmark.training.runner import environment

    env = {"device": "cpu", "platform": "Linux-6.18.5-x86_64-with-glibc2.36", "hostname": "h1"}
    assert device_label({"environment": {**env, "cpu_name": "AMD EPYC 9654"}}) == (
        "cpu (AMD EPYC 9654)"
    )
    assert "Linux" not in device_label({"environment": env})  # older records: no model known
    assert environment("cpu")["cpu_name"]


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


class _GoalLess:
    """CS-like runs (no goal sparsity): two configurations reach 90.1% and 95.1%, one reaches
    80%, which no goal column of the layout takes."""

    id = "goal-less"
    description = "goal-less"

    def layout(self, scale: str):
        from benchmark.experiments.base import Block, TableLayout

        return TableLayout(blocks=(Block((90.0, 95.0), (("s", ("CS",)),)),))

    def plan(self, scale: str, store: object) -> pd.DataFrame:
        from benchmark.experiments.base import PLAN_COLUMNS

        rows = [(f"cs-{t}", "s", "CS", float("nan"), "", 0.0, t, 0, "cs") for t in "abc"]
        return pd.DataFrame(rows, columns=PLAN_COLUMNS)


def test_configurations_without_a_goal_are_grouped_where_the_table_places_them(tmp_path):
    store = Store(tmp_path)
    # a: 90.1%, cheap and accurate; b: 95.1%, dearer and less accurate; c: 80%, unplaced.
    for tuned, sparsity, acc, seconds in (("a", 0.901, 0.9, 10.0), ("b", 0.951, 0.8, 20.0),
                                          ("c", 0.80, 0.7, 30.0)):  # fmt: skip
        store.write({"run_id": f"cs-{tuned}", "status": "finished",
                     "metrics": {"test": {"top1": acc}, "sparsity": sparsity,
                                 "wall_seconds": seconds},
                     "environment": {"device": "cpu", "cpu_name": "AMD EPYC"}})  # fmt: skip
    points = cost_frame(_GoalLess(), "paper", tmp_path)  # type: ignore[arg-type]
    by_tuned = points.set_index("tuned")
    assert by_tuned.loc["a", "goal"] == 90.0 and by_tuned.loc["b", "goal"] == 95.0
    assert pd.isna(by_tuned.loc["c", "goal"])
    # Each is the only configuration of its group: none dominates another sparsity's.
    assert points["pareto"].all()
    assert by_tuned["achieved"].round(1).to_dict() == {"a": 90.1, "b": 95.1, "c": 80.0}
    md = render_markdown(points, "t")
    assert "| Configuration |" in md and "Achieved %" in md
    assert "| a |" in md and "90.10" in md and "80.00" in md
