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
