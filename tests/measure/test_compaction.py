"""Compaction: the physically smaller model computes what the filter-masked model computes."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from benchmark.measure.compaction import ChannelScatter, channel_counts, compact
from benchmark.models.classification import (
    WRN_REFERENCE,
    WRN_STANDARD,
    PadShortcut,
    WideBlock,
    WideResNet,
)
from benchmark.models.registry import build_model
from benchmark.pruning import MaskStore, filter_masks

RTOL = 1e-5  # relative to the largest output magnitude: float32 sums in another order


def _masked(name: str, shape: tuple[int, int, int], fraction: float = 0.5) -> nn.Module:
    """A model with non-trivial BN statistics, filter-pruned by ``fraction`` (masks applied)."""
    torch.manual_seed(0)
    model = build_model(name, 4, shape)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-1, 1)
            m.running_var.uniform_(0.5, 2)
            nn.init.uniform_(m.weight, 0.5, 1.5)
            nn.init.uniform_(m.bias, -0.5, 0.5)
    MaskStore.from_named_masks(model, filter_masks(model, fraction)).apply()
    return model.eval()


def _assert_same_outputs(model: nn.Module, compacted: nn.Module, x: torch.Tensor) -> None:
    with torch.no_grad():
        expected, got = model(x), compacted(x)
    assert got.shape == expected.shape
    scale = float(expected.abs().max())
    torch.testing.assert_close(got, expected, rtol=RTOL, atol=RTOL * scale)


def _params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize(
    ("name", "shape"),
    [
        ("resnet56", (3, 16, 16)),
        ("resnet18", (3, 16, 16)),
        ("vgg16", (3, 32, 32)),
        ("cnn_small", (1, 8, 8)),
        pytest.param("resnet50", (3, 32, 32), marks=pytest.mark.slow),
    ],
)
def test_compacted_model_equals_masked_model_and_is_smaller(name, shape):
    model = _masked(name, shape)
    x = torch.randn(3, *shape)
    compacted = compact(model, x[:1])
    _assert_same_outputs(model, compacted, x)
    # Every conv keeps its BN masked alongside, so at least the inner filters disappear.
    assert _params(compacted) < 0.7 * _params(model)
    assert not any(isinstance(m, PadShortcut) for m in compacted.modules())
    # The masked model is untouched.
    assert channel_counts(model) == channel_counts(build_model(name, 4, shape))


def _blocks(model: nn.Module) -> list[nn.Module]:
    return [m for m in model.modules() if isinstance(m, WideBlock)]


@pytest.mark.parametrize("variant", [WRN_REFERENCE, WRN_STANDARD])
def test_filter_pruned_wide_block_channels_are_exactly_zero_after_bn2(variant):
    # Dropout sits between conv1 and bn2; filter_masks must see through it and mask bn2 too.
    torch.manual_seed(0)
    model = WideResNet(16, 2, 0.3, 4, 3, variant)
    masks = filter_masks(model, 0.5)
    MaskStore.from_named_masks(model, masks).apply()
    outputs: dict[str, torch.Tensor] = {}
    for name, block in model.named_modules():
        if isinstance(block, WideBlock):
            assert f"{name}.bn2.weight" in masks and f"{name}.bn2.bias" in masks, name
            block.bn2.register_forward_hook(
                lambda _m, _i, out, name=name: outputs.__setitem__(name, out)
            )
    for mode in (model.train, model.eval):
        mode()
        outputs.clear()
        with torch.no_grad():
            model(torch.randn(2, 3, 8, 8))
        assert len(outputs) == len(_blocks(model))
        for name, block in model.named_modules():
            if isinstance(block, WideBlock):
                pruned = ~block.conv1.weight.detach().flatten(1).any(dim=1)
                assert 0 < int(pruned.sum()) < pruned.numel()
                assert torch.all(outputs[name][:, pruned] == 0), name
    # The final BN reads conv2 + shortcut, not a conv alone: it is never masked.
    assert "bn.weight" not in masks


@pytest.mark.slow
@pytest.mark.parametrize("name", ["wrn28_10", "wrn28_10_standard"])
def test_filter_pruned_wrn28_10_compacts_its_inner_channels(name):
    shape = (3, 8, 8)
    model = _masked(name, shape)
    x = torch.randn(2, *shape)
    compacted = compact(model, x[:1])
    _assert_same_outputs(model, compacted, x)
    before, after = channel_counts(model), channel_counts(compacted)
    blocks = [n for n, m in model.named_modules() if isinstance(m, WideBlock)]
    assert len(blocks) == 12
    for block in blocks:
        # conv1's pruned filters (and bn2's channels) are gone: half of each block's width.
        assert after[f"{block}.conv1"] == before[f"{block}.conv1"] // 2, block
    assert _params(compacted) < 0.7 * _params(model)


def test_channel_scatter_equals_the_option_a_shortcut():
    pad = PadShortcut(4, 8, 2)
    x = torch.randn(2, 4, 6, 6)
    assert torch.equal(ChannelScatter.from_pad(pad, 4)(x), pad(x))


def test_unpruned_model_compacts_to_the_same_shape():
    torch.manual_seed(0)
    model = build_model("resnet20", 4, (3, 8, 8)).eval()
    x = torch.randn(2, 3, 8, 8)
    compacted = compact(model, x)
    assert channel_counts(compacted) == channel_counts(model)
    _assert_same_outputs(model, compacted, x)


def test_kept_filters_rounded_to_multiples_of_eight_compact_to_those_widths():
    torch.manual_seed(0)
    model = build_model("resnet18", 4, (3, 8, 8)).eval()
    masks = filter_masks(model, 0.3, multiple=8)
    MaskStore.from_named_masks(model, masks).apply()
    for name, conv in model.named_modules():
        if isinstance(conv, nn.Conv2d):
            kept = int(conv.weight.detach().flatten(1).any(dim=1).sum())
            assert kept % 8 == 0, (name, kept)
    # The paper's default keeps round(0.7 * 64) = 45 filters of a 64-filter conv.
    default = filter_masks(build_model("resnet18", 4, (3, 8, 8)), 0.3)
    assert int(default["conv1.weight"].flatten(1).any(dim=1).sum()) == 45
    compacted = compact(model, torch.zeros(1, 3, 8, 8))
    assert channel_counts(compacted)["stages.0.0.conv1"] == 48


def test_filter_multiple_must_be_a_positive_integer(tmp_path):
    from benchmark.core.errors import ConfigError
    from tests.helpers import tiny_config

    with pytest.raises(ConfigError, match="method.filter_multiple"):
        tiny_config(tmp_path, "method.structured=true", "method.filter_multiple=0")
