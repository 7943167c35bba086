"""Stand-in dataset files: written in the real formats, trained on through the real loaders."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import tiny_config

from benchmark.cli import main
from benchmark.training.runner import execute


def test_fake_data_command_rejects_bad_signal(tmp_path: Path, capsys) -> None:
    assert main(["fake-data", "cifar10", "--root", str(tmp_path), "--signal", "1.5"]) == 2
    assert "--signal" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize(("dataset", "has_top5"), [("cifar10", False), ("cifar100", True)])
def test_training_on_stand_in_cifar_files(tmp_path: Path, dataset: str, has_top5: bool) -> None:
    root = tmp_path / "data"
    assert main(["fake-data", dataset, "--root", str(root), "--size", "100"]) == 0
    cfg = tiny_config(
        tmp_path / "s",
        f"data.name={dataset}",
        f"data.root='{root}'",
        "data.check_integrity=false",
        "data.batch_size=32",
        "model.name=resnet20",
        "budget.epochs=2",
        "budget.initial_epochs=1",
        "budget.cycles=1",
    )
    m = execute(cfg)["metrics"]
    assert ("top5" in m["test"]) is has_top5
    assert m["sparsity"] == pytest.approx(0.9, abs=1e-3)
    assert m["speedup"] > 2
