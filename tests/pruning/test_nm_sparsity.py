"""N:M masks: exactly N kept in every group of M along the input dimension; kernels or a note."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from benchmark.core.errors import ConfigError
from benchmark.measure.semistructured import NOT_MEASURABLE, measure_nm, unsupported_reason
from benchmark.pruning.nm import is_nm, nm_mask, nm_masks


def _groups(mask: torch.Tensor, m: int = 4) -> torch.Tensor:
    moved = mask.movedim(1, -1) if mask.dim() > 2 else mask
    return moved.reshape(-1, m)


@pytest.mark.parametrize("shape", [(8, 16), (6, 8, 3, 3)])
@pytest.mark.parametrize(("n", "m"), [(2, 4), (1, 4), (4, 8)])
def test_every_group_of_m_keeps_exactly_n_largest(shape, n, m):
    torch.manual_seed(0)
    w = torch.randn(shape)
    mask = nm_mask(w.abs(), torch.ones_like(w, dtype=torch.bool), n, m)
    groups = _groups(mask, m)
    assert (groups.sum(dim=1) == n).all()
    # The kept entries of each group are its n largest magnitudes.
    scores = _groups(w.abs(), m)
    kept_min = scores.masked_fill(~groups, float("inf")).min(dim=1).values
    pruned_max = scores.masked_fill(groups, -1.0).max(dim=1).values
    assert (kept_min >= pruned_max).all()
    assert is_nm(mask, n, m)


def test_pruned_entries_stay_pruned_and_incompatible_layers_stay_dense():
    w = torch.arange(1.0, 17.0).reshape(2, 8)
    alive = torch.ones_like(w, dtype=torch.bool)
    alive[0, :4] = torch.tensor([False, False, False, True])
    mask = nm_mask(w.abs(), alive)
    assert mask[0, :4].tolist() == [False, False, False, True]  # only one alive: one kept
    first_conv = torch.randn(4, 3, 3, 3)  # 3 input channels: no group of 4
    assert nm_mask(first_conv, torch.ones_like(first_conv, dtype=torch.bool)).all()


def test_a_target_above_the_patterns_sparsity_names_method_sparsity():
    w = [torch.randn(4, 8)]
    alive = [torch.ones(4, 8, dtype=torch.bool)]
    assert int(nm_masks(w, alive, keep=16, sparsity=0.5)[0].sum()) == 16
    with pytest.raises(ConfigError, match="method.sparsity"):
        nm_masks(w, alive, keep=8, sparsity=0.75)


def test_cpu_is_never_measurable():
    assert unsupported_reason("cpu").startswith(NOT_MEASURABLE)
    result = measure_nm(nn.Sequential(nn.Linear(64, 64)), (64,), "cpu")
    assert result["measured_speedup"] is None and result["device"] == "cpu"


def test_nm_is_a_registered_criterion_of_compute_masks():
    from benchmark.models.registry import build_model
    from benchmark.pruning import compute_masks, prunable_parameters

    torch.manual_seed(0)
    params = prunable_parameters(build_model("resnet20", 10, (3, 8, 8)))
    masks = compute_masks("nm", params, 0.4)
    for (name, p), mask in zip(params, masks, strict=True):
        if p.shape[1] % 4 == 0:
            assert is_nm(mask) and int(mask.sum()) == p.numel() // 2, name
        else:  # the first conv (3 input channels) cannot hold the pattern
            assert mask.all(), name
