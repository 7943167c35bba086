"""Tests for benchmark.pruning: the prunable set, MaskStore, the selection criteria, filters.

Per-layer counts below are computed by hand in the comments; the tiny model has
conv1 (2x1x3x3 = 18 weights), conv2 (4x2x3x3 = 72) and fc (5x4 = 20): N_P = 110.
"""

from __future__ import annotations

from unittest import mock

import pytest
import torch
from torch import nn

from benchmark.core.errors import ConfigError
from benchmark.pruning import (
    CRITERIA,
    MaskStore,
    allocate_counts,
    compute_masks,
    filter_masks,
    lamp_scores,
    magnitude_topk_masks,
    prunable_parameters,
    structured_sparsity,
)


class Tiny(nn.Module):
    """conv(1->2, 3x3) -> bn -> conv(2->4, 3x3) -> bn -> pool -> linear(4->5)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 2, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(2)
        self.conv2 = nn.Conv2d(2, 4, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(4)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(4, 5)
        with torch.no_grad():
            # Distinct magnitudes 1..n inside every layer, so "the k smallest" is readable.
            for layer in (self.conv1, self.conv2, self.fc):
                n = layer.weight.numel()
                layer.weight.copy_(torch.arange(1.0, n + 1).reshape(layer.weight.shape))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # tanh, not relu: relu has zero gradient at 0, which would hide a pruned BN channel
        # coming back to life.
        x = torch.tanh(self.bn1(self.conv1(x)))
        x = torch.tanh(self.bn2(self.conv2(x)))
        return self.fc(self.pool(x).flatten(1))


def params(*values: list[float]) -> list[tuple[str, nn.Parameter]]:
    """Stand-alone named parameters with the given values."""
    return [(f"p{i}", nn.Parameter(torch.tensor(v))) for i, v in enumerate(values)]


def pruned_counts(masks: list[torch.Tensor]) -> list[int]:
    return [int((~m.bool()).sum()) for m in masks]


# --------------------------------------------------------------------------- prunable set
class Zoo(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(3, 2)
        self.layer1 = nn.Sequential(nn.Conv1d(2, 2, 1), nn.BatchNorm1d(2))
        self.layer2 = nn.Conv3d(2, 2, 1)
        self.mid = nn.Conv2d(2, 2, 1)
        self.fc = nn.Linear(2, 2)


def test_prunable_parameters_are_conv_and_linear_weights_in_order() -> None:
    model = Zoo()
    names = [n for n, _ in prunable_parameters(model)]
    assert names == ["layer1.0.weight", "layer2.weight", "mid.weight", "fc.weight"]
    assert prunable_parameters(model)[3][1] is model.fc.weight


def test_prunable_parameters_exclude_by_module_pattern() -> None:
    model = Zoo()
    assert [n for n, _ in prunable_parameters(model, exclude=["fc", "layer1.*"])] == [
        "layer2.weight",
        "mid.weight",
    ]
    # A bare string is one pattern, not a list of one-letter patterns.
    assert "fc.weight" not in [n for n, _ in prunable_parameters(model, exclude="fc")]
    assert len(prunable_parameters(model, exclude="f")) == 4


def test_prunable_parameters_lists_a_tied_weight_once() -> None:
    model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
    model[1].weight = model[0].weight
    assert [n for n, _ in prunable_parameters(model)] == ["0.weight"]


# --------------------------------------------------------------------------- global
def test_global_keeps_largest_magnitudes_across_layers_with_exact_count_on_ties() -> None:
    ps = params([[3.0, -1.0], [0.5, 2.0]], [-4.0, 1.0, 1.0, 0.1, 5.0, -1.0])
    # s = 0.5: prune 5 of 10. Kept 5, 4, 3, 2 and one of the four tied 1s: the first (p0[0, 1]).
    masks = compute_masks("global", ps, 0.5)
    assert masks[0].tolist() == [[True, True], [False, True]]
    assert masks[1].tolist() == [True, False, False, False, True, False]
    # s = 0.3: prune 3 -> 0.5, 0.1 and the last tied 1 (p1[5]); 7 kept exactly.
    masks = compute_masks("global", ps, 0.3)
    assert masks[0].tolist() == [[True, True], [False, True]]
    assert masks[1].tolist() == [True, True, True, False, True, False]
    assert masks[0].dtype == torch.bool


def test_magnitude_topk_masks_exact_count_when_all_tied() -> None:
    scores = [torch.ones(2, 2), torch.ones(3)]
    masks = magnitude_topk_masks(scores, 3)
    assert masks[0].tolist() == [[True, True], [True, False]]
    assert masks[1].tolist() == [False, False, False]
    assert magnitude_topk_masks(scores, 0)[1].sum() == 0
    assert magnitude_topk_masks(scores, 7)[0].all()
    with pytest.raises(ValueError):
        magnitude_topk_masks(scores, 8)


# --------------------------------------------------------------------------- uniform
def test_uniform_prunes_each_layer_to_the_same_fraction() -> None:
    model = Tiny()
    masks = compute_masks("uniform", prunable_parameters(model), 0.5)
    # 110 * 0.5 = 55 pruned; each layer exactly half: 9 of 18, 36 of 72, 10 of 20.
    assert pruned_counts(masks) == [9, 36, 10]
    # Inside a layer the smallest magnitudes go (weights are 1..n).
    assert torch.equal(masks[0], model.conv1.weight > 9)


def test_uniform_rounding_keeps_the_total_exact() -> None:
    masks = compute_masks("uniform", prunable_parameters(Tiny()), 0.25)
    # Prune round(27.5) = 28, keep 82; real keeps 13.42, 53.67, 14.91 -> floors 13, 53, 14 (80);
    # the two largest remainders (fc .91, conv2 .67) get +1 -> keeps 13, 54, 15.
    # (Rounding each layer on its own, round(4.5) + 18 + 5 = 27, would miss the target.)
    assert pruned_counts(masks) == [5, 18, 5]


# --------------------------------------------------------------------------- uniform+
def test_uniform_plus_first_conv_dense_last_linear_capped() -> None:
    masks = compute_masks("uniform+", prunable_parameters(Tiny()), 0.7)
    # Prune 77, keep 33: conv1 keeps 18; fc keeps at least 20 - 16 = 4; conv2 gets the rest:
    # 72c + max(20c, 4) = 15 -> c = 11/72 < 0.2, so fc sits at its cap: keeps 18, 11, 4.
    assert pruned_counts(masks) == [0, 61, 16]
    assert sum(pruned_counts(masks)) == 77


def test_uniform_plus_spreads_uniformly_when_the_cap_is_inactive() -> None:
    masks = compute_masks("uniform+", prunable_parameters(Tiny()), 0.5)
    # Keep 55: 18 + 92c = 55 -> conv2 28.96, fc 8.04 -> floors 28 + 8, +1 to conv2 -> 29, 8.
    assert pruned_counts(masks) == [0, 43, 12]


def test_uniform_plus_rejects_unreachable_sparsity() -> None:
    # At most 1 - (18 + 4) / 110 = 0.8 is reachable.
    with pytest.raises(ConfigError) as err:
        compute_masks("uniform+", prunable_parameters(Tiny()), 0.9)
    assert err.value.field == "method.sparsity"
    assert "0.8" in err.value.allowed


# --------------------------------------------------------------------------- ERK
def test_erk_densities_by_hand() -> None:
    masks = compute_masks("erk", prunable_parameters(Tiny()), 0.6)
    # Kept entries are proportional to sum(shape): 9, 12, 9 (of 30). Keep 44: 13.2, 17.6, 13.2
    # (densities 0.73, 0.24, 0.66, all <= 1) -> floors 13, 17, 13, +1 to conv2 (.6).
    assert pruned_counts(masks) == [18 - 13, 72 - 18, 20 - 13]


def test_erk_makes_layers_dense_that_would_exceed_density_one() -> None:
    masks = compute_masks("erk", prunable_parameters(Tiny()), 0.4)
    # Keep 66, eps = 66/30 = 2.2: conv1 density 9 * 2.2 / 18 = 1.1 > 1 -> dense (18).
    # Again: eps = 48/21, fc density 9 * eps / 20 = 1.03 > 1 -> dense (20). conv2 keeps 28.
    assert pruned_counts(masks) == [0, 44, 0]


def test_allocate_counts_matches_the_evci_loop_and_bounds() -> None:
    assert allocate_counts([9.0, 12.0, 9.0], [0, 0, 0], [18, 72, 20], 66) == [18, 28, 20]
    assert allocate_counts([1.0, 1.0], [3, 0], [5, 5], 4) == [3, 1]
    with pytest.raises(ValueError):
        allocate_counts([1.0], [0], [5], 6)


# --------------------------------------------------------------------------- LAMP
def test_lamp_scores_by_hand_with_ties() -> None:
    # Squares 1, 4, 4, 9: 1/18, 4/(4+4+9), 4/17, 9/9.
    scores = lamp_scores(torch.tensor([1.0, -2.0, 2.0, 3.0]))
    expected = torch.tensor([1 / 18, 4 / 17, 4 / 17, 1.0], dtype=torch.float64)
    assert torch.allclose(scores, expected)


def test_lamp_global_cut_differs_from_magnitude() -> None:
    ps = params([3.0, 4.0], [1.0, 2.0, 2.5, 2.6])
    # LAMP: p0 -> 9/25 = .36, 1; p1 -> 1/18.01 = .056, 4/17.01 = .235, 6.25/13.01 = .48, 1.
    # Pruning 3 takes .056, .235, .36, i.e. the 3 in p0 although 2.5 is smaller.
    masks = compute_masks("lamp", ps, 0.5)
    assert masks[0].tolist() == [False, True]
    assert masks[1].tolist() == [False, False, True, True]
    assert compute_masks("global", ps, 0.5)[0].tolist() == [True, True]


# --------------------------------------------------------------------------- random
def test_random_is_reproducible_and_respects_current_masks() -> None:
    ps = [("a", nn.Parameter(torch.ones(40))), ("b", nn.Parameter(torch.ones(6, 10)))]
    current = [torch.ones(40), torch.ones(6, 10)]
    current[0][:10] = 0
    current[1][0] = 0

    def draw(seed: int) -> list[torch.Tensor]:
        gen = torch.Generator().manual_seed(seed)
        return compute_masks("random", ps, 0.5, current=current, generator=gen)

    first, again, other = draw(0), draw(0), draw(1)
    assert all(torch.equal(x, y) for x, y in zip(first, again, strict=True))
    assert not all(torch.equal(x, y) for x, y in zip(first, other, strict=True))
    assert sum(pruned_counts(first)) == 50
    assert not first[0][:10].any() and not first[1][0].any()


# --------------------------------------------------------------------------- hard pruning
def test_hard_pruning_keeps_pruned_entries_pruned_globally() -> None:
    ps = params([3.0, -1.0, 0.5, 2.0], [-4.0, 1.0, 1.0, 0.1, 5.0, -1.0])
    current = [torch.tensor([0.0, 1, 1, 1]), torch.tensor([1.0, 1, 1, 1, 0, 1])]
    masks = compute_masks("global", ps, 0.5, current=current)
    # 3 and 5 stay pruned; 3 more go: 0.5, 0.1 and the last tied 1 (p1[5]).
    assert masks[0].tolist() == [False, True, False, True]
    assert masks[1].tolist() == [True, True, True, False, False, False]


@pytest.mark.parametrize("criterion", ["uniform", "erk", "lamp", "uniform+"])
def test_hard_pruning_for_layerwise_criteria(criterion: str) -> None:
    model = Tiny()
    prunable = prunable_parameters(model)
    current = [torch.ones_like(p) for _, p in prunable]
    current[0].view(-1)[8:] = 0  # conv1's 10 largest weights were pruned before
    masks = compute_masks(criterion, prunable, 0.4, current=current)
    assert not masks[0].view(-1)[8:].any()
    assert sum(pruned_counts(masks)) == 44


def test_hard_pruning_erk_redistributes_around_a_pruned_layer() -> None:
    prunable = prunable_parameters(Tiny())
    current = [torch.ones_like(p) for _, p in prunable]
    current[0].view(-1)[8:] = 0
    # Keep 66: conv1 can keep at most 8, fc is dense (20), conv2 keeps 66 - 28 = 38.
    masks = compute_masks("erk", prunable, 0.4, current=current)
    assert pruned_counts(masks) == [10, 34, 0]


def test_sparsity_below_current_is_rejected() -> None:
    ps = params([1.0, 2.0, 3.0, 4.0])
    with pytest.raises(ConfigError) as err:
        compute_masks("global", ps, 0.25, current=[torch.tensor([0.0, 0, 1, 1])])
    assert err.value.field == "method.sparsity"


# --------------------------------------------------------------------------- MaskStore
def test_apply_zeroes_masked_entries_with_one_fused_call() -> None:
    model = Tiny()
    store = MaskStore(prunable_parameters(model))
    store.masks = [(p.detach() > 5).float() for p in store.params]
    with mock.patch.object(torch, "_foreach_mul_", wraps=torch._foreach_mul_) as fused:
        store.apply()
    assert fused.call_count == 1
    assert model.conv1.weight.view(-1)[:5].eq(0).all()
    assert model.conv1.weight.view(-1)[5:].tolist() == list(range(6, 19))
    assert model.fc.weight.view(-1)[:5].eq(0).all()


def test_masks_follow_parameter_dtype_and_report_sparsity() -> None:
    model = Tiny().double()
    store = MaskStore(prunable_parameters(model))
    store.update(compute_masks("uniform", prunable_parameters(model), 0.5))
    assert all(m.dtype == torch.float64 for m in store.masks)
    assert store.num_prunable() == 110
    assert store.num_pruned() == 55
    assert store.sparsity() == pytest.approx(0.5)
    assert store.layer_sparsities() == {
        "conv1.weight": 0.5,
        "conv2.weight": 0.5,
        "fc.weight": 0.5,
    }


def test_update_zeroes_momentum_of_removed_entries_only() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3), nn.Tanh(), nn.Linear(3, 2))
    store = MaskStore(prunable_parameters(model))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    first = [torch.ones(3, 4), torch.ones(2, 3)]
    first[0][0, 0] = 0
    store.update(first, opt)
    model(torch.randn(8, 4)).pow(2).sum().backward()
    opt.step()
    store.apply()
    before = [opt.state[p]["momentum_buffer"].clone() for p in store.params]
    assert before[0][1, 1] != 0 and before[1][0, 2] != 0  # the entries about to be pruned

    second = [m.clone() for m in first]
    second[0][1, 1] = 0
    second[1][0, 2] = 0
    store.update(second, opt)
    after = [opt.state[p]["momentum_buffer"] for p in store.params]
    for b, a, m in zip(before, after, second, strict=True):
        assert torch.equal(a[m.bool()], b[m.bool()])  # kept entries keep their momentum
        assert a[~m.bool()].eq(0).all()  # removed entries restart from zero
    assert model[0].weight[1, 1] == 0 and model[2].weight[0, 2] == 0
    assert opt.state[model[0].bias]["momentum_buffer"].ne(0).any()  # biases are not touched


def test_state_dict_round_trip() -> None:
    model = Tiny()
    store = MaskStore(prunable_parameters(model))
    store.update(compute_masks("global", prunable_parameters(model), 0.6))
    state = store.state_dict()
    assert all(m.dtype == torch.bool for m in state["masks"])

    fresh_model = Tiny()
    fresh = MaskStore(prunable_parameters(fresh_model))
    fresh.load_state_dict(state)
    for a, b in zip(store.masks, fresh.masks, strict=True):
        assert torch.equal(a, b) and b.dtype == torch.float32
    assert fresh_model.conv1.weight.eq(0).sum() == store.masks[0].eq(0).sum()
    with pytest.raises(ValueError):
        MaskStore(prunable_parameters(fresh_model, exclude=["fc"])).load_state_dict(state)


# --------------------------------------------------------------------------- filters
def filter_model() -> Tiny:
    model = Tiny()
    with torch.no_grad():
        model.conv1.weight[0].fill_(0.5)  # L2 norms 1.5, 3
        model.conv1.weight[1].fill_(1.0)
        for k, value in enumerate([3.0, 1.0, 4.0, 2.0]):  # norms proportional to the value
            model.conv2.weight[k].fill_(value)
    return model


def test_filter_masks_prune_lowest_l2_filters_and_their_bn_channels() -> None:
    model = filter_model()
    masks = filter_masks(model, 0.5)
    assert sorted(masks) == [
        "bn1.bias",
        "bn1.weight",
        "bn2.bias",
        "bn2.weight",
        "conv1.bias",
        "conv1.weight",
        "conv2.weight",
    ]
    # conv1: round(0.5 * 2) = 1 filter, the weaker one (0); conv2: 2 filters, norms 1 and 2.
    assert masks["conv1.bias"].tolist() == [False, True]
    assert masks["bn1.weight"].tolist() == [False, True]
    assert masks["bn2.bias"].tolist() == [True, False, True, False]
    assert not masks["conv2.weight"][[1, 3]].any() and masks["conv2.weight"][[0, 2]].all()
    assert structured_sparsity(model, masks) == pytest.approx(3 / 6)


def test_filter_masks_keep_previously_pruned_filters() -> None:
    model = filter_model()
    current = {"conv2.weight": torch.ones_like(model.conv2.weight)}
    current["conv2.weight"][0] = 0  # the strong filter 0 was pruned before
    masks = filter_masks(model, 0.5, current=current)
    assert masks["bn2.weight"].tolist() == [False, False, True, True]
    # More pruned before than the fraction asks for: they all stay pruned (hard pruning).
    current["conv2.weight"][2] = 0
    current["conv2.weight"][1] = 0
    masks = filter_masks(model, 0.5, current=current)
    assert masks["bn2.weight"].tolist() == [False, False, False, True]


def test_batchnorm_must_directly_follow_the_conv() -> None:
    model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU(), nn.BatchNorm2d(2), nn.Conv2d(2, 3, 1))
    model.append(nn.BatchNorm2d(2))  # follows the second conv but has the wrong width
    assert sorted(filter_masks(model, 0.5)) == ["0.bias", "0.weight", "3.bias", "3.weight"]


def test_pruned_filters_and_bn_channels_stay_zero_after_sgd_steps() -> None:
    torch.manual_seed(0)
    model = filter_model()
    store = MaskStore.from_named_masks(model, filter_masks(model, 0.5))
    assert store.extra_names == ["conv1.bias", "bn1.weight", "bn1.bias", "bn2.weight", "bn2.bias"]
    assert store.layer_sparsities()["conv2.weight"] == 0.5
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    x = torch.randn(4, 1, 5, 5)
    for step in range(2):
        opt.zero_grad()
        model(x).pow(2).sum().backward()
        opt.step()
        if step == 0:  # without the mask the pruned BN channel would come back
            assert model.bn1.bias[0] != 0
        with mock.patch.object(torch, "_foreach_mul_", wraps=torch._foreach_mul_) as fused:
            store.apply()
        assert fused.call_count == 1
    assert model.conv1.weight[0].eq(0).all() and model.conv1.bias[0] == 0
    assert model.bn1.weight[0] == 0 and model.bn1.bias[0] == 0
    assert model.conv2.weight[[1, 3]].eq(0).all()
    assert model.bn2.weight[[1, 3]].eq(0).all() and model.bn2.bias[[1, 3]].eq(0).all()
    assert model.bn2.bias[[0, 2]].ne(0).all()


def test_extra_masks_survive_a_checkpoint_with_the_model() -> None:
    model = filter_model()
    store = MaskStore.from_named_masks(model, filter_masks(model, 0.5))
    state = store.state_dict()
    fresh_model = filter_model()
    fresh = MaskStore(prunable_parameters(fresh_model))
    with pytest.raises(ValueError, match="model="):
        fresh.load_state_dict(state)
    fresh.load_state_dict(state, model=fresh_model)
    assert fresh.extra_names == store.extra_names
    assert fresh_model.bn2.weight[[1, 3]].eq(0).all()


# --------------------------------------------------------------------------- errors
def test_criteria_registry_names() -> None:
    assert CRITERIA.names() == [
        "1:4",
        "2:4",
        "4:8",
        "erk",
        "global",
        "lamp",
        "nm",
        "random",
        "uniform",
        "uniform+",
    ]


def test_unknown_criterion_names_the_field() -> None:
    with pytest.raises(ConfigError) as err:
        compute_masks("magnitude", params([1.0]), 0.5)
    assert err.value.field == "method.criterion"
    assert err.value.value == "magnitude"
    assert "'uniform+'" in err.value.allowed


@pytest.mark.parametrize("bad", [1.0, -0.1, float("nan"), True])
def test_bad_sparsity_names_the_field(bad: float) -> None:
    with pytest.raises(ConfigError) as err:
        compute_masks("global", params([1.0]), bad)
    assert err.value.field == "method.sparsity"
    with pytest.raises(ConfigError):
        filter_masks(Tiny(), bad)


def test_filter_pruning_covers_maxvit_including_depthwise_convs() -> None:
    from benchmark.models.registry import build_model

    torch.manual_seed(0)
    model = build_model("maxvit_t", 10, (3, 224, 224))
    masks = filter_masks(model, 0.3)
    convs = [m for m in model.modules() if isinstance(m, nn.Conv2d)]
    assert any(c.groups > 1 for c in convs)  # MBConv's depthwise convs are pruned by filter too
    assert sum(name.endswith("weight") and masks[name].dim() == 4 for name in masks) == len(convs)
    assert structured_sparsity(model, masks) == pytest.approx(0.3, abs=0.01)
