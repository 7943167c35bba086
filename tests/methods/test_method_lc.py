"""LC: decay outside the top-K (constant or growing), the L/C-step variant, exact end, resume."""

from __future__ import annotations

import math
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
from methods.lc import LC, LCParams


def lc_config(store: Path, *overrides: str):
    """A tiny LC run on digits (3 epochs of 11 iterations, 90% sparsity)."""
    return tiny_config(store, "method.name='lc'", "budget.epochs=3", *overrides)


def top_k(params: list[torch.Tensor], sparsity: float) -> list[torch.Tensor]:
    """The global top-K magnitude masks of ``params`` for ``sparsity``."""
    n = sum(p.numel() for p in params)
    return magnitude_topk_masks([p.detach().abs() for p in params], n - round(sparsity * n))


def test_decay_reaches_only_the_weights_outside_the_top_k(tmp_path: Path) -> None:
    cfg = lc_config(
        tmp_path / "s",
        "method.sparsity=0.8",
        "optim.weight_decay=0.01",
        "method.rank_over='prunable'",
        "method.wd_schedule='geometric'",
    )
    trainer = Trainer(cfg)
    assert trainer.fit(stop_after=1) is None
    method: LC = trainer.method  # type: ignore[assignment]
    params = trainer.ctx.masks.params
    x, y = next(iter(trainer.data.train_batches(1, cfg.seed)))
    trainer.optimizer.zero_grad(set_to_none=True)
    nn.functional.cross_entropy(trainer.model(x), y).backward()
    before = [p.grad.clone() for p in params]
    step = trainer.ipe + 3
    wd_t = method.decay_coefficient(step)
    assert wd_t > 0.01  # the decay has grown since the first iteration

    method.on_iteration_start(step)  # the per-iteration decay reaches its device scalar
    method.before_step(step)

    top = top_k(params, 0.8)
    for p, g0, m in zip(params, before, top, strict=True):
        added = p.grad - g0
        assert torch.all(added[m] == 0)  # the K largest magnitudes are not decayed at all
        torch.testing.assert_close(added[~m], wd_t * p.detach()[~m])
    # P has no optimizer weight decay; every other parameter keeps the run's.
    groups = trainer.optimizer.param_groups
    assert groups[0]["params"] == params and groups[0]["weight_decay"] == 0.0
    prunable = {id(p) for p in params}
    others = [p for p in trainer.model.parameters() if id(p) not in prunable]
    assert groups[1]["params"] == others and groups[1]["weight_decay"] == 0.01


def test_reference_decay_is_constant_and_ranks_every_parameter(tmp_path: Path) -> None:
    # The paper's code: the optimizer's weight decay on all but the top K of |w| over every
    # parameter with a gradient (BN included), K counted over P; constant over training.
    cfg = lc_config(tmp_path / "s", "method.sparsity=0.99", "optim.weight_decay=0.01")
    trainer = Trainer(cfg)
    method: LC = trainer.method  # type: ignore[assignment]
    total = 3 * trainer.ipe
    assert {method.decay_coefficient(s) for s in range(total)} == {0.01}
    assert trainer.fit(stop_after=1) is None
    named = list(trainer.model.named_parameters())
    params = [p for _, p in named]
    x, y = next(iter(trainer.data.train_batches(1, cfg.seed)))
    trainer.optimizer.zero_grad(set_to_none=True)
    nn.functional.cross_entropy(trainer.model(x), y).backward()
    before = [p.grad.clone() for p in params]
    method.before_step(trainer.ipe)
    n = trainer.ctx.masks.num_prunable()
    top = magnitude_topk_masks([p.detach().abs() for p in params], n - round(0.99 * n))
    for p, g0, m in zip(params, before, top, strict=True):
        added = p.grad - g0
        assert torch.all(added[m] == 0)
        torch.testing.assert_close(added[~m], 0.01 * p.detach()[~m])
    bn = {
        id(p)
        for m in trainer.model.modules()
        if isinstance(m, nn.BatchNorm2d)
        for p in m.parameters()
    }
    assert sum(int(m.sum()) for p, m in zip(params, top, strict=True) if id(p) in bn) > 0
    # Every ranked parameter is decayed by the hook only.
    groups = trainer.optimizer.param_groups
    assert len(groups) == 1 and groups[0]["weight_decay"] == 0.0
    assert [id(p) for p in groups[0]["params"]] == [id(p) for p in params]


