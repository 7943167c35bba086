"""CS: temperature schedule, soft-mask forward weight, L1 term, hard final mask, resume."""

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
from methods.cs import CS, SoftMask, temperature_at


def cs_config(tmp: Path, *overrides: str) -> RunConfig:
    """A tiny CS run on digits (3 epochs)."""
    return tiny_config(tmp / "runs", "method.name='cs'", "budget.epochs=3", *overrides)


def test_temperature_grows_exponentially_from_one_to_final() -> None:
    assert temperature_at(0, 100, 300.0) == 1.0
    assert temperature_at(25, 100, 300.0) == pytest.approx(4.16179145)  # 300^(1/4)
    assert temperature_at(50, 100, 300.0) == pytest.approx(17.32050808)  # sqrt(300)
    assert temperature_at(100, 100, 300.0) == pytest.approx(300.0)
    assert temperature_at(3, 4, 16.0) == pytest.approx(8.0)


def test_method_sets_the_temperature_of_each_iteration(tmp_path: Path) -> None:
    trainer = Trainer(cs_config(tmp_path, "method.temperature=500.0"))
    method: CS = trainer.method  # type: ignore[assignment]
    ipe = trainer.ipe
    assert method.total_iters == 3 * ipe
    assert trainer.fit(stop_after=1) is None
    # After epoch 1 (and for its evaluation) beta is its value after ipe iterations, as the
    # paper's code (CS.after_training_iteration) sets it after every iteration.
    assert float(method.beta) == pytest.approx(500.0 ** (ipe / (3 * ipe)), rel=1e-6)
    # The layers read the shared temperature.
    assert all(r.beta is method.beta for r in method.reparams)
    method.on_iteration_start(2 * ipe)
    assert float(method.reparams[0].beta) == pytest.approx(500.0 ** (2 / 3), rel=1e-6)


def test_the_epoch_is_evaluated_at_the_temperature_after_its_last_iteration(
    tmp_path: Path,
) -> None:
    trainer = Trainer(cs_config(tmp_path, "method.temperature=500.0", "method.mask_init=-0.2"))
    method: CS = trainer.method  # type: ignore[assignment]
    ipe, total = trainer.ipe, 3 * trainer.ipe
    assert trainer.fit(stop_after=1) is None
    recorded = trainer.state.history[0]["val"]["loss"]
    method.beta.fill_(500.0 ** (ipe / total))
    after = trainer.evaluate("val")["loss"]
    method.beta.fill_(500.0 ** ((ipe - 1) / total))
    before = trainer.evaluate("val")["loss"]
    assert after != before  # the two temperatures do give different validation losses
    assert recorded == pytest.approx(after, rel=1e-6)


def test_forward_weight_is_softly_masked() -> None:
    beta = torch.tensor(2.0)
    w = torch.tensor([1.0, 2.0, -3.0])
    reparam = SoftMask(0.0, beta, w)
    with torch.no_grad():
        reparam.logits.copy_(torch.tensor([-1.0, 0.0, 0.5]))
    # w sigmoid(2 m) / sigmoid(0) = 2 w (sigmoid(-2), sigmoid(0), sigmoid(1))
    expected = torch.tensor([2 * 0.11920292, 2.0, -6 * 0.73105858])
    assert torch.allclose(reparam(w), expected, atol=1e-6)
    # The final form (the paper's code): w sigmoid(beta m) / sigmoid(s0) [m > 0]; m = 0 pruned.
    reparam.final = True
    assert torch.allclose(reparam(w), torch.tensor([0.0, 0.0, -6 * 0.73105858]), atol=1e-6)
    assert float(reparam(w).detach()[1]) == 0.0


def test_training_starts_from_the_unmasked_network() -> None:
    w = torch.randn(4, 3, generator=torch.Generator().manual_seed(1))
    for s0 in (-0.3, 0.0, 0.25):
        reparam = SoftMask(s0, torch.tensor(1.0), w)
        assert torch.allclose(reparam(w), w, atol=1e-6)


