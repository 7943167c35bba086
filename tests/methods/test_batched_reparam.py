"""STR, CS and DST reparametrize all of P in one pass: same values, far fewer operations."""

from __future__ import annotations

import copy
from collections import Counter
from pathlib import Path

import pytest
import torch
from helpers import tiny_config

from benchmark.bench.op_count import count_ops, training_pass
from benchmark.core.errors import ConfigError
from benchmark.data.base import DATASETS
from benchmark.training.trainer import Trainer
from methods._batched import FlatLayout, expand, memory_order, segment_sum
from methods.dst import ChannelThreshold

REPARAM_METHODS = ["str", "cs", "dst"]
# Hyperparameters that make every method's extra parameters matter within a step.
SETTINGS = {
    "str": ["method.s_init=-3.0"],
    "cs": ["method.l1=1e-3", "method.mask_init=0.5"],
    "dst": ["method.alpha=1e-3"],
}


def trainer(tmp: Path, name: str, reparam: str, *overrides: str) -> Trainer:
    """A digits trainer of method ``name`` with ``runtime.reparam = reparam``."""
    cfg = tiny_config(
        tmp / reparam,
        f"method.name={name}",
        f"runtime.reparam='{reparam}'",
        *SETTINGS[name],
        *overrides,
    )
    return Trainer(cfg)


def step(t: Trainer, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, dict]:
    """One forward and backward pass (the method's extra loss included): logits and gradients."""
    training_pass(t, x, y)
    with torch.no_grad():
        logits = t.model(x)
    grads = {n: p.grad.clone() for n, p in t.model.named_parameters() if p.grad is not None}
    return logits, grads


def first_batch(t: Trainer) -> tuple[torch.Tensor, torch.Tensor]:
    return next(iter(t.data.train_batches(0, t.cfg.seed)))


@pytest.mark.parametrize("name", REPARAM_METHODS)
def test_batched_pass_gives_the_per_layer_weights_and_gradients(tmp_path: Path, name: str) -> None:
    per_layer = trainer(tmp_path, name, "per-layer")
    batched = trainer(tmp_path, name, "batched")
    x, y = first_batch(per_layer)
    logits_a, grads_a = step(per_layer, x, y)
    logits_b, grads_b = step(batched, x, y)
    # The same elementwise formulas: the same logits; gradients up to summation order.
    torch.testing.assert_close(logits_b, logits_a, rtol=1e-6, atol=1e-6)
    assert grads_a.keys() == grads_b.keys() and len(grads_a) > 0
    extra = [n for n in grads_a if not n.endswith(".original") and "parametrizations" in n]
    assert extra, "the extra parameters must receive gradients"
    for n in grads_a:
        torch.testing.assert_close(grads_b[n], grads_a[n], rtol=1e-4, atol=1e-7, msg=n)


def test_dst_batched_pass_resets_collapsed_layers_like_the_per_layer_one(tmp_path: Path) -> None:
    per_layer = trainer(tmp_path, "dst", "per-layer")
    batched = trainer(tmp_path, "dst", "batched")
    for t in (per_layer, batched):
        layers = t.method.reparams_of(ChannelThreshold)
        with torch.no_grad():
            layers[0].threshold.fill_(100.0)  # keeps nothing: collapses, reset to 0
            layers[1].threshold.fill_(-1.0)  # keeps everything
    x, y = first_batch(per_layer)
    logits_a, _ = step(per_layer, x, y)
    logits_b, _ = step(batched, x, y)
    torch.testing.assert_close(logits_b, logits_a, rtol=1e-6, atol=1e-6)
    for a, b in zip(per_layer.method.reparams, batched.method.reparams, strict=True):
        assert isinstance(a, ChannelThreshold) and isinstance(b, ChannelThreshold)
        assert int(a.resets) == int(b.resets)
    assert int(batched.method.reparams[0].resets) == 1
    assert int(batched.method.reparams[1].resets) == 0