def test_geometric_decay_grows_from_start_to_end_factor(tmp_path: Path) -> None:
    cfg = lc_config(
        tmp_path / "s",
        "method.wd_schedule='geometric'",
        "optim.weight_decay=0.001",
        "method.wd_start_factor=2.0",
        "method.wd_end_factor=50.0",
    )
    method: LC = Trainer(cfg).method  # type: ignore[assignment]
    last = 3 * 11 - 1
    coefficients = [method.decay_coefficient(s) for s in range(last + 1)]
    assert coefficients[0] == pytest.approx(0.002)
    assert coefficients[-1] == pytest.approx(0.05)
    ratios = [b / a for a, b in zip(coefficients, coefficients[1:], strict=False)]
    assert ratios == pytest.approx([25 ** (1 / last)] * last)


def test_epoch_decay_is_multiplied_every_epoch(tmp_path: Path) -> None:
    cfg = lc_config(
        tmp_path / "s",
        "optim.weight_decay=0.001",
        "method.wd_schedule='epoch'",
        "method.decay_growth=3.0",
    )
    method: LC = Trainer(cfg).method  # type: ignore[assignment]
    per_epoch = [[method.decay_coefficient(e * 11 + i) for i in range(11)] for e in range(3)]
    assert per_epoch == [[pytest.approx(0.001 * 3.0**e)] * 11 for e in range(3)]


