"""The array's captured step (replayed from a CUDA graph on a GPU) trains exactly what its
eager step trains: here a backend that "replays" by rerunning the captured function on the
CPU drives the capture path (static inputs, tables, losses) without a GPU."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest
import torch
from helpers import tiny_config

from benchmark.training.array.check import compare
from benchmark.training.array.fit import array_epoch, execute_array
from benchmark.training.array.step import ArrayStep
from benchmark.training.fast_step import FastPathWarning, GraphBackend, RerunBackend
from benchmark.training.packing import PackedRun, RngState, drive_packed
from benchmark.training.runner import execute
from benchmark.training.trainer import Trainer

T = TypeVar("T")


def train(root: Path, backend: GraphBackend | None, epochs: int = 2) -> tuple[list, ArrayStep]:
    """Two BIMP runs of other seeds and rates as one array; their weights and the array."""
    # On the CPU whatever the machine: the backend under test stands in for CUDA graph capture,
    # and the eager baseline must not capture.
    common = ["method.name=bimp", "budget.epochs=3", "budget.initial_epochs=1", "budget.cycles=2",
              "runtime.device=cpu"]  # fmt: skip
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


def eager_and_replayed(fn: Callable[[Path, GraphBackend | None], T], root: Path) -> tuple[T, T]:
    """``fn`` stepping eagerly and replaying with the rerunning backend (under ``root``), with
    deterministic kernels: both outcomes."""
    torch.use_deterministic_algorithms(True)
    try:
        return fn(root / "eager", None), fn(root / "captured", RerunBackend())
    finally:
        torch.use_deterministic_algorithms(False)


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


def test_after_a_run_ends_the_others_go_on_replaying_what_they_would_train_eagerly(
    tmp_path: Path,
) -> None:
    def go_on(root: Path, backend: GraphBackend | None) -> tuple[dict, dict, ArrayStep]:
        _, array = train(root, backend, epochs=1)
        ended = {k: v.clone() for k, v in array.trainers[1].model.state_dict().items()}
        array.retire(1)
        rng = [RngState.capture(array.trainers[0].device)]
        array_epoch(array.trainers[:1], 1, rng)  # run 0 alone in the array of two
        return array.trainers[0].model.state_dict(), ended, array

    (eager, _, _), (replayed, ended, array) = eager_and_replayed(go_on, tmp_path)
    before = array.trainers[0].runner.stats.replays
    assert array.graph is not None and array.live == {0} and before > 0
    for name, value in eager.items():
        assert torch.equal(value, replayed[name]), name
    # The ended run's parameters did not move while the other went on.
    params = dict(array.trainers[1].model.named_parameters())
    for name, value in params.items():
        assert torch.equal(value, ended[name]), name


def test_a_run_that_takes_a_slot_keeps_the_captured_graphs_tensors_and_replays(
    tmp_path: Path,
) -> None:
    """A graph reads the stacked tensors it was captured on: a run written into a freed slot
    fills them in place (no tensor is reallocated) and the graph replays it, as eagerly."""

    def reuse(root: Path, backend: GraphBackend | None) -> tuple[dict, ArrayStep, list[int]]:
        _, array = train(root, backend, epochs=1)
        stacked = array.stacked

        def tensors() -> list[int]:
            held = [stacked.flat, stacked.grad, array.sgd.momentum, *stacked.buffers.values()]
            return [t.data_ptr() for t in held]

        before = tensors()
        cfg = tiny_config(root, "method.name=dense", "budget.epochs=1", "seed=2",
                          "runtime.device=cpu")  # fmt: skip
        newcomer = Trainer(cfg)
        array.admit(1, newcomer)  # in the place of run 1, between two epochs
        assert tensors() == before
        for i, p in enumerate(stacked.members[1]):
            assert p.data_ptr() == stacked.row(1, i).data_ptr()
        trainers = [array.trainers[0], newcomer]
        rngs = [RngState.capture(t.device) for t in trainers]
        epochs = [trainers[0].epoch_steps(1), newcomer.epoch_steps(0)]
        drive_packed([PackedRun(t.cfg.run_id, e, t.device, r, own_stream=False)
                      for t, e, r in zip(trainers, epochs, rngs, strict=True)])  # fmt: skip
        replays = [t.runner.stats.replays for t in trainers]
        return newcomer.model.state_dict(), array, replays

    (eager, _, _), (replayed, array, replays) = eager_and_replayed(reuse, tmp_path)
    assert array.graph is not None and all(n > 0 for n in replays)
    for name, value in eager.items():
        assert torch.equal(value, replayed[name]), name
    # A run whose loss is another than the one captured has the graph captured again.
    other = Trainer(tiny_config(tmp_path / "smooth", "method.name=dense", "runtime.device=cpu",
                                "optim.label_smoothing=0.1"))  # fmt: skip
    array.admit(1, other)
    assert array.graph is None


def test_capture_time_is_left_out_of_every_runs_timed_training(tmp_path: Path) -> None:
    class Slow:
        def capture(self, fn):  # noqa: ANN001, ANN202 - the GraphBackend protocol
            time.sleep(3.0)
            return fn

    _, array = train(tmp_path, Slow(), epochs=1)
    for trainer in array.trainers:
        throughput = trainer.state.throughput
        assert throughput.compile_seconds >= 3.0
        assert throughput.seconds < 2.5, throughput  # the 3 s of capture are not training


@pytest.mark.slow
@pytest.mark.parametrize("method", ["gsm", "lc", "dpf", "dnw"])
def test_a_method_with_a_hook_before_the_step_trains_in_an_array_as_alone(
    tmp_path: Path, method: str
) -> None:
    # Its hook reads and changes each run's own gradients between the array's backward and
    # its SGD step; the runs differ in seed and learning rate.
    # On the CPU, whose floor (another thread count) is not zero.
    def two(store: Path, *extra: str) -> list:
        common = [f"method.name={method}", "budget.epochs=3", "runtime.device=cpu"]
        return [
            tiny_config(store, *common, *extra),
            tiny_config(store, *common, "seed=1", "schedule.lr=0.05", *extra),
        ]

    stores = (tmp_path / "alone", tmp_path / "rounded", tmp_path / "array")
    alone = [execute(cfg) for cfg in two(stores[0])]
    rounded = [execute(cfg) for cfg in two(stores[1], "runtime.threads=2")]
    array = execute_array(two(stores[2]), layout="loop")
    comparison = compare(stores, alone, rounded, array)
    assert comparison.holds(), comparison.text()
    for record in array:
        assert isinstance(record, dict) and record["metrics"]["array"]["size"] == 2


def _dense_pair(root: Path, setting: str) -> tuple[list[Trainer], ArrayStep]:
    """Two dense runs (other seeds and rates) as one grouped array, captured through a
    replaying backend, with ``runtime.compile = setting``; trained for two epochs."""
    common = ["method.name=dense", "budget.epochs=2", "runtime.device=cpu",
              f"runtime.compile={setting}"]  # fmt: skip
    cfgs = [
        tiny_config(root, *common, "seed=0"),
        tiny_config(root, *common, "seed=1", "schedule.lr=0.05"),
    ]
    trainers = [Trainer(cfg) for cfg in cfgs]
    rngs = [RngState.capture(t.device) for t in trainers]
    array = ArrayStep(trainers, "grouped", backend=RerunBackend())
    for epoch in range(2):
        array_epoch(trainers, epoch, rngs)
    return trainers, array


@pytest.mark.slow
def test_the_compiled_step_trains_what_the_uncompiled_step_trains(tmp_path: Path) -> None:
    # Inductor runs on the CPU too: fused BatchNorm/ReLU kernels round differently, no more.
    plain, uncompiled = _dense_pair(tmp_path / "plain", "off")
    fused, compiled = _dense_pair(tmp_path / "fused", "on")
    assert compiled.record()["compiled"] and not uncompiled.record()["compiled"]
    assert compiled.trainers[0].runner.stats.replays > 0
    for a, b in zip(plain, fused, strict=True):
        theirs = b.model.state_dict()
        for name, value in a.model.state_dict().items():
            if value.is_floating_point():
                assert torch.allclose(value, theirs[name], rtol=0, atol=1e-5), name
            else:
                assert torch.equal(value, theirs[name]), name  # BatchNorm's batch counts


def test_a_compile_that_fails_captures_uncompiled_with_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(fn: object, **_: object) -> object:
        def raises(*args: object) -> object:
            raise RuntimeError("no compiler here")

        return raises

    monkeypatch.setattr(torch, "compile", broken)
    with pytest.warns(FastPathWarning, match="compiling the array's step failed.*no compiler"):
        trainers, array = _dense_pair(tmp_path, "on")
    assert array.record()["compiled"] is False
    assert array.trainers[0].runner.stats.replays > 0
    assert all(torch.isfinite(p).all() for t in trainers for p in t.model.parameters())
