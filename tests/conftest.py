"""Shared test fixtures: small, fast, seeded configs on the embedded digits data."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch

# The README's example plugin, installed the way an outside package is: a module plus
# dist-info metadata declaring a `prunebench.methods` entry point.
sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "plugin"))

# Tests share 2 cores with everything else; one thread keeps them deterministic and fast.
torch.set_num_threads(1)
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")


@pytest.fixture(autouse=True)
def whole_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    """Command output read whole: no folding to the 100 columns of a pipe (the tests of the
    width, tests/cli/test_width.py, ask for one)."""
    monkeypatch.setenv("COLUMNS", "10000")


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    """An empty results store."""
    return tmp_path / "runs"


def tiny_overrides(store: Path) -> list[str]:
    """Overrides that make a digits run take about a second."""
    return [
        f"output.dir={str(store)!r}",
        "logging.progress=false",
        "data.batch_size=128",
        "runtime.threads=1",
    ]


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """With PRUNEBENCH_FAILURE_LOG set, append each failure's test and the last lines of its
    message to that file as it happens (the device scripts keep it: a run stopped at its time
    limit prints no tracebacks, and these lines survive it)."""
    path = os.environ.get("PRUNEBENCH_FAILURE_LOG")
    if not path or not report.failed or os.environ.get("PYTEST_XDIST_WORKER"):
        return  # under xdist the controller sees every worker's reports: it writes them once
    lines = report.longreprtext.splitlines()
    errors = [line for line in lines if line.startswith("E ")][:12]
    where = [line for line in lines if line.endswith(("Error", "Exception")) or ".py:" in line]
    text = "\n".join([f"FAILED {report.nodeid} ({report.when})", *where[-3:], *errors, ""])
    with open(path, "a", encoding="utf-8") as log:
        log.write(text + "\n")
