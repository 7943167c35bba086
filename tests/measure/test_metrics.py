"""Tests for benchmark.measure.metrics: top-k, evaluate, MACs, speedup, sparsity, stability."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from benchmark.measure.metrics import (
    evaluate,
    layer_macs,
    pruning_stability,
    relative_norm_drop,
    sparsity_stats,
    theoretical_speedup,
    topk_correct,
)

# ----------------------------------------------------------------------------- top-k


def test_topk_correct_on_hand_made_logits() -> None:
    logits = torch.tensor(
        [
            [0.1, 0.9, 0.0, 0.0],  # ranking 1, 0, 2/3 ; target 1 -> top1 hit
            [0.5, 0.2, 0.3, 0.0],  # ranking 0, 2, 1, 3 ; target 2 -> top2 hit
            [0.0, 0.1, 0.2, 0.7],  # ranking 3, 2, 1, 0 ; target 0 -> only top4
        ]
    )
    targets = torch.tensor([1, 2, 0])
    counts = topk_correct(logits, targets, ks=(1, 2, 3, 4))
    assert counts.dtype == torch.long
    assert counts.tolist() == [1, 2, 2, 3]
    assert topk_correct(logits, targets).tolist() == [1]


def test_topk_larger_than_classes_counts_everything() -> None:
    logits = torch.tensor([[0.0, 1.0], [1.0, 0.0]])
    assert topk_correct(logits, torch.tensor([0, 1]), ks=(1, 5)).tolist() == [0, 2]


def test_topk_rejects_nonpositive_k() -> None:
    with pytest.raises(ValueError):
        topk_correct(torch.zeros(1, 3), torch.zeros(1, dtype=torch.long), ks=(0,))


# ----------------------------------------------------------------------------- evaluate


class DropoutLogits(nn.Module):
    """Returns its input as logits after dropout: outputs are exact only in eval mode."""

    def __init__(self) -> None:
        super().__init__()
        self.drop = nn.Dropout(p=0.9)
        self.scale = nn.Parameter(torch.ones(()))

    def forward(self, x: Tensor) -> Tensor:
        return self.drop(x) * self.scale


def make_batches(num_classes: int) -> list[tuple[Tensor, Tensor]]:
    """Two batches of unequal size (3 and 1) with known logits and targets."""
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(4, num_classes, generator=gen)
    targets = logits.argmax(dim=1)
    targets[1] = (targets[1] + 1) % num_classes  # examples 1 and 2 become top-1 misses
    targets[2] = (targets[2] + 1) % num_classes
    return [(logits[:3], targets[:3]), (logits[3:], targets[3:])]


def test_evaluate_micro_accuracy_loss_and_mode_restored() -> None:
    model = DropoutLogits().train()
    batches = make_batches(10)
    result = evaluate(model, batches, num_classes=10)
    # n: the examples evaluated, so a figure can say what one example is worth.
    assert set(result) == {"top1", "loss", "n"} and result["n"] == 4
    # 2 of 4 correct: micro 0.5 (the mean of per-batch accuracies would be (1/3 + 1) / 2).
    assert result["top1"] == pytest.approx(0.5)
    all_logits = torch.cat([b[0] for b in batches])
    all_targets = torch.cat([b[1] for b in batches])
    assert result["loss"] == pytest.approx(F.cross_entropy(all_logits, all_targets).item())
    assert model.training and model.drop.training


def test_evaluate_restores_mixed_submodule_modes() -> None:
    model = DropoutLogits().train()
    model.drop.eval()  # a deliberately frozen submodule must stay frozen, the rest training
    evaluate(model, make_batches(10), num_classes=10)
    assert model.training and not model.drop.training
    model.eval()
    evaluate(model, make_batches(10), num_classes=10)
    assert not model.training


def test_evaluate_reports_top5_only_from_100_classes() -> None:
    assert "top5" not in evaluate(DropoutLogits(), make_batches(99), num_classes=99)
    batches = make_batches(100)
    result = evaluate(DropoutLogits(), batches, num_classes=100)
    logits = torch.cat([b[0] for b in batches])
    targets = torch.cat([b[1] for b in batches])
    expected = topk_correct(logits, targets, ks=(5,)).item() / 4
    assert result["top5"] == pytest.approx(expected)
    assert result["top1"] <= result["top5"] <= 1.0


def test_evaluate_bf16_is_close_to_fp32() -> None:
    torch.manual_seed(0)
    model = nn.Linear(6, 3)
    x = torch.randn(16, 6)
    batches = [(x, model(x).argmax(1).detach())]
    fp32 = evaluate(model, batches, num_classes=3)
    bf16 = evaluate(model, batches, num_classes=3, half=torch.bfloat16)
    assert fp32["top1"] == 1.0
    assert bf16["loss"] == pytest.approx(fp32["loss"], rel=0.05)


def test_evaluate_rejects_empty_input() -> None:
    with pytest.raises(ValueError):
        evaluate(DropoutLogits(), [], num_classes=10)


# ----------------------------------------------------------------------------- MACs


class TinyNet(nn.Module):
    """Strided padded conv (7x7 -> 3x3), grouped conv (3x3 -> 3x3), linear 72 -> 5."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(2, 4, kernel_size=5, stride=2, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.grouped = nn.Conv2d(4, 8, kernel_size=3, padding=1, groups=2, bias=False)
        self.fc = nn.Linear(8 * 3 * 3, 5)

    def forward(self, x: Tensor) -> Tensor:
        out = self.grouped(F.relu(self.bn(self.conv(x))))
        return self.fc(torch.flatten(out, 1))


