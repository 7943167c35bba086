"""One-shot criteria against the published algorithms on small problems, the adapters' merge,
and the one-shot plugins end to end on the tiny models."""

from __future__ import annotations

import pytest
import torch
from helpers import tiny_lm_config
from torch import nn

from benchmark.core.errors import ConfigError
from benchmark.pruning.nm import is_nm
from benchmark.pruning.oneshot import (
    InputStats,
    global_keep_masks,
    layer_keep_mask,
    pattern_keep_mask,
    row_keep_mask,
    sparsegpt_prune,
    wanda_score,
)
from methods._lora import ADAPTERS, merge, wrap


def problem(rows: int = 6, cols: int = 16, samples: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    # Correlated inputs with a few outlier features, where the criteria differ.
    x = torch.randn(samples, cols, generator=g) @ torch.randn(cols, cols, generator=g)
    x[:, :2] *= 10
    return torch.randn(rows, cols, generator=g), x


def recon_error(w: torch.Tensor, w_hat: torch.Tensor, x: torch.Tensor) -> float:
    return float(((x @ (w - w_hat).T) ** 2).sum())


def least_squares(w: torch.Tensor, keep: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """The best reconstruction of each row with its kept weights only (the lower bound)."""
    out = torch.zeros_like(w)
    for r in range(w.shape[0]):
        k = keep[r]
        sol = torch.linalg.lstsq(x[:, k].double(), (x @ w[r]).double()[:, None]).solution
        out[r, k] = sol[:, 0].float()
    return out


def test_row_layer_global_and_nm_masks_count_exactly() -> None:
    w, _ = problem()
    assert bool((row_keep_mask(w.abs(), 0.5).sum(1) == 8).all())
    # 80% of 6 x 16: round(76.8) = 77 pruned in all, 13 in the first 5 rows and 12 in the last.
    pruned = (~row_keep_mask(w.abs(), 0.8)).sum(1)
    assert pruned.tolist() == [13, 13, 13, 13, 13, 12]
    assert int(layer_keep_mask(w.abs(), 0.25).sum()) == 96 - 24
    keep = global_keep_masks([w.abs(), 10 * w.abs()], 0.5)
    assert int(keep[0].sum()) + int(keep[1].sum()) == 96
    assert int(keep[1].sum()) > int(keep[0].sum())  # the larger layer keeps more
    nm = pattern_keep_mask(w.abs(), 0.5, (2, 4), "row")
    assert is_nm(nm, 2, 4) and int(nm.sum()) == 48


def test_wanda_scores_weight_by_input_norm_per_row() -> None:
    w, x = problem()
    stats = InputStats(16, torch.device("cpu"), hessian=False)
    # Calibration batches are (windows, tokens, features); statistics are per window, as
    # Wanda's add_batch counts them.
    stats.add(x[:40].view(5, 8, 16))
    stats.add(x[40:].view(3, 8, 16))
    score = wanda_score(w, stats.column_sq_norms())
    assert torch.allclose(score, w.abs() * (x.norm(dim=0) / 8**0.5), rtol=1e-5)
    keep = pattern_keep_mask(score, 0.5, None, "row")
    # Each row keeps exactly its 8 largest |W| * ||X_j||.
    expected = torch.zeros_like(keep).scatter_(1, score.topk(8, dim=1).indices, True)
    assert torch.equal(keep, expected)


@pytest.mark.parametrize("nm", [None, (2, 4), (4, 8)])
def test_sparsegpt_reconstructs_better_than_magnitude(nm: tuple[int, int] | None) -> None:
    w, x = problem()
    stats = InputStats(16, torch.device("cpu"), hessian=True)
    stats.add(x.view(8, 8, 16))
    assert torch.allclose(stats.hessian(), 2 * x.T @ x / 8, rtol=1e-4)
    w_hat, keep = sparsegpt_prune(w, stats.hessian(), 0.5, nm, blocksize=8, percdamp=1e-6)
    assert torch.equal(w_hat != 0, keep) and int(keep.sum()) == 48
    if nm is not None:
        assert is_nm(keep, *nm)
    mag = pattern_keep_mask(w.abs(), 0.5, nm, "layer")
    err_sparsegpt = recon_error(w, w_hat, x)
    # Below magnitude pruning, above the least-squares optimum of SparseGPT's own mask.
    assert err_sparsegpt < 0.5 * recon_error(w, w * mag, x)
    assert err_sparsegpt >= recon_error(w, least_squares(w, keep, x), x) * (1 - 1e-4)


def test_sparsegpt_with_one_column_block_is_exact_obs_for_the_last_column() -> None:
    # Pruning only the last column: OBS's update of the others is nothing (no later columns),
    # and its first-column updates equal least squares when only column 0 is pruned.
    w, x = problem(rows=1, cols=4)
    h = 2 * x.T @ x / 64
    w0 = w.clone()
    w0[0, 1:] = 100.0  # column 0 is by far the smallest: the one pruned at 25%
    w_hat, keep = sparsegpt_prune(w0, h, 0.25, None, blocksize=4, percdamp=1e-8)
    assert keep.tolist() == [[False, True, True, True]]
    best = least_squares(w0, keep, x)
    assert torch.allclose(w_hat, best, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("variant", ADAPTERS)
def test_adapters_merge_with_exactly_the_pruned_mask(variant: str) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 6), nn.ReLU(), nn.Linear(6, 4))
    masks = {"0": torch.rand(6, 8) > 0.5, "2": torch.rand(4, 6) > 0.5}
    with torch.no_grad():
        for name, mask in masks.items():
            model.get_submodule(name).weight.mul_(mask)
    adapters = wrap(model, masks, variant, rank=2, alpha=4.0)
    x = torch.randn(5, 8)
    keys = set(model.state_dict())
    for a in adapters.values():  # as if trained: every adapter entry moved
        with torch.no_grad():
            a.lora_A.add_(torch.randn_like(a.lora_A))
            a.lora_B.add_(torch.randn_like(a.lora_B))
    trained = model(x)
    assert set(model.state_dict()) == keys  # a stored model loads into a fresh one
    assert merge(adapters) == 2
    for name, mask in masks.items():
        layer = model.get_submodule(name)
        assert isinstance(layer, nn.Linear)
        assert torch.equal(layer.weight != 0, mask)
    if variant != "lora":  # MaskLoRA and ScaleLoRA merge into exactly the trained model
        assert torch.allclose(model(x), trained, atol=1e-5)


def lm_cfg(**method: object):
    return tiny_lm_config(method={"sparsity": 0.5, **method})


def test_nm_pattern_that_does_not_divide_a_layer_is_refused() -> None:
    # llama_tiny's widths are 64 and 192: 4:8 fits, a model of width 60 would not.
    lm_cfg(name="wanda", pattern="4:8")
    with pytest.raises(ConfigError) as err:
        lm_cfg(name="wanda", pattern="2:4", sparsity=0.6)
    assert err.value.field == "method.sparsity"
    from benchmark.models import causal_lm

    causal_lm.TINY["llama_tiny"]["intermediate_size"] = 190
    try:
        with pytest.raises(ConfigError) as err:
            lm_cfg(name="sparsegpt", pattern="4:8")
        assert err.value.field == "method.pattern" and "190" in str(err.value)
    finally:
        causal_lm.TINY["llama_tiny"]["intermediate_size"] = 192


@pytest.mark.parametrize(
    "method",
    [
        {"name": "wanda", "pattern": "2:4"},
        {"name": "sparsegpt", "retrain": "perp", "adapter": "masklora", "retrain_schedule": "allr"},
        {"name": "oneshot_magnitude", "scope": "global", "retrain": "full"},
    ],
)
def test_plugins_prune_retrain_and_keep_the_mask(method: dict, tmp_path) -> None:
    from benchmark.training.trainer import Trainer

    cfg = lm_cfg(**method, calibration_samples=8)
    trainer = Trainer(cfg)
    masks = [m.clone() for m in trainer.ctx.masks.masks]
    metrics = trainer.fit()
    assert metrics is not None
    assert metrics["sparsity"] == pytest.approx(0.5, abs=1e-3)
    for w, m in zip(trainer.ctx.masks.params, masks, strict=True):
        assert torch.equal(w != 0, m.bool())
    assert metrics["oneshot"]["test_after_prune"]["ppl"] > 0
    # The record keeps the forward tokens a dry run counts for it before it runs.
    from benchmark.training.forward_tokens import oneshot_tokens

    assert trainer.run_extras(metrics)["forward_tokens"] == oneshot_tokens(cfg).as_dict()
    if cfg.method.params.retrain == "perp":
        assert metrics["oneshot"]["merged_adapters"] == len(masks)
