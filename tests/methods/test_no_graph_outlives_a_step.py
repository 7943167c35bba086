"""No method keeps an autograd graph alive from one training step into the next.

A tensor kept with its graph (a sum saved from a forward that no loss consumed) holds the graph's
gradient-accumulation nodes: on CUDA the next captured step's backward then ties the capturing
stream to the default one and capture fails, so the method silently trains eagerly (CS did).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from helpers import tiny_config

from benchmark.training.fast_step import RerunBackend
from benchmark.training.trainer import Trainer

CASES = {
    "cs": [],
    "str": [],
    "dst": [],
    "gsm": [],
    "lc": [],
    "dnw": [],
    "dpf": ["method.interval=1"],
    "gmp": ["method.interval=1"],
    "bimp": ["budget.initial_epochs=1", "budget.cycles=1"],
}


def kept_graphs(trainer: Trainer) -> list[str]:
    """The method and module attributes that hold a tensor with an autograd graph."""
    owners = [("method", trainer.method), *((type(m).__name__, m) for m in trainer.model.modules())]
    return [
        f"{where}.{name}"
        for where, obj in owners
        for name, value in vars(obj).items()
        if isinstance(value, torch.Tensor) and value.grad_fn is not None
    ]


@pytest.mark.parametrize("method", sorted(CASES))
def test_no_graph_outlives_a_training_step(method: str, tmp_path: Path) -> None:
    cfg = tiny_config(tmp_path, f"method.name={method}", "budget.epochs=2", *CASES[method])
    trainer = Trainer(cfg, graph_backend=RerunBackend())
    steps = trainer.epoch_steps(0)
    for _ in range(3):  # three iterations, paused between two of them
        next(steps)
    assert kept_graphs(trainer) == []