@pytest.mark.slow
@pytest.mark.parametrize("name", REPARAM_METHODS)
def test_batched_and_per_layer_runs_train_alike(tmp_path: Path, name: str) -> None:
    losses = {}
    for reparam in ("per-layer", "batched"):
        t = trainer(tmp_path, name, reparam, "budget.epochs=2")
        t.fit()
        losses[reparam] = [e["train_loss"] for e in t.state.history]
    for a, b in zip(losses["per-layer"], losses["batched"], strict=True):
        assert b == pytest.approx(a, rel=1e-3)


def extra_ops(tmp: Path, name: str, reparam: str, model: str) -> int:
    """Operations one forward and backward pass of ``name`` adds to dense training of ``model``."""
    counts = {}
    for method in ("dense", name):
        t = Trainer(
            tiny_config(
                tmp / f"{method}-{reparam}-{model}",
                f"method.name={method}",
                f"runtime.reparam='{reparam}'",
                f"model.name={model}",
            )
        )
        x, y = first_batch(t)
        training_pass(t, x, y)  # warm-up: layouts and constants are made on the first pass
        counts[method] = sum(count_ops(lambda t=t, x=x, y=y: training_pass(t, x, y)).values())
    return counts[name] - counts["dense"]


@pytest.mark.parametrize("name", REPARAM_METHODS)
def test_batched_reparametrization_costs_operations_independent_of_depth(
    tmp_path: Path, name: str
) -> None:
    shallow = extra_ops(tmp_path, name, "batched", "resnet20")  # 20 prunable layers
    deep = extra_ops(tmp_path, name, "batched", "resnet56")  # 56
    per_layer = extra_ops(tmp_path, name, "per-layer", "resnet20")
    assert deep == shallow
    assert 0 < shallow < per_layer / 5


def test_op_count_sees_computations_and_not_views() -> None:
    a = torch.ones(4, 4)
    ops = count_ops(lambda: (a.view(16) * 2).t().sum())
    assert ops == Counter({"mul": 1, "sum": 1})


def test_flat_layout_keeps_each_weights_shape_and_memory_format() -> None:
    conv = torch.randn(8, 3, 3, 3).contiguous(memory_format=torch.channels_last)
    linear = torch.randn(10, 8)
    layout = FlatLayout([conv, linear])
    assert memory_order(conv) == (0, 2, 3, 1) and memory_order(linear) == (0, 1)
    flat = layout.flatten([conv, linear])
    assert flat.shape == (8 * 27 + 80,)
    back = layout.unflatten(flat)
    for original, view in zip([conv, linear], back, strict=True):
        assert torch.equal(view, original)
        assert view.stride() == original.stride()  # no layout conversion before the conv
    # Channel spans: every entry of output channel c of a layer carries that channel's number.
    channel = layout.channel_of_entry.long()
    per_conv = layout.unflatten(channel.float())[0]
    assert torch.equal(per_conv, torch.arange(8.0).view(8, 1, 1, 1).expand_as(conv))
    assert layout.layer_of_channel.tolist() == [0] * 8 + [1] * 10


def test_expand_backward_sums_each_segment() -> None:
    values = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    lengths = torch.tensor([2, 1, 3])
    index = torch.tensor([0, 0, 1, 2, 2, 2], dtype=torch.int32)
    out = expand(values, index, lengths)
    assert out.tolist() == [1.0, 1.0, 2.0, 3.0, 3.0, 3.0]
    weights = torch.arange(1.0, 7.0)
    (out * weights).sum().backward()
    assert values.grad is not None
    assert values.grad.tolist() == [1 + 2, 3, 4 + 5 + 6]
    assert segment_sum(weights, lengths).tolist() == [3.0, 3.0, 15.0]


def test_weights_read_outside_a_forward_take_the_per_layer_path(tmp_path: Path) -> None:
    t = trainer(tmp_path, "str", "batched")
    reparam = t.method.reparams[0]
    assert reparam.batch is not None
    with pytest.raises(RuntimeError):
        t.model(torch.zeros(2, 5))  # a failing forward still closes the batch
    assert not reparam.batch.active and reparam.batch.weights is None
    original = t.ctx.masks.params[0]
    assert torch.equal(reparam(original), reparam.weight_of(original))


