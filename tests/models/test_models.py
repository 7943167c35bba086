"""Tests for benchmark.models: registry keys, exact parameter counts, shapes, option-A shortcuts,
initialisation (PyTorch's default and He-normal) and the two WRN-28-10 variants."""

from __future__ import annotations

import math

import pytest
import torch
import torchvision
from torch import nn

from benchmark.core.errors import ConfigError
from benchmark.models.classification import PadShortcut, WideBlock
from benchmark.models.layers import AvgPoolTo
from benchmark.models.registry import MODELS, build_model

CIFAR = (3, 32, 32)
DIGITS = (1, 8, 8)

# (name, num_classes, input_shape, exact count, published count, relative tolerance).
# Published: He et al. 2016 Table 6 (0.27M/0.46M/0.66M/0.85M/1.7M), ResNet-18 CIFAR 11.17M,
# VGG-16-BN CIFAR 14.7M, WRN-28-10 36.5M (Zagoruyko & Komodakis; the reference's conv biases
# add 10,096: 36,546,980 in the paper's code), torchvision ResNet-50.
PARAM_COUNTS = [
    ("cnn_small", 10, DIGITS, 6_138, None, None),
    ("resnet20", 10, CIFAR, 269_722, 0.27e6, 0.01),
    ("resnet32", 10, CIFAR, 464_154, 0.46e6, 0.01),
    ("resnet44", 10, CIFAR, 658_586, 0.66e6, 0.01),
    ("resnet56", 10, CIFAR, 853_018, 0.85e6, 0.01),
    ("resnet110", 10, CIFAR, 1_727_962, 1.7e6, 0.02),
    ("resnet18", 10, CIFAR, 11_173_962, 11.17e6, 0.001),
    ("vgg16", 10, CIFAR, 14_728_266, 14.7e6, 0.01),
    ("wrn28_10", 100, CIFAR, 36_546_980, 36.5e6, 0.01),
    ("wrn28_10_standard", 100, CIFAR, 36_536_884, 36.5e6, 0.01),
    ("resnet50", 1000, (3, 224, 224), 25_557_032, 25_557_032, 0.0),
    # The paper's "31 Mio" (Tu et al. 2022: 31M) is torchvision's maxvit_t.
    ("maxvit_t", 1000, (3, 224, 224), 30_919_624, 31e6, 0.01),
]


def num_params(model: nn.Module) -> int:
    """Return the total number of parameters of ``model``."""
    return sum(p.numel() for p in model.parameters())


def test_registry_has_exactly_the_paper_models() -> None:
    expected = {"cnn_small", "cnn_wide", "resnet18", "vgg16", "wrn28_10", "wrn28_10_standard"}
    expected |= {"resnet50", "maxvit_t"}
    expected |= {f"resnet{d}" for d in (20, 32, 44, 56, 110)}
    # Segmentation networks, each with a tiny stand-in of the same design for smoke runs.
    expected |= {"deeplabv3_resnet50", "pspnet_resnet101", "deeplabv3_tiny", "pspnet_tiny"}
    expected |= {"t5_small", "t5_tiny"}
    # Causal language models: a local folder's, and two tiny ones built from a configuration.
    expected |= {"causal_lm", "opt_tiny", "llama_tiny"}
    assert set(MODELS.names()) == expected


def test_unknown_model_raises_config_error_listing_names() -> None:
    with pytest.raises(ConfigError) as info:
        build_model("resnet57", 10, CIFAR)
    assert info.value.field == "model.name"
    assert info.value.value == "resnet57"
    assert "'resnet56'" in info.value.allowed


@pytest.mark.parametrize(("name", "classes", "shape", "exact", "published", "rtol"), PARAM_COUNTS)
def test_parameter_counts(
    name: str,
    classes: int,
    shape: tuple[int, int, int],
    exact: int,
    published: float | None,
    rtol: float | None,
) -> None:
    count = num_params(build_model(name, classes, shape))
    assert count == exact
    if published is not None:
        assert count == pytest.approx(published, rel=rtol)


def test_cnn_small_is_small() -> None:
    assert 1_000 <= num_params(build_model("cnn_small", 10, DIGITS)) <= 50_000