def test_lc_variant_c_steps_project_and_mu_grows_geometrically(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = lc_config(
        tmp_path / "s",
        "method.variant='lc'",
        "method.c_step_every=4",
        "method.mu_0=0.01",
        "method.mu_growth=2.0",
    )
    calls: list[tuple[int, float]] = []
    original = LC.on_iteration_start

    def recording(self: LC, step: int) -> None:
        c_steps = self.c_steps
        original(self, step)
        if self.c_steps > c_steps:
            assert self.theta is not None and self.ctx is not None
            params = self.ctx.masks.params
            # theta is the projection of the current weights onto their K largest magnitudes.
            for t, p, m in zip(self.theta.views, params, top_k(params, 0.9), strict=True):
                assert torch.equal(t, p.detach() * m)
            calls.append((step, self.mu(step)))

    monkeypatch.setattr(LC, "on_iteration_start", recording)
    metrics = Trainer(cfg).fit()
    assert metrics is not None
    total = 3 * 11
    assert [s for s, _ in calls] == list(range(0, total, 4))
    assert [mu for _, mu in calls] == pytest.approx([0.01 * 2.0**j for j in range(len(calls))])
    assert metrics["lc"] == {"c_steps": math.ceil(total / 4), "final_mu": calls[-1][1]}
    n = metrics["num_prunable"]
    assert metrics["nonzero_prunable"] == n - round(0.9 * n)


def test_lc_variant_adds_the_penalty_gradient(tmp_path: Path) -> None:
    cfg = lc_config(tmp_path / "s", "method.variant='lc'", "method.mu_0=0.5")
    trainer = Trainer(cfg)
    assert trainer.fit(stop_after=1) is None
    method: LC = trainer.method  # type: ignore[assignment]
    assert method.theta is not None
    params = trainer.ctx.masks.params
    theta = [t.clone() for t in method.theta.views]
    for p in params:
        p.grad = torch.zeros_like(p)
    step = trainer.ipe + 5  # not a C step (one per epoch): theta stays
    method.before_step(step)
    assert method.mu(step) == pytest.approx(0.5 * 1.1)
    for p, t, t_now in zip(params, theta, method.theta.views, strict=True):
        assert torch.equal(t, t_now)
        torch.testing.assert_close(p.grad, method.mu(step) * (p.detach() - t))
    # The lc variant keeps the run's weight decay on every parameter.
    groups = trainer.optimizer.param_groups
    assert len(groups) == 1 and groups[0]["weight_decay"] == cfg.optim.weight_decay


@pytest.mark.parametrize("variant", ["decay", "lc"])
def test_execute_reaches_exact_sparsity_with_exact_zeros(tmp_path: Path, variant: str) -> None:
    cfg = lc_config(tmp_path / "s", f"method.variant={variant!r}", "method.sparsity=0.8")
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


def test_growing_decay_makes_lc_nearly_pruning_stable(tmp_path: Path) -> None:
    cfg = lc_config(
        tmp_path / "s",
        "budget.epochs=10",
        "optim.weight_decay=0.05",
        "method.wd_schedule='geometric'",
    )
    stability = execute(cfg)["metrics"]["stability"]
    assert stability["acc_before"] > 0.8
    assert stability["pruning_stability"] > 0.9


def test_from_pretrained_variants_share_one_dense_parent(tmp_path: Path) -> None:
    store = tmp_path / "s"
    common = ["method.from_pretrained=true", "method.parent_epochs=2", "budget.epochs=1"]
    decay = execute(lc_config(store, *common))
    lc = execute(lc_config(store, "method.variant='lc'", *common))
    assert decay["parent_run_id"] == lc["parent_run_id"] is not None
    dense = [r for r in Store(store).records() if r["method"] == "dense"]
    assert len(dense) == 1 and len(dense[0]["history"]) == 2
    parent_state = load_checkpoint(Store(store).weights_path(lc["parent_run_id"]))
    trainer = Trainer(lc_config(store, *common), None, parent_state)
    for key, value in trainer.model.state_dict().items():
        # On a GPU the model lives there; the parent's weights were saved from the CPU.
        assert torch.equal(value.cpu(), parent_state[key].cpu()), key


@pytest.mark.parametrize(
    "overrides",
    [
        ("method.wd_schedule='epoch'",),
        ("method.rank_over='prunable'", "method.wd_schedule='geometric'"),
        # C steps every 4 of 11 iterations: theta of a mid-epoch C step comes from the checkpoint.
        ("method.variant='lc'", "method.c_step_every=4"),
    ],
)
def test_resume_is_exact(tmp_path: Path, overrides: tuple[str, ...]) -> None:
    cfg = lc_config(tmp_path / "s", *overrides)
    assert comparable(run_interrupted(cfg, 2, tmp_path)) == comparable(run_uninterrupted(cfg))


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ("method.variant='admm'", "method.variant"),
        ("method.rank_over='weights'", "method.rank_over"),
        ("method.wd_schedule='cosine'", "method.wd_schedule"),
        ("method.wd_start_factor=0", "method.wd_start_factor"),
        ("method.wd_end_factor=0.5", "method.wd_end_factor"),
        ("method.decay_growth=0.9", "method.decay_growth"),
        ("method.mu_0=0", "method.mu_0"),
        ("method.mu_growth=0.5", "method.mu_growth"),
        ("method.c_step_every=-1", "method.c_step_every"),
        ("method.parent_epochs=0", "method.parent_epochs"),
        ("optim.weight_decay=0", "optim.weight_decay"),
    ],
)
def test_invalid_hyperparameters_name_the_field(override: str, field: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(None, ["method.name='lc'", override])
    assert err.value.field == field


def test_lc_variant_accepts_zero_weight_decay() -> None:
    cfg = load_config(None, ["method.name='lc'", "method.variant='lc'", "optim.weight_decay=0"])
    assert cfg.method.params.variant == "lc"


def test_params_presets_and_info() -> None:
    assert LCParams() == LCParams(
        variant="decay",
        wd_schedule="constant",
        wd_start_factor=1.0,
        wd_end_factor=100.0,
        decay_growth=1.1,
        mu_0=1e-4,
        mu_growth=1.1,
        c_step_every=0,
        from_pretrained=False,
        parent_epochs=10,
        rank_over="all",
        recompute_bn=True,
    )
    assert {"cifar10", "cifar100", "imagenet", "imagenet-pretrained"} <= set(LC.presets)
    assert LC.presets["cifar10"]["optim.weight_decay"] == [1e-4, 5e-4, 1e-3, 5e-3]
    assert LC.presets["imagenet"]["optim.weight_decay"] == [1e-4, 1e-5]
    assert LC.presets["imagenet-pretrained"]["budget.epochs"] == [10, 20, 40]
    fields = set(LCParams.__dataclass_fields__)
    for preset in LC.presets.values():
        assert all(key in fields or "." in key for key in preset)
    assert LC.info.sparsity_specifiable and LC.info.pruning_stable
    assert not LC.info.sparsity_agnostic and LC.info.extra_hyperparameters == 0