EXAMPLE = torch.randn(3, 2, 7, 7, generator=torch.Generator().manual_seed(0))
# ShrinkBench: output ceil(7 / 2) = 4 -> 2*4*25*16; grouped conv counted with full C_in = 4.
SB = {"conv": 2 * 4 * 25 * 16, "grouped": 4 * 8 * 9 * 9, "fc": 72 * 5}
# Corrected: real output floor((7 + 2 - 5) / 2) + 1 = 3 -> 2*4*25*9; C_in / groups = 2.
CORRECTED = {"conv": 2 * 4 * 25 * 9, "grouped": 2 * 8 * 9 * 9, "fc": 72 * 5}


def test_layer_macs_hand_computed() -> None:
    layers = layer_macs(TinyNet(), EXAMPLE)
    assert [layer.name for layer in layers] == ["conv", "grouped", "fc"]
    assert [layer.kind for layer in layers] == ["conv", "conv", "linear"]
    assert {layer.name: layer.dense_macs_shrinkbench for layer in layers} == SB
    assert {layer.name: layer.dense_macs_corrected for layer in layers} == CORRECTED
    assert all(layer.density == 1.0 for layer in layers)


def test_layer_macs_is_per_example_and_leaves_model_untouched() -> None:
    model = TinyNet().train()
    mean_before = model.bn.running_mean.clone()
    one = layer_macs(model, EXAMPLE[:1])
    three = layer_macs(model, EXAMPLE)
    assert [a.dense_macs_corrected for a in one] == [b.dense_macs_corrected for b in three]
    assert model.training and model.bn.training
    assert torch.equal(model.bn.running_mean, mean_before)
    assert model.conv._forward_hooks == {}  # hooks removed


def test_linear_on_token_dimension_counts_every_token_when_corrected() -> None:
    (entry,) = layer_macs(nn.Linear(4, 6), torch.randn(2, 5, 4))
    assert entry.dense_macs_shrinkbench == 4 * 6
    assert entry.dense_macs_corrected == 4 * 6 * 5


def test_speedup_dense_model_is_one() -> None:
    result = theoretical_speedup(TinyNet(), EXAMPLE)
    assert result["speedup"] == pytest.approx(1.0)
    assert result["speedup_corrected"] == pytest.approx(1.0)
    assert result["flops_dense"] == sum(SB.values())
    assert result["flops_dense_corrected"] == sum(CORRECTED.values())


