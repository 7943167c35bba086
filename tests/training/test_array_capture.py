"""The array's captured step (replayed from a CUDA graph on a GPU) trains exactly what its
eager step trains: here a backend that "replays" by rerunning the captured function on the
CPU drives the capture path (static inputs, tables, losses) without a GPU."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from helpers import tiny_config

from benchmark.training.array.fit import array_epoch
from benchmark.training.array.step import ArrayStep
from benchmark.training.fast_step import FastPathWarning, GraphBackend, RerunBackend
from benchmark.training.packing import RngState
from benchmark.training.trainer import Trainer


def train(root: Path, backend: GraphBackend | None, epochs: int = 2) -> tuple[list, ArrayStep]:
    """Two BIMP runs of other seeds and rates as one array; their weights and the array."""
    common = ["method.name=bimp", "budget.epochs=3", "budget.initial_epochs=1", "budget.cycles=2"]
    cfgs = [
        tiny_config(root, *common, "seed=0"),
        tiny_config(root, *common, "seed=1", "schedule.lr=0.05", "method.sparsity=0.7"),
    ]
    trainers = [Trainer(cfg) for cfg in cfgs]
    rngs = [RngState.capture(t.device) for t in trainers]
    array = ArrayStep(trainers, "loop", backend=backend)
    for epoch in range(epochs):
        array_epoch(trainers, epoch, rngs)
    return [{k: v.clone() for k, v in t.model.state_dict().items()} for t in trainers], array


def test_the_captured_step_trains_what_the_eager_step_trains_bit_for_bit(tmp_path: Path) -> None:
    torch.use_deterministic_algorithms(True)
    try:
        eager, plain = train(tmp_path / "eager", None)
        replayed, captured = train(tmp_path / "captured", RerunBackend())
    finally:
        torch.use_deterministic_algorithms(False)
    for a, b in zip(eager, replayed, strict=True):
        for name in a:
            assert torch.equal(a[name], b[name]), name
    stats = captured.trainers[0].runner.stats
    assert stats.captures == 1 and stats.replays > 0
    # Warm-up steps and each epoch's shorter last batch (digits: 1,437 / 64) stay eager.
    assert stats.eager >= 2 + 1
    assert plain.trainers[0].runner.stats.replays == 0
    assert captured.trainers[0].runner.plan.capture


def test_a_capture_that_fails_steps_eagerly_with_a_warning(tmp_path: Path) -> None:
    class Failing:
        def capture(self, fn):  # noqa: ANN001, ANN202 - the GraphBackend protocol
            raise RuntimeError("operation not permitted when stream is capturing")

    with pytest.warns(FastPathWarning, match="capturing the array's step failed"):
        _, array = train(tmp_path, Failing(), epochs=1)
    stats = array.trainers[1].runner.stats
    assert stats.replays == 0 and stats.failures
    assert "capturing the array's step failed" in array.trainers[1].runner.plan.why_eager


def test_a_run_that_ends_leaves_the_others_stepping_eagerly(tmp_path: Path) -> None:
    _, array = train(tmp_path, RerunBackend(), epochs=1)
    assert array.graph is not None
    array.retire(1)
    assert array.graph is None and array.live == {0}
