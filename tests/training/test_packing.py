"""K runs packed into one process train what each trains alone, and keep their own outcomes.

On the CPU the kernels are deterministic, so a packed run must equal the same run trained alone
bit for bit: metrics, history and weights. The pack interleaves the runs' iterations; a run that
draws from the global random number generators (dropout, as in WRN-28-10) would draw another run's
numbers unless each turn restores the run's own generators, so such a run is in the pack.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from helpers import tiny_config
from torch import nn

from benchmark.config.run import RunConfig
from benchmark.core.errors import ConfigError
from benchmark.core.files import load_checkpoint
from benchmark.models.registry import MODELS
from benchmark.store.errors import RunLockedError
from benchmark.store.results import Store
from benchmark.training import packing
from benchmark.training.contract import comparable
from benchmark.training.packing import check_packable, execute_packed
from benchmark.training.runner import execute

DROPOUT_MODEL = "test_dropout_cnn"


def dropout_cnn(num_classes: int, input_shape: tuple[int, int, int]) -> nn.Module:
    """A small CNN with dropout: its training draws from torch's global generator."""
    channels, height, width = input_shape
    return nn.Sequential(
        nn.Conv2d(channels, 8, 3, padding=1),
        nn.ReLU(),
        nn.Dropout(0.5),
        nn.Flatten(),
        nn.Linear(8 * height * width, num_classes),
    )


@pytest.fixture(autouse=True)
def dropout_model():  # noqa: ANN201
    MODELS.add(DROPOUT_MODEL, dropout_cnn)
    yield
    MODELS.discard(DROPOUT_MODEL)


def pack_configs(store: Path) -> list[RunConfig]:
    """Three different runs: BIMP on a model with dropout, GMP, and BIMP with another seed."""
    bimp = ["method.name=bimp", "budget.epochs=3", "budget.initial_epochs=1", "budget.cycles=2"]
    return [
        tiny_config(store, *bimp, f"model.name={DROPOUT_MODEL}"),
        tiny_config(store, "method.name=gmp", "budget.epochs=2", "method.interval=1"),
        tiny_config(store, *bimp, "seed=1", "method.sparsity=0.7"),
    ]


def _weights(store: Path, run_id: str) -> dict[str, torch.Tensor]:
    return load_checkpoint(Store(store).weights_path(run_id))


def test_packed_runs_equal_the_same_runs_alone_bit_for_bit(tmp_path: Path) -> None:
    alone = [execute(cfg) for cfg in pack_configs(tmp_path / "alone")]
    packed = execute_packed(pack_configs(tmp_path / "packed"))
    assert all(isinstance(r, dict) for r in packed), packed
    for one, many in zip(alone, packed, strict=True):
        assert isinstance(many, dict)
        assert one["run_id"] == many["run_id"]
        assert comparable(one["metrics"]) == comparable(many["metrics"])
        assert one["history"] == many["history"]
        w1 = _weights(tmp_path / "alone", one["run_id"])
        w2 = _weights(tmp_path / "packed", many["run_id"])
        assert all(torch.equal(w1[k], w2[k]) for k in w1)


def test_the_runs_really_interleave_and_each_keeps_its_own_generators(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    turns: list[str] = []
    real = packing.PackedRun.turn

    def recording(self: packing.PackedRun):  # noqa: ANN202
        turns.append(self.name)
        return real(self)

    monkeypatch.setattr(packing.PackedRun, "turn", recording)
    cfgs = pack_configs(tmp_path)[:2]
    execute_packed(cfgs)
    first_switch = next(i for i, name in enumerate(turns) if name != turns[0])
    assert first_switch == 1  # one iteration, then the other run's turn
    assert set(turns) == {c.run_id for c in cfgs}


def test_without_its_own_generators_a_packed_run_would_differ(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The check above can fail: with every turn drawing from one shared set of generators, the
    # run with dropout draws the other runs' numbers and drops other units.
    monkeypatch.setattr(packing.RngState, "restore", lambda self, device: None)
    alone = execute(pack_configs(tmp_path / "alone")[0])
    packed = execute_packed(pack_configs(tmp_path / "packed"))[0]
    assert isinstance(packed, dict)
    assert comparable(alone["metrics"]) != comparable(packed["metrics"])


def test_a_failing_run_ends_alone_and_the_others_finish(tmp_path: Path) -> None:
    good, other, _ = pack_configs(tmp_path)
    diverging = tiny_config(tmp_path, "method.name=dense", "budget.epochs=2", "schedule.lr=1e30")
    out = execute_packed([good, diverging, other])
    assert isinstance(out[0], dict) and isinstance(out[2], dict)
    assert isinstance(out[1], Exception) and "training loss" in str(out[1])
    record = Store(tmp_path).read(diverging.run_id)
    assert record is not None and record["status"] == "failed"


def test_a_run_locked_elsewhere_is_reported_and_the_others_train(tmp_path: Path) -> None:
    first, second, _ = pack_configs(tmp_path)
    with Store(tmp_path).lock(f"run-{first.run_id}"):
        out = execute_packed([first, second])
    assert isinstance(out[0], RunLockedError) and "already running" in str(out[0])
    assert isinstance(out[1], dict) and out[1]["status"] == "finished"


def test_a_finished_run_is_returned_not_trained_again(tmp_path: Path) -> None:
    first, second, _ = pack_configs(tmp_path)
    record = execute(first)
    out = execute_packed([first, second])
    assert out[0] == record and isinstance(out[1], dict)


def test_runs_that_need_different_process_settings_cannot_share_a_process(
    tmp_path: Path,
) -> None:
    a = tiny_config(tmp_path, "method.name=dense", "budget.epochs=1")
    b = tiny_config(tmp_path, "method.name=dense", "budget.epochs=1", "runtime.threads=2")
    with pytest.raises(ConfigError, match="runtime"):
        check_packable([a, b])
    with pytest.raises(ConfigError, match="runtime"):
        execute_packed([a, b])
    assert not list(Path(tmp_path).glob("*.json"))  # refused before anything ran
