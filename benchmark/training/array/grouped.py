"""The "grouped" array layout: K models of one architecture run as one wide model.

Activations are ``[N, K*C, H, W]`` from the input to the head (run k's channels are the k-th
block of C), as in HFTA (Wang et al., MLSys 2021): every convolution is one grouped convolution
over the K blocks, every BatchNorm one BatchNorm over K*C channels (each run keeps its own batch
statistics and running statistics, since BatchNorm is per channel), every linear layer one
batched matrix product, and what acts on each channel alone (ReLU, pooling, residual sums) runs
unchanged. Unlike vmap, nothing is transposed between layers.

Only modules whose forward is known to act on channels alone may sit between the layers, so the
wide model is built for the architectures listed in :data:`KNOWN_MODULES` and refuses others
with the module that it does not know. Types are matched exactly: a subclass may have a forward
of its own (a BatchNorm that syncs statistics across processes, a block that mixes channels).
"""

from __future__ import annotations

import copy
from typing import Any, Protocol

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from benchmark.core.errors import ConfigError
from benchmark.models.classification import VGG, BasicBlock, CifarResNet, PadShortcut, SmallCNN
from benchmark.models.layers import AvgPoolTo


class StackedModels(Protocol):
    """What the wide model reads of benchmark.training.array.stack.StackedModels (a protocol,
    so that this module does not import the one that builds it)."""

    k: int
    template: nn.Module
    leaves: dict[str, Tensor]
    buffers: dict[str, Tensor]


# Modules whose forward (own code, or their children's) acts on each channel alone or on the
# flattened features of each sample in channel-major order; the layers below are replaced.
KNOWN_MODULES = (
    CifarResNet,
    BasicBlock,
    SmallCNN,
    VGG,
    nn.Sequential,
    nn.ReLU,
    nn.Identity,
    nn.MaxPool2d,
    nn.AvgPool2d,
    nn.AdaptiveAvgPool2d,
    AvgPoolTo,
)


def grouped_unsupported(model: nn.Module) -> str:
    """Why ``model`` cannot run in the grouped layout ("" when it can)."""
    for name, module in model.named_modules():
        kind = type(module)
        if kind is nn.Conv2d:
            if module.padding_mode != "zeros":
                return f"convolution {name} pads with {module.padding_mode!r}"
        elif kind is nn.BatchNorm2d:
            if module.momentum is None:
                return f"BatchNorm {name} keeps a cumulative average (momentum None)"
        elif kind not in (nn.Linear, PadShortcut, *KNOWN_MODULES):
            return f"module {name or 'model'} ({kind.__name__}) is not known to the layout"
    return ""


class GroupedModel:
    """The wide model of a :class:`StackedModels`: a copy of its template whose layers read the
    stacked parameters and buffers by name."""

    def __init__(self, stacked: StackedModels) -> None:
        why = grouped_unsupported(stacked.template)
        if why:
            raise ConfigError(
                "--array-layout",
                "grouped",
                f"vmap or loop for this model (the grouped array "
                f"layout cannot run this model: {why})",
            )
        self.stacked = stacked
        self.k = stacked.k
        self.model = copy.deepcopy(stacked.template)
        for name, module in list(self.model.named_modules()):
            wide = _widen(module, name, stacked)
            if wide is not None:
                _replace(self.model, name, wide)
        # Only the stacked leaves are trained: the copy's own tensors are dropped.
        for module in self.model.modules():
            module._parameters.clear()
            module._buffers.clear()

    def set_weight_format(self, channels_last: bool) -> None:
        """Hand every convolution its weight channels_last (as its channels_last input is), or
        as stored: which is faster depends on the convolution kernels (measured, not assumed:
        benchmark.bench.array_kernels)."""
        for module in self.model.modules():
            if isinstance(module, _Conv):
                module.channels_last = channels_last

    def forward_array(self, x: Tensor) -> Tensor:
        """The K models' outputs ``[K, N, ...]`` of their inputs ``x`` (``[K, N, C, H, W]``)."""
        self.model.train(self.stacked.template.training)
        k, n = x.shape[:2]
        wide = x.transpose(0, 1).reshape(n, k * x.shape[2], *x.shape[3:])
        if x.is_cuda:
            wide = wide.contiguous(memory_format=torch.channels_last)
        out = self.model(wide)
        return out.reshape(n, k, -1).transpose(0, 1)


