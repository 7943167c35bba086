"""Pruned final weights are stored compactly and load back bit for bit (issue 29)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from helpers import tiny_config

from benchmark.bench.weights import nbytes, pruned_state
from benchmark.core.errors import CorruptFileError
from benchmark.core.files import load_checkpoint, save_weights
from benchmark.store.results import Store
from benchmark.training.runner import execute


def assert_bit_identical(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert list(a) == list(b)
    for name in a:
        x, y = a[name], b[name]
        assert x.dtype == y.dtype and x.shape == y.shape, name
        if x.is_floating_point():
            ints = {2: torch.int16, 4: torch.int32, 8: torch.int64}[x.element_size()]
            x, y = x.contiguous().view(ints), y.contiguous().view(ints)
        assert torch.equal(x, y), name


@pytest.mark.parametrize(("model", "classes"), [("resnet56", 10), ("wrn28_10", 100)])
def test_95_percent_sparse_weights_take_a_fifth_of_dense_and_load_back_exactly(
    tmp_path: Path, model: str, classes: int
) -> None:
    state = pruned_state(model, classes, 0.95)
    path = tmp_path / "w.pt"
    save_weights(state, path)
    dense = nbytes(state)  # what the store wrote before
    assert path.stat().st_size <= dense / 5, (path.stat().st_size, dense)
    assert_bit_identical(load_checkpoint(path), state)


def test_signed_zeros_nan_and_every_dtype_survive(tmp_path: Path) -> None:
    torch.manual_seed(0)
    w = torch.zeros(64, 64)
    w[0, :3] = torch.tensor([-0.0, float("nan"), 1.5])
    state = {
        "w": w,
        "half": torch.where(torch.rand(32, 32) < 0.05, torch.randn(32, 32), 0.0).half(),
        "bf16": torch.where(torch.rand(32, 32) < 0.3, torch.randn(32, 32), 0.0).bfloat16(),
        "double": torch.where(torch.rand(40, 40) < 0.01, torch.randn(40, 40), 0.0).double(),
        "steps": torch.tensor(7),
        "dense": torch.randn(100),
    }
    path = tmp_path / "w.pt"
    save_weights(state, path)
    assert_bit_identical(load_checkpoint(path), state)
    raw = torch.load(path, weights_only=True)
    assert "mask" in raw["packed"]["half"] and "index" in raw["packed"]["double"]
    assert "dense" in raw["dense"]  # packing would not make it smaller


def test_dense_weights_stay_a_plain_state_dict(tmp_path: Path) -> None:
    state = {"w": torch.randn(20, 20), "b": torch.randn(20)}
    save_weights(state, tmp_path / "w.pt")
    assert_bit_identical(torch.load(tmp_path / "w.pt", weights_only=True), state)


def test_a_damaged_packed_file_is_named(tmp_path: Path) -> None:
    state = {"w": torch.zeros(100, 100)}
    state["w"][0, 0] = 1.0
    path = tmp_path / "w.pt"
    save_weights(state, path)
    raw = torch.load(path, weights_only=True)
    raw["packed"]["w"]["values"] = torch.ones(5)
    torch.save(raw, path)
    with pytest.raises(CorruptFileError, match="disagree"):
        load_checkpoint(path)


def test_a_pruned_run_stores_its_weights_compactly_and_children_load_them(tmp_path: Path) -> None:
    store = tmp_path / "s"
    # The wide digits CNN: the small one's 6K weights are mostly torch.save's own overhead.
    cfg = tiny_config(
        store,
        "model.name=cnn_wide",
        "method.name=imp",
        "method.sparsity=0.95",
        "budget.cycles=1",
        "method.parent_epochs=1",
        "budget.epochs=1",
    )
    record = execute(cfg)
    path = Store(store).weights_path(cfg.run_id)
    weights = load_checkpoint(path)
    assert path.stat().st_size <= nbytes(weights) / 4
    prunable = [k for k, v in weights.items() if k.endswith("weight") and v.dim() > 1]
    zeros = sum(int((weights[k] == 0).sum()) for k in prunable)
    assert zeros >= record["metrics"]["num_prunable"] * 0.95 - 1
    # The dense parent's weights (not packed: nothing in them is zero) feed a child as before.
    child = tiny_config(
        store,
        "model.name=cnn_wide",
        "method.name=imp",
        "method.sparsity=0.5",
        "budget.cycles=1",
        "method.parent_epochs=1",
        "budget.epochs=1",
    )
    assert execute(child)["parent_run_id"] == record["parent_run_id"]