def test_unknown_reparam_mode_is_refused_naming_the_field(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="runtime.reparam"):
        tiny_config(tmp_path, "method.name=str", "runtime.reparam='fused'")


def test_a_training_forward_that_skips_a_layer_switches_to_the_per_layer_path(
    tmp_path: Path,
) -> None:
    t = trainer(tmp_path, "str", "batched")
    x, y = first_batch(t)
    batch = t.method.reparams[0].batch
    assert batch is not None and not batch.disabled
    # A forward that reads only the first layer's weight (as a model skipping a branch would).
    first = t.method.owners[0]
    t.model.forward = lambda inputs: first.weight.sum()  # type: ignore[method-assign]
    with pytest.warns(UserWarning, match="used 1 of the"):
        t.model(x)
    del t.model.forward
    assert batch.disabled
    calls = []
    t.method.batched_weights = lambda *a: calls.append(1) or []  # type: ignore[method-assign]
    assert torch.isfinite(training_pass(t, x, y))
    assert calls == []  # from now on layer by layer


def test_evaluation_forwards_and_copies_reparametrize_layer_by_layer(tmp_path: Path) -> None:
    t = trainer(tmp_path, "dst", "batched")
    x, y = first_batch(t)
    calls = []
    t.method.batched_weights = lambda *a: calls.append(1) or []  # type: ignore[method-assign]
    with torch.no_grad():
        t.model(x)
    assert calls == []  # no gradients: the layers' own formulas
    copied = copy.deepcopy(t.model)
    copies = [m for m in copied.modules() if isinstance(m, ChannelThreshold)]
    assert copies and all(r.batch is not None and r.batch.disabled for r in copies)
    copied.train()
    copied(x).sum().backward()  # the copy trains layer by layer
    assert calls == []
    assert all(not r.batch.disabled for r in t.method.reparams)


@pytest.mark.parametrize("name", ["str", "dst", "cs"])
def test_a_copy_of_the_model_leaves_the_trainer_behind(name: str, tmp_path: Path) -> None:
    # A model copy used to drag its trainer along through the method's load hook (on CUDA the
    # copy then failed on the trainer's CUDA stream); the copy's hook must not touch the model
    # it came from either. CS's soft masks keep the last training forward's gate sum, a tensor
    # of that forward's graph, which a copy used to refuse.
    t = trainer(tmp_path, name, "batched")
    x, _ = first_batch(t)
    t.model.train()
    t.model(x)
    held = [getattr(m, "gate_sum", None) for m in t.model.modules()]

    def refuse(memo: dict) -> None:
        raise AssertionError("the trainer was copied with the model")

    t.runner.__deepcopy__ = refuse  # type: ignore[attr-defined]
    copied = copy.deepcopy(t.model)
    # The original keeps its gate sums for the loss's penalty.
    assert [getattr(m, "gate_sum", None) for m in t.model.modules()] == held
    t.model.eval()
    copied.eval()
    with torch.no_grad():
        assert torch.equal(copied(x), t.model(x))


def test_bench_ops_counts_every_method_with_its_own_budget(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from benchmark.bench import throughput as bench

    bench.main(["--device", "cpu", "--ops", "--methods", "all", "--model", "cnn_small"])
    rows = {}
    for line in capsys.readouterr().out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1].isdigit():
            rows[parts[0]] = (int(parts[1]), int(parts[2]))
    assert set(rows) == set(bench.timed_methods("all"))  # BIMP's T0 < T included
    for name in ("str", "cs", "dst"):  # their batched pass runs fewer operations
        assert rows[name][1] < rows[name][0]
    assert rows["dense"][0] == rows["dense"][1]
    # The benchmark's synthetic dataset was its own: the registry is as it was before.
    assert bench.SYNTHETIC not in DATASETS