def test_num_classes_changes_only_the_head() -> None:
    # 64 features feed ResNet-20's head: 90 extra classes add 90 * (64 + 1) parameters.
    diff = num_params(build_model("resnet20", 100, CIFAR)) - num_params(
        build_model("resnet20", 10, CIFAR)
    )
    assert diff == 90 * 65


@pytest.mark.parametrize("shape", [DIGITS, (1, 1, 1), (3, 5, 7), (1, 28, 28)])
def test_cnn_small_handles_any_small_input(shape: tuple[int, int, int]) -> None:
    model = build_model("cnn_small", 10, shape)
    assert model(torch.randn(2, *shape)).shape == (2, 10)


@pytest.mark.parametrize("name", ["resnet20", "resnet56", "resnet18", "vgg16"])
def test_cifar_output_shape(name: str) -> None:
    model = build_model(name, 7, CIFAR).eval()
    with torch.no_grad():
        out = model(torch.randn(2, *CIFAR))
    assert out.shape == (2, 7)
    assert torch.isfinite(out).all()


def test_models_accept_other_channel_counts() -> None:
    model = build_model("resnet20", 10, (1, 32, 32)).eval()
    with torch.no_grad():
        assert model(torch.randn(1, 1, 32, 32)).shape == (1, 10)
    stem = build_model("resnet50", 10, (1, 64, 64)).conv1
    assert stem.in_channels == 1


@pytest.mark.parametrize("depth", [20, 32, 44, 56, 110])
def test_cifar_resnet_depth_and_option_a_shortcuts(depth: int) -> None:
    model = build_model(f"resnet{depth}", 10, CIFAR)
    weighted = [m for m in model.modules() if isinstance(m, nn.Conv2d | nn.Linear)]
    # Depth counts conv + linear layers; option A adds no 1x1 projection convs.
    assert len(weighted) == depth
    assert all(m.kernel_size == (3, 3) for m in weighted if isinstance(m, nn.Conv2d))
    shortcuts = [m for m in model.modules() if isinstance(m, PadShortcut)]
    assert len(shortcuts) == 2  # one per down-sampling stage transition
    assert all(num_params(s) == 0 and not list(s.buffers()) for s in shortcuts)


def test_pad_shortcut_subsamples_and_zero_pads() -> None:
    x = torch.arange(2 * 2 * 4 * 4, dtype=torch.float32).reshape(2, 2, 4, 4)
    out = PadShortcut(2, 6, stride=2)(x)
    assert out.shape == (2, 6, 2, 2)
    torch.testing.assert_close(out[:, 2:4], x[:, :, ::2, ::2])
    assert out[:, :2].abs().sum() == 0 and out[:, 4:].abs().sum() == 0


def test_resnet18_uses_cifar_stem_and_projection_shortcuts() -> None:
    model = build_model("resnet18", 10, CIFAR)
    assert not any(isinstance(m, nn.MaxPool2d) for m in model.modules())
    assert model.conv1.kernel_size == (3, 3) and model.conv1.stride == (1, 1)
    projections = [
        m for m in model.modules() if isinstance(m, nn.Conv2d) and m.kernel_size == (1, 1)
    ]
    assert len(projections) == 3


def test_vgg16_has_13_bn_convs_and_512_feature_head() -> None:
    model = build_model("vgg16", 10, CIFAR)
    convs = [m for m in model.modules() if isinstance(m, nn.Conv2d)]
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    bns = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    assert len(convs) == 13 and len(bns) == 13
    assert [(m.in_features, m.out_features) for m in linears] == [(512, 10)]


def test_wrn_has_dropout_point_three() -> None:
    model = build_model("wrn28_10", 10, CIFAR)
    dropouts = [m for m in model.modules() if isinstance(m, nn.Dropout)]
    assert len(dropouts) == 12 and all(m.p == 0.3 for m in dropouts)


def test_building_is_deterministic_under_a_seed() -> None:
    for init in ("default", "he_normal"):
        torch.manual_seed(0)
        a = build_model("resnet20", 10, CIFAR, init)
        torch.manual_seed(0)
        b = build_model("resnet20", 10, CIFAR, init)
        for pa, pb in zip(a.parameters(), b.parameters(), strict=True):
            assert torch.equal(pa, pb)


