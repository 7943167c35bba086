"""DPF: periodic mask refreshes, masked forward with dense update, revival, exact end, resume."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from helpers import comparable, run_interrupted, run_uninterrupted, tiny_config
from torch import nn

from benchmark.core.errors import ConfigError
from benchmark.core.files import load_checkpoint
from benchmark.pruning.gradual import gradual_schedule
from benchmark.store.results import Store
from benchmark.training.runner import execute
from benchmark.training.trainer import Trainer
from benchmark.training.validation import load_config
from methods.dpf import DPF, DPFParams


def dpf_config(store: Path, *overrides: str):
    """A tiny DPF run on digits: T = 4 epochs, pruning steps after epochs 1, 2 and 3."""
    return tiny_config(store, "method.name='dpf'", "budget.epochs=4", *overrides)


def record_refreshes(monkeypatch: pytest.MonkeyPatch) -> list[tuple[float, list[torch.Tensor]]]:
    """Record the target and the resulting masks of every DPF mask refresh."""
    calls: list[tuple[float, list[torch.Tensor]]] = []
    original = DPF.refresh

    def wrapped(self: DPF, target: float) -> None:
        original(self, target)
        assert self.ctx is not None
        calls.append((target, [m.detach().clone() for m in self.ctx.masks.masks]))

    monkeypatch.setattr(DPF, "refresh", wrapped)
    return calls


def expected_refreshes(epochs: int, ipe: int, every: int, pruning_epochs: list[int]) -> int:
    """One refresh per pruning epoch plus one every ``every`` steps after the first of them."""
    periodic = [
        s
        for s in range(pruning_epochs[0] * ipe, epochs * ipe)
        if s % every == 0 and not (s % ipe == 0 and s // ipe in pruning_epochs)
    ]
    return len(pruning_epochs) + len(periodic)


@pytest.mark.parametrize("every", [16, 4, 11])
def test_mask_is_refreshed_every_k_iterations(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, every: int
) -> None:
    calls = record_refreshes(monkeypatch)
    cfg = dpf_config(tmp_path / "s", f"method.refresh_every={every}", "method.sparsity=0.9")
    trainer = Trainer(cfg)
    metrics = trainer.fit()
    assert metrics is not None
    ipe = trainer.ipe
    assert ipe == 11  # every = 11 makes all periodic refreshes fall on pruning epochs
    count = expected_refreshes(4, ipe, every, [1, 2, 3])
    assert len(calls) == count == metrics["mask_refreshes"]
    assert {16: 5, 4: 11, 11: 3}[every] == count
    sched = gradual_schedule(4, 0.9)
    # Targets only ever step up to the schedule's values at the pruning epochs.
    targets = [t for t, _ in calls]
    assert targets == sorted(targets)
    assert set(targets) == {sched.target(1), sched.target(2), 0.9}


def test_history_and_final_sparsity_are_exact(tmp_path: Path) -> None:
    cfg = dpf_config(tmp_path / "s", "method.sparsity=0.9")
    record = execute(cfg)
    metrics = record["metrics"]
    n = metrics["num_prunable"]
    sched = gradual_schedule(4, 0.9)
    expected = [round(sched.current_target(e) * n) / n for e in (1, 2, 3, 4)]
    assert [h["sparsity"] for h in record["history"]] == pytest.approx(expected, abs=1e-12)
    assert metrics["nonzero_prunable"] == n - round(0.9 * n)
    weights = load_checkpoint(Store(cfg.output.dir).weights_path(cfg.run_id))
    # The conv and linear weights of cnn_small are its only parameters with two or more dims.
    prunable = [w for w in weights.values() if w.dim() >= 2]
    assert sum(int((w == 0).sum()) for w in prunable) == round(0.9 * n)
    stability = metrics["stability"]
    assert 0 <= stability["acc_before"] <= 1 and 0 <= stability["acc_after"] <= 1


def test_pruned_weights_come_back_during_training(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = record_refreshes(monkeypatch)
    Trainer(dpf_config(tmp_path / "s", "method.sparsity=0.9")).fit()
    revived = [
        sum(int(((n != 0) & (o == 0)).sum()) for o, n in zip(old, new, strict=True))
        for (_, old), (_, new) in zip(calls, calls[1:], strict=False)
    ]
    assert sum(revived) > 0


def test_a_grown_dense_weight_returns_at_the_next_refresh(tmp_path: Path) -> None:
    trainer = Trainer(dpf_config(tmp_path / "s", "method.sparsity=0.9"))
    assert trainer.fit(stop_after=1) is None
    method: DPF = trainer.method  # type: ignore[assignment]
    assert method.dense is not None
    layer = 1
    mask, param = trainer.ctx.masks.masks[layer], trainer.ctx.masks.params[layer]
    idx = int(torch.nonzero(mask.reshape(-1) == 0).flatten()[0])
    # Coordinates, not a flat view: on a GPU the weights are channels_last.
    pos = tuple(int(i) for i in torch.unravel_index(torch.tensor(idx), mask.shape))
    # Error feedback grew this pruned dense weight: the next refresh must bring it back.
    method.dense[layer][pos] = 3.0
    assert float(param.detach()[pos]) == 0.0
    method.on_iteration_start(15)  # not a refresh step: nothing changes
    assert float(param.detach()[pos]) == 0.0
    method.on_iteration_start(16)
    assert bool(trainer.ctx.masks.masks[layer][pos] != 0)
    assert float(param.detach()[pos]) == 3.0


def test_forward_uses_masked_weights_and_dense_weights_get_the_update(tmp_path: Path) -> None:
    cfg = dpf_config(
        tmp_path / "s", "method.sparsity=0.9", "optim.momentum=0.0", "optim.weight_decay=0.0"
    )
    trainer = Trainer(cfg)
    assert trainer.fit(stop_after=1) is None
    method: DPF = trainer.method  # type: ignore[assignment]
    model, masks = trainer.model, trainer.ctx.masks
    assert method.dense is not None
    dense = [d.clone() for d in method.dense]
    mask = [m.clone() for m in masks.masks]
    x, y = next(iter(trainer.data.train_batches(1, cfg.seed)))
    step, lr = trainer.ipe + 1, 0.05  # not a refresh step
    for group in trainer.optimizer.param_groups:
        group["lr"] = lr
    seen: list[torch.Tensor] = []
    first = next(m for m in model.modules() if isinstance(m, nn.Conv2d))
    first.register_forward_pre_hook(lambda mod, _: seen.append(mod.weight.detach().clone()))

    method.on_iteration_start(step)
    loss = nn.functional.cross_entropy(model(x), y)
    trainer.optimizer.zero_grad(set_to_none=True)
    loss.backward()
    grads = [p.grad.detach().clone() for p in masks.params]
    method.before_step(step)
    for p, d in zip(masks.params, dense, strict=True):
        assert torch.equal(p.detach(), d)  # the optimizer sees the dense weights
    trainer.optimizer.step()
    method.after_step(step)

    assert torch.equal(seen[0], dense[0] * mask[0])  # forward used the masked weights
    for d_old, d_new, g, m, p in zip(dense, method.dense, grads, mask, masks.params, strict=True):
        torch.testing.assert_close(d_new, d_old - lr * g)
        assert torch.equal(p.detach(), d_new * m)  # the model is masked again
    # Error feedback: pruned entries of the dense weights moved with the masked-point gradient.
    pruned_moved = sum(
        int(((d_new != d_old) & (m == 0)).sum())
        for d_old, d_new, m in zip(dense, method.dense, mask, strict=True)
    )
    assert pruned_moved > 0


def test_resume_is_exact(tmp_path: Path) -> None:
    # Mid-epoch refreshes (every 16 of 11 iterations per epoch) use the checkpointed dense weights.
    cfg = dpf_config(tmp_path / "s", "method.sparsity=0.8")
    assert comparable(run_interrupted(cfg, 2, tmp_path)) == comparable(run_uninterrupted(cfg))


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ("method.refresh_every=0", "method.refresh_every"),
        ("method.steps=5", "method.steps"),
        ("method.interval=3", "method.interval"),
    ],
)
def test_invalid_hyperparameters_name_the_field(override: str, field: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(None, ["method.name='dpf'", "budget.epochs=4", override])
    assert err.value.field == field


def test_params_and_presets() -> None:
    assert DPFParams() == DPFParams(steps=0, interval=0, refresh_every=16)
    assert {"cifar10", "cifar100", "imagenet"} <= set(DPF.presets)
    assert DPF.presets["cifar10"]["steps"] == [20, 100]
    assert DPF.presets["imagenet"]["steps"] == [9, 18]
    fields = set(DPFParams.__dataclass_fields__)
    for preset in DPF.presets.values():
        assert all(key in fields or "." in key for key in preset)
    assert DPF.info.sparsity_specifiable and DPF.info.pruning_stable
    assert not DPF.info.sparsity_agnostic


def test_steps_label_is_t_over_i_as_in_the_papers_code() -> None:
    # T = 20 and the label "10 steps": the reference prunes every 2 epochs, goal after epoch 18.
    cfg = load_config(None, ["method.name='dpf'", "budget.epochs=20", "method.steps=10"])
    schedule = DPF(cfg).schedule
    assert (schedule.interval, schedule.final_epoch) == (2, 18)
    assert schedule.epochs == list(range(2, 19, 2))
