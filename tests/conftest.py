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
