"""Per-layer keep counts of the layer-wise criteria: water-filling, then largest remainders."""

from __future__ import annotations

import math
from collections.abc import Sequence


def allocate_counts(
    weights: Sequence[float], lower: Sequence[int], upper: Sequence[int], total: int
) -> list[int]:
    """Integers k_l in [lower_l, upper_l] summing to ``total``, closest to clip(c w_l, lo, hi).

    The scale c solves sum_l clip(c w_l, lower_l, upper_l) = total exactly; the real shares are
    then rounded by the largest-remainder method (ties to earlier layers).
    """
    if not sum(lower) <= total <= sum(upper):
        raise ValueError(f"cannot place {total} between {sum(lower)} and {sum(upper)}")
    scale = _water_level(weights, lower, upper, total)
    shares = [min(max(scale * w, lo), hi) for w, lo, hi in zip(weights, lower, upper, strict=True)]
    return _largest_remainder(shares, lower, upper, total)


def _filled(
    scale: float, weights: Sequence[float], lower: Sequence[int], upper: Sequence[int]
) -> float:
    """sum_l clip(scale * w_l, lower_l, upper_l)."""
    return sum(min(max(scale * w, lo), hi) for w, lo, hi in zip(weights, lower, upper, strict=True))


def _water_level(
    weights: Sequence[float], lower: Sequence[int], upper: Sequence[int], total: int
) -> float:
    """The scale c with sum_l clip(c w_l, lower_l, upper_l) = total.

    The sum is piecewise linear and nondecreasing in c with kinks at lower_l/w_l and upper_l/w_l,
    so c is found by interpolating inside the first segment whose end reaches ``total``.
    """
    kinks = {0.0}
    for w, lo, hi in zip(weights, lower, upper, strict=True):
        if w > 0:
            kinks.update((lo / w, hi / w))
    previous, filled_previous = 0.0, _filled(0.0, weights, lower, upper)
    for kink in sorted(kinks):
        filled = _filled(kink, weights, lower, upper)
        if filled >= total:
            if filled == filled_previous:
                return kink
            return previous + (kink - previous) * (total - filled_previous) / (
                filled - filled_previous
            )
        previous, filled_previous = kink, filled
    return previous


def _largest_remainder(
    shares: Sequence[float], lower: Sequence[int], upper: Sequence[int], total: int
) -> list[int]:
    """Round real ``shares`` to integers within bounds summing to ``total``."""
    counts = [
        min(max(math.floor(x), lo), hi) for x, lo, hi in zip(shares, lower, upper, strict=True)
    ]
    deficit = total - sum(counts)
    while deficit:
        step = 1 if deficit > 0 else -1
        movable = [
            i
            for i in range(len(counts))
            if (counts[i] < upper[i] if step > 0 else counts[i] > lower[i])
        ]
        # Add to the layers furthest below their share (remove from those furthest above);
        # the sort is stable, so ties go to earlier layers.
        movable.sort(key=lambda i: step * (counts[i] - shares[i]))
        for i in movable[: abs(deficit)]:
            counts[i] += step
        deficit = total - sum(counts)
    return counts


def largest_remainder(shares: Sequence[float], total: int) -> list[int]:
    """Round real ``shares`` (each >= 0) to integers summing to ``total`` (largest remainders)."""
    return _largest_remainder(shares, [0] * len(shares), [math.ceil(x) for x in shares], total)


def bounded_largest_remainder(
    shares: Sequence[float], lower: Sequence[int], upper: Sequence[int], total: int
) -> list[int]:
    """Round real ``shares`` to integers within ``[lower, upper]`` summing to ``total``."""
    if not sum(lower) <= total <= sum(upper):
        raise ValueError(f"cannot place {total} between {sum(lower)} and {sum(upper)}")
    return _largest_remainder(shares, lower, upper, total)
