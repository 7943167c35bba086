"""N:M semi-structured sparsity (2:4 by default): masks, checks and the selection criterion.

Groups follow NVIDIA's layout (ASP / cuSPARSELt): M consecutive entries along the input
dimension of a weight, i.e. along ``in_features`` of a Linear weight ``[out, in]`` and along the
input channels of a conv weight ``[out, in, kh, kw]`` (viewed as ``[out, kh, kw, in]``). In every
group the N largest scores (magnitudes) are kept. A layer whose input dimension is not a multiple
of M (e.g. a first conv on 3 colour channels) cannot hold the pattern and stays as it is.

The pattern fixes the sparsity at ``1 - N/M`` of every layer that can hold it, so the criterion
applies it in full whatever the step's target; a target above what the pattern reaches is an
error naming ``method.sparsity``. Entries pruned earlier stay pruned (their group keeps fewer).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor

from benchmark.core.errors import ConfigError

DEFAULT_N, DEFAULT_M = 2, 4
# Registered criterion names -> (N, M); "nm" is the 2:4 pattern the sparse tensor cores run.
PATTERNS: dict[str, tuple[int, int]] = {"nm": (2, 4), "2:4": (2, 4), "1:4": (1, 4), "4:8": (4, 8)}


def _grouped(t: Tensor, m: int) -> Tensor | None:
    """``t`` (a weight-shaped tensor) as rows of M along its input dimension; None if it can't."""
    if t.dim() < 2 or t.shape[1] % m:
        return None
    moved = t.movedim(1, -1) if t.dim() > 2 else t  # [out, *kernel, in]
    return moved.reshape(-1, m)


def _ungroup(groups: Tensor, like: Tensor) -> Tensor:
    """Inverse of :func:`_grouped` for a tensor shaped like ``like``."""
    if like.dim() > 2:
        shape = (like.shape[0], *like.shape[2:], like.shape[1])
        return groups.reshape(shape).movedim(-1, 1)
    return groups.reshape(like.shape)


def nm_mask(score: Tensor, alive: Tensor, n: int = DEFAULT_N, m: int = DEFAULT_M) -> Tensor:
    """``bool`` mask keeping the N best alive scores in every group of M (no groups: alive)."""
    grouped = _grouped(score, m)
    if grouped is None:
        return alive.clone()
    alive_g = _grouped(alive, m)
    assert alive_g is not None
    masked = grouped.float().masked_fill(~alive_g, -math.inf)
    # topk is deterministic on ties (lowest index first on CPU and CUDA for these sizes).
    top = masked.topk(n, dim=1).indices
    keep = torch.zeros_like(alive_g).scatter_(1, top, True) & alive_g
    return _ungroup(keep, alive)


def is_nm(mask: Tensor, n: int = DEFAULT_N, m: int = DEFAULT_M) -> bool:
    """Whether every group of M of ``mask`` has at most N nonzeros (False if it has no groups)."""
    grouped = _grouped(mask != 0, m)
    return grouped is not None and bool((grouped.sum(dim=1) <= n).all())


def nm_masks(
    weights: Sequence[Tensor],
    alive: Sequence[Tensor],
    keep: int,
    sparsity: float,
    n: int = DEFAULT_N,
    m: int = DEFAULT_M,
) -> list[Tensor]:
    """N:M masks by magnitude over ``weights``; ``keep`` (the step's target) must be reachable."""
    masks = [nm_mask(w.abs(), a, n, m) for w, a in zip(weights, alive, strict=True)]
    kept = sum(int(mask.sum()) for mask in masks)
    if keep < kept:
        total = sum(w.numel() for w in weights)
        raise ConfigError(
            "method.sparsity",
            sparsity,
            f"at most {1 - kept / total:.6g} for the {n}:{m} pattern on these parameters "
            "(it fixes the sparsity of every layer whose input dimension is a multiple of "
            f"{m}; other layers stay dense)",
        )
    return masks


def nm_criterion(n: int, m: int) -> Callable[[Any], list[Tensor]]:
    """A selection criterion (for ``benchmark.pruning.CRITERIA``) applying the N:M pattern."""

    def select(sel: Any) -> list[Tensor]:
        return nm_masks(sel.weights, sel.alive, sel.keep, sel.sparsity, n, m)

    select.__doc__ = f"{n}:{m} semi-structured: the {n} largest magnitudes of every {m} inputs."
    return select
