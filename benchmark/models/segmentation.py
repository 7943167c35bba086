"""Semantic-segmentation networks of the paper, built from torchvision parts.

* ``deeplabv3_resnet50``: ``torchvision.models.segmentation.deeplabv3_resnet50`` without the
  auxiliary head (39.6M weights at 21 classes: the paper's "40 Mio"; with torchvision's optional
  auxiliary FCN head it would be 42.0M).
* ``pspnet_resnet101``: PSPNet (Zhao et al., 2017) on torchvision's dilated ResNet-101 (output
  stride 8): pyramid pooling over bins 1, 2, 3, 6 with 512 channels each, a 3x3 bottleneck and an
  auxiliary FCN head on ``layer3`` used in training only (67.9M weights at 19 classes: the paper's
  "68 Mio", the usual PSPNet-R101 count). segmentation-models-pytorch's PSPNet tops out at 48.9M
  (ResNet-101 encoder, 1x1 bottleneck), so it cannot be the paper's model.
* ``deeplabv3_tiny`` and ``pspnet_tiny``: the same two designs on a one-block-per-stage,
  4-wide-group Bottleneck ResNet with 16-channel heads, for tests and smoke-scale runs.

Every model maps images (N, 3, H, W) to ``{"out": logits (N, classes, H, W)}`` (plus ``"aux"``
in training when it has an auxiliary head), like torchvision's segmentation models.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from benchmark.models.registry import (
    CUDA_NONDETERMINISTIC,
    DATASET_MODELS,
    MODEL_DATASETS,
    MODELS,
    InputShape,
)

if TYPE_CHECKING:
    from torchvision.models._utils import IntermediateLayerGetter
    from torchvision.models.resnet import ResNet

# torchvision is imported by the builders that use it: importing it costs seconds of CPU that
# every command validating a config (table, list, a dry run) would pay for nothing.

PSP_BINS = (1, 2, 3, 6)
# Output stride 8: the last two stages keep the resolution and dilate instead.
DILATED = [False, True, True]


def dilated_backbone(resnet: ResNet, aux: bool) -> IntermediateLayerGetter:
    """``layer4`` (and ``layer3`` as ``"aux"``) features of a ResNet, as torchvision's
    segmentation models take them (state-dict keys ``backbone.*`` match a ResNet's)."""
    from torchvision.models._utils import IntermediateLayerGetter

    layers = {"layer4": "out"} | ({"layer3": "aux"} if aux else {})
    return IntermediateLayerGetter(resnet, return_layers=layers)


def tiny_resnet() -> ResNet:
    """A Bottleneck ResNet with one block per stage and 4-wide groups (about 3M weights)."""
    from torchvision.models.resnet import Bottleneck, ResNet

    return ResNet(Bottleneck, [1, 1, 1, 1], width_per_group=4, replace_stride_with_dilation=DILATED)


class PyramidPooling(nn.Module):
    """PSPNet's pyramid pooling: pooled, projected and upsampled maps concatenated to the input."""

    def __init__(self, in_channels: int, channels: int, bins: tuple[int, ...] = PSP_BINS) -> None:
        super().__init__()
        self.stages = nn.ModuleList(
            nn.Sequential(
                nn.AdaptiveAvgPool2d(b),
                nn.Conv2d(in_channels, channels, 1, bias=False),
                nn.BatchNorm2d(channels),
                nn.ReLU(inplace=True),
            )
            for b in bins
        )

    def forward(self, x: Tensor) -> Tensor:
        """Return ``x`` with one upsampled pooled map per bin appended along the channels."""
        size = x.shape[-2:]
        pooled = [
            F.interpolate(stage(x), size=size, mode="bilinear", align_corners=False)
            for stage in self.stages
        ]
        return torch.cat([x, *pooled], dim=1)


class PSPHead(nn.Sequential):
    """Pyramid pooling, a 3x3 bottleneck to ``channels``, dropout and a 1x1 classifier."""

    def __init__(self, in_channels: int, num_classes: int, channels: int) -> None:
        super().__init__(
            PyramidPooling(in_channels, channels),
            nn.Conv2d(in_channels + len(PSP_BINS) * channels, channels, 3, padding=1, bias=False),
            nn.BatchNorm2d(channels),
            nn.ReLU(inplace=True),
            nn.Dropout2d(0.1),
            nn.Conv2d(channels, num_classes, 1),
        )


class PSPNet(nn.Module):
    """PSPNet: dilated backbone, pyramid-pooling head, auxiliary FCN head in training only."""

    def __init__(
        self, backbone: IntermediateLayerGetter, classifier: nn.Module, aux: nn.Module
    ) -> None:
        super().__init__()
        self.backbone = backbone
        self.classifier = classifier
        self.aux_classifier = aux

    def forward(self, x: Tensor) -> dict[str, Tensor]:
        """Return ``{"out": logits}`` at the input size (and ``"aux"`` logits in training)."""
        size = x.shape[-2:]
        features = self.backbone(x)
        logits = self.classifier(features["out"])
        out = OrderedDict(out=F.interpolate(logits, size, mode="bilinear", align_corners=False))
        # The auxiliary head only regularises training; inference (and its FLOPs) skips it.
        if self.training:
            aux = self.aux_classifier(features["aux"])
            out["aux"] = F.interpolate(aux, size, mode="bilinear", align_corners=False)
        return out


def deeplab_head(in_channels: int, num_classes: int, channels: int) -> nn.Sequential:
    """torchvision's DeepLabHead (ASPP at rates 12/24/36, 3x3 conv, classifier), any width."""
    from torchvision.models.segmentation.deeplabv3 import ASPP

    return nn.Sequential(
        ASPP(in_channels, [12, 24, 36], out_channels=channels),
        nn.Conv2d(channels, channels, 3, padding=1, bias=False),
        nn.BatchNorm2d(channels),
        nn.ReLU(),
        nn.Conv2d(channels, num_classes, 1),
    )


@MODELS.register("deeplabv3_resnet50")
def deeplabv3_resnet50(num_classes: int, input_shape: InputShape) -> nn.Module:
    """Build torchvision's DeepLabV3-ResNet-50 (no auxiliary head; 39.6M weights at 21 classes)."""
    import torchvision

    return torchvision.models.segmentation.deeplabv3_resnet50(
        weights=None, weights_backbone=None, num_classes=num_classes, aux_loss=False
    )


@MODELS.register("pspnet_resnet101")
def pspnet_resnet101(num_classes: int, input_shape: InputShape) -> nn.Module:
    """Build PSPNet on a dilated torchvision ResNet-101 (67.9M weights at 19 classes)."""
    import torchvision
    from torchvision.models.segmentation.fcn import FCNHead

    resnet = torchvision.models.resnet101(weights=None, replace_stride_with_dilation=DILATED)
    return PSPNet(
        dilated_backbone(resnet, aux=True),
        PSPHead(2048, num_classes, 512),
        FCNHead(1024, num_classes),
    )


@MODELS.register("deeplabv3_tiny")
def deeplabv3_tiny(num_classes: int, input_shape: InputShape) -> nn.Module:
    """Build DeepLabV3 on the tiny Bottleneck ResNet with a 16-channel ASPP (tests, smoke runs)."""
    from torchvision.models.segmentation import DeepLabV3

    return DeepLabV3(
        dilated_backbone(tiny_resnet(), aux=False), deeplab_head(2048, num_classes, 16)
    )


@MODELS.register("pspnet_tiny")
def pspnet_tiny(num_classes: int, input_shape: InputShape) -> nn.Module:
    """Build PSPNet on the tiny Bottleneck ResNet with 16-channel heads (tests, smoke runs)."""
    return PSPNet(
        dilated_backbone(tiny_resnet(), aux=True),
        PSPHead(2048, num_classes, 16),
        nn.Sequential(nn.Conv2d(1024, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, num_classes, 1)),
    )


SEGMENTATION_MODELS = ("deeplabv3_resnet50", "deeplabv3_tiny", "pspnet_resnet101", "pspnet_tiny")
SEGMENTATION_DATASETS = ("coco", "cityscapes")
for _name in SEGMENTATION_MODELS:
    MODEL_DATASETS[_name] = SEGMENTATION_DATASETS
    CUDA_NONDETERMINISTIC[_name] = "torch has no deterministic CUDA backward of bilinear upsampling"
for _data in SEGMENTATION_DATASETS:
    DATASET_MODELS[_data] = SEGMENTATION_MODELS