def weighted_layers(model: nn.Module) -> list[nn.Conv2d | nn.Linear]:
    """The Conv2d and Linear layers of ``model``."""
    return [m for m in model.modules() if isinstance(m, nn.Conv2d | nn.Linear)]


def fan_in(layer: nn.Conv2d | nn.Linear) -> int:
    """Inputs feeding one output unit: C_in / groups * kernel area, or in_features."""
    return layer.weight[0].numel()


# Every hand-built model (the reference defines ResNet-56, ResNet-18 and WRN-28-10 this way).
HAND_BUILT = [
    ("cnn_small", DIGITS, 10),
    ("resnet20", CIFAR, 10),
    ("resnet56", CIFAR, 10),
    ("resnet18", CIFAR, 10),
    ("vgg16", CIFAR, 10),
    ("wrn28_10", CIFAR, 100),
    ("wrn28_10_standard", CIFAR, 100),
]


@pytest.mark.parametrize(("name", "shape", "classes"), HAND_BUILT)
def test_default_init_is_pytorchs_kaiming_uniform(
    name: str, shape: tuple[int, int, int], classes: int
) -> None:
    # PyTorch's default for Conv2d/Linear: kaiming_uniform_(a=sqrt(5)), i.e. U(-b, b) with
    # b = 1/sqrt(fan_in), std b/sqrt(3); biases U(-b, b). The sample std of n uniforms has a
    # relative standard error sqrt((kurtosis - 1) / 4n) = sqrt(0.2 / n); 5 of them are allowed.
    torch.manual_seed(0)
    model = build_model(name, classes, shape)
    biases = []
    for layer in weighted_layers(model):
        w, bound = layer.weight.detach(), 1 / math.sqrt(fan_in(layer))
        std, n = bound / math.sqrt(3), w.numel()
        assert w.abs().max().item() <= bound
        assert w.std().item() == pytest.approx(std, rel=5 * math.sqrt(0.2 / n))
        assert abs(w.mean().item()) <= 5 * std / math.sqrt(n)
        if layer.bias is not None:
            assert layer.bias.abs().max().item() <= bound
            biases.append(layer.bias.detach() / bound)
    if biases:  # pooled over layers, the scaled biases are U(-1, 1): std 1/sqrt(3)
        u = torch.cat(biases)
        assert u.std().item() == pytest.approx(3**-0.5, rel=5 * math.sqrt(0.2 / u.numel()))
    for bn in (m for m in model.modules() if isinstance(m, nn.BatchNorm2d)):
        assert torch.equal(bn.weight, torch.ones_like(bn.weight))
        assert torch.equal(bn.bias, torch.zeros_like(bn.bias))


@pytest.mark.parametrize(("name", "shape", "classes"), HAND_BUILT[:5])
def test_he_normal_option_scales_weights_by_sqrt_two_over_fan_in(
    name: str, shape: tuple[int, int, int], classes: int
) -> None:
    torch.manual_seed(0)
    model = build_model(name, classes, shape, "he_normal")
    for layer in weighted_layers(model):
        w = layer.weight.detach()
        std, n = math.sqrt(2 / fan_in(layer)), w.numel()
        # Sample std of n normals: relative standard error 1/sqrt(2n).
        assert w.std().item() == pytest.approx(std, rel=5 / math.sqrt(2 * n))
        assert layer.bias is None or torch.equal(layer.bias, torch.zeros_like(layer.bias))


def test_default_init_of_torchvision_models_is_torchvisions() -> None:
    torch.manual_seed(0)
    ours = build_model("resnet50", 10, (3, 64, 64)).state_dict()
    torch.manual_seed(0)
    ref = torchvision.models.resnet50(weights=None, num_classes=10).state_dict()
    assert ours.keys() == ref.keys()
    assert all(torch.equal(ours[k], ref[k]) for k in ref)


def test_unknown_init_raises_config_error() -> None:
    with pytest.raises(ConfigError) as info:
        build_model("resnet20", 10, CIFAR, "xavier")
    assert info.value.field == "model.init"


