"""STR: the soft-threshold forward weight, sparsity from s_init, plain final model, resume."""

from __future__ import annotations

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
from methods.str import STR, SoftThreshold


def str_config(tmp: Path, *overrides: str) -> RunConfig:
    """A tiny STR run on digits (3 epochs)."""
    return tiny_config(tmp / "runs", "method.name='str'", "budget.epochs=3", *overrides)


def test_forward_weight_is_soft_threshold() -> None:
    w = torch.tensor([-1.0, -0.5, -0.2, 0.0, 0.3, 0.5, 0.75, 2.0], requires_grad=True)
    reparam = SoftThreshold(0.0, w)  # threshold sigmoid(0) = 0.5
    out = reparam(w)
    assert torch.equal(out, torch.tensor([-0.5, 0, 0, 0, 0, 0, 0.25, 1.5]))
    out.sum().backward()
    # Gradients flow through the survivors only (relu'(0) = 0 at |w| = threshold):
    # d/ds = -sigmoid'(0) * (sum of the survivors' signs: -1 + 1 + 1) = -0.25.
    assert reparam.s.grad is not None and float(reparam.s.grad) == pytest.approx(-0.25)
    assert torch.equal(w.grad, torch.tensor([1.0, 0, 0, 0, 0, 0, 1, 1]))
    # s_init = -1.3 on random data: the threshold is sigmoid(-1.3) = 0.214165...
    x = torch.randn(50, generator=torch.Generator().manual_seed(0))
    out = SoftThreshold(-1.3, x)(x).detach()
    kept = x.abs() > 0.2141650
    assert torch.equal(out != 0, kept) and 0 < int(kept.sum()) < 50
    assert torch.allclose(out[kept], x[kept] - torch.sign(x[kept]) * 0.2141650, atol=1e-6)


def test_sparsity_grows_with_s_init(tmp_path: Path) -> None:
    low = execute(str_config(tmp_path, "method.s_init=-6.0"))["metrics"]
    high = execute(str_config(tmp_path, "method.s_init=-2.0"))["metrics"]
    assert 0 < low["sparsity"] < high["sparsity"]
    assert high["sparsity"] - low["sparsity"] > 0.1


def test_extra_parameters_are_trained_with_weight_decay(tmp_path: Path) -> None:
    trainer = Trainer(str_config(tmp_path, "method.s_init=-3.0"))
    method: STR = trainer.method  # type: ignore[assignment]
    base, extra = trainer.optimizer.param_groups
    assert extra["weight_decay"] == base["weight_decay"] == 5e-4
    assert [id(p) for p in extra["params"]] == [id(r.s) for r in method.reparams]
    assert len(extra["params"]) == len(trainer.ctx.prunable)
    assert all(float(p.detach()) == -3.0 for p in extra["params"])
    # Parametrizing keeps the trained tensors the same objects as the mask store's.
    for (name, param), module in zip(trainer.ctx.prunable, method.owners, strict=True):
        assert module.parametrizations.weight.original is param, name
    assert trainer.fit(stop_after=1) is None
    assert all(float(p.detach()) != -3.0 for p in extra["params"])


def test_final_weights_are_the_forward_weights_and_plain(tmp_path: Path) -> None:
    cfg = str_config(tmp_path, "method.s_init=-3.0")
    trainer = Trainer(cfg)
    assert trainer.fit(stop_after=3) is None  # all epochs, not yet finalized
    method: STR = trainer.method  # type: ignore[assignment]
    with torch.no_grad():
        expected = [
            torch.sign(p) * torch.relu(p.abs() - torch.sigmoid(r.s))
            for r, p in zip(method.reparams, trainer.ctx.masks.params, strict=True)
        ]
    metrics = trainer.fit()
    assert metrics is not None
    for module in trainer.model.modules():
        assert not parametrize.is_parametrized(module)
    layers = [m for m in trainer.model.modules() if isinstance(m, nn.Conv2d | nn.Linear)]
    assert all(type(m) in (nn.Conv2d, nn.Linear) for m in layers)
    for layer, param, exp in zip(layers, trainer.ctx.masks.params, expected, strict=True):
        assert layer.weight is param
        assert torch.equal(param.detach(), exp)
    assert metrics["stability"]["pruning_stability"] == 1.0
    # The mask store holds the final zero pattern: its sparsity is the actual zeros'.
    assert metrics["sparsity"] > 0
    assert trainer.ctx.masks.sparsity() == pytest.approx(metrics["sparsity"], abs=1e-12)
    assert trainer.method.masks_active


def test_end_to_end_run_stores_a_plain_sparse_model(tmp_path: Path) -> None:
    cfg = str_config(tmp_path, "method.s_init=-3.0")
    check_plain_and_exact(cfg, execute(cfg))


def test_resume_is_exact(tmp_path: Path) -> None:
    cfg = str_config(tmp_path, "method.s_init=-3.0")
    assert comparable(run_interrupted(cfg, 1, tmp_path)) == comparable(run_uninterrupted(cfg))


def test_resume_after_finalize_during_finetuning(tmp_path: Path) -> None:
    cfg = str_config(tmp_path, "budget.epochs=2", "finetune.epochs=2", "method.s_init=-3.0")
    assert comparable(run_interrupted(cfg, 3, tmp_path)) == comparable(run_uninterrupted(cfg))


def test_info_and_presets() -> None:
    assert not STR.info.sparsity_specifiable and STR.info.pruning_stable
    assert STR.info.extra_hyperparameters == 1
    assert {"cifar10", "cifar100", "imagenet"} <= set(STR.presets)
    assert STR.presets["cifar10"]["s_init"] == [-100, -50, -5, -2, -1, 0, 5, 50, 100]
    assert STR.presets["cifar100"]["s_init"] == [-5000, -3000, -2000, -1000, -500]
    assert STR.presets["imagenet"]["s_init"] == [-20, -15, -13, -10, -5, -4, -2]


@pytest.mark.parametrize("preset", sorted(STR.presets))
def test_every_preset_value_is_a_valid_setting(tmp_path: Path, preset: str) -> None:
    for key, values in STR.presets[preset].items():
        dotted = key if "." in key else f"method.{key}"
        for value in values:
            str_config(tmp_path, f"{dotted}={value!r}")


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_invalid_s_init_names_the_field(tmp_path: Path, value: str) -> None:
    with pytest.raises(ConfigError) as err:
        str_config(tmp_path, f"method.s_init={value}")
    assert err.value.field == "method.s_init"