def test_l1_term_is_lambda_times_the_sum_of_the_gates(tmp_path: Path) -> None:
    trainer = Trainer(cs_config(tmp_path, "method.l1=1e-3", "method.mask_init=-0.2"))
    method: CS = trainer.method  # type: ignore[assignment]
    method.on_iteration_start(7)
    trainer.model(trainer.data.example_batch())
    beta = temperature_at(7, method.total_iters, 300.0)
    n = trainer.ctx.masks.num_prunable()
    expected = 1e-3 * n / (1 + math.exp(0.2 * beta))  # every logit is still s0 = -0.2
    loss = method.extra_loss(7)
    assert loss is not None and float(loss.detach()) == pytest.approx(expected, rel=1e-5)
    loss.backward()
    assert all(r.logits.grad is not None for r in method.reparams)


def effective_decay(trainer: Trainer) -> dict[int, float]:
    """The weight decay each parameter gets from its optimizer group, by parameter id."""
    return {id(p): g["weight_decay"] for g in trainer.optimizer.param_groups for p in g["params"]}


def test_reference_decays_weights_twice_and_logits_once(tmp_path: Path) -> None:
    # The paper's code adds 1/2 wd ||w||^2 over P to the loss and keeps SGD's weight decay on
    # every parameter, mask logits included.
    trainer = Trainer(cs_config(tmp_path, "optim.weight_decay=0.001"))
    method: CS = trainer.method  # type: ignore[assignment]
    assert method.params.decay == "reference"
    decay = effective_decay(trainer)
    assert len(decay) == len(list(trainer.model.parameters()))
    prunable = {id(p) for p in trainer.ctx.masks.params}
    logits = {id(r.logits) for r in method.reparams}
    for p in trainer.model.parameters():
        expected = 0.002 if id(p) in prunable else 0.001
        assert decay[id(p)] == pytest.approx(expected), p.shape
    assert logits and all(decay[i] == 0.001 for i in logits)


def test_weight_decay_applies_once_not_to_the_logits(tmp_path: Path) -> None:
    trainer = Trainer(cs_config(tmp_path, "method.decay='once'"))
    method: CS = trainer.method  # type: ignore[assignment]
    base, logits = trainer.optimizer.param_groups
    assert base["weight_decay"] == 5e-4 and logits["weight_decay"] == 0.0
    assert [id(p) for p in logits["params"]] == [id(r.logits) for r in method.reparams]
    in_base = {id(p) for p in base["params"]}
    assert all(id(p) in in_base for p in trainer.ctx.masks.params)
    assert len(in_base) + len(logits["params"]) == len(list(trainer.model.parameters()))


def test_final_weights_use_the_hard_mask_and_model_is_plain(tmp_path: Path) -> None:
    cfg = cs_config(tmp_path, "method.mask_init=0.05", "method.l1=1e-4")
    trainer = Trainer(cfg)
    assert trainer.fit(stop_after=3) is None
    method: CS = trainer.method  # type: ignore[assignment]
    scale = 1 + math.exp(-0.05)
    # The paper's code keeps the soft-masked weight at beta_final under the binary mask.
    with torch.no_grad():
        expected = [
            p * torch.sigmoid(300.0 * r.logits) * scale * (r.logits > 0)
            for r, p in zip(method.reparams, trainer.ctx.masks.params, strict=True)
        ]
    metrics = trainer.fit()
    assert metrics is not None
    assert not any(parametrize.is_parametrized(m) for m in trainer.model.modules())
    layers = [m for m in trainer.model.modules() if isinstance(m, nn.Conv2d | nn.Linear)]
    for layer, param, exp in zip(layers, trainer.ctx.masks.params, expected, strict=True):
        assert type(layer) in (nn.Conv2d, nn.Linear) and layer.weight is param
        torch.testing.assert_close(param.detach(), exp)
        assert torch.equal(param.detach() == 0, exp == 0)
    assert 0 < metrics["sparsity"] < 1
    assert trainer.ctx.masks.sparsity() == pytest.approx(metrics["sparsity"], abs=1e-12)
    stability = metrics["stability"]
    assert set(stability) == {"acc_before", "acc_after", "pruning_stability"}
    assert float(method.beta) == pytest.approx(300.0)  # soft mask of "before" at beta_final


