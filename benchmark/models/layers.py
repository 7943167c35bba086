"""Layers shared by the architectures: a 3x3 convolution and deterministic average pooling."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.modules.utils import _pair


def conv3x3(c_in: int, c_out: int, stride: int = 1, bias: bool = False) -> nn.Conv2d:
    """Return a 3x3 convolution with padding 1 (spatial size kept at stride 1)."""
    return nn.Conv2d(c_in, c_out, kernel_size=3, stride=stride, padding=1, bias=bias)


class AvgPoolTo(nn.AdaptiveAvgPool2d):
    """Adaptive average pooling that runs as plain average pooling when the sizes divide.

    Equal values (up to float rounding), but unlike adaptive pooling its CUDA backward is
    deterministic, which ``runtime.deterministic`` needs (torch refuses the adaptive kernel
    in that mode).
    """

    def forward(self, x: Tensor) -> Tensor:
        """Average ``x`` down to ``output_size``."""
        out_h, out_w = _pair(self.output_size)
        h, w = x.shape[-2:]
        if out_h and out_w and h % out_h == 0 and w % out_w == 0:
            return F.avg_pool2d(x, (h // out_h, w // out_w))
        return super().forward(x)


def deterministic_pools(model: nn.Module) -> nn.Module:
    """Replace every ``nn.AdaptiveAvgPool2d`` of ``model`` by an equal :class:`AvgPoolTo`."""
    for parent in list(model.modules()):
        for name, child in parent.named_children():
            if type(child) is nn.AdaptiveAvgPool2d:
                setattr(parent, name, AvgPoolTo(child.output_size))
    return model
