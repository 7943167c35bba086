"""``prunebench export``: one tidy row per planned run, provenance included, nothing dropped."""

from __future__ import annotations

import io
import json

import pandas as pd

from benchmark.cli import main
from benchmark.experiments import get_experiment
from benchmark.store.results import Store

EXPERIMENT = "appendix-cifar10-results"


def _fake_store(tmp_path, count: int) -> pd.DataFrame:
    """Finished records (with an environment) for the first ``count`` planned smoke runs."""
    plan = get_experiment(EXPERIMENT).plan("smoke", tmp_path)
    store = Store(tmp_path)
    for i, run_id in enumerate(plan["run_id"].unique()[:count]):
        store.write(
            {
                "run_id": run_id,
                "status": "finished",
                "config": {"model": {"name": "cnn_small"}, "data": {"name": "digits"}},
                "metrics": {
                    "test": {"top1": 0.5 + i / 100},
                    "val": {"top1": 0.5 + i / 100},
                    "sparsity": 0.9,
                    "speedup": 5.0,
                    "images_per_s": 100.0,
                    "wall_seconds": 2.0,
                },
                "environment": {"git_commit": "abc123", "device": "cpu", "torch": "2.x"},
            }
        )
    return plan


def test_export_has_every_planned_run_with_provenance_and_missing_rows(tmp_path, capsys):
    plan = _fake_store(tmp_path, 5)
    assert main(["export", EXPERIMENT, "--store", str(tmp_path), "--scale", "smoke"]) == 0
    frame = pd.read_csv(io.StringIO(capsys.readouterr().out))
    assert len(frame) == len(plan)
    done = frame[frame["status"] == "finished"]
    assert done["run_id"].nunique() == 5
    assert set(done["env_git_commit"]) == {"abc123"} and set(done["env_device"]) == {"cpu"}
    assert (frame["status"] == "missing").sum() == len(plan) - len(done)
    # Only configurations with finished runs can be the ones a table selects.
    config = ["section", "row", "budget", "x", "tuned"]
    has_finished = frame.groupby(config)["status"].transform(lambda s: s.eq("finished").any())
    assert done["selected"].any() and not frame.loc[~has_finished, "selected"].any()
    for column in ("section", "row", "goal", "seed", "test_top1", "speedup", "measured_speedup"):
        assert column in frame.columns


def test_export_json_is_a_list_of_records_with_nulls(tmp_path, capsys):
    _fake_store(tmp_path, 1)
    out = tmp_path / "cells.json"
    args = ["export", EXPERIMENT, "--store", str(tmp_path), "--format", "json", "--out", str(out)]
    assert main([*args, "--scale", "smoke"]) == 0
    records = json.loads(out.read_text())
    assert records[0]["experiment"] == EXPERIMENT
    assert any(r["test_top1"] is None for r in records)


def test_export_unknown_id_is_a_usage_error(tmp_path, capsys):
    assert main(["export", "no-such-table", "--store", str(tmp_path)]) == 2
    assert "no-such-table" in capsys.readouterr().err


def test_tables_statistics_and_exports_select_by_the_tables_metric(tmp_path, monkeypatch) -> None:
    """A mIoU table picks each cell's configuration by validation mIoU, and so must its
    statistics and its export (they used to pick by validation top-1)."""
    import benchmark.reporting.selection as selection
    import benchmark.reporting.tables as tables
    from benchmark.reporting.export import export_frame
    from benchmark.reporting.table_stats import annotate
    from benchmark.store.frame import load_store

    name = "appendix-schedule-comparison-coco-deeplab"
    experiment = get_experiment(name)
    layout = experiment.layout("smoke")
    assert selection.selection_metric(layout) == "iou"
    seen: list[str] = []
    real = selection.aggregate

    def recording(*args, **kwargs):
        seen.append(kwargs.get("select", "accuracy"))
        return real(*args, **kwargs)

    monkeypatch.setattr(selection, "aggregate", recording)
    plan = experiment.plan("smoke", tmp_path)
    store = load_store(tmp_path)
    table = tables.build_table(name, "smoke", layout, plan, store)
    annotate(table, layout, plan, store)
    export_frame(experiment, "smoke", tmp_path)
    assert seen == ["iou", "iou", "iou"]


class _TwoGoals:
    """A table of two goal columns where each goal has its own winning configuration, plus a
    method without a goal sparsity (CS-like) whose two configurations land in different
    columns: the export must mark each configuration only where the table selects it."""

    id = "two-goals"

    def layout(self, scale: str):
        from benchmark.experiments.base import Block, TableLayout

        return TableLayout(blocks=(Block((90.0, 95.0), (("s", ("A", "C")),)),))

    def plan(self, scale: str, store: object) -> pd.DataFrame:
        from benchmark.experiments.base import PLAN_COLUMNS

        rows = []
        for tuned in ("wd=1e-4", "wd=5e-4"):
            for seed in (0, 1):
                for goal in (90.0, 95.0):
                    rows.append((f"A-{goal:g}-{tuned}-{seed}", "s", "A", goal, "", 0.0, tuned,
                                 seed, "gmp"))  # fmt: skip
                rows.append((f"C-{tuned}-{seed}", "s", "C", float("nan"), "", 0.0, tuned,
                             seed, "cs"))  # fmt: skip
        return pd.DataFrame(rows, columns=PLAN_COLUMNS)


def _two_goal_store(tmp_path) -> pd.DataFrame:
    plan = _TwoGoals().plan("paper", tmp_path)
    store = Store(tmp_path)
    for r in plan.to_dict("records"):
        small_wd = r["tuned"] == "wd=1e-4"
        if r["row"] == "A":  # 1e-4 wins at 90%, 5e-4 at 95%
            val = 0.9 if small_wd == (r["goal"] == 90.0) else 0.8
            sparsity = r["goal"] / 100
        else:  # C: 1e-4 reaches 90.1%, 5e-4 95.1% (one configuration per column)
            val, sparsity = 0.85, 0.901 if small_wd else 0.951
        metrics = {"test": {"top1": val}, "val": {"top1": val}, "sparsity": sparsity,
                   "speedup": 5.0, "images_per_s": 1.0, "wall_seconds": 1.0}  # fmt: skip
        store.write({"run_id": r["run_id"], "status": "finished", "metrics": metrics})
    return plan


def test_export_marks_a_configuration_selected_only_at_the_goal_it_won(tmp_path) -> None:
    from benchmark.reporting.export import export_frame

    plan = _two_goal_store(tmp_path)
    frame = export_frame(_TwoGoals(), "paper", tmp_path)  # type: ignore[arg-type]
    assert len(frame) == len(plan)
    a = frame[frame["row"] == "A"]
    chosen = a[a["selected"]].groupby("goal")["tuned"].agg(set)
    assert chosen.to_dict() == {90.0: {"wd=1e-4"}, 95.0: {"wd=5e-4"}}
    assert a["selected"].sum() == 4  # one configuration x 2 seeds per goal
    c = frame[frame["row"] == "C"]
    assert c["selected"].all()  # each configuration is selected, at its own column
    placed = c.groupby("tuned")["selected_goal"].agg(set).to_dict()
    assert placed == {"wd=1e-4": {"90"}, "wd=5e-4": {"95"}}
    won = a[a["selected"]]
    assert (won["selected_goal"] == won["goal"].map("{:g}".format)).all()