def _replace(root: nn.Module, name: str, module: nn.Module) -> None:
    path, _, leaf = name.rpartition(".")
    setattr(root.get_submodule(path) if path else root, leaf, module)


def _widen(module: nn.Module, name: str, stacked: StackedModels) -> nn.Module | None:
    """The wide replacement of one layer (None: the module runs as it is)."""
    prefix = f"{name}." if name else ""
    kind = type(module)  # exactly, as grouped_unsupported checked
    if kind is nn.Conv2d:
        return _Conv(module, prefix, stacked)  # type: ignore[arg-type]
    if kind is nn.BatchNorm2d:
        return _BatchNorm(module, prefix, stacked)  # type: ignore[arg-type]
    if kind is nn.Linear:
        return _Linear(prefix, stacked)
    if kind is PadShortcut:
        return _PadShortcut(module, stacked.k)  # type: ignore[arg-type]
    return None


class _Stacked(nn.Module):
    """A wide layer reading run-stacked tensors ``[K, ...]`` of its original by name."""

    def __init__(self, prefix: str, stacked: StackedModels) -> None:
        super().__init__()
        self.prefix = prefix
        # A plain attribute in a one-element list: not a child module of the wide model.
        self._source = [stacked]

    def param(self, name: str) -> Tensor | None:
        return self._source[0].leaves.get(self.prefix + name)

    def buffer(self, name: str) -> Tensor | None:
        return self._source[0].buffers.get(self.prefix + name)


class _Conv(_Stacked):
    def __init__(self, conv: nn.Conv2d, prefix: str, stacked: StackedModels) -> None:
        super().__init__(prefix, stacked)
        self.options: dict[str, Any] = {
            "stride": conv.stride,
            "padding": conv.padding,
            "dilation": conv.dilation,
            "groups": conv.groups * stacked.k,
        }
        self.channels_last = False

    def forward(self, x: Tensor) -> Tensor:
        weight, bias = self.param("weight"), self.param("bias")
        assert weight is not None
        weight = weight.reshape(-1, *weight.shape[2:])
        if self.channels_last:
            weight = weight.contiguous(memory_format=torch.channels_last)
        return F.conv2d(x, weight, None if bias is None else bias.reshape(-1), **self.options)


class _BatchNorm(_Stacked):
    def __init__(self, bn: nn.BatchNorm2d, prefix: str, stacked: StackedModels) -> None:
        super().__init__(prefix, stacked)
        self.eps, self.momentum = bn.eps, bn.momentum
        self.track = bn.track_running_stats

    def forward(self, x: Tensor) -> Tensor:
        weight, bias = self.param("weight"), self.param("bias")
        mean, var = self.buffer("running_mean"), self.buffer("running_var")
        counted = self.buffer("num_batches_tracked")
        if self.training and self.track and counted is not None:
            counted.add_(1)  # as nn.BatchNorm2d counts (momentum is set, so it is not read)
        batch_stats = self.training or mean is None
        return F.batch_norm(
            x,
            # Buffers are contiguous [K, C]: views, so the running statistics update in place.
            None if mean is None or (self.training and not self.track) else mean.view(-1),
            None if var is None or (self.training and not self.track) else var.view(-1),
            None if weight is None else weight.reshape(-1),
            None if bias is None else bias.reshape(-1),
            batch_stats,
            self.momentum,
            self.eps,
        )


class _Linear(_Stacked):
    def forward(self, x: Tensor) -> Tensor:
        weight, bias = self.param("weight"), self.param("bias")
        assert weight is not None
        k = weight.shape[0]
        per_run = x.reshape(x.shape[0], k, -1)  # [N, K, in]
        out = torch.einsum("nki,koi->nko", per_run, weight)
        if bias is not None:
            out = out + bias.to(out.dtype)  # bf16 logits under autocast, as F.linear gives
        return out.reshape(x.shape[0], -1)


class _PadShortcut(nn.Module):
    def __init__(self, shortcut: PadShortcut, k: int) -> None:
        super().__init__()
        self.stride, self.extra, self.k = shortcut.stride, shortcut.extra, k

    def forward(self, x: Tensor) -> Tensor:
        x = x[:, :, :: self.stride, :: self.stride]
        n, kc, h, w = x.shape
        per_run = x.reshape(n, self.k, kc // self.k, h, w)
        front = self.extra // 2
        padded = F.pad(per_run, (0, 0, 0, 0, front, self.extra - front))
        return padded.reshape(n, -1, h, w)
