"""The read-only commands do not import what they do not use: torchvision (seconds of CPU, with
torch._dynamo) only where images are read or torchvision's models are built, scipy (half a
second) only where seeds are compared. CPU times are
printed by ``python -m benchmark.bench.cli_times``, not asserted here."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import imported_packages

TABLE_ID = "appendix-cifar10-results"


@pytest.mark.parametrize(
    "args",
    [
        ["table", TABLE_ID, "--store", "runs"],
        ["reproduce", TABLE_ID, "--scale", "paper", "--dry-run", "--store", "runs"],
    ],
    ids=["table", "dry-run"],
)
def test_read_only_commands_do_not_import_torchvision_or_scipy(
    args: list[str], tmp_path: Path
) -> None:
    imported = imported_packages(args, tmp_path)  # "runs": a store under tmp_path
    assert "benchmark" in imported
    assert "torchvision" not in imported and "scipy" not in imported
