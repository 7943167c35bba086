"""Compaction: a filter-pruned (masked) model rebuilt as a physically smaller dense model.

Structured pruning here only zeroes whole filters (and the matching bias and BatchNorm
channels, see :func:`benchmark.pruning.filter_masks`); the masked model is as slow as the dense
one. :func:`compact` removes every channel that is provably zero in the masked model: the
filters, the BatchNorm channels and the matching input channels of every consumer.

Torch-Pruning (``torch_pruning``, Fang et al. 2023, "DepGraph") finds which layers are coupled
through a channel (a conv's filters, its BN, the next conv's input channels, residual additions
that tie several convs to one channel of the stream) and edits all of them consistently. What
it does not decide is *which* channels to remove: a channel is removed only when every layer of
its group that writes to it writes zeros there, i.e. every conv/linear filter of the group is
zero (weight and bias) and every BatchNorm of the group has weight = bias = 0. That rule is
conservative, so the compacted model computes exactly what the masked model computes (up to
float rounding of a differently shaped reduction, checked to 1e-5 relative in the tests):

* a filter whose BN is masked too (``conv -> bn`` in registration order, or ``conv -> dropout
  -> bn`` as in WRN-28-10's blocks) is removed;
* a filter whose BN is not masked (a model whose BN ``filter_masks`` cannot pair with the conv)
  still emits the constant ``bias - w * mean / std`` and is kept; the theoretical speedup
  over-counts such filters, the measured speedup does not;
* a residual stream channel is removed only when all the convs feeding it (and every BN that
  reads it, in pre-activation nets) are zero there, which independent per-layer filter choices
  rarely give, so residual outputs mostly keep their width.

The option-A shortcut of the CIFAR ResNets (:class:`benchmark.models.PadShortcut`, zero-padding
of channels) is replaced by an equal :class:`ChannelScatter` that Torch-Pruning edits with its
own pruner. The last conv/linear layer (the classifier) never loses outputs.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import torch
import torch_pruning as tp
from torch import Tensor, nn

from benchmark.models.classification import PadShortcut


class ChannelScatter(nn.Module):
    """``out[:, dst[i]] = x[:, src[i]]``, zeros elsewhere, after striding the spatial dims."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        src: Sequence[int],
        dst: Sequence[int],
        stride: int,
    ) -> None:
        super().__init__()
        self.in_channels, self.out_channels, self.stride = in_channels, out_channels, stride
        self.register_buffer("src", torch.as_tensor(list(src), dtype=torch.long))
        self.register_buffer("dst", torch.as_tensor(list(dst), dtype=torch.long))

    @classmethod
    def from_pad(cls, pad: PadShortcut, in_channels: int) -> ChannelScatter:
        """The scatter equal to an option-A ``pad`` shortcut on ``in_channels`` inputs."""
        front = pad.extra // 2
        return cls(
            in_channels,
            in_channels + pad.extra,
            range(in_channels),
            range(front, front + in_channels),
            pad.stride,
        )

    def forward(self, x: Tensor) -> Tensor:
        """Subsample ``x`` and place its channels ``src`` at the output channels ``dst``."""
        x = x[:, :, :: self.stride, :: self.stride]
        out = x.new_zeros(x.shape[0], self.out_channels, *x.shape[2:])
        out[:, self.dst] = x[:, self.src]
        return out


class ChannelScatterPruner(tp.pruner.BasePruningFunc):
    """Torch-Pruning handler of :class:`ChannelScatter`: input and output channels are
    independent (a removed input channel is zero anyway, so its output becomes padding)."""

    TARGET_MODULES = ChannelScatter

    def prune_out_channels(self, layer: ChannelScatter, idxs: Sequence[int]) -> nn.Module:
        """Drop output channels ``idxs`` (and the copies into them)."""
        keep = _kept(layer.out_channels, idxs)
        new_index = {old: new for new, old in enumerate(keep)}
        pairs = [(s, new_index[d]) for s, d in _pairs(layer) if d in new_index]
        return _rebuild(layer, layer.in_channels, len(keep), pairs)

    def prune_in_channels(self, layer: ChannelScatter, idxs: Sequence[int]) -> nn.Module:
        """Drop input channels ``idxs`` (their outputs become zero padding)."""
        keep = _kept(layer.in_channels, idxs)
        new_index = {old: new for new, old in enumerate(keep)}
        pairs = [(new_index[s], d) for s, d in _pairs(layer) if s in new_index]
        return _rebuild(layer, len(keep), layer.out_channels, pairs)

    def get_out_channels(self, layer: ChannelScatter) -> int:
        """The number of output channels."""
        return layer.out_channels

    def get_in_channels(self, layer: ChannelScatter) -> int:
        """The number of input channels."""
        return layer.in_channels


def _kept(n: int, removed: Sequence[int]) -> list[int]:
    gone = set(int(i) for i in removed)
    return [i for i in range(n) if i not in gone]