def test_end_to_end_run_stores_a_plain_sparse_model(tmp_path: Path) -> None:
    cfg = cs_config(tmp_path, "method.mask_init=-0.05")
    check_plain_and_exact(cfg, execute(cfg))


def test_resume_is_exact(tmp_path: Path) -> None:
    cfg = cs_config(tmp_path, "method.l1=1e-4")
    assert comparable(run_interrupted(cfg, 1, tmp_path)) == comparable(run_uninterrupted(cfg))


def test_resume_after_finalize_during_finetuning(tmp_path: Path) -> None:
    cfg = cs_config(tmp_path, "budget.epochs=2", "finetune.epochs=2", "method.l1=1e-4")
    assert comparable(run_interrupted(cfg, 3, tmp_path)) == comparable(run_uninterrupted(cfg))


def test_info_and_presets() -> None:
    assert not CS.info.sparsity_specifiable and CS.info.pruning_stable
    assert CS.info.extra_hyperparameters == 3
    assert {"cifar10", "cifar100", "imagenet"} <= set(CS.presets)
    assert CS.presets["cifar10"]["temperature"] == [300.0]
    assert CS.presets["cifar100"]["temperature"] == [500.0]
    assert len(CS.presets["cifar10"]["mask_init"]) == len(CS.presets["cifar100"]["mask_init"]) == 11
    assert CS.presets["cifar100"]["l1"] == [1e-9, 1e-8, 1e-7]


@pytest.mark.parametrize("preset", sorted(CS.presets))
def test_every_preset_value_is_a_valid_setting(tmp_path: Path, preset: str) -> None:
    for key, values in CS.presets[preset].items():
        dotted = key if "." in key else f"method.{key}"
        for value in values:
            cs_config(tmp_path, f"{dotted}={value!r}")


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ("method.temperature=0.5", "method.temperature"),
        ("method.temperature=inf", "method.temperature"),
        ("method.l1=-1e-8", "method.l1"),
        ("method.l1=nan", "method.l1"),
        ("method.mask_init=inf", "method.mask_init"),
        ("method.decay='twice'", "method.decay"),
    ],
)
def test_invalid_hyperparameters_name_the_field(tmp_path: Path, override: str, field: str) -> None:
    with pytest.raises(ConfigError) as err:
        cs_config(tmp_path, override)
    assert err.value.field == field


@pytest.mark.parametrize("name", ["cs", "dst"])
def test_reference_decay_step_equals_the_papers_loss_term(tmp_path: Path, name: str) -> None:
    # The paper's code: loss + 1/2 wd ||w_P||^2, one SGD group with weight decay wd for every
    # parameter. The first optimizer step of prunebench's CS/DST must be the same step.
    wd = 0.01
    cfg = tiny_config(tmp_path / "s", f"method.name={name!r}", f"optim.weight_decay={wd}")
    trainer = Trainer(cfg)
    model, method = trainer.model, trainer.method
    x, y = next(iter(trainer.data.train_batches(0, cfg.seed)))
    start = {k: v.clone() for k, v in model.state_dict().items()}

    def step(optimizer: torch.optim.Optimizer, loss_term: bool) -> dict[str, torch.Tensor]:
        model.load_state_dict(start)
        for group in optimizer.param_groups:
            group["lr"] = 0.1
        method.on_iteration_start(0)
        loss = nn.functional.cross_entropy(model(x), y)
        extra = method.extra_loss(0)
        if extra is not None:
            loss = loss + extra
        if loss_term:
            loss = loss + 0.5 * wd * sum((p**2).sum() for p in trainer.ctx.masks.params)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return {n: p.detach().clone() for n, p in model.named_parameters()}

    ours = step(trainer.optimizer, loss_term=False)
    # The paper's code switches Nesterov on with any weight decay > 0, as prunebench does.
    assert trainer.optimizer.param_groups[0]["nesterov"]
    reference = torch.optim.SGD(
        model.parameters(), lr=0.1, momentum=0.9, weight_decay=wd, nesterov=True
    )
    theirs = step(reference, loss_term=True)
    assert ours.keys() == theirs.keys()
    for key in ours:
        torch.testing.assert_close(ours[key], theirs[key], rtol=1e-5, atol=1e-7, msg=key)
