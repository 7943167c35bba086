"""DST: straight-through derivative, collapse reset, threshold penalty, plain final model."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from helpers import (
    check_plain_and_exact,
    comparable,
    run_interrupted,
    run_uninterrupted,
    tiny_config,
)
from torch import nn
from torch.nn.utils import parametrize

from benchmark.config.run import RunConfig
from benchmark.core.errors import ConfigError
from benchmark.training.runner import execute
from benchmark.training.trainer import Trainer
from methods.dst import DST, ChannelThreshold, LongTailStep, penalty, step_derivative


def dst_config(tmp: Path, *overrides: str) -> RunConfig:
    """A tiny DST run on digits (3 epochs)."""
    return tiny_config(tmp / "runs", "method.name='dst'", "budget.epochs=3", *overrides)


def test_straight_through_derivative_at_hand_picked_points() -> None:
    x = torch.tensor([-1.5, -1.0, -0.7, -0.4, -0.1, 0.0, 0.2, 0.4, 0.41, 1.0, 1.01])
    expected = torch.tensor([0, 0.4, 0.4, 0.4, 1.6, 2.0, 1.2, 0.4, 0.4, 0.4, 0])
    assert torch.allclose(step_derivative(x), expected, atol=1e-6)
    x.requires_grad_(True)
    out = LongTailStep.apply(x)
    assert torch.equal(out, (x > 0).float())  # step(0) = 0
    out.sum().backward()
    assert x.grad is not None and torch.allclose(x.grad, expected, atol=1e-6)


def test_gradients_reach_weights_and_thresholds() -> None:
    # One weight w = 0.3 with threshold t = 0.1: x = |w| - t = 0.2, step'(0.2) = 1.2.
    w = torch.tensor([[0.3]], requires_grad=True)
    reparam = ChannelThreshold(w)
    with torch.no_grad():
        reparam.threshold.fill_(0.1)
    out = reparam(w)
    assert float(out.detach()) == pytest.approx(0.3)
    out.sum().backward()
    # d out / dt = -w step'(x) = -0.36; d out / dw = step(x) + w step'(x) sign(w) = 1.36
    assert float(reparam.threshold.grad) == pytest.approx(-0.36)
    assert float(w.grad) == pytest.approx(1.36)


def test_collapsed_layer_has_its_thresholds_reset() -> None:
    w = torch.linspace(-1, 1, 100).reshape(4, 25)
    reparam = ChannelThreshold(w)
    # 2 of 100 entries kept (2% > 1%): nothing happens.
    with torch.no_grad():
        reparam.threshold.copy_(torch.tensor([0.999, 10.0, 10.0, 0.999]))
    assert int((reparam(w) != 0).sum()) == 2
    assert reparam.threshold.tolist() == pytest.approx([0.999, 10.0, 10.0, 0.999])
    assert int(reparam.resets) == 0
    # 1 of 100 kept (exactly 1%): the check resets every threshold of the layer before masking.
    with torch.no_grad():
        reparam.threshold.copy_(torch.tensor([10.0, 10.0, 10.0, 0.999]))
    out = reparam(w)
    assert reparam.threshold.tolist() == [0.0] * 4
    assert int(reparam.resets) == 1
    assert torch.equal(out, w * (w != 0))  # the reset mask keeps every nonzero weight


def test_collapse_in_training_is_reset_and_counted(tmp_path: Path) -> None:
    trainer = Trainer(dst_config(tmp_path))
    method: DST = trainer.method  # type: ignore[assignment]
    with torch.no_grad():
        method.reparams[1].threshold.fill_(100.0)
    trainer.evaluate("val")  # any use of the weights runs the check
    assert float(method.reparams[1].threshold.detach().abs().max()) == 0.0
    metrics = trainer.fit()
    assert metrics is not None and metrics["threshold_resets"] >= 1


def test_penalty_is_alpha_times_sum_of_exp_minus_thresholds(tmp_path: Path) -> None:
    t = [torch.tensor([0.0, 1.0]), torch.tensor([2.0])]
    assert float(penalty(t)) == pytest.approx(1 + math.exp(-1) + math.exp(-2))
    trainer = Trainer(dst_config(tmp_path, "method.alpha=1e-3"))
    method: DST = trainer.method  # type: ignore[assignment]
    with torch.no_grad():
        for i, p in enumerate(method.thresholds):
            p.fill_(0.1 * i)
    n = [p.numel() for p in method.thresholds]
    expected = 1e-3 * sum(k * math.exp(-0.1 * i) for i, k in enumerate(n))
    loss = method.extra_loss(0)
    assert loss is not None and float(loss.detach()) == pytest.approx(expected, rel=1e-6)
    loss.backward()
    # d/dt of alpha exp(-t) = -alpha exp(-t): the penalty pushes every threshold up.
    assert all(bool((p.grad < 0).all()) for p in method.thresholds)


def test_reference_decays_weights_twice_and_thresholds_once(tmp_path: Path) -> None:
    # The paper's code: 1/2 wd ||w||^2 over P in the loss plus SGD's decay on every parameter.
    trainer = Trainer(dst_config(tmp_path, "optim.weight_decay=0.001"))
    method: DST = trainer.method  # type: ignore[assignment]
    decay = {id(p): g["weight_decay"] for g in trainer.optimizer.param_groups for p in g["params"]}
    assert len(decay) == len(list(trainer.model.parameters()))
    prunable = {id(p) for p in trainer.ctx.masks.params}
    for p in trainer.model.parameters():
        assert decay[id(p)] == pytest.approx(0.002 if id(p) in prunable else 0.001)
    assert method.thresholds and all(decay[id(t)] == 0.001 for t in method.thresholds)


def test_one_threshold_per_output_channel_without_weight_decay(tmp_path: Path) -> None:
    trainer = Trainer(dst_config(tmp_path, "method.decay='once'"))
    method: DST = trainer.method  # type: ignore[assignment]
    shapes = [p.shape[0] for p in trainer.ctx.masks.params]
    assert [p.shape for p in method.thresholds] == [torch.Size([k]) for k in shapes]
    assert all(float(p.detach().abs().max()) == 0.0 for p in method.thresholds)
    base, thresholds = trainer.optimizer.param_groups
    assert base["weight_decay"] == 5e-4 and thresholds["weight_decay"] == 0.0
    assert [id(p) for p in thresholds["params"]] == [id(p) for p in method.thresholds]


def test_final_model_is_plain_with_the_last_mask(tmp_path: Path) -> None:
    cfg = dst_config(tmp_path, "method.alpha=1e-2")
    trainer = Trainer(cfg)
    assert trainer.fit(stop_after=3) is None
    method: DST = trainer.method  # type: ignore[assignment]
    with torch.no_grad():
        expected = [
            p * (p.abs() > r.threshold.view(-1, *[1] * (p.dim() - 1)))
            for r, p in zip(method.reparams, trainer.ctx.masks.params, strict=True)
        ]
    metrics = trainer.fit()
    assert metrics is not None
    assert not any(parametrize.is_parametrized(m) for m in trainer.model.modules())
    layers = [m for m in trainer.model.modules() if isinstance(m, nn.Conv2d | nn.Linear)]
    for layer, param, exp in zip(layers, trainer.ctx.masks.params, expected, strict=True):
        assert type(layer) in (nn.Conv2d, nn.Linear) and layer.weight is param
        assert torch.equal(param.detach(), exp)
    assert metrics["sparsity"] > 0
    assert trainer.ctx.masks.sparsity() == pytest.approx(metrics["sparsity"], abs=1e-12)
    assert metrics["stability"]["pruning_stability"] == 1.0


def test_sparsity_grows_with_alpha(tmp_path: Path) -> None:
    low = execute(dst_config(tmp_path, "method.alpha=1e-5"))["metrics"]["sparsity"]
    high = execute(dst_config(tmp_path, "method.alpha=1e-2"))["metrics"]["sparsity"]
    assert high - low > 0.2


def test_end_to_end_run_stores_a_plain_sparse_model(tmp_path: Path) -> None:
    cfg = dst_config(tmp_path, "method.alpha=1e-2")
    check_plain_and_exact(cfg, execute(cfg))


def test_resume_is_exact(tmp_path: Path) -> None:
    cfg = dst_config(tmp_path, "method.alpha=1e-2")
    assert comparable(run_interrupted(cfg, 1, tmp_path)) == comparable(run_uninterrupted(cfg))


def test_resume_after_finalize_during_finetuning(tmp_path: Path) -> None:
    cfg = dst_config(tmp_path, "budget.epochs=2", "finetune.epochs=2", "method.alpha=1e-2")
    assert comparable(run_interrupted(cfg, 3, tmp_path)) == comparable(run_uninterrupted(cfg))


def test_info_and_presets() -> None:
    assert not DST.info.sparsity_specifiable and DST.info.pruning_stable
    assert DST.info.extra_hyperparameters == 1
    assert {"cifar10", "cifar100", "imagenet"} <= set(DST.presets)
    assert DST.presets["cifar10"]["alpha"] == [5e-6, 1e-5, 5e-5, 1e-4, 5e-4]
    assert DST.presets["imagenet"]["alpha"] == [1e-7, 5e-7, 1e-6, 2e-6, 5e-6, 8e-6, 1e-5, 1e-4]
    assert len(DST.presets["cifar100-extended"]["alpha"]) == 14


@pytest.mark.parametrize("preset", sorted(DST.presets))
def test_every_preset_value_is_a_valid_setting(tmp_path: Path, preset: str) -> None:
    for key, values in DST.presets[preset].items():
        dotted = key if "." in key else f"method.{key}"
        for value in values:
            dst_config(tmp_path, f"{dotted}={value!r}")


@pytest.mark.parametrize("value", ["-1e-5", "nan", "inf"])
def test_invalid_alpha_names_the_field(tmp_path: Path, value: str) -> None:
    with pytest.raises(ConfigError) as err:
        dst_config(tmp_path, f"method.alpha={value}")
    assert err.value.field == "method.alpha"
