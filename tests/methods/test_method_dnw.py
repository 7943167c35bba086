"""DNW: top-k forward, straight-through dense gradient, stability 1, exact end, resume."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch
from helpers import comparable, run_interrupted, run_uninterrupted, tiny_config
from torch import nn

from benchmark.core.errors import ConfigError
from benchmark.core.files import load_checkpoint
from benchmark.pruning import magnitude_topk_masks
from benchmark.pruning.flat import topk_mask_
from benchmark.store.results import Store
from benchmark.training.runner import execute
from benchmark.training.trainer import Trainer
from benchmark.training.validation import load_config
from methods.dnw import DNW, DNWParams


def dnw_config(store: Path, *overrides: str):
    """A tiny DNW run on digits (3 epochs, 90% sparsity)."""
    return tiny_config(store, "method.name='dnw'", "budget.epochs=3", *overrides)


def keep_of(n: int, sparsity: float = 0.9) -> int:
    """The number of weights DNW keeps out of ``n`` at ``sparsity``: as the paper's code
    (``counting = "reference"``), n - int(s n) when no magnitude ties the threshold."""
    return n - int(sparsity * n)


@pytest.mark.parametrize("keep", [0, 1, 3, 5, 7, 8])
def test_topk_mask_is_exact_on_both_sides(keep: int) -> None:
    scores = torch.tensor([0.5, 3.0, 1.0, 2.0, 2.0, -1.0, 4.0, 0.0])
    out = topk_mask_(scores, keep, torch.empty(8))
    assert int(out.sum()) == keep
    expected = magnitude_topk_masks([scores], keep)[0].float()
    if keep != 3:  # keep = 3 cuts through the tie at 2.0
        assert torch.equal(out, expected)
    # Every kept score is at least every dropped one.
    if 0 < keep < 8:
        assert scores[out == 1].min() >= scores[out == 0].max()


def test_forward_is_top_k_and_the_dense_gradient_updates_every_weight(tmp_path: Path) -> None:
    cfg = dnw_config(tmp_path / "s", "optim.momentum=0.0", "optim.weight_decay=0.0")
    trainer = Trainer(cfg)
    assert trainer.fit(stop_after=1) is None
    method: DNW = trainer.method  # type: ignore[assignment]
    model, params = trainer.model, trainer.ctx.masks.params
    n = sum(p.numel() for p in params)
    keep = keep_of(n)
    assert method.dense is not None
    dense = [d.clone() for d in method.dense.views]
    # Between iterations the model holds the global top-k of the dense weights, nothing else.
    top = magnitude_topk_masks([d.abs() for d in dense], keep)
    for p, d, m in zip(params, dense, top, strict=True):
        assert torch.equal(p.detach(), d * m)
    assert sum(int(p.count_nonzero()) for p in params) == keep

    x, y = next(iter(trainer.data.train_batches(1, cfg.seed)))
    step, lr = trainer.ipe, 0.05
    for group in trainer.optimizer.param_groups:
        group["lr"] = lr
    # Reference: the gradient of the loss at the masked weights, taken on a copy of the model.
    reference = copy.deepcopy(model)
    nn.functional.cross_entropy(reference(x), y).backward()
    ref_grads = [reference.get_parameter(name).grad for name in trainer.ctx.masks.names]
    seen: dict[str, torch.Tensor] = {}
    for name, module in model.named_modules():
        if isinstance(module, nn.Conv2d | nn.Linear):
            module.register_forward_pre_hook(
                lambda mod, _, name=name: seen.__setitem__(name, mod.weight.detach().clone())
            )

    method.before_forward(step)
    loss = nn.functional.cross_entropy(model(x), y)
    trainer.optimizer.zero_grad(set_to_none=True)
    loss.backward()
    grads = [p.grad.detach().clone() for p in params]
    method.before_step(step)
    for p, d in zip(params, dense, strict=True):
        assert torch.equal(p.detach(), d)  # the optimizer sees the dense weights
    trainer.optimizer.step()
    method.after_step(step)

    # The forward pass used exactly k nonzero weights of P.
    assert sum(int(w.count_nonzero()) for w in seen.values()) == keep
    # Straight-through: every weight, pruned or not, gets the gradient at the masked point ...
    for g, r in zip(grads, ref_grads, strict=True):
        torch.testing.assert_close(g, r)
    pruned = sum(int((m == 0).sum()) for m in top)
    pruned_with_grad = sum(
        int(((g != 0) & (m == 0)).sum()) for g, m in zip(grads, top, strict=True)
    )
    assert pruned_with_grad > 0.9 * pruned
    # ... and the dense weights take the full step, pruned entries included.
    new_dense = list(method.dense.views)
    for d_old, d_new, g in zip(dense, new_dense, grads, strict=True):
        torch.testing.assert_close(d_new, d_old - lr * g)
    moved = sum(
        int(((d_new != d_old) & (m == 0)).sum())
        for d_old, d_new, m in zip(dense, new_dense, top, strict=True)
    )
    assert moved > 0.9 * pruned
    # The model is the top-k of the new dense weights again, and the store reports that mask.
    new_top = magnitude_topk_masks([d.abs() for d in new_dense], keep)
    for p, d, m, stored in zip(params, new_dense, new_top, trainer.ctx.masks.masks, strict=True):
        assert torch.equal(p.detach(), d * m)
        assert torch.equal(stored != 0, m)


def test_mask_changes_during_training_and_the_end_is_exact(tmp_path: Path) -> None:
    cfg = dnw_config(tmp_path / "s")
    trainer = Trainer(cfg)
    assert trainer.fit(stop_after=1) is None
    after_one = [m.clone() for m in trainer.ctx.masks.masks]
    metrics = trainer.fit()
    assert metrics is not None
    n = metrics["num_prunable"]
    assert metrics["nonzero_prunable"] == keep_of(n)
    final = [p.detach() != 0 for p in trainer.ctx.masks.params]
    # The wiring is learned: weights left and entered the top-k set after epoch 1.
    assert sum(int(((a != 0) != f).sum()) for a, f in zip(after_one, final, strict=True)) > 0
    stability = metrics["stability"]
    assert stability["acc_before"] == stability["acc_after"]
    assert stability["pruning_stability"] == 1.0


@pytest.mark.parametrize("counting", ["reference", "exact"])
def test_execute_reaches_its_count_with_exact_zeros(tmp_path: Path, counting: str) -> None:
    cfg = dnw_config(tmp_path / "s", "method.sparsity=0.8", f"method.counting={counting!r}")
    record = execute(cfg)
    metrics = record["metrics"]
    n = metrics["num_prunable"]
    # cnn_small: 0.8 * 6032 = 4825.6, so the paper's code prunes 4825 and exact 4826.
    pruned = int(0.8 * n) if counting == "reference" else round(0.8 * n)
    expected = pruned / n
    # Every epoch already trains the sparse model the forward pass uses.
    assert [h["sparsity"] for h in record["history"]] == pytest.approx([expected] * 3, abs=1e-12)
    assert metrics["nonzero_prunable"] == n - pruned
    assert metrics["stability"]["pruning_stability"] == 1.0
    weights = load_checkpoint(Store(cfg.output.dir).weights_path(cfg.run_id))
    # The conv and linear weights of cnn_small are its only parameters with two or more dims.
    prunable = [w for w in weights.values() if w.dim() >= 2]
    assert sum(int((w == 0).sum()) for w in prunable) == pruned


def test_resume_is_exact(tmp_path: Path) -> None:
    cfg = dnw_config(tmp_path / "s")
    assert comparable(run_interrupted(cfg, 2, tmp_path)) == comparable(run_uninterrupted(cfg))


def test_resume_during_finetuning_is_exact(tmp_path: Path) -> None:
    cfg = dnw_config(tmp_path / "s", "budget.epochs=2", "finetune.epochs=1")
    assert comparable(run_interrupted(cfg, 2, tmp_path)) == comparable(run_uninterrupted(cfg))


def test_unknown_hyperparameter_is_rejected_with_its_field() -> None:
    with pytest.raises(ConfigError) as err:
        load_config(None, ["method.name='dnw'", "method.refresh_every=4"])
    assert err.value.field == "method.refresh_every"


def test_params_presets_and_info() -> None:
    assert DNWParams() == DNWParams()
    assert {"cifar10", "cifar100", "imagenet"} <= set(DNW.presets)
    assert DNW.presets["cifar10"]["optim.weight_decay"] == [1e-4, 5e-4, 1e-3, 5e-3]
    assert DNW.presets["imagenet"]["optim.weight_decay"] == [1e-4, 1e-5]
    assert all("." in key for preset in DNW.presets.values() for key in preset)
    info = DNW.info
    assert info.sparsity_specifiable and info.pruning_stable and not info.sparsity_agnostic
    assert info.extra_hyperparameters == 0
