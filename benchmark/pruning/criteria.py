"""The selection criteria (global, LAMP, random, uniform, uniform+, ERK) and compute_masks."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from numbers import Real

import torch
from torch import Tensor, nn

from benchmark.core.errors import ConfigError
from benchmark.core.registry import Registry
from benchmark.pruning.allocation import allocate_counts
from benchmark.pruning.nm import PATTERNS as NM_PATTERNS
from benchmark.pruning.nm import nm_criterion

SPARSITY_FIELD = "method.sparsity"
CRITERION_FIELD = "method.criterion"
SPARSITY_ALLOWED = "a number in [0, 1)"


def magnitude_topk_masks(scores: Sequence[Tensor], keep: int) -> list[Tensor]:
    """Keep exactly the ``keep`` largest scores across all tensors; return ``bool`` masks.

    Ties at the threshold are broken by position (earlier tensors, then earlier entries, win),
    so the result is deterministic and the count is exact. NaN scores rank lowest.
    """
    sizes = [s.numel() for s in scores]
    total = sum(sizes)
    if not 0 <= keep <= total:
        raise ValueError(f"keep = {keep} is outside [0, {total}]")
    if not scores:
        return []
    device = scores[0].device
    flat = torch.cat([s.detach().reshape(-1).to(device) for s in scores])
    flat = flat.masked_fill(flat.isnan(), -math.inf)
    if keep == total:
        selected = torch.ones(total, dtype=torch.bool, device=device)
    elif keep == 0:
        selected = torch.zeros(total, dtype=torch.bool, device=device)
    else:
        # The keep-th largest value; everything above it is kept, then ties fill the rest.
        threshold = flat.kthvalue(total - keep + 1).values
        selected = flat > threshold
        missing = keep - int(selected.sum())
        tied = torch.nonzero(flat == threshold).flatten()[:missing]
        selected[tied] = True
    return [
        part.reshape(s.shape).to(s.device)
        for part, s in zip(selected.split(sizes), scores, strict=True)
    ]


def lamp_scores(weight: Tensor) -> Tensor:
    """LAMP scores of one layer: w_u^2 / sum of w_v^2 over all v with |w_v| >= |w_u| (float64).

    Tied magnitudes share a denominator (each one is included in the others' sums).
    """
    squares = weight.detach().reshape(-1).to(torch.float64) ** 2
    ordered, order = torch.sort(squares)
    # suffix[i] = sum of ordered[i:], the squares at least as large as ordered[i].
    suffix = ordered.flip(0).cumsum(0).flip(0)
    first_of_tie = torch.searchsorted(ordered, ordered, side="left")
    denominator = suffix[first_of_tie]
    ratio = torch.where(denominator > 0, ordered / denominator, torch.zeros_like(ordered))
    scores = torch.empty_like(ratio)
    scores[order] = ratio
    return scores.reshape(weight.shape)


@dataclass(frozen=True)
class Selection:
    """One pruning decision: weights, which entries are still alive, and how many to keep."""

    criterion: str
    sparsity: float
    weights: list[Tensor]
    alive: list[Tensor]
    keep: int
    generator: torch.Generator | None


Criterion = Callable[[Selection], list[Tensor]]
CRITERIA: Registry[Criterion] = Registry("criterion")


def _masked_scores(score: Tensor, alive: Tensor) -> Tensor:
    """``score`` with already pruned entries at -inf, so every selection removes them first."""
    return score.masked_fill(~alive, -math.inf)


def _magnitudes(sel: Selection) -> list[Tensor]:
    """|w| per layer in float32 (exact for fp16/bf16/fp32 weights), pruned entries at -inf."""
    return [_masked_scores(w.abs().float(), a) for w, a in zip(sel.weights, sel.alive, strict=True)]


@CRITERIA.register("global")
def _global(sel: Selection) -> list[Tensor]:
    """One magnitude threshold across all layers."""
    return magnitude_topk_masks(_magnitudes(sel), sel.keep)


@CRITERIA.register("lamp")
def _lamp(sel: Selection) -> list[Tensor]:
    """LAMP scores per layer (pruned entries count as zero weights), then one global cut."""
    scores = [
        _masked_scores(lamp_scores(w.masked_fill(~a, 0)), a)
        for w, a in zip(sel.weights, sel.alive, strict=True)
    ]
    return magnitude_topk_masks(scores, sel.keep)


@CRITERIA.register("random")
def _random(sel: Selection) -> list[Tensor]:
    """Uniform random scores from ``generator`` (the global RNG if None), then one global cut."""
    gen = sel.generator
    scores = []
    for w, a in zip(sel.weights, sel.alive, strict=True):
        # Draw on the generator's device so any CPU/CUDA generator works; same draws per seed.
        device = gen.device if gen is not None else w.device
        noise = torch.rand(w.shape, generator=gen, device=device).to(w.device)
        scores.append(_masked_scores(noise, a))
    return magnitude_topk_masks(scores, sel.keep)


@CRITERIA.register("uniform")
def _uniform(sel: Selection) -> list[Tensor]:
    """Every layer keeps the same fraction keep / N_P (largest-remainder rounding)."""
    sizes = [w.numel() for w in sel.weights]
    return _layerwise_masks(sel, [float(n) for n in sizes], [0] * len(sizes))


@CRITERIA.register("uniform+")
def _uniform_plus(sel: Selection) -> list[Tensor]:
    """Uniform, but the first conv stays dense and the last linear is pruned at most 80%.

    The first convolution is the first weight with >= 3 dimensions, the last linear layer the
    last weight with 2; either rule is skipped when no such weight is in the set.
    """
    alive = [int(a.sum()) for a in sel.alive]
    lower = [0] * len(sel.weights)
    convs = [i for i, w in enumerate(sel.weights) if w.dim() >= 3]
    linears = [i for i, w in enumerate(sel.weights) if w.dim() == 2]
    if linears:
        last, n = linears[-1], sel.weights[linears[-1]].numel()
        # At most floor(0.8 n) pruned, in integers; entries pruned before stay pruned.
        lower[last] = min(n - (4 * n) // 5, alive[last])
    if convs:
        lower[convs[0]] = alive[convs[0]]
    sizes = [float(w.numel()) for w in sel.weights]
    return _layerwise_masks(sel, sizes, lower)


@CRITERIA.register("erk")
def _erk(sel: Selection) -> list[Tensor]:
    """Erdős–Rényi kernel: density proportional to sum(shape) / numel, dense layers capped at 1."""
    sums = [float(sum(w.shape)) if w.numel() else 0.0 for w in sel.weights]
    return _layerwise_masks(sel, sums, [0] * len(sel.weights))


# N:M semi-structured patterns ("nm" = 2:4, also "2:4", "1:4", "4:8"): benchmark.pruning.nm.
for _name, (_n, _m) in NM_PATTERNS.items():
    CRITERIA.add(_name, nm_criterion(_n, _m))


def _layerwise_masks(sel: Selection, weights: list[float], lower: list[int]) -> list[Tensor]:
    """Keep ``clip(c * weights_l, lower_l, alive_l)`` largest magnitudes per layer (exact total)."""
    upper = [int(a.sum()) for a in sel.alive]
    if sum(lower) > sel.keep:
        total = sum(w.numel() for w in sel.weights)
        limit = 1 - sum(lower) / total
        raise ConfigError(
            SPARSITY_FIELD,
            sel.sparsity,
            f"at most {limit:.6g} for criterion {sel.criterion!r} on these parameters",
        )
    counts = allocate_counts(weights, lower, upper, sel.keep)
    return [
        magnitude_topk_masks([score], k)[0]
        for score, k in zip(_magnitudes(sel), counts, strict=True)
    ]


def _check_sparsity(sparsity: float) -> None:
    """Raise a ConfigError unless ``sparsity`` is a real number in [0, 1)."""
    valid = isinstance(sparsity, Real) and not isinstance(sparsity, bool)
    if not (valid and 0 <= float(sparsity) < 1):
        raise ConfigError(SPARSITY_FIELD, sparsity, SPARSITY_ALLOWED)


def _alive_masks(weights: list[Tensor], current: Sequence[Tensor] | None) -> list[Tensor]:
    """``bool`` masks of the entries not yet pruned (all True without ``current``)."""
    if current is None:
        return [torch.ones_like(w, dtype=torch.bool) for w in weights]
    if len(current) != len(weights):
        raise ValueError(f"expected {len(weights)} current masks, got {len(current)}")
    alive = []
    for w, c in zip(weights, current, strict=True):
        if tuple(c.shape) != tuple(w.shape):
            raise ValueError(f"current mask shape {tuple(c.shape)} != weight {tuple(w.shape)}")
        alive.append((c.detach() != 0).to(w.device))
    return alive


def compute_masks(
    criterion: str,
    params: Sequence[tuple[str, nn.Parameter]],
    sparsity: float,
    *,
    current: Sequence[Tensor] | None = None,
    generator: torch.Generator | None = None,
    keep: int | None = None,
) -> list[Tensor]:
    """Return ``bool`` masks over ``params`` that prune exactly round(sparsity * N_P) entries
    (or keep exactly ``keep``, when a caller counts as another code did).

    ``criterion`` is one of :data:`CRITERIA`. Entries that are zero in ``current`` stay pruned;
    a sparsity below the one ``current`` already has is an error.
    """
    select = CRITERIA.get(criterion, CRITERION_FIELD)
    _check_sparsity(sparsity)
    weights = [p.detach() for _, p in params]
    alive = _alive_masks(weights, current)
    total = sum(w.numel() for w in weights)
    if keep is None:
        keep = total - round(float(sparsity) * total)
    elif not 0 <= keep <= total:
        raise ValueError(f"keep = {keep} is outside [0, {total}]")
    num_alive = sum(int(a.sum()) for a in alive)
    if keep > num_alive:
        raise ConfigError(
            SPARSITY_FIELD,
            sparsity,
            f"at least the current sparsity {1 - num_alive / total:.6g} (pruning is hard)",
        )
    return select(Selection(criterion, float(sparsity), weights, alive, keep, generator))
