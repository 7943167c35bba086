"""The classification architectures of the paper, registered in ``MODELS``.

The CIFAR architectures follow the implementations the paper cites:

* ResNet-20/32/44/56/110: He et al. (2016), Section 4.2, with option-A shortcuts (ShrinkBench's
  ``cifar_resnet``).
* ResNet-18: the CIFAR variant (3x3 stem, no max-pool) with 1x1-conv projection shortcuts.
* VGG-16: configuration D with batch norm and a single linear layer on 512 features.
* WRN-28-10: Zagoruyko & Komodakis (2016), pre-activation blocks with dropout between convs, in
  two variants (see :class:`WideResNet`): ``wrn28_10`` as the reference builds it and
  ``wrn28_10_standard`` as the original paper defines it.
* ResNet-50: ``torchvision.models.resnet50`` (ImageNet architecture), random weights.
* MaxViT-T: ``torchvision.models.maxvit_t`` (Tu et al., 2022), random weights, 224x224 inputs.

Adaptive average pooling is swapped for :class:`AvgPoolTo` everywhere (same values), so that
``runtime.deterministic`` works on GPUs.

"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from benchmark.core.errors import ConfigError
from benchmark.models.layers import AvgPoolTo, conv3x3, deterministic_pools
from benchmark.models.registry import MODELS, InputShape


class SmallCNN(nn.Module):
    """Two 3x3 conv-BN-ReLU stages with pooling and a linear head, for tiny images (8x8 digits)."""

    def __init__(self, num_classes: int, in_channels: int, width: int = 16) -> None:
        super().__init__()
        self.features = nn.Sequential(
            conv3x3(in_channels, width),
            nn.BatchNorm2d(width),
            nn.ReLU(inplace=True),
            # ceil_mode keeps at least one output pixel, so 1x1 and odd-sized inputs also work.
            nn.MaxPool2d(2, ceil_mode=True),
            conv3x3(width, 2 * width),
            nn.BatchNorm2d(2 * width),
            nn.ReLU(inplace=True),
            # A fixed 2x2 grid makes the head independent of the input resolution.
            AvgPoolTo((2, 2)),
        )
        self.classifier = nn.Linear(2 * width * 4, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        """Return class logits for a batch of images."""
        return self.classifier(torch.flatten(self.features(x), 1))


@MODELS.register("cnn_small")
def cnn_small(num_classes: int, input_shape: InputShape) -> nn.Module:
    """Build the small digits CNN (about 6K parameters for 10 classes)."""
    return SmallCNN(num_classes, input_shape[0])


@MODELS.register("cnn_wide")
def cnn_wide(num_classes: int, input_shape: InputShape) -> nn.Module:
    """Build the digits CNN at width 64 (~79K prunable weights), the smoke stand-in model.

    cnn_small's 6,032 prunable weights leave about 120 at 98% sparsity and a whole layer is lost
    whatever the schedule; at width 64 about 1,600 remain and every layer keeps weights.
    """
    return SmallCNN(num_classes, input_shape[0], width=64)


class PadShortcut(nn.Module):
    """Option-A shortcut: subsample by ``stride`` and zero-pad the new channels; no weights."""

    def __init__(self, c_in: int, c_out: int, stride: int) -> None:
        super().__init__()
        if c_out < c_in:
            raise ValueError(f"option-A shortcut cannot shrink channels ({c_in} -> {c_out})")
        self.extra = c_out - c_in
        self.stride = stride

    def forward(self, x: Tensor) -> Tensor:
        """Return ``x`` subsampled and with zero channels appended (split evenly front/back)."""
        x = x[:, :, :: self.stride, :: self.stride]
        front = self.extra // 2
        return F.pad(x, (0, 0, 0, 0, front, self.extra - front))


class BasicBlock(nn.Module):
    """Post-activation residual block of two 3x3 convs (He et al. 2016)."""

    def __init__(self, c_in: int, c_out: int, stride: int, shortcut: str) -> None:
        super().__init__()
        self.conv1 = conv3x3(c_in, c_out, stride)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = conv3x3(c_out, c_out)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.shortcut = make_shortcut(c_in, c_out, stride, shortcut)

    def forward(self, x: Tensor) -> Tensor:
        """Return relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x))."""
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


def make_shortcut(c_in: int, c_out: int, stride: int, kind: str) -> nn.Module:
    """Return the identity, an option-A (``"pad"``) or option-B (``"conv"``) shortcut."""
    if stride == 1 and c_in == c_out:
        return nn.Identity()
    if kind == "pad":
        return PadShortcut(c_in, c_out, stride)
    if kind == "conv":
        return nn.Sequential(
            nn.Conv2d(c_in, c_out, kernel_size=1, stride=stride, bias=False),
            nn.BatchNorm2d(c_out),
        )
    raise ValueError(f"unknown shortcut kind {kind!r}")


class CifarResNet(nn.Module):
    """A ResNet for 32x32 inputs: 3x3 stem, stages of BasicBlocks, global pooling, linear head."""

    def __init__(
        self,
        blocks_per_stage: list[int],
        widths: list[int],
        num_classes: int,
        in_channels: int,
        shortcut: str,
    ) -> None:
        super().__init__()
        self.conv1 = conv3x3(in_channels, widths[0])
        self.bn1 = nn.BatchNorm2d(widths[0])
        stages: list[nn.Module] = []
        c_in = widths[0]
        for i, (n_blocks, width) in enumerate(zip(blocks_per_stage, widths, strict=True)):
            # Every stage but the first halves the resolution in its first block.
            strides = [1 if i == 0 else 2] + [1] * (n_blocks - 1)
            blocks = []
            for stride in strides:
                blocks.append(BasicBlock(c_in, width, stride, shortcut))
                c_in = width
            stages.append(nn.Sequential(*blocks))
        self.stages = nn.Sequential(*stages)
        self.pool = AvgPoolTo(1)
        self.fc = nn.Linear(c_in, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        """Return class logits for a batch of images."""
        out = self.stages(F.relu(self.bn1(self.conv1(x))))
        return self.fc(torch.flatten(self.pool(out), 1))


def cifar_resnet(depth: int, num_classes: int, input_shape: InputShape) -> nn.Module:
    """Build the He et al. (2016) CIFAR ResNet of ``depth = 6n + 2`` with option-A shortcuts."""
    if (depth - 2) % 6 != 0:
        raise ValueError(f"CIFAR ResNet depth must be 6n+2, got {depth}")
    n = (depth - 2) // 6
    return CifarResNet([n, n, n], [16, 32, 64], num_classes, input_shape[0], shortcut="pad")


def _register_cifar_resnet(depth: int) -> None:
    """Register ``resnet{depth}`` as a builder of the option-A CIFAR ResNet of that depth."""

    def builder(num_classes: int, input_shape: InputShape) -> nn.Module:
        return cifar_resnet(depth, num_classes, input_shape)

    builder.__name__ = f"resnet{depth}"
    builder.__doc__ = f"Build the CIFAR ResNet-{depth} (option-A shortcuts)."
    MODELS.add(f"resnet{depth}", builder)


for _depth in (20, 32, 44, 56, 110):
    _register_cifar_resnet(_depth)


@MODELS.register("resnet18")
def resnet18(num_classes: int, input_shape: InputShape) -> nn.Module:
    """Build the CIFAR ResNet-18: 3x3 stem, no max-pool, projection shortcuts (~11.2M params)."""
    return CifarResNet([2, 2, 2, 2], [64, 128, 256, 512], num_classes, input_shape[0], "conv")


# Configuration D of Simonyan & Zisserman: the 13 conv widths, grouped by the 5 max-pool stages.
VGG16_STAGES: list[list[int]] = [[64, 64], [128, 128], [256] * 3, [512] * 3, [512] * 3]


class VGG(nn.Module):
    """VGG with batch norm for CIFAR: conv-BN-ReLU features and one linear layer on 512 features."""

    def __init__(self, stages: list[list[int]], num_classes: int, in_channels: int) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        c_in = in_channels
        for stage in stages:
            for width in stage:
                # Convs keep their bias, as in the standard VGG-BN definitions the paper builds on.
                layers += [conv3x3(c_in, width, bias=True), nn.BatchNorm2d(width), nn.ReLU(True)]
                c_in = width
            layers.append(nn.MaxPool2d(2))
        self.features = nn.Sequential(*layers)
        # After five pools a 32x32 input is 1x1; the adaptive pool keeps the head at 512 inputs.
        self.pool = AvgPoolTo(1)
        self.classifier = nn.Linear(c_in, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        """Return class logits for a batch of images."""
        return self.classifier(torch.flatten(self.pool(self.features(x)), 1))


@MODELS.register("vgg16")
def vgg16(num_classes: int, input_shape: InputShape) -> nn.Module:
    """Build VGG-16-BN for CIFAR (~14.7M params for 10 classes).

    The paper's configuration table quotes 138M parameters: that is the ImageNet VGG-16 with
    its two 4096-wide hidden classifier layers, not this CIFAR variant with a 512->classes head.
    """
    return VGG(VGG16_STAGES, num_classes, input_shape[0])


@dataclass(frozen=True)
class WideVariant:
    """The details in which the reference's WRN differs from Zagoruyko & Komodakis (2016).

    ``conv_bias``: every conv (stem, block, 1x1 shortcut) carries a bias. ``stride_last``: a
    down-sampling block strides in its second 3x3 conv instead of its first.
    ``final_bn_momentum``: momentum of the BatchNorm before the pooling, in PyTorch's convention
    (the weight of the newest batch in the running statistics).
    """

    conv_bias: bool
    stride_last: bool
    final_bn_momentum: float


# The WRN of the paper's code (ZIB-IOL/BIMP, after meliketoy/wide-resnet.pytorch): conv biases,
# strides in the second conv, and a final BatchNorm built with momentum=0.9. That is the usual
# value in the Keras/TensorFlow convention (weight of the old statistics); in PyTorch's it makes
# the running statistics almost equal to the last training batch's. An inherited quirk, kept
# because every evaluation behind the paper's CIFAR-100 numbers went through it.
WRN_REFERENCE = WideVariant(conv_bias=True, stride_last=True, final_bn_momentum=0.9)


# The architecture as published (and as in most re-implementations): no conv biases (BatchNorm
# follows every conv but the last, whose bias the final BN absorbs), strides in the first conv,
# PyTorch's default BatchNorm momentum.
WRN_STANDARD = WideVariant(conv_bias=False, stride_last=False, final_bn_momentum=0.1)


class WideBlock(nn.Module):
    """Pre-activation wide block: BN-ReLU-conv, dropout, BN-ReLU-conv, plus a shortcut."""

    def __init__(
        self, c_in: int, c_out: int, stride: int, dropout: float, variant: WideVariant
    ) -> None:
        super().__init__()
        bias = variant.conv_bias
        first, second = (1, stride) if variant.stride_last else (stride, 1)
        self.bn1 = nn.BatchNorm2d(c_in)
        self.conv1 = conv3x3(c_in, c_out, first, bias=bias)
        self.dropout = nn.Dropout(dropout)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.conv2 = conv3x3(c_out, c_out, second, bias=bias)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or c_in != c_out:
            self.shortcut = nn.Conv2d(c_in, c_out, kernel_size=1, stride=stride, bias=bias)

    def forward(self, x: Tensor) -> Tensor:
        """Return conv2(relu(bn2(dropout(conv1(relu(bn1(x))))))) + shortcut(x)."""
        out = self.conv1(F.relu(self.bn1(x)))
        out = self.conv2(F.relu(self.bn2(self.dropout(out))))
        return out + self.shortcut(x)


class WideResNet(nn.Module):
    """WRN-depth-k of Zagoruyko & Komodakis (2016) for 32x32 inputs.

    Two variants exist because the paper's numbers were produced with the reference's network
    (:data:`WRN_REFERENCE`, the default ``wrn28_10``), while comparisons with other work usually
    assume the published one (:data:`WRN_STANDARD`, ``wrn28_10_standard``). They differ in
    10,096 conv biases (at k = 10), where the down-sampling stride sits, and the final
    BatchNorm's momentum, which changes every evaluation in eval mode.
    """

    def __init__(
        self,
        depth: int,
        widen: int,
        dropout: float,
        num_classes: int,
        in_channels: int,
        variant: WideVariant = WRN_REFERENCE,
    ) -> None:
        super().__init__()
        if (depth - 4) % 6 != 0:
            raise ValueError(f"WideResNet depth must be 6n+4, got {depth}")
        n = (depth - 4) // 6
        widths = [16, 16 * widen, 32 * widen, 64 * widen]
        self.conv1 = conv3x3(in_channels, widths[0], bias=variant.conv_bias)
        stages: list[nn.Module] = []
        c_in = widths[0]
        for i, width in enumerate(widths[1:]):
            strides = [1 if i == 0 else 2] + [1] * (n - 1)
            blocks = []
            for stride in strides:
                blocks.append(WideBlock(c_in, width, stride, dropout, variant))
                c_in = width
            stages.append(nn.Sequential(*blocks))
        self.stages = nn.Sequential(*stages)
        # Pre-activation blocks leave the last output un-normalised, hence a final BN-ReLU.
        self.bn = nn.BatchNorm2d(c_in, momentum=variant.final_bn_momentum)
        self.pool = AvgPoolTo(1)
        self.fc = nn.Linear(c_in, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        """Return class logits for a batch of images."""
        out = F.relu(self.bn(self.stages(self.conv1(x))))
        return self.fc(torch.flatten(self.pool(out), 1))


@MODELS.register("wrn28_10")
def wrn28_10(num_classes: int, input_shape: InputShape) -> nn.Module:
    """Build WRN-28-10 (dropout 0.3) as the paper's code does (36,546,980 params at 100)."""
    return WideResNet(28, 10, 0.3, num_classes, input_shape[0], WRN_REFERENCE)


