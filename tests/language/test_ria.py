"""RIA: its score and masks against a float64 implementation of the formula on the tiny Llama's
real layers (pruned layer by layer, as the reference code does), and its channel permutations."""

from __future__ import annotations

import itertools

import pytest
import torch
from test_oneshot import lm_cfg

from benchmark.core.errors import ConfigError
from benchmark.pruning.layerwise import decoder_layers
from benchmark.pruning.nm import is_nm
from benchmark.pruning.ria import kept_value, lsa_refine, reallocation_order, ria_keep_mask


def reference_score(weight: torch.Tensor, inputs: torch.Tensor, windows: int, a: float):
    """The formula in float64: (|W|/column sum + |W|/row sum) * (||X_j||^2 / windows)^(a/2)."""
    w = weight.double().abs()
    norms = (inputs.double() ** 2).sum(dim=0) / windows
    return (w / w.sum(dim=0) + w / w.sum(dim=1, keepdim=True)) * norms.sqrt() ** a


def lowest_pruned(score: torch.Tensor, sparsity: float, per_row: bool) -> torch.Tensor:
    """Keep all but the round(s n) lowest scores of the layer (or the rows' shares of them)."""
    if per_row:
        pruned = round(score.numel() * sparsity) // score.shape[0]  # the test's widths divide
        keep = torch.ones_like(score, dtype=torch.bool)
        return keep.scatter_(1, score.argsort(dim=1)[:, :pruned], False)
    keep = torch.ones(score.numel(), dtype=torch.bool)
    keep[score.flatten().argsort()[: round(score.numel() * sparsity)]] = False
    return keep.view_as(score)


@pytest.mark.parametrize("scope, a", [("layer", 0.5), ("row", 0.5), ("layer", 0.0)])
def test_masks_equal_a_float64_implementation_on_the_tiny_llama(scope: str, a: float) -> None:
    from benchmark.training.trainer import Trainer

    cfg = lm_cfg(name="ria", scope=scope, a=a, calibration_samples=8)
    ours = Trainer(cfg).ctx.masks.named_masks()  # pruned at setup
    # The reference on the same model left dense (sparsity 0, same seed): every decoder
    # layer's linear maps scored on the inputs of the model whose earlier layers are pruned.
    dense = Trainer(lm_cfg(name="ria", sparsity=0.0, calibration_samples=8))
    model = dense.model
    ids = dense.data.calibration(8, cfg.seed)
    checked = 0
    for index, layer in enumerate(decoder_layers(model)):
        linears = {n: m for n, m in layer.named_modules() if isinstance(m, torch.nn.Linear)}
        seen: dict[str, list[torch.Tensor]] = {n: [] for n in linears}
        hooks = [
            m.register_forward_hook(lambda _m, i, _o, s=seen[n]: s.append(i[0].detach()))
            for n, m in linears.items()
        ]
        with torch.no_grad():
            model(input_ids=ids)
        for h in hooks:
            h.remove()
        for name, linear in linears.items():
            x = torch.cat(seen[name]).reshape(-1, linear.in_features)
            score = reference_score(linear.weight, x, len(ids), a)
            expected = lowest_pruned(score, 0.5, scope == "row")
            mask = ours[f"model.layers.{index}.{name}.weight"].bool()
            assert torch.equal(mask, expected), f"{index}.{name}: {(mask != expected).sum()} differ"
            with torch.no_grad():
                linear.weight.mul_(expected)
            checked += 1
    assert checked == 14  # 2 layers x (q, k, v, o, gate, up, down)


def test_reallocation_deals_ranked_channels_to_groups_alternately() -> None:
    # Column sums rank the channels 7 < 6 < ... < 0; runs of 2 read forwards, backwards, ...
    score = torch.arange(8, 0, -1, dtype=torch.float32).repeat(3, 1)
    order = reallocation_order(score, 4)
    ranked = [7, 6, 5, 4, 3, 2, 1, 0]
    expected = torch.tensor(
        [ranked[0], ranked[3], ranked[4], ranked[7], ranked[1], ranked[2], ranked[5], ranked[6]]
    )
    assert torch.equal(order, expected)


def brute_force_refine(score: torch.Tensor, order: torch.Tensor, n: int, m: int) -> torch.Tensor:
    """Each position in turn, the best of every reassignment of its channels to the groups."""
    groups = score.shape[1] // m
    best_order = order.clone()
    for position in range(m):
        slots = torch.arange(groups) * m + position
        best, chosen = -1.0, best_order
        for perm in itertools.permutations(range(groups)):
            trial = best_order.clone()
            trial[slots] = best_order[slots[list(perm)]]
            value = float(kept_value(score[:, trial], n, m))
            if value > best + 1e-9:
                best, chosen = value, trial
        best_order = chosen
    return best_order


@pytest.mark.parametrize("nm", [(2, 4), (4, 8)])
def test_channel_permutation_keeps_more_and_the_assignment_is_optimal(nm) -> None:
    n, m = nm
    g = torch.Generator().manual_seed(0)
    score = torch.rand(6, 4 * m, generator=g) ** 3
    start = reallocation_order(score, m)
    refined = lsa_refine(score, start, n, m)
    assert sorted(refined.tolist()) == list(range(4 * m))  # a permutation
    expected = brute_force_refine(score, start, n, m)
    assert float(kept_value(score[:, refined], n, m)) == pytest.approx(
        float(kept_value(score[:, expected], n, m)), rel=1e-6
    )
    plain = ria_keep_mask(score, nm, "none")
    for permutation in ("reallocation", "lsa"):
        keep = ria_keep_mask(score, nm, permutation)
        assert int(keep.sum()) == int(plain.sum())  # exactly 1 - N/M
        order = refined if permutation == "lsa" else start
        assert is_nm(keep[:, order], n, m)
    kept = {p: float((score * ria_keep_mask(score, nm, p)).sum()) for p in ("reallocation", "lsa")}
    assert kept["lsa"] >= kept["reallocation"] - 1e-6


def test_a_permuted_two_four_run_prunes_exactly_half() -> None:
    from benchmark.training.trainer import Trainer

    cfg = lm_cfg(name="ria", pattern="2:4", permutation="lsa", calibration_samples=8)
    trainer = Trainer(cfg)
    assert trainer.ctx.masks.sparsity() == pytest.approx(0.5)


@pytest.mark.parametrize(
    "method, field",
    [
        ({"permutation": "lsa"}, "method.permutation"),
        ({"pattern": "2:4", "permutation": "random"}, "method.permutation"),
        ({"scope": "global"}, "method.scope"),
        ({"a": -1.0}, "method.a"),
    ],
)
def test_bad_ria_settings_are_config_errors(method: dict, field: str) -> None:
    with pytest.raises(ConfigError) as err:
        lm_cfg(name="ria", **method)
    assert err.value.field == field
