"""GMP: cubic schedule at the pruning epochs, hard vs soft masks, LR schedules, resume."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from helpers import comparable, run_interrupted, run_uninterrupted, tiny_config

from benchmark.core.errors import ConfigError
from benchmark.core.files import load_checkpoint
from benchmark.store.results import Store
from benchmark.training.runner import execute
from benchmark.training.trainer import Trainer
from benchmark.training.validation import load_config
from methods.gmp import GMP, GMPParams


def gmp_config(store: Path, *overrides: str):
    """A tiny GMP run on digits."""
    return tiny_config(store, "method.name='gmp'", *overrides)


def exact(sparsity: float, n: int) -> float:
    """The sparsity an exact-count prune to ``sparsity`` over ``n`` entries reaches."""
    return round(sparsity * n) / n


def record_masks(monkeypatch: pytest.MonkeyPatch) -> list[list[torch.Tensor]]:
    """Snapshot the masks after every GMP pruning step."""
    snapshots: list[list[torch.Tensor]] = []
    original = GMP.prune_step

    def wrapped(self: GMP, epochs_done: int) -> None:
        original(self, epochs_done)
        assert self.ctx is not None
        snapshots.append([m.detach().clone() for m in self.ctx.masks.masks])

    monkeypatch.setattr(GMP, "prune_step", wrapped)
    return snapshots


def test_sparsity_follows_cubic_schedule_and_ends_exact(tmp_path: Path) -> None:
    # T = 6, I = 2: P_s = 2 steps at epochs 2 and 4; s(2) = 0.9 (1 - (1/2)^3) = 0.7875.
    cfg = gmp_config(tmp_path / "s", "budget.epochs=6", "method.interval=2", "method.sparsity=0.9")
    record = execute(cfg)
    metrics = record["metrics"]
    n = metrics["num_prunable"]
    hist = [h["sparsity"] for h in record["history"]]
    first, goal = exact(0.7875, n), exact(0.9, n)
    assert hist == pytest.approx([0, first, first, goal, goal, goal], abs=1e-12)
    steps = metrics["pruning_steps"]
    assert [s["epoch"] for s in steps] == [2, 4]
    assert [s["target_sparsity"] for s in steps] == pytest.approx([0.7875, 0.9])
    # The final weights hold exact zeros at exactly the goal count.
    assert metrics["nonzero_prunable"] == n - round(0.9 * n)
    weights = load_checkpoint(Store(cfg.output.dir).weights_path(cfg.run_id))
    # The conv and linear weights of cnn_small are its only parameters with two or more dims.
    prunable = [w for w in weights.values() if w.dim() >= 2]
    assert sum(w.numel() for w in prunable) == n
    assert sum(int((w == 0).sum()) for w in prunable) == round(0.9 * n)
    assert set(metrics["stability"]) == {"acc_before", "acc_after", "pruning_stability"}


def test_final_mask_holds_for_the_last_interval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    snapshots = record_masks(monkeypatch)
    cfg = gmp_config(tmp_path / "s", "budget.epochs=7", "method.interval=2", "method.sparsity=0.8")
    trainer = Trainer(cfg)
    trainer.fit()
    # P_s = floor(7 / 2) - 1 = 2: the goal is reached after epoch 4, three epochs before the end.
    assert len(snapshots) == 2
    final = snapshots[-1]
    for param, mask in zip(trainer.ctx.masks.params, final, strict=True):
        assert torch.equal(param.detach() != 0, mask != 0)


def test_hard_variant_never_revives(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    snapshots = record_masks(monkeypatch)
    cfg = gmp_config(
        tmp_path / "s", "budget.epochs=5", "method.sparsity=0.9", "method.variant='hard'"
    )
    trainer = Trainer(cfg)
    trainer.fit()
    assert len(snapshots) == 4  # P_s = 5 - 1 steps with the default interval of one epoch
    for before, after in zip(snapshots, snapshots[1:], strict=False):
        for b, a in zip(before, after, strict=True):
            assert not bool(((a != 0) & (b == 0)).any())
        assert sum(int(a.sum()) for a in after) < sum(int(b.sum()) for b in before)


def soft_trainer(store: Path) -> Trainer:
    """A soft GMP run (steps at epochs 2, 4, 6) stopped one epoch after its first step."""
    cfg = gmp_config(
        store,
        "budget.epochs=8",
        "method.interval=2",
        "method.variant='soft'",
        "method.sparsity=0.9",
        "optim.weight_decay=0.01",
        "optim.nesterov=true",
    )
    trainer = Trainer(cfg)
    assert trainer.fit(stop_after=3) is None
    return trainer


def test_soft_is_the_default_variant() -> None:
    assert GMPParams().variant == "soft"


def test_soft_pruned_weights_keep_decaying_like_an_sgd_step(tmp_path: Path) -> None:
    trainer = soft_trainer(tmp_path / "s")
    method: GMP = trainer.method  # type: ignore[assignment]
    assert method.background is not None and method.background_momentum is not None
    # An epoch of training after the first step moved the pruned entries: decay shrank them
    # and gave them momentum (the frozen background of a plain hard mask would not move).
    pruned = [m == 0 for m in trainer.ctx.masks.masks]
    assert any(
        bool((b[p] != 0).any()) for b, p in zip(method.background_momentum, pruned, strict=True)
    )
    # One more step is exactly torch's SGD step of the background with a zero gradient.
    group = trainer.optimizer.param_groups[0]
    group["lr"] = 0.05
    ref = [torch.nn.Parameter(b.clone()) for b in method.background]
    sgd = torch.optim.SGD(ref, lr=0.05, momentum=0.9, weight_decay=0.01, nesterov=True)
    for r, buf in zip(ref, method.background_momentum, strict=True):
        r.grad = torch.zeros_like(r)
        sgd.state[r]["momentum_buffer"] = buf.clone()
    sgd.step()
    method._decay_background()
    for r, b in zip(ref, method.background, strict=True):
        torch.testing.assert_close(b, r.detach(), rtol=1e-6, atol=1e-9)
    # Kept entries are zero in the background and stay zero.
    assert all(bool((b[~p] == 0).all()) for b, p in zip(method.background, pruned, strict=True))


def test_soft_variant_revives_a_weight_with_its_value_and_momentum(tmp_path: Path) -> None:
    trainer = soft_trainer(tmp_path / "s")
    method: GMP = trainer.method  # type: ignore[assignment]
    assert method.background is not None and method.background_momentum is not None
    masks, params = trainer.ctx.masks.masks, trainer.ctx.masks.params
    layer = 1
    pruned = torch.nonzero(masks[layer].reshape(-1) == 0).flatten()
    assert len(pruned) > 0
    idx = int(pruned[0])
    # Coordinates, not a flat view: on a GPU the weights are channels_last.
    pos = tuple(int(i) for i in torch.unravel_index(torch.tensor(idx), masks[layer].shape))
    # The background holds the pruned value; make it the largest so the new mask must keep it.
    method.background[layer][pos] = 5.0
    method.background_momentum[layer][pos] = 0.25
    buffer = trainer.optimizer.state[params[layer]]["momentum_buffer"]
    method.prune_step(4)
    assert masks is not trainer.ctx.masks.masks
    assert bool(trainer.ctx.masks.masks[layer][pos] != 0)
    assert float(params[layer].detach()[pos]) == 5.0
    assert float(buffer[pos]) == 0.25  # a revived entry keeps its momentum
    assert trainer.ctx.record["pruning_steps"][-1]["revived"] >= 1
    # Every pruned entry has zero momentum and zero weight; their values went to background.
    mask = trainer.ctx.masks.masks[layer]
    assert bool((buffer[mask == 0] == 0).all())
    assert bool((params[layer].detach()[mask == 0] == 0).all())
    assert bool((method.background[layer][mask != 0] == 0).all())
    assert all(bool((b == 0).all()) for b in method.background_momentum)


def test_cyclic_lr_restarts_at_each_pruning_step(tmp_path: Path) -> None:
    cfg = gmp_config(
        tmp_path / "s",
        "budget.epochs=6",
        "method.interval=2",
        "method.lr_schedule='cyclic'",
        "schedule.lr=0.1",
    )
    trainer = Trainer(cfg)
    ipe = trainer.ipe
    lrs = [trainer.method.lr(s) for s in range(6 * ipe)]
    restarts = [s for s in range(1, len(lrs)) if lrs[s] > lrs[s - 1]]
    assert restarts == [2 * ipe, 4 * ipe]
    assert lrs[0] == lrs[2 * ipe] == lrs[4 * ipe] == 0.1
    n = 2 * ipe  # each cycle is a linear decay towards zero over its 2 epochs
    assert lrs[n - 1] == pytest.approx(0.1 / n)
    assert lrs[-1] == pytest.approx(0.1 / n)


@pytest.mark.parametrize("kind", ["original", "linear"])
def test_original_and_linear_lr(tmp_path: Path, kind: str) -> None:
    cfg = gmp_config(
        tmp_path / "s",
        "budget.epochs=4",
        f"method.lr_schedule='{kind}'",
        "schedule.name='stepped'",
        "schedule.milestones=[2]",
        "schedule.values=[0.01]",
    )
    trainer = Trainer(cfg)
    total = 4 * trainer.ipe
    lrs = [trainer.method.lr(s) for s in range(total)]
    if kind == "original":
        assert lrs == list(trainer.ctx.original_lrs)
    else:
        assert lrs == pytest.approx([0.1 * (1 - s / total) for s in range(total)])


def test_uniform_plus_keeps_first_conv_dense(tmp_path: Path) -> None:
    cfg = gmp_config(
        tmp_path / "s", "budget.epochs=2", "method.criterion='uniform+'", "method.sparsity=0.5"
    )
    trainer = Trainer(cfg)
    metrics = trainer.fit()
    assert metrics is not None
    assert metrics["nonzero_prunable"] == metrics["num_prunable"] - round(0.5 * 6032)
    assert bool((trainer.ctx.masks.params[0].detach() != 0).all())


@pytest.mark.parametrize("variant", ["hard", "soft"])
def test_resume_is_exact(tmp_path: Path, variant: str) -> None:
    # Strong weight decay shrinks kept weights faster than the background ones (no gradient
    # pushes back on those), so the soft variant revives weights at its last step from
    # background values and momentum held in the checkpoint.
    cfg = gmp_config(
        tmp_path / "s",
        "budget.epochs=4",
        f"method.variant='{variant}'",
        "method.lr_schedule='cyclic'",
        "method.sparsity=0.8",
        "optim.weight_decay=0.05",
    )
    full = run_uninterrupted(cfg)
    if variant == "soft":
        assert full["pruning_steps"][-1]["revived"] > 0
    assert comparable(run_interrupted(cfg, 2, tmp_path)) == comparable(full)


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ("method.variant='medium'", "method.variant"),
        ("method.lr_schedule='cosine'", "method.lr_schedule"),
        ("method.criterion='largest'", "method.criterion"),
        ("method.steps=11", "method.steps"),
        ("method.steps=1", "method.steps"),
        ("method.interval=6", "method.interval"),
    ],
)
def test_invalid_hyperparameters_name_the_field(override: str, field: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(None, ["method.name='gmp'", "budget.epochs=10", override])
    assert err.value.field == field


def test_ten_steps_in_twenty_epochs_reach_the_goal_after_epoch_18(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The paper's label "n pruning steps" is T / I in its code: I = 2, 9 steps, goal at 18.
    snapshots = record_masks(monkeypatch)
    cfg = gmp_config(
        tmp_path / "s",
        "budget.epochs=20",
        "method.steps=10",
        "method.sparsity=0.9",
        "data.batch_size=1024",  # two iterations per epoch keep 20 epochs fast
    )
    assert GMP(cfg).schedule.final_epoch == 18
    trainer = Trainer(cfg)
    trainer.fit()
    steps = trainer.ctx.record["pruning_steps"]
    assert [s["epoch"] for s in steps] == list(range(2, 19, 2))
    assert steps[-1]["sparsity"] == pytest.approx(0.9, abs=1e-3)
    assert len(snapshots) == 9


def test_params_and_presets() -> None:
    assert GMPParams() == GMPParams(0, 0, "global", "soft", "original")
    fields = set(GMPParams.__dataclass_fields__)
    for name in ("cifar10", "cifar100", "imagenet"):
        assert name in GMP.presets
    assert GMP.presets["cifar10"]["steps"] == [20, 100]
    assert GMP.presets["imagenet"]["steps"] == [5, 9, 18, 45]
    for preset in GMP.presets.values():
        for key, values in preset.items():
            assert key in fields or "." in key
            assert isinstance(values, list) and values
    info = GMP.info
    assert (info.sparsity_specifiable, info.pruning_stable, info.sparsity_agnostic) == (
        True,
        True,
        False,
    )
