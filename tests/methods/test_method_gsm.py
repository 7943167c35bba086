"""GSM: only the top-Q |w * grad| keep their gradient, decay-only updates, exact end, parents."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from helpers import comparable, run_interrupted, run_uninterrupted, tiny_config
from torch import nn

from benchmark.core.errors import ConfigError
from benchmark.core.files import load_checkpoint
from benchmark.pruning import magnitude_topk_masks
from benchmark.store.results import Store
from benchmark.training.runner import execute
from benchmark.training.trainer import Trainer
from benchmark.training.validation import load_config
from methods.gsm import GSM, GSMParams


def gsm_config(store: Path, *overrides: str):
    """A tiny GSM run on digits (3 epochs, 90% sparsity)."""
    return tiny_config(store, "method.name='gsm'", "budget.epochs=3", *overrides)


def backward_once(trainer: Trainer) -> None:
    """One forward/backward pass of a training batch (gradients set, no step)."""
    x, y = next(iter(trainer.data.train_batches(0, trainer.cfg.seed)))
    trainer.optimizer.zero_grad(set_to_none=True)
    nn.functional.cross_entropy(trainer.model(x), y).backward()


def test_hook_keeps_exactly_the_top_q_gradients_and_zeroes_the_rest(tmp_path: Path) -> None:
    cfg = gsm_config(tmp_path / "s", "method.sparsity=0.7", "method.rank_over='prunable'")
    trainer = Trainer(cfg)
    backward_once(trainer)
    params = trainer.ctx.masks.params
    prunable = {id(p) for p in params}
    before = [p.grad.clone() for p in params]
    others = {
        n: p.grad.clone() for n, p in trainer.model.named_parameters() if id(p) not in prunable
    }
    n = sum(p.numel() for p in params)
    q = int((1 - 0.7) * n)  # the paper's code's count (method.counting = "reference")
    selected = magnitude_topk_masks(
        [(p.detach() * g).abs() for p, g in zip(params, before, strict=True)], q
    )

    trainer.method.before_step(0)

    after = [p.grad for p in params]
    assert sum(int(s.sum()) for s in selected) == q
    for g0, g1, s in zip(before, after, selected, strict=True):
        assert torch.equal(g1[s], g0[s])  # selected: unchanged
        assert torch.all(g1[~s] == 0)  # all others: exactly zero
    # Most of the zeroed gradients were nonzero before: the hook did change them.
    assert sum(int((g0[~s] != 0).sum()) for g0, s in zip(before, selected, strict=True)) > n // 2
    for name, p in trainer.model.named_parameters():
        if id(p) not in prunable:
            assert torch.equal(p.grad, others[name])  # parameters outside P train normally


def test_reference_ranks_every_parameter_with_a_gradient(tmp_path: Path) -> None:
    # The paper's code: |w * g| over all parameters (BN and biases too), Q counted over P only.
    trainer = Trainer(gsm_config(tmp_path / "s", "method.sparsity=0.99"))
    assert trainer.method.params.rank_over == "all"
    backward_once(trainer)
    named = list(trainer.model.named_parameters())
    before = [p.grad.clone() for _, p in named]
    n = trainer.ctx.masks.num_prunable()
    q = n - round(0.99 * n)
    selected = magnitude_topk_masks(
        [(p.detach() * g).abs() for (_, p), g in zip(named, before, strict=True)], q
    )
    trainer.method.before_step(0)
    for (_, p), g0, s in zip(named, before, selected, strict=True):
        assert torch.equal(p.grad[s], g0[s])
        assert torch.all(p.grad[~s] == 0)
    # BatchNorm parameters take some of the Q slots, so fewer than Q weights of P keep theirs.
    bn = {
        id(p)
        for m in trainer.model.modules()
        if isinstance(m, nn.BatchNorm2d)
        for p in m.parameters()
    }
    prunable = {id(p) for p in trainer.ctx.masks.params}
    count = {
        kind: sum(int(s.sum()) for (_, p), s in zip(named, selected, strict=True) if id(p) in ids)
        for kind, ids in (("bn", bn), ("p", prunable))
    }
    assert count["bn"] > 0 and count["p"] < q


def test_unselected_weights_move_only_by_weight_decay(tmp_path: Path) -> None:
    cfg = gsm_config(tmp_path / "s", "optim.momentum=0.0", "optim.weight_decay=0.01")
    trainer = Trainer(cfg)
    backward_once(trainer)
    params = trainer.ctx.masks.params
    w0 = [p.detach().clone() for p in params]
    trainer.method.before_step(0)
    grads = [p.grad.clone() for p in params]
    lr = 0.1
    for group in trainer.optimizer.param_groups:
        group["lr"] = lr
    trainer.optimizer.step()
    for p, w, g in zip(params, w0, grads, strict=True):
        torch.testing.assert_close(p.detach(), w - lr * (g + 0.01 * w))
        unselected = g == 0
        torch.testing.assert_close(p.detach()[unselected], (1 - lr * 0.01) * w[unselected])


def test_execute_reaches_exact_sparsity_with_exact_zeros(tmp_path: Path) -> None:
    cfg = gsm_config(tmp_path / "s", "method.sparsity=0.8")
    record = execute(cfg)
    metrics = record["metrics"]
    n = metrics["num_prunable"]
    assert record["parent_run_id"] is None
    assert metrics["nonzero_prunable"] == n - round(0.8 * n)
    assert 0 <= metrics["stability"]["acc_after"] <= 1
    weights = load_checkpoint(Store(cfg.output.dir).weights_path(cfg.run_id))
    # The conv and linear weights of cnn_small are its only parameters with two or more dims.
    prunable = [w for w in weights.values() if w.dim() >= 2]
    assert sum(int((w == 0).sum()) for w in prunable) == round(0.8 * n)


def test_strong_decay_makes_gsm_nearly_pruning_stable(tmp_path: Path) -> None:
    # With enough decay the unselected weights shrink to almost zero before the final prune,
    # while the model still learns (digits, 10 epochs; the default decay would need far more).
    cfg = gsm_config(tmp_path / "s", "budget.epochs=10", "optim.weight_decay=0.05")
    stability = execute(cfg)["metrics"]["stability"]
    assert stability["acc_before"] > 0.8
    assert stability["pruning_stability"] > 0.9


def test_from_pretrained_trains_the_dense_parent_once(tmp_path: Path) -> None:
    store = tmp_path / "s"
    common = ["method.from_pretrained=true", "method.parent_epochs=2", "budget.epochs=1"]
    gsm = execute(gsm_config(store, *common))
    lc = execute(tiny_config(store, "method.name='lc'", *common))
    assert gsm["parent_run_id"] == lc["parent_run_id"] is not None
    dense = [r for r in Store(store).records() if r["method"] == "dense"]
    assert len(dense) == 1 and len(dense[0]["history"]) == 2
    # The child starts from the parent's weights.
    cfg = gsm_config(store, *common)
    parent_state = load_checkpoint(Store(store).weights_path(gsm["parent_run_id"]))
    trainer = Trainer(cfg, None, parent_state)
    for key, value in trainer.model.state_dict().items():
        # On a GPU the model lives there; the parent's weights were saved from the CPU.
        assert torch.equal(value.cpu(), parent_state[key].cpu()), key


def test_resume_is_exact(tmp_path: Path) -> None:
    cfg = gsm_config(tmp_path / "s", "optim.momentum=0.95")
    assert comparable(run_interrupted(cfg, 2, tmp_path)) == comparable(run_uninterrupted(cfg))


def test_resume_from_pretrained_is_exact(tmp_path: Path) -> None:
    cfg = gsm_config(tmp_path / "s", "method.from_pretrained=true", "method.parent_epochs=1")
    assert comparable(run_interrupted(cfg, 1, tmp_path)) == comparable(run_uninterrupted(cfg))


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ("method.parent_epochs=0", "method.parent_epochs"),
        ("method.rank_over='bn'", "method.rank_over"),
        ("method.from_pretrained=1", "method.from_pretrained"),
        ("method.momentum=0.9", "method.momentum"),
        ("optim.momentum=1.0", "optim.momentum"),
    ],
)
def test_invalid_hyperparameters_name_the_field(override: str, field: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(None, ["method.name='gsm'", override])
    assert err.value.field == field


def test_params_presets_and_info() -> None:
    assert GSMParams() == GSMParams(
        from_pretrained=False, parent_epochs=10, rank_over="all", recompute_bn=True
    )
    assert {"cifar10", "cifar100", "imagenet", "imagenet-pretrained"} <= set(GSM.presets)
    assert GSM.presets["cifar10"]["optim.momentum"] == [0.9, 0.95, 0.99]
    assert GSM.presets["cifar100"]["optim.momentum"] == [0.9, 0.95, 0.99]
    assert GSM.presets["imagenet"]["optim.momentum"] == [0.9, 0.95]
    pretrained = GSM.presets["imagenet-pretrained"]
    assert pretrained["from_pretrained"] == [True]
    assert pretrained["budget.epochs"] == [10, 20, 40]
    fields = set(GSMParams.__dataclass_fields__)
    for preset in GSM.presets.values():
        assert all(key in fields or "." in key for key in preset)
    assert GSM.info.sparsity_specifiable and GSM.info.pruning_stable
    assert not GSM.info.sparsity_agnostic and GSM.info.extra_hyperparameters == 0