def test_reference_wrn_has_conv_biases_strides_late_and_final_bn_momentum_point_nine() -> None:
    model = build_model("wrn28_10", 100, CIFAR)
    convs = [m for m in model.modules() if isinstance(m, nn.Conv2d)]
    assert len(convs) == 28 and all(c.bias is not None for c in convs)
    bns = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    assert model.bn is bns[-1] and model.bn.momentum == 0.9
    assert all(bn.momentum == 0.1 for bn in bns[:-1])
    down = [b for b in model.modules() if isinstance(b, WideBlock) and b.conv2.stride == (2, 2)]
    assert len(down) == 2 and all(b.conv1.stride == (1, 1) for b in down)
    # In PyTorch's convention the running mean after one batch is 0.1 * 0 + 0.9 * batch mean.
    model.train()
    features = torch.randn(4, 640, 8, 8) + 3.0
    model.bn(features)
    mean = features.mean(dim=(0, 2, 3))
    torch.testing.assert_close(model.bn.running_mean, 0.9 * mean)


def test_standard_wrn_has_no_conv_biases_strides_early_and_default_bn_momentum() -> None:
    model = build_model("wrn28_10_standard", 100, CIFAR)
    convs = [m for m in model.modules() if isinstance(m, nn.Conv2d)]
    assert len(convs) == 28 and all(c.bias is None for c in convs)
    assert all(m.momentum == 0.1 for m in model.modules() if isinstance(m, nn.BatchNorm2d))
    down = [b for b in model.modules() if isinstance(b, WideBlock) and b.conv1.stride == (2, 2)]
    assert len(down) == 2 and all(b.conv2.stride == (1, 1) for b in down)


@pytest.mark.parametrize("name", ["wrn28_10", "wrn28_10_standard"])
def test_wrn_variants_classify_cifar_images(name: str) -> None:
    torch.manual_seed(0)
    model = build_model(name, 100, CIFAR).eval()
    with torch.no_grad():
        out = model(torch.randn(1, *CIFAR))
    assert out.shape == (1, 100) and torch.isfinite(out).all()


@pytest.mark.parametrize("size", [(8, 8), (7, 7), (5, 6)])
def test_avg_pool_to_matches_adaptive_pooling_values_and_gradients(size: tuple[int, int]) -> None:
    x = torch.randn(2, 3, *size, generator=torch.Generator().manual_seed(0), requires_grad=True)
    for out in (1, (2, 2)):
        ours, ref = AvgPoolTo(out)(x), nn.AdaptiveAvgPool2d(out)(x)
        assert torch.allclose(ours, ref, atol=1e-6)
        g_ours, g_ref = (torch.autograd.grad(y.square().sum(), x)[0] for y in (ours, ref))
        assert torch.allclose(g_ours, g_ref, atol=1e-6)


@pytest.mark.parametrize(
    "name", ["cnn_small", "resnet20", "resnet18", "wrn28_10", "resnet50", "maxvit_t"]
)
def test_no_model_uses_the_nondeterministic_adaptive_pooling_kernel(name: str) -> None:
    shape = {"cnn_small": (1, 8, 8), "maxvit_t": (3, 224, 224)}.get(name, (3, 32, 32))
    model = build_model(name, 10, shape)
    pools = [m for m in model.modules() if isinstance(m, nn.AdaptiveAvgPool2d)]
    assert pools and all(isinstance(m, AvgPoolTo) for m in pools)


def test_maxvit_classifies_imagenet_sized_images_and_refuses_others() -> None:
    torch.manual_seed(0)
    model = build_model("maxvit_t", 10, (3, 224, 224)).eval()
    with torch.no_grad():
        assert model(torch.randn(1, 3, 224, 224)).shape == (1, 10)
    with pytest.raises(ConfigError, match="3x224x224"):
        build_model("maxvit_t", 10, (3, 32, 32))


def test_a_model_on_a_dataset_it_cannot_take_is_refused_before_anything_is_written(
    tmp_path, capsys
) -> None:
    from benchmark.cli import main

    store = tmp_path / "runs"
    assert main(["run", "--set", "model.name=maxvit_t", "--set", f"output.dir={str(store)!r}"]) == 2
    err = capsys.readouterr().err
    assert "model.name = 'maxvit_t'" in err and "data.name in 'imagenet'" in err
    assert not store.exists()
