"""Results store (atomic, never overwritten, pandas) and the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from helpers import tiny_config

from benchmark.cli import main
from benchmark.store.frame import load_store
from benchmark.store.results import ResultExistsError, Store
from benchmark.training.runner import execute


def test_store_write_is_atomic_and_never_overwrites(tmp_path: Path) -> None:
    store = Store(tmp_path)
    store.write({"run_id": "a", "status": "finished", "metrics": {"x": 1}})
    with pytest.raises(ResultExistsError, match="--force"):
        store.write({"run_id": "a", "status": "finished", "metrics": {"x": 2}})
    assert store.read("a")["metrics"] == {"x": 1}
    assert not list(tmp_path.glob(".*tmp"))  # no temporary files left behind
    store.write({"run_id": "a", "status": "finished", "metrics": {"x": 3}}, force=True)
    assert store.read("a")["metrics"] == {"x": 3}
    archived = list((tmp_path / "archive").glob("a-*.json"))
    assert len(archived) == 1 and json.loads(archived[0].read_text())["metrics"] == {"x": 1}


def test_failed_record_is_replaced_by_a_later_success(tmp_path: Path) -> None:
    store = Store(tmp_path)
    store.write({"run_id": "b", "status": "failed", "error": "boom"})
    store.write({"run_id": "b", "status": "finished"})
    assert store.status("b") == "finished"


def test_finished_run_is_not_rerun(tmp_path: Path) -> None:
    cfg = tiny_config(tmp_path / "s", "method.name=dense", "budget.epochs=1")
    first = execute(cfg)
    again = execute(cfg)
    assert again["finished"] == first["finished"]  # the stored record, not a new run
    forced = execute(cfg, force=True)
    assert forced["finished"] > first["finished"]


def test_load_store_into_dataframe(tmp_path: Path) -> None:
    store = tmp_path / "s"
    execute(tiny_config(store, "method.name=dense", "budget.epochs=1"))
    execute(tiny_config(store, "budget.epochs=3", "budget.initial_epochs=2", "budget.cycles=1"))
    df = load_store(store)
    assert isinstance(df, pd.DataFrame) and len(df) == 2
    assert set(df["config.method.name"]) == {"dense", "bimp"}
    for column in (
        "test.top1",
        "val.top1",
        "sparsity",
        "speedup",
        "images_per_s",
        "stability.pruning_stability",
        "config.budget.epochs",
    ):
        assert column in df.columns, column
    bimp = df[df["config.method.name"] == "bimp"].iloc[0]
    assert bimp["sparsity"] == pytest.approx(0.9, abs=1e-3)


def test_cli_run_show_and_resume_flags(tmp_path: Path, capsys) -> None:
    store = tmp_path / "s"
    args = [
        "--set",
        f"output.dir='{store}'",
        "--set",
        "logging.progress=false",
        "--set",
        "method.name=dense",
        "--set",
        "budget.epochs=1",
    ]
    assert main(["run", "--resume", *args]) == 2  # nothing to resume
    assert "no checkpoint" in capsys.readouterr().err
    assert main(["run", *args]) == 0
    out = capsys.readouterr().out
    assert "test top-1" in out and "images/s" in out
    run_id = out.split()[1]
    assert main(["show", run_id, "--store", str(store)]) == 0
    assert run_id in capsys.readouterr().out
    assert main(["show", "nope", "--store", str(store)]) == 2


def test_cli_methods_lists_overview(capsys) -> None:
    assert main(["methods"]) == 0
    out = capsys.readouterr().out
    for name in ("bimp", "imp", "dense", "renda"):
        assert f"\n{name} " in out
    assert "sparsity specifiable" in out and "pruning stable" in out


def test_cli_schedule_json(capsys) -> None:
    code = main(
        [
            "schedule",
            "--retrain",
            "FT",
            "LLR",
            "--retrain-epochs",
            "10",
            "--epochs",
            "20",
            "--original",
            "stepped",
            "--milestones",
            "10",
            "--values",
            "0.01",
        ]
    )
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    kinds = {d["kind"]: d["lrs"] for d in data}
    assert set(kinds) == {"FT", "LLR"}
    assert kinds["FT"] == [pytest.approx(0.01)] * 10
    assert kinds["LLR"][0] == 0.0 and max(kinds["LLR"]) == pytest.approx(0.1)


@pytest.mark.slow
def test_demo_prints_table_and_writes_figure(tmp_path: Path, capsys) -> None:
    figure = tmp_path / "fig" / "demo.png"
    code = main(["demo", "--store", str(tmp_path / "s"), "--figure", str(figure), "--epochs", "6"])
    assert code == 0
    out = capsys.readouterr().out
    for label in ("dense", "IMP + FT", "IMP + ALLR", "BIMP (ALLR)", "speedup", "images/s"):
        assert label in out
    assert figure.exists() and figure.with_suffix(".pdf").exists()
    df = load_store(tmp_path / "s")
    assert (df["config.method.name"] == "dense").sum() == 1  # the IMP parent is the dense run


def test_wandb_logging_works_offline(tmp_path: Path, monkeypatch) -> None:
    # A declared dependency, but a GPU machine's image may lack it (and cannot install it).
    pytest.importorskip("wandb", reason="wandb is not installed on this machine")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wandb"))
    cfg = tiny_config(tmp_path / "s", "method.name=dense", "budget.epochs=2", "logging.wandb=true")
    record = execute(cfg)
    assert record["status"] == "finished"
    runs = list((tmp_path / "s").glob("wandb/offline-run-*"))
    assert len(runs) == 1, list((tmp_path / "s").rglob("*"))[:20]


def test_method_metadata_matches_the_papers_overview_table() -> None:
    from benchmark.experiments.paper_numbers import load_paper_table
    from methods import METHODS, load_methods

    load_methods()
    table = load_paper_table("methods")
    checked = 0
    for _, row in table.iterrows():
        name = row["method"].lower()
        if name not in METHODS:
            continue
        info = METHODS.get(name).info
        assert info.sparsity_specifiable == bool(row["sparsity_specifiable"]), name
        assert info.pruning_stable == bool(row["pruning_stable"]), name
        assert info.sparsity_agnostic == bool(row["sparsity_agnostic_training"]), name
        assert info.extra_hyperparameters == int(row["additional_hyperparameters"]), name
        checked += 1
    assert checked >= 2  # at least IMP and BIMP
