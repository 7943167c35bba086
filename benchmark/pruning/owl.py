"""OWL, outlier-weighed layer-wise sparsity (Yin et al., ICML 2024): a goal sparsity split over
the decoder layers of a language model by each layer's share of outliers, for any one-shot
criterion.

A decoder layer's outlier ratio ``D`` is the share of the Wanda scores ``|W_ij| * ||X_j||`` of
all its prunable linear maps together that exceed ``M`` times their mean, on the calibration
windows passed through the dense model. The ratios are scaled to ``[0, 2 lambda]`` (the lowest
to 0, the highest to ``2 lambda``) and a layer's sparsity is the goal minus its scaled ratio plus
a shift: layers with more outliers keep more weights. The reference code (``luuyin/OWL``,
``lib/prune_all.py``) shifts by the plain mean of the scaled ratios, which keeps the average but
leaves ``[s - lambda, s + lambda]`` (the range the paper states) when the ratios are skewed; here
the shift is solved so that the sparsities, clipped to that range, average the goal exactly in
weights. Whenever the reference's values stay in range (and every layer has the same size, as in
every Llama and OPT model) the two are the same. Defaults (the README's unstructured scripts):
``M = 5``, ``lambda = 0.08``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from benchmark.pruning.allocation import bounded_largest_remainder, largest_remainder
from benchmark.pruning.layerwise import decoder_layers, prune_layerwise
from benchmark.pruning.oneshot import InputStats, wanda_score

OWL_M = 5.0
OWL_LAMBDA = 0.08
# Bisection steps of the shift: the interval of width 4 lambda shrinks below float64's resolution.
_STEPS = 200


def outlier_ratio(scores: Sequence[Tensor], m: float) -> float:
    """The share of all entries of ``scores`` (one decoder layer's) above ``m`` times their mean."""
    total = sum(s.numel() for s in scores)
    mean = sum(float(s.double().sum()) for s in scores) / total
    return sum(int((s.double() > m * mean).sum()) for s in scores) / total


def owl_sparsities(
    ratios: Sequence[float], sizes: Sequence[int], goal: float, lam: float
) -> list[float]:
    """Each layer's sparsity ``clip(goal + t - 2 lam x_l, goal - lam, goal + lam)``, with ``x_l``
    the outlier ratio scaled to [0, 1] and the shift ``t`` such that the sparsities average
    ``goal`` weighted by the layers' ``sizes`` (equal ratios: every layer at ``goal``)."""
    low, high = min(ratios), max(ratios)
    if high == low or lam == 0:
        return [goal] * len(ratios)
    x = [(r - low) / (high - low) for r in ratios]

    def at(t: float) -> list[float]:
        return [min(max(goal + t - 2 * lam * xi, goal - lam), goal + lam) for xi in x]

    def excess(t: float) -> float:
        return math.fsum(n * (s - goal) for n, s in zip(sizes, at(t), strict=True))

    # excess(-lam) <= 0 <= excess(3 lam): every layer at its lower, then upper, bound.
    lo, hi = -lam, 3 * lam
    for _ in range(_STEPS):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if excess(mid) < 0 else (lo, mid)
    return at((lo + hi) / 2)


def owl_counts(
    ratios: Sequence[float], sizes: Sequence[int], goal: float, lam: float, total: int
) -> list[int]:
    """Pruned weights per layer: :func:`owl_sparsities` rounded by largest remainders to
    ``total`` in all, each layer within one weight of ``[goal - lam, goal + lam]``."""
    shares = [s * n for s, n in zip(owl_sparsities(ratios, sizes, goal, lam), sizes, strict=True)]
    lower = [max(0, math.floor((goal - lam) * n)) for n in sizes]
    upper = [min(n, math.ceil((goal + lam) * n)) for n in sizes]
    return bounded_largest_remainder(shares, lower, upper, total)


def decoder_outlier_ratios(
    model: nn.Module, ids: Tensor, prunable: set[int], m: float, chunk: int = 8
) -> list[tuple[float, list[int]]]:
    """Per decoder layer with prunable linear maps: its outlier ratio on the calibration windows
    ``ids`` through the dense model, and the ids of its prunable weights (nothing is pruned)."""
    layer_of = {
        id(p): index
        for index, layer in enumerate(decoder_layers(model))
        for p in layer.parameters()
        if id(p) in prunable
    }
    expected = Counter(layer_of.values())
    seen: dict[int, list[tuple[Tensor, Tensor]]] = {}
    ratios: dict[int, tuple[float, list[int]]] = {}

    def measure(_name: str, linear: nn.Linear, stats: InputStats | None) -> Tensor:
        assert stats is not None
        index = layer_of[id(linear.weight)]
        pairs = seen.setdefault(index, [])
        pairs.append((linear.weight, stats.column_sq_norms()))
        if len(pairs) == expected[index]:  # the layer's last map: its weights still resident
            scores = [wanda_score(w.detach(), norms) for w, norms in pairs]
            ratios[index] = (outlier_ratio(scores, m), [id(w) for w, _ in pairs])
            del seen[index]
        return torch.ones((), dtype=torch.bool, device=linear.weight.device)

    with torch.no_grad():
        prune_layerwise(model, ids, prunable, measure, hessian=False, chunk=chunk)
    return [ratios[index] for index in sorted(ratios)]


def owl_split(
    layers: Sequence[tuple[float, Sequence[int]]],
    sizes: dict[int, int],
    goal: float,
    lam: float,
) -> dict[int, float]:
    """Each weight's sparsity (by id) so that exactly ``round(goal * N)`` of the N weights of
    ``sizes`` are pruned: the decoder ``layers`` (outlier ratio, weight ids) by OWL, each layer's
    count spread over its weights by largest remainders, any other weight at ``goal``."""
    in_layers = {w for _, weights in layers for w in weights}
    rest = [w for w in sizes if w not in in_layers]
    rest_counts = largest_remainder(
        [goal * sizes[w] for w in rest], round(goal * sum(sizes[w] for w in rest))
    )
    out = {w: c / sizes[w] for w, c in zip(rest, rest_counts, strict=True)}
    layer_sizes = [sum(sizes[w] for w in weights) for _, weights in layers]
    total = round(goal * sum(sizes.values())) - sum(rest_counts)
    counts = owl_counts([r for r, _ in layers], layer_sizes, goal, lam, total)
    for (_, weights), count, size in zip(layers, counts, layer_sizes, strict=True):
        parts = largest_remainder([count * sizes[w] / size for w in weights], count)
        out.update((w, c / sizes[w]) for w, c in zip(weights, parts, strict=True))
    return out