@MODELS.register("wrn28_10_standard")
def wrn28_10_standard(num_classes: int, input_shape: InputShape) -> nn.Module:
    """Build WRN-28-10 (dropout 0.3) as published: no conv biases, BN momentum 0.1 (36,536,884)."""
    return WideResNet(28, 10, 0.3, num_classes, input_shape[0], WRN_STANDARD)


@MODELS.register("resnet50")
def resnet50(num_classes: int, input_shape: InputShape) -> nn.Module:
    """Build torchvision's ImageNet ResNet-50 with random weights (25.56M params at 1000)."""
    # torchvision is imported by the builders that use it: importing it costs seconds of CPU
    # that every command validating a config (table, list, a dry run) would pay for nothing.
    import torchvision

    model = torchvision.models.resnet50(weights=None, num_classes=num_classes)
    if input_shape[0] != 3:
        # Only the stem depends on the channel count; torchvision initialises it the same way.
        model.conv1 = nn.Conv2d(input_shape[0], 64, kernel_size=7, stride=2, padding=3, bias=False)
        nn.init.kaiming_normal_(model.conv1.weight, mode="fan_out", nonlinearity="relu")
    return deterministic_pools(model)


@MODELS.register("maxvit_t")
def maxvit_t(num_classes: int, input_shape: InputShape) -> nn.Module:
    """Build torchvision's MaxViT-T with random weights (30.9M params at 1000 classes).

    Its windows and grids partition the feature maps into 7x7 blocks down to stride 32, so the
    images must be 224x224 (ImageNet's training resolution).
    """
    if tuple(input_shape) != (3, 224, 224):
        raise ConfigError("model.name", "maxvit_t", "a dataset of 3x224x224 images (imagenet)")
    import torchvision

    return deterministic_pools(torchvision.models.maxvit_t(weights=None, num_classes=num_classes))