def zero_fraction_(weight: Tensor, fraction: float) -> None:
    """Zero the first ``fraction`` of the entries of ``weight`` in place."""
    with torch.no_grad():
        weight.view(-1)[: int(weight.numel() * fraction)] = 0.0


def test_speedup_after_zeroing_known_fractions() -> None:
    model = TinyNet()
    zero_fraction_(model.conv.weight, 0.5)  # 100 of 200 entries
    zero_fraction_(model.fc.weight, 0.75)  # 270 of 360 entries
    densities = {layer.name: layer.density for layer in layer_macs(model, EXAMPLE)}
    assert densities == {"conv": 0.5, "grouped": 1.0, "fc": 0.25}
    result = theoretical_speedup(model, EXAMPLE)
    sparse_sb = SB["conv"] * 0.5 + SB["grouped"] + SB["fc"] * 0.25
    sparse_c = CORRECTED["conv"] * 0.5 + CORRECTED["grouped"] + CORRECTED["fc"] * 0.25
    assert result["flops_sparse"] == pytest.approx(sparse_sb)
    assert result["speedup"] == pytest.approx(sum(SB.values()) / sparse_sb)
    assert result["flops_sparse_corrected"] == pytest.approx(sparse_c)
    assert result["speedup_corrected"] == pytest.approx(sum(CORRECTED.values()) / sparse_c)
    # Zeroed biases and batch-norm parameters do not count.
    with torch.no_grad():
        model.conv.bias.zero_()
        model.bn.weight.zero_()
    assert theoretical_speedup(model, EXAMPLE)["speedup"] == pytest.approx(result["speedup"])


def test_speedup_of_fully_pruned_model_is_infinite() -> None:
    model = nn.Linear(3, 2)
    with torch.no_grad():
        model.weight.zero_()
    assert math.isinf(theoretical_speedup(model, torch.randn(1, 3))["speedup"])


# ----------------------------------------------------------------------------- sparsity


def test_sparsity_stats() -> None:
    model = TinyNet()  # conv 200+4, bn 4+4, grouped 144, fc 360+5 = 721 parameters
    zero_fraction_(model.conv.weight, 0.5)
    zero_fraction_(model.fc.weight, 0.75)
    with torch.no_grad():
        model.bn.bias.zero_()  # 4 non-prunable zeros
    prunable = [(n, p) for n, p in model.named_parameters() if n.endswith("weight") and p.ndim > 1]
    stats = sparsity_stats(model, prunable)
    assert stats["num_prunable"] == 200 + 144 + 360
    assert stats["nonzero_prunable"] == 100 + 144 + 90
    assert stats["num_params"] == 721
    assert stats["sparsity"] == pytest.approx(370 / 704)
    assert stats["sparsity_total"] == pytest.approx(374 / 721)


def test_sparsity_stats_dense_model() -> None:
    model = nn.Linear(4, 4)
    stats = sparsity_stats(model, [("weight", model.weight)])
    assert stats["sparsity"] == 0.0 and stats["sparsity_total"] == 0.0


# ----------------------------------------------------------------------------- stability


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [(0.9, 0.9, 1.0), (0.8, 0.6, 0.75), (0.5, 0.0, 0.0), (0.0, 0.0, 1.0), (0.5, 0.6, 1.2)],
)
def test_pruning_stability(before: float, after: float, expected: float) -> None:
    assert pruning_stability(before, after) == pytest.approx(expected)


def test_relative_norm_drop() -> None:
    theta = [torch.tensor([3.0, 0.0]), torch.tensor([[4.0]])]
    pruned = [torch.tensor([0.0, 0.0]), torch.tensor([[4.0]])]
    assert relative_norm_drop(theta, pruned) == pytest.approx(3.0 / 5.0)
    assert relative_norm_drop(theta, theta) == 0.0
    assert relative_norm_drop([torch.zeros(2)], [torch.zeros(2)]) == 0.0
