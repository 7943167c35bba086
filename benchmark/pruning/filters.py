"""Filter pruning (Li et al.): whole Conv2d filters with the lowest L2 norms, and their BN."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import Tensor, nn

from benchmark.pruning.criteria import _check_sparsity, _masked_scores, magnitude_topk_masks
from benchmark.pruning.prunable import _as_patterns, _excluded, _param_name

# Parameter-free modules that keep a zero channel zero (in eval and training mode alike), so a
# BatchNorm behind them still normalises exactly the conv's output (WRN: conv1 -> dropout -> bn2).
_TRANSPARENT = (
    nn.Dropout,
    nn.Dropout1d,
    nn.Dropout2d,
    nn.Dropout3d,
    nn.AlphaDropout,
    nn.FeatureAlphaDropout,
)


def _parent(name: str) -> str:
    """The qualified name of the module that owns ``name`` ("" for the root)."""
    return name.rpartition(".")[0]


def _following_batchnorm(
    modules: list[tuple[str, nn.Module]], index: int, channels: int
) -> tuple[str, nn.BatchNorm2d] | None:
    """The BatchNorm2d that normalises the output of the conv ``modules[index]``, if any.

    That is the module registered right after the conv, or right after dropout modules that
    follow it, provided all of them belong to the conv's own parent (so a BN of another block or
    of the network's tail is never taken), and it must have ``channels`` features.
    """
    parent = _parent(modules[index][0])
    position = index + 1
    while (
        position < len(modules)
        and isinstance(modules[position][1], _TRANSPARENT)
        and _parent(modules[position][0]) == parent
    ):
        position += 1
    if position >= len(modules):
        return None
    name, module = modules[position]
    if position > index + 1 and _parent(name) != parent:
        return None
    if isinstance(module, nn.BatchNorm2d) and module.num_features == channels:
        return name, module
    return None


def _pruned_filters(mask: Tensor | None, out_channels: int, device: torch.device) -> Tensor:
    """``bool`` per output filter: True where the whole filter is masked to zero."""
    if mask is None:
        return torch.zeros(out_channels, dtype=torch.bool, device=device)
    return ~(mask.detach().reshape(out_channels, -1) != 0).any(dim=1).to(device)


def _kept_filters(
    conv: nn.Conv2d, fraction: float, current: Tensor | None, multiple: int = 1
) -> Tensor:
    """``bool`` per output filter of ``conv``: the filters with the largest L2 norms survive.

    round(fraction * n) filters are pruned, but never fewer than were pruned before (pruning is
    hard) and, unless they were all pruned before, never all of them. With ``multiple`` > 1 the
    number kept is rounded to the nearest multiple of it (down when that exceeds the filters
    still alive; all alive ones when fewer than ``multiple`` are), for hardware-friendly widths.
    """
    weight = conv.weight.detach()
    n = conv.out_channels
    before = _pruned_filters(current, n, weight.device)
    n_prune = max(min(round(fraction * n), n - 1), int(before.sum()))
    if multiple > 1:
        alive = n - int(before.sum())
        kept = max(multiple, multiple * round((n - n_prune) / multiple))
        if kept > alive:
            kept = max(multiple * (alive // multiple), min(alive, multiple))
        n_prune = n - kept
    norms = weight.reshape(n, -1).float().norm(dim=1)
    return magnitude_topk_masks([_masked_scores(norms, ~before)], n - n_prune)[0]


def filter_masks(
    model: nn.Module,
    fraction: float,
    *,
    current: Mapping[str, Tensor] | None = None,
    exclude: Sequence[str] = (),
    multiple: int = 1,
) -> dict[str, Tensor]:
    """Prune the lowest-L2-norm filters of every Conv2d, the same fraction per layer (Li et al.).

    ``multiple`` > 1 rounds each layer's kept filter count to a multiple of it (e.g. 8, which
    tensor cores prefer); the default 1 is the paper's setting.

    Returns ``bool`` masks keyed by parameter name: the conv weight (whole filters), its bias,
    and the weight and bias of the BatchNorm2d that normalises the conv's output. That BN is the
    module registered immediately after the conv in ``model.named_modules()`` order (or after
    dropout modules of the same parent, as in WRN's ``conv1 -> dropout -> bn2``), if it is a
    BatchNorm2d with ``num_features == out_channels`` (containers count as modules, so a BN that
    starts the next block, e.g. in pre-activation ResNets, is never matched). Filters whose
    weight mask in ``current`` is all zero count as pruned and stay pruned. Convs matching an
    fnmatch pattern in ``exclude`` are left alone. The next layer's input channels are not masked.
    """
    _check_sparsity(fraction)
    current = current or {}
    patterns = _as_patterns(exclude)
    modules = list(model.named_modules())
    masks: dict[str, Tensor] = {}
    for index, (name, conv) in enumerate(modules):
        if not isinstance(conv, nn.Conv2d) or _excluded(name, patterns):
            continue
        weight_name = _param_name(name, "weight")
        kept = _kept_filters(conv, fraction, current.get(weight_name), multiple)
        masks[weight_name] = kept.view(-1, 1, 1, 1).expand_as(conv.weight).clone()
        if conv.bias is not None:
            masks[_param_name(name, "bias")] = kept.clone()
        bn = _following_batchnorm(modules, index, conv.out_channels)
        if bn is not None and bn[1].affine:
            masks[_param_name(bn[0], "weight")] = kept.clone()
            masks[_param_name(bn[0], "bias")] = kept.clone()
    return masks


def structured_sparsity(
    model: nn.Module, masks: Mapping[str, Tensor], exclude: Sequence[str] = ()
) -> float:
    """The fraction of Conv2d output filters (outside ``exclude``) whose weight mask is zero."""
    patterns = _as_patterns(exclude)
    pruned = total = 0
    for name, conv in model.named_modules():
        if not isinstance(conv, nn.Conv2d) or _excluded(name, patterns):
            continue
        mask = masks.get(_param_name(name, "weight"))
        pruned += int(_pruned_filters(mask, conv.out_channels, conv.weight.device).sum())
        total += conv.out_channels
    return pruned / total if total else 0.0
