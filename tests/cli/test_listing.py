"""``prunebench list`` shows each spec's paper-scale runs and dataset passes, without torch."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import loads_torch

from benchmark.cli import main
from benchmark.experiments.catalog import load


def test_list_shows_paper_scale_passes_and_what_each_id_draws(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    assert main(["list", "--store", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    header = out.splitlines()[0]
    assert "paper-scale runs" in header and "paper-scale passes" in header
    lines = {line.split()[0]: line for line in out.splitlines()[1:] if line.strip()}
    # Dense parents and post-training fine-tuning included (ResNet-56: 6,496 runs + 8 parents,
    # one per seed and weight decay since the parent rule of the paper's code).
    assert "table+figure" in lines["appendix-cifar10-results"]
    assert "6,496" in lines["appendix-cifar10-results"]
    assert "1,036,800" in lines["appendix-cifar10-results"]
    assert "792,960" in lines["appendix-cifar100-results"]
    extra = load()["stable-unstable-results"].extra
    assert extra["paper_parents"] == 12  # a parent per seed and weight decay (LC, GSM)
    assert set(extra["paper_passes_by_model"]) == {"resnet56", "resnet50"}
    assert f"{extra['paper_passes']:,}" in lines["stable-unstable-results"]


@pytest.mark.parametrize(
    "args",
    [
        ["calibrate", "--help"],
        ["reproduce", "no-such-id", "--methods", "bimp", "--staged", "--dry-run"],
        ["table", "no-such-table", "--sparsities", "90"],
        ["list"],
    ],
    ids=lambda a: " ".join(a),
)
def test_the_new_flags_and_commands_answer_without_torch(args: list[str], tmp_path: Path) -> None:
    assert not loads_torch(args, tmp_path)