def _pairs(layer: ChannelScatter) -> list[tuple[int, int]]:
    return list(zip(layer.src.tolist(), layer.dst.tolist(), strict=True))


def _rebuild(
    layer: ChannelScatter, c_in: int, c_out: int, pairs: list[tuple[int, int]]
) -> ChannelScatter:
    """Edit ``layer`` in place (Torch-Pruning keeps the module object) and return it."""
    layer.in_channels, layer.out_channels = c_in, c_out
    device = layer.src.device
    layer.src = torch.tensor([s for s, _ in pairs], dtype=torch.long, device=device)
    layer.dst = torch.tensor([d for _, d in pairs], dtype=torch.long, device=device)
    return layer


def replace_pad_shortcuts(model: nn.Module, example_input: Tensor) -> nn.Module:
    """Swap every :class:`PadShortcut` of ``model`` (in place) for an equal ChannelScatter."""
    in_channels: dict[nn.Module, int] = {}

    def record(module: nn.Module, args: tuple[Tensor, ...]) -> None:
        in_channels[module] = args[0].shape[1]

    hooks = [
        m.register_forward_pre_hook(record) for m in model.modules() if isinstance(m, PadShortcut)
    ]
    try:
        with torch.no_grad():
            model(example_input)
    finally:
        for hook in hooks:
            hook.remove()
    for parent in list(model.modules()):
        for name, child in parent.named_children():
            if isinstance(child, PadShortcut):
                setattr(parent, name, ChannelScatter.from_pad(child, in_channels[child]))
    return model


def _channel_is_zero(module: nn.Module, idx: int) -> bool | None:
    """Whether ``module`` writes zeros to output channel ``idx``; None: not a writer (an op)."""
    if isinstance(module, nn.Conv2d | nn.Linear):
        zero = not bool(module.weight.detach()[idx].any())
        return zero and (module.bias is None or float(module.bias.detach()[idx]) == 0.0)
    if isinstance(module, nn.BatchNorm2d):
        if not module.affine:
            return False
        return float(module.weight.detach()[idx]) == 0.0 and float(module.bias.detach()[idx]) == 0.0
    if isinstance(module, ChannelScatter):
        return idx not in set(module.dst.tolist())
    if type(module).__module__.startswith("torch_pruning"):
        return None  # additions, reshapes, concatenations: their inputs are in the group
    return False  # any other writer (LayerNorm, PReLU, ...): assume it is not zero


def _dead_channels(group: tp.dependency.Group, dg: tp.DependencyGraph, n: int) -> list[int]:
    """Root indices of ``group`` at which every writer of the group writes zeros."""
    dead = set(range(n))
    for item in group.items:
        dep = item.dep
        if not dg.is_out_channel_pruning_fn(dep.handler):
            continue
        for idx, root in zip(item.idxs, item.root_idxs, strict=True):
            if root in dead and _channel_is_zero(dep.target.module, idx) is False:
                dead.discard(root)
    return sorted(dead)


def output_layer(model: nn.Module) -> nn.Module:
    """The last Conv2d/Linear registered in ``model`` (the classifier; never shrunk)."""
    layers = [m for m in model.modules() if isinstance(m, nn.Conv2d | nn.Linear)]
    if not layers:
        raise ValueError("the model has no Conv2d or Linear layer")
    return layers[-1]


def compact(model: nn.Module, example_input: Tensor) -> nn.Module:
    """A smaller dense copy of the masked ``model`` without its provably zero channels.

    ``model`` is not modified. ``example_input`` (a small batch) is used to trace the model;
    the copy is returned in eval mode on the model's device.
    """
    compacted = copy.deepcopy(model).eval()
    device = next(compacted.parameters()).device
    example = example_input.to(device)
    replace_pad_shortcuts(compacted, example)
    # Tracing needs autograd; the compaction itself edits parameters without recording it.
    with torch.enable_grad():
        dg = tp.DependencyGraph().build_dependency(
            compacted,
            example_inputs=example,
            customized_pruners={ChannelScatter: ChannelScatterPruner()},
            verbose=False,
        )
    protected = [output_layer(compacted)]
    for group in dg.get_all_groups(ignored_layers=protected, root_module_types=(nn.Conv2d,)):
        root = group.items[0].dep.target.module
        n = root.out_channels
        dead = _dead_channels(group, dg, n)
        if len(dead) == n:
            dead = dead[1:]  # a layer keeps at least one (zero) channel
        if dead:
            group.prune(idxs=dead, record_history=False)
    return compacted


def channel_counts(model: nn.Module) -> dict[str, int]:
    """Output channels of every Conv2d, by module name (to report what compaction removed)."""
    return {n: m.out_channels for n, m in model.named_modules() if isinstance(m, nn.Conv2d)}


def kept_fraction(model: nn.Module, compacted: nn.Module) -> float:
    """Parameters of ``compacted`` as a fraction of those of ``model``."""
    total = sum(p.numel() for p in model.parameters())
    return sum(p.numel() for p in compacted.parameters()) / total if total else 1.0
